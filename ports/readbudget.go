package ports

import "context"

// ReadBudget bounds the total bytes that concurrent reads may hold in memory. A read reserves
// what it will buffer before reading and releases it after the response is written, so a burst
// of large reads waits for room instead of exhausting memory.
type ReadBudget interface {
	// Reserve blocks until n bytes are available or ctx is done (then it returns ctx's error
	// and reserves nothing). A request for more than the whole budget is an error at once.
	Reserve(ctx context.Context, n int64) error
	// TryReserve takes n bytes only if they are available at once (and nobody is waiting
	// before it); it never blocks. A read that already holds a reservation uses it to grow,
	// since waiting while holding could deadlock against a reader waiting for that memory.
	TryReserve(n int64) bool
	// Release returns n previously reserved bytes.
	Release(n int64)
}

// SharedBudget is a ReadBudget shared out among clients (the spool budget): a reservation made
// through For(client) is counted against that client, and no client is granted a reservation
// that takes it above half of the budget while another client's reservation waits. The client
// "" is one the edge cannot tell apart from others (a loopback connection): it is never held
// to the share, but its waiting reservations hold the others to theirs.
type SharedBudget interface {
	ReadBudget
	// For returns the budget as client's reservations see it; Release on it gives back bytes
	// that client reserved.
	For(client string) ReadBudget
}
