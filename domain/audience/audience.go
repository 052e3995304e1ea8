// Package audience derives the audience string a peer handle is bound to (docs/peer-plane.md,
// "The audience"): lowercase(<name> + "@" + hostport(<url>)).
//
// Both sides compute it without exchanging it: the minter from the fetching peer's agent card,
// the fetcher from its own name and advertised URL, which are the same two fields its card
// publishes. The handle's MAC covers this string, so the two computations must agree byte for
// byte — across runtimes too, since a Rust capsule may mint for us or redeem from us. That is
// why the rules below follow the Rust reference literally rather than parsing the URL.
package audience

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/refusal"
)

// FromCard returns the audience for an agent card's name and url; our own audience (what
// fetch-peer-file asserts) is FromCard of our manifest name and advertised URL, so it equals
// what a minter derives from our card.
//
// The name is trimmed of surrounding Unicode white space. hostport(url) removes one leading
// "http://" or "https://" — matched case-sensitively, as docs/peer-plane.md says — then
// everything from the first "/", and keeps the rest verbatim: no default port is added, IPv6
// brackets and an explicit port stay, and the url is not trimmed. The whole string is then
// lowercased with Rust's str::to_lowercase rules (see lowercase).
//
// A blank name, a blank url, or a url whose host:port part is empty (such as "http://" or
// "https:///x") is refused as peer_unreachable: for a peer's card that is the documented
// answer; for our own identity the caller treats it as a configuration error.
func FromCard(name, url string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", refusal.WithMessage(refusal.PeerUnreachable, "The agent card has no name.")
	}
	if strings.TrimSpace(url) == "" {
		return "", refusal.WithMessage(refusal.PeerUnreachable, "The agent card has no url.")
	}
	hp := hostPort(url)
	if hp == "" {
		return "", refusal.WithMessage(refusal.PeerUnreachable, "The agent card's url names no host:port.")
	}
	return lowercase(name + "@" + hp), nil
}

// hostPort removes one leading "http://" or "https://" from url, then everything from the first
// "/".
func hostPort(url string) string {
	rest, ok := strings.CutPrefix(url, "http://")
	if !ok {
		rest, _ = strings.CutPrefix(url, "https://")
	}
	hp, _, _ := strings.Cut(rest, "/")
	return hp
}

// lowercase maps s the way Rust's str::to_lowercase does, which the reference applies to the
// audience. It differs from strings.ToLower in the two places where Unicode's full lowercase
// mapping differs from the simple one: U+0130 (İ) becomes "i\u0307", and U+03A3 (Σ) becomes
// final ς when it ends a word (Unicode's Final_Sigma condition) and σ otherwise. Every other
// code point uses its simple lowercase mapping, as in both languages. s is valid UTF-8 (it
// comes from decoded JSON or the manifest); an invalid byte would be written as U+FFFD.
func lowercase(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	for i, r := range s {
		switch r {
		case 'İ':
			b.WriteString("i\u0307")
		case 'Σ':
			if finalSigma(s, i) {
				b.WriteRune('ς')
			} else {
				b.WriteRune('σ')
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma reports whether the Σ at byte offset i of s is word-final: skipping
// case-ignorable code points, a cased letter comes before it and none comes after it.
func finalSigma(s string, i int) bool {
	before := s[:i]
	for before != "" {
		r, size := utf8.DecodeLastRuneInString(before)
		if !caseIgnorable(r) {
			if !cased(r) {
				return false
			}
			break
		}
		before = before[:len(before)-size]
	}
	if before == "" {
		return false
	}
	for _, r := range s[i+len("Σ"):] {
		if !caseIgnorable(r) {
			return !cased(r)
		}
	}
	return true
}

// cased is Unicode's Cased property: Lu, Ll, Lt, Other_Uppercase and Other_Lowercase.
func cased(r rune) bool {
	return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Uppercase, unicode.Other_Lowercase)
}

// caseIgnorable is Unicode's Case_Ignorable property: Mn, Me, Cf, Lm and Sk, plus the code
// points whose Word_Break property is MidLetter, MidNumLet or Single_Quote (listed here, since
// package unicode has no Word_Break table).
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', '\u00B7', '\u0387', '\u055F', '\u05F4', '\u2018', '\u2019', '\u2024',
		'\u2027', '\uFE13', '\uFE52', '\uFE55', '\uFF07', '\uFF0E', '\uFF1A':
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// Asserted normalises an x-murmur-audience header value as a redeem reads it (step 5 of
// docs/peer-plane.md, "Redeem"): surrounding whitespace trimmed and ASCII letters lowercased.
// Other characters are kept as sent, so an audience minted by FromCard (already lowercase)
// compares equal byte for byte.
func Asserted(header string) string {
	b := []byte(strings.TrimSpace(header))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}
