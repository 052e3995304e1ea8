package osfs_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/osfs/osfstest"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// watchedLease leases path and fails unless the lease is watched; it returns the lease and
// its count after a Sync.
func watchedLease(t *testing.T, fs *osfs.FS, leases *osfs.Leases, path string) (ports.Lease, uint64) {
	t.Helper()
	l, err := leaseOf(t, fs, leases, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Release)
	leases.Sync()
	count, watched := l.Changes()
	if !watched {
		t.Fatalf("the lease of %s is not watched", path)
	}
	return l, count
}

// TestTheWatchOfALeasedInodeSeesEveryChangeThroughAnyName pins osfs.Leases' watches: a
// change to a leased inode's attributes, made through any of its names, moves its count at
// the next Sync and leaves the lease held; a write or a truncate leaves no lease both held
// and unchanged.
func TestTheWatchOfALeasedInodeSeesEveryChangeThroughAnyName(t *testing.T) {
	cases := []struct {
		rule string
		// change changes the file at path, whose other name (in another directory) is link.
		change func(t *testing.T, path, link string) error
		held   bool // whether the lease must still be held
	}{
		{"touch -d through a hard link in another directory moves the count", func(t *testing.T, _, link string) error {
			return os.Chtimes(link, time.Unix(1e9, 0), time.Unix(1e9, 0))
		}, true},
		{"chmod moves the count", func(t *testing.T, path, _ string) error { return os.Chmod(path, 0o600) }, true},
		{"a new name (ln) moves the count", func(t *testing.T, path, link string) error {
			return os.Link(path, link+".2")
		}, true},
		{"removing another name moves the count", func(t *testing.T, _, link string) error { return os.Remove(link) }, true},
		{"renaming the file moves the count", func(t *testing.T, path, _ string) error { return os.Rename(path, path+".moved") }, true},
		{"a write through another name", func(t *testing.T, _, link string) error {
			return os.WriteFile(link, []byte("written"), 0o644)
		}, false},
		{"a truncate", func(t *testing.T, path, _ string) error { return os.Truncate(path, 1) }, false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			wd, fs, leases := leaseWorld(t, fixture.Layout{"out/f": "content", "out/g": "other"}, osfs.LeaseOptions{})
			path := filepath.Join(wd, "out", "f")
			link := otherName(t, path)
			l, before := watchedLease(t, fs, leases, "out/f")
			other, otherBefore := watchedLease(t, fs, leases, "out/g")
			if err := c.change(t, path, link); err != nil {
				t.Fatal(err)
			}
			leases.Sync()
			after, watched := l.Changes()
			moved := !watched || after != before
			if c.held && (!l.Held() || !watched || after == before) {
				t.Fatalf("held %v, watched %v, count %d -> %d; want the lease held, watched and its count moved", l.Held(), watched, before, after)
			}
			if !c.held && l.Held() && !moved {
				t.Fatalf("the lease is held and its count still %d", after)
			}
			if n, ok := other.Changes(); !ok || n != otherBefore {
				t.Errorf("the lease of another file moved from %d to %d (watched: %v)", otherBefore, n, ok)
			}
		})
	}
}

// watchLines counts the inotify watches /proc/self/fdinfo lists for l's instance.
func watchLines(t *testing.T, l *osfs.Leases) int {
	t.Helper()
	info, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(osfs.WatchFD(l)))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(info), "inotify wd:")
}

// TestTheLastLeaseOfAnInodeReleasedRemovesItsWatch pins osfs.Leases' watches: two leases of
// one inode share one watch, and the kernel's watch is removed when the last is released.
func TestTheLastLeaseOfAnInodeReleasedRemovesItsWatch(t *testing.T) {
	_, fs, leases := leaseWorld(t, fixture.Layout{"f": "content"}, osfs.LeaseOptions{})
	first, _ := watchedLease(t, fs, leases, "f")
	second, _ := watchedLease(t, fs, leases, "f")
	if n := watchLines(t, leases); n != 1 {
		t.Fatalf("two leases of one inode are %d watches, want 1", n)
	}
	first.Release()
	if n := watchLines(t, leases); n != 1 {
		t.Fatalf("with one lease of the inode left, %d watches, want 1", n)
	}
	if _, watched := second.Changes(); !watched {
		t.Fatal("the lease left is no longer watched")
	}
	second.Release()
	if n := watchLines(t, leases); n != 0 {
		t.Fatalf("with no lease left, %d watches, want none", n)
	}
}

// TestAnOverflowedEventQueueMovesEveryCount pins osfs.Leases' watches: once the kernel's
// event queue overflowed (more events than /proc/sys/fs/inotify/max_queued_events before a
// Sync), every lease's count has moved, an untouched file's too; half as many events do not
// move it.
func TestAnOverflowedEventQueueMovesEveryCount(t *testing.T) {
	wd, fs, leases := leaseWorld(t, fixture.Layout{"a": "a", "b": "b", "quiet": "q"}, osfs.LeaseOptions{})
	watchedLease(t, fs, leases, "a")
	watchedLease(t, fs, leases, "b")
	quiet, before := watchedLease(t, fs, leases, "quiet")
	a, b := filepath.Join(wd, "a"), filepath.Join(wd, "b")
	osfstest.ChangeModes(t, 1000, a, b)
	leases.Sync()
	if after, _ := quiet.Changes(); after != before {
		t.Fatalf("1000 events of other files moved the untouched file's count from %d to %d", before, after)
	}
	osfstest.OverflowInotify(t, a, b)
	leases.Sync()
	if after, watched := quiet.Changes(); watched && after == before {
		t.Fatalf("after an overflow the untouched file's count is still %d", after)
	}
}
