package blackbox_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbListedSHA lists the files plane and returns the sha256 it lists for path.
func bbListedSHA(t *testing.T, addr, path string) string {
	t.Helper()
	r := harness.Get(t, addr, "/resources/files")
	var body struct {
		Entries []struct {
			Path   string `json:"path"`
			SHA256 string `json:"sha256"`
		} `json:"entries"`
	}
	if r.Status != 200 {
		t.Fatalf("listing answered %d", r.Status)
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	for _, e := range body.Entries {
		if e.Path == path {
			return e.SHA256
		}
	}
	t.Fatalf("the listing has no %s", path)
	return ""
}

// TestAWriteThroughADirtyMappingIsListedWithinTheMaxAge pins docs/operator-guide.md,
// "Listing cost": a write through a shared writable mapping whose page is already dirty moves
// neither the modification nor the change time, so a warm listing cannot see it by the stat;
// with --listing-cache max-age and --hash-cache-max-age 1s the listing's sha256 equals the
// bytes on disk again no later than 1 s after the hash it replaces was taken. The ready line
// says "listing_cache": "max-age".
func TestAWriteThroughADirtyMappingIsListedWithinTheMaxAge(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""),
		Files: fixture.Layout{"out/mapped.bin": "aaaaaaaaaaaaaaaa"},
		Args:  []string{"--listing-cache", "max-age", "--hash-cache-max-age", "1s"}})
	if p.Ready.ListingCache != "max-age" {
		t.Fatalf("the ready line's listing_cache is %q, want max-age", p.Ready.ListingCache)
	}
	addr := p.Ready.Listen
	path := filepath.Join(p.Workdir, "out/mapped.bin")
	mem, _ := bbMapped(t, path, 16)
	mem[0] = 'b'                        // dirties the page: the times move now, and not at the writes below
	time.Sleep(2100 * time.Millisecond) // past the racy window, so the next hash may be reused
	onDisk := func() string { return bbFileSHA(t, path) }
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := bbListedSHA(t, addr, "mapped.bin"); got != onDisk() {
		t.Fatalf("the cold listing says %s, the disk %s", got, onDisk())
	}
	hashed := time.Now()
	mem[1] = 'c' // through the dirty page: no time moves
	if after, _ := os.Stat(path); !after.ModTime().Equal(before.ModTime()) {
		t.Logf("this filesystem moved the mtime on a write through a dirty mapping; the test still holds")
	}
	time.Sleep(time.Until(hashed.Add(1100 * time.Millisecond)))
	if got, want := bbListedSHA(t, addr, "mapped.bin"), onDisk(); got != want {
		t.Fatalf("more than the max age after the write, the listing says %s, the disk %s", got, want)
	}
}

// bbFileSHA is the sha256 of the file at path as it is now.
func bbFileSHA(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// bbMapped opens path for writing, as an agent does, and maps its first n bytes shared and
// writable; it returns how long the open took.
func bbMapped(t *testing.T, path string, n int) ([]byte, time.Duration) {
	t.Helper()
	start := time.Now()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mem, err := syscall.Mmap(int(f.Fd()), 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(mem) })
	return mem, took
}

