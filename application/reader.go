package application

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"time"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// Reader turns one open file into a response body, for both planes (docs/http-api.md,
// "Reading a file"): the
// bytes, size and mtime all come from the one descriptor, the file is read at most once and
// never beyond maxBytes+1 bytes, and the sha256 is computed over exactly the bytes served.
//
// Memory is bounded twice: a read buffers at most maxBytes+1 bytes, and every buffer is
// reserved from a shared ReadBudget first — its whole capacity, size-class rounding included —
// so concurrent large reads wait for room and the memory reads hold never exceeds the budget.
type Reader struct {
	budget ports.ReadBudget
	pool   *bufferPool
}

// NewReader returns a Reader drawing on budget.
func NewReader(budget ports.ReadBudget) *Reader {
	return &Reader{budget: budget, pool: &bufferPool{}}
}

// Body is a file's bytes as served. Release must be called once the bytes have been written
// out; it returns the buffer to the pool and its reservation to the budget.
type Body struct {
	Bytes   []byte
	SHA256  string // lowercase hex of Bytes
	ModTime time.Time
	release func()
}

// Release gives the body's memory back. It is safe to call more than once.
func (b *Body) Release() {
	if b.release != nil {
		b.release()
		b.release = nil
	}
}

// ETag returns the validator header value: "sha256:<hex>" with its double quotes.
func (b *Body) ETag() string { return `"sha256:` + b.SHA256 + `"` }

// BufferFor is the most memory one read under a ceiling of maxBytes reserves from the budget:
// maxBytes+1 bytes rounded up to the buffer's size class. A budget smaller than this could
// never grant such a read.
func BufferFor(maxBytes int64) int64 { return int64(capacityFor(int(maxBytes + 1))) }

// Read reads f whole. A file whose size is above maxBytes is refused too_large without a read;
// a file that grows past maxBytes while being read is refused too_large as well.
func (r *Reader) Read(ctx context.Context, f ports.File, maxBytes int64) (*Body, error) {
	size := f.Size()
	if size > maxBytes {
		return nil, refusal.TooLargeFor(maxBytes)
	}
	// One byte more than the size tells whether the file grew since it was opened.
	want := min(size, maxBytes) + 1
	held := int64(capacityFor(int(want)))
	if err := r.budget.Reserve(ctx, held); err != nil {
		// A request abandoned while waiting, or a budget that cannot grant the read: either
		// way an internal failure, whose cause the edge logs.
		return nil, refusal.Internal(err)
	}
	buf := r.pool.get(int(want))
	n, err := io.ReadFull(f, buf.bytes)
	for err == nil && want <= maxBytes {
		// The file grew; keep reading up to maxBytes+1 in all, doubling the buffer.
		bigger := min(2*want, maxBytes+1)
		more := int64(capacityFor(int(bigger))) - held
		if !r.budget.TryReserve(more) {
			// Waiting for more while holding a reservation could deadlock against a reader
			// waiting for this one's memory; a file that grows under a busy budget is refused.
			err = refusal.IO("the file grew while it was being read")
			break
		}
		if int(bigger) <= cap(buf.bytes) {
			buf.bytes = buf.bytes[:bigger]
		} else {
			next := r.pool.get(int(bigger))
			copy(next.bytes, buf.bytes[:n])
			r.pool.put(buf)
			buf = next
		}
		want, held = bigger, held+more
		var m int
		m, err = io.ReadFull(f, buf.bytes[n:])
		n += m
	}
	release := func() { r.pool.put(buf); r.budget.Release(held) }
	switch {
	case err == nil || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
	default:
		release()
		return nil, readFailure(err)
	}
	if int64(n) > maxBytes {
		release()
		return nil, refusal.TooLargeFor(maxBytes)
	}
	data := buf.bytes[:n]
	sum := sha256.Sum256(data)
	return &Body{Bytes: data, SHA256: hex.EncodeToString(sum[:]), ModTime: f.ModTime(), release: release}, nil
}

// readFailure turns a read error into an io_error whose message holds the operating system's
// description of the failure but never the file's path; the whole error is kept as its cause,
// for the log. A refusal passes through unchanged.
func readFailure(err error) error {
	if r, ok := refusal.As(err); ok {
		return r
	}
	detail := err
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		detail = pathErr.Err
	}
	return refusal.IO(detail.Error()).Wrapping(err)
}
