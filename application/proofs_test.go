package application_test

import (
	"context"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/dpop"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/refusal"
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
