package application_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/dpop"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// ourHost is the minter's Host as the fetcher addresses it; a proof names it.
const ourHost = "localhost:41234"

// prover makes proofs with a fixed key; its jkt is what a handle is bound to.
func prover(t *testing.T, seed byte) (*dpop.Prover, string) {
	t.Helper()
	p, err := dpop.NewProver(keys.NewFixedProofKey([32]byte{seed}))
	if err != nil {
		t.Fatal(err)
	}
	return p, handle.Thumbprint(p.PublicKey())
}

// prove makes p's proof for redeeming token at ourHost, issued at the world's clock.
func prove(t *testing.T, w *world, p *dpop.Prover, token string) string {
	t.Helper()
	proofText, err := p.Prove("GET", "http://"+ourHost+handle.RedeemPath(token), w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return proofText
}

// redeemWith redeems token with the given audience and DPoP header values.
func redeemWith(r *application.Redeem, token, audience string, proofs ...string) error {
	answer, err := r.Do(context.Background(), application.RedeemRequest{
		Request: get, Rest: "/" + token, Audience: audience, AudienceSent: true, Proofs: proofs, Host: ourHost,
	})
	if err == nil {
		answer.Served.Body.Release()
	}
	return err
}

// TestRedeemChecksTheProofAtStep5bAndTheBindingAtTheMAC pins docs/peer-plane.md, "Proof of
// possession": a proof is checked after the audience and before the MAC; the MAC accepts a
// bound tag only with its key's proof, and an unbound tag with or without a proof; a bound
// handle without its key's proof is the byte-identical handle_not_valid.
func TestRedeemChecksTheProofAtStep5bAndTheBindingAtTheMAC(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/handoff/report.md", "r")
	ours, jkt := prover(t, 1)
	theirs, _ := prover(t, 2)
	payload := handle.NewPayload(sessionID, "report.md", epoch.Add(time.Minute).UnixMilli(), [16]byte{7})
	signer := handle.NewSigner(testKey.Key())
	bound := signer.MintBound(payload, peerAud, jkt)
	unbound := signer.Mint(payload, peerAud)
	expired := signer.MintBound(handle.NewPayload(sessionID, "report.md", epoch.UnixMilli(), [16]byte{8}), peerAud, jkt)
	notValid := refusal.New(refusal.HandleNotValid).Error()
	for _, tc := range []struct {
		rule     string
		token    string
		audience string
		proofs   func() []string
		want     refusal.Code // "" for a 200
	}{
		{"a bound handle with its key's proof redeems", bound, peerAud, func() []string { return []string{prove(t, w, ours, bound)} }, ""},
		{"a bound handle without a proof is not valid", bound, peerAud, func() []string { return nil }, refusal.HandleNotValid},
		{"a bound handle with another key's proof is not valid", bound, peerAud, func() []string { return []string{prove(t, w, theirs, bound)} }, refusal.HandleNotValid},
		{"an unbound handle without a proof redeems", unbound, peerAud, func() []string { return nil }, ""},
		{"an unbound handle with a proof redeems", unbound, peerAud, func() []string { return []string{prove(t, w, ours, unbound)} }, ""},
		{"a proof over another handle is invalid", bound, peerAud, func() []string { return []string{prove(t, w, ours, unbound)} }, refusal.InvalidProof},
		{"two DPoP headers are invalid", bound, peerAud, func() []string { return []string{prove(t, w, ours, bound), prove(t, w, ours, bound)} }, refusal.InvalidProof},
		{"a proof that does not parse is invalid", unbound, peerAud, func() []string { return []string{"not.a.proof"} }, refusal.InvalidProof},
		{"the shape is checked before the proof", "mh1.%%.x", peerAud, func() []string { return []string{"not.a.proof"} }, refusal.MalformedHandle},
		{"the audience is checked before the proof", bound, "", func() []string { return []string{"not.a.proof"} }, refusal.MissingAudience},
		{"the proof is checked before the MAC", bound, "intruder@localhost:1", func() []string { return []string{"not.a.proof"} }, refusal.InvalidProof},
		{"expiry is checked behind the MAC, after the proof", expired, peerAud, func() []string { return []string{prove(t, w, ours, expired)} }, refusal.HandleExpired},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			err := redeemWith(newRedeem(w, testKey), tc.token, tc.audience, tc.proofs()...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("redeem = %v, want a 200", err)
				}
				return
			}
			if !refusal.Is(err, tc.want) {
				t.Fatalf("redeem = %v, want %s", err, tc.want)
			}
			if tc.want == refusal.HandleNotValid && err.Error() != notValid {
				t.Fatalf("handle_not_valid %q differs from the one refusal %q", err, notValid)
			}
		})
	}
}

