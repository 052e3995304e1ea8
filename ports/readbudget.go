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
