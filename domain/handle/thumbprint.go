package handle

import "crypto/sha256"

// jktLabel starts the last field of a bound handle's MAC input (docs/peer-plane.md,
// "Proof of possession"): "jkt=" and the proof key's thumbprint.
const jktLabel = "jkt="

// Ed25519KeySize is the length of an Ed25519 public key, the x of its JWK.
const Ed25519KeySize = 32

// Thumbprint returns jkt, the RFC 7638 JWK thumbprint of the Ed25519 public key x: SHA-256 over
// the key's required JWK members in lexicographic order and without white space,
//
//	{"crv":"Ed25519","kty":"OKP","x":"<base64url(x)>"}
//
// written as unpadded base64url (43 characters). It is what binds a handle to the key a
// fetcher proves with: a minter computes it from the key on the peer's card, a redeem from
// the key in the request's proof. x must be 32 bytes; any other length has no thumbprint and
// gives "", which binds nothing.
func Thumbprint(x []byte) string {
	if len(x) != Ed25519KeySize {
		return ""
	}
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + b64.EncodeToString(x) + `"}`))
	return b64.EncodeToString(sum[:])
}

// RedeemPath is the path a handle is redeemed at on its minter's resource listener: the path of
// the URL a fetcher requests, and of the htu its proof names.
func RedeemPath(token string) string { return "/resources/peer/" + token }
