package osfs_test

// Benchmarks for the two hot paths of the real filesystem: opening one file beneath an
// export root, and walking the root for a listing. Each pair is measured on the same fixture
// so bench/bench.sh can print their ratio; none of them runs without -bench.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// benchRoot is the declared export root every benchmark serves.
const benchRoot = "out"

// benchWorkdir makes a workdir under b.TempDir holding layout and returns its canonical path.
func benchWorkdir(b *testing.B, layout fixture.Layout) string {
	b.Helper()
	base, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	wd := filepath.Join(base, "wd")
	fixture.Write(b, wd, layout)
	return wd
}

func benchFS(b *testing.B, wd string, opts ...osfs.Option) *osfs.FS {
	b.Helper()
	fsys, err := osfs.New(wd, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fsys.Close() })
	return fsys
}

// BenchmarkOpenFile opens (and closes) one 4 KiB file at depth 1 ("f.txt") and at depth 5
// ("a/b/c/d/f.txt") beneath the root, three ways on the same fixture:
//
//   - openat2: the symlink-free fast path (two openat2 calls, two fstats);
//   - per-component: the fallback of a kernel without openat2 (WithoutOpenat2): one
//     openat+fstat per component of the root and the path, then the leaf open;
//   - naive: os.Open by absolute path plus Stat, the unguarded baseline that follows any
//     symlink anywhere and is shown only as the floor of what an open can cost.
//
// The open does not read; bytes per second would be meaningless, so SetBytes is not used.
func BenchmarkOpenFile(b *testing.B) {
	content := string(make([]byte, 4<<10))
	paths := map[int]string{1: "f.txt", 5: "a/b/c/d/f.txt"}
	layout := fixture.Layout{}
	for _, p := range paths {
		layout[benchRoot+"/"+p] = content
	}
	wd := benchWorkdir(b, layout)
	for _, depth := range []int{1, 5} {
		path := paths[depth]
		rel, err := pathpolicy.Parse(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("depth=%d/openat2", depth), func(b *testing.B) {
			benchOpen(b, benchFS(b, wd), rel)
		})
		b.Run(fmt.Sprintf("depth=%d/per-component", depth), func(b *testing.B) {
			benchOpen(b, benchFS(b, wd, osfs.WithoutOpenat2()), rel)
		})
		b.Run(fmt.Sprintf("depth=%d/naive", depth), func(b *testing.B) {
			abs := filepath.Join(wd, benchRoot, path)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				f, err := os.Open(abs)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Stat(); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}

// BenchmarkOpenFileThroughSymlink opens a depth-5 path whose first directory is a symlink,
// under the sealed class (which follows it). openat2 meets the link, fails ELOOP, and the FS
// resolves component by component: the cost of a symlinked path on a kernel with openat2,
// against the per-component resolution alone.
func BenchmarkOpenFileThroughSymlink(b *testing.B) {
	wd := benchWorkdir(b, fixture.Layout{
		benchRoot + "/real/b/c/d/f.txt": string(make([]byte, 4<<10)),
		benchRoot + "/a -> real":        "",
	})
	rel, err := pathpolicy.Parse("a/b/c/d/f.txt")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("openat2-then-fallback", func(b *testing.B) {
		benchOpenClass(b, benchFS(b, wd), rel, containment.Sealed)
	})
	b.Run("per-component", func(b *testing.B) {
		benchOpenClass(b, benchFS(b, wd, osfs.WithoutOpenat2()), rel, containment.Sealed)
	})
}

func benchOpen(b *testing.B, fsys *osfs.FS, rel pathpolicy.RelPath) {
	benchOpenClass(b, fsys, rel, containment.Scoped)
}

func benchOpenClass(b *testing.B, fsys *osfs.FS, rel pathpolicy.RelPath, class containment.Class) {
	b.Helper()
	// One open outside the timed loop checks the fixture and settles the openat2 probe.
	f, err := fsys.OpenFile(benchRoot+"/", rel, class)
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		f, err := fsys.OpenFile(benchRoot+"/", rel, class)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// walkFiles is the size of the listing fixture: 10 directories of 100 files of 1 KiB.
const (
	walkDirs    = 10
	walkPerDir  = 100
	walkFiles   = walkDirs * walkPerDir
	walkFileLen = 1 << 10
)

func walkFixture(b *testing.B) string {
	b.Helper()
	content := strings.Repeat("x", walkFileLen)
	layout := make(fixture.Layout, walkFiles)
	for d := range walkDirs {
		for i := range walkPerDir {
			layout[fmt.Sprintf("%s/d%02d/f%03d.txt", benchRoot, d, i)] = content
		}
	}
	return benchWorkdir(b, layout)
}

// BenchmarkWalk visits every file of a 1000-file tree (10 directories of 100 files): the
// listing's filesystem work without the hashing (the visit does nothing with the open file).
//
//   - osfs: resolve.Walk over directory descriptors, sorted, one guarded open per file, as a
//     listing with an empty hash cache makes;
//   - osfs-known: the same walk with every file known by its stat (Visitor.Known), as a
//     listing whose hash cache proves every file unchanged makes: one fstatat per file, no
//     open;
//   - naive: filepath.WalkDir plus os.Open and Stat per regular file, the unguarded baseline.
//
// It also reports ns/file.
func BenchmarkWalk(b *testing.B) {
	wd := walkFixture(b)
	benchWalk := func(b *testing.B, known bool) {
		fsys := benchFS(b, wd)
		count := 0
		visitor := ports.Visitor{
			Known: func(_ []byte, _ resolve.Inode, stat func() (ports.FileStat, bool)) bool {
				count++
				if !known {
					return false
				}
				_, ok := stat()
				return ok
			},
			Visit: func(string, ports.File) error { return nil },
		}
		if err := fsys.Walk(context.Background(), benchRoot+"/", containment.Scoped, visitor); err != nil {
			b.Fatal(err)
		}
		if count != walkFiles {
			b.Fatalf("walk visited %d files, want %d", count, walkFiles)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := fsys.Walk(context.Background(), benchRoot+"/", containment.Scoped, visitor); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*walkFiles), "ns/file")
	}
	b.Run("osfs", func(b *testing.B) { benchWalk(b, false) })
	b.Run("osfs-known", func(b *testing.B) { benchWalk(b, true) })
	b.Run("naive", func(b *testing.B) {
		root := filepath.Join(wd, benchRoot)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				_, err = f.Stat()
				f.Close()
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*walkFiles), "ns/file")
	})
}
