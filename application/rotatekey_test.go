package application_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// TestRotatingTheKeyRevokesEveryHandleMintedBefore pins docs/peer-plane.md, "Revoking every
// handle": after a rotation every earlier handle, bound or not, is the one handle_not_valid,
// a handle minted after it redeems, and each rotation is traced as peer_key_rotate with its
// outcome alone.
func TestRotatingTheKeyRevokesEveryHandleMintedBefore(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/handoff/report.md", "r")
	plane := handoff
	issuer := application.PeerIssuer{SessionID: sessionID, Key: application.NewKeyring(keys.NewFixed([32]byte{4}))}
	proofs := application.Proofs{Mode: proof.Auto}
	cards := &fakeCards{card: ports.PeerCard{Name: "Reporter", URL: "http://localhost:41234"}}
	share := application.NewShareFile(application.SharePlane{ExportPlane: handoff, MaxTTL: time.Hour}, mustDestinations(t, "localhost"),
		issuer, proofs, w.session, w.fs, cards, testNonce, w.clock, w.trace)
	redeem := application.NewRedeem(&plane, issuer, proofs, w.session, w.fs, w.reader, w.clock, w.trace)
	rotate := application.NewRotateKey(&plane, issuer, w.clock, w.trace)
	mintOne := func() string {
		t.Helper()
		r, err := share.Share(context.Background(), application.ShareInput{Path: "report.md", Peer: "localhost:41234"})
		if err != nil {
			t.Fatal(err)
		}
		return r.Handle
	}
	before := mintOne()
	if err := redeemWith(redeem, before, peerAud); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}
	w.clock.Advance(time.Second)
	at, err := rotate.Rotate()
	if err != nil || at != w.clock.Now().UnixMilli() {
		t.Fatalf("Rotate = %d, %v; want the clock's %d", at, err, w.clock.Now().UnixMilli())
	}
	if err := redeemWith(redeem, before, peerAud); err == nil || err.Error() != refusal.New(refusal.HandleNotValid).Error() {
		t.Fatalf("a handle minted before the rotation = %v, want the one handle_not_valid", err)
	}
	if err := redeemWith(redeem, mintOne(), peerAud); err != nil {
		t.Fatalf("a handle minted after the rotation: %v", err)
	}
	e := w.lastEvent(t, "peer_key_rotate")
	if got, keysInOrder := fields(e); !reflect.DeepEqual(keysInOrder, []string{"outcome"}) || got["outcome"] != "ok" {
		t.Fatalf("peer_key_rotate = %v", got)
	}
}

func TestRotatingWithoutAPeerPlaneIsNoPeerPlane(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	issuer := application.PeerIssuer{SessionID: sessionID, Key: application.NewKeyring(&keys.Random{})}
	if _, err := application.NewRotateKey(nil, issuer, w.clock, w.trace).Rotate(); !refusal.Is(err, refusal.NoPeerPlane) {
		t.Fatalf("Rotate = %v, want no_peer_plane", err)
	}
	if n := len(w.trace.OfType("peer_key_rotate")); n != 0 {
		t.Fatalf("%d peer_key_rotate events, want none", n)
	}
}

// TestRotationIsSafeUnderConcurrentMintsAndRedeems runs mints, redeems and rotations at once,
// for the race detector: none may read the key while a rotation writes it.
func TestRotationIsSafeUnderConcurrentMintsAndRedeems(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/handoff/report.md", "r")
	plane := handoff
	key, err := keys.NewRandom()
	if err != nil {
		t.Fatal(err)
	}
	issuer := application.PeerIssuer{SessionID: sessionID, Key: application.NewKeyring(key)}
	proofs := application.Proofs{Mode: proof.Auto}
	share := application.NewShareFile(application.SharePlane{ExportPlane: handoff, MaxTTL: time.Hour}, mustDestinations(t, "localhost"),
		issuer, proofs, w.session, w.fs, staticCard{Name: "Reporter", URL: "http://localhost:41234"}, testNonce, w.clock, w.trace)
	redeem := application.NewRedeem(&plane, issuer, proofs, w.session, w.fs, w.reader, w.clock, w.trace)
	rotate := application.NewRotateKey(&plane, issuer, w.clock, w.trace)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				r, err := share.Share(context.Background(), application.ShareInput{Path: "report.md", Peer: "localhost:41234"})
				if err != nil {
					t.Error(err)
					return
				}
				if err := redeemWith(redeem, r.Handle, peerAud); err != nil && !refusal.Is(err, refusal.HandleNotValid) {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			if _, err := rotate.Rotate(); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
}

// staticCard answers every card fetch with itself; unlike fakeCards it counts nothing, so it
// is safe for concurrent use.
type staticCard ports.PeerCard

func (c staticCard) FetchCard(context.Context, destination.Peer) (ports.PeerCard, error) {
	return ports.PeerCard(c), nil
}
