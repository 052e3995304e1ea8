package application

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"time"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// Reader turns one open file into a response body, for both planes (docs/http-api.md,
// "Reading a file"): the bytes, size and mtime all come from the one descriptor, the file is
// read at most once and never beyond maxBytes+1 bytes, and the sha256 is computed over
// exactly the bytes served, which are a private snapshot nobody else can change between
// hashing and sending.
//
// Where the snapshot lives depends on its size (docs/operator-guide.md, "Memory and
// connection bounds"). A read of at most InMemoryUpTo bytes is buffered in memory: a pooled
// buffer whose whole capacity, size-class rounding included, is reserved from the memory
// budget first. With a spool, a read of at most BufferedUpTo bytes is buffered too, from the
// small send-buffer budget, and its Body can Spill: once its client turns out slow, the edge
// moves the unsent rest into the spool and the memory goes back. A larger read goes to the
// spool at once: an unnamed file the kernel fills, reserved from the spool budget. So memory
// grows neither with the file nor with how slowly the client drains it. Every budget makes a
// read wait, first come first served, while it is full; the wait ends with the request's
// context.
type Reader struct {
	budgets Budgets
	spool   ports.Spool // nil: every read is buffered in memory
	// inMemoryUpTo is the largest read buffered in memory while there is a spool:
	// InMemoryUpTo, except in the benchmarks that measure where it should be.
	inMemoryUpTo int64
	pool         *bufferPool
}

// Budgets are the bounds a Reader draws on.
type Budgets struct {
	// Memory bounds the bytes reads of at most InMemoryUpTo bytes hold in memory, and the
	// buffer a spooled read is hashed through.
	Memory ports.ReadBudget
	// Spool bounds the bytes spooled snapshots hold; unused without a spool.
	Spool ports.ReadBudget
	// Buffered bounds the memory that reads between InMemoryUpTo and BufferedUpTo hold until
	// they are sent or spilled; nil sends every such read to the spool at once. Unused
	// without a spool.
	Buffered ports.ReadBudget
}

// InMemoryUpTo is the largest read, in bytes (a file's size plus the one byte that tells
// whether it grew), buffered in memory when there is a spool; larger reads are spooled. It
// was chosen by measurement
// (docs/decisions/0082-the-read-path-budgets-snapshots-and-deadlines.md).
const InMemoryUpTo = 64 << 10

// BufferedUpTo is the largest read buffered in memory and spilled when its client is slow,
// when there is a spool and a Buffered budget; larger reads are spooled at once. It covers the
// default max_bytes (10Mi).
const BufferedUpTo = 16 << 20

// BufferedTotal is the send-buffer budget (Budgets.Buffered) the service runs with: four reads
// of 10 MiB, enough to keep a core busy sending, and little enough that a burst of stalled
// clients leaves the process well under 128 MiB
// (docs/decisions/0082-the-read-path-budgets-snapshots-and-deadlines.md).
const BufferedTotal = 48 << 20

// NewReader returns a Reader drawing on budgets; spool is nil when there is none (every read
// is then buffered in memory, whatever its size).
func NewReader(budgets Budgets, spool ports.Spool) *Reader {
	return &Reader{budgets: budgets, spool: spool, inMemoryUpTo: InMemoryUpTo, pool: &bufferPool{}}
}

// Body is a file's bytes as served. Release must be called once the bytes have been written
// out; it gives back what the body holds (a buffer or a snapshot) and its reservation.
type Body struct {
	// Size is the number of bytes served.
	Size    int64
	SHA256  string // lowercase hex of the bytes served
	ModTime time.Time
	content io.Reader
	release func()
	// spill moves the bytes from an offset on into the spool; nil when the body cannot spill.
	// err is why it could not, when the spool failed.
	spill func(sent int64) (content io.Reader, release func(), err error)
	// spillErr is why the last Spill left the body in memory, when the spool failed.
	spillErr error
}

