package dpop_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/dpop"
	"github.com/resplane/resplane/domain/refusal"
)

// FuzzVerifyProof feeds arbitrary proofs to the verifier, seeded with the rows of the proof table.
// None may panic; every error is invalid_proof; and a proof it accepts must pass an
// independent check: its header decodes (encoding/json) to typ dpop+jwt, an Ed25519 alg and a
// jwk whose x is the returned key, and crypto/ed25519 verifies its signature over the first
// two parts under that key.
func FuzzVerifyProof(f *testing.F) {
	now := time.Now().Unix()
	good := sign(priv, header("EdDSA", jwkOf(priv)), claims(now))
	parts := strings.Split(good, ".")
	f.Add(good)
	f.Add(sign(priv, header("Ed25519", jwkOf(priv)), claims(now)))
	f.Add(b64.EncodeToString([]byte(header("none", jwkOf(priv)))) + "." + parts[1] + ".")
	f.Add(sign(priv, `{"typ":"JWT","alg":"EdDSA","jwk":`+jwkOf(priv)+`}`, claims(now)))
	f.Add(sign(priv, `{"typ":"dpop+jwt","alg":"EdDSA"}`, claims(now)))
	f.Add(sign(other, header("EdDSA", jwkOf(priv)), claims(now)))
	f.Add(sign(priv, `{"typ":"dpop+jwt","alg":"EdDSA","alg":"none","jwk":`+jwkOf(priv)+`}`, claims(now)))
	f.Add(parts[0] + "." + parts[1])
	f.Add(good + "==")
	f.Fuzz(func(t *testing.T, compact string) {
		got, err := dpop.Verifier{}.Verify(compact)
		if err != nil {
			if r, ok := refusal.As(err); !ok || r.Code != refusal.InvalidProof {
				t.Fatalf("error %v is not invalid_proof", err)
			}
			return
		}
		p := strings.Split(compact, ".")
		if len(p) != 3 {
			t.Fatalf("accepted %q, which is not three parts", compact)
		}
		raw, err := b64.DecodeString(p[0])
		if err != nil {
			t.Fatalf("accepted a header that is not base64url: %v", err)
		}
		var h struct {
			Typ string `json:"typ"`
			Alg string `json:"alg"`
			JWK struct {
				Kty string `json:"kty"`
				Crv string `json:"crv"`
				X   string `json:"x"`
				D   *string
			} `json:"jwk"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatalf("accepted a header that is not JSON: %v", err)
		}
		x, err := b64.DecodeString(h.JWK.X)
		if h.Typ != "dpop+jwt" || (h.Alg != "EdDSA" && h.Alg != "Ed25519") || h.JWK.Kty != "OKP" || h.JWK.Crv != "Ed25519" ||
			h.JWK.D != nil || err != nil || !bytes.Equal(x, got.Key) {
			t.Fatalf("accepted header %s", raw)
		}
		if !ed25519.Verify(ed25519.PublicKey(got.Key), []byte(p[0]+"."+p[1]), mustDecode(t, p[2])) {
			t.Fatalf("accepted %q, whose signature does not verify", compact)
		}
	})
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := b64.DecodeString(s)
	if err != nil {
		t.Fatalf("accepted a signature that is not base64url: %v", err)
	}
	return b
}
