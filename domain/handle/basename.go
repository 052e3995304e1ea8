package handle

import "strings"

// maxBasename is how many characters of the sanitised basename are kept.
const maxBasename = 120

// SanitisedBasename turns a fetched handle's unverified path hint into the file name part of
// peer-in/<handle_id>-<basename> (docs/peer-plane.md, "fetch-peer-file", step 7): the text
// after the last "/", with each Unicode code point outside [A-Za-z0-9._-] replaced by one "_"
// (each byte of an invalid UTF-8 sequence counts as one code point), cut to its first 120
// characters. A result that is empty, "." or "..", and a missing hint (hasHint false), give
// "file".
//
// The result is therefore always a single, non-special path component of at most 120 ASCII
// bytes, whatever the peer put in p: it can neither climb out of peer-in nor name a directory.
func SanitisedBasename(p string, hasHint bool) string {
	if !hasHint {
		return "file"
	}
	base := p[strings.LastIndexByte(p, '/')+1:]
	var b strings.Builder
	for _, r := range base {
		if b.Len() == maxBasename {
			break
		}
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	switch name := b.String(); name {
	case "", ".", "..":
		return "file"
	default:
		return name
	}
}
