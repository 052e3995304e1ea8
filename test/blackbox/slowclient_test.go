package blackbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
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

// TestStalledClientsHoldNeitherMemoryNorTheNextRead pins docs/operator-guide.md, "Memory and
// connection bounds": 100 connections that each request a 10 MiB file and then never read
// hold its snapshot in the spool, not in memory, so a new 10 MiB read still completes within
// 2 s, whole and with its etag, and the process's peak RSS stays under 128 MiB.
func TestStalledClientsHoldNeitherMemoryNorTheNextRead(t *testing.T) {
	big := bbPattern(10 << 20)
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""),
		Files: fixture.Layout{"out/big.bin": string(big)}})
	addr := p.Ready.Listen
	harness.Stall(t, addr, harness.RequestText(addr, "GET", "/resources/files/big.bin"), 100)
	harness.AwaitOK(t, p.Ready.Trace, "resource_read", 100, 60*time.Second)

	start := time.Now()
	r := harness.RequestWithin(t, addr, "GET", "/resources/files/big.bin", 2*time.Second)
	elapsed := time.Since(start)
	if r.Status != 200 || !bytes.Equal(r.Body, big) || r.Get("etag") != harness.ETag(big) {
		t.Fatalf("status %d, %d body bytes, etag %s: want the whole file and its etag", r.Status, len(r.Body), r.Get("etag"))
	}
	rss := p.RequirePeakRSSUnder(t, 128<<20)
	t.Logf("with 100 stalled 10 MiB reads: a new read took %v; peak RSS %.1f MiB", elapsed, float64(rss)/(1<<20))
}

// TestAStalledResponseIsClosedAndItsSnapshotReleased pins docs/operator-guide.md, "Memory and
// connection bounds": a response that makes no progress for --send-timeout is closed and its
// snapshot released. With a spool budget that holds one 10 MiB snapshot, a second read waits
// for the stalled one's and is served once the send timeout has closed it; the stalled client
// finds its connection closed after a partial body.
func TestAStalledResponseIsClosedAndItsSnapshotReleased(t *testing.T) {
	big := bbPattern(10 << 20)
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Args: []string{"--send-timeout", "1s", "--spool-budget", "11Mi"},
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
// "Writing files that are read while you write them", for spooled reads: while a writer
// rewrites a 1 MiB file in place (overwrites, truncations and regrowth), every 200 carries a
// content-length and an etag that describe exactly its body, torn or not.
func TestARewriteInPlaceNeverServesABodyThatDiffersFromItsEtag(t *testing.T) {
	const size = 1 << 20
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""),
		Files: fixture.Layout{"out/live.bin": string(bbPattern(size))}})
	addr := p.Ready.Listen
	f, err := os.OpenFile(filepath.Join(p.Workdir, "out/live.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	block := make([]byte, 64<<10)
	var served, torn atomic.Int64
	writes := bbRace(t, 200, func(i int) error {
		if i%5 == 4 {
			return f.Truncate(int64(i%3) * size / 3)
		}
		for j := range block {
			block[j] = byte(i)
		}
		_, err := f.WriteAt(block, int64(i*(64<<10))%size)
		return err
	}, func(int) error {
		r, err := harness.Fetch(addr, "/resources/files/live.bin", 10*time.Second)
		switch {
		case err != nil:
			return err
		case r.Status != 200:
			return fmt.Errorf("status %d: %s", r.Status, r.Body)
		case r.Get("etag") != harness.ETag(r.Body) || r.Get("content-length") != strconv.Itoa(len(r.Body)):
			return fmt.Errorf("etag %s and content-length %s do not describe the %d-byte body (sha256 %s)",
				r.Get("etag"), r.Get("content-length"), len(r.Body), harness.SHA256Hex(r.Body))
		}
		served.Add(1)
		if len(r.Body) != size || !bytes.Equal(r.Body, bbPattern(size)) {
			torn.Add(1)
		}
		return nil
	})
	t.Logf("%d in-place writes; %d reads served, %d of them not the original file", writes, served.Load(), torn.Load())
	if writes < 100 {
		t.Errorf("the writer wrote only %d times: the race was not exercised", writes)
	}
}
