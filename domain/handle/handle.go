// Package handle is the mh1 peer handle (docs/peer-plane.md, "The handle" and "Redeem"):
// minting, the ordered checks a redeem runs, the handle_id, and the redaction every trace and
// log line passes through.
//
// A token is
//
//	mh1.<base64url-nopad(payload JSON)>.<base64url-nopad(HMAC-SHA256 tag)>
//
// and must be byte-for-byte what the Rust reference runtime produces for the same inputs, so a
// handle minted by one runtime redeems at the other. The payload is in the clear and is not the
// secret; the tag is what makes it unforgeable, and because the tag also covers the audience
// (which the token does not carry) a token alone is not a credential.
//
// Everything here is a pure function: the key, the clock reading and the nonce arrive as
// arguments, so a test can mint a handle at a fixed instant with a fixed key and assert the
// exact token. Every error returned is a *refusal.Refusal with one of the codes
// malformed_handle, missing_audience, handle_not_valid or handle_expired; a refusal never
// carries the token, only (at most) its handle_id.
package handle

import (
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"unicode/utf8"
)

// prefix is the version tag and first segment of every token.
const prefix = "mh1."

// Version is the payload version, the only one minted or accepted.
const Version = 1

// macDomain is prefixed to every MAC input so that a tag over a handle can never be mistaken
// for a tag over anything else computed under the same key.
const macDomain = "murmur-peer-handle-v1"

// macSeparator separates the MAC input's fields. It cannot occur in base64url text, so moving
// the boundary between payload and audience always changes the input.
const macSeparator = 0x1F

// KeySize is the length of an instance key in bytes (docs/peer-plane.md, "The minting key"): a
// key of any other length verifies nothing. adapters/keys makes keys of this size.
const KeySize = 32

// b64 is the one base64 alphabet of both segments: URL-safe and unpadded, so a token needs no
// escaping in a request path. Strict makes decoding reject non-zero trailing bits, so each
// byte string has exactly one accepted text; it does not reject CR/LF, which is why segments
// are also checked against the alphabet before decoding (see ParseShape).
var b64 = base64.RawURLEncoding.Strict()

// Payload is what a handle says, in the clear: payload version, issuing session, path and
// expiry, plus a nonce that makes two handles for the same file and audience distinct.
//
// There is no generation field: a handle authorises a file, not a version of one.
type Payload struct {
	// V is the payload version; only 1 is minted or accepted.
	V int
	// Iss is the minting session's id: the capsule instance, not the capsule.
	Iss string
	// P is the path relative to exports.peer_files.root, canonical at mint time.
	P string
	// Exp is the absolute expiry in Unix milliseconds.
	Exp int64
	// N is the nonce: 16 random bytes as 32 lowercase hex characters.
	N string
}

// NewPayload returns the version-1 payload for a mint: the issuing session, the canonical path,
// the expiry in Unix milliseconds and the nonce, which it writes as lowercase hex.
func NewPayload(sessionID, path string, expMs int64, nonce [16]byte) Payload {
	return Payload{V: Version, Iss: sessionID, P: path, Exp: expMs, N: hex.EncodeToString(nonce[:])}
}

// Mint returns the token for payload, bound to audience under key.
//
// The payload is encoded exactly as serde_json encodes the reference's payload struct (see
// encodePayload), so the same inputs give the same token in both runtimes. Mint does not
// validate its inputs: the application passes a version-1 payload (NewPayload), a non-negative
// expiry, a path that is valid UTF-8 and the 32-byte instance key. A token minted otherwise is
// well-formed but never redeems.
func Mint(key []byte, payload Payload, audience string) string {
	return NewSigner(key).Mint(payload, audience)
}

// mintRaw assembles a token around already encoded payload bytes.
func mintRaw(key, payloadJSON []byte, audience string) string {
	return NewSigner(key).mintRaw(payloadJSON, audience, "")
}

// encodePayload writes the payload as compact JSON with the keys in the order v, iss, p, exp,
// n. It is assembled by hand rather than with encoding/json because the bytes must equal
// serde_json's, and encoding/json differs: it escapes <, > and & unless told not to and
// escapes U+2028 and U+2029 always. See appendJSONString for the string rules.
func encodePayload(p Payload) []byte {
	b := make([]byte, 0, 64+len(p.Iss)+len(p.P)+len(p.N))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(p.V), 10)
	b = append(b, `,"iss":`...)
	b = appendJSONString(b, p.Iss)
	b = append(b, `,"p":`...)
	b = appendJSONString(b, p.P)
	b = append(b, `,"exp":`...)
	b = strconv.AppendInt(b, p.Exp, 10)
	b = append(b, `,"n":`...)
	b = appendJSONString(b, p.N)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string the way serde_json writes one: `"` and `\` are
// backslash-escaped; U+0008, U+0009, U+000A, U+000C and U+000D use \b \t \n \f \r; every other
// control character below U+0020 is \u00XX with lowercase hex; everything else, DEL and all
// non-ASCII included, is written as raw UTF-8. A Rust string is always valid UTF-8; a Go string
// need not be, so each byte of an invalid sequence is written as U+FFFD, as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, "\uFFFD"...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\b':
			b = append(b, `\b`...)
		case '\t':
			b = append(b, `\t`...)
		case '\n':
			b = append(b, `\n`...)
		case '\f':
			b = append(b, `\f`...)
		case '\r':
			b = append(b, `\r`...)
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			} else {
				b = append(b, c)
			}
		}
		i++
	}
	return append(b, '"')
}
