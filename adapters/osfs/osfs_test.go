package osfs_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// modes are the two ways an FS resolves: openat2 first, and component by component only, as
// on a kernel without openat2. Both must give the answers ports/porttest expects.
var modes = []struct {
	name string
	opts []osfs.Option
}{
	{"openat2", nil},
	{"per-component", []osfs.Option{osfs.WithoutOpenat2()}},
}

func TestExportFSContract(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			porttest.RunExportFS(t, builder(m.opts...))
		})
	}
}

// builder makes each layout under a fresh temporary directory: the workdir is <tmp>/wd, and
// entries starting with "../" land beside it, outside the workdir.
func builder(opts ...osfs.Option) porttest.Builder {
	return func(t *testing.T, layout fixture.Layout) porttest.Fixture {
		t.Helper()
		base, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		wd := filepath.Join(base, "wd")
		if err := os.Mkdir(wd, 0o755); err != nil {
			t.Fatal(err)
		}
		fixture.Write(t, wd, layout)
		fs, err := osfs.New(wd, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fs.Close() })
		apply := func(l fixture.Layout) { fixture.Write(t, wd, l) }
		rewrite := func(path, content string) {
			p := filepath.Join(wd, filepath.FromSlash(path))
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil { // O_TRUNC: the same inode
				t.Fatal(err)
			}
			if err := os.Chtimes(p, fixture.MTime, fixture.MTime); err != nil {
				t.Fatal(err)
			}
		}
		return porttest.Fixture{FS: enforcingPermissions(t, fs, layout), Workdir: wd, Apply: apply, Rewrite: rewrite}
	}
}

// enforcingPermissions returns fs such that mode 000 entries are refused even when the tests
// run as root (as they do in CI): root's CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH bypass
// permission bits, so each call then runs on a thread that has dropped both from its
// effective set (capabilities are per thread). Where they cannot be dropped, a layout with
// denied entries is skipped.
func enforcingPermissions(t *testing.T, fs ports.ExportFS, layout fixture.Layout) ports.ExportFS {
	t.Helper()
	if os.Geteuid() != 0 {
		return fs
	}
	if err := withoutDAC(func() {}); err != nil {
		for _, e := range layout.Entries("") {
			if e.Denied {
				t.Skipf("running as root without the means to drop CAP_DAC_OVERRIDE (%v): permission bits are not enforced", err)
			}
		}
		return fs
	}
	return unprivileged{fs}
}

type unprivileged struct{ fs ports.ExportFS }

func (u unprivileged) OpenFile(root string, rel pathpolicy.RelPath, class containment.Class) (f ports.File, err error) {
	mustWithoutDAC(func() { f, err = u.fs.OpenFile(root, rel, class) })
	return f, err
}

func (u unprivileged) Walk(ctx context.Context, root string, class containment.Class, visit ports.Visitor) (err error) {
	mustWithoutDAC(func() { err = u.fs.Walk(ctx, root, class, visit) })
	return err
}

func mustWithoutDAC(fn func()) {
	if err := withoutDAC(fn); err != nil {
		panic(err) // it worked when the fixture was made
	}
}

// withoutDAC runs fn on the current thread with CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH
// lowered, then raises them again.
func withoutDAC(fn func()) error {
	runtime.LockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	saved := caps
	caps[0].Effective &^= 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH
	if err := unix.Capset(&hdr, &caps[0]); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	fn()
	if err := unix.Capset(&hdr, &saved[0]); err != nil {
		// The thread stays locked, so it ends with its goroutine instead of going back to
		// the runtime without its capabilities.
		return err
	}
	runtime.UnlockOSThread()
	return nil
}

func TestNewRequiresAnExistingWorkdir(t *testing.T) {
	if _, err := osfs.New(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("New on a missing workdir succeeded")
	}
}

func TestNewCanonicalisesASymlinkedWorkdir(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(base, "real")
	fixture.Write(t, base, fixture.Layout{"real/out/a.txt": "A", "real/out/abs -> " + store + "/out/a.txt": "", "wd -> real": ""})
	fs, err := osfs.New(filepath.Join(base, "wd"))
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	rel, _ := pathpolicy.Parse("abs")
	f, err := fs.OpenFile("out", rel, containment.Sealed)
	if err != nil {
		t.Fatalf("an absolute link naming the canonical workdir was refused: %v", err)
	}
	defer f.Close()
	if f.Path() != "a.txt" {
		t.Errorf("Path() = %q, want a.txt", f.Path())
	}
}

// TestNoDescriptorLeaks runs every kind of answer, in both modes, and checks that the
// process holds no more descriptors afterwards than before.
func TestNoDescriptorLeaks(t *testing.T) {
	layout := fixture.Layout{
		"out/a.txt": "A", "out/d/b.txt": "B", "out/l -> d/b.txt": "", "out/dl -> d": "", "out/self -> .": "",
		"out/x -> ../secret": "", "out/loop -> loop": "", "out/dangling -> nowhere": "", "out/pipe|": "",
		"out/locked.txt !": "L", "secret": "S",
	}
	paths := []string{"a.txt", "d/b.txt", "l", "dl", "self", "self/a.txt", "x", "loop", "dangling", "pipe",
		"locked.txt", "a.txt/b", "d", "missing", "d/missing/x"}
	count := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("needs /proc/self/fd to count descriptors")
		}
		return len(entries)
	}
	for _, m := range modes {
		fx := builder(m.opts...)(t, layout)
		before := count()
		for _, class := range []containment.Class{containment.Advisory, containment.Scoped, containment.Sealed} {
			for _, p := range paths {
				rel, err := pathpolicy.Parse(p)
				if err != nil {
					t.Fatal(err)
				}
				if f, err := fx.FS.OpenFile("out", rel, class); err == nil {
					f.Close()
				}
			}
			for _, root := range []string{"out", "missing", "out/a.txt", "out/self"} {
				for _, known := range []bool{false, true} {
					_ = fx.FS.Walk(context.Background(), root, class, ports.Visitor{
						Known: func(_ []byte, _ resolve.Inode, stat func() (ports.FileStat, bool)) bool {
							_, ok := stat()
							return ok && known
						},
						Visit: func(string, ports.File) error { return nil },
					})
				}
			}
		}
		if after := count(); after != before {
			t.Errorf("%s: %d descriptors open before, %d after", m.name, before, after)
		}
	}
}
