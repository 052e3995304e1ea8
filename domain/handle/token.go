package handle

import (
	"bytes"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/refusal"
)

// Token is a handle whose shape has been checked (docs/peer-plane.md, "Redeem", step 4) and
// nothing else: its segments are decoded, but nothing it says has been read or trusted. The
// only way to obtain one is ParseShape; the zero Token never passes VerifyMAC.
//
// A redeem runs, in this order and stopping at the first failure: ParseShape, the audience
// header check (an adapter's job, or Verify's), VerifyMAC, Payload, CheckIssuer and
// CheckExpiry. Nothing in the payload is looked at before the MAC has verified, so a prober who
// cannot produce a valid MAC learns nothing from the payload's contents.
type Token struct {
	raw        string
	payloadSeg string
	payload    []byte
	tag        []byte
}

// ParseShape checks that token is "mh1." followed by exactly two non-empty segments of strict
// unpadded base64url joined by one ".", and decodes them. Anything else is malformed_handle:
// another prefix, fewer or more than three dot-separated parts, an empty segment, a character
// outside [A-Za-z0-9_-] (so "=", "+", "/", CR and LF are refused, though Go's decoder would
// silently skip CR and LF) and non-zero trailing bits (each byte string has one accepted text).
// The tag's length is deliberately not checked here: a tag of the wrong length is simply not
// valid (VerifyMAC).
func ParseShape(token string) (Token, error) {
	rest, ok := strings.CutPrefix(token, prefix)
	if !ok {
		return Token{}, refusal.New(refusal.MalformedHandle)
	}
	payloadSeg, tagSeg, ok := strings.Cut(rest, ".")
	if !ok || strings.IndexByte(tagSeg, '.') >= 0 {
		return Token{}, refusal.New(refusal.MalformedHandle)
	}
	payload, ok := decodeSegment(payloadSeg)
	if !ok {
		return Token{}, refusal.New(refusal.MalformedHandle)
	}
	tagBytes, ok := decodeSegment(tagSeg)
	if !ok {
		return Token{}, refusal.New(refusal.MalformedHandle)
	}
	return Token{raw: token, payloadSeg: payloadSeg, payload: payload, tag: tagBytes}, nil
}

// decodeSegment decodes one non-empty segment of strict unpadded base64url.
func decodeSegment(seg string) ([]byte, bool) {
	if seg == "" || segmentLen(seg, 0) != len(seg) {
		return nil, false
	}
	b, err := b64.DecodeString(seg)
	return b, err == nil
}

// segmentLen returns how many bytes of s, from offset i on, are in the base64url alphabet
// [A-Za-z0-9_-].
func segmentLen(s string, i int) int {
	n := 0
	for ; i+n < len(s); n++ {
		c := s[i+n]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			break
		}
	}
	return n
}

// VerifyMAC checks the token's tag against the tag key computes for this payload segment and
// audience (docs/peer-plane.md, "Redeem", step 6). The comparison is constant-time
// (hmac.Equal); a tag of the wrong length simply does not verify. audience is the asserted
// audience after trimming and ASCII-lowercasing.
//
// Every failure is the same handle_not_valid refusal, whatever the cause — tampered payload,
// tampered tag, another instance's key, wrong audience — so a prober is never told which
// field to change next. A key that is not 32 bytes, or is all zero (as the instance key is
// after it has been zeroed at shutdown), verifies nothing, so a handle forged under a known key
// can never redeem against a half-torn-down process.
func (t Token) VerifyMAC(key []byte, audience string) error {
	_, err := NewSigner(key).VerifyMAC(t, audience, "")
	return err
}

// VerifyMAC is step 6 of a redeem that may carry a proof (docs/peer-plane.md, "Proof of
// possession"): it accepts the tag computed with "jkt=" + jkt, the thumbprint of the key that
// made the request's valid proof, and the tag computed without any jkt (an unbound handle,
// redeemed by a fetcher that always proves). jkt is "" for a request without a proof, and then
// only the unbound tag is accepted: a bound handle without a proof, or with another key's
// proof, fails like every other MAC failure. bound reports that the tag was the bound one.
//
// When jkt is given both tags are computed and compared, so the time taken does not say which
// one, if either, matched.
func (s *Signer) VerifyMAC(t Token, audience, jkt string) (bound bool, err error) {
	if !usableKey(s.key) {
		return false, refusal.New(refusal.HandleNotValid)
	}
	unbound := hmac.Equal(s.tag(t.payloadSeg, audience, ""), t.tag)
	if jkt != "" {
		bound = hmac.Equal(s.tag(t.payloadSeg, audience, jkt), t.tag)
	}
	if !unbound && !bound {
		return false, refusal.New(refusal.HandleNotValid)
	}
	return bound, nil
}