// Content returns the body's bytes, from the first to the last, to be read once. A spooled
// body's reader is an *io.LimitedReader over a kernel file (one that implements
// syscall.Conn), so net/http sends it with sendfile(2).
func (b *Body) Content() io.Reader { return b.content }

// Spill moves the body's bytes from offset sent on into a spool snapshot, gives its memory
// back, and returns a reader of those bytes, which are exactly the ones Content had left: the
// edge calls it once a client turns out slow. It returns nil, and the body stays as it is,
// when the body is not a buffered read, has spilled already, or cannot spill now (no room in
// the spool budget at once, or the spool failed).
func (b *Body) Spill(sent int64) io.Reader {
	if b.spill == nil {
		return nil
	}
	content, release, err := b.spill(sent)
	b.spill = nil
	if content == nil {
		b.spillErr = err
		return nil
	}
	b.Release()
	b.content, b.release = content, release
	return content
}

// SpillFailure is why Spill returned nil, when the spool failed (it could not make or fill
// the snapshot): the body then goes on from memory and the edge logs the cause. It is nil
// after a spill that succeeded, was not tried, or found no room in the spool budget at once
// (waiting for room is the budget's ordinary state, not a failure).
func (b *Body) SpillFailure() error { return b.spillErr }

// Release gives the body's memory or snapshot back. It is safe to call more than once.
func (b *Body) Release() {
	if b.release != nil {
		b.release()
		b.release = nil
	}
}

// ETag returns the validator header value: "sha256:<hex>" with its double quotes.
func (b *Body) ETag() string { return `"sha256:` + b.SHA256 + `"` }

// BufferFor is the most memory one read under a ceiling of maxBytes reserves from the memory
// budget when every read is buffered in memory: maxBytes+1 bytes rounded up to the buffer's
// size class. A budget smaller than this could never grant such a read.
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
	switch r.placeFor(want) {
	case inMemory:
		return r.readInMemory(ctx, f, want, maxBytes, r.budgets.Memory)
	case buffered:
		return r.spillable(ctx)(r.readInMemory(ctx, f, want, maxBytes, r.budgets.Buffered))
	}
	return r.readSpooled(ctx, f, want, maxBytes)
}

// placement is where a body of a given size is held while it is sent.
type placement int

const (
	inMemory placement = iota // a buffer from the memory budget
	buffered                  // a buffer from the send-buffer budget, spilled when its client is slow
	spooled                   // a spool snapshot from the spool budget
)

// placeFor decides where a body of n bytes is held (see Reader).
func (r *Reader) placeFor(n int64) placement {
	switch {
	case r.spool == nil || n <= r.inMemoryUpTo:
		return inMemory
	case r.budgets.Buffered != nil && n <= BufferedUpTo:
		return buffered
	}
	return spooled
}

// spillable gives a body buffered from the send-buffer budget its spill, into the spool budget
// as the client of ctx sees it.
func (r *Reader) spillable(ctx context.Context) func(*Body, error) (*Body, error) {
	return func(body *Body, err error) (*Body, error) {
		if err == nil {
			body.spill = r.spiller(r.spoolFor(ctx), body.content.(*bytes.Reader))
		}
		return body, err
	}
}

