package blackbox_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbPattern is size bytes that no short prefix repeats, so a misplaced block shows.
func bbPattern(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*7 + i/4093)
	}
	return b
}

// bbStalledBigReads starts a capsule serving a 10 MiB file, out/big.bin (its bytes are
// big), and 100 connections that each requested it and never read, every read traced.
func bbStalledBigReads(t *testing.T) (p *harness.Process, big []byte) {
	t.Helper()
	big = bbPattern(10 << 20)
	p = harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""),
		Files: fixture.Layout{"out/big.bin": string(big)}})
	addr := p.Ready.Listen
	harness.Stall(t, addr, harness.RequestText(addr, "GET", "/resources/files/big.bin"), 100)
	harness.AwaitOK(t, p.Ready.Trace, "resource_read", 100, 60*time.Second)
	return p, big
}

// TestStalledClientsHoldNeitherMemoryNorTheNextRead pins docs/operator-guide.md, "Memory and
// connection bounds": 100 connections that each request a 10 MiB file and then never read
// hold its snapshot in the spool, not in memory, so a new 10 MiB read still completes, whole
// and with its etag (within harness.StallTolerance; its time is logged), and the process's
// peak RSS stays under 128 MiB.
func TestStalledClientsHoldNeitherMemoryNorTheNextRead(t *testing.T) {
	p, big := bbStalledBigReads(t)
	addr := p.Ready.Listen

	start := time.Now()
	r := harness.RequestWithin(t, addr, "GET", "/resources/files/big.bin", harness.StallTolerance)
	elapsed := time.Since(start)
	if r.Status != 200 || !bytes.Equal(r.Body, big) || r.Get("etag") != harness.ETag(big) {
		t.Fatalf("status %d, %d body bytes, etag %s: want the whole file and its etag", r.Status, len(r.Body), r.Get("etag"))
	}
	rss := p.RequirePeakRSSUnder(t, 128<<20)
	t.Logf("with 100 stalled 10 MiB reads: a new read took %v; peak RSS %.1f MiB", elapsed, float64(rss)/(1<<20))
}

// TestAStalledResponseIsClosedAndItsSnapshotReleased pins docs/operator-guide.md, "Memory and
// connection bounds": a response that makes no progress for --send-timeout is closed and its
// snapshot released. With a spool budget that holds one 17 MiB snapshot (a file above 16 MiB
// is spooled at once), a second read waits for the stalled one's and is served once the send
// timeout has closed it; the stalled client finds its connection closed after a partial body.
func TestAStalledResponseIsClosedAndItsSnapshotReleased(t *testing.T) {
	big := bbPattern(17 << 20)
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", "17Mi"), Args: []string{"--send-timeout", "1s", "--spool-budget", "18Mi"},
		Files: fixture.Layout{"out/big.bin": string(big)}})
	addr := p.Ready.Listen
	stalled := harness.Stall(t, addr, harness.RequestText(addr, "GET", "/resources/files/big.bin"), 1)[0]
	harness.AwaitOK(t, p.Ready.Trace, "resource_read", 1, 10*time.Second)

	start := time.Now()
	r := harness.RequestWithin(t, addr, "GET", "/resources/files/big.bin", 10*time.Second)
	waited := time.Since(start)
	if r.Status != 200 || !bytes.Equal(r.Body, big) {
		t.Fatalf("status %d, %d body bytes: want the whole file", r.Status, len(r.Body))
	}
	if waited < 900*time.Millisecond {
		t.Errorf("the second read took %v: it did not wait for the stalled read's snapshot", waited)
	}
	_ = stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.Copy(io.Discard, stalled)
	if errors.Is(err, os.ErrDeadlineExceeded) || got >= int64(len(big)) {
		t.Fatalf("the stalled connection: %d bytes, %v; want it closed after a partial body", got, err)
	}
	t.Logf("the second read waited %v; the stalled client got %d bytes before the close", waited, got)
}

