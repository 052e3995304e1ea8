package budget

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func newBudget(t *testing.T, total int64) *Budget {
	t.Helper()
	b, err := New("--read-buffer-budget", total)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reserveAsync starts Reserve in a goroutine and returns the channel its result arrives on.
func reserveAsync(ctx context.Context, b *Budget, n int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Reserve(ctx, n) }()
	return done
}

func waiting(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("Reserve returned (%v) while it should wait", err)
	case <-time.After(50 * time.Millisecond):
	}
}

func granted(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Reserve still waiting")
	}
}

// hasRoomFor reports whether n bytes can be reserved right now; it gives them back.
func hasRoomFor(b *Budget, n int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if b.Reserve(ctx, n) != nil {
		return false
	}
	b.Release(n)
	return true
}

func TestNewRefusesAnEmptyBudget(t *testing.T) {
	for _, total := range []int64{0, -1} {
		if _, err := New("--read-buffer-budget", total); err == nil {
			t.Errorf("New(%d) succeeded", total)
		}
	}
}

func TestReserveWaitsForRelease(t *testing.T) {
	b := newBudget(t, 100)
	ctx := context.Background()
	if err := b.Reserve(ctx, 80); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve(ctx, 20); err != nil {
		t.Fatalf("reserving the rest: %v", err)
	}
	done := reserveAsync(ctx, b, 30)
	waiting(t, done)
	b.Release(20)
	waiting(t, done)
	b.Release(80)
	granted(t, done)
	if !hasRoomFor(b, 70) || hasRoomFor(b, 71) {
		t.Error("after the releases, 70 bytes should be free and no more")
	}
}

func TestReserveMoreThanTheWholeBudgetFailsAtOnce(t *testing.T) {
	b := newBudget(t, 100)
	if err := b.Reserve(context.Background(), 100); err != nil {
		t.Fatalf("reserving the whole budget: %v", err)
	}
	// Even with the budget fully held, the answer is immediate.
	err := b.Reserve(context.Background(), 101)
	if !errors.Is(err, ErrExceedsBudget) {
		t.Fatalf("err = %v, want ErrExceedsBudget", err)
	}
	for _, want := range []string{"101", "100", "--read-buffer-budget"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not mention %q", err, want)
		}
	}
}

func TestCancelledReserveHoldsNothing(t *testing.T) {
	b := newBudget(t, 100)
	if err := b.Reserve(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := reserveAsync(ctx, b, 50)
	waiting(t, done)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Reserve ignored the cancellation")
	}
	b.Release(100)
	if !hasRoomFor(b, 100) {
		t.Error("a cancelled Reserve kept part of the budget")
	}

	// A context that is already done fails even when there is room.
	if err := b.Reserve(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve with a done context = %v, want context.Canceled", err)
	}
	if !hasRoomFor(b, 100) {
		t.Error("Reserve with a done context kept part of the budget")
	}
}

func TestLargeWaiterIsNotOvertaken(t *testing.T) {
	b := newBudget(t, 100)
	ctx := context.Background()
	if err := b.Reserve(ctx, 60); err != nil {
		t.Fatal(err)
	}
	large := reserveAsync(ctx, b, 100)
	waiting(t, large)
	small := reserveAsync(ctx, b, 10) // would fit now, but arrives after the large one
	waiting(t, small)
	b.Release(60)
	granted(t, large)
	waiting(t, small)
	b.Release(100)
	granted(t, small)
}

func TestMisuse(t *testing.T) {
	b := newBudget(t, 100)
	if err := b.Reserve(context.Background(), -1); err == nil {
		t.Error("negative Reserve succeeded")
	}
	for name, release := range map[string]func(){
		"negative release":       func() { b.Release(-1) },
		"release more than held": func() { b.Release(1) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("did not panic")
				}
			}()
			release()
		})
	}
}

func TestTryReserveNeverBlocks(t *testing.T) {
	b, err := New("--read-buffer-budget", 100)
	if err != nil {
		t.Fatal(err)
	}
	if !b.TryReserve(60) {
		t.Fatal("60 of 100 free bytes were refused")
	}
	if b.TryReserve(41) {
		t.Fatal("41 bytes were granted with only 40 free")
	}
	if b.TryReserve(101) || b.TryReserve(-1) {
		t.Fatal("an impossible reservation was granted")
	}
	b.Release(60)
	if !b.TryReserve(100) {
		t.Fatal("the whole budget was refused once free")
	}
}

func TestReadingsFollowWhatIsHeldAndWaitedFor(t *testing.T) {
	b := newBudget(t, 100)
	ctx := context.Background()
	reading := func(wantHeld, wantWaiting int64, wantWaits uint64) {
		t.Helper()
		if b.LimitBytes() != 100 || b.HeldBytes() != wantHeld || b.WaitingBytes() != wantWaiting || b.Waits() != wantWaits {
			t.Fatalf("limit %d held %d waiting %d waits %d; want 100 %d %d %d",
				b.LimitBytes(), b.HeldBytes(), b.WaitingBytes(), b.Waits(), wantHeld, wantWaiting, wantWaits)
		}
	}
	reading(0, 0, 0)
	if err := b.Reserve(ctx, 70); err != nil {
		t.Fatal(err)
	}
	if !b.TryReserve(10) {
		t.Fatal("TryReserve found no room")
	}
	reading(80, 0, 0)

	done := reserveAsync(ctx, b, 50)
	waiting(t, done)
	reading(80, 50, 1)
	b.Release(70)
	granted(t, done)
	reading(60, 0, 1)
	if b.WaitedTime() <= 0 {
		t.Errorf("WaitedTime %v after a reservation waited", b.WaitedTime())
	}

	cancelled, cancel := context.WithCancel(ctx)
	gaveUp := reserveAsync(cancelled, b, 90)
	waiting(t, gaveUp)
	reading(60, 90, 2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Reserve: %v", err)
	}
	reading(60, 0, 2)
	b.Release(60)
	reading(0, 0, 2)
}
