package peer_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// manifestLargeMinter is manifestMinter with a 10 MiB ceiling.
const manifestLargeMinter = `name: Alpha
exports:
  peer_files:
    root: out/handoff/
    max_ttl: 1h
    max_bytes: 10Mi
capabilities:
  network:
    allow: ["127.0.0.1"]
`

// TestStalledRedeemsHoldNeitherMemoryNorTheNextRedeem pins for the peer plane what
// docs/operator-guide.md, "Memory and connection bounds", promises for reads, since a redeem
// calls the same reader: 100 connections that each redeem a 10 MiB file and then never read
// hold its snapshot in the spool, so a new redeem still completes, whole and with its etag,
// and the minter's peak RSS stays under 128 MiB. The new redeem is given harness.StallTolerance, far
// below what the stalled clients would hold it for, and its time is logged.
func TestStalledRedeemsHoldNeitherMemoryNorTheNextRedeem(t *testing.T) {
	t.Parallel()
	big := make([]byte, 10<<20)
	for i := range big {
		big[i] = byte(i*13 + i/4093)
	}
	a := start(t, harness.Capsule{Manifest: manifestLargeMinter, Files: fixture.Layout{"out/handoff/big.bin": string(big)}})
	card := newFakePeer(t)
	card.setCard(cardJSON(`{"name":"Bravo","url":"http://localhost:9"}`))
	m := mint(t, a, card.Addr(), "big.bin")
	addr := a.Ready.Listen
	request := harness.RequestText(addr, "GET", "/resources/peer/"+m.Handle, aud(m.Audience))
	harness.Stall(t, addr, request, 100)
	harness.AwaitOK(t, a.Ready.Trace, "peer_handle_redeem", 100, 60*time.Second)

	start := time.Now()
	r := harness.RawWithin(t, addr, request, harness.StallTolerance)
	elapsed := time.Since(start)
	if r.Status != 200 || !bytes.Equal(r.Body, big) || r.Get("etag") != harness.ETag(big) {
		t.Fatalf("status %d, %d body bytes, etag %s: want the whole file and its etag", r.Status, len(r.Body), r.Get("etag"))
	}
	rss := a.RequirePeakRSSUnder(t, 128<<20)
	t.Logf("with 100 stalled 10 MiB redeems: a new redeem took %v; peak RSS %.1f MiB", elapsed, float64(rss)/(1<<20))
}
