package application_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// countingFS counts the bytes every listing reads from the files it visits, and the stats
// it takes of the files it is asked about.
type countingFS struct {
	ports.ExportFS
	read, stats atomic.Int64
}

func (c *countingFS) Walk(ctx context.Context, root string, class containment.Class, visit ports.Visitor) error {
	inner, known := visit.Visit, visit.Known
	visit.Visit = func(p string, f ports.File) error { return inner(p, countingFile{f, &c.read}) }
	visit.Known = func(p []byte, inode resolve.Inode, stat func() (ports.FileStat, bool)) bool {
		return known(p, inode, func() (ports.FileStat, bool) {
			c.stats.Add(1)
			return stat()
		})
	}
	return c.ExportFS.Walk(ctx, root, class, visit)
}

type countingFile struct {
	ports.File
	read *atomic.Int64
}

func (f countingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.read.Add(int64(n))
	return n, err
}

// listed lists out/ and returns each path's sha256, and how many bytes the listing read.
func listed(t *testing.T, files *application.Files, fs *countingFS) (map[string]string, int64) {
	t.Helper()
	before := fs.read.Load()
	_, listing, err := listOf(t, files, context.Background(), get)
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[string]string{}
	for _, e := range listing.Entries {
		hashes[e.Path] = e.SHA256
	}
	return hashes, fs.read.Load() - before
}

