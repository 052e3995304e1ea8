package peer_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resplane/resplane/test/harness"
)

// The peer-plane extension of an agent card (docs/http-api.md, "The agent card").
const extensionURI = "https://github.com/resplane/resplane/docs/a2a-peer-plane-v1"

// holder is a fetcher the test plays itself: an Ed25519 key, and a card advertising it.
type holder struct {
	priv ed25519.PrivateKey
	fake *fakePeer
}

// newHolder serves a card named Fake whose extension advertises a fresh key.
func newHolder(t *testing.T) *holder {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{priv: priv, fake: newFakePeer(t)}
	h.fake.setCard(cardJSON(`{"name":"Fake","url":"http://fake.example:1","capabilities":{"extensions":[{"uri":"` + extensionURI +
		`","required":false,"params":{"proof_key":` + h.jwk() + `}}]}}`))
	return h
}

const holderAudience = "fake@fake.example:1"

// jwk is the holder's public key as a JWK, written by hand.
func (h *holder) jwk() string { return jwkOf(h.priv) }

func jwkOf(k ed25519.PrivateKey) string {
	return `{"kty":"OKP","crv":"Ed25519","x":"` + b64.EncodeToString(k.Public().(ed25519.PublicKey)) + `"}`
}

// signJWS builds a compact JWS by hand from RFC 7515's steps: base64url of the header and the
// claims joined by a dot, signed with crypto/ed25519.
func signJWS(k ed25519.PrivateKey, header, claims string) string {
	input := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(claims))
	return input + "." + b64.EncodeToString(ed25519.Sign(k, []byte(input)))
}

// proofClaims are a DPoP proof's claims, written by hand.
func proofClaims(jti, htm, htu string, iat time.Time) string {
	return fmt.Sprintf(`{"jti":%q,"htm":%q,"htu":%q,"iat":%d}`, jti, htm, htu, iat.Unix())
}

// newJTI is 16 random bytes as base64url.
func newJTI() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b64.EncodeToString(b)
}

// redeemURL is the htu of a redeem of token at p, as the test's raw client sends it.
func redeemURL(p *harness.Process, token string) string {
	return "http://" + p.Ready.Listen + "/resources/peer/" + token
}

// proofFor is the holder's good proof for redeeming token at p now.
func (h *holder) proofFor(p *harness.Process, token string) string {
	return signJWS(h.priv, `{"typ":"dpop+jwt","alg":"EdDSA","jwk":`+h.jwk()+`}`, proofClaims(newJTI(), "GET", redeemURL(p, token), time.Now()))
}

func dpopHeader(proof string) string { return "DPoP: " + proof }

