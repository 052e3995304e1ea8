package blackbox_test

import (
	"bytes"
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
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: bbLongListing(2000),
		Args: []string{"--min-send-rate", "off"}})
	addr := p.Ready.Listen
	first := harness.Get(t, addr, "/resources/files")
	if first.Status != 200 || len(first.Body) < 7<<20 {
		t.Fatalf("the listing: status %d, %d bytes; want 200 and more than 7 MiB", first.Status, len(first.Body))
	}
	var drips []*harness.Dripper
	for range 2 {
		drips = append(drips, harness.Drip(t, addr, harness.RequestText(addr, "GET", "/resources/files"), 4<<10, 500*time.Millisecond))
	}
	harness.AwaitOK(t, p.Ready.Trace, "resource_list", 3, 10*time.Second)
	time.Sleep(time.Second) // both drips are under way, their answers far from sent

	start := time.Now()
	r := harness.RequestWithin(t, addr, "GET", "/resources/files", 2*time.Second)
	if r.Status != 200 || string(r.Body) != string(first.Body) {
		t.Fatalf("the third listing: status %d, %d bytes; want the whole listing", r.Status, len(r.Body))
	}
	for i, d := range drips {
		if d.Closed() || d.Read() >= int64(len(first.Body)) {
			t.Fatalf("drip reader %d: closed %v after %d bytes; want it still open, still reading", i, d.Closed(), d.Read())
		}
	}
	t.Logf("with two drip readers of a %.1f MiB listing, a third listing took %v", float64(len(first.Body))/(1<<20), time.Since(start))
}

// TestDripReadersAreClosedBelowTheMinimumRateAndReleaseTheSpool pins docs/operator-guide.md,
// "Memory and connection bounds": progress, not presence, keeps a reservation. Two clients
// that each take a spooled file 4 KiB at a time (so the send timeout never closes them) hold
// the whole spool budget until they fall below --min-send-rate; then they are closed, their
// snapshots released, and a third read of the same size is served whole. The scale is the
// review's (two drips of 60 MiB files under a 128 MiB spool budget), shrunk with the rate.
func TestDripReadersAreClosedBelowTheMinimumRateAndReleaseTheSpool(t *testing.T) {
	big := bbPattern(17 << 20) // above 16 MiB: spooled at once
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", "20Mi"),
		Args:  []string{"--spool-budget", "36Mi", "--min-send-rate", "512Ki/2s"},
		Files: fixture.Layout{"out/big.bin": string(big)}})
	addr := p.Ready.Listen
	var drips []*harness.Dripper
	for range 2 {
		drips = append(drips, harness.Drip(t, addr, harness.RequestText(addr, "GET", "/resources/files/big.bin"), 4<<10, 100*time.Millisecond))
	}
	harness.AwaitOK(t, p.Ready.Trace, "resource_read", 2, 10*time.Second)

	start := time.Now()
	r := harness.RequestWithin(t, addr, "GET", "/resources/files/big.bin", 5*time.Second)
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
	t.Logf("two drip readers held the spool; a third 17 MiB read was served after %v", waited)
}
