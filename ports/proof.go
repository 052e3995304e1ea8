package ports

import (
	"time"

	"github.com/resplane/resplane/domain/proof"
)

// ProofKey is the fetcher's proof-of-possession key (docs/peer-plane.md, "Proof of
// possession"): an Ed25519 key pair generated at launch from the OS CSPRNG when
// capabilities.peer_fetch is declared and --peer-proof is not off. Like the instance key, its
// private half is held in memory only — never written to disk, placed in an environment
// variable or logged — and overwritten with zeros at shutdown; a new process means a new key.
type ProofKey interface {
	// PublicKey returns the 32-byte public key. It must not be modified.
	PublicKey() []byte
	// Sign returns the Ed25519 signature of message. It fails once the key has been zeroed.
	Sign(message []byte) ([]byte, error)
}

// Prover makes the DPoP proof (RFC 9449) that fetch-peer-file sends with every redeem.
type Prover interface {
	// PublicKey is the public key the proofs are made with, as the agent card advertises it.
	PublicKey() []byte
	// Prove returns a compact JWS proving possession of the key for one request: method and
	// the absolute URL requested (htm, htu), issued at now (iat) with a fresh random jti.
	Prove(method, url string, now time.Time) (string, error)
}

// ProofVerifier checks the JOSE layer of a DPoP proof a redeem carries: its shape, its header
// (proof.ParseHeader: typ, the alg allow-list, the embedded public key), its signature under
// that key, and the types of its claims (proof.ParseClaims). The claims' values against the
// request — htm, htu, iat, jti — are the redeem's to check (proof.Claims.Check).
//
// Every error is an invalid_proof refusal whose message names what was wrong with the proof;
// none holds any text of the proof (its htu holds the handle).
type ProofVerifier interface {
	Verify(compact string) (VerifiedProof, error)
}

// VerifiedProof is a proof whose signature verified under Key.
type VerifiedProof struct {
	// Key is the Ed25519 public key of the proof's jwk, 32 bytes.
	Key    []byte
	Claims proof.Claims
}