// TestTheProofTable pins docs/peer-plane.md, "Proof of possession", against a live minter, with
// proofs built by hand: a handle bound to the holder's key redeems with its proof; each rule
// of the proof is refused exactly as documented — invalid_proof at step 5b for a bad proof,
// handle_not_valid for a bound handle without its key's proof — and, each time, the trace
// records the same outcome and the minter's log holds no proof.
func TestTheProofTable(t *testing.T) {
	t.Parallel()
	a := startMinter(t)
	h := newHolder(t)
	m := mint(t, a, h.fake.Addr(), "report.md")
	if m.Audience != holderAudience {
		t.Fatalf("audience %q", m.Audience)
	}
	other := mint(t, a, h.fake.Addr(), "sub/deep.txt")
	a.WaitForStderr(t, `"handle_id":"`+m.HandleID+`"`)
	a.WaitForStderr(t, `"bound":true`)
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Now()
	url := redeemURL(a, m.Handle)
	header := `{"typ":"dpop+jwt","alg":"EdDSA","jwk":` + h.jwk() + `}`
	good := func() string { return proofClaims(newJTI(), "GET", url, now) }
	withKey := func(k ed25519.PrivateKey, claims string) string {
		return signJWS(k, `{"typ":"dpop+jwt","alg":"EdDSA","jwk":`+jwkOf(k)+`}`, claims)
	}
	hs256 := func() string {
		hdr := `{"typ":"dpop+jwt","alg":"HS256","jwk":` + h.jwk() + `}`
		input := b64.EncodeToString([]byte(hdr)) + "." + b64.EncodeToString([]byte(good()))
		mac := hmac.New(sha256.New, h.priv.Public().(ed25519.PublicKey))
		mac.Write([]byte(input))
		return input + "." + b64.EncodeToString(mac.Sum(nil))
	}
	es256 := func() string {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := k.PublicKey.ECDH()
		if err != nil {
			t.Fatal(err)
		}
		raw := pub.Bytes() // 0x04 ‖ X ‖ Y
		hdr := `{"typ":"dpop+jwt","alg":"ES256","jwk":{"kty":"EC","crv":"P-256","x":"` + b64.EncodeToString(raw[1:33]) +
			`","y":"` + b64.EncodeToString(raw[33:]) + `"}}`
		input := b64.EncodeToString([]byte(hdr)) + "." + b64.EncodeToString([]byte(good()))
		digest := sha256.Sum256([]byte(input))
		r, s, err := ecdsa.Sign(rand.Reader, k, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		return input + "." + b64.EncodeToString(append(pad32(r), pad32(s)...))
	}
	withD := `{"kty":"OKP","crv":"Ed25519","x":"` + b64.EncodeToString(h.priv.Public().(ed25519.PublicKey)) + `","d":"` + b64.EncodeToString(h.priv.Seed()) + `"}`
	replayed := signJWS(h.priv, header, good())

	for _, tc := range []struct {
		rule    string
		headers []string
		status  int
		code    string
	}{
		{"a proof by the bound key redeems", []string{dpopHeader(signJWS(h.priv, header, good()))}, 200, ""},
		{"the alg Ed25519 redeems too", []string{dpopHeader(signJWS(h.priv, `{"typ":"dpop+jwt","alg":"Ed25519","jwk":`+h.jwk()+`}`, good()))}, 200, ""},
		{"a first use of a proof redeems", []string{dpopHeader(replayed)}, 200, ""},
		{"a replayed proof is invalid", []string{dpopHeader(replayed)}, 400, "invalid_proof"},
		{"no proof is not valid", nil, 403, "handle_not_valid"},
		{"another key's proof is not valid", []string{dpopHeader(withKey(otherKey, good()))}, 403, "handle_not_valid"},
		{"iat 120 s old", []string{dpopHeader(signJWS(h.priv, header, proofClaims(newJTI(), "GET", url, now.Add(-120*time.Second))))}, 400, "invalid_proof"},
		{"iat 60 s ahead", []string{dpopHeader(signJWS(h.priv, header, proofClaims(newJTI(), "GET", url, now.Add(60*time.Second))))}, 400, "invalid_proof"},
		{"htm POST", []string{dpopHeader(signJWS(h.priv, header, proofClaims(newJTI(), "POST", url, now)))}, 400, "invalid_proof"},
		{"htu with another path", []string{dpopHeader(signJWS(h.priv, header, proofClaims(newJTI(), "GET", url+"x", now)))}, 400, "invalid_proof"},
		{"htu with another host", []string{dpopHeader(signJWS(h.priv, header, proofClaims(newJTI(), "GET", strings.Replace(url, "127.0.0.1", "localhost", 1), now)))}, 400, "invalid_proof"},
		{"alg none", []string{dpopHeader(b64.EncodeToString([]byte(`{"typ":"dpop+jwt","alg":"none","jwk":`+h.jwk()+`}`)) + "." + b64.EncodeToString([]byte(good())) + ".")}, 400, "invalid_proof"},
		{"alg HS256", []string{dpopHeader(hs256())}, 400, "invalid_proof"},
		{"alg ES256", []string{dpopHeader(es256())}, 400, "invalid_proof"},
		{"typ JWT", []string{dpopHeader(signJWS(h.priv, `{"typ":"JWT","alg":"EdDSA","jwk":`+h.jwk()+`}`, good()))}, 400, "invalid_proof"},
		{"no jwk", []string{dpopHeader(signJWS(h.priv, `{"typ":"dpop+jwt","alg":"EdDSA"}`, good()))}, 400, "invalid_proof"},
		{"a jwk with d", []string{dpopHeader(signJWS(h.priv, `{"typ":"dpop+jwt","alg":"EdDSA","jwk":`+withD+`}`, good()))}, 400, "invalid_proof"},
		{"a short jti", []string{dpopHeader(signJWS(h.priv, header, proofClaims("0123456789abcde", "GET", url, now)))}, 400, "invalid_proof"},
		{"two DPoP headers", []string{dpopHeader(signJWS(h.priv, header, good())), dpopHeader(signJWS(h.priv, header, good()))}, 400, "invalid_proof"},
		{"a proof over another handle", []string{dpopHeader(h.proofFor(a, other.Handle))}, 400, "invalid_proof"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			r := redeem(t, a, m.Handle, append([]string{aud(holderAudience)}, tc.headers...)...)
			e := lastEventFor(t, a, "peer_handle_redeem", "handle_id", m.HandleID)
			if tc.status == 200 {
				if r.Status != 200 || string(r.Body) != minterFiles()["out/handoff/report.md"] {
					t.Fatalf("status %d: %s", r.Status, r.Raw)
				}
				requireShape(t, a, e, redeemKeys, "ok")
				return
			}
			msg := requireRefusal(t, r, tc.status, tc.code, m.HandleID)
			requireShape(t, a, e, redeemKeys, tc.code)
			requireReason(t, e, msg)
			if strings.Contains(msg, "mh1.") || strings.Contains(msg, m.HandleID) {
				t.Fatalf("the refusal's message names the handle: %q", msg)
			}
		})
	}

	t.Run("every handle_not_valid is byte-identical", func(t *testing.T) {
		tampered := forgeFor("report.md")
		want := redeem(t, a, tampered, aud(holderAudience))
		for _, headers := range [][]string{nil, {dpopHeader(withKey(otherKey, good()))}} {
			got := redeem(t, a, m.Handle, append([]string{aud(holderAudience)}, headers...)...)
			if got.Status != 403 || string(got.Body) != string(want.Body) {
				t.Fatalf("bound handle without its key's proof: %d %s; a forged handle: %d %s", got.Status, got.Body, want.Status, want.Body)
			}
		}
	})

	t.Run("nothing after the MAC is evaluated when the MAC fails", func(t *testing.T) {
		// A good proof sent with a wrong audience fails the MAC and is not used up: the same
		// proof then redeems with the right audience, and only after that is it a replay.
		p := h.proofFor(a, m.Handle)
		requireRefusal(t, redeem(t, a, m.Handle, aud("intruder@localhost:1"), dpopHeader(p)), 403, "handle_not_valid", m.HandleID)
		if r := redeem(t, a, m.Handle, aud(holderAudience), dpopHeader(p)); r.Status != 200 {
			t.Fatalf("the proof after a MAC failure: %d %s", r.Status, r.Body)
		}
		requireRefusal(t, redeem(t, a, m.Handle, aud("intruder@localhost:1"), dpopHeader(p)), 403, "handle_not_valid", m.HandleID)
		requireRefusal(t, redeem(t, a, m.Handle, aud(holderAudience), dpopHeader(p)), 400, "invalid_proof", m.HandleID)
	})
}

