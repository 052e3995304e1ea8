package peer_test

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/resplane/resplane/test/harness"
)

// TestAKilledFetchLeavesNothingOrTheWholeFile pins docs/peer-plane.md, "Landing": a fetching
// serve killed with SIGKILL at any point of a large, slowly served fetch leaves, in peer-in/,
// either nothing or the complete, verified file under its name, never a partial or temp file.
// The fake peer trickles a 512 KiB body and holds still at each chosen point of the stream
// until the process is dead; at the end, it sends the last piece just as the kill is sent, a
// little later each time, so the kill races the last bytes, the etag check and the naming of
// the file. Run it with -count=20 to probe that race more (docs/peer-plane.md).
func TestAKilledFetchLeavesNothingOrTheWholeFile(t *testing.T) {
	t.Parallel()
	const chunk, chunks = 16 << 10, 32
	body := make([]byte, chunk*chunks)
	_, _ = rand.Read(body)
	f := newFakePeer(t)

	type point struct {
		name  string
		after int           // chunks sent before the kill; chunks: the whole body, racing the kill
		delay time.Duration // with the whole body: how long after the last piece is sent to kill
	}
	var points []point
	for _, k := range []int{0, 1, 2, 8, 16, 24, 31} {
		points = append(points, point{name: "after " + strconv.Itoa(k) + " of " + strconv.Itoa(chunks) + " chunks", after: k})
	}
	for _, d := range []time.Duration{0, 100 * time.Microsecond, 300 * time.Microsecond, 600 * time.Microsecond,
		time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		points = append(points, point{name: fmt.Sprintf("%v after the last piece is sent", d), after: chunks, delay: d})
	}
	for _, pt := range points {
		t.Run(pt.name, func(t *testing.T) {
			b := startFetcher(t)
			token := forgeFor("big.bin")
			id := handleID(token)
			reached := make(chan struct{})
			f.handle(token, trickle(body, chunk, pt.after, reached))
			go func() {
				_, _ = harness.ControlE(b.Ready.Control, http.MethodPost, "/v1/tools/fetch-peer-file", map[string]any{"peer": f.Addr(), "handle": token})
			}()
			select {
			case <-reached:
			case <-time.After(15 * time.Second):
				t.Fatal("the fetch did not reach the kill point within 15 s")
			}
			time.Sleep(pt.delay)
			b.Kill(t)

			names := inbox(t, b)
			switch {
			case len(names) == 0:
				t.Log("left nothing")
			case len(names) == 1 && names[0] == id+"-big.bin":
				onDisk, err := os.ReadFile(filepath.Join(b.Ready.Workdir, "peer-in", names[0]))
				if err != nil || string(onDisk) != string(body) {
					t.Fatalf("peer-in/%s holds %d bytes (%v), want the whole %d-byte body", names[0], len(onDisk), err, len(body))
				}
				t.Log("left the whole file")
			default:
				t.Fatalf("peer-in holds %q; want nothing, or only %s-big.bin", names, id)
			}
		})
	}
}

// trickle serves body, with a correct etag, in pieces of size chunk, a millisecond apart.
// Once after pieces are sent it closes reached and holds still, the rest unsent, until the
// client is gone; when after is the number of pieces, it closes reached just before sending the
// last piece instead, and goes on.
func trickle(body []byte, chunk, after int, reached chan<- struct{}) http.HandlerFunc {
	pieces := len(body) / chunk
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("etag", harness.ETag(body))
		w.Header().Set("content-length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for i := range pieces {
			if i == after {
				close(reached)
				select {
				case <-r.Context().Done():
				case <-time.After(15 * time.Second):
				}
				return
			}
			if i == pieces-1 && after == pieces {
				close(reached)
			}
			_, _ = w.Write(body[i*chunk : (i+1)*chunk])
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
	}
}
