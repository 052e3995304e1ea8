package osfs_test

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// TestSwapAttackerNeverEscapes races OpenFile and Walk, at every class and in both
// resolution modes, against attackers that atomically exchange (RENAME_EXCHANGE) a directory
// inside the root with symlinks to a directory outside the workdir holding the same names,
// and the root itself with a symlink out of the workdir. Each attacker renames within a
// directory it holds a descriptor of, so nothing is ever moved across the root's boundary:
// everything a call may serve is inside, and any outside byte is an escape. Refusals of any kind are acceptable;
// serving or listing one outside byte is not.
func TestSwapAttackerNeverEscapes(t *testing.T) {
	const duration = 2 * time.Second
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fixture.Write(t, base, fixture.Layout{
		"wd/out/f.txt":                            "inside",
		"wd/out/d/f.txt":                          "inside",
		"wd/out/d/e/f.txt":                        "inside",
		"wd/out/ln -> d/f.txt":                    "",
		"wd/out/d/evil -> ../../../outside":       "",
		"wd/out/evil-rel -> ../../outside":        "",
		"wd/out/evil-abs -> " + base + "/outside": "",
		"wd/evil-root -> ../outside":              "",
		"outside/f.txt":                           "SECRET outside",
		"outside/d/f.txt":                         "SECRET outside",
		"outside/e/f.txt":                         "SECRET outside",
		"outside/d/e/f.txt":                       "SECRET outside",
		"outside/ln":                              "SECRET outside",
	})
	wdfd := openPath(t, filepath.Join(base, "wd"))
	outfd := openPath(t, filepath.Join(base, "wd/out"))
	dfd := openPath(t, filepath.Join(base, "wd/out/d"))

	var stop atomic.Bool
	var attackers sync.WaitGroup
	exchange := func(dirfd int, a, b string) {
		defer attackers.Done()
		for !stop.Load() {
			_ = unix.Renameat2(dirfd, a, dirfd, b, unix.RENAME_EXCHANGE)
		}
	}
	attackers.Add(4)
	go exchange(outfd, "d", "evil-rel")
	go exchange(outfd, "d", "evil-abs")
	go exchange(dfd, "e", "evil")
	go exchange(wdfd, "out", "evil-root")

	paths := []pathpolicy.RelPath{
		mustParse(t, "f.txt"), mustParse(t, "d/f.txt"), mustParse(t, "d/e/f.txt"), mustParse(t, "ln"),
		mustParse(t, "evil-rel/f.txt"), mustParse(t, "evil-abs/d/f.txt"),
	}
	deadline := time.Now().Add(duration)
	var workers sync.WaitGroup
	for _, m := range modes {
		fs, err := osfs.New(filepath.Join(base, "wd"), m.opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		for _, class := range []containment.Class{containment.Advisory, containment.Scoped, containment.Sealed} {
			workers.Add(1)
			go func() {
				defer workers.Done()
				var opens, served, walks, listed int
				for time.Now().Before(deadline) {
					for _, p := range paths {
						opens++
						if readOne(t, fs, p, class) {
							served++
						}
					}
					walks++
					listed += walkAll(t, fs, class)
				}
				t.Logf("%s/%s: %d opens (%d served), %d walks (%d files listed)", m.name, class, opens, served, walks, listed)
				if served == 0 || listed == 0 {
					t.Errorf("%s/%s: nothing was served or listed, so the race was not exercised", m.name, class)
				}
			}()
		}
	}
	workers.Wait()
	stop.Store(true)
	attackers.Wait()
}

// readOne opens and reads p, failing the test on outside bytes; it reports whether the file
// was served.
func readOne(t *testing.T, fs ports.ExportFS, p pathpolicy.RelPath, class containment.Class) bool {
	f, err := fs.OpenFile("out", p, class)
	if err != nil {
		return false
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return false
	}
	if strings.Contains(string(data), "SECRET") || f.Size() != int64(len("inside")) {
		t.Errorf("%s: %s served outside bytes %q (size %d) as %q", class, p, data, f.Size(), f.Path())
	}
	return true
}

// walkAll lists the root, failing the test on any outside file, and returns how many files
// were listed. Every other file is known by its stat, as a listing's hash cache knows it, so
// that both the stat and the open of a file race the attackers.
func walkAll(t *testing.T, fs ports.ExportFS, class containment.Class) int {
	n := 0
	_ = fs.Walk(context.Background(), "out", class, ports.Visitor{
		Known: func(p []byte, _ resolve.Inode, stat func() (ports.FileStat, bool)) bool {
			st, ok := stat()
			if ok && st.Size != int64(len("inside")) {
				t.Errorf("%s: stated %q with the size of an outside file (%d)", class, p, st.Size)
			}
			if !ok || n%2 == 0 {
				return false
			}
			n++
			return true
		},
		Visit: func(p string, f ports.File) error {
			n++
			if f.Size() != int64(len("inside")) {
				t.Errorf("%s: listed %q with the size of an outside file (%d)", class, p, f.Size())
			}
			data, _ := io.ReadAll(f)
			if strings.Contains(string(data), "SECRET") {
				t.Errorf("%s: listed outside bytes under %q", class, p)
			}
			return nil
		},
	})
	return n
}

func openPath(t *testing.T, p string) int {
	t.Helper()
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func mustParse(t *testing.T, raw string) pathpolicy.RelPath {
	t.Helper()
	rel, err := pathpolicy.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}
