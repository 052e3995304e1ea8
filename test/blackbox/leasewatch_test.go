package blackbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbListedEntry lists the export and returns the entry of path.
func bbListedEntry(t *testing.T, p *harness.Process, path string) bbEntry {
	t.Helper()
	l := bbDecodeListing(t, harness.Get(t, p.Ready.Listen, "/resources/files"), 0, "advisory", "out/") // the harness launches advisory
	for _, e := range l.Entries {
		if e.Path == path {
			return e
		}
	}
	t.Fatalf("the listing has no %s: %+v", path, l.Entries)
	return bbEntry{}
}

// TestATouchThroughAHardLinkOutsideTheRootIsListedUnderLeases pins docs/operator-guide.md,
// "Listing cost", in lease mode: a warm listing that states no unchanged file still lists a
// `touch -d` made through a hard link outside the export root, which breaks no lease, with the
// file's new mtime_ms at once, and the same bytes.
func TestATouchThroughAHardLinkOutsideTheRootIsListedUnderLeases(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""),
		Files: fixture.Layout{"out/f.txt": "the file's bytes", "notes/": ""}})
	if p.Ready.ListingCache != "lease" {
		t.Fatalf("the ready line's listing_cache is %q, want lease: this test needs a filesystem with read leases (/proc/sys/fs/leases-enable)", p.Ready.ListingCache)
	}
	file, link := filepath.Join(p.Workdir, "out/f.txt"), filepath.Join(p.Workdir, "notes/f.link")
	if err := os.Link(file, link); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // past the racy window, so a hash may be reused
	hashed := bbListedEntry(t, p, "f.txt")
	if proved := bbListedEntry(t, p, "f.txt"); proved != hashed {
		t.Fatalf("the listing after the hash says %+v, the one before %+v", proved, hashed)
	}
	if n := bbInotifyWatches(t, p.PID()); n != 1 {
		t.Fatalf("the service holds %d inotify watches, want the one of f.txt's lease", n)
	}
	const touched = "2001-09-09 01:46:40 UTC" // 1,000,000,000 s after the epoch
	if out, err := exec.Command("touch", "-d", touched, link).CombinedOutput(); err != nil {
		t.Fatalf("touch -d: %v: %s", err, out)
	}
	want := hashed
	want.MTimeMs = 1_000_000_000_000
	for _, when := range []string{"after the touch", "in the next listing"} {
		if got := bbListedEntry(t, p, "f.txt"); got != want {
			t.Fatalf("%s the listing says %+v, want %+v", when, got, want)
		}
	}
	if got := bbFileSHA(t, file); got != hashed.SHA256 {
		t.Fatalf("the listing's sha256 %s is not the file's %s", hashed.SHA256, got)
	}
}

// bbInotifyWatches counts the inotify watches process pid holds, as /proc/<pid>/fdinfo lists
// them.
func bbInotifyWatches(t *testing.T, pid int) int {
	t.Helper()
	infos, err := filepath.Glob(fmt.Sprintf("/proc/%d/fdinfo/*", pid))
	if err != nil || len(infos) == 0 {
		t.Fatalf("the service's descriptors cannot be listed: %v", err)
	}
	n := 0
	for _, info := range infos {
		text, err := os.ReadFile(info)
		if err == nil {
			n += strings.Count(string(text), "inotify wd:")
		}
	}
	return n
}