// TestAProofOfABoundRedeemIsAcceptedOnce pins the replay rule: once a bound handle's MAC has
// verified, its proof's jti is remembered for 65 s; an unbound redeem and a redeem whose MAC
// fails remember nothing.
func TestAProofOfABoundRedeemIsAcceptedOnce(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/handoff/report.md", "r")
	ours, jkt := prover(t, 1)
	payload := handle.NewPayload(sessionID, "report.md", epoch.Add(time.Hour).UnixMilli(), [16]byte{7})
	signer := handle.NewSigner(testKey.Key())
	bound := signer.MintBound(payload, peerAud, jkt)
	unbound := signer.Mint(payload, peerAud)
	r := newRedeem(w, testKey)

	t.Run("a replayed proof is invalid", func(t *testing.T) {
		p := prove(t, w, ours, bound)
		if err := redeemWith(r, bound, peerAud, p); err != nil {
			t.Fatal(err)
		}
		if err := redeemWith(r, bound, peerAud, p); !refusal.Is(err, refusal.InvalidProof) {
			t.Fatalf("replay = %v, want invalid_proof", err)
		}
		if err := redeemWith(r, bound, peerAud, prove(t, w, ours, bound)); err != nil {
			t.Fatalf("a fresh proof after a replay: %v", err)
		}
	})
	t.Run("a proof whose MAC failed was not used", func(t *testing.T) {
		p := prove(t, w, ours, bound)
		if err := redeemWith(r, bound, "intruder@localhost:1", p); !refusal.Is(err, refusal.HandleNotValid) {
			t.Fatalf("wrong audience = %v, want handle_not_valid", err)
		}
		if err := redeemWith(r, bound, peerAud, p); err != nil {
			t.Fatalf("the same proof with the right audience: %v", err)
		}
	})
	t.Run("an unbound redeem remembers no proof", func(t *testing.T) {
		p := prove(t, w, ours, unbound)
		for range 2 {
			if err := redeemWith(r, unbound, peerAud, p); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("a proof is remembered for the whole window", func(t *testing.T) {
		p := prove(t, w, ours, bound)
		if err := redeemWith(r, bound, peerAud, p); err != nil {
			t.Fatal(err)
		}
		w.clock.Advance(proof.MaxAge)
		if err := redeemWith(r, bound, peerAud, p); !refusal.Is(err, refusal.InvalidProof) {
			t.Fatalf("replay 60 s later = %v, want invalid_proof", err)
		}
		w.clock.Advance(time.Second) // its iat is now too old: the clock rule refuses it
		if err := redeemWith(r, bound, peerAud, p); !refusal.Is(err, refusal.InvalidProof) {
			t.Fatalf("replay 61 s later = %v, want invalid_proof", err)
		}
	})
}

// TestPeerProofOffIgnoresTheDPoPHeader pins --peer-proof off on the minter: the reference's
// behaviour, in which a DPoP header means nothing, so a bound tag never verifies and a
// proof that does not parse is not looked at.
func TestPeerProofOffIgnoresTheDPoPHeader(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/handoff/report.md", "r")
	ours, jkt := prover(t, 1)
	payload := handle.NewPayload(sessionID, "report.md", epoch.Add(time.Hour).UnixMilli(), [16]byte{7})
	signer := handle.NewSigner(testKey.Key())
	bound := signer.MintBound(payload, peerAud, jkt)
	unbound := signer.Mint(payload, peerAud)
	r := newRedeemProving(w, testKey, proof.Off)
	if err := redeemWith(r, unbound, peerAud, "not.a.proof", "twice"); err != nil {
		t.Fatalf("an unbound handle with junk DPoP headers: %v", err)
	}
	if err := redeemWith(r, bound, peerAud, prove(t, w, ours, bound)); !refusal.Is(err, refusal.HandleNotValid) {
		t.Fatalf("a bound handle under off = %v, want handle_not_valid", err)
	}
}

func TestReplaysForgetAfterTheWindowAndRefuseWhenFull(t *testing.T) {
	r := application.NewReplays(2)
	now := epoch
	if err := r.Remember("k", "a", now); err != nil {
		t.Fatal(err)
	}
	if err := r.Remember("other-key", "a", now); err != nil {
		t.Fatalf("the same jti under another key: %v", err)
	}
	if err := r.Remember("k", "b", now); !refusal.Is(err, refusal.InvalidProof) {
		t.Fatalf("a third proof in a memory of two = %v, want invalid_proof", err)
	}
	if err := r.Remember("k", "a", now.Add(proof.ReplayWindow-time.Nanosecond)); !refusal.Is(err, refusal.InvalidProof) {
		t.Fatalf("a replay inside the window = %v, want invalid_proof", err)
	}
	later := now.Add(proof.ReplayWindow)
	for _, jti := range []string{"a", "b"} {
		if err := r.Remember("k", jti, later); err != nil {
			t.Fatalf("%s after the window: %v", jti, err)
		}
	}
}

// failingProver cannot prove.
type failingProver struct{}

func (failingProver) PublicKey() []byte { return make([]byte, 32) }
func (failingProver) Prove(string, string, time.Time) (string, error) {
	return "", errors.New("the proof key was zeroed at shutdown")
}

// TestFetchProvesPossessionForTheURLItRequests pins fetch-peer-file's side of docs/peer-plane.md,
// "Proof of possession": with a proof key, every redeem carries a proof whose htm is GET, whose
// htu is exactly the URL requested (scheme, host and port as connected, the token's path) and
// whose iat is now; without one, none; a proof that cannot be made fetches nothing.
func TestFetchProvesPossessionForTheURLItRequests(t *testing.T) {
	token := handle.Mint(testKey.Key(), handle.NewPayload(sessionID, "report.md", 1, [16]byte{}), peerAud)
	ours, _ := prover(t, 1)
	for _, tc := range []struct {
		name   string
		prover ports.Prover
		peer   string
		want   string // the proof's htu, "" for no proof
	}{
		{"a bare host:port peer", ours, "localhost:41234", "http://localhost:41234/resources/peer/" + token},
		{"an https peer with its default port", ours, "https://Localhost/some/path", "https://localhost:443/resources/peer/" + token},
		{"no proof key, no proof", nil, "localhost:41234", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, containment.Sealed)
			redeemer := &fakeRedeemer{resp: ports.PeerRedeemResponse{Status: 200}, body: "b"}
			fetch := application.NewFetchPeerFile(mustDestinations(t, "localhost"), "me@localhost:1", 1<<20, tc.prover, redeemer,
				&memInbox{stored: map[string][]byte{}}, w.clock, w.trace)
			if _, err := fetch.Fetch(context.Background(), application.FetchInput{Peer: tc.peer, Handle: token}); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if redeemer.last.Proof != "" {
					t.Fatalf("a capsule without a proof key sent a proof")
				}
				return
			}
			got, err := dpop.Verifier{}.Verify(redeemer.last.Proof)
			if err != nil {
				t.Fatal(err)
			}
			if got.Claims.HTU != tc.want || got.Claims.HTM != "GET" || got.Claims.IAT != w.clock.Now().Unix() {
				t.Fatalf("claims %+v: want htm GET, htu %s, iat %d", got.Claims, tc.want, w.clock.Now().Unix())
			}
		})
	}
	t.Run("a proof that cannot be made fetches nothing", func(t *testing.T) {
		w := newWorld(t, containment.Sealed)
		redeemer := &fakeRedeemer{resp: ports.PeerRedeemResponse{Status: 200}, body: "b"}
		in := &memInbox{stored: map[string][]byte{}}
		fetch := application.NewFetchPeerFile(mustDestinations(t, "localhost"), "me@localhost:1", 1<<20, failingProver{}, redeemer, in,
			w.clock, w.trace)
		_, err := fetch.Fetch(context.Background(), application.FetchInput{Peer: "localhost:1", Handle: token})
		if !refusal.Is(err, refusal.IOError) || redeemer.calls != 0 || len(in.stored) != 0 || in.discarded != 1 {
			t.Fatalf("Fetch = %v, %d redeems, stored %v, %d discarded; want io_error, no redeem, nothing stored", err, redeemer.calls, in.stored, in.discarded)
		}
	})
}

