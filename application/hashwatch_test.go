package application_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/memfs"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/osfs/osfstest"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// unwatchedLeases hands out leases that report themselves unwatched, as osfs's do where no
// watch can be added.
type unwatchedLeases struct{ ports.ReadLeases }

func (l unwatchedLeases) Lease(f ports.File) (ports.Lease, error) {
	x, err := l.ReadLeases.Lease(f)
	if err != nil {
		return nil, err
	}
	return unwatched{x}, nil
}

type unwatched struct{ ports.Lease }

func (unwatched) Changes() (uint64, bool) { return 0, false }

// listingOf lists out/ and returns the entry of path, how many files the listing stated and
// how many bytes it read.
func listingOf(t *testing.T, files *application.Files, fs *countingFS, path string) (application.ListedFile, int64, int64) {
	t.Helper()
	stats, read := fs.stats.Load(), fs.read.Load()
	_, listing, err := listOf(t, files, context.Background(), get)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range listing.Entries {
		if e.Path == path {
			return e, fs.stats.Load() - stats, fs.read.Load() - read
		}
	}
	t.Fatalf("%s is not listed: %+v", path, listing.Entries)
	return application.ListedFile{}, 0, 0
}

// TestAWatchedLeaseSkipsTheStatOnlyWhileNothingChanged pins docs/operator-guide.md, "Listing
// cost", in lease mode with watched leases: a file is hashed by one listing and stated by the
// next, which proves it; from then on it is listed without a stat while its lease is held,
// its watch reports no change and its directory entry names the inode it was hashed from.
// Each row writes d/f at t0, lists at t1 (the hash), t1+1s (the proof), changes the file as
// the row says, lists at t1+2s and t1+3s, and counts the stats and reads of those two.
func TestAWatchedLeaseSkipsTheStatOnlyWhileNothingChanged(t *testing.T) {
	const v1, v2 = "version one 16 b", "version two 16 b"
	t0, later := epoch, epoch.Add(30*time.Second)
	cases := []struct {
		rule   string
		t1     time.Time
		leases func(memfs.Leases) ports.ReadLeases
		change func(*testing.T, *world) error
		// What the listing after the change, and the one after it, state; whether the first
		// reads the file; what it lists.
		stats, next int64
		reread      bool
		want        string
		mtime       time.Time
	}{
		{"an unchanged file is listed without a stat", t0.Add(time.Minute), nil,
			nil, 0, 0, false, v1, t0},
		{"a change of times through any name is stated, read again and listed with its new time", t0.Add(time.Minute), nil,
			func(_ *testing.T, w *world) error { return w.fs.SetTimes("out/d/f", later, later) }, 1, 1, true, v1, later},
		{"a file renamed over the name is stated and read again", t0.Add(time.Minute), nil,
			func(_ *testing.T, w *world) error {
				if err := w.fs.WriteFile("out/new", []byte(v2), t0); err != nil {
					return err
				}
				return w.fs.Rename("out/new", "out/d/f")
			}, 1, 1, true, v2, t0},
		{"another inode at the name, the hashed one untouched, is stated and read again", t0.Add(time.Minute), nil,
			func(_ *testing.T, w *world) error {
				if err := w.fs.Rename("out/d", "elsewhere/d"); err != nil { // out of the export root
					return err
				}
				return w.fs.WriteFile("out/d/f", []byte(v2), t0)
			}, 1, 1, true, v2, t0},
		{"a broken lease is read again", t0.Add(time.Minute), nil,
			func(_ *testing.T, w *world) error {
				closeFile, err := w.fs.OpenForWriting("out/d/f")
				if err == nil {
					closeFile()
				}
				return err
			}, 1, 1, true, v1, t0},
		{"an overflow makes every file stated once", t0.Add(time.Minute), nil,
			func(_ *testing.T, w *world) error { w.fs.Leases().Overflow(); return nil }, 1, 0, false, v1, t0},
		{"an unwatched lease is stated at every listing", t0.Add(time.Minute),
			func(l memfs.Leases) ports.ReadLeases { return unwatchedLeases{countedLeases{l}} },
			nil, 1, 1, false, v1, t0},
		{"a hash taken within the racy window is never proved, and stated and read every time", t0.Add(time.Second), nil,
			nil, 1, 1, true, v1, t0},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			w := newWorld(t, containment.Sealed)
			if err := w.fs.WriteFile("out/d/f", []byte(v1), t0); err != nil {
				t.Fatal(err)
			}
			counting := &countingFS{ExportFS: w.fs}
			files := application.NewFiles(outPlane, w.session, counting, w.reader, w.clock, w.trace)
			var leases ports.ReadLeases = countedLeases{w.fs.Leases()}
			if c.leases != nil {
				leases = c.leases(w.fs.Leases())
			}
			files.LeaseHashes(leases)
			setClock(w, c.t1)
			listingOf(t, files, counting, "d/f")
			setClock(w, c.t1.Add(time.Second))
			if _, stats, _ := listingOf(t, files, counting, "d/f"); stats != 1 {
				t.Fatalf("the listing after the hash stated %d files, want the one", stats)
			}
			if c.change != nil {
				if err := c.change(t, w); err != nil {
					t.Fatal(err)
				}
			}
			setClock(w, c.t1.Add(2*time.Second))
			got, stats, read := listingOf(t, files, counting, "d/f")
			if got.SHA256 != sha(c.want) || got.MTimeMs != c.mtime.UnixMilli() || got.Size != int64(len(c.want)) {
				t.Errorf("listed %+v, want the hash of %q, size %d, mtime_ms %d", got, c.want, len(c.want), c.mtime.UnixMilli())
			}
			if stats != c.stats || (read > 0) != c.reread {
				t.Errorf("the listing after the change stated %d files and read %d bytes; want %d stated, read: %v", stats, read, c.stats, c.reread)
			}
			setClock(w, c.t1.Add(3*time.Second))
			if again, stats, _ := listingOf(t, files, counting, "d/f"); stats != c.next || again != got {
				t.Errorf("the next listing stated %d files and listed %+v; want %d stated, and %+v", stats, again, c.next, got)
			}
		})
	}
}

