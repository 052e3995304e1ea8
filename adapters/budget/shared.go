package budget

import (
	"context"
	"sync"

	"github.com/resplane/resplane/ports"
)

// Shared is a Budget shared out among clients (ports.SharedBudget; docs/operator-guide.md,
// "Memory and connection bounds"): no client is granted a reservation that would take it
// above half of the budget while a reservation of another client is waiting for room. Such a
// reservation waits at a gate in front of the budget instead, until no other client waits or
// it fits its half; one already waiting in the budget's queue when another client starts to
// wait is taken out of the queue and sent back to the gate, so the other is not queued behind
// it. What a client already holds is never taken back: the minimum send rate bounds how long a
// slow client keeps it. Client "" is never held to its half, but it waits like any other.
type Shared struct {
	*Budget
	half int64

	mu      sync.Mutex
	held    map[string]int64     // bytes held, per client
	queued  map[*queued]struct{} // reservations waiting in the budget's queue
	changed chan struct{}        // closed, and replaced, whenever held or queued changes
}

// queued is a reservation waiting in the budget's queue, which cancel takes out of it.
type queued struct {
	client string
	n      int64
	cancel context.CancelFunc
}

var _ ports.SharedBudget = (*Shared)(nil)

// NewShared returns a shared budget of total bytes (see New).
func NewShared(flag string, total int64) (*Shared, error) {
	b, err := New(flag, total)
	if err != nil {
		return nil, err
	}
	return &Shared{Budget: b, half: total / 2, held: map[string]int64{}, queued: map[*queued]struct{}{},
		changed: make(chan struct{})}, nil
}

// For implements ports.SharedBudget.
func (s *Shared) For(client string) ports.ReadBudget { return share{s, client} }

// Reserve implements ports.ReadBudget for client "".
func (s *Shared) Reserve(ctx context.Context, n int64) error { return s.reserve(ctx, "", n) }

// TryReserve implements ports.ReadBudget for client "".
func (s *Shared) TryReserve(n int64) bool { return s.tryReserve("", n) }

// Release implements ports.ReadBudget for client "".
func (s *Shared) Release(n int64) { s.release("", n) }

// HeldBy is what client's reservations hold now.
func (s *Shared) HeldBy(client string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[client]
}

// share is the budget as one client sees it.
type share struct {
	s      *Shared
	client string
}

func (c share) Reserve(ctx context.Context, n int64) error { return c.s.reserve(ctx, c.client, n) }
func (c share) TryReserve(n int64) bool                    { return c.s.tryReserve(c.client, n) }
func (c share) Release(n int64)                            { c.s.release(c.client, n) }

// overShare reports whether n more bytes would take client above its half while another
// client waits in the queue. The caller holds mu.
func (s *Shared) overShare(client string, n int64) bool {
	if client == "" || s.held[client]+n <= s.half {
		return false
	}
	for q := range s.queued {
		if q.client != client {
			return true
		}
	}
	return false
}

// notify wakes every reservation waiting at the gate. The caller holds mu.
func (s *Shared) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Shared) reserve(ctx context.Context, client string, n int64) error {
	for {
		s.mu.Lock()
		if s.overShare(client, n) {
			changed := s.changed
			s.mu.Unlock()
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if ctx.Err() == nil && s.Budget.TryReserve(n) {
			s.held[client] += n
			s.mu.Unlock()
			return nil
		}
		inQueue, cancel := context.WithCancel(ctx)
		q := &queued{client: client, n: n, cancel: cancel}
		s.queued[q] = struct{}{}
		// Whoever would now be above its half while q waits goes back to the gate.
		for other := range s.queued {
			if other.client != client && other.client != "" && s.held[other.client]+other.n > s.half {
				other.cancel()
			}
		}
		s.mu.Unlock()
		err := s.Budget.Reserve(inQueue, n)
		s.mu.Lock()
		delete(s.queued, q)
		if err == nil {
			s.held[client] += n
		}
		s.notify()
		s.mu.Unlock()
		preempted := err != nil && inQueue.Err() != nil && ctx.Err() == nil
		cancel()
		if !preempted {
			return err
		}
		// Sent back to the gate by another client's wait.
	}
}

func (s *Shared) tryReserve(client string, n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overShare(client, n) || !s.Budget.TryReserve(n) {
		return false
	}
	s.held[client] += n
	return true
}

func (s *Shared) release(client string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Budget.Release(n)
	if s.held[client] -= n; s.held[client] <= 0 {
		delete(s.held, client)
	}
	s.notify()
}
