package logging

import (
	"io"
	"sync"
	"time"
)

// BatchDelay is the longest a line waits in a Batch before it is written.
const BatchDelay = time.Millisecond

// batchMax is how many bytes of lines a Batch holds at most: a line that brings it to that
// is written at once, with every line before it, by the caller that logged it.
const batchMax = 64 << 10

// Batch is the writer under the service's log. A line at info level or below waits, for at
// most BatchDelay, to be written in one write with the lines logged meanwhile: under load the
// access log costs one write per batch instead of one per request. Any other line is written
// at once, after the lines waiting, so that the log keeps the order lines were logged in and
// a warning or an error is never held back. The lines waiting are at most batchMax bytes, so
// a slow stderr holds callers back as it would without the Batch, and never grows memory.
type Batch struct {
	mu      sync.Mutex
	w       io.Writer
	pending []byte // guarded by mu
	delay   time.Duration
	timer   *time.Timer // writes pending delay after its first line
	closed  bool        // guarded by mu: lines are written at once
}

// newBatch is a Batch writing to w, where a line waits at most delay.
func newBatch(w io.Writer, delay time.Duration) *Batch {
	b := &Batch{w: w, delay: delay}
	b.timer = time.AfterFunc(time.Hour, b.flush)
	b.timer.Stop()
	return b
}

// later holds line, a copy of p, until the batch is written.
func (b *Batch) later(p []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		_, err := b.w.Write(p)
		return err
	}
	b.pending = append(b.pending, p...)
	switch {
	case len(b.pending) >= batchMax:
		return b.writePendingLocked()
	case len(b.pending) == len(p):
		b.timer.Reset(b.delay)
	}
	return nil
}

// now writes the lines waiting, then p.
func (b *Batch) now(p []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.writePendingLocked(); err != nil {
		return err
	}
	_, err := b.w.Write(p)
	return err
}

// flush writes the lines waiting; the timer calls it.
func (b *Batch) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.writePendingLocked() // a failing stderr loses the lines, as it would one by one
}

func (b *Batch) writePendingLocked() error {
	if len(b.pending) == 0 {
		return nil
	}
	_, err := b.w.Write(b.pending)
	b.pending = b.pending[:0]
	return err
}

// Close writes the lines waiting; every later line is written at once.
func (b *Batch) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.timer.Stop()
	return b.writePendingLocked()
}

// nowWriter and laterWriter are a Batch's two ways in, as the io.Writers that zerolog's
// console writer writes to.
type (
	nowWriter   struct{ b *Batch }
	laterWriter struct{ b *Batch }
)

func (w nowWriter) Write(p []byte) (int, error)   { return written(p, w.b.now(p)) }
func (w laterWriter) Write(p []byte) (int, error) { return written(p, w.b.later(p)) }

// written is what Write returns for p, written or held with err.
func written(p []byte, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return len(p), nil
}
