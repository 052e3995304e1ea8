package dpop_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/resplane/resplane/adapters/dpop"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/refusal"
)

var b64 = base64.RawURLEncoding

// seed makes the test key; other is another key.
var (
	seed  = [32]byte{1, 2, 3}
	priv  = ed25519.NewKeyFromSeed(seed[:])
	other = ed25519.NewKeyFromSeed(make([]byte, 32))
)

const htu = "http://127.0.0.1:8080/resources/peer/mh1.eyJ2IjoxfQ.AAAA"

// jwkOf is the public JWK of k, written by hand.
func jwkOf(k ed25519.PrivateKey) string {
	return `{"kty":"OKP","crv":"Ed25519","x":"` + b64.EncodeToString(k.Public().(ed25519.PublicKey)) + `"}`
}

// header is a protected header with the given alg and jwk.
func header(alg, jwk string) string {
	return `{"typ":"dpop+jwt","alg":"` + alg + `","jwk":` + jwk + `}`
}

// claims are good claims issued at iat.
func claims(iat int64) string {
	return `{"jti":"` + strings.Repeat("a", 22) + `","htm":"GET","htu":"` + htu + `","iat":` + jsonInt(iat) + `}`
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// sign builds a compact JWS by hand, following RFC 7515 section 5.1: base64url of the header
// and of the payload, joined by a dot, signed with Ed25519 (crypto/ed25519, not the code
// under test).
func sign(k ed25519.PrivateKey, header, payload string) string {
	input := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(payload))
	return input + "." + b64.EncodeToString(ed25519.Sign(k, []byte(input)))
}

func wantInvalid(t *testing.T, err error, mentions string) {
	t.Helper()
	r, ok := refusal.As(err)
	if !ok || r.Code != refusal.InvalidProof {
		t.Fatalf("err = %v, want invalid_proof", err)
	}
	if !strings.Contains(r.Message, mentions) {
		t.Fatalf("message %q does not name %q", r.Message, mentions)
	}
}

// TestVerifyAcceptsAProofBuiltByHand is the independent implementation of docs/peer-plane.md,
// "Proof of possession": a proof made from RFC 9449's steps with crypto/ed25519, base64url and
// JSON alone verifies, under either name of the algorithm.
func TestVerifyAcceptsAProofBuiltByHand(t *testing.T) {
	now := time.Now().Unix()
	for _, alg := range []string{"EdDSA", "Ed25519"} {
		t.Run(alg, func(t *testing.T) {
			got, err := dpop.Verifier{}.Verify(sign(priv, header(alg, jwkOf(priv)), claims(now)))
			if err != nil {
				t.Fatal(err)
			}
			want := proof.Claims{JTI: strings.Repeat("a", 22), HTM: "GET", HTU: htu, IAT: now}
			if got.Claims != want || string(got.Key) != string(priv.Public().(ed25519.PublicKey)) {
				t.Fatalf("Verify = %+v, want claims %+v and the signing key", got, want)
			}
		})
	}
}

