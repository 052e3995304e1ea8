package budget

import (
	"context"
	"testing"
	"time"

	"github.com/resplane/resplane/ports"
)

func newShared(t *testing.T, total int64) *Shared {
	t.Helper()
	s, err := NewShared("--spool-budget", total)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// reserveFor starts client's Reserve in a goroutine and returns the channel its result arrives on.
func reserveFor(ctx context.Context, b ports.ReadBudget, n int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Reserve(ctx, n) }()
	return done
}

func mustReserve(t *testing.T, b ports.ReadBudget, n int64) {
	t.Helper()
	if err := b.Reserve(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

// TestAClientAboveHalfWaitsWhileAnotherWaits pins the share rule: with no one else waiting a
// client may take more than half; once another client waits, it is granted nothing that takes
// it above half, even what would fit, until the other has been served.
func TestAClientAboveHalfWaitsWhileAnotherWaits(t *testing.T) {
	s := newShared(t, 100)
	a, b := s.For("192.0.2.1/32"), s.For("198.51.100.7/32")
	mustReserve(t, a, 60) // alone: more than half is fine
	bWaits := reserveFor(context.Background(), b, 50)
	waiting(t, bWaits)
	aMore := reserveFor(context.Background(), a, 10)
	waiting(t, aMore) // 40 bytes are free, but A is above half while B waits
	if a.TryReserve(10) {
		t.Fatal("TryReserve took A above half while B waits")
	}
	if s.HeldBy("192.0.2.1/32") != 60 {
		t.Fatalf("A holds %d, want 60", s.HeldBy("192.0.2.1/32"))
	}
	a.Release(60)
	granted(t, bWaits)
	granted(t, aMore) // B is served: A may go on
	if s.HeldBy("198.51.100.7/32") != 50 || s.HeldBy("192.0.2.1/32") != 10 || s.HeldBytes() != 60 {
		t.Fatalf("held %d by B, %d by A, %d in all", s.HeldBy("198.51.100.7/32"), s.HeldBy("192.0.2.1/32"), s.HeldBytes())
	}
}

// TestAQueuedReservationAboveHalfGivesWayToAnotherClient pins the preemption: a reservation of a
// client above half that is already queued for room goes back to the gate when another client
// starts to wait, so the other is served first when room comes, though it queued later.
func TestAQueuedReservationAboveHalfGivesWayToAnotherClient(t *testing.T) {
	s := newShared(t, 100)
	a, b := s.For("a"), s.For("b")
	mustReserve(t, a, 90)
	aQueued := reserveFor(context.Background(), a, 20)
	waiting(t, aQueued)
	bWaits := reserveFor(context.Background(), b, 30)
	waiting(t, bWaits)
	a.Release(25) // 35 free: room for B's 30 or A's 20, not both
	granted(t, bWaits)
	waiting(t, aQueued)
	if s.HeldBy("b") != 30 || s.HeldBy("a") != 65 {
		t.Fatalf("held %d by B, %d by A", s.HeldBy("b"), s.HeldBy("a"))
	}
	b.Release(30)
	granted(t, aQueued)
}

// TestAClientThatCannotBeToldApartIsNeverHeldToHalf pins client "": it keeps its place in the
// queue above half, where another client would give way.
func TestAClientThatCannotBeToldApartIsNeverHeldToHalf(t *testing.T) {
	s := newShared(t, 100)
	local, b := s.For(""), s.For("b")
	mustReserve(t, local, 90)
	localQueued := reserveFor(context.Background(), s, 20) // the Shared itself is client ""
	waiting(t, localQueued)
	bWaits := reserveFor(context.Background(), b, 30)
	waiting(t, bWaits)
	local.Release(25)
	granted(t, localQueued)
	waiting(t, bWaits)
	s.Release(20)
	local.Release(65)
	granted(t, bWaits)
}

func TestAReservationAtTheGateGivesUpWithItsRequestHoldingNothing(t *testing.T) {
	s := newShared(t, 100)
	a, b := s.For("a"), s.For("b")
	mustReserve(t, a, 60)
	bWaits := reserveFor(context.Background(), b, 50)
	waiting(t, bWaits)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := a.Reserve(ctx, 10); err == nil {
		t.Fatal("A's reservation above half was granted while B waits")
	}
	if s.HeldBy("a") != 60 || s.HeldBytes() != 60 {
		t.Fatalf("A holds %d, %d in all, after giving up; want 60", s.HeldBy("a"), s.HeldBytes())
	}
	a.Release(60)
	granted(t, bWaits)
}

func TestAReservationLargerThanTheWholeBudgetFailsAtOnce(t *testing.T) {
	s := newShared(t, 100)
	if err := s.For("a").Reserve(context.Background(), 101); err == nil || s.HeldBytes() != 0 {
		t.Fatalf("Reserve(101) of 100 = %v; want the budget's refusal, holding nothing", err)
	}
}
