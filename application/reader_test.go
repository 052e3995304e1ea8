package application_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// growingFile reports one size at open but yields more bytes, like a file appended to after
// it was opened.
type growingFile struct {
	io.Reader
	size int64
}

func (f *growingFile) Size() int64        { return f.size }
func (f *growingFile) ModTime() time.Time { return epoch }
func (f *growingFile) Path() string       { return "grow.log" }
func (f *growingFile) Stat() ports.FileStat {
	return ports.FileStat{Size: f.size, ModTime: epoch}
}
func (f *growingFile) Close() error { return nil }

func newBudget(t *testing.T, total int64) *budget.Budget {
	t.Helper()
	b, err := budget.New("--read-buffer-budget", total)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newReader is a Reader without a spool: every read is buffered in memory.
func newReader(t *testing.T, total int64) (*application.Reader, *budget.Budget) {
	t.Helper()
	b := newBudget(t, total)
	return application.NewReader(application.Budgets{Memory: b}, nil), b
}

// newSpoolReader is a Reader that spools every read, however small, into a real spool
// directory, with its two budgets.
func newSpoolReader(t *testing.T, memory, spooled int64) (*application.Reader, *budget.Budget, *budget.Budget) {
	t.Helper()
	mem, sp := newBudget(t, memory), newBudget(t, spooled)
	return application.NewReaderSpoolingAbove(application.Budgets{Memory: mem, Spool: sp}, openSpool(t), 0), mem, sp
}

// readers are the two places a snapshot may live, for the rules both must keep.
var readers = []struct {
	name string
	make func(t *testing.T) *application.Reader
}{
	{"in memory", func(t *testing.T) *application.Reader { r, _ := newReader(t, 1<<20); return r }},
	{"spooled", func(t *testing.T) *application.Reader { r, _, _ := newSpoolReader(t, 1<<20, 1<<20); return r }},
}

func TestReaderHashesWhatItServesWhenTheFileGrows(t *testing.T) {
	cases := []struct {
		rule     string
		size     int64
		content  string
		maxBytes int64
		want     string // "" means too_large
	}{
		{"a file that grew but stays within max_bytes is served whole", 3, "abcdefgh", 10, "abcdefgh"},
		{"a file that grew to exactly max_bytes is served", 2, "abcdefghij", 10, "abcdefghij"},
		{"a file that grew past max_bytes is too large", 3, "abcdefghijk", 10, ""},
		{"a file that shrank is served as read", 10, "abc", 10, "abc"},
		{"an empty file is served", 0, "", 10, ""},
		{"a large file that grew is served whole", 20, strings.Repeat("0123456789", 100), 2000, strings.Repeat("0123456789", 100)},
		{"a large file that grew past max_bytes is too large", 20, strings.Repeat("0123456789", 100), 999, ""},
	}
	for _, r := range readers {
		for _, tc := range cases {
			t.Run(r.name+"/"+tc.rule, func(t *testing.T) {
				reader := r.make(t)
				body, err := reader.Read(context.Background(), &growingFile{strings.NewReader(tc.content), tc.size}, tc.maxBytes)
				if tc.want == "" && tc.content != "" {
					if !refusal.Is(err, refusal.TooLarge) {
						t.Fatalf("Read = %v; want too_large", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer body.Release()
				if got := contentOf(t, body); got != tc.want || body.SHA256 != sha(tc.want) {
					t.Fatalf("served %q (%s)", got, body.SHA256)
				}
			})
		}
	}
}

func TestASpooledReadHoldsItsSnapshotInTheSpoolNotInMemory(t *testing.T) {
	reader, mem, sp := newSpoolReader(t, 64<<10, 2000)
	body, err := reader.Read(context.Background(), &growingFile{strings.NewReader(strings.Repeat("s", 999)), 999}, 1999)
	if err != nil {
		t.Fatal(err)
	}
	if !hasRoomFor(mem, 64<<10) {
		t.Error("a spooled body holds memory after it was hashed")
	}
	if hasRoomFor(sp, 2000-999) {
		t.Error("a spooled body does not hold its 1000 bytes (size + 1) of the spool budget")
	}
	if lr, ok := body.Content().(*io.LimitedReader); !ok || lr.N != 999 {
		t.Error("a spooled body's content is not limited to its 999 bytes")
	} else if _, ok := lr.R.(syscall.Conn); !ok {
		t.Error("a spooled body's content is not a kernel file: net/http could not sendfile it")
	}
	body.Release()
	if !hasRoomFor(sp, 2000) {
		t.Error("Release did not give the spool budget back")
	}
}

// newBufferedReader is a Reader that buffers reads above 64 KiB from a send-buffer budget and
// spills them into a real spool directory, with its budgets.
func newBufferedReader(t *testing.T, buffered, spooled int64) (*application.Reader, *budget.Budget, *budget.Budget) {
	t.Helper()
	buf, sp := newBudget(t, buffered), newBudget(t, spooled)
	budgets := application.Budgets{Memory: newBudget(t, 1<<20), Spool: sp, Buffered: buf}
	return application.NewReader(budgets, openSpool(t)), buf, sp
}

// openSpool is a spool directory in the test's temp dir.
func openSpool(t *testing.T) *osfs.Spool {
	t.Helper()
	dir, err := osfs.OpenSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dir.Close() })
	return dir
}

func TestASlowClientsBodySpillsItsRestIntoTheSpool(t *testing.T) {
	content := strings.Repeat("0123456789abcdef", 10_000) // 160,000 bytes
	reader, buf, sp := newBufferedReader(t, 1<<20, 1<<20)
	body, err := reader.Read(context.Background(), &growingFile{strings.NewReader(content), 160_000}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Release()
	head := make([]byte, 1000)
	if _, err := io.ReadFull(body.Content(), head); err != nil {
		t.Fatal(err)
	}
	if hasRoomFor(buf, 1<<20-150_000) {
		t.Fatal("a buffered body does not hold its buffer in the send-buffer budget")
	}
	rest := body.Spill(1000)
	if rest == nil {
		t.Fatal("Spill returned nothing")
	}
	if lr, ok := rest.(*io.LimitedReader); !ok || lr.N != 159_000 {
		t.Fatalf("the spilled rest is %T, not the 159,000 bytes left as a kernel file", rest)
	}
	got, err := io.ReadAll(rest)
	if err != nil || string(head)+string(got) != content || body.SHA256 != sha(content) {
		t.Fatalf("head and spilled rest make %d bytes (%v); want the body the etag describes", len(head)+len(got), err)
	}
	if !hasRoomFor(buf, 1<<20) {
		t.Error("Spill did not give the buffer back")
	}
	if hasRoomFor(sp, 1<<20-158_000) {
		t.Error("the spilled rest does not hold its bytes of the spool budget")
	}
	if body.Spill(2000) != nil {
		t.Error("a body spilled twice")
	}
	body.Release()
	if !hasRoomFor(sp, 1<<20) {
		t.Error("Release did not give the spool budget back")
	}
}

func TestABodyStaysInMemoryWhenTheSpoolHasNoRoom(t *testing.T) {
	reader, buf, sp := newBufferedReader(t, 1<<20, 200_000)
	if err := sp.Reserve(context.Background(), 100_000); err != nil {
		t.Fatal(err)
	}
	content := strings.Repeat("x", 150_000)
	body, err := reader.Read(context.Background(), &growingFile{strings.NewReader(content), 150_000}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Release()
	if body.Spill(0) != nil {
		t.Fatal("a body spilled into a spool without room for it")
	}
	if got := contentOf(t, body); got != content {
		t.Fatalf("the body kept %d bytes, want its %d", len(got), len(content))
	}
	if hasRoomFor(buf, 1<<20-150_000) {
		t.Error("a body that did not spill gave its buffer back early")
	}
}

func TestASmallOrSpooledBodyDoesNotSpill(t *testing.T) {
	small, _ := newReader(t, 1<<20)
	spooled, _, _ := newSpoolReader(t, 1<<20, 1<<20)
	for name, r := range map[string]*application.Reader{"in memory": small, "spooled": spooled} {
		body, err := r.Read(context.Background(), &growingFile{strings.NewReader("abc"), 3}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if body.Spill(1) != nil {
			t.Errorf("a body %s spilled", name)
		}
		body.Release()
	}
}

func TestASpooledReadWaitsForTheSpoolBudgetAndGivesUpWithTheRequest(t *testing.T) {
	reader, _, sp := newSpoolReader(t, 64<<10, 100)
	if err := sp.Reserve(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := reader.Read(ctx, &growingFile{strings.NewReader(strings.Repeat("w", 50)), 50}, 99)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read = %v; want it to wait for the spool and then give up with its context", err)
	}
}

func TestAFileGrowingUnderABusySpoolIsRefusedInsteadOfWaiting(t *testing.T) {
	reader, _, sp := newSpoolReader(t, 64<<10, 100)
	if err := sp.Reserve(context.Background(), 80); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := reader.Read(ctx, &growingFile{strings.NewReader(strings.Repeat("g", 60)), 10}, 90)
	r, ok := refusal.As(err)
	if !ok || r.Code != refusal.IOError || ctx.Err() != nil {
		t.Fatalf("Read = %v (ctx %v); want an immediate io_error, not a wait", err, ctx.Err())
	}
	if !hasRoomFor(sp, 20) {
		t.Error("the refused read kept its spool reservation")
	}
}

func TestWithoutASpoolALargeReadIsBufferedInMemory(t *testing.T) {
	reader, mem := newReader(t, 1<<20)
	body, err := reader.Read(context.Background(), &growingFile{strings.NewReader(strings.Repeat("m", 100<<10)), 100 << 10}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Release()
	if hasRoomFor(mem, 1<<20-100<<10) {
		t.Error("a read without a spool does not hold its buffer in the memory budget")
	}
}

// hasRoomFor reports whether n bytes can be reserved from b right now; it gives them back.
func hasRoomFor(b *budget.Budget, n int64) bool {
	if !b.TryReserve(n) {
		return false
	}
	b.Release(n)
	return true
}

func TestReaderNamesTheLimitOnTooLarge(t *testing.T) {
	reader, _ := newReader(t, 1<<20)
	_, err := reader.Read(context.Background(), &growingFile{strings.NewReader("12345"), 5}, 4)
	r, ok := refusal.As(err)
	if !ok || r.Code != refusal.TooLarge || !strings.Contains(r.Message, "4-byte") {
		t.Fatalf("Read = %v; want too_large naming the 4-byte limit", err)
	}
}

func TestReaderReservesTheBuffersWholeCapacityUntilRelease(t *testing.T) {
	reader, b := newReader(t, 8192)
	body, err := reader.Read(context.Background(), &growingFile{strings.NewReader("0123456789"), 10}, 99)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Reserve(ctx, 8192-4096+1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the read's 4 KiB buffer was not held: Reserve = %v", err)
	}
	body.Release()
	body.Release() // a second release is harmless
	if err := b.Reserve(context.Background(), 8192); err != nil {
		t.Fatalf("after Release the whole budget should be free: %v", err)
	}
}

func TestReaderWaitsForBudgetAndGivesUpWithTheRequest(t *testing.T) {
	reader, b := newReader(t, 8192)
	if err := b.Reserve(context.Background(), 8192); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := reader.Read(ctx, &growingFile{strings.NewReader("abc"), 3}, 7)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read = %v; want it to wait and then give up with its context", err)
	}
}

func TestABufferForMaxBytesCoversEveryRead(t *testing.T) {
	for _, maxBytes := range []int64{0, 1, 4095, 4096, 10 << 20, 64 << 20, 100 << 20} {
		if got := application.BufferFor(maxBytes); got < maxBytes+1 || got > (maxBytes+1)*5/4+4096 {
			t.Errorf("BufferFor(%d) = %d; want at least max_bytes+1 and at most 25%% more (or 4 KiB)", maxBytes, got)
		}
	}
}

// failingReader fails like a read from a file whose storage went away.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: "/srv/capsule/out/grow.log", Err: syscall.EIO}
}

func TestReaderTurnsAReadFailureIntoAnIOErrorWithoutAPath(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			_, err := r.make(t).Read(context.Background(), &growingFile{failingReader{}, 3}, 10)
			got, ok := refusal.As(err)
			if !ok || got.Code != refusal.IOError || !strings.Contains(got.Message, "input/output error") || strings.Contains(got.Message, "grow.log") {
				t.Fatalf("Read = %v; want io_error with the OS text and no path", err)
			}
		})
	}
}

func TestAFileGrowingUnderABusyBudgetIsRefusedInsteadOfWaiting(t *testing.T) {
	reader, b := newReader(t, 16384)
	// Another read holds the rest of the budget, so the growing read cannot get more at once.
	if err := b.Reserve(context.Background(), 16384-4096); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := reader.Read(ctx, &growingFile{strings.NewReader(strings.Repeat("g", 6000)), 10}, 8000)
	r, ok := refusal.As(err)
	if !ok || r.Code != refusal.IOError || ctx.Err() != nil {
		t.Fatalf("Read = %v (ctx %v); want an immediate io_error, not a wait", err, ctx.Err())
	}
	b.Release(16384 - 4096)
	if err := b.Reserve(context.Background(), 16384); err != nil {
		t.Fatalf("the refused read kept part of the budget: %v", err)
	}
}

// fullSpool is a spool whose filesystem is full: every snapshot fails to be made.
type fullSpool struct{}

func (fullSpool) Create() (ports.Snapshot, error) {
	return nil, &fs.PathError{Op: "open", Path: "/srv/spool", Err: syscall.ENOSPC}
}

// TestASpillTheSpoolFailsSaysWhyAndKeepsTheBody pins Body.SpillFailure: a spill the spool
// fails leaves the body whole in memory and says why, for the edge to log; a spill refused for
// want of room in the budget is no failure.
func TestASpillTheSpoolFailsSaysWhyAndKeepsTheBody(t *testing.T) {
	content := strings.Repeat("x", 150_000)
	budgets := application.Budgets{Memory: newBudget(t, 1<<20), Spool: newBudget(t, 1<<20), Buffered: newBudget(t, 1<<20)}
	body, err := application.NewReader(budgets, fullSpool{}).Read(context.Background(), &growingFile{strings.NewReader(content), 150_000}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Release()
	if body.Spill(0) != nil {
		t.Fatal("a body spilled into a spool that cannot make a snapshot")
	}
	if err := body.SpillFailure(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("SpillFailure() = %v, want the spool's ENOSPC", err)
	}
	if got := contentOf(t, body); got != content {
		t.Fatalf("the body kept %d bytes, want its %d", len(got), len(content))
	}

	roomless, _, sp := newBufferedReader(t, 1<<20, 200_000)
	if err := sp.Reserve(context.Background(), 100_000); err != nil {
		t.Fatal(err)
	}
	body, err = roomless.Read(context.Background(), &growingFile{strings.NewReader(content), 150_000}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Release()
	if body.Spill(0) != nil || body.SpillFailure() != nil {
		t.Fatalf("a spill without room in the budget: failure %v, want none", body.SpillFailure())
	}
}

// TestAnAnswerIsHeldLikeAFileBodyOfItsSize pins Reader.Hold, which holds an encoded listing: a
// small answer is reserved from the memory budget, a middle one from the send-buffer budget
// (and spills its rest once its client is slow), a large one goes into a spool snapshot at
// once; each gives its reservation back on Release.
func TestAnAnswerIsHeldLikeAFileBodyOfItsSize(t *testing.T) {
	ctx := context.Background()
	reader, buf, sp := newBufferedReader(t, 20<<20, 40<<20)
	small := []byte(strings.Repeat("s", 1000))
	middle := []byte(strings.Repeat("0123456789abcdef", 10_000)) // 160,000 bytes
	large := []byte(strings.Repeat("L", application.BufferedUpTo+1))
	body, err := reader.Hold(ctx, small)
	if err != nil || contentOf(t, body) != string(small) || !hasRoomFor(buf, 20<<20) || !hasRoomFor(sp, 40<<20) {
		t.Fatalf("a small answer: %v; want it held in memory", err)
	}
	if body.Spill(0) != nil {
		t.Error("a small answer spilled")
	}
	body.Release()

	body, err = reader.Hold(ctx, middle)
	if err != nil {
		t.Fatal(err)
	}
	if hasRoomFor(buf, 20<<20-int64(len(middle))+1) || !hasRoomFor(sp, 40<<20) {
		t.Fatal("a middle answer does not hold its bytes of the send-buffer budget alone")
	}
	head := make([]byte, 1000)
	if _, err := io.ReadFull(body.Content(), head); err != nil {
		t.Fatal(err)
	}
	rest := body.Spill(1000)
	if rest == nil || !hasRoomFor(buf, 20<<20) || hasRoomFor(sp, 40<<20-int64(len(middle))+1001) {
		t.Fatal("a middle answer's Spill did not move its rest from the send buffers into the spool")
	}
	got, err := io.ReadAll(rest)
	if err != nil || string(head)+string(got) != string(middle) {
		t.Fatalf("head and spilled rest make %d bytes (%v); want the answer", len(head)+len(got), err)
	}
	body.Release()

	body, err = reader.Hold(ctx, large)
	if err != nil {
		t.Fatal(err)
	}
	if !hasRoomFor(buf, 20<<20) || hasRoomFor(sp, 40<<20-int64(len(large))+1) {
		t.Fatal("a large answer is not held in the spool budget alone")
	}
	if _, ok := body.Content().(*io.LimitedReader); !ok || contentOf(t, body) != string(large) {
		t.Fatal("a large answer is not served whole from a kernel file")
	}
	body.Release()
	if !hasRoomFor(buf, 20<<20) || !hasRoomFor(sp, 40<<20) {
		t.Error("Release did not give the budgets back")
	}

	waiting, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := sp.Reserve(ctx, 40<<20); err != nil {
		t.Fatal(err)
	}
	defer sp.Release(40 << 20)
	if _, err := reader.Hold(waiting, large); !refusal.Is(err, refusal.IOError) || !hasRoomFor(buf, 20<<20) {
		t.Fatalf("Hold under a full spool = %v; want it to wait and give up with its context, holding nothing", err)
	}
}

// TestASpooledReadIsCountedAgainstItsClient pins the spool share's wiring: a read made under
// ForClient holds its snapshot's bytes in that client's share of a shared spool budget, a
// spilled rest and a held answer too, and gives them back on Release.
func TestASpooledReadIsCountedAgainstItsClient(t *testing.T) {
	shared, err := budget.NewShared("--spool-budget", 40<<20)
	if err != nil {
		t.Fatal(err)
	}
	budgets := application.Budgets{Memory: newBudget(t, 1<<20), Spool: shared, Buffered: newBudget(t, 1<<20)}
	reader := application.NewReader(budgets, openSpool(t))
	ctx := application.ForClient(context.Background(), "192.0.2.1/32")
	content := strings.Repeat("0123456789abcdef", 10_000) // 160,000 bytes: buffered, then spilled
	body, err := reader.Read(ctx, &growingFile{strings.NewReader(content), 160_000}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if body.Spill(1000) == nil || shared.HeldBy("192.0.2.1/32") != 159_000 {
		t.Fatalf("the spilled rest holds %d bytes of the client's share, want 159000", shared.HeldBy("192.0.2.1/32"))
	}
	body.Release()
	large := []byte(strings.Repeat("L", application.BufferedUpTo+1))
	if body, err = reader.Hold(ctx, large); err != nil {
		t.Fatal(err)
	}
	if shared.HeldBy("192.0.2.1/32") != int64(len(large)) || shared.HeldBy("") != 0 {
		t.Fatalf("a held answer's snapshot holds %d bytes of the client's share, want %d", shared.HeldBy("192.0.2.1/32"), len(large))
	}
	body.Release()
	if shared.HeldBy("192.0.2.1/32") != 0 || shared.HeldBytes() != 0 {
		t.Error("Release did not give the client's share back")
	}
}
