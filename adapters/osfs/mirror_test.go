package osfs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// open lays out a temp dir and opens its "m" directory as the mirror; outside it, "out/"
// holds what must never be touched.
func open(t *testing.T, layout fixture.Layout) (*osfs.Mirror, string) {
	t.Helper()
	base := t.TempDir()
	fixture.Write(t, base, layout)
	d, err := osfs.OpenMirror(filepath.Join(base, "m"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, base
}

func rel(t *testing.T, p string) pathpolicy.RelPath {
	t.Helper()
	r, err := pathpolicy.Lower(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func hexSum(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func TestCompareTellsMissingSameAndDifferent(t *testing.T) {
	d, _ := open(t, fixture.Layout{"m/a.txt": "abc", "m/sub/b.txt": "b"})
	for _, tc := range []struct {
		rule  string
		path  string
		size  int64
		sum   string
		state ports.LocalState
	}{
		{"a file of the same size and digest is the same", "a.txt", 3, hexSum("abc"), ports.LocalSame},
		{"a file of another size differs", "a.txt", 4, hexSum("abcd"), ports.LocalDifferent},
		{"a file of the same size and another digest differs", "a.txt", 3, hexSum("xyz"), ports.LocalDifferent},
		{"a missing file is missing", "nope.txt", 1, hexSum("x"), ports.LocalMissing},
		{"a missing directory on the way is missing", "nodir/x.txt", 1, hexSum("x"), ports.LocalMissing},
		{"a nested file is found", "sub/b.txt", 1, hexSum("b"), ports.LocalSame},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			state, err := d.Compare(rel(t, tc.path), tc.size, tc.sum)
			if err != nil || state != tc.state {
				t.Fatalf("Compare = %v, %v; want %v", state, err, tc.state)
			}
		})
	}
}

func TestNothingIsReadWrittenOrDeletedThroughWhatStandsOnTheWay(t *testing.T) {
	layout := fixture.Layout{
		"m/dirlink -> ../out":        "",
		"m/abslink -> $WD/out":       "",
		"m/filelink -> ../out/t.txt": "",
		"m/dangling -> ../out/none":  "",
		"m/file.txt":                 "a file",
		"m/dir/":                     "",
		"m/pipe|":                    "",
		"out/t.txt":                  "outside",
	}
	cases := []struct{ rule, path string }{
		{"a symlinked directory on the way", "dirlink/t.txt"},
		{"an absolute symlink on the way", "abslink/t.txt"},
		{"a symlink as the file", "filelink"},
		{"a dangling symlink as the file", "dangling"},
		{"a file on the way", "file.txt/x"},
		{"a directory as the file", "dir"},
		{"a FIFO as the file", "pipe"},
		{"a name too long for the filesystem", strings.Repeat("n", 300)},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			d, base := open(t, layout)
			before := names(t, filepath.Join(base, "m"))
			r := rel(t, tc.path)
			_, cmpErr := d.Compare(r, 7, hexSum("outside"))
			_, stageErr := d.Stage(r)
			delErr := d.Delete(r)
			for name, err := range map[string]error{"Compare": cmpErr, "Stage": stageErr, "Delete": delErr} {
				if !refusal.Is(err, refusal.UnsafePath) {
					t.Errorf("%s = %v; want unsafe_path", name, err)
				}
			}
			if data, err := os.ReadFile(filepath.Join(base, "out/t.txt")); err != nil || string(data) != "outside" {
				t.Fatalf("the file outside was changed: %q %v", data, err)
			}
			if after := names(t, filepath.Join(base, "out")); !slices.Equal(after, []string{"t.txt"}) {
				t.Fatalf("something was created outside: %v", after)
			}
			if after := names(t, filepath.Join(base, "m")); !slices.Equal(after, before) {
				t.Fatalf("the mirror's entries changed from %v to %v", before, after)
			}
		})
	}
}

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestALandingAppearsWholeOrNotAtAll(t *testing.T) {
	d, base := open(t, fixture.Layout{"m/a.txt": "earlier"})
	l, err := d.Stage(rel(t, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write([]byte("new ")); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(base, "m/a.txt")); string(data) != "earlier" {
		t.Fatalf("a partial download is visible: %q", data)
	}
	_, _ = l.Write([]byte("version"))
	mtime := time.UnixMilli(1_600_000_000_123)
	if err := l.Commit(mtime); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(base, "m/a.txt"))
	if data, _ := os.ReadFile(filepath.Join(base, "m/a.txt")); string(data) != "new version" || err != nil || !info.ModTime().Equal(mtime) {
		t.Fatalf("after Commit: %q, mtime %v (%v); want the new version with mtime %v", data, info.ModTime(), err, mtime)
	}
	if err := l.Commit(mtime); err == nil {
		t.Fatalf("a second Commit succeeded")
	}
	discarded, err := d.Stage(rel(t, "new/deep/b.txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = discarded.Write([]byte("never"))
	discarded.Discard()
	requireOnly(t, filepath.Join(base, "m"), "a.txt")
}

// requireOnly fails unless the regular files beneath dir are exactly names.
func requireOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	var got []string
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			r, _ := filepath.Rel(dir, p)
			got = append(got, filepath.ToSlash(r))
		}
		return err
	})
	slices.Sort(got)
	if !slices.Equal(got, names) {
		t.Fatalf("files %q, want %q", got, names)
	}
}

