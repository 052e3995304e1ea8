package blackbox_test

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbLongListing is a tree whose listing is about n × 4 KB of JSON: n files beneath a chain of
// directories, every path close to the 4096-byte limit, so a few thousand files make a listing
// larger than any socket's buffers.
func bbLongListing(n int) fixture.Layout {
	dir := "out/"
	for i := range 15 {
		dir += strings.Repeat(string(rune('a'+i)), 250) + "/"
	}
	files := fixture.Layout{}
	for i := range n {
		files[dir+strconv.Itoa(100000+i)+strings.Repeat("f", 200)] = "x"
	}
	return files
}

// TestDripReadersDoNotHoldTheListingTurns pins docs/operator-guide.md, "Memory and connection
// bounds": a listing's turn ends with its walk, so two clients that take a large listing a
// little at a time (they make progress, so the send timeout never closes them) do not keep a
// third listing waiting: it is answered whole within 2 s. The minimum send rate is off, so
// that nothing but the turn's end can let the third listing through.
func TestDripReadersDoNotHoldTheListingTurns(t *testing.T) {
	checkListingDrip(t, listingDrip{files: bbLongListing(2000), args: []string{"--min-send-rate", "off"},
		chunk: 4 << 10, every: 500 * time.Millisecond, atLeast: 7 << 20, stillOpen: true})
}

// TestDripReadersAreClosedBelowTheMinimumRateAndReleaseTheSpool pins docs/operator-guide.md,
// "Memory and connection bounds": progress, not presence, keeps a reservation. Two clients
// that each take a spooled file 4 KiB at a time (so the send timeout never closes them) hold
// the whole spool budget until they fall below --min-send-rate; then they are closed, their
// snapshots released, and a third read of the same size is served whole. The scale is the
// review's (two drips of 60 MiB files under a 128 MiB spool budget), shrunk with the rate.
func TestDripReadersAreClosedBelowTheMinimumRateAndReleaseTheSpool(t *testing.T) {
	checkSpoolDrip(t, spoolDrip{size: 17 << 20, maxBytes: "20Mi", args: []string{"--spool-budget", "36Mi", "--min-send-rate", "512Ki/2s"},
		chunk: 4 << 10, every: 100 * time.Millisecond, within: 5 * time.Second})
}

// TestTheReviewsDripsAtFullScale runs both drip attacks as the adversarial review ran them,
// with the service's defaults: two clients taking 4 KiB every 15 s of a 5.5 MB listing of
// 40,000 files (a third listing is answered within 2 s, and a whole `files ls`, a new process
// that prints 40,000 rows, within 10 s, where it failed after 30 s), and of two 60 MiB
// files under max_bytes 64Mi and a 128 MiB spool budget (a third 60 MiB read is served once
// the default --min-send-rate, 160 KiB over 10 s, has closed them). It takes about a minute,
// so it runs only when RESPLANE_TEST_LARGE=1 (make test-large).
func TestTheReviewsDripsAtFullScale(t *testing.T) {
	if os.Getenv("RESPLANE_TEST_LARGE") != "1" {
		t.Skip("the review's full scale takes about a minute: set RESPLANE_TEST_LARGE=1 (make test-large)")
	}
	t.Run("listing", func(t *testing.T) {
		files := fixture.Layout{}
		for i := range 40000 {
			files["out/results/run-"+strconv.Itoa(i/1000)+"/sample-"+strconv.Itoa(100000+i)+".json"] = "{}"
		}
		p := checkListingDrip(t, listingDrip{files: files, chunk: 4 << 10, every: 15 * time.Second, atLeast: 5 << 20})
		start := time.Now()
		code, stdout, stderr := harness.RunCLI(t, nil, "files", "ls", p.Ready.URL)
		took := time.Since(start)
		if code != 0 || strings.Count(stdout, "\n") != 40001 || took > 10*time.Second {
			t.Fatalf("files ls: exit %d after %v, %d lines, stderr %q; want the whole table within 10 s",
				code, took, strings.Count(stdout, "\n"), stderr)
		}
		t.Logf("files ls printed the 40,000 rows after %v", took)
	})
	t.Run("spool", func(t *testing.T) {
		checkSpoolDrip(t, spoolDrip{size: 60 << 20, maxBytes: "64Mi", args: []string{"--spool-budget", "128Mi"},
			chunk: 4 << 10, every: 15 * time.Second, within: 25 * time.Second})
	})
}