// Hold returns a body that serves data, an answer the service built itself (an encoded
// listing), held exactly as a file read of its size is: a buffer reserved from the memory
// budget, or from the send-buffer budget and spilled once its client turns out slow, or,
// above BufferedUpTo, a spool snapshot reserved from the spool budget and filled from data,
// which is then no longer referenced. A buffer's reservation is its whole capacity. Like a
// read, it waits for room until ctx ends. The body has no SHA256.
func (r *Reader) Hold(ctx context.Context, data []byte) (*Body, error) {
	size := int64(len(data))
	hold := func(budget ports.ReadBudget) (*Body, error) {
		held := int64(cap(data))
		if err := budget.Reserve(ctx, held); err != nil {
			return nil, refusal.Internal(err)
		}
		return &Body{Size: size, content: bytes.NewReader(data), release: func() { budget.Release(held) }}, nil
	}
	switch r.placeFor(size) {
	case inMemory:
		return hold(r.budgets.Memory)
	case buffered:
		return r.spillable(ctx)(hold(r.budgets.Buffered))
	}
	snap, release, err := r.snapshot(ctx, size)
	if err != nil {
		return nil, err
	}
	if n, err := snap.Fill(bytes.NewReader(data), size); err != nil || n != size {
		release()
		return nil, readFailure(cmp.Or(err, io.ErrUnexpectedEOF))
	}
	return &Body{Size: size, content: snap.Content(), release: release}, nil
}