func pad32(n *big.Int) []byte {
	b := make([]byte, 32)
	return n.FillBytes(b)
}

// TestABoundHandOffBetweenTwoCapsules pins the round trip of docs/peer-plane.md, "Proof of
// possession": the fetcher advertises its key on its card, the minter binds the handle to it,
// the fetch proves possession and lands the file; the same handle redeemed by a raw client
// with the right audience and no proof is handle_not_valid; and the fetcher's proof, taken
// off the wire, verifies by hand under the key on its card.
func TestABoundHandOffBetweenTwoCapsules(t *testing.T) {
	t.Parallel()
	a := startMinter(t)
	b := startFetcher(t)
	if a.Ready.PeerProof != "bound" || b.Ready.PeerProof != "bound" {
		t.Fatalf("peer_proof %q and %q, want bound for both", a.Ready.PeerProof, b.Ready.PeerProof)
	}
	key := cardKey(t, b)
	m := mint(t, a, b.Ready.Listen, "report.md")
	a.WaitForStderr(t, `"bound":true`) // the mint's log line says the handle is bound
	if got := fetch(t, b, a.Ready.Listen, m.Handle); got.Status != 200 {
		t.Fatalf("bound fetch: %d %s", got.Status, got.Raw)
	}
	requireRefusal(t, redeem(t, a, m.Handle, aud(b.Ready.Audience)), 403, "handle_not_valid", m.HandleID)
	if got := eventFor(t, b, "peer_file_fetch", "handle_id", m.HandleID); got.M["outcome"] != "ok" {
		t.Fatalf("fetch event %s", got.Raw)
	}

	// The fetcher's proof as a fake minter receives it.
	var mu sync.Mutex
	var proofs []string
	fake := newFakePeer(t)
	fake.handle(m.Handle, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		proofs = append(proofs, r.Header.Values("DPoP")...)
		mu.Unlock()
		serveBytes([]byte("x"))(w, r)
	})
	if got := fetch(t, b, fake.Addr(), m.Handle); got.Status != 200 {
		t.Fatalf("fetch from the fake: %d %s", got.Status, got.Raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(proofs) != 1 {
		t.Fatalf("%d DPoP headers, want 1", len(proofs))
	}
	parts := strings.Split(proofs[0], ".")
	if len(parts) != 3 {
		t.Fatalf("the proof is not a compact JWS")
	}
	if sig, err := b64.DecodeString(parts[2]); err != nil || !ed25519.Verify(key, []byte(parts[0]+"."+parts[1]), sig) {
		t.Fatalf("the fetcher's proof does not verify under the key on its card")
	}
	var hdr struct {
		Typ string          `json:"typ"`
		Alg string          `json:"alg"`
		JWK json.RawMessage `json:"jwk"`
	}
	var claims struct {
		JTI string `json:"jti"`
		HTM string `json:"htm"`
		HTU string `json:"htu"`
		IAT int64  `json:"iat"`
	}
	decodeSegment(t, parts[0], &hdr)
	decodeSegment(t, parts[1], &claims)
	if hdr.Typ != "dpop+jwt" || hdr.Alg != "EdDSA" {
		t.Fatalf("header %+v", hdr)
	}
	if claims.HTM != "GET" || claims.HTU != "http://"+fake.Addr()+"/resources/peer/"+m.Handle || len(claims.JTI) < 16 ||
		time.Since(time.Unix(claims.IAT, 0)).Abs() > time.Minute {
		t.Fatalf("claims %+v", claims)
	}
}

// cardKey is the proof key on p's card.
func cardKey(t *testing.T, p *harness.Process) ed25519.PublicKey {
	t.Helper()
	r := harness.Get(t, p.Ready.Listen, "/.well-known/agent-card.json")
	var card struct {
		Capabilities struct {
			Extensions []struct {
				URI      string `json:"uri"`
				Required *bool  `json:"required"`
				Params   struct {
					ProofKey map[string]string `json:"proof_key"`
				} `json:"params"`
			} `json:"extensions"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(r.Body, &card); err != nil {
		t.Fatal(err)
	}
	exts := card.Capabilities.Extensions
	if len(exts) != 1 || exts[0].URI != extensionURI || exts[0].Required == nil || *exts[0].Required {
		t.Fatalf("card extensions: %s", r.Body)
	}
	jwk := exts[0].Params.ProofKey
	x, err := b64.DecodeString(jwk["x"])
	if len(jwk) != 3 || jwk["kty"] != "OKP" || jwk["crv"] != "Ed25519" || err != nil || len(x) != 32 {
		t.Fatalf("proof_key %v: want exactly kty OKP, crv Ed25519 and a 32-byte x", jwk)
	}
	return x
}

func decodeSegment(t *testing.T, seg string, v any) {
	t.Helper()
	raw, err := b64.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

// TestPeerProofOffOnEitherSideFallsBackToTheReference pins --peer-proof off: a minter that is
// off mints unbound handles and ignores proofs, a fetcher that is off advertises no key and
// sends none; either way the hand-off works, with handles any holder of the audience redeems.
func TestPeerProofOffOnEitherSideFallsBackToTheReference(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		minter, fetchr []string
	}{
		{"the minter off", []string{"--peer-proof", "off"}, nil},
		{"the fetcher off", nil, []string{"--peer-proof", "off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startMinter(t, tc.minter...)
			b := startFetcher(t, tc.fetchr...)
			m := mint(t, a, b.Ready.Listen, "report.md")
			a.WaitForStderr(t, `"bound":false`) // the mint's log line says the handle is unbound
			if got := fetch(t, b, a.Ready.Listen, m.Handle); got.Status != 200 {
				t.Fatalf("fetch: %d %s", got.Status, got.Raw)
			}
			if r := redeem(t, a, m.Handle, aud(b.Ready.Audience)); r.Status != 200 {
				t.Fatalf("an unbound handle without a proof: %d %s", r.Status, r.Body)
			}
			off := a
			if tc.fetchr != nil {
				off = b
			}
			if off.Ready.PeerProof != "none" {
				t.Fatalf("peer_proof %q under off, want none", off.Ready.PeerProof)
			}
			if r := harness.Get(t, off.Ready.Listen, "/.well-known/agent-card.json"); strings.Contains(string(r.Body), "extensions") {
				t.Fatalf("a card under --peer-proof off carries an extension: %s", r.Body)
			}
		})
	}
}

// TestAKeylessPeerGetsAnUnboundHandleUnlessProofIsRequired pins share-file for a peer whose
// card advertises no key: auto mints an unbound handle, required refuses peer_key_missing,
// traced with the audience the card gave.
func TestAKeylessPeerGetsAnUnboundHandleUnlessProofIsRequired(t *testing.T) {
	t.Parallel()
	keyless := newFakePeer(t)
	keyless.setCard(cardJSON(`{"name":"Fake","url":"http://fake.example:1"}`))
	auto := startMinter(t)
	m := mint(t, auto, keyless.Addr(), "report.md")
	if r := redeem(t, auto, m.Handle, aud(holderAudience)); r.Status != 200 {
		t.Fatalf("an unbound handle under auto: %d %s", r.Status, r.Body)
	}
	required := startMinter(t, "--peer-proof", "required")
	if required.Ready.PeerProof != "required" {
		t.Fatalf("peer_proof %q, want required", required.Ready.PeerProof)
	}
	got := share(t, required, map[string]any{"path": "report.md", "peer": keyless.Addr()})
	harness.RequireControlRefusal(t, got, http.StatusUnprocessableEntity, "peer_key_missing")
	e := lastEventFor(t, required, "peer_handle_mint", "outcome", "peer_key_missing")
	requireShape(t, required, e, mintKeys, "peer_key_missing")
	requireField(t, e, "audience", holderAudience)
	requireNull(t, e, "handle_id", "expires_at_ms")
	h := newHolder(t)
	if m := mint(t, required, h.fake.Addr(), "report.md"); m.Audience != holderAudience {
		t.Fatalf("required with a keyed peer: %+v", m)
	}
}
