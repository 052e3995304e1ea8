// Package budget implements ports.ReadBudget: a fixed number of bytes that concurrent reads
// share, so a burst of large reads waits for room instead of exhausting memory
// (--read-buffer-budget) or the spool (--spool-budget). TotalFor and SpoolTotalFor decide
// those numbers for a manifest.
package budget

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/manifest"
	"github.com/resplane/resplane/ports"
)

// ErrExceedsBudget is wrapped by Reserve's error for a request larger than the whole budget,
// which could never be granted.
var ErrExceedsBudget = errors.New("budget exceeded")

// Budget is a weighted semaphore of bytes. Waiters are served first come, first served: a
// large reservation waiting for room is not overtaken by smaller ones that arrive after it, so
// it cannot starve. It also keeps the readings an operator watches (HeldBytes, WaitingBytes,
// Waits, WaitedTime), which the metrics adapter exports. A Budget is safe for concurrent use.
type Budget struct {
	flag  string // the setting that sets total, for messages
	total int64
	sem   *semaphore.Weighted

	held, waiting atomic.Int64  // bytes reserved; bytes asked for by reservations waiting now
	waits         atomic.Uint64 // reservations that had to wait
	waited        atomic.Int64  // nanoseconds spent waiting, over all reservations
}

var _ ports.ReadBudget = (*Budget)(nil)

// New returns a budget of total bytes, set by the setting flag (such as
// "--read-buffer-budget"), which its error messages name; total must be positive.
func New(flag string, total int64) (*Budget, error) {
	if total <= 0 {
		return nil, fmt.Errorf("%s must be positive, got %d bytes", flag, total)
	}
	return &Budget{flag: flag, total: total, sem: semaphore.NewWeighted(total)}, nil
}

// DefaultTotal is the memory budget when --read-buffer-budget is not given and no read
// buffered in memory needs more.
const DefaultTotal = 256 << 20

// TotalFor returns the memory budget to serve m with: given (0 when --read-buffer-budget was
// not given) or the default, which grows to what one read buffered in memory under the largest
// declared max_bytes reserves (application.BufferFor), so a valid manifest always launches.
// spooled says whether reads above application.InMemoryUpTo go to the spool: then no read
// buffers more than that, and the default never grows. A given budget smaller than what one
// such read reserves could never grant it and is refused.
func TotalFor(m manifest.Manifest, given int64, spooled bool) (int64, error) {
	largest := largestMaxBytes(m)
	if spooled {
		largest = min(largest, application.InMemoryUpTo-1)
	}
	need := application.BufferFor(largest)
	if given == 0 {
		return max(DefaultTotal, need), nil
	}
	if given < need {
		return 0, fmt.Errorf("--read-buffer-budget (%d bytes) must be at least %d bytes: one read of a file of max_bytes needs that much", given, need)
	}
	return given, nil
}

// DefaultSpoolTotal is the spool budget when --spool-budget is not given and no declared
// max_bytes needs more.
const DefaultSpoolTotal = 2 << 30

// SpoolTotalFor returns the spool budget to serve m with: given (0 when --spool-budget was not
// given) or the default, which grows to one spooled read of the largest declared max_bytes
// (max_bytes + 1), so a valid manifest always launches. A given budget smaller than that could
// never grant such a read and is refused.
func SpoolTotalFor(m manifest.Manifest, given int64) (int64, error) {
	need := largestMaxBytes(m) + 1
	if given == 0 {
		return max(DefaultSpoolTotal, need), nil
	}
	if given < need {
		return 0, fmt.Errorf("--spool-budget (%d bytes) must be at least %d bytes: one read of a file of max_bytes needs that much", given, need)
	}
	return given, nil
}

// largestMaxBytes is the largest max_bytes m declares, 0 when it declares no plane.
func largestMaxBytes(m manifest.Manifest) int64 {
	largest := int64(0)
	if m.Files != nil {
		largest = m.Files.MaxBytes.Int64()
	}
	if m.PeerFiles != nil {
		largest = max(largest, m.PeerFiles.MaxBytes.Int64())
	}
	return largest
}