// TestARewriteInPlaceNeverServesABodyThatDiffersFromItsEtag pins docs/operator-guide.md,
// "Writing files that are read while you write them", wherever a body's snapshot lives: while
// a writer rewrites the file in place (overwrites, truncations and regrowth), every 200
// carries a content-length and an etag that describe exactly its body, torn or not — for a
// 1 MiB file sent from memory, the same read slowly enough that its rest moves to the spool,
// and a 17 MiB file spooled at once. A read that meets the file growing while its budget is
// busy may be refused io_error instead (docs/operator-guide.md, "Memory and connection
// bounds"); nothing else may. The slow client reads through a 64 KiB receive buffer,
// so the service cannot hand it the whole body at once and most of its bodies spill
// (TestASlowClientsBodySpillsToTheSpoolWhole pins that one does).
func TestARewriteInPlaceNeverServesABodyThatDiffersFromItsEtag(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		reads int
		pause time.Duration // after the first 64 KiB of each body
	}{
		{"sent from memory", 1 << 20, 200, 0},
		{"spilled to the spool by a slow client", 12 << 20, 16, 200 * time.Millisecond},
		{"spooled", 17 << 20, 24, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bbRewriteInPlace(t, tc.size, tc.reads, tc.pause)
		})
	}
}

func bbRewriteInPlace(t *testing.T, size, reads int, pause time.Duration) {
	t.Helper()
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", "17Mi"),
		Files: fixture.Layout{"out/live.bin": string(bbPattern(size))}})
	addr := p.Ready.Listen
	f, err := os.OpenFile(filepath.Join(p.Workdir, "out/live.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// The test allocates as little as it can: under the race detector every fresh allocation
	// costs page faults on its shadow memory, which once made this test take minutes.
	original := bbPattern(size)
	block := make([]byte, 64<<10)
	// One buffer per concurrent read, grown once and kept (a sync.Pool would drop them at
	// every collection).
	bodies := make(chan *bytes.Buffer, 8)
	for range cap(bodies) {
		buf := new(bytes.Buffer)
		buf.Grow(size + 64<<10)
		bodies <- buf
	}
	var served, torn, grew atomic.Int64
	writes := bbRace(t, reads, func(i int) error {
		if i%5 == 4 {
			return f.Truncate(int64(i%3) * int64(size) / 3)
		}
		bbFill(block, byte(i))
		_, err := f.WriteAt(block, int64(i*(64<<10))%int64(size))
		return err
	}, func(int) error {
		buf := <-bodies
		defer func() { bodies <- buf }()
		status, header, body, err := bbFetchPausingInto(addr, "/resources/files/live.bin", pause, buf)
		switch {
		case err != nil:
			return err
		case status == 500 && bytes.Contains(body, []byte("grew while it was being read")):
			grew.Add(1)
			return nil
		case status != 200:
			return fmt.Errorf("status %d: %s", status, body)
		case header.Get("etag") != harness.ETag(body) || header.Get("content-length") != strconv.Itoa(len(body)):
			return fmt.Errorf("etag %s and content-length %s do not describe the %d-byte body (sha256 %s)",
				header.Get("etag"), header.Get("content-length"), len(body), harness.SHA256Hex(body))
		}
		served.Add(1)
		if !bytes.Equal(body, original) {
			torn.Add(1)
		}
		return nil
	})
	spilled := strings.Count(p.Stderr(), `"spilled":true`)
	t.Logf("%d in-place writes; %d reads served, %d of them not the original file, %d spilled; %d refused as growing",
		writes, served.Load(), torn.Load(), spilled, grew.Load())
	if writes < int64(reads)/2 {
		t.Errorf("the writer wrote only %d times: the race was not exercised", writes)
	}
}

// TestASlowClientsBodySpillsToTheSpoolWhole pins docs/operator-guide.md, "Memory and
// connection bounds": a 12 MiB body sent from memory to a client that stops reading moves its
// unsent rest to the spool (the access log says "spilled":true), and the client still gets
// the whole body its etag describes.
func TestASlowClientsBodySpillsToTheSpoolWhole(t *testing.T) {
	big := bbPattern(12 << 20)
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", "12Mi"), Files: fixture.Layout{"out/big.bin": string(big)}})
	status, header, body, err := bbFetchPausing(p.Ready.Listen, "/resources/files/big.bin", 300*time.Millisecond)
	if err != nil || status != 200 || !bytes.Equal(body, big) || header.Get("etag") != harness.ETag(big) {
		t.Fatalf("status %d, %d body bytes, etag %s (%v): want the whole file and its etag", status, len(body), header.Get("etag"), err)
	}
	// The access log line follows the last byte of the body.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.Stderr(), `"spilled":true`) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(p.Stderr(), `"spilled":true`); n != 1 {
		t.Fatalf("%d access log lines say the body spilled, want 1; stderr:\n%s", n, p.Stderr())
	}
}

