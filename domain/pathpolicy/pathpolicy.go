// Package pathpolicy lowers a caller's path into a RelPath: the only form in which a path
// may reach a filesystem adapter.
//
// Lowering follows docs/http-api.md, "Lowering a path", exactly and never touches the
// filesystem. A path that could leave the export root is refused, never repaired: there is no
// cleaning, no collapsing of "//", no resolving of "..". A RelPath therefore always has at
// least one component, and no component is empty, ".", ".." or contains "/" or NUL.
package pathpolicy

import (
	"strings"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/refusal"
)

// MaxLen is the longest path, in bytes once percent-decoded, that could be served: Linux
// opens no path longer than PATH_MAX (4096 bytes, its terminating NUL included). A request
// path beyond it is refused target_too_long before it is lowered (docs/http-api.md,
// "Routing").
const MaxLen = 4096

// RelPath is a validated path relative to an export root. The zero value is not valid; the
// only ways to obtain one are Parse and Lower.
type RelPath struct {
	components []string
}

// Parse percent-decodes raw once (DecodeOnce) and lowers the result (Lower). It is the rule
// for a request path on the operator plane and for share-file's path argument.
func Parse(raw string) (RelPath, error) {
	return Lower(DecodeOnce(raw))
}

// Lower applies steps 2–4 of docs/http-api.md, "Lowering a path", to an already decoded path:
// it refuses an empty path, a NUL byte, invalid UTF-8 and a leading "/", drops one trailing
// "/", and refuses any empty, "." or ".." component. Every refusal is outside_root. A redeem
// lowers its handle's p this way, without a second decoding.
func Lower(decoded string) (RelPath, error) {
	if decoded == "" || strings.IndexByte(decoded, 0) >= 0 || !utf8.ValidString(decoded) ||
		strings.HasPrefix(decoded, "/") {
		return RelPath{}, refusal.New(refusal.OutsideRoot)
	}
	trimmed := strings.TrimSuffix(decoded, "/")
	components := strings.Split(trimmed, "/")
	for _, c := range components {
		if c == "" || c == "." || c == ".." {
			return RelPath{}, refusal.New(refusal.OutsideRoot)
		}
	}
	return RelPath{components: components}, nil
}

// DecodeOnce percent-decodes s in one left-to-right pass: "%XX" with two hex digits (either
// case) becomes that byte, and anything else — a lone "%", "%zz", "%4" — is kept literally.
// The result may contain any byte, including "/" (from "%2F") and invalid UTF-8.
func DecodeOnce(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, okHi := unhex(s[i+1])
			lo, okLo := unhex(s[i+2])
			if okHi && okLo {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Components returns a copy of the path's components, in order.
func (p RelPath) Components() []string {
	return append([]string(nil), p.components...)
}

// String returns the components joined with "/": the canonical spelling of the path.
func (p RelPath) String() string {
	return strings.Join(p.components, "/")
}
