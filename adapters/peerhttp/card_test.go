package peerhttp_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/peerhttp"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

func cardHandler(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}
}

func TestFetchCardGetsTheWellKnownPathOnHostAndPortOnly(t *testing.T) {
	var gotPath, gotMethod string
	srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotMethod = r.URL.RequestURI(), r.Method
		cardHandler(`{"name":"Reporter","url":"http://localhost:41234/","version":"1"}`)(w, r)
	})
	peer := peerOf(t, srv.URL+"/some/agent/path?q=1#f")

	card, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{}).FetchCard(context.Background(), peer)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ports.PeerCard{Name: "Reporter", URL: "http://localhost:41234/"}); !reflect.DeepEqual(card, want) {
		t.Errorf("card = %+v, want %+v", card, want)
	}
	if gotMethod != http.MethodGet || gotPath != "/.well-known/agent-card.json" {
		t.Errorf("request = %s %s, want GET /.well-known/agent-card.json", gotMethod, gotPath)
	}
}

func TestFetchCardLeavesAFieldThatIsNotANonBlankStringEmpty(t *testing.T) {
	for _, tc := range []struct {
		body string
		want ports.PeerCard
	}{
		{`{}`, ports.PeerCard{}},
		{`{"name":null,"url":null}`, ports.PeerCard{}},
		{`{"name":7,"url":["http://x"]}`, ports.PeerCard{}},
		{`{"name":" \t","url":""}`, ports.PeerCard{}},
		{`{"name":{"a":1},"url":"http://x:1"}`, ports.PeerCard{URL: "http://x:1"}},
		{`{"name":" Spaced ","url":true}`, ports.PeerCard{Name: " Spaced "}},
	} {
		_, peer := serve(t, cardHandler(tc.body))
		card, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{}).FetchCard(context.Background(), peer)
		if err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		if !reflect.DeepEqual(card, tc.want) {
			t.Errorf("%s: card = %+v, want %+v", tc.body, card, tc.want)
		}
	}
}

func TestFetchCardRefusesAnAnswerThatIsNotA200JSONObject(t *testing.T) {
	var redirectTargetHit atomic.Bool
	_, target := serve(t, func(w http.ResponseWriter, r *http.Request) {
		redirectTargetHit.Store(true)
		cardHandler(`{"name":"a","url":"http://a:1"}`)(w, r)
	})
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		message string
	}{
		{"404", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) }, "status 404"},
		{"500 with a card", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(500)
			w.Write([]byte(`{"name":"a","url":"http://a:1"}`))
		}, "status 500"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.BaseURL()+"/.well-known/agent-card.json", http.StatusFound)
		}, "status 302"},
		{"not JSON", cardHandler(`<html>`), "not a JSON object"},
		{"null", cardHandler(`null`), "not a JSON object"},
		{"array", cardHandler(`[{"name":"a","url":"http://a:1"}]`), "not a JSON object"},
		{"string", cardHandler(`"card"`), "not a JSON object"},
		{"two objects", cardHandler(`{"name":"a"}{"url":"b"}`), "not a JSON object"},
		{"empty", cardHandler(``), "not a JSON object"},
		{"one byte over 64 KiB", cardHandler(`{"name":"a","url":"http://a:1"}` + strings.Repeat(" ", 64<<10-30)), "larger than 64 KiB"},
		{"huge", cardHandler(`{"pad":"` + strings.Repeat("x", 8<<20) + `"}`), "larger than 64 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, peer := serve(t, tc.handler)
			_, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{}).FetchCard(context.Background(), peer)
			wantRefusal(t, err, refusal.PeerUnreachable, tc.message)
		})
	}
	if redirectTargetHit.Load() {
		t.Error("the redirect was followed")
	}
}

func TestFetchCardAcceptsABodyOfExactly64KiB(t *testing.T) {
	obj := `{"name":"a","url":"http://a:1"}`
	body := obj + strings.Repeat(" ", 64<<10-len(obj))
	_, peer := serve(t, cardHandler(body))
	card, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{}).FetchCard(context.Background(), peer)
	if err != nil || card.Name != "a" {
		t.Fatalf("card, err = %+v, %v; want a card named a", card, err)
	}
}

func TestFetchCardBoundsTheWholeAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"no headers", func(_ http.ResponseWriter, r *http.Request) { hang(r) }},
		{"a body that keeps trickling", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"name":`))
			for r.Context().Err() == nil {
				w.Write([]byte(" "))
				w.(http.Flusher).Flush()
				time.Sleep(20 * time.Millisecond)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, peer := serve(t, tc.handler)
			start := time.Now()
			_, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{Timeout: 200 * time.Millisecond}).FetchCard(context.Background(), peer)
			wantRefusal(t, err, refusal.PeerUnreachable, "did not arrive whole within 200ms")
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("took %v with a 200ms bound", elapsed)
			}
		})
	}
}

func TestFetchCardFailsWhenThePeerCannotBeReached(t *testing.T) {
	_, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{}).FetchCard(context.Background(), closedPort(t))
	wantRefusal(t, err, refusal.PeerUnreachable)
}

func TestFetchCardBoundsTheTLSHandshakeByTheConnectTimeout(t *testing.T) {
	_, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{ConnectTimeout: 100 * time.Millisecond}).
		FetchCard(context.Background(), silentListener(t))
	wantRefusal(t, err, refusal.PeerUnreachable, "did not complete a connection within 100ms")
}

func TestFetchCardStopsWhenTheCallerCancels(t *testing.T) {
	_, peer := serve(t, func(_ http.ResponseWriter, r *http.Request) { hang(r) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{}).FetchCard(ctx, peer)
	wantRefusal(t, err, refusal.PeerUnreachable, "cancelled")
}

func TestFetchCardVerifiesTLS(t *testing.T) {
	_, peer, roots := serveTLS(t, cardHandler(`{"name":"secure","url":"https://127.0.0.1:1"}`))

	t.Run("an untrusted certificate fails", func(t *testing.T) {
		_, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{}).FetchCard(context.Background(), peer)
		wantRefusal(t, err, refusal.PeerUnreachable, "does not verify")
	})
	t.Run("a trusted certificate passes", func(t *testing.T) {
		card, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{Roots: roots}).FetchCard(context.Background(), peer)
		if err != nil || card.Name != "secure" {
			t.Fatalf("card, err = %+v, %v", card, err)
		}
	})
	t.Run("a plain HTTP peer behind an https address fails", func(t *testing.T) {
		srv, _ := serve(t, cardHandler(`{"name":"a","url":"http://a:1"}`))
		peer := peerOf(t, strings.Replace(srv.URL, "http://", "https://", 1))
		_, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{Roots: roots}).FetchCard(context.Background(), peer)
		wantRefusal(t, err, refusal.PeerUnreachable)
	})
}

func TestLoadRootsAddsThePEMFileToTheTrustedRoots(t *testing.T) {
	srv, peer, _ := serveTLS(t, cardHandler(`{"name":"private","url":"https://127.0.0.1:1"}`))
	path := filepath.Join(t.TempDir(), "peer-ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	roots, err := peerhttp.LoadRoots(path)
	if err != nil {
		t.Fatal(err)
	}
	card, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{Roots: roots}).FetchCard(context.Background(), peer)
	if err != nil || card.Name != "private" {
		t.Fatalf("card, err = %+v, %v", card, err)
	}
}

func TestLoadRootsRefusesAFileWithoutACertificate(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{empty, filepath.Join(dir, "missing.pem")} {
		if roots, err := peerhttp.LoadRoots(path); err == nil {
			t.Errorf("LoadRoots(%s) = %v, nil; want an error", filepath.Base(path), roots)
		}
	}
}

// ourX is the RFC 8037 Ed25519 public key, as a JWK's x.
const ourX = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"

// extensionCard is a card whose capabilities.extensions are the given JSON array.
func extensionCard(extensions string) string {
	return `{"name":"Reporter","url":"http://localhost:41234","capabilities":{"extensions":` + extensions + `}}`
}

func peerPlaneExtension(proofKey string) string {
	return `{"uri":"https://github.com/resplane/resplane/docs/a2a-peer-plane-v1","required":false,"params":{"proof_key":` + proofKey + `}}`
}

// TestFetchCardReadsTheProofKeyOfThePeerPlaneExtension pins docs/peer-plane.md, "Proof of
// possession": the key is params.proof_key of the one peer-plane extension, exactly an
// Ed25519 public JWK; anything else is as if the card advertised none.
func TestFetchCardReadsTheProofKeyOfThePeerPlaneExtension(t *testing.T) {
	goodJWK := `{"kty":"OKP","crv":"Ed25519","x":"` + ourX + `"}`
	for _, tc := range []struct {
		name, card string
		wantKey    bool
	}{
		{"the extension with a key", extensionCard(`[` + peerPlaneExtension(goodJWK) + `]`), true},
		{"beside another extension", extensionCard(`[{"uri":"urn:other","params":{"proof_key":1}},` + peerPlaneExtension(goodJWK) + `]`), true},
		{"no capabilities", `{"name":"Reporter","url":"http://localhost:41234"}`, false},
		{"no extensions", `{"name":"Reporter","url":"http://localhost:41234","capabilities":{}}`, false},
		{"another extension only", extensionCard(`[{"uri":"urn:other","params":{"proof_key":` + goodJWK + `}}]`), false},
		{"the extension twice", extensionCard(`[` + peerPlaneExtension(goodJWK) + `,` + peerPlaneExtension(goodJWK) + `]`), false},
		{"a private key", extensionCard(`[` + peerPlaneExtension(`{"kty":"OKP","crv":"Ed25519","x":"`+ourX+`","d":"`+ourX+`"}`) + `]`), false},
		{"an X25519 key", extensionCard(`[` + peerPlaneExtension(`{"kty":"OKP","crv":"X25519","x":"`+ourX+`"}`) + `]`), false},
		{"a short x", extensionCard(`[` + peerPlaneExtension(`{"kty":"OKP","crv":"Ed25519","x":"AAAA"}`) + `]`), false},
		{"extensions that are not an array", `{"name":"Reporter","url":"http://localhost:41234","capabilities":{"extensions":{}}}`, false},
		{"capabilities that are not an object", `{"name":"Reporter","url":"http://localhost:41234","capabilities":"all"}`, false},
		{"params peer_files only", extensionCard(`[{"uri":"https://github.com/resplane/resplane/docs/a2a-peer-plane-v1","params":{"peer_files":{"max_bytes":1,"max_ttl_ms":1}}}]`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, peer := serve(t, cardHandler(tc.card))
			card, err := peerhttp.NewCardFetcher(peerhttp.CardOptions{}).FetchCard(context.Background(), peer)
			if err != nil || card.Name != "Reporter" {
				t.Fatalf("card, err = %+v, %v", card, err)
			}
			if got := len(card.ProofKey) == 32; got != tc.wantKey {
				t.Fatalf("proof key %x; want a 32-byte key: %v", card.ProofKey, tc.wantKey)
			}
		})
	}
}