// Reserve implements ports.ReadBudget. It blocks until n bytes are free or ctx is done, in
// which case it returns ctx.Err() and holds nothing. A request for more than the whole budget
// fails at once with an error wrapping ErrExceedsBudget; a negative n is an error too.
func (b *Budget) Reserve(ctx context.Context, n int64) error {
	switch {
	case n < 0:
		return fmt.Errorf("%s: cannot reserve a negative %d bytes", b.flag, n)
	case n > b.total:
		return fmt.Errorf("%w: reserving %d bytes, but the whole budget (%s) is %d bytes", ErrExceedsBudget, n, b.flag, b.total)
	}
	if err := ctx.Err(); err != nil {
		return err // a request already abandoned takes nothing, even when there is room
	}
	if b.sem.TryAcquire(n) {
		b.held.Add(n)
		return nil
	}
	b.waits.Add(1)
	b.waiting.Add(n)
	start := time.Now()
	err := b.sem.Acquire(ctx, n)
	b.waited.Add(int64(time.Since(start)))
	b.waiting.Add(-n)
	if err == nil {
		b.held.Add(n)
	}
	return err
}

// TryReserve implements ports.ReadBudget: it takes n bytes only if they are free now and no
// earlier reservation is waiting, and never blocks.
func (b *Budget) TryReserve(n int64) bool {
	if n < 0 || n > b.total || !b.sem.TryAcquire(n) {
		return false
	}
	b.held.Add(n)
	return true
}

// Release implements ports.ReadBudget. Releasing more than is held, or a negative n, is a
// programming error and panics, as it would otherwise corrupt the accounting for every
// later reader.
func (b *Budget) Release(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("budget: negative release of %d bytes", n))
	}
	b.sem.Release(n)
	b.held.Add(-n)
}

// LimitBytes is the whole budget.
func (b *Budget) LimitBytes() int64 { return b.total }

// HeldBytes is what reservations hold now.
func (b *Budget) HeldBytes() int64 { return b.held.Load() }

// WaitingBytes is what the reservations waiting for room now have asked for.
func (b *Budget) WaitingBytes() int64 { return b.waiting.Load() }

// Waits counts the reservations that found no room at once and had to wait (or gave up
// waiting), since the budget was made.
func (b *Budget) Waits() uint64 { return b.waits.Load() }

// WaitedTime is the time all reservations together have spent waiting for room.
func (b *Budget) WaitedTime() time.Duration { return time.Duration(b.waited.Load()) }

// Sizes are the byte budgets a launch serves with, decided once, before anything is bound:
// the memory budget with a spool and without one (whether the spool directory takes unnamed
// files is known only once it is open), and the spool budget.
type Sizes struct {
	// Memory is the memory budget when reads above application.InMemoryUpTo are spooled.
	Memory int64
	// Unspooled is the memory budget when every read is buffered in memory: the default grows
	// to one read of the largest declared max_bytes; a budget given explicitly is kept as it
	// is, and a read larger than all of it then fails io_error.
	Unspooled int64
	// Spool is the spool budget.
	Spool int64
}

// Plan decides the Sizes to serve m with from --read-buffer-budget and --spool-budget (each 0
// when not given). Its error is a given budget that could never grant one read.
func Plan(m manifest.Manifest, readBuffer, spool int64) (Sizes, error) {
	memory, err := TotalFor(m, readBuffer, true)
	if err != nil {
		return Sizes{}, err
	}
	spoolTotal, err := SpoolTotalFor(m, spool)
	if err != nil {
		return Sizes{}, err
	}
	unspooled := readBuffer
	if readBuffer == 0 {
		// With nothing given, TotalFor only grows the default, which cannot fail.
		unspooled, _ = TotalFor(m, 0, false)
	}
	return Sizes{Memory: memory, Unspooled: unspooled, Spool: spoolTotal}, nil
}
