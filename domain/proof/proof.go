// Package proof is the peer plane's proof of possession (docs/peer-plane.md, "Proof of
// possession"): the rules an RFC 9449 DPoP proof must meet when a fetcher redeems a handle,
// the public key a capsule advertises on its agent card, and --peer-proof's modes.
//
// It holds the rules only, as pure functions over bytes and values: the JOSE layer — splitting
// a compact JWS, checking its signature — is an adapter's (adapters/dpop), which runs
// ParseHeader before its library sees the token and ParseClaims on what the signature
// covers; the redeem (application.Redeem) checks the claims against its request with
// Claims.Check. Every error is an invalid_proof refusal whose message names what was wrong
// with the proof, never anything of the handle.
package proof

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/refusal"
)

// Mode is --peer-proof: whether this capsule proves possession and binds handles.
type Mode string

// The modes of --peer-proof (docs/operator-guide.md, "Proof of possession").
const (
	// Auto advertises a proof key when capabilities.peer_fetch is declared, proves with it,
	// binds handles for peers that advertise one, and checks the proofs redeems carry.
	Auto Mode = "auto"
	// Required is Auto, and share-file refuses a peer without a key (peer_key_missing).
	Required Mode = "required"
	// Off is none of it: the reference's behaviour byte for byte. No key, no binding, and a
	// redeem's DPoP header is ignored.
	Off Mode = "off"
)

// State is the ready line's and the status's "peer_proof" (docs/peer-plane.md, "Proof of
// possession") under mode, peerPlane saying whether a peer-plane grant (exports.peer_files or
// capabilities.peer_fetch) is declared: "required" under Required; "bound" under Auto with a
// grant, so that this capsule binds handles for keyed peers, or advertises a key and proves
// with it, or both; "none" otherwise.
func State(mode Mode, peerPlane bool) string {
	switch {
	case mode == Required:
		return "required"
	case mode == Auto && peerPlane:
		return "bound"
	default:
		return "none"
	}
}

// ParseMode reads --peer-proof.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Auto, Required, Off:
		return m, nil
	}
	return "", errors.New("must be one of auto, required, off")
}

// The header values a proof must carry (RFC 9449, section 4.2).
const (
	// Type is the only typ accepted.
	Type = "dpop+jwt"
	// AlgEdDSA and AlgEd25519 are the only algs accepted: EdDSA (RFC 8037) and its fully
	// specified name (RFC 9864), over an Ed25519 key. Never none, never an HMAC.
	AlgEdDSA   = "EdDSA"
	AlgEd25519 = "Ed25519"
)

// KeySize is the length of an Ed25519 public key.
const KeySize = 32

// b64 is base64url without padding, strict: each byte string has one accepted text.
var b64 = base64.RawURLEncoding.Strict()

// invalid is the invalid_proof refusal with message.
func invalid(message string) error { return refusal.WithMessage(refusal.InvalidProof, message) }

// The refusals of the header rules.
var (
	errHeader = invalid("The DPoP proof's protected header is not one JSON object without duplicate members.")
	errType   = invalid("The DPoP proof's typ must be dpop+jwt.")
	errAlg    = invalid("The DPoP proof's alg must be EdDSA or Ed25519; no other algorithm is accepted.")
	errJWK    = invalid("The DPoP proof's jwk must be an Ed25519 public key: kty OKP, crv Ed25519, a 32-byte x, and no private member.")
	errCrit   = invalid("The DPoP proof's header may not carry crit: no JWS extension is supported.")
)

// Header is what a proof's protected header says, once its rules are met: the algorithm and
// the public key the signature is to be checked with.
type Header struct {
	Alg string
	// Key is the Ed25519 public key of the header's jwk, KeySize bytes.
	Key []byte
}