// TestHashReuseFollowsTheRacyRule pins docs/operator-guide.md, "Listing cost": a listing
// reuses the hash an earlier listing took of a file only when the file has the same device,
// inode, size, modification and change time, and both times were older than the moment of
// the earlier hash by more than RacyWindow. Each row writes v1 (16 bytes) at t0, lists at t1,
// changes the file as the row says, lists again at t1 + 1 min, and must then report the
// bytes the file holds.
func TestHashReuseFollowsTheRacyRule(t *testing.T) {
	const v1, v2, longer = "version one 16 b", "version two 16 b", "version three, longer"
	t0 := epoch
	rewrite := func(data string, mtime, ctime time.Time) func(*testing.T, *world) {
		return func(t *testing.T, w *world) {
			if err := w.fs.Rewrite("out/f", []byte(data), mtime, ctime); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		rule   string
		times  [2]time.Time // the modification and change time v1 is written with
		t1     time.Time
		change func(*testing.T, *world)
		want   string
		reread bool // whether the second listing reads the file
	}{
		{"an unchanged file older than the window is not read again",
			[2]time.Time{t0, t0}, t0.Add(time.Minute), nil, v1, false},
		{"an unchanged file changed within the window before the hash is read again",
			[2]time.Time{t0, t0}, t0.Add(time.Second), nil, v1, true},
		{"a rewrite within the window before the hash that kept every time and the size is seen",
			[2]time.Time{t0, t0}, t0.Add(time.Second), rewrite(v2, t0, t0), v2, true},
		{"a change time exactly the window before the hash is racy",
			[2]time.Time{t0.Add(-time.Hour), t0}, t0.Add(application.RacyWindow), rewrite(v2, t0.Add(-time.Hour), t0), v2, true},
		{"a change time one nanosecond more than the window before the hash is trusted",
			[2]time.Time{t0.Add(-time.Hour), t0}, t0.Add(application.RacyWindow + time.Nanosecond), nil, v1, false},
		{"a modification time within the window is racy though the change time is old",
			[2]time.Time{t0.Add(time.Hour), t0}, t0.Add(time.Minute), rewrite(v2, t0.Add(time.Hour), t0), v2, true},
		{"a rewrite in place with the same size and a restored mtime is seen by its change time",
			[2]time.Time{t0, t0}, t0.Add(time.Minute), rewrite(v2, t0, t0.Add(2*time.Minute)), v2, true},
		{"a file replaced by another inode with the same size and times is read again",
			[2]time.Time{t0, t0}, t0.Add(time.Minute), func(t *testing.T, w *world) {
				if err := w.fs.WriteFile("out/f", []byte(v2), t0); err != nil {
					t.Fatal(err)
				}
			}, v2, true},
		{"a file that grew with the same times is read again",
			[2]time.Time{t0, t0}, t0.Add(time.Minute), rewrite(longer, t0, t0), longer, true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			w := newWorld(t, containment.Sealed)
			if err := w.fs.WriteFile("out/f", []byte(v1), c.times[0]); err != nil {
				t.Fatal(err)
			}
			if err := w.fs.Rewrite("out/f", []byte(v1), c.times[0], c.times[1]); err != nil {
				t.Fatal(err)
			}
			counting := &countingFS{ExportFS: w.fs}
			files := application.NewFiles(outPlane, w.session, counting, w.reader, w.clock, w.trace)
			setClock(w, c.t1)
			if got, _ := listed(t, files, counting); got["f"] != sha(v1) {
				t.Fatalf("first listing: %q, want the hash of v1", got["f"])
			}
			if c.change != nil {
				c.change(t, w)
			}
			setClock(w, c.t1.Add(time.Minute))
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

func TestAReusedHashKeepsTheMomentItWasTaken(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/f", "bytes")
	counting := &countingFS{ExportFS: w.fs}
	files := application.NewFiles(outPlane, w.session, counting, w.reader, w.clock, w.trace)
	setClock(w, epoch.Add(time.Minute))
	listed(t, files, counting)
	for i := range 3 {
		setClock(w, epoch.Add(time.Duration(i+2)*time.Minute))
		if got, read := listed(t, files, counting); read != 0 || got["f"] != sha("bytes") {
			t.Fatalf("listing %d read %d bytes and reported %q; want the hash reused", i+2, read, got["f"])
		}
	}
}

func TestAFileListedUnderTwoPathsIsReusedUnderBoth(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/f", "bytes")
	if err := w.fs.Symlink("f", "out/g"); err != nil {
		t.Fatal(err)
	}
	counting := &countingFS{ExportFS: w.fs}
	files := application.NewFiles(outPlane, w.session, counting, w.reader, w.clock, w.trace)
	setClock(w, epoch.Add(time.Minute))
	listed(t, files, counting)
	got, read := listed(t, files, counting)
	if read != 0 || got["f"] != sha("bytes") || got["g"] != sha("bytes") {
		t.Fatalf("read %d bytes for %q; want both paths listed with the hash reused", read, got)
	}
}

func TestAFileThatCannotBeHashedRefusesTheListing(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/a", "A")
	w.write(t, "out/b", "B")
	files := application.NewFiles(outPlane, w.session, failingReads{w.fs}, w.reader, w.clock, w.trace)
	_, listing, err := listOf(t, files, context.Background(), get)
	if r, ok := refusal.As(err); !ok || r.Code != refusal.IOError || listing != nil || r.Message != refusal.IO("input/output error").Message {
		t.Fatalf("List = %v, %v; want io_error naming the read failure, never a shorter listing", listing, err)
	}
}

// failingReads is an ExportFS whose every file fails to read, as a disk error does.
type failingReads struct{ ports.ExportFS }

func (f failingReads) Walk(ctx context.Context, root string, class containment.Class, visit ports.Visitor) error {
	inner := visit.Visit
	visit.Visit = func(p string, file ports.File) error { return inner(p, failingFile{file}) }
	return f.ExportFS.Walk(ctx, root, class, visit)
}

type failingFile struct{ ports.File }

func (failingFile) Read([]byte) (int, error) {
	return 0, &os.PathError{Op: "read", Path: "/srv/x", Err: syscall.EIO}
}

// TestListingsRunAtMostMaxListingsAtOnce pins MaxListings: a listing's turn lasts from its
// walk until its answer is encoded and held, so listings whose encoding has not returned hold
// every turn, a further one waits (and is abandoned with its request), and a turn comes back
// as soon as one of them returns, before any byte of its answer is sent.
func TestListingsRunAtMostMaxListingsAtOnce(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/f", "bytes")
	files := newFiles(w, outPlane)
	type held struct {
		unblock chan struct{}
		done    chan *application.Served
	}
	hold := func() held {
		h := held{unblock: make(chan struct{}), done: make(chan *application.Served, 1)}
		encoding := make(chan struct{})
		go func() {
			_, served, err := files.List(context.Background(), get, func(*application.Listing) []byte {
				close(encoding)
				<-h.unblock
				return []byte("{}")
			})
			if err != nil {
				t.Error(err)
			}
			h.done <- served
		}()
		<-encoding
		return h
	}
	var turns []held
	for range application.MaxListings {
		turns = append(turns, hold())
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := listOf(t, files, ended, get)
	if r, ok := refusal.As(err); !ok || r.Code != refusal.IOError || r.Cause() != context.Canceled {
		t.Fatalf("a listing beyond MaxListings whose request ended = %v; want io_error caused by the cancellation", err)
	}
	got, _ := fields(w.lastEvent(t, "resource_list"))
	if got["outcome"] != "io_error" {
		t.Errorf("the abandoned listing was traced %v", got)
	}
	close(turns[0].unblock)
	first := <-turns[0].done // its answer is held, and not yet sent: its turn is back all the same
	if _, _, err := listOf(t, files, context.Background(), get); err != nil {
		t.Fatalf("a listing after one returned: %v", err)
	}
	turns = append(turns, hold())
	if _, _, err := listOf(t, files, ended, get); err == nil {
		t.Fatal("a listing beyond MaxListings ran while the others were encoding")
	}
	first.Body.Release()
	for _, h := range turns[1:] {
		close(h.unblock)
		(<-h.done).Body.Release()
	}
}

// TestListingSeesEveryChangeOnARealFilesystem holds the hash cache to the kernel's own
// timestamps (adapters/osfs over a temporary directory): each way of changing a listed file
// shows in the next listing. The clock is an hour ahead, so that every file is old enough for
// its hash to be reused: only the file's stat can tell the change, and it must. Two rewrites
// within one timestamp tick keep every time, which only the racy window can catch; that case
// runs on the real clock.
func TestListingSeesEveryChangeOnARealFilesystem(t *testing.T) {
	const v1, v2 = "version one, 20 by", "version two, 20 by"
	cases := []struct {
		rule      string
		realClock bool
		change    func(t *testing.T, out string)
		want      string
	}{
		{"an unchanged file is not read again", false, func(*testing.T, string) {}, v1},
		{"a rewrite in place with the same size and a restored mtime", false, func(t *testing.T, out string) {
			rewriteInPlace(t, filepath.Join(out, "f"), v2, true)
		}, v2},
		{"two rewrites within one timestamp tick", true, func(t *testing.T, out string) {
			rewriteInPlace(t, filepath.Join(out, "f"), v2, false)
		}, v2},
		{"a rename over the file", false, func(t *testing.T, out string) {
			tmp := filepath.Join(out, ".f.tmp")
			write(t, tmp, v2)
			if err := os.Rename(tmp, filepath.Join(out, "f")); err != nil {
				t.Fatal(err)
			}
		}, v2},
		{"a file replaced by a symlink", false, func(t *testing.T, out string) {
			write(t, filepath.Join(out, "other"), v2)
			if err := os.Remove(filepath.Join(out, "f")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("other", filepath.Join(out, "f")); err != nil {
				t.Fatal(err)
			}
		}, v2},
		{"a growing file", false, func(t *testing.T, out string) {
			f, err := os.OpenFile(filepath.Join(out, "f"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString(" and more"); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(filepath.Join(out, "f"), fixture.MTime, fixture.MTime); err != nil {
				t.Fatal(err)
			}
		}, v1 + " and more"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			_, out, disk := onDisk(t, v1, "f")
			var clk ports.Clock = clock.NewManual(time.Now().Add(time.Hour))
			if c.realClock {
				clk = &clock.System{}
			}
			w := newWorld(t, containment.Sealed)
			counting := &countingFS{ExportFS: disk}
			files := application.NewFiles(outPlane, w.session, counting, w.reader, clk, w.trace)
			if got, _ := listed(t, files, counting); got["f"] != sha(v1) {
				t.Fatalf("first listing: %q, want the hash of v1", got["f"])
			}
			c.change(t, out)
			got, read := listed(t, files, counting)
			if got["f"] != sha(c.want) {
				t.Errorf("second listing reported %q, want the hash of %q", got["f"], c.want)
			}
			if reread := c.want != v1 || c.realClock; (read > 0) != reread {
				t.Errorf("second listing read %d bytes; want it to read the file: %v", read, reread)
			}
		})
	}
}

// setClock moves the world's clock to at.
func setClock(w *world, at time.Time) { w.clock.Advance(at.Sub(w.clock.Now())) }

// onDisk makes a workdir on the real filesystem whose out/ holds each of names with content,
// and returns it, out/ and its osfs.FS, closed when the test ends.
func onDisk(t *testing.T, content string, names ...string) (wd, out string, disk *osfs.FS) {
	t.Helper()
	wd = t.TempDir()
	out = filepath.Join(wd, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		write(t, filepath.Join(out, name), content)
	}
	disk, err := osfs.New(wd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { disk.Close() })
	return wd, out, disk
}

// write creates path holding content, with the fixtures' modification time.
func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fixture.MTime, fixture.MTime); err != nil {
		t.Fatal(err)
	}
}

// rewriteInPlace truncates and rewrites the file at path (the same inode), then sets its
// modification time back, as touch -d does. When newTick is set it rewrites until the kernel
// has given the file a new change time: a rewrite within the tick of the previous change
// keeps it, and is the case only the racy window catches.
func rewriteInPlace(t *testing.T, path, content string, newTick bool) {
	t.Helper()
	before := changeTime(t, path)
	for range 1000 {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(content); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, fixture.MTime, fixture.MTime); err != nil {
			t.Fatal(err)
		}
		if !newTick || !changeTime(t, path).Equal(before) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the change time did not move in 1000 rewrites")
}

func changeTime(t *testing.T, path string) time.Time {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return time.Unix(st.Ctim.Unix())
}
