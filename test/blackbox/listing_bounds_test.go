package blackbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbWithPID is a harness.Capsule wrapper that writes the server's pid to a file and then
// becomes the server (exec keeps the pid), so a test can read the server's /proc entries.
func bbWithPID(t testing.TB, then ...string) ([]string, func() int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pid")
	wrapper := append([]string{"sh", "-c", `echo $$ >"$0" && exec "$@"`, file}, then...)
	return wrapper, func() int {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
}

// bbPeakRSS is the server's peak resident set (VmHWM) in bytes.
func bbPeakRSS(t testing.TB, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// bbCPU is the user and system CPU time the server has used, from /proc/<pid>/stat (fields 14
// and 15, in clock ticks of 1/100 s, USER_HZ on Linux).
func bbCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name (field 2) is parenthesised and may hold spaces: count after it.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime: fields 14 and 15 overall
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// bbDescriptors counts the server's open descriptors.
func bbDescriptors(t testing.TB, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// bbChain makes depth nested directories named d beneath dir, with the file f at the bottom,
// working relative to descriptors (the path is far longer than PATH_MAX), and removes them
// when the test ends.
func bbChain(t *testing.T, dir string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bbUnchain(t, dir) })
	for range depth {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(f)
}

// bbUnchain removes a chain bbChain made with rm -rf, which walks any depth with a bounded
// number of descriptors (os.RemoveAll holds one per level).
func bbUnchain(t *testing.T, dir string) {
	if out, err := exec.Command("rm", "-rf", filepath.Join(dir, "d")).CombinedOutput(); err != nil {
		t.Errorf("rm -rf: %v: %s", err, out)
	}
}

// TestDeepChainIsRefusedWithinBoundedMemory pins docs/http-api.md, "The listing": a tree
// nested deeper than a listing descends is refused io_error with a message naming the limit,
// never listed shorter, and costs the server little memory: an agent builds a 16,000-deep
// chain in seconds, and one 40-byte request must not cost gigabytes (peak RSS under 64 MiB).
// The chain is 1,000 deep by default, four times the limit; RESPLANE_BB_DEEP_CHAIN=16000 runs
// the depth the review observed (some 10 s on ext4, most of it making and removing the chain).
func TestDeepChainIsRefusedWithinBoundedMemory(t *testing.T) {
	depth := 1000
	if v := os.Getenv("RESPLANE_BB_DEEP_CHAIN"); v != "" {
		var err error
		if depth, err = strconv.Atoi(v); err != nil {
			t.Fatalf("RESPLANE_BB_DEEP_CHAIN=%q: %v", v, err)
		}
	}
	wrapper, pid := bbWithPID(t)
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: fixture.Layout{"out/a.txt": "A"}, Wrapper: wrapper})
	s := bbSessionOf(t, p.Ready)
	bbChain(t, filepath.Join(p.Workdir, "out"), depth)

	mark := len(harness.TraceLines(t, s.trace))
	r := harness.RequestWithin(t, s.addr, "GET", "/resources/files", time.Minute)
	msg := bbFilesRefusal(t, r, 500, "io_error", 0)
	if !strings.Contains(msg, "more than 256 levels deep") {
		t.Errorf("message %q does not name the depth limit", msg)
	}
	bbCheckList(t, s, harness.TraceFrom(t, s.trace, mark, 1)[0], bbListEvent{bbOutcome: "io_error", reason: msg})
	rss := bbPeakRSS(t, pid())
	t.Logf("a listing of a %d-deep chain: %d %s; server peak RSS %.1f MiB", depth, r.Status, msg, float64(rss)/(1<<20))
	if rss > 64<<20 {
		t.Errorf("server peak RSS %.1f MiB, want under 64 MiB", float64(rss)/(1<<20))
	}
}

// TestDescriptorShortageIsIOErrorNeverAShorterListing pins docs/http-api.md, "The listing": a
// listing that runs out of descriptors (EMFILE) is refused io_error, never answered 200 with
// the entries it could not open left out. The server runs under a descriptor limit a few
// above what it holds at rest, over a tree 40 levels deep; with --listing-cache max-age, so
// that what it holds at rest after a listing is not the 40 leases that listing took.
func TestDescriptorShortageIsIOErrorNeverAShorterListing(t *testing.T) {
	layout := fixture.Layout{}
	for depth := range 40 {
		layout["out/"+strings.Repeat("d/", depth)+"f"] = "F"
	}
	wrapper, pid := bbWithPID(t)
	maxAge := []string{"--listing-cache", "max-age"}
	probe := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: layout, Wrapper: wrapper, Args: maxAge})
	if l := bbDecodeListing(t, harness.Get(t, probe.Ready.Listen, "/resources/files"), 0, "advisory", "out/"); len(l.Entries) != 40 {
		t.Fatalf("without a descriptor limit the listing has %d entries, want 40", len(l.Entries))
	}
	limit := bbDescriptors(t, pid()) + 8
	probe.Stop(t)

	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: layout,
		Wrapper: []string{"prlimit", fmt.Sprintf("--nofile=%d:%d", limit, limit), "--"}, Args: maxAge})
	s := bbSessionOf(t, p.Ready)
	mark := len(harness.TraceLines(t, s.trace))
	r := harness.Get(t, s.addr, "/resources/files")
	msg := bbFilesRefusal(t, r, 500, "io_error", 0)
	if !strings.Contains(msg, "too many open files") {
		t.Errorf("message %q does not say descriptors ran out", msg)
	}
	bbCheckList(t, s, harness.TraceFrom(t, s.trace, mark, 1)[0], bbListEvent{bbOutcome: "io_error", reason: msg})
}

