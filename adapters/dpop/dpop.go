// Package dpop is the JOSE side of the peer plane's proof of possession (docs/peer-plane.md,
// "Proof of possession"), on github.com/go-jose/go-jose/v4: Verifier checks the RFC 9449
// DPoP proof a redeem carries (ports.ProofVerifier), Prover makes the proof fetch-peer-file
// sends (ports.Prover).
//
// The rules a JOSE library cannot express are enforced before the library sees a proof: the
// proof must be three strict base64url segments, and its protected header must meet
// proof.ParseHeader — typ dpop+jwt, alg EdDSA or Ed25519 only (never none, never an HMAC), an
// embedded Ed25519 public key, no crit — so the library only ever parses a proof whose
// algorithm and key are already acceptable, and verifies it with that key alone. The
// signature check takes both names of Ed25519 (RFC 8037's EdDSA and RFC 9864's Ed25519),
// which go-jose's own verifier does not, through its OpaqueVerifier seam.
package dpop

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// b64 is base64url without padding, strict: each byte string has one accepted text.
var b64 = base64.RawURLEncoding.Strict()

// algorithms are the algs handed to the library: exactly those proof.ParseHeader accepts.
var algorithms = []jose.SignatureAlgorithm{jose.EdDSA, proof.AlgEd25519}

var (
	errShape = refusal.WithMessage(refusal.InvalidProof,
		"The DPoP proof is not a compact JWS: three non-empty unpadded base64url parts joined by dots.")
	errSignature = refusal.WithMessage(refusal.InvalidProof, "The DPoP proof's signature does not verify under its jwk.")
)

// Verifier checks DPoP proofs (ports.ProofVerifier). The zero Verifier is ready; it holds no
// state and is safe for concurrent use.
type Verifier struct{}

var _ ports.ProofVerifier = Verifier{}

// Verify checks one proof, in this order: three dot-separated parts, the first strict
// base64url; its protected header (proof.ParseHeader), before the library parses anything;
// the other two parts strict base64url; the library's parse, given only the accepted
// algorithms; the signature, under the header's key alone; the claims' types
// (proof.ParseClaims). It returns the key and the claims.
func (Verifier) Verify(compact string) (ports.VerifiedProof, error) {
	headerSeg, rest, ok := strings.Cut(compact, ".")
	if !ok || strings.Count(rest, ".") != 1 || !segmentOK(headerSeg) {
		return ports.VerifiedProof{}, errShape
	}
	headerJSON, err := b64.DecodeString(headerSeg)
	if err != nil {
		return ports.VerifiedProof{}, errShape
	}
	// The header rules first, so that alg none (whose signature part is empty) is refused for
	// its alg.
	header, err := proof.ParseHeader(headerJSON)
	if err != nil {
		return ports.VerifiedProof{}, err
	}
	payloadSeg, signatureSeg, _ := strings.Cut(rest, ".")
	if !segmentOK(payloadSeg) || !segmentOK(signatureSeg) {
		return ports.VerifiedProof{}, errShape
	}
	jws, err := jose.ParseSignedCompact(compact, algorithms)
	if err != nil || len(jws.Signatures) != 1 {
		return ports.VerifiedProof{}, errShape
	}
	payload, err := jws.Verify(edKey(header.Key))
	if err != nil {
		return ports.VerifiedProof{}, errSignature
	}
	claims, err := proof.ParseClaims(payload)
	if err != nil {
		return ports.VerifiedProof{}, err
	}
	return ports.VerifiedProof{Key: header.Key, Claims: claims}, nil
}

// segmentOK reports whether part is non-empty and only base64url characters: the library's
// decoder would skip CR and LF and take padding.
func segmentOK(part string) bool {
	return part != "" && strings.IndexFunc(part, notBase64URL) < 0
}

func notBase64URL(r rune) bool {
	return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_')
}

// edKey verifies an Ed25519 signature under one public key, for either name of the algorithm
// (jose.OpaqueVerifier).
type edKey ed25519.PublicKey

var errAlgorithm = errors.New("not an Ed25519 algorithm")

// VerifyPayload implements jose.OpaqueVerifier.
func (k edKey) VerifyPayload(payload, signature []byte, alg jose.SignatureAlgorithm) error {
	if alg != jose.EdDSA && alg != proof.AlgEd25519 {
		return errAlgorithm
	}
	if len(k) != ed25519.PublicKeySize || !ed25519.Verify(ed25519.PublicKey(k), payload, signature) {
		return errSignature
	}
	return nil
}

// jtiBytes is how many random bytes a proof's jti carries (16 or more; base64url, 22
// characters).
const jtiBytes = 16

// Prover makes DPoP proofs with the fetcher's proof key (ports.Prover). It is safe for
// concurrent use.
type Prover struct {
	key    ports.ProofKey
	signer jose.Signer
}

var _ ports.Prover = (*Prover)(nil)

// NewProver returns a Prover signing with key: protected header typ dpop+jwt, alg EdDSA (the
// name every RFC 9449 implementation knows) and the public key as jwk.
func NewProver(key ports.ProofKey) (*Prover, error) {
	opts := (&jose.SignerOptions{EmbedJWK: true}).WithType(proof.Type)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: opaqueSigner{key}}, opts)
	if err != nil {
		return nil, err
	}
	return &Prover{key: key, signer: signer}, nil
}

// PublicKey implements ports.Prover.
func (p *Prover) PublicKey() []byte { return p.key.PublicKey() }

// claimSet is a proof's claims as the Prover writes them.
type claimSet struct {
	JTI string `json:"jti"`
	HTM string `json:"htm"`
	HTU string `json:"htu"`
	IAT int64  `json:"iat"`
}

// Prove implements ports.Prover.
func (p *Prover) Prove(method, url string, now time.Time) (string, error) {
	var jti [jtiBytes]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", err
	}
	claims, err := json.Marshal(claimSet{JTI: b64.EncodeToString(jti[:]), HTM: method, HTU: url, IAT: now.Unix()})
	if err != nil {
		return "", err
	}
	jws, err := p.signer.Sign(claims)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// opaqueSigner signs through the key's port, so the private key never leaves adapters/keys
// (jose.OpaqueSigner).
type opaqueSigner struct{ key ports.ProofKey }

func (s opaqueSigner) Public() *jose.JSONWebKey {
	return &jose.JSONWebKey{Key: ed25519.PublicKey(s.key.PublicKey())}
}

func (opaqueSigner) Algs() []jose.SignatureAlgorithm { return []jose.SignatureAlgorithm{jose.EdDSA} }

func (s opaqueSigner) SignPayload(payload []byte, _ jose.SignatureAlgorithm) ([]byte, error) {
	return s.key.Sign(payload)
}