// usableKey reports whether key has the instance key's length and is not all zero. The scan
// touches every byte whatever their values, so it leaks nothing about where a non-zero byte is.
func usableKey(key []byte) bool {
	if len(key) != KeySize {
		return false
	}
	var acc byte
	for _, b := range key {
		acc |= b
	}
	return acc != 0
}

// Payload parses the token's payload (docs/peer-plane.md, "Redeem", step 7). It is meant to run
// only after VerifyMAC, when the payload is known to be one this instance minted.
//
// The payload must be valid UTF-8 and exactly one JSON object holding v (the integer 1), iss,
// p and n (strings) and exp (a non-negative integer that fits in int64); anything else is
// malformed_handle. "Integer" means a JSON number written without fraction or exponent, so 1.0
// and 1e0 are refused, as serde_json refuses them for an integer field. Unknown keys are
// ignored; a known key given twice is refused, as serde's derived deserializer refuses a
// duplicate field. n's format is not checked: the nonce only has to make tokens distinct.
func (t Token) Payload() (Payload, error) {
	if p, ok := payloadAsMinted(t.payload); ok {
		return p, nil
	}
	return parsePayload(t.payload)
}

// parsePayload is Payload's general parser, for a payload in any form.
func parsePayload(payload []byte) (Payload, error) {
	malformed := refusal.New(refusal.MalformedHandle)
	if !utf8.Valid(payload) || !json.Valid(payload) {
		return Payload{}, malformed
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return Payload{}, malformed
	}
	const (
		hasV = 1 << iota
		hasIss
		hasP
		hasExp
		hasN
		hasAll = hasV | hasIss | hasP | hasExp | hasN
	)
	var p Payload
	seen := 0
	for dec.More() {
		keyTok, err := dec.Token()
		if err != nil {
			return Payload{}, malformed
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Payload{}, malformed
		}
		var field int
		ok := false
		switch keyTok {
		case "v":
			var v int64
			field = hasV
			v, ok = jsonInt(raw)
			ok = ok && v == Version
			p.V = int(v)
		case "iss":
			field = hasIss
			p.Iss, ok = jsonString(raw)
		case "p":
			field = hasP
			p.P, ok = jsonString(raw)
		case "exp":
			field = hasExp
			p.Exp, ok = jsonInt(raw)
		case "n":
			field = hasN
			p.N, ok = jsonString(raw)
		default:
			continue
		}
		if !ok || seen&field != 0 {
			return Payload{}, malformed
		}
		seen |= field
	}
	// json.Valid has already established that the object is closed and nothing follows it.
	if seen != hasAll {
		return Payload{}, malformed
	}
	return p, nil
}

// payloadAsMinted reads a payload in exactly the form Mint writes (encodePayload) with strings
// that need no escape — every payload this instance mints for an ordinary path, and so, behind
// a valid MAC, every payload a redeem sees — without the general JSON parser, which costs a
// redeem more than everything else it adds to a read (docs/benchmarks.md). It reports false
// for any other form, which Payload then parses in full. It is exact because it accepts only
// bytes that encodePayload gives back unchanged for what it read: the general parser reads
// any such payload to the same fields.
func payloadAsMinted(b []byte) (Payload, bool) {
	p := Payload{V: Version}
	rest, ok := bytes.CutPrefix(b, []byte(`{"v":1,"iss":`))
	if ok {
		p.Iss, rest, ok = cutPlainString(rest, `,"p":`)
	}
	if ok {
		p.P, rest, ok = cutPlainString(rest, `,"exp":`)
	}
	if ok {
		var digits []byte
		if digits, rest, ok = bytes.Cut(rest, []byte(`,"n":`)); ok {
			p.Exp, ok = jsonInt(digits)
		}
	}
	if ok {
		p.N, rest, ok = cutPlainString(rest, `}`)
	}
	if !ok || len(rest) != 0 || !bytes.Equal(encodePayload(p), b) {
		return Payload{}, false
	}
	return p, true
}