// TestPlantedPaddedLinksCostLittleCPU pins docs/http-api.md, "The listing" and
// docs/operator-guide.md, "Listing cost": symlinks whose texts are padded with x/.. up to the
// kernel's 4095 bytes, chained 40 deep, with 200 more padded links into the chain, cost one
// listing (and a read through one of them) well under half a second of the server's CPU, and
// are left out of the listing (refused on a read) as a resolution that exceeds its bounds.
func TestPlantedPaddedLinksCostLittleCPU(t *testing.T) {
	padding := func(target string) string {
		n := (4095 - len(target)) / len("x/../")
		return strings.Repeat("x/../", n) + target
	}
	layout := fixture.Layout{"out/a.txt": "A", "out/x/": ""}
	for i := range 40 {
		next := "a.txt"
		if i < 39 {
			next = fmt.Sprintf("c%02d", i+1)
		}
		layout[fmt.Sprintf("out/c%02d -> %s", i, padding(next))] = ""
	}
	for i := range 200 {
		layout[fmt.Sprintf("out/h%03d -> %s", i, padding("c00"))] = ""
	}
	wrapper, pid := bbWithPID(t)
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: layout, Wrapper: wrapper})
	s := bbSessionOf(t, p.Ready)

	before := bbCPU(t, pid())
	r := harness.RequestWithin(t, s.addr, "GET", "/resources/files", time.Minute)
	listing := bbCPU(t, pid()) - before
	l := bbDecodeListing(t, r, 0, "advisory", "out/")
	if got := bbPaths(l); len(got) != 1 || got[0] != "a.txt" {
		t.Errorf("listed %q, want only a.txt: every padded link exceeds the resolution bounds", got)
	}
	before = bbCPU(t, pid())
	bbFilesRefusal(t, harness.RequestWithin(t, s.addr, "GET", "/resources/files/h000", time.Minute), 403, "symlink_refused", 0)
	read := bbCPU(t, pid()) - before
	t.Logf("server CPU: %v for the listing over 240 padded links, %v for a read through one", listing, read)
	if listing >= 500*time.Millisecond || read >= 500*time.Millisecond {
		t.Errorf("server CPU %v for the listing, %v for the read; want each under 0.5 s", listing, read)
	}
}

// TestConcurrentLargeListingsStayWithinBoundedMemory measures what the review observed: 16
// clients listing an export of nearly resolve.MaxEntries files at once (100 directories of
// 990 files) must cost no more memory than the listings that may run at once
// (application.MaxListings, 2) do (docs/decisions/0068-listing-and-resolution-bounds.md). It
// makes 99,000 files, so it runs only with RESPLANE_BB_LISTING_LOAD=1.
func TestConcurrentLargeListingsStayWithinBoundedMemory(t *testing.T) {
	if os.Getenv("RESPLANE_BB_LISTING_LOAD") == "" {
		t.Skip("set RESPLANE_BB_LISTING_LOAD=1 to make 99,000 files and list them 16 times at once")
	}
	const dirs, perDir = 100, 990
	wrapper, pid := bbWithPID(t)
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: fixture.Layout{"out/": ""}, Wrapper: wrapper})
	for d := range dirs {
		dir := filepath.Join(p.Workdir, "out", fmt.Sprintf("directory-%03d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range perDir {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("output-file-%04d.txt", i)), []byte{byte(i)}, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	one := harness.RequestWithin(t, p.Ready.Listen, "GET", "/resources/files", time.Minute)
	if l := bbDecodeListing(t, one, 0, "advisory", "out/"); len(l.Entries) != dirs*perDir {
		t.Fatalf("listed %d files, want %d", len(l.Entries), dirs*perDir)
	}
	peaks := map[int]int64{1: bbPeakRSS(t, pid())}
	for _, clients := range []int{2, 16} {
		start := time.Now()
		errs := make(chan error, clients)
		for range clients {
			go func() {
				r, err := harness.Fetch(p.Ready.Listen, "/resources/files", 5*time.Minute)
				if err == nil && (r.Status != 200 || len(r.Body) != len(one.Body)) {
					err = fmt.Errorf("status %d, %d bytes", r.Status, len(r.Body))
				}
				errs <- err
			}()
		}
		for range clients {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		peaks[clients] = bbPeakRSS(t, pid())
		t.Logf("%2d listings of %d files (%d bytes of JSON each) at once: %v, server peak RSS %.1f MiB",
			clients, dirs*perDir, len(one.Body), time.Since(start).Round(time.Millisecond), float64(peaks[clients])/(1<<20))
	}
	t.Logf("one listing alone: server peak RSS %.1f MiB", float64(peaks[1])/(1<<20))
	if peaks[16] > peaks[2]*3/2 {
		t.Errorf("16 listings at once peaked at %.1f MiB, more than 1.5 times the %.1f MiB of 2", float64(peaks[16])/(1<<20), float64(peaks[2])/(1<<20))
	}
}
