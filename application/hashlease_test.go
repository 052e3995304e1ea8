package application_test

import (
	"errors"
	"testing"
	"time"

	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/ports"
)

// unleasable refuses every lease, as osfs does for a file of another user or beyond its limit.
type unleasable struct{}

func (unleasable) Lease(ports.File) (ports.Lease, error) { return nil, errors.New("not the owner") }

func (unleasable) Sync() {}

// countedLeases leases the file a countingFile counts the reads of.
type countedLeases struct{ ports.ReadLeases }

func (l countedLeases) Lease(f ports.File) (ports.Lease, error) {
	if c, ok := f.(countingFile); ok {
		f = c.File
	}
	return l.ReadLeases.Lease(f)
}

// TestHashReuseUnderLeasesFollowsTheStatTheLeaseAndTheAge pins
// docs/operator-guide.md, "Listing cost", in lease mode: a hash taken under a read lease is
// reused while the stat proves the file unchanged and the lease is unbroken, however old it
// is; a file open for writing when it was hashed is hashed again; a file that could not be
// leased keeps the max-age bound. Each row writes v1 at t0 (with a max age of one minute),
// lists at t1, changes the file as the row says, lists again at t2, and must then report the
// bytes the row names.
func TestHashReuseUnderLeasesFollowsTheStatTheLeaseAndTheAge(t *testing.T) {
	const v1, v2 = "version one 16 b", "version two 16 b"
	t0 := epoch
	leased := func(w *world) ports.ReadLeases { return countedLeases{w.fs.Leases()} }
	mappedWrite := func(t *testing.T, w *world) {
		closeFile, err := w.fs.OpenForWriting("out/f")
		if err != nil {
			t.Fatal(err)
		}
		defer closeFile()
		if err := w.fs.WriteMapped("out/f", []byte(v2)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		rule   string
		leases func(*world) ports.ReadLeases // nil: max-age mode
		held   bool                          // whether a writer holds the file open from before t1 on
		t1, t2 time.Time
		change func(*testing.T, *world)
		want   string
		reread bool
	}{
		{"an unchanged leased file is reused long past the max age",
			leased, false, t0.Add(time.Minute), t0.Add(time.Hour), nil, v1, false},
		{"a write through a mapping made after a leased hash is seen at once",
			leased, false, t0.Add(time.Minute), t0.Add(time.Minute + time.Second), mappedWrite, v2, true},
		{"a rewrite that kept every time breaks the lease and is seen",
			leased, false, t0.Add(time.Minute), t0.Add(time.Minute + time.Second), func(t *testing.T, w *world) {
				if err := w.fs.Rewrite("out/f", []byte(v2), t0, t0); err != nil {
					t.Fatal(err)
				}
			}, v2, true},
		{"a write through a mapping held since before the hash is seen at once",
			leased, true, t0.Add(time.Minute), t0.Add(time.Minute + time.Second), func(t *testing.T, w *world) {
				if err := w.fs.WriteMapped("out/f", []byte(v2)); err != nil {
					t.Fatal(err)
				}
			}, v2, true},
		{"a file open for writing when hashed is read again though unchanged",
			leased, true, t0.Add(time.Minute), t0.Add(time.Minute + time.Second), nil, v1, true},
		{"a file replaced by another inode under a held lease is read again",
			leased, false, t0.Add(time.Minute), t0.Add(time.Hour), func(t *testing.T, w *world) {
				if err := w.fs.WriteFile("out/f", []byte(v2), t0); err != nil {
					t.Fatal(err)
				}
			}, v2, true},
		{"a leased hash taken within the racy window is not reused",
			leased, false, t0.Add(time.Second), t0.Add(time.Hour), nil, v1, true},
		{"a file that cannot be leased is reused within the max age",
			func(*world) ports.ReadLeases { return unleasable{} }, false, t0.Add(time.Minute), t0.Add(time.Minute + 29*time.Second), nil, v1, false},
		{"a file that cannot be leased is read again past the max age",
			func(*world) ports.ReadLeases { return unleasable{} }, false, t0.Add(time.Minute), t0.Add(2*time.Minute + time.Second), nil, v1, true},
		{"without leases a write through a mapping stays unseen within the max age",
			nil, false, t0.Add(time.Minute), t0.Add(time.Minute + time.Second), mappedWrite, v1, false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			w := newWorld(t, containment.Sealed)
			if err := w.fs.WriteFile("out/f", []byte(v1), t0); err != nil {
				t.Fatal(err)
			}
			counting := &countingFS{ExportFS: w.fs}
			files := application.NewFiles(outPlane, w.session, counting, w.reader, w.clock, w.trace)
			files.BoundHashAge(time.Minute)
			wantMode := application.ListingCacheMaxAge
			if c.leases != nil {
				files.LeaseHashes(c.leases(w))
				wantMode = application.ListingCacheLease
			}
			if got := files.ListingCache(); got != wantMode {
				t.Fatalf("ListingCache = %q, want %q", got, wantMode)
			}
			if c.held {
				closeFile, err := w.fs.OpenForWriting("out/f")
				if err != nil {
					t.Fatal(err)
				}
				defer closeFile()
			}
			setClock(w, c.t1)
			if got, _ := listed(t, files, counting); got["f"] != sha(v1) {
				t.Fatalf("first listing: %q, want the hash of v1", got["f"])
			}
			if c.change != nil {
				c.change(t, w)
			}
			setClock(w, c.t2)
			got, read := listed(t, files, counting)
			if got["f"] != sha(c.want) {
				t.Errorf("second listing reported %q, want the hash of %q", got["f"], c.want)
			}
			if (read > 0) != c.reread {
				t.Errorf("second listing read %d bytes; want it to read the file: %v", read, c.reread)
			}
		})
	}
}