// cutPlainString reads a JSON string without a backslash at the start of b, followed by sep,
// and returns its text and what follows sep.
func cutPlainString(b []byte, sep string) (string, []byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	end := bytes.IndexByte(b[1:], '"') + 1
	if end == 0 || bytes.IndexByte(b[1:end], '\\') >= 0 {
		return "", nil, false
	}
	rest, ok := bytes.CutPrefix(b[end+1:], []byte(sep))
	return string(b[1:end]), rest, ok
}

// jsonInt reads a JSON number written as plain decimal digits (no sign, fraction or exponent)
// that fits in int64.
func jsonInt(raw []byte) (int64, bool) {
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// jsonString reads a JSON string value.
func jsonString(raw []byte) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// CheckIssuer is step 8 of docs/peer-plane.md, "Redeem": an iss other than sessionID (this
// process's session id) is handle_not_valid, byte-identical to a MAC failure. It is reached
// only behind a valid MAC, since only this instance's key produces a MAC this instance accepts.
func (p Payload) CheckIssuer(sessionID string) error {
	if p.Iss != sessionID {
		return refusal.New(refusal.HandleNotValid)
	}
	return nil
}

// CheckExpiry is step 9 of docs/peer-plane.md, "Redeem": an expiry at or before nowMs (Unix
// milliseconds) is handle_expired, so a handle is valid strictly before exp.
func (p Payload) CheckExpiry(nowMs int64) error {
	if p.Exp <= nowMs {
		return refusal.New(refusal.HandleExpired)
	}
	return nil
}

// Verify runs the redeem's handle checks in order (steps 4–9 of docs/peer-plane.md, "Redeem")
// and returns the verified payload: ParseShape (malformed_handle), an empty audience
// (missing_audience), VerifyMAC (handle_not_valid), Payload (malformed_handle), CheckIssuer
// (handle_not_valid) and CheckExpiry (handle_expired). audience is the x-murmur-audience value
// already trimmed and ASCII-lowercased; nowMs is the clock reading in Unix milliseconds.
func Verify(key []byte, token, audience, sessionID string, nowMs int64) (Payload, error) {
	return NewSigner(key).Verify(token, audience, sessionID, nowMs)
}

// verify runs Verify's checks from the audience on, under s.
func (t Token) verify(s *Signer, audience, sessionID string, nowMs int64) (Payload, error) {
	if err := RequireAudience(audience); err != nil {
		return Payload{}, err
	}
	if _, err := s.VerifyMAC(t, audience, ""); err != nil {
		return Payload{}, err
	}
	return t.Check(sessionID, nowMs)
}

// RequireAudience is step 5 of docs/peer-plane.md, "Redeem": an asserted audience that is
// empty once trimmed and lowercased (or absent) is missing_audience.
func RequireAudience(audience string) error {
	if audience == "" {
		return refusal.New(refusal.MissingAudience)
	}
	return nil
}

// Check runs the checks behind the MAC, steps 7–9 of docs/peer-plane.md, "Redeem", and
// returns the verified payload: Payload (malformed_handle), CheckIssuer (handle_not_valid) and
// CheckExpiry (handle_expired). Run it only once the MAC has verified.
func (t Token) Check(sessionID string, nowMs int64) (Payload, error) {
	p, err := t.Payload()
	if err != nil {
		return Payload{}, err
	}
	if err := p.CheckIssuer(sessionID); err != nil {
		return Payload{}, err
	}
	if err := p.CheckExpiry(nowMs); err != nil {
		return Payload{}, err
	}
	return p, nil
}

// PeekPath returns the p of a token this process did not mint and cannot verify, for one use
// only: the file name hint of fetch-peer-file (docs/peer-plane.md, "fetch-peer-file", step 7).
// The token must pass ParseShape and its payload must be valid UTF-8 and a JSON object with a
// string p; no other field is required. The value is caller-controlled and must decide nothing;
// pass it through SanitisedBasename. If p appears twice the last one counts, as in serde_json's
// map.
func PeekPath(token string) (string, bool) {
	t, err := ParseShape(token)
	if err != nil || !utf8.Valid(t.payload) {
		return "", false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(t.payload, &fields); err != nil {
		return "", false
	}
	return jsonString(fields["p"])
}

// String returns the token's placeholder, <handle:handle_id>, never the token itself.
func (t Token) String() string { return Placeholder(t.raw) }

// Format prints the placeholder for every verb (%v, %+v, %#v, %s, %q, %x, %d …), so a Token
// that reaches a log line by accident cannot leak the credential it holds.
func (t Token) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(t.String())) }
