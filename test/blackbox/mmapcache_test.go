package blackbox_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
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
// with --hash-cache-max-age 1s the listing's sha256 equals the bytes on disk again no later
// than 1 s after the hash it replaces was taken. The ready line says "listing_cache":
// "max-age".
func TestAWriteThroughADirtyMappingIsListedWithinTheMaxAge(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""),
		Files: fixture.Layout{"out/mapped.bin": "aaaaaaaaaaaaaaaa"},
		Args:  []string{"--hash-cache-max-age", "1s"}})
	if p.Ready.ListingCache != "max-age" {
		t.Fatalf("the ready line's listing_cache is %q, want max-age", p.Ready.ListingCache)
	}
	addr := p.Ready.Listen
	path := filepath.Join(p.Workdir, "out/mapped.bin")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 16, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Munmap(mem) }()
	mem[0] = 'b'                        // dirties the page: the times move now, and not at the writes below
	time.Sleep(2100 * time.Millisecond) // past the racy window, so the next hash may be reused
	onDisk := func() string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:])
	}
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