// TestVerifyRefusesEachJOSERule is the JOSE half of the proof table (the claim rules are the
// redeem's, in application and test/peer): one row per rule, each invalid_proof with a
// message naming what was wrong.
func TestVerifyRefusesEachJOSERule(t *testing.T) {
	now := time.Now().Unix()
	good := sign(priv, header("EdDSA", jwkOf(priv)), claims(now))
	parts := strings.Split(good, ".")
	pub := priv.Public().(ed25519.PublicKey)
	hs256 := func() string {
		// The classic confusion: an HMAC keyed with the public key's bytes.
		h := `{"typ":"dpop+jwt","alg":"HS256","jwk":` + jwkOf(priv) + `}`
		input := b64.EncodeToString([]byte(h)) + "." + b64.EncodeToString([]byte(claims(now)))
		mac := hmac.New(sha256.New, pub)
		mac.Write([]byte(input))
		return input + "." + b64.EncodeToString(mac.Sum(nil))
	}()
	es256 := func() string {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k},
			(&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
		if err != nil {
			t.Fatal(err)
		}
		jws, err := signer.Sign([]byte(claims(now)))
		if err != nil {
			t.Fatal(err)
		}
		s, err := jws.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	withD := `{"kty":"OKP","crv":"Ed25519","x":"` + b64.EncodeToString(pub) + `","d":"` + b64.EncodeToString(priv.Seed()) + `"}`
	for _, tc := range []struct {
		name, proof, mentions string
	}{
		{"alg none", b64.EncodeToString([]byte(header("none", jwkOf(priv)))) + "." + b64.EncodeToString([]byte(claims(now))) + ".", "alg"},
		{"alg HS256 keyed with the public key", hs256, "alg"},
		{"alg ES256 with its own P-256 jwk", es256, "alg"},
		{"typ JWT", sign(priv, `{"typ":"JWT","alg":"EdDSA","jwk":`+jwkOf(priv)+`}`, claims(now)), "typ"},
		{"no typ", sign(priv, `{"alg":"EdDSA","jwk":`+jwkOf(priv)+`}`, claims(now)), "typ"},
		{"no jwk", sign(priv, `{"typ":"dpop+jwt","alg":"EdDSA"}`, claims(now)), "jwk"},
		{"a jwk with d", sign(priv, header("EdDSA", withD), claims(now)), "jwk"},
		{"a kid in place of a jwk", sign(priv, `{"typ":"dpop+jwt","alg":"EdDSA","kid":"k1"}`, claims(now)), "jwk"},
		{"crit", sign(priv, `{"typ":"dpop+jwt","alg":"EdDSA","jwk":`+jwkOf(priv)+`,"crit":["exp"],"exp":1}`, claims(now)), "crit"},
		{"signed by another key than its jwk", sign(other, header("EdDSA", jwkOf(priv)), claims(now)), "signature"},
		{"claims changed after signing", parts[0] + "." + b64.EncodeToString([]byte(claims(now+1))) + "." + parts[2], "signature"},
		{"a header changed after signing", b64.EncodeToString([]byte(header("Ed25519", jwkOf(priv)))) + "." + parts[1] + "." + parts[2], "signature"},
		{"a truncated signature", parts[0] + "." + parts[1] + "." + parts[2][:40], "signature"},
		{"claims that are not an object", sign(priv, header("EdDSA", jwkOf(priv)), `"GET"`), "claims"},
		{"claims without htu", sign(priv, header("EdDSA", jwkOf(priv)), `{"jti":"0123456789abcdef","htm":"GET","iat":1}`), "htu"},
		{"two parts", parts[0] + "." + parts[1], "compact JWS"},
		{"four parts", good + ".AAAA", "compact JWS"},
		{"an empty payload part", parts[0] + ".." + parts[2], "compact JWS"},
		{"padding", good + "==", "compact JWS"},
		{"a line break", parts[0] + "." + parts[1][:10] + "\r\n" + parts[1][10:] + "." + parts[2], "compact JWS"},
		{"the JSON serialization", `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`, "compact JWS"},
		{"a header that is not base64url", "e30%." + parts[1] + "." + parts[2], "compact JWS"},
		{"a header that is not JSON", b64.EncodeToString([]byte("typ=dpop+jwt")) + "." + parts[1] + "." + parts[2], "JSON object"},
		{"empty", "", "compact JWS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dpop.Verifier{}.Verify(tc.proof)
			wantInvalid(t, err, tc.mentions)
		})
	}
}

// TestTheProversProofsVerifyInTheLibrarysOwnVerifier checks the fetcher's proofs independently
// of our Verifier: go-jose's own EdDSA verifier, with the key taken from the header, accepts
// them, and they carry exactly what RFC 9449 asks for.
func TestTheProversProofsVerifyInTheLibrarysOwnVerifier(t *testing.T) {
	key := keys.NewFixedProofKey(seed)
	prover, err := dpop.NewProver(key)
	if err != nil {
		t.Fatal(err)
	}
	if string(prover.PublicKey()) != string(priv.Public().(ed25519.PublicKey)) {
		t.Fatal("the prover's public key is not its key's")
	}
	now := time.Unix(1_800_000_000, 0)
	var jtis []string
	for range 2 {
		compact, err := prover.Prove("GET", htu, now)
		if err != nil {
			t.Fatal(err)
		}
		jws, err := jose.ParseSignedCompact(compact, []jose.SignatureAlgorithm{jose.EdDSA})
		if err != nil {
			t.Fatal(err)
		}
		h := jws.Signatures[0].Protected
		if h.ExtraHeaders["typ"] != "dpop+jwt" || h.Algorithm != "EdDSA" || h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
			t.Fatalf("header %+v: want typ dpop+jwt, alg EdDSA and a public jwk", h)
		}
		payload, err := jws.Verify(h.JSONWebKey) // the library's own Ed25519 verification
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			JTI string `json:"jti"`
			HTM string `json:"htm"`
			HTU string `json:"htu"`
			IAT int64  `json:"iat"`
		}
		if err := json.Unmarshal(payload, &c); err != nil {
			t.Fatal(err)
		}
		if c.HTM != "GET" || c.HTU != htu || c.IAT != now.Unix() || len(c.JTI) != 22 {
			t.Fatalf("claims %s: want htm GET, htu %s, iat %d and a 22-character jti", payload, htu, now.Unix())
		}
		jtis = append(jtis, c.JTI)
		if _, err := (dpop.Verifier{}).Verify(compact); err != nil {
			t.Fatalf("our verifier refuses the prover's proof: %v", err)
		}
	}
	if jtis[0] == jtis[1] {
		t.Fatal("two proofs share a jti")
	}
	key.Zero()
	if _, err := prover.Prove("GET", htu, now); err == nil {
		t.Fatal("a zeroed key still proves")
	}
}
