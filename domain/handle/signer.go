package handle

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// Signer mints and verifies handles under one instance key, keeping the keyed HMAC state from
// one tag to the next instead of keying a new one each time (hmac.New hashes the key's two
// pads and allocates; it was a third of a valid redeem's Verify). Apart from that reuse it is
// Mint and Verify exactly.
//
// It holds the key's slice, not a copy, and checks it on every call, so a key zeroed in place
// (as the instance key is at shutdown) verifies nothing from then on, as with Verify; the
// reused HMAC states are never used again after that. A Signer is safe for concurrent use.
type Signer struct {
	key  []byte
	macs sync.Pool // of hash.Hash keyed under key, reset after each use
}

// NewSigner returns the Signer for key. It does not copy key.
func NewSigner(key []byte) *Signer {
	s := &Signer{key: key}
	s.macs.New = func() any { return hmac.New(sha256.New, s.key) }
	return s
}

// Mint is Mint under the Signer's key.
func (s *Signer) Mint(payload Payload, audience string) string {
	return s.MintBound(payload, audience, "")
}

// MintBound is Mint for a handle bound to the proof key whose RFC 7638 thumbprint is jkt
// (Thumbprint; docs/peer-plane.md, "Proof of possession"): the tag also covers "jkt=" + jkt,
// so the handle redeems only with a proof made by that key. The token's shape and payload are
// those of an unbound handle. A jkt of "" mints an unbound handle, exactly Mint.
func (s *Signer) MintBound(payload Payload, audience, jkt string) string {
	return s.mintRaw(encodePayload(payload), audience, jkt)
}

// mintRaw assembles a token around already encoded payload bytes.
func (s *Signer) mintRaw(payloadJSON []byte, audience, jkt string) string {
	seg := b64.EncodeToString(payloadJSON)
	return prefix + seg + "." + b64.EncodeToString(s.tag(seg, audience, jkt))
}

// Verify is Verify under the Signer's key.
func (s *Signer) Verify(token, audience, sessionID string, nowMs int64) (Payload, error) {
	t, err := ParseShape(token)
	if err != nil {
		return Payload{}, err
	}
	return t.verify(s, audience, sessionID, nowMs)
}

// tag is HMAC-SHA256(key, "murmur-peer-handle-v1" ‖ 0x1F ‖ payloadSeg ‖ 0x1F ‖ audience), where
// payloadSeg is the payload segment as its base64url text, not the decoded bytes; for a bound
// handle (jkt not "") the input goes on with 0x1F ‖ "jkt=" ‖ jkt.
func (s *Signer) tag(payloadSeg, audience, jkt string) []byte {
	m := s.macs.Get().(hash.Hash)
	defer func() { m.Reset(); s.macs.Put(m) }()
	buf := make([]byte, 0, len(macDomain)+len(payloadSeg)+len(audience)+len(jktLabel)+len(jkt)+3)
	buf = append(buf, macDomain...)
	buf = append(buf, macSeparator)
	buf = append(buf, payloadSeg...)
	buf = append(buf, macSeparator)
	buf = append(buf, audience...)
	if jkt != "" {
		buf = append(buf, macSeparator)
		buf = append(buf, jktLabel...)
		buf = append(buf, jkt...)
	}
	m.Write(buf)
	return m.Sum(buf[:0])
}