// TestAWatchedListingOnDiskSeesWhatAStatWould pins the same rules on the real filesystem,
// with osfs's leases and their inotify watches: out/f, out/g and out/h are hashed by one
// listing and proved by the next; after the row's change the next listing states exactly the
// files the row names and lists f as a stat and a read would.
func TestAWatchedListingOnDiskSeesWhatAStatWould(t *testing.T) {
	const v1, v2 = "version one 16 b", "version two 16 b"
	later := fixture.MTime.Add(24 * time.Hour)
	cases := []struct {
		rule   string
		change func(t *testing.T, wd, out string)
		stats  int64
		want   string
		mtime  time.Time
	}{
		{"nothing changed: no file is stated", func(*testing.T, string, string) {}, 0, v1, fixture.MTime},
		{"touch -d through a hard link outside the export root: f is stated and listed with its new time",
			func(t *testing.T, wd, out string) {
				link := filepath.Join(wd, "elsewhere")
				if err := os.Link(filepath.Join(out, "f"), link); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(link, later, later); err != nil {
					t.Fatal(err)
				}
			}, 1, v1, later},
		{"a rename over f: f is stated and listed with the new bytes", func(t *testing.T, _, out string) {
			write(t, filepath.Join(out, ".f.tmp"), v2)
			if err := os.Rename(filepath.Join(out, ".f.tmp"), filepath.Join(out, "f")); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(filepath.Join(out, "f"), fixture.MTime, fixture.MTime); err != nil {
				t.Fatal(err)
			}
		}, 1, v2, fixture.MTime},
		{"an overflowed event queue: every file is stated", func(t *testing.T, _, out string) {
			osfstest.OverflowInotify(t, filepath.Join(out, "g"), filepath.Join(out, "h"))
		}, 3, v1, fixture.MTime},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			wd, out, disk := onDisk(t, v1, "f", "g", "h")
			files, counting := provedOnDisk(t, wd, disk, "f")
			c.change(t, wd, out)
			got, stats, _ := listingOf(t, files, counting, "f")
			if got.SHA256 != sha(c.want) || got.MTimeMs != c.mtime.UnixMilli() {
				t.Errorf("listed %+v, want the hash of %q and mtime_ms %d", got, c.want, c.mtime.UnixMilli())
			}
			if stats != c.stats {
				t.Errorf("the listing after the change stated %d files, want %d", stats, c.stats)
			}
		})
	}
}

// provedOnDisk lists the export disk holds in lease mode, over osfs's leases, an hour after
// its files were written, twice: the first listing hashes every file and the second, which
// must state them all, proves the hashes. It returns the Files and the counting FS it lists
// through; path is a file the export holds.
func provedOnDisk(t *testing.T, wd string, disk *osfs.FS, path string) (*application.Files, *countingFS) {
	t.Helper()
	session, err := osfs.OpenSessionDir(wd, "ses_watch")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	leases, err := osfs.OpenLeases(disk, session, osfs.LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leases.Close() })
	w := newWorld(t, containment.Sealed)
	counting := &countingFS{ExportFS: disk}
	files := application.NewFiles(outPlane, w.session, counting, w.reader, clock.NewManual(time.Now().Add(time.Hour)), w.trace)
	files.LeaseHashes(countedLeases{leases})
	_, listing, err := listOf(t, files, context.Background(), get) // hashes every file
	if err != nil {
		t.Fatal(err)
	}
	if _, stats, _ := listingOf(t, files, counting, path); stats != int64(len(listing.Entries)) {
		t.Fatalf("the listing after the hashes stated %d files, want all %d", stats, len(listing.Entries))
	}
	return files, counting
}

// TestAFileMountedOverTheNameIsListedAsMounted pins the rule that makes a directory entry's
// inode proof of the file at its name: a file bind-mounted over out/f, from the same
// filesystem, leaves out/f's directory entry naming the inode it covers, on the same device,
// and sends no event to that inode's watch; the mount moves every count, so out/f is stated
// and read, and listed with the mounted file's bytes.
func TestAFileMountedOverTheNameIsListedAsMounted(t *testing.T) {
	if !osfstest.InPrivateMountNamespace(t) {
		return
	}
	const v1, v2 = "version one 16 b", "version two 16 b"
	wd, out, disk := onDisk(t, v1, "f")
	other := filepath.Join(wd, "other")
	write(t, other, v2)
	files, counting := provedOnDisk(t, wd, disk, "f")
	if err := unix.Mount(other, filepath.Join(out, "f"), "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	// Detached, as the lease of the mounted file holds it until the leases are closed.
	t.Cleanup(func() { _ = unix.Unmount(filepath.Join(out, "f"), unix.MNT_DETACH) })
	got, stats, read := listingOf(t, files, counting, "f")
	if got.SHA256 != sha(v2) || stats != 1 || read == 0 {
		t.Fatalf("listed %+v, stating %d files and reading %d bytes; want the mounted file's hash, stated and read", got, stats, read)
	}
}