func TestFilesListsRegularFilesAndNeverDescendsASymlink(t *testing.T) {
	d, _ := open(t, fixture.Layout{
		"m/a.txt": "a", "m/.hidden": "h", "m/sub/deep/b.txt": "b", "m/empty/": "",
		"m/link -> a.txt": "", "m/dirlink -> ../out": "", "m/pipe|": "", "out/secret.txt": "s",
	})
	files, err := d.Files()
	slices.Sort(files)
	if err != nil || !slices.Equal(files, []string{".hidden", "a.txt", "sub/deep/b.txt"}) {
		t.Fatalf("Files = %q, %v", files, err)
	}
}

func TestFilesDescendsAsDeepAsAServiceListsAndRefusesDeeperHoldingNoDescriptor(t *testing.T) {
	cases := []struct {
		rule   string
		levels int
		want   string // the one file listed, or "" when the walk is refused
	}{
		{"a file MirrorDepth levels down is listed", osfs.MirrorDepth, strings.Repeat("d/", osfs.MirrorDepth) + "x"},
		{"a directory nested deeper refuses the walk", osfs.MirrorDepth + 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			d, _ := open(t, fixture.Layout{"m/" + strings.Repeat("d/", tc.levels) + "x": "x"})
			before := openDescriptors(t)
			files, err := d.Files()
			// Fewer is not a failure: what an earlier test left closing in the background
			// may close meanwhile.
			if after := openDescriptors(t); after > before {
				t.Errorf("the walk left %d descriptors open", after-before)
			}
			if tc.want != "" {
				if err != nil || !slices.Equal(files, []string{tc.want}) {
					t.Fatalf("Files = %d files, %v; want the one deepest file", len(files), err)
				}
				return
			}
			r, ok := refusal.As(err)
			if !ok || r.Code != refusal.UnsafePath || files != nil || !strings.Contains(r.Message, "more than 256 levels") {
				t.Fatalf("Files = %d files, %v; want unsafe_path naming the bound and no files", len(files), err)
			}
		})
	}
}

// openDescriptors counts the test process's open descriptors.
func openDescriptors(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

func TestDeleteRemovesARegularFileAndToleratesOneAlreadyGone(t *testing.T) {
	d, base := open(t, fixture.Layout{"m/a.txt": "a", "m/b.txt": "b"})
	for _, p := range []string{"a.txt", "a.txt", "gone/x.txt"} {
		if err := d.Delete(rel(t, p)); err != nil {
			t.Fatalf("Delete(%s) = %v", p, err)
		}
	}
	requireOnly(t, filepath.Join(base, "m"), "b.txt")
}

// TestASwappedDirectoryNeverRedirectsALanding races a landing into d/x.txt against an
// attacker that keeps swapping d between a real directory and a symlink to a directory
// outside: every landing either lands inside or is refused, and nothing ever appears outside.
func TestASwappedDirectoryNeverRedirectsALanding(t *testing.T) {
	d, base := open(t, fixture.Layout{"m/d/": "", "out/": ""})
	real, link, parked := filepath.Join(base, "m/d"), filepath.Join(base, "m/d.link"), filepath.Join(base, "m/d.real")
	if err := os.Symlink(filepath.Join(base, "out"), link); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			_ = os.Rename(real, parked)
			_ = os.Rename(link, real)
			_ = os.Rename(real, link)
			_ = os.Rename(parked, real)
		}
	})
	landed, refused := 0, 0
	for range 300 {
		l, err := d.Stage(rel(t, "d/x.txt"))
		if err == nil {
			_, _ = l.Write([]byte("payload"))
			err = l.Commit(time.Time{})
		}
		if err != nil {
			refused++
			continue
		}
		landed++
	}
	stop.Store(true)
	wg.Wait()
	if entries, _ := os.ReadDir(filepath.Join(base, "out")); len(entries) != 0 {
		t.Fatalf("a landing escaped into the outside directory: %v (landed %d, refused %d)", entries, landed, refused)
	}
	if landed == 0 {
		t.Fatalf("no landing succeeded in 300 tries; the race was not exercised")
	}
}

func TestCreateAtReplacesAFileAtomicallyAndRefusesADirectory(t *testing.T) {
	base := t.TempDir()
	fixture.Write(t, base, fixture.Layout{"f.txt": "earlier", "dir/": ""})
	l, err := osfs.CreateAt(filepath.Join(base, "f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = l.Write([]byte("new"))
	if err := l.Commit(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(base, "f.txt")); string(data) != "new" {
		t.Fatalf("f.txt = %q", data)
	}
	if _, err := osfs.CreateAt(filepath.Join(base, "dir")); !refusal.Is(err, refusal.UnsafePath) {
		t.Fatalf("CreateAt(dir) = %v; want unsafe_path", err)
	}
	if _, err := osfs.CreateAt(filepath.Join(base, "nodir", "f")); err == nil {
		t.Fatalf("CreateAt in a missing directory succeeded")
	}
	requireOnly(t, base, "f.txt")
}

func TestWriteOnCommitWritesOnlyACommittedDownload(t *testing.T) {
	var out bytes.Buffer
	discarded, err := osfs.WriteOnCommit(&out)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = discarded.Write([]byte("unverified"))
	discarded.Discard()
	committed, err := osfs.WriteOnCommit(&out)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = committed.Write([]byte("verified"))
	if out.Len() != 0 {
		t.Fatalf("bytes reached the writer before Commit: %q", out.String())
	}
	if err := committed.Commit(time.Time{}); err != nil || out.String() != "verified" {
		t.Fatalf("after Commit: %q, %v", out.String(), err)
	}
}