// bbFill sets every byte of b to v, doubling what it has copied.
func bbFill(b []byte, v byte) {
	if len(b) == 0 {
		return
	}
	b[0] = v
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// bbFetchPausing sends a raw GET for target and reads the answer; with a pause it reads
// through a 64 KiB receive buffer and pauses that long after the first 64 KiB of the body, as
// a client slower than the service's spill window would.
func bbFetchPausing(addr, target string, pause time.Duration) (int, http.Header, []byte, error) {
	return bbFetchPausingInto(addr, target, pause, new(bytes.Buffer))
}

// bbFetchPausingInto is bbFetchPausing reading the body into buf, which it resets first; the
// body returned is buf's bytes.
func bbFetchPausingInto(addr, target string, pause time.Duration, buf *bytes.Buffer) (int, http.Header, []byte, error) {
	var d net.Dialer
	if pause > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var err error
			_ = c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) })
			return err
		}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, nil, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, harness.RequestText(addr, "GET", target)); err != nil {
		return 0, nil, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil, nil, err
	}
	buf.Reset()
	if _, err := io.CopyN(buf, resp.Body, 64<<10); err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, nil, err
	}
	time.Sleep(pause)
	_, err = buf.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header, buf.Bytes(), err
}

// TestASpoolWithoutUnnamedFilesFallsBackToMemoryWithOneWarning pins docs/operator-guide.md,
// "The spool": on a filesystem that cannot make unnamed files (procfs here) the service still
// starts, says so in exactly one warning line, and serves large files from memory.
func TestASpoolWithoutUnnamedFilesFallsBackToMemoryWithOneWarning(t *testing.T) {
	big := bbPattern(12 << 20)
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", "12Mi"), Args: []string{"--spool-dir", "/proc"},
		Files: fixture.Layout{"out/big.bin": string(big)}})
	r := harness.Get(t, p.Ready.Listen, "/resources/files/big.bin")
	if r.Status != 200 || !bytes.Equal(r.Body, big) || r.Get("etag") != harness.ETag(big) {
		t.Fatalf("status %d, %d body bytes: want the whole file and its etag", r.Status, len(r.Body))
	}
	if n := strings.Count(p.Stderr(), `"level":"warn"`); n != 1 || !strings.Contains(p.Stderr(), "O_TMPFILE") {
		t.Fatalf("%d warning lines, want exactly one naming O_TMPFILE; stderr:\n%s", n, p.Stderr())
	}
}

// TestShutdownEndsStalledSendsWhenItBegins pins docs/operator-guide.md, "Signals": once
// SIGTERM arrives, a response whose client takes no byte is ended at its next progress check
// (at most 1 s) instead of holding the shutdown for its grace (10 s): with 100 clients that
// each requested a 10 MiB file and never read, serve exits 0 within 5 s (half the grace; it
// took the grace and 2 s more when sends did not watch the shutdown), its session_end written.
func TestShutdownEndsStalledSendsWhenItBegins(t *testing.T) {
	p, _ := bbStalledBigReads(t)

	start := time.Now()
	code := p.Stop(t)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("serve exited %d after SIGTERM, want 0; stderr:\n%s", code, p.Stderr())
	}
	if took > 5*time.Second {
		t.Fatalf("serve took %v to exit with 100 stalled clients, want at most 5 s (the grace is 10 s)", took)
	}
	if events := harness.Events(t, p.Ready.Trace); len(events) == 0 || events[len(events)-1].M["event_type"] != "session_end" {
		t.Fatalf("the trace does not end with session_end")
	}
	t.Logf("with 100 stalled 10 MiB reads, serve exited %v after SIGTERM", took)
}
