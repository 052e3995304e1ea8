package peerhttp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/resplane/resplane/domain/proof"
)

// FuzzCardExtension feeds arbitrary agent cards to the proof-key reader. It must not panic; a
// key it returns is 32 bytes, and an independent reading of the card with encoding/json's
// generic values finds exactly one peer-plane extension whose params.proof_key has kty OKP,
// crv Ed25519, no d, and an x that is the key's unpadded base64url.
func FuzzCardExtension(f *testing.F) {
	f.Add(`{"name":"a","url":"http://a:1","capabilities":{"extensions":[{"uri":"` + proof.ExtensionURI +
		`","params":{"proof_key":{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}}}]}}`)
	f.Fuzz(func(t *testing.T, body string) {
		card, ok := jsonObject([]byte(body))
		if !ok {
			return
		}
		key := proofKeyOf(card)
		if key == nil {
			return
		}
		if len(key) != proof.KeySize {
			t.Fatalf("a %d-byte key", len(key))
		}
		var generic struct {
			Capabilities struct {
				Extensions []map[string]any `json:"extensions"`
			} `json:"capabilities"`
		}
		if err := json.Unmarshal([]byte(body), &generic); err != nil {
			t.Fatalf("a key from a card encoding/json cannot read: %v", err)
		}
		var matches []map[string]any
		for _, ext := range generic.Capabilities.Extensions {
			if ext["uri"] == proof.ExtensionURI {
				matches = append(matches, ext)
			}
		}
		if len(matches) != 1 {
			t.Fatalf("a key from a card with %d peer-plane extensions", len(matches))
		}
		params, _ := matches[0]["params"].(map[string]any)
		jwk, _ := params["proof_key"].(map[string]any)
		x, _ := jwk["x"].(string)
		decoded, err := base64.RawURLEncoding.DecodeString(x)
		if _, hasD := jwk["d"]; jwk["kty"] != "OKP" || jwk["crv"] != "Ed25519" || hasD || err != nil || !bytes.Equal(decoded, key) {
			t.Fatalf("the key %x is not the card's proof_key %v", key, jwk)
		}
	})
}
