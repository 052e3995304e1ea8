package osfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// leaseWorld is a workdir holding layout, its FS and its Leases.
func leaseWorld(t testing.TB, layout fixture.Layout, opts osfs.LeaseOptions) (wd string, fs *osfs.FS, leases *osfs.Leases) {
	t.Helper()
	wd, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fixture.Write(t, wd, layout)
	if fs, err = osfs.New(wd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	session, err := osfs.OpenSessionDir(wd, "ses_lease")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	if leases, err = osfs.OpenLeases(fs, session, opts); err != nil {
		t.Fatalf("leases are not available where the tests run: %v", err)
	}
	t.Cleanup(func() { leases.Close() })
	return wd, fs, leases
}

func TestReadLeasesContract(t *testing.T) {
	porttest.RunReadLeases(t, func(t *testing.T, layout fixture.Layout) porttest.LeaseFixture {
		wd, fs, leases := leaseWorld(t, layout, osfs.LeaseOptions{})
		return porttest.LeaseFixture{Leases: leases, FS: fs, OpenForWriting: func(path string) func() {
			t.Helper()
			f, err := os.OpenFile(filepath.Join(wd, path), os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return func() {}
			}
			return func() { f.Close() }
		}, SetTimes: func(path string, mtime time.Time) {
			t.Helper()
			if err := os.Chtimes(otherName(t, filepath.Join(wd, path)), mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}}
	})
}

// otherName links the file at path under a new name in a directory of its own, beside the
// workdir, and returns that name.
func otherName(t testing.TB, path string) string {
	t.Helper()
	other := filepath.Join(t.TempDir(), "link")
	if err := os.Link(path, other); err != nil {
		t.Fatal(err)
	}
	return other
}

// openIn opens path beneath the workdir the way a listing does.
func openIn(t testing.TB, fs *osfs.FS, path string) ports.File {
	t.Helper()
	rel, err := pathpolicy.Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenFile(".", rel, containment.Scoped)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// leaseOf takes a lease of path, closing the file it was taken through.
func leaseOf(t testing.TB, fs *osfs.FS, leases *osfs.Leases, path string) (ports.Lease, error) {
	t.Helper()
	f := openIn(t, fs, path)
	defer f.Close()
	return leases.Lease(f)
}

// TestLeasesHoldAtMostTheirLimit pins osfs.Leases: beyond its limit a file is refused a
// lease (it is then treated as one that cannot be leased), and a lease given back makes room.
func TestLeasesHoldAtMostTheirLimit(t *testing.T) {
	_, fs, leases := leaseWorld(t, fixture.Layout{"a": "a", "b": "b", "c": "c"}, osfs.LeaseOptions{Limit: 2})
	first, err := leaseOf(t, fs, leases, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaseOf(t, fs, leases, "b"); err != nil {
		t.Fatal(err)
	}
	if l, err := leaseOf(t, fs, leases, "c"); err == nil || errors.Is(err, ports.ErrOpenForWriting) {
		t.Fatalf("a third lease under a limit of 2: %v, %v; want a refusal that is not ErrOpenForWriting", l, err)
	}
	first.Release()
	if _, err := leaseOf(t, fs, leases, "c"); err != nil {
		t.Fatalf("after a release, a lease under the limit: %v", err)
	}
	if n := leases.Count(); n != 2 {
		t.Fatalf("%d leases held, want 2", n)
	}
}

// TestALeaseOfADeletedFileIsGivenUpBySweep pins osfs.Leases's sweep: a held descriptor pins
// a deleted file's blocks, so a lease whose file has no name left is given up within
// SweepEvery.
func TestALeaseOfADeletedFileIsGivenUpBySweep(t *testing.T) {
	wd, fs, leases := leaseWorld(t, fixture.Layout{"gone": "bytes", "kept": "bytes"}, osfs.LeaseOptions{SweepEvery: 20 * time.Millisecond})
	gone, err := leaseOf(t, fs, leases, "gone")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := leaseOf(t, fs, leases, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(wd, "gone")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); leases.Count() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d leases held 5 s after a leased file was deleted, want 1", leases.Count())
		}
	}
	if gone.Held() || !kept.Held() {
		t.Fatalf("held: the deleted file's %v (want false), the kept file's %v (want true)", gone.Held(), kept.Held())
	}
}

// TestANonBlockingOpenForWritingOfALeasedFileFailsAndBreaksTheLease pins what
// docs/operator-guide.md, "Listing cost", tells agents: an open for writing with O_NONBLOCK
// of a file the service holds a lease on fails with EWOULDBLOCK instead of waiting, and
// breaks the lease, so that the next try goes through.
func TestANonBlockingOpenForWritingOfALeasedFileFailsAndBreaksTheLease(t *testing.T) {
	wd, fs, leases := leaseWorld(t, fixture.Layout{"f": "bytes"}, osfs.LeaseOptions{})
	l, err := leaseOf(t, fs, leases, "f")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(wd, "f")
	if fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); !errors.Is(err, unix.EWOULDBLOCK) {
		if err == nil {
			unix.Close(fd)
		}
		t.Fatalf("a non-blocking open for writing of a leased file: %v, want EWOULDBLOCK", err)
	}
	for deadline := time.Now().Add(5 * time.Second); leases.Count() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the broken lease was not given up within 5 s")
		}
	}
	if l.Held() {
		t.Fatal("the lease is held once it was given up to a non-blocking open for writing")
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("once the lease is given up, a non-blocking open for writing: %v", err)
	}
	unix.Close(fd)
}

// TestABreakThatReachesTheProcessIsHandledToo pins osfs.Leases's fallback: a break whose
// signal reaches the process rather than Leases' own thread (the kernel's signal queue was
// full, or the break came before the thread was made the owner) still gives the broken lease
// up, and only it, so that the writer's open goes on.
func TestABreakThatReachesTheProcessIsHandledToo(t *testing.T) {
	wd, fs, leases := leaseWorld(t, fixture.Layout{"broken": "bytes", "kept": "bytes"}, osfs.LeaseOptions{})
	broken, err := leaseOf(t, fs, leases, "broken")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := leaseOf(t, fs, leases, "kept")
	if err != nil {
		t.Fatal(err)
	}
	osfs.OwnLeasesByTheProcess(leases)
	opened := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(filepath.Join(wd, "broken"), os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an open for writing still waits 5 s after a break that signalled the process")
	}
	if broken.Held() || !kept.Held() {
		t.Fatalf("held: the broken lease %v (want false), the other %v (want true)", broken.Held(), kept.Held())
	}
}
