package porttest

import (
	"errors"
	"testing"
	"time"

	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// LeaseFixture is a ReadLeases over the files of a freshly built workdir.
type LeaseFixture struct {
	Leases ports.ReadLeases
	// FS is the ExportFS whose files the leases are taken on.
	FS ports.ExportFS
	// OpenForWriting opens the file at path for writing, as an agent's open(O_WRONLY) does,
	// and returns once the open went through; closeFile closes it.
	OpenForWriting func(path string) (closeFile func())
	// SetTimes sets the modification time of the file at path, as touch -d does, through
	// another name of the file where the filesystem has more than one; it breaks no lease.
	SetTimes func(path string, mtime time.Time)
}

// LeaseBuilder makes a fresh workdir holding layout and the ReadLeases of its files.
type LeaseBuilder func(t *testing.T, layout fixture.Layout) LeaseFixture

// breakWithin is how long an open for writing of a leased file may wait for the lease's
// holder to give it up; the kernel's own bound is /proc/sys/fs/lease-break-time, 45 s.
const breakWithin = 5 * time.Second

// RunReadLeases holds the leases build makes to the ports.ReadLeases rules.
func RunReadLeases(t *testing.T, build LeaseBuilder) {
	layout := fixture.Layout{"a.txt": "alpha", "b.txt": "bravo"}
	open := func(t *testing.T, fx LeaseFixture, path string) ports.File {
		t.Helper()
		rel, err := pathpolicy.Parse(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := fx.FS.OpenFile(".", rel, containment.Scoped)
		if err != nil {
			t.Fatalf("opening %s: %v", path, err)
		}
		return f
	}
	lease := func(t *testing.T, fx LeaseFixture, path string) ports.Lease {
		t.Helper()
		f := open(t, fx, path)
		defer f.Close()
		l, err := fx.Leases.Lease(f)
		if err != nil {
			t.Fatalf("leasing %s: %v", path, err)
		}
		t.Cleanup(l.Release)
		return l
	}

	t.Run("a lease taken is held after its file is closed", func(t *testing.T) {
		fx := build(t, layout)
		if l := lease(t, fx, "a.txt"); !l.Held() {
			t.Fatal("a lease just taken is not held")
		}
	})

	t.Run("an open for writing breaks a lease and goes on", func(t *testing.T) {
		fx := build(t, layout)
		l := lease(t, fx, "a.txt")
		opened := make(chan func(), 1)
		go func() { opened <- fx.OpenForWriting("a.txt") }()
		select {
		case closeFile := <-opened:
			defer closeFile()
		case <-time.After(breakWithin):
			t.Fatalf("an open for writing of a leased file still waits after %v", breakWithin)
		}
		if l.Held() {
			t.Fatal("the lease is still held after an open for writing")
		}
	})

	t.Run("a lease of one file is not broken by a writer of another", func(t *testing.T) {
		fx := build(t, layout)
		l := lease(t, fx, "a.txt")
		fx.OpenForWriting("b.txt")()
		if !l.Held() {
			t.Fatal("a writer of b.txt broke the lease of a.txt")
		}
	})

	t.Run("a file open for writing cannot be leased", func(t *testing.T) {
		fx := build(t, layout)
		closeFile := fx.OpenForWriting("a.txt")
		defer closeFile()
		f := open(t, fx, "a.txt")
		defer f.Close()
		l, err := fx.Leases.Lease(f)
		if !errors.Is(err, ports.ErrOpenForWriting) {
			if l != nil {
				l.Release()
			}
			t.Fatalf("leasing a file open for writing: %v, want ErrOpenForWriting", err)
		}
	})

	t.Run("release is idempotent and a released lease is never held", func(t *testing.T) {
		fx := build(t, layout)
		l := lease(t, fx, "a.txt")
		l.Release()
		l.Release()
		if l.Held() {
			t.Fatal("a released lease is held")
		}
		// A lease taken since, possibly on the descriptor number the released one had,
		// says nothing about the released one.
		if other := lease(t, fx, "a.txt"); !other.Held() {
			t.Fatal("a new lease of the same file is not held")
		}
		if l.Held() {
			t.Fatal("a released lease is held again once another lease was taken")
		}
	})

	// changes reads a lease's count after a Sync.
	changes := func(fx LeaseFixture, l ports.Lease) (uint64, bool) {
		fx.Leases.Sync()
		return l.Changes()
	}

	t.Run("an unchanged file keeps its count across Syncs", func(t *testing.T) {
		fx := build(t, layout)
		l := lease(t, fx, "a.txt")
		before, watched := changes(fx, l)
		fx.OpenForWriting("b.txt")()
		fx.SetTimes("b.txt", time.Unix(1e9, 0))
		if after, still := changes(fx, l); watched && (!still || after != before) {
			t.Fatalf("a.txt's count moved from %d to %d (watched: %v) with no change to it", before, after, still)
		}
	})

	t.Run("a change of a file's times moves its count at the next Sync", func(t *testing.T) {
		fx := build(t, layout)
		l := lease(t, fx, "a.txt")
		before, _ := changes(fx, l)
		fx.SetTimes("a.txt", time.Unix(1e9, 0))
		if after, watched := changes(fx, l); watched && after == before {
			t.Fatalf("a.txt's count stayed %d after its times were set", after)
		}
		if !l.Held() {
			t.Fatal("setting a file's times broke its lease")
		}
	})

	t.Run("a write leaves no lease both held and unchanged", func(t *testing.T) {
		fx := build(t, layout)
		l := lease(t, fx, "a.txt")
		before, _ := changes(fx, l)
		fx.OpenForWriting("a.txt")()
		if after, watched := changes(fx, l); watched && after == before && l.Held() {
			t.Fatalf("after a write a.txt's lease is held and its count still %d", after)
		}
	})

	t.Run("a released lease is unwatched", func(t *testing.T) {
		fx := build(t, layout)
		l := lease(t, fx, "a.txt")
		l.Release()
		if _, watched := changes(fx, l); watched {
			t.Fatal("a released lease reports itself watched")
		}
	})

	t.Run("releasing one lease of a file leaves another held", func(t *testing.T) {
		fx := build(t, layout)
		first, second := lease(t, fx, "a.txt"), lease(t, fx, "a.txt")
		first.Release()
		if !second.Held() {
			t.Fatal("releasing one lease broke the other")
		}
	})
}
