package blackbox_test

import (
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
// third listing waiting: it is answered whole within 2 s.
func TestDripReadersDoNotHoldTheListingTurns(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: bbLongListing(2000)})
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
