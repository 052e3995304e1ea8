package destination

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// FuzzParse checks every allow-list entry Parse accepts (docs/manifest.md, "Destinations"):
// it keeps its text, is ASCII with a lowercase host and a port in range, parses the same
// whatever the case of its ASCII letters, and admits the peer spelled from it — under any
// scheme when it is not a URL — as does the bare host entry for the same host. What
// contains whitespace or a wildcard never parses.
func FuzzParse(f *testing.F) {
	f.Add("localhost:41234")
	f.Add("HTTPS://[FE80::A]:443/")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if !parsed(t, "Parse", s, err) {
			return
		}
		if strings.IndexFunc(s, isNotASCII) >= 0 {
			t.Fatalf("Parse(%q) accepted a non-ASCII character", s)
		}
		if d.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, d.String())
		}
		checkAuthority(t, "Parse("+strconv.Quote(s)+")", d.scheme, d.host, d.port, d.form != anyPort, d.form == schemeAndPort)
		for _, v := range []string{upper(s), lower(s)} {
			dv, err := Parse(v)
			dv.text = d.text
			if err != nil || dv != d {
				t.Fatalf("Parse(%q) = %+v, %v; want the value of Parse(%q), %+v", v, dv, err, s, d)
			}
		}
		spelled := []string{s}
		if d.form != schemeAndPort {
			spelled = append(spelled, "https://"+s)
		}
		bare := mustParse(t, hostText(d.host))
		for _, peer := range spelled {
			p, err := ParsePeer(peer)
			if err != nil {
				t.Fatalf("ParsePeer(%q), spelled from the entry %q: %v", peer, s, err)
			}
			if !Matches(d, p) || !AnyMatches([]Destination{d}, p) {
				t.Fatalf("the entry %q does not admit the peer %q (%+v)", s, peer, p)
			}
			if !Matches(bare, p) {
				t.Fatalf("the entry %q admits %q but the bare host %q does not", s, peer, bare)
			}
		}
	})
}

// FuzzParsePeer checks every peer string ParsePeer accepts: its scheme, host and port are in
// form, its BaseURL parses back to the same peer and is itself a URL entry that admits it, the
// entries host and host:port spelled from it admit it, and the case of its ASCII letters does
// not matter.
func FuzzParsePeer(f *testing.F) {
	f.Add("localhost:41234/ignored?q#f")
	f.Add("https://[::1]")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePeer(s)
		if !parsed(t, "ParsePeer", s, err) {
			return
		}
		checkAuthority(t, "ParsePeer("+strconv.Quote(s)+")", p.Scheme, p.Host, p.Port, true, true)
		if again, err := ParsePeer(p.BaseURL()); err != nil || again != p {
			t.Fatalf("ParsePeer(%q) = %+v; its BaseURL %q parses to %+v, %v", s, p, p.BaseURL(), again, err)
		}
		for _, entry := range []string{p.BaseURL(), hostText(p.Host), hostText(p.Host) + ":" + strconv.Itoa(p.Port)} {
			if !Matches(mustParse(t, entry), p) {
				t.Fatalf("the entry %q, spelled from the peer %q, does not admit it", entry, s)
			}
		}
		for _, v := range []string{upper(s), lower(s)} {
			if pv, err := ParsePeer(v); err != nil || pv != p {
				t.Fatalf("ParsePeer(%q) = %+v, %v; want %+v", v, pv, err, p)
			}
		}
	})
}

