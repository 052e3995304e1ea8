package handle

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// ID returns the token's handle_id: the first 16 lowercase hex characters of sha256 of the
// token string exactly as given (as it appears in the request path, for a redeem). It is what
// traces, headers and messages carry in place of the token, and it correlates a mint with its
// redeems and fetches. It is defined for any string, so a malformed token has one too.
func ID(token string) string {
	var id [idLen]byte
	return string(appendID(id[:0], token))
}

// Placeholder returns "<handle:ID>", the text written wherever the token would otherwise
// appear.
func Placeholder(token string) string {
	var text [len(placeholderHead) + idLen + len(placeholderTail)]byte
	b := append(text[:0], placeholderHead...)
	b = appendID(b, token)
	return string(append(b, placeholderTail...))
}

const (
	placeholderHead = "<handle:"
	placeholderTail = ">"
	idLen           = 16 // hex characters
)

// appendID appends the token's handle_id to b. A token of up to 512 bytes (every token a
// mint makes) is hashed from a copy on the stack rather than one on the heap.
func appendID(b []byte, token string) []byte {
	var sum [sha256.Size]byte
	var stack [512]byte
	if len(token) <= len(stack) {
		sum = sha256.Sum256(append(stack[:0], token...))
	} else {
		sum = sha256.Sum256([]byte(token))
	}
	return hex.AppendEncode(b, sum[:idLen/2])
}

// Redact replaces every token-shaped run in text with its Placeholder (docs/trace.md,
// "Redaction"). A token-shaped run is "mh1." followed by the longest run of [A-Za-z0-9_.-]
// after it, less the full stops it ends with; it must not be empty. Dots inside are part of
// the run, so text that wraps a token in another mh1.-prefixed word (mh1.x.<token>) is
// replaced whole, never leaving the token's segments behind; the match is by pattern alone, so
// it also replaces a file name that merely looks like a token, and it does not swallow a full
// stop that ends a sentence. Matches are found left to right and never overlap. All other
// bytes, invalid UTF-8 included, are kept as they are.
//
// Every trace and log line passes through Redact, so the common case is cheap: text without
// "mh1." is returned as is after a single substring search, with no allocation.
func Redact(text string) string {
	pos := strings.Index(text, prefix)
	if pos < 0 {
		return text
	}
	var b strings.Builder
	copied := 0 // text[:copied] has been written to b, or replaced
	for pos >= 0 {
		if end := tokenEnd(text, pos); end > 0 {
			if b.Len() == 0 {
				b.Grow(len(text))
			}
			b.WriteString(text[copied:pos])
			b.WriteString(Placeholder(text[pos:end]))
			copied = end
			pos = end
		} else {
			pos++
		}
		next := strings.Index(text[pos:], prefix)
		if next < 0 {
			break
		}
		pos += next
	}
	if copied == 0 {
		return text
	}
	b.WriteString(text[copied:])
	return b.String()
}

// tokenEnd returns the end offset of the token-shaped run that starts with "mh1." at start, or
// 0 if the text there is not one.
func tokenEnd(text string, start int) int {
	first := start + len(prefix)
	end := first
	for end < len(text) {
		if n := segmentLen(text, end); n > 0 {
			end += n
		} else if text[end] == '.' {
			end++
		} else {
			break
		}
	}
	for end > first && text[end-1] == '.' {
		end--
	}
	if end == first {
		return 0
	}
	return end
}
