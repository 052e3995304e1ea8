package trace

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/handle"
)

// MaxFieldBytes is the most bytes one string field of an event takes once written as JSON:
// the text between its quotes, escapes included (docs/trace.md, "Long fields"). It bounds what
// a request can add to the trace, whatever it sends: no event has more than two fields a
// request controls, so no line exceeds about 1 KB.
const MaxFieldBytes = 256

// The marker that ends a cut value: markerHead, the value's length in bytes, markerTail.
const (
	markerHead = "…[truncated from "
	markerTail = " bytes]"
)

// Text returns s as an event field holds it: every token-shaped run replaced by its
// placeholder (handle.Redact), so that no sink ever receives a token and a cut never splits
// one, and then capped (Cap).
func Text(s string) string {
	return Cap(handle.Redact(s))
}

// Cap returns s unchanged when its JSON text fits in MaxFieldBytes and it does not already end
// with something shaped like the marker. Otherwise it returns the longest prefix of s, cut
// before a whole character (never inside a UTF-8 sequence), whose JSON text fits together with
// the marker "…[truncated from N bytes]", followed by that marker, where N is len(s). So the
// last marker in a value is always Cap's, and it states how long the value was.
//
// A character's JSON text is counted as the longest any of the service's JSON writers gives
// it: `"` `\` and \n \r \t take 2 bytes; every other control character, U+2028, U+2029 and a
// byte that is not valid UTF-8 take 6; any other character its UTF-8 length.
func Cap(s string) string {
	if jsonFits(s, MaxFieldBytes) >= len(s) && !endsWithMarker(s) {
		return s
	}
	marker := markerHead + strconv.Itoa(len(s)) + markerTail
	return s[:jsonFits(s, MaxFieldBytes-len(marker))] + marker
}

// jsonFits returns the length of the longest prefix of s, cut before a whole character, whose
// JSON text takes at most limit bytes: len(s) when all of s fits.
func jsonFits(s string, limit int) int {
	if len(s)*maxJSONLen <= limit {
		return len(s) // no byte takes more than maxJSONLen
	}
	total := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf { // ASCII, the common case, without decoding
			if total += jsonLen(rune(c), 1); total > limit {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if total += jsonLen(r, size); total > limit {
			return i
		}
		i += size
	}
	return len(s)
}

// maxJSONLen is the most JSON bytes any one byte of a string can take: 6, for a control
// character or an invalid byte (a three-byte U+2028 takes 6 too, 2 per byte).
const maxJSONLen = 6

// jsonLen is the most bytes a JSON writer gives the character r, read as size bytes.
func jsonLen(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return 6 // \ufffd
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029':
		return 6 // \u00XX, \u2028, \u2029
	}
	return size
}

// endsWithMarker reports whether s ends with markerHead, decimal digits and markerTail.
func endsWithMarker(s string) bool {
	rest, ok := strings.CutSuffix(s, markerTail)
	if !ok {
		return false
	}
	i := strings.LastIndex(rest, markerHead)
	if i < 0 {
		return false
	}
	digits := rest[i+len(markerHead):]
	return digits != "" && strings.Trim(digits, "0123456789") == ""
}

// fields returns fs with every string value, and every element of a []string value, made
// into field text (Text). Every event's Fields returns through it, so every sink — the trace
// file and any other — receives redacted, bounded strings.
func fields(fs []Field) []Field {
	for i, f := range fs {
		switch v := f.Value.(type) {
		case string:
			if text := Text(v); text != v { // boxing a string again would allocate
				fs[i].Value = text
			}
		case []string:
			texts := make([]string, len(v))
			for j, s := range v {
				texts[j] = Text(s)
			}
			fs[i].Value = texts
		}
	}
	return fs
}