// TestAWriteThroughADirtyMappingIsListedAtOnceUnderLeases pins docs/operator-guide.md,
// "Listing cost", in lease mode (the ready line says "listing_cache": "lease"): with an age
// bound far away (10 min), a write through a shared writable mapping whose page is already
// dirty, which moves no time, is in the very next listing, whether the mapping was made before
// the file was first listed (the file could not be leased, so its hash is never reused) or
// after (its open for writing broke the lease the listing held, and waited only for the
// service to give it up, far less than the kernel's 45 s).
func TestAWriteThroughADirtyMappingIsListedAtOnceUnderLeases(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""),
		Files: fixture.Layout{"out/early.bin": "aaaaaaaaaaaaaaaa", "out/late.bin": "aaaaaaaaaaaaaaaa"},
		Args:  []string{"--hash-cache-max-age", "10m"}})
	if p.Ready.ListingCache != "lease" {
		t.Fatalf("the ready line's listing_cache is %q, want lease: this test needs a filesystem with read leases (/proc/sys/fs/leases-enable)", p.Ready.ListingCache)
	}
	addr := p.Ready.Listen
	early, late := filepath.Join(p.Workdir, "out/early.bin"), filepath.Join(p.Workdir, "out/late.bin")
	listedAsOnDisk := func(when string) {
		t.Helper()
		for _, f := range []struct{ name, path string }{{"early.bin", early}, {"late.bin", late}} {
			if got, want := bbListedSHA(t, addr, f.name), bbFileSHA(t, f.path); got != want {
				t.Fatalf("%s, the listing says %s for %s, the disk %s", when, got, f.name, want)
			}
		}
	}

	mapped, _ := bbMapped(t, early, 16)
	mapped[0] = 'b'                     // dirties the page: the times move now, and not at the writes below
	time.Sleep(2100 * time.Millisecond) // past the racy window, so a hash may be reused
	listedAsOnDisk("cold")
	mapped[1] = 'c' // through the dirty page: no time moves
	listedAsOnDisk("after a write through a mapping made before the first listing")

	mappedLate, waited := bbMapped(t, late, 16) // breaks the lease the listings hold
	t.Logf("the open for writing of a leased file waited %v", waited)
	if waited > 10*time.Second {
		t.Fatalf("the open for writing of a leased file waited %v: the service did not give the lease up", waited)
	}
	mappedLate[0] = 'b'
	listedAsOnDisk("after a first write through a mapping made after the first listing")
	mappedLate[1] = 'c' // through the dirty page: no time moves
	listedAsOnDisk("after a write through the dirty page of that mapping")
}

// TestAServiceThatCannotLeaseTheAgentsFilesSaysMaxAgeAndWhy pins docs/operator-guide.md,
// "Listing cost": a service that neither owns the workdir nor has CAP_LEASE could not lease
// the files an agent writes there, so it takes no leases, says "listing_cache": "max-age"
// in the ready line and GET /v1/status, and logs why once, naming no path.
func TestAServiceThatCannotLeaseTheAgentsFilesSaysMaxAgeAndWhy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test gives the workdir to another user and drops CAP_LEASE: it needs root, as CI runs it")
	}
	// The wrapper hands the workdir (the argument after --workdir) to nobody, then runs the
	// server without CAP_LEASE in any set.
	wrapper := []string{"sh", "-c", `wd=$(printf '%s\n' "$@" | sed -n '/^--workdir$/{n;p;}') && chown 65534 "$wd" &&
		exec setpriv --inh-caps -lease --bounding-set -lease -- "$@"`, "sh"}
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""),
		Files: fixture.Layout{"out/a.txt": "A"}, Wrapper: wrapper})
	if p.Ready.ListingCache != "max-age" {
		t.Fatalf("the ready line's listing_cache is %q, want max-age", p.Ready.ListingCache)
	}
	p.WaitForStderr(t, "the listing hash cache takes no read leases")
	p.WaitForStderr(t, "without CAP_LEASE")
	if strings.Contains(p.Stderr(), p.Workdir) {
		t.Errorf("the log names the workdir's path:\n%s", p.Stderr())
	}
	a := harness.Control(t, p.Ready.Control, "GET", "/v1/status", nil)
	if !strings.Contains(string(a.Raw), `"listing_cache":"max-age"`) {
		t.Errorf("GET /v1/status says %s, want listing_cache max-age", a.Raw)
	}
	if got := bbListedSHA(t, p.Ready.Listen, "a.txt"); got != bbFileSHA(t, filepath.Join(p.Workdir, "out/a.txt")) {
		t.Errorf("the listing says %s for a.txt", got)
	}
}