// listingDrip is one drip attack on the listing: two clients take chunk bytes of it every
// interval while a third asks for it.
type listingDrip struct {
	files     fixture.Layout
	args      []string
	chunk     int
	every     time.Duration
	atLeast   int  // the least size of the listing, in bytes: larger than any socket's buffers
	stillOpen bool // the drips must still be open, still reading, when the third is answered
}

// checkListingDrip starts the capsule, runs the attack, and requires the third listing to be
// answered whole within 2 s.
func checkListingDrip(t *testing.T, c listingDrip) *harness.Process {
	t.Helper()
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: c.files, Args: c.args})
	addr := p.Ready.Listen
	first := harness.Get(t, addr, "/resources/files")
	if first.Status != 200 || len(first.Body) < c.atLeast {
		t.Fatalf("the listing: status %d, %d bytes; want 200 and at least %d", first.Status, len(first.Body), c.atLeast)
	}
	var drips []*harness.Dripper
	for range 2 {
		drips = append(drips, harness.Drip(t, addr, harness.RequestText(addr, "GET", "/resources/files"), c.chunk, c.every))
	}
	harness.AwaitOK(t, p.Ready.Trace, "resource_list", 3, 30*time.Second)
	time.Sleep(time.Second) // both drips are under way, their answers far from sent

	start := time.Now()
	r := harness.RequestWithin(t, addr, "GET", "/resources/files", 2*time.Second)
	if r.Status != 200 || string(r.Body) != string(first.Body) {
		t.Fatalf("the third listing: status %d, %d bytes; want the whole listing", r.Status, len(r.Body))
	}
	for i, d := range drips {
		if d.Read() >= int64(len(first.Body)) || (c.stillOpen && d.Closed()) {
			t.Fatalf("drip reader %d: closed %v after %d bytes; want it still reading", i, d.Closed(), d.Read())
		}
	}
	t.Logf("with two drip readers of a %.1f MiB listing, a third listing took %v", float64(len(first.Body))/(1<<20), time.Since(start))
	return p
}

// spoolDrip is one drip attack on the spool: two clients take chunk bytes of a spooled file
// of size bytes every interval while a third reads it whole.
type spoolDrip struct {
	size     int
	maxBytes string
	args     []string
	chunk    int
	every    time.Duration
	within   time.Duration // how long the third read may take
}

// checkSpoolDrip starts the capsule, runs the attack, and requires the third read to be
// served whole within c.within and both drips to be closed for the minimum rate.
func checkSpoolDrip(t *testing.T, c spoolDrip) {
	t.Helper()
	big := bbPattern(c.size)
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", c.maxBytes), Args: c.args,
		Files: fixture.Layout{"out/big.bin": string(big)}})
	addr := p.Ready.Listen
	var drips []*harness.Dripper
	for range 2 {
		drips = append(drips, harness.Drip(t, addr, harness.RequestText(addr, "GET", "/resources/files/big.bin"), c.chunk, c.every))
	}
	harness.AwaitOK(t, p.Ready.Trace, "resource_read", 2, 30*time.Second)

	start := time.Now()
	r := harness.RequestWithin(t, addr, "GET", "/resources/files/big.bin", c.within)
	if r.Status != 200 || !bytes.Equal(r.Body, big) || r.Get("etag") != harness.ETag(big) {
		t.Fatalf("the third read: status %d, %d bytes; want the whole file and its etag", r.Status, len(r.Body))
	}
	waited := time.Since(start)
	// The service closes both; its socket buffers may still hand the clients what they held.
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(p.Stderr(), `"closed":"min_send_rate"`) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s the log says %d drip readers were closed for the minimum rate, want 2:\n%s",
				strings.Count(p.Stderr(), `"closed":"min_send_rate"`), p.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, d := range drips {
		if d.Read() >= int64(len(big)) {
			t.Fatalf("drip reader %d took the whole body (%d bytes): it was not closed", i, d.Read())
		}
	}
	t.Logf("two drip readers held the spool; a third %d MiB read was served after %v", c.size>>20, waited)
}