// FuzzMatches checks Matches on any entry and any peer that parse: it does not depend on how
// either was spelled (case, or the peer's path), AnyMatches agrees with it, a bare host entry
// admits whatever any entry for its host admits, and each form pins exactly what it says: a
// URL entry its scheme and port, a host:port entry its port only, a bare host neither.
func FuzzMatches(f *testing.F) {
	f.Add("https://localhost:41234", "localhost:41234")
	f.Add("localhost:443", "HTTPS://LocalHost/x")
	f.Fuzz(func(t *testing.T, entry, peer string) {
		d, err := Parse(entry)
		if err != nil {
			return
		}
		p, err := ParsePeer(peer)
		if err != nil {
			return
		}
		m := Matches(d, p)
		if AnyMatches([]Destination{d}, p) != m || Matches(Destination{}, p) {
			t.Fatalf("AnyMatches or the zero entry disagree with Matches(%q, %q) = %v", entry, peer, m)
		}
		if Matches(mustParse(t, upper(entry)), p) != m || Matches(d, mustParsePeer(t, upper(peer))) != m ||
			Matches(d, mustParsePeer(t, p.BaseURL())) != m {
			t.Fatalf("Matches(%q, %q) = %v changes with the spelling", entry, peer, m)
		}
		if !m {
			return
		}
		if p.Host != d.host || !Matches(mustParse(t, hostText(d.host)), p) {
			t.Fatalf("%q admits %q, but its bare host does not", entry, peer)
		}
		otherPort, otherScheme := p, p
		otherPort.Port = p.Port%65535 + 1
		otherScheme.Scheme = map[string]string{"http": "https", "https": "http"}[p.Scheme]
		if got := Matches(d, otherPort); got != (d.form == anyPort) {
			t.Fatalf("%q admits %q; on port %d too: %v", entry, peer, otherPort.Port, got)
		}
		if got := Matches(d, otherScheme); got != (d.form != schemeAndPort) {
			t.Fatalf("%q admits %q; under %s too: %v", entry, peer, otherScheme.Scheme, got)
		}
	})
}

// parsed reports whether fn accepted s. A refusal must give a reason, and no text with
// whitespace or a wildcard may be accepted.
func parsed(t *testing.T, fn, s string, err error) bool {
	t.Helper()
	if err != nil {
		if err.Error() == "" {
			t.Fatalf("%s(%q) refused with an empty reason", fn, s)
		}
		return false
	}
	if strings.IndexFunc(s, unicode.IsSpace) >= 0 || strings.Contains(s, "*") {
		t.Fatalf("%s(%q) accepted whitespace or a wildcard", fn, s)
	}
	return true
}

// checkAuthority fails unless host is a non-empty lowercase ASCII host without brackets and,
// when pinned, port is in 1..65535 and scheme is http or https.
func checkAuthority(t *testing.T, what, scheme, host string, port int, portPinned, schemePinned bool) {
	t.Helper()
	if host == "" || host != lower(host) || strings.ContainsAny(host, "[]") || strings.IndexFunc(host, isNotASCII) >= 0 {
		t.Fatalf("%s has the host %q", what, host)
	}
	if portPinned && (port < 1 || port > 65535) {
		t.Fatalf("%s has the port %d", what, port)
	}
	if schemePinned && scheme != "http" && scheme != "https" {
		t.Fatalf("%s has the scheme %q", what, scheme)
	}
}

func isNotASCII(r rune) bool { return r > unicode.MaxASCII }

func mustParse(t *testing.T, s string) Destination {
	t.Helper()
	d, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return d
}

func mustParsePeer(t *testing.T, s string) Peer {
	t.Helper()
	p, err := ParsePeer(s)
	if err != nil {
		t.Fatalf("ParsePeer(%q): %v", s, err)
	}
	return p
}

// hostText spells a parsed host back: IPv6 in brackets.
func hostText(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// upper and lower change the case of ASCII letters only, byte by byte, so every other byte,
// invalid UTF-8 included, stays as it is.
func upper(s string) string { return mapASCII(s, 'a', 'A') }
func lower(s string) string { return mapASCII(s, 'A', 'a') }

func mapASCII(s string, from, to byte) string {
	b := []byte(s)
	for i, c := range b {
		if from <= c && c <= from+'z'-'a' {
			b[i] = c - from + to
		}
	}
	return string(b)
}
