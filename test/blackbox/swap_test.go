package blackbox_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// TestRenameIntoPlaceWriterIsNeverReadTorn pins docs/operator-guide.md,
// "Writing files that are read while you write them": while a writer renames finished temp
// files of two different sizes over
// out/live.txt, 2000 reads each answer 200 with exactly one whole version whose etag, trace
// bytes and content-length describe that body, and concurrent listings report a size and a
// sha256 that belong to one and the same version (one open per entry).
func TestRenameIntoPlaceWriterIsNeverReadTorn(t *testing.T) {
	versions := [][]byte{
		bytes.Repeat([]byte("version A "), 400),    // 4000 bytes
		bytes.Repeat([]byte("version BB  "), 1000), // 12000 bytes
	}
	byHash := map[string][]byte{harness.SHA256Hex(versions[0]): versions[0], harness.SHA256Hex(versions[1]): versions[1]}
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""),
		Files: fixture.Layout{"out/live.txt": string(versions[0])}})
	s := bbSessionOf(t, p.Ready)
	live := filepath.Join(p.Workdir, "out/live.txt")

	const reads, listings = 2000, 200
	var seen [2]atomic.Int64
	renames := bbRace(t, reads+listings, func(i int) error {
		tmp := filepath.Join(p.Workdir, fmt.Sprintf("tmp-%d", i%8))
		if err := os.WriteFile(tmp, versions[i%2], 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, live)
	}, func(i int) error {
		if i%((reads+listings)/listings) == 0 {
			return bbCheckLiveListing(s.addr, byHash)
		}
		r, err := harness.Fetch(s.addr, "/resources/files/live.txt", 10*time.Second)
		switch {
		case err != nil:
			return err
		case r.Status != 200:
			// docs/operator-guide.md promises a reader of a rename-into-place writer one whole
			// version: a refusal is not one.
			return fmt.Errorf("status %d during a rename-into-place writer, want 200 with one whole version: %s", r.Status, r.Body)
		case r.Get("etag") != harness.ETag(r.Body):
			return fmt.Errorf("etag %s does not describe the %d-byte body", r.Get("etag"), len(r.Body))
		case bytes.Equal(r.Body, versions[0]):
			seen[0].Add(1)
		case bytes.Equal(r.Body, versions[1]):
			seen[1].Add(1)
		default:
			return fmt.Errorf("torn body: %d bytes, neither whole version", len(r.Body))
		}
		return nil
	})
	t.Logf("%d renames; served version A %d times, version B %d times", renames, seen[0].Load(), seen[1].Load())
	if renames < 10 {
		t.Errorf("the writer renamed only %d times: the race was not exercised", renames)
	}
	for _, line := range harness.TraceLines(t, s.trace) {
		var ev struct {
			Path    string `json:"path"`
			Outcome string `json:"outcome"`
			Bytes   *int   `json:"bytes"`
			SHA256  string `json:"sha256"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("trace line %q: %v", line, err)
		}
		if ev.Path != "live.txt" || ev.Outcome != "ok" {
			continue
		}
		sha := ev.SHA256
		if v, ok := byHash[sha]; !ok || ev.Bytes == nil || *ev.Bytes != len(v) {
			t.Errorf("trace line does not describe one whole version: %s", line)
			break
		}
	}
}

// bbRace runs write(0), write(1), … in one goroutine until n requests are done, and meanwhile
// request(0) … request(n-1), spread over four goroutines. It fails the test with the writer's
// error and the requests' errors (the first ten of them), and returns how many writes
// completed.
func bbRace(t *testing.T, n int, write, request func(i int) error) int64 {
	t.Helper()
	const workers = 4
	stop := make(chan struct{})
	var writes atomic.Int64
	writerDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			if err := write(i); err != nil {
				writerDone <- err
				return
			}
			writes.Add(1)
		}
	}()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if err := request(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	close(errs)
	failures := 0
	for err := range errs {
		if failures < 10 {
			t.Error(err)
		}
		failures++
	}
	if failures > 0 {
		t.Errorf("%d of %d requests failed", failures, n)
	}
	return writes.Load()
}

func bbCheckLiveListing(addr string, byHash map[string][]byte) error {
	r, err := harness.Fetch(addr, "/resources/files", 10*time.Second)
	if err != nil {
		return err
	}
	if r.Status != 200 {
		return fmt.Errorf("listing status %d: %s", r.Status, r.Body)
	}
	var l bbListing
	if err := json.Unmarshal(r.Body, &l); err != nil {
		return err
	}
	for _, e := range l.Entries {
		if e.Path != "live.txt" {
			continue
		}
		if v, ok := byHash[e.SHA256]; !ok || int64(len(v)) != e.SizeBytes {
			return fmt.Errorf("listing entry mixes versions: %+v", e)
		}
		return nil
	}
	return fmt.Errorf("live.txt missing from the listing: %s", r.Body)
}

const (
	bbSwapInside = "inside bytes"
	bbSwapSecret = "SECRET bytes from outside the export root, never to be served"
)

// bbSwapAttack is one attacker: it exchanges a and b (paths under the workdir) until stopped.
type bbSwapAttack struct {
	name     string
	a, b     string   // exchanged, relative to the workdir
	reads    []string // raw read paths
	holdsDir string   // the directory both names live in, relative to the workdir
}

// TestSwapAttackerNeverLeaksOutsideBytes pins docs/operator-guide.md,
// "Race-free resolution and its limits": while
// an attacker atomically exchanges (RENAME_EXCHANGE) a directory inside the root with a symlink
// to a directory outside the workdir holding the same names (absolute or relative link, or the
// export root itself with such a symlink), thousands of reads and listings at every class never
// serve, list, size or hash a byte of the outside secret, and never record it in the trace.
// Refusals of any kind are acceptable.
func TestSwapAttackerNeverLeaksOutsideBytes(t *testing.T) {
	attacks := []bbSwapAttack{
		{name: "dir exchanged with an absolute symlink out", a: "out/d", b: "out/evil-abs", holdsDir: "out",
			reads: []string{"d/f.txt", "d/e/f.txt", "evil-abs/f.txt"}},
		{name: "dir exchanged with a relative symlink out", a: "out/d", b: "out/evil-rel", holdsDir: "out",
			reads: []string{"d/f.txt", "d/e/f.txt", "evil-rel/e/f.txt"}},
		{name: "nested dir exchanged with a symlink out", a: "out/d/e", b: "out/d/evil", holdsDir: "out/d",
			reads: []string{"d/e/f.txt", "d/evil/f.txt"}},
		{name: "root exchanged with a symlink out", a: "out", b: "out-evil", holdsDir: ".",
			reads: []string{"f.txt", "d/f.txt", "d/e/f.txt"}},
	}
	for _, class := range []string{"advisory", "scoped", "sealed"} {
		t.Run(class, func(t *testing.T) {
			t.Parallel()
			for _, attack := range attacks {
				t.Run(attack.name, func(t *testing.T) {
					bbRunSwapAttack(t, class, attack)
				})
			}
		})
	}
}

func bbRunSwapAttack(t *testing.T, class string, attack bbSwapAttack) {
	p := harness.Start(t, harness.Capsule{
		Manifest: bbFilesManifest("out/", ""),
		Args:     []string{"--containment", class},
		Files: fixture.Layout{
			"out/f.txt":     bbSwapInside,
			"out/d/f.txt":   bbSwapInside,
			"out/d/e/f.txt": bbSwapInside,
		},
	})
	s := bbSessionOf(t, p.Ready)
	outside := filepath.Join(p.Dir, "outside")
	fixture.Write(t, p.Workdir, fixture.Layout{
		"../outside/f.txt":              bbSwapSecret,
		"../outside/e/f.txt":            bbSwapSecret,
		"../outside/d/f.txt":            bbSwapSecret,
		"../outside/d/e/f.txt":          bbSwapSecret,
		"out/evil-abs -> " + outside:    "",
		"out/evil-rel -> ../../outside": "",
		"out/d/evil -> " + outside:      "",
		"out-evil -> " + outside:        "",
	})
	wd := p.Workdir
	// Exchange by names relative to a descriptor of the directory holding both, so the attacker
	// itself never follows the symlink it is moving.
	holder, err := os.Open(filepath.Join(wd, attack.holdsDir))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	rel := func(p string) string {
		r, _ := filepath.Rel(attack.holdsDir, p)
		return r
	}
	a, b := rel(attack.a), rel(attack.b)
	if err := unix.Renameat2(int(holder.Fd()), a, int(holder.Fd()), b, unix.RENAME_EXCHANGE); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			t.Skipf("RENAME_EXCHANGE unsupported here: %v", err)
		}
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var swaps atomic.Int64
	attackerDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				// Leave the layout as it was, so that a final check reads the real inside.
				if swaps.Load()%2 == 0 {
					attackerDone <- unix.Renameat2(int(holder.Fd()), a, int(holder.Fd()), b, unix.RENAME_EXCHANGE)
				} else {
					attackerDone <- nil
				}
				return
			default:
			}
			if err := unix.Renameat2(int(holder.Fd()), a, int(holder.Fd()), b, unix.RENAME_EXCHANGE); err != nil {
				attackerDone <- err
				return
			}
			swaps.Add(1)
		}
	}()

	const requests, workers = 800, 4
	var bbServedAs, refused atomic.Int64
	errs := make(chan error, requests)
	var wg sync.WaitGroup
	deadline := time.Now().Add(8 * time.Second)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < requests && time.Now().Before(deadline); i += workers {
				target := "/resources/files"
				if i%5 != 0 {
					target += "/" + attack.reads[i%len(attack.reads)]
				}
				r, err := harness.Fetch(s.addr, target, 10*time.Second)
				if err != nil {
					errs <- err
					continue
				}
				if leak := bbLeakIn(r.Status, r.Get("etag"), r.Body); leak != "" {
					errs <- fmt.Errorf("%s: %s", target, leak)
					continue
				}
				if r.Status == 200 {
					bbServedAs.Add(1)
				} else {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-attackerDone; err != nil {
		t.Fatal(err)
	}
	close(errs)
	n := 0
	for err := range errs {
		if n < 10 {
			t.Error(err)
		}
		n++
	}
	if n > 0 {
		t.Errorf("%d requests leaked or failed", n)
	}
	t.Logf("%s %s: %d swaps, %d answers served, %d refused", class, attack.name, swaps.Load(), bbServedAs.Load(), refused.Load())
	if swaps.Load() < 100 {
		t.Errorf("the attacker swapped only %d times: the race was not exercised", swaps.Load())
	}
	if bbServedAs.Load()+refused.Load() < requests*9/10 {
		t.Errorf("only %d requests answered within the time budget", bbServedAs.Load()+refused.Load())
	}
	for _, line := range harness.TraceLines(t, s.trace) {
		if strings.Contains(line, harness.SHA256Hex([]byte(bbSwapSecret))) || strings.Contains(line, `"total_bytes":`+fmt.Sprint(len(bbSwapSecret))) {
			t.Errorf("the trace records the outside secret: %s", line)
			break
		}
	}
}

// bbLeakIn explains how a response reveals the outside secret, or returns "".
func bbLeakIn(status int, etag string, body []byte) string {
	secretSHA := harness.SHA256Hex([]byte(bbSwapSecret))
	if bytes.Contains(body, []byte("SECRET")) || strings.Contains(etag, secretSHA) || bytes.Contains(body, []byte(secretSHA)) {
		return fmt.Sprintf("served the outside secret (status %d, etag %s): %.200s", status, etag, body)
	}
	if status == 200 && bytes.HasPrefix(body, []byte(`{"root"`)) {
		var l bbListing
		if err := json.Unmarshal(body, &l); err != nil {
			return fmt.Sprintf("listing does not parse: %v", err)
		}
		for _, e := range l.Entries {
			if e.SizeBytes == int64(len(bbSwapSecret)) || e.SHA256 != harness.SHA256Hex([]byte(bbSwapInside)) {
				return fmt.Sprintf("listing reports an outside file: %+v", e)
			}
		}
	}
	return ""
}