// TestShareBindsTheHandleToThePeersAdvertisedKey pins share-file's side of docs/peer-plane.md,
// "Proof of possession": a handle for a peer whose card advertises a key is bound to it under
// auto and required, and redeems only with that key's proof; a keyless peer gets an unbound
// handle under auto and peer_key_missing (traced with the derived audience) under required;
// off never binds.
func TestShareBindsTheHandleToThePeersAdvertisedKey(t *testing.T) {
	ours, _ := prover(t, 1)
	keyed := ports.PeerCard{Name: "Reporter", URL: "http://localhost:41234", ProofKey: ours.PublicKey()}
	keyless := ports.PeerCard{Name: "Reporter", URL: "http://localhost:41234"}
	for _, tc := range []struct {
		name      string
		mode      proof.Mode
		card      ports.PeerCard
		wantBound bool
		want      refusal.Code
	}{
		{"auto binds a keyed peer's handle", proof.Auto, keyed, true, ""},
		{"required binds a keyed peer's handle", proof.Required, keyed, true, ""},
		{"auto mints an unbound handle for a keyless peer", proof.Auto, keyless, false, ""},
		{"required refuses a keyless peer", proof.Required, keyless, false, refusal.PeerKeyMissing},
		{"required refuses a key of the wrong length", proof.Required, ports.PeerCard{Name: "Reporter", URL: "http://localhost:41234", ProofKey: []byte{1}}, false, refusal.PeerKeyMissing},
		{"off never binds", proof.Off, keyed, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, containment.Sealed)
			w.write(t, "out/handoff/report.md", "r")
			result, err := newShareProving(t, w, &fakeCards{card: tc.card}, tc.mode).Share(context.Background(),
				application.ShareInput{Path: "report.md", Peer: "localhost:41234"})
			mint, _ := fields(w.lastEvent(t, "peer_handle_mint"))
			if tc.want != "" {
				if !refusal.Is(err, tc.want) || mint["outcome"] != string(tc.want) || mint["audience"] != peerAud {
					t.Fatalf("Share = %v, mint event %v; want %s traced with the audience %s", err, mint, tc.want, peerAud)
				}
				return
			}
			if err != nil || result.Bound != tc.wantBound {
				t.Fatalf("Share = %+v, %v; want bound %v", result, err, tc.wantBound)
			}
			noProof := redeemWith(newRedeem(w, testKey), result.Handle, peerAud)
			withProof := redeemWith(newRedeem(w, testKey), result.Handle, peerAud, prove(t, w, ours, result.Handle))
			if withProof != nil || (noProof == nil) == tc.wantBound {
				t.Fatalf("redeem without a proof = %v, with the key's proof = %v; want bound %v", noProof, withProof, tc.wantBound)
			}
		})
	}
}
