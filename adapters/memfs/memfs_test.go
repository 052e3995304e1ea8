package memfs_test

import (
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/memfs"
	"github.com/resplane/resplane/ports/porttest"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// workdir is where the in-memory tree pretends to live.
const workdir = "/srv/capsule/wd"

func TestExportFSContract(t *testing.T) {
	porttest.RunExportFS(t, build)
}

// build makes the layout in a fresh in-memory workdir. Entries outside the workdir are left
// out: memfs has no outside, and every path that leaves the workdir is refused before any
// lookup.
func build(t *testing.T, layout fixture.Layout) porttest.Fixture {
	m := memfs.New(workdir)
	apply := func(l fixture.Layout) {
		t.Helper()
		entries := l.Entries(workdir)
		for _, e := range entries {
			if e.Outside() {
				continue
			}
			if err := create(m, e); err != nil {
				t.Fatal(err)
			}
		}
		for i := len(entries) - 1; i >= 0; i-- {
			if e := entries[i]; e.Denied && !e.Outside() {
				if err := m.Deny(e.Path); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	apply(layout)
	// Each rewrite changes the file a second after the last change, as a kernel's clock would.
	changed := fixture.MTime
	rewrite := func(path, content string) {
		t.Helper()
		changed = changed.Add(time.Second)
		if err := m.Rewrite(path, []byte(content), fixture.MTime, changed); err != nil {
			t.Fatal(err)
		}
	}
	return porttest.Fixture{FS: m, Workdir: workdir, Apply: apply, Rewrite: rewrite}
}

func create(m *memfs.FS, e fixture.Entry) error {
	switch e.Kind {
	case fixture.Dir:
		return m.Mkdir(e.Path)
	case fixture.Symlink:
		return m.Symlink(e.Target, e.Path)
	case fixture.FIFO:
		return m.MakeFIFO(e.Path)
	case fixture.Socket:
		return m.MakeSocket(e.Path)
	case fixture.Device:
		return m.MakeDevice(e.Path)
	}
	return m.WriteFile(e.Path, []byte(e.Data), fixture.MTime)
}

func TestReadLeasesContract(t *testing.T) {
	porttest.RunReadLeases(t, func(t *testing.T, layout fixture.Layout) porttest.LeaseFixture {
		m := build(t, layout).FS.(*memfs.FS)
		return porttest.LeaseFixture{Leases: m.Leases(), FS: m, OpenForWriting: func(path string) func() {
			t.Helper()
			closeFile, err := m.OpenForWriting(path)
			if err != nil {
				t.Fatal(err)
			}
			return closeFile
		}, SetTimes: func(path string, mtime time.Time) {
			t.Helper()
			if err := m.SetTimes(path, mtime, mtime.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}}
	})
}
