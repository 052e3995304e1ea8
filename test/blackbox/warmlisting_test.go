package blackbox_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbOnDisk lists the regular files under root as a listing reports them, read from disk.
func bbOnDisk(t testing.TB, root string) []bbEntry {
	t.Helper()
	var entries []bbEntry
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		sum := sha256.Sum256(data)
		entries = append(entries, bbEntry{Path: filepath.ToSlash(rel), SizeBytes: int64(len(data)),
			MTimeMs: info.ModTime().UnixMilli(), SHA256: hex.EncodeToString(sum[:])})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(entries, func(a, b bbEntry) int { return strings.Compare(a.Path, b.Path) })
	return entries
}

// TestEveryListingReportsTheFilesAsTheyAreOnDisk pins docs/http-api.md, "The listing", across
// listings that reuse what the previous one hashed and encoded (docs/operator-guide.md,
// "Listing cost"): through unchanged listings, a rewrite in place that keeps the size and the
// modification time, a second rewrite within the racy window, files added at the start, in the
// middle and at the end, a file removed, the generation moved and every file removed, each
// listing's entries are the tree's files with their size, mtime and sha256 as on disk, and a
// listing of an unchanged tree is byte for byte the one before it.
func TestEveryListingReportsTheFilesAsTheyAreOnDisk(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""),
		Files: fixture.Layout{"out/a.txt": "aaaa", "out/b/c.txt": "cccc", `out/d<&>"\.txt`: "dddd"}})
	root := filepath.Join(p.Workdir, "out")
	gen := 0
	var last []byte
	list := func(step string) []byte {
		t.Helper()
		r := harness.Get(t, p.Ready.Listen, "/resources/files")
		l := bbDecodeListing(t, r, gen, p.Ready.Containment, "out/")
		if want := bbOnDisk(t, root); !slices.Equal(l.Entries, want) {
			t.Fatalf("%s: the listing's entries\n%+v\nare not the files on disk\n%+v", step, l.Entries, want)
		}
		last = r.Body
		return r.Body
	}
	write := func(rel, content string, mtime time.Time) {
		t.Helper()
		path := filepath.Join(root, rel)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if !mtime.IsZero() {
			if err := os.Chtimes(path, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
	}

	list("cold")
	time.Sleep(2100 * time.Millisecond) // past the racy window: the next listing reuses every hash
	cold := last
	if warm := list("warm"); !bytes.Equal(warm, cold) {
		t.Fatalf("an unchanged tree listed\n%s\nafter\n%s", warm, cold)
	}
	if again := list("warm again"); !bytes.Equal(again, cold) {
		t.Fatalf("an unchanged tree listed\n%s\nafter\n%s", again, cold)
	}

	before, err := os.Stat(filepath.Join(root, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	write("a.txt", "AAAA", before.ModTime()) // same size, same modification time: only the change time moves
	list("a rewrite in place that keeps size and mtime")
	write("a.txt", "AaAa", before.ModTime()) // within the racy window of the listing before
	list("a second rewrite within the racy window")

	write("0.txt", "first", time.Time{})
	write("b/a.txt", "middle", time.Time{})
	write("z.txt", "last", time.Time{})
	list("files added at the start, in the middle and at the end")
	if err := os.Remove(filepath.Join(root, "b/c.txt")); err != nil {
		t.Fatal(err)
	}
	unchanged := list("a file removed")

	if a := harness.Control(t, p.Ready.Control, "POST", "/v1/tasks/terminal", `{"state":"completed"}`); a.Status != 200 {
		t.Fatalf("task end: %d %s", a.Status, a.Raw)
	}
	gen = 1
	moved := list("the generation moved")
	if want := bytes.Replace(unchanged, []byte(`"generation":0,`), []byte(`"generation":1,`), 1); !bytes.Equal(moved, want) {
		t.Fatalf("with only the generation moved the listing is\n%s\nwant\n%s", moved, want)
	}

	for _, rel := range []string{"0.txt", "a.txt", "b/a.txt", `d<&>"\.txt`, "z.txt"} {
		if err := os.Remove(filepath.Join(root, rel)); err != nil {
			t.Fatal(err)
		}
	}
	if empty := list("every file removed"); !bytes.HasSuffix(empty, []byte(`"entries":[]}`)) {
		t.Fatalf("an empty tree listed %s", empty)
	}
}