// ParseHeader applies the header rules to a proof's protected header, decoded from its
// base64url: one JSON object without duplicate members; typ exactly dpop+jwt; alg exactly EdDSA
// or Ed25519; jwk an Ed25519 public key (ParseJWK); no crit, since no extension is understood.
// Other members are ignored. It runs before any JOSE library reads the proof, so an
// algorithm or key the rules refuse never reaches one.
func ParseHeader(raw []byte) (Header, error) {
	members, ok := object(raw)
	if !ok {
		return Header{}, errHeader
	}
	if typ, ok := stringMember(members, "typ"); !ok || typ != Type {
		return Header{}, errType
	}
	alg, ok := stringMember(members, "alg")
	if !ok || (alg != AlgEdDSA && alg != AlgEd25519) {
		return Header{}, errAlg
	}
	key, ok := ParseJWK(members["jwk"])
	if !ok {
		return Header{}, errJWK
	}
	if _, present := members["crit"]; present {
		return Header{}, errCrit
	}
	return Header{Alg: alg, Key: key}, nil
}

// privateMembers are the JWK members that hold private key material (RFC 7518, section 6, and
// RFC 8037, section 2): a key carrying any of them is not a public key.
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// ParseJWK reads an Ed25519 public key from its JWK (RFC 8037): one JSON object without
// duplicate members, kty "OKP", crv "Ed25519", x the strict unpadded base64url of 32 bytes, and
// no private member. Other public members (kid, alg, use) are ignored. It returns the key's 32
// bytes, or false for anything else. The same rule reads the key on a peer's agent card and
// the key in a proof's header.
func ParseJWK(raw []byte) ([]byte, bool) {
	members, ok := object(raw)
	if !ok {
		return nil, false
	}
	if kty, ok := stringMember(members, "kty"); !ok || kty != "OKP" {
		return nil, false
	}
	if crv, ok := stringMember(members, "crv"); !ok || crv != "Ed25519" {
		return nil, false
	}
	for _, name := range privateMembers {
		if _, present := members[name]; present {
			return nil, false
		}
	}
	x, ok := stringMember(members, "x")
	if !ok {
		return nil, false
	}
	key, err := b64.DecodeString(x)
	if err != nil || len(key) != KeySize {
		return nil, false
	}
	return key, true
}

// PublicJWK is the JWK of the Ed25519 public key key, with exactly the members kty, crv and x:
// how a capsule advertises its proof key on its agent card.
type PublicJWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
}

// JWKOf returns the public JWK of an Ed25519 public key.
func JWKOf(key []byte) PublicJWK {
	return PublicJWK{Kty: "OKP", Crv: "Ed25519", X: b64.EncodeToString(key)}
}

// object reads raw as exactly one JSON object and returns its members, refusing invalid JSON
// or UTF-8, anything but an object, and a member name given twice (two parsers that kept a
// different one of two values could otherwise disagree about what a proof says).
func object(raw []byte) (map[string]json.RawMessage, bool) {
	if len(raw) == 0 || !utf8.Valid(raw) {
		return nil, false
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return nil, false
	}
	// json.Unmarshal keeps the last of two equal names; a member count above the map's size
	// means one was given twice. (Names that differ only once unescaped, such as "a" and
	// "\u0061", count as the same name in the map too.)
	return members, topLevelMembers(raw) == len(members)
}

// topLevelMembers counts the members of the JSON object raw, which must be valid JSON: the
// commas outside strings at depth one, plus one unless the object is empty.
func topLevelMembers(raw []byte) int {
	depth, commas, inString, escaped, empty := 0, 0, false, false, true
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
			if depth == 1 {
				empty = false
			}
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ',' && depth == 1:
			commas++
		}
	}
	if empty {
		return 0
	}
	return commas + 1
}

// stringMember returns members[name] when it is a JSON string.
func stringMember(members map[string]json.RawMessage, name string) (string, bool) {
	raw := members[name]
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		// Valid JSON (object checked it) without an escape: the text between the quotes is
		// the string.
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// ExtensionURI names the A2A AgentExtension of the peer plane on an agent card
// (capabilities.extensions): its params carry the capsule's proof key and its peer_files
// limits.
const ExtensionURI = "https://github.com/resplane/resplane/docs/a2a-peer-plane-v1"