// readInMemory reads into a pooled buffer of want bytes reserved from budget, growing it
// while the file grows.
func (r *Reader) readInMemory(ctx context.Context, f ports.File, want, maxBytes int64, budget ports.ReadBudget) (*Body, error) {
	held := int64(capacityFor(int(want)))
	if err := budget.Reserve(ctx, held); err != nil {
		// A request abandoned while waiting, or a budget that cannot grant the read: either
		// way an internal failure, whose cause the edge logs.
		return nil, refusal.Internal(err)
	}
	buf := r.pool.get(int(want))
	n, err := io.ReadFull(f, buf.bytes)
	for err == nil && want <= maxBytes {
		// The file grew; keep reading up to maxBytes+1 in all, doubling the buffer.
		bigger := grownTo(want, maxBytes)
		more := int64(capacityFor(int(bigger))) - held
		if err = reserveGrowth(budget, more); err != nil {
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
	release := func() { r.pool.put(buf); budget.Release(held) }
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	}
	if err = checkRead(err, int64(n), maxBytes); err != nil {
		release()
		return nil, err
	}
	data := buf.bytes[:n]
	sum := sha256.Sum256(data)
	return &Body{
		Size: int64(n), SHA256: hex.EncodeToString(sum[:]), ModTime: f.ModTime(),
		content: bytes.NewReader(data), release: release,
	}, nil
}

// clientKey is the context key of the client a read's reservations are counted against.
type clientKey struct{}

// ForClient returns ctx carrying the client (Request.Client) that the reservations of reads
// made under it are counted against in a shared spool budget (ports.SharedBudget).
func ForClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

// spoolFor is the spool budget as the client of ctx sees it: its share of a shared budget.
func (r *Reader) spoolFor(ctx context.Context) ports.ReadBudget {
	if shared, ok := r.budgets.Spool.(ports.SharedBudget); ok {
		client, _ := ctx.Value(clientKey{}).(string)
		return shared.For(client)
	}
	return r.budgets.Spool
}

// spiller returns a buffered body's spill: it copies what content has left, the bytes from
// sent on, into a new snapshot reserved from the spool budget at once (never waiting: the
// response is being sent), and hands back the snapshot's reader and release. It returns no
// reader when there is no room in the spool budget or the spool fails; the body then goes on
// from memory.
func (r *Reader) spiller(spool ports.ReadBudget, content *bytes.Reader) func(int64) (io.Reader, func(), error) {
	return func(sent int64) (io.Reader, func(), error) {
		rest := content.Size() - sent
		if rest <= 0 || sent < 0 || !spool.TryReserve(rest) {
			return nil, nil, nil
		}
		snap, err := r.spool.Create()
		if err != nil {
			spool.Release(rest)
			return nil, nil, err
		}
		release := func() { _ = snap.Close(); spool.Release(rest) }
		n, err := snap.Fill(io.NewSectionReader(content, sent, rest), rest)
		if err == nil && n != rest {
			err = fmt.Errorf("the spool took %d of %d bytes", n, rest)
		}
		if err != nil {
			release()
			return nil, nil, err
		}
		return snap.Content(), release, nil
	}
}

// readSpooled copies want bytes of f into a spool snapshot, growing it while the file grows,
// then hashes the snapshot through one pooled buffer.
func (r *Reader) readSpooled(ctx context.Context, f ports.File, want, maxBytes int64) (*Body, error) {
	held := want
	// The reservation grows with the file: its release gives back what held is when it runs.
	spool := r.spoolFor(ctx)
	snap, _, err := r.snapshot(ctx, held)
	if err != nil {
		return nil, err
	}
	release := func() { _ = snap.Close(); spool.Release(held) }
	n, err := snap.Fill(f, want)
	for err == nil && n == want && want <= maxBytes {
		// The file grew; keep copying up to maxBytes+1 in all, doubling the reservation.
		bigger := grownTo(want, maxBytes)
		if err = reserveGrowth(spool, bigger-held); err != nil {
			break
		}
		var m int64
		m, err = snap.Fill(f, bigger-want)
		want, held, n = bigger, bigger, n+m
	}
	err = checkRead(err, n, maxBytes)
	var sum string
	if err == nil {
		sum, err = r.hashSnapshot(ctx, snap, n)
	}
	if err != nil {
		release()
		return nil, err
	}
	return &Body{Size: n, SHA256: sum, ModTime: f.ModTime(), content: snap.Content(), release: release}, nil
}

// snapshot reserves n bytes from the spool budget (the client of ctx's share), waiting for
// room until ctx ends, and creates an empty snapshot; release closes it and gives the n bytes
// back.
func (r *Reader) snapshot(ctx context.Context, n int64) (snap ports.Snapshot, release func(), err error) {
	spool := r.spoolFor(ctx)
	if err := spool.Reserve(ctx, n); err != nil {
		return nil, nil, refusal.Internal(err)
	}
	if snap, err = r.spool.Create(); err != nil {
		spool.Release(n)
		return nil, nil, err
	}
	return snap, func() { _ = snap.Close(); spool.Release(n) }, nil
}

// hashSnapshot is the sha256 of the first n bytes of snap, read through one pooled buffer
// reserved from the memory budget.
func (r *Reader) hashSnapshot(ctx context.Context, snap ports.Snapshot, n int64) (string, error) {
	held := int64(capacityFor(hashChunk))
	if err := r.budgets.Memory.Reserve(ctx, held); err != nil {
		return "", refusal.Internal(err)
	}
	defer r.budgets.Memory.Release(held)
	buf := r.pool.get(hashChunk)
	defer r.pool.put(buf)
	h := sha256.New()
	if err := hashInto(h, io.NewSectionReader(snap, 0, n), buf.bytes, n); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashInto writes exactly n bytes of src into h through buf; fewer is a failure.
func hashInto(h hash.Hash, src io.Reader, buf []byte, n int64) error {
	got, err := io.CopyBuffer(h, src, buf)
	if err == nil && got != n {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return readFailure(err)
	}
	return nil
}

// grownTo is the next size of a read that filled want bytes and may go on: double, but never
// beyond maxBytes+1 in all.
func grownTo(want, maxBytes int64) int64 { return min(2*want, maxBytes+1) }

// reserveGrowth takes more bytes for a read whose file grew, only if they are free at once:
// waiting for more while holding a reservation could deadlock against a reader waiting for
// this one's bytes, so a file that grows under a busy budget is refused.
func reserveGrowth(b ports.ReadBudget, more int64) error {
	if !b.TryReserve(more) {
		return refusal.IO("the file grew while it was being read")
	}
	return nil
}

// checkRead turns the outcome of reading n bytes under maxBytes into the read's error: a
// failure, too_large when more than maxBytes arrived, or nil.
func checkRead(err error, n, maxBytes int64) error {
	switch {
	case err != nil:
		return readFailure(err)
	case n > maxBytes:
		return refusal.TooLargeFor(maxBytes)
	}
	return nil
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
