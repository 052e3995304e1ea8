package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/resplane/resplane/domain/proof"
)

// rfc8037Key is the Ed25519 public key of RFC 8037, Appendix A.2.
var rfc8037Key = []byte{0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a,
	0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a}

// TestTheCardParsesAsAnA2ACardWithThePeerPlaneExtension pins docs/http-api.md, "The agent
// card": a2a-go reads our card, its one extension is the peer-plane one with required false,
// params.proof_key exactly {kty, crv, x} and params.peer_files the limits; without either
// member there is no extension at all.
func TestTheCardParsesAsAnA2ACardWithThePeerPlaneExtension(t *testing.T) {
	id := Identity{Name: "reporter", Version: "1", URL: "https://localhost:8443", SessionID: "ses_1", Planes: []string{"peer_files"},
		ProofKey: rfc8037Key, PeerFiles: &PeerFilesLimits{MaxBytes: 1024, MaxTTLMs: 900_000}}
	var card a2a.AgentCard
	if err := json.Unmarshal(NewAgentCard(id).JSON, &card); err != nil {
		t.Fatalf("a2a-go cannot read the card: %v", err)
	}
	if card.Name != "reporter" || card.URL != "https://localhost:8443" || card.ProtocolVersion != "0.3.0" {
		t.Fatalf("card %+v", card)
	}
	exts := card.Capabilities.Extensions
	if len(exts) != 1 || exts[0].URI != proof.ExtensionURI || exts[0].Required || exts[0].Description == "" {
		t.Fatalf("extensions %+v", exts)
	}
	want := map[string]any{
		"proof_key":  map[string]any{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
		"peer_files": map[string]any{"max_bytes": float64(1024), "max_ttl_ms": float64(900_000)},
	}
	if !reflect.DeepEqual(exts[0].Params, want) {
		t.Fatalf("params %#v, want %#v", exts[0].Params, want)
	}
	var raw struct {
		Capabilities struct {
			Extensions []map[string]json.RawMessage `json:"extensions"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(NewAgentCard(id).JSON, &raw); err != nil || string(raw.Capabilities.Extensions[0]["required"]) != "false" {
		t.Fatalf("the extension must say \"required\": false: %s", NewAgentCard(id).JSON)
	}

	for _, tc := range []struct {
		name string
		id   Identity
		want []string
	}{
		{"a key alone", Identity{Name: "f", ProofKey: rfc8037Key}, []string{"proof_key"}},
		{"peer_files alone", Identity{Name: "m", PeerFiles: &PeerFilesLimits{MaxBytes: 1, MaxTTLMs: 2}}, []string{"peer_files"}},
		{"neither", Identity{Name: "n"}, nil},
		{"none under --peer-proof off", Identity{Name: "o", PeerProof: proof.Off, ProofKey: rfc8037Key,
			PeerFiles: &PeerFilesLimits{MaxBytes: 1, MaxTTLMs: 2}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var card a2a.AgentCard
			if err := json.Unmarshal(NewAgentCard(tc.id).JSON, &card); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range card.Capabilities.Extensions {
				for k := range e.Params {
					got = append(got, k)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("params members %q, want %q: %s", got, tc.want, NewAgentCard(tc.id).JSON)
			}
		})
	}
}
