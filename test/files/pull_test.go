// Package files_test is the black-box suite of `resplane files` (docs/operator-guide.md,
// "Pulling outputs"): the real binary's client commands against a real resplane serve, and
// against a hostile fake service (net/http/httptest) inside the test process.
package files_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

const manifest = `name: Puller
exports:
  files:
    root: out/
    mode: read-only
    max_bytes: 1Ki
`

// summary is the JSON `pull --json` prints, decoded strictly.
type summary struct {
	Fetched   int   `json:"fetched"`
	Unchanged int   `json:"unchanged"`
	Deleted   int   `json:"deleted"`
	Failed    int   `json:"failed"`
	Skipped   int   `json:"skipped"`
	Bytes     int64 `json:"bytes"`
}

// pull runs `resplane files pull <args>` and returns its exit status, decoded summary and
// stderr.
func pull(t *testing.T, args ...string) (int, summary, string) {
	t.Helper()
	code, stdout, stderr := harness.RunCLI(t, nil, append([]string{"files", "pull", "--json"}, args...)...)
	keys := []string{"fetched", "unchanged", "deleted", "failed", "skipped", "bytes"}
	if slices.Contains(args, "--dry-run") {
		keys = append(keys, "dry_run")
	}
	harness.RequireKeys(t, "pull summary", []byte(stdout), keys...)
	var s summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("pull printed %q: %v", stdout, err)
	}
	return code, s, stderr
}

// tree returns every regular file beneath dir with its content and every symlink as
// "-> <target>" (a temp file left behind would show up as a regular file).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := readTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// readTree is tree's walk, returning what fails instead of failing the test: a file removed
// while it is walked (by a watch at work) is an error to retry, not a failure.
func readTree(dir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		r, _ := filepath.Rel(dir, p)
		if e.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			files[filepath.ToSlash(r)] = "-> " + target
			return err
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		data, err := os.ReadFile(p)
		files[filepath.ToSlash(r)] = string(data)
		return err
	})
	return files, err
}

func requireSameTree(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d files, want %d", len(got), len(want))
	}
	for p, content := range want {
		if got[p] != content {
			t.Fatalf("%s = %q, want %q", p, got[p], content)
		}
	}
}

// countReads counts the trace's resource_read events that served a file.
func countReads(t *testing.T, p *harness.Process) int {
	t.Helper()
	n := 0
	for _, e := range harness.Events(t, p.Ready.Trace) {
		if e.M["event_type"] == "resource_read" && e.M["outcome"] == "ok" {
			n++
		}
	}
	return n
}

// TestASecondPullFetchesExactlyWhatChanged mirrors 1,000 files, then changes 10, deletes 3
// and adds 2 on the service: the second pull reads exactly those 12 from the service and,
// with --delete, removes the 3, leaving the mirror equal to the export.
func TestASecondPullFetchesExactlyWhatChanged(t *testing.T) {
	files := fixture.Layout{}
	for i := range 1000 {
		files[fmt.Sprintf("out/d%02d/f%04d.txt", i%10, i)] = fmt.Sprintf("file %d\n", i)
	}
	p := harness.Start(t, harness.Capsule{Manifest: manifest, Files: files})
	out, dir := filepath.Join(p.Workdir, "out"), filepath.Join(t.TempDir(), "mirror")

	code, s, stderr := pull(t, p.Ready.URL, dir)
	if code != 0 || s.Fetched != 1000 || s.Unchanged != 0 || s.Deleted != 0 || s.Failed != 0 {
		t.Fatalf("first pull: exit %d, %+v; stderr:\n%s", code, s, stderr)
	}
	requireSameTree(t, tree(t, dir), tree(t, out))
	if !strings.Contains(stderr, "1000 fetched (") {
		t.Fatalf("no one-line summary on stderr: %q", stderr)
	}

	for i := range 10 {
		path := filepath.Join(out, fmt.Sprintf("d%02d/f%04d.txt", i, i))
		if err := os.WriteFile(path, []byte(fmt.Sprintf("changed %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{500, 501, 502} {
		if err := os.Remove(filepath.Join(out, fmt.Sprintf("d%02d/f%04d.txt", i%10, i))); err != nil {
			t.Fatal(err)
		}
	}
	fixture.Write(t, p.Workdir, fixture.Layout{"out/new/one.txt": "one\n", "out/two.txt": "two\n"})
	readsBefore := countReads(t, p)

	code, s, stderr = pull(t, "--delete", p.Ready.URL, dir)
	if code != 0 || s.Fetched != 12 || s.Unchanged != 987 || s.Deleted != 3 || s.Failed != 0 {
		t.Fatalf("second pull: exit %d, %+v; want 12 fetched, 987 unchanged, 3 deleted; stderr:\n%s", code, s, stderr)
	}
	if want := int64(10*len("changed 0\n") + len("one\n") + len("two\n")); s.Bytes != want {
		t.Fatalf("second pull downloaded %d bytes, want %d", s.Bytes, want)
	}
	requireSameTree(t, tree(t, dir), tree(t, out))
	if reads := countReads(t, p) - readsBefore; reads != 12 {
		t.Fatalf("the service served %d reads to the second pull, want exactly 12", reads)
	}

	code, s, _ = pull(t, "--delete", "--dry-run", p.Ready.URL, dir)
	if code != 0 || s != (summary{Unchanged: 999}) {
		t.Fatalf("a pull of an up-to-date mirror: exit %d, %+v", code, s)
	}
}

func TestADryRunShowsThePlanAndChangesNothing(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: manifest, Files: fixture.Layout{"out/a.txt": "a", "out/b.txt": "bb"}})
	dir := t.TempDir()
	fixture.Write(t, dir, fixture.Layout{"b.txt": "bb", "stale.txt": "old"})
	code, s, stderr := pull(t, "--dry-run", "--delete", p.Ready.URL, dir)
	if code != 0 || s != (summary{Fetched: 1, Unchanged: 1, Deleted: 1, Bytes: 1}) {
		t.Fatalf("exit %d, %+v; stderr:\n%s", code, s, stderr)
	}
	for _, line := range []string{"would fetch a.txt", "would delete stale.txt"} {
		if !strings.Contains(stderr, line) {
			t.Errorf("stderr lacks %q:\n%s", line, stderr)
		}
	}
	requireSameTree(t, tree(t, dir), map[string]string{"b.txt": "bb", "stale.txt": "old"})
	if n := countReads(t, p); n != 0 {
		t.Fatalf("a dry run read %d files", n)
	}
}

func TestAServiceRefusalIsShownWithItsCode(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: "name: Bare\n"})
	dir := t.TempDir()
	code, stdout, stderr := harness.RunCLI(t, nil, "files", "pull", p.Ready.URL, dir)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "no_resource_plane") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and no_resource_plane", code, stdout, stderr)
	}
	code, _, stderr = harness.RunCLI(t, nil, "files", "ls", p.Ready.URL)
	if code != 1 || !strings.Contains(stderr, "no_resource_plane: This capsule declares no exports.files") {
		t.Fatalf("ls: exit %d, stderr %q", code, stderr)
	}
}

// TestAFileAboveMaxBytesIsSkippedNotFailed pulls an export holding a file above max_bytes:
// exit 0 with skipped 1 and one warning; --strict exits 1; ls marks the file; without
// --delete the summary mentions the local file the listing lacks, and counts no deletion.
func TestAFileAboveMaxBytesIsSkippedNotFailed(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: manifest, Files: fixture.Layout{"out/a.txt": "a", "out/big.bin": strings.Repeat("b", 1025)}})
	dir := t.TempDir()
	fixture.Write(t, dir, fixture.Layout{"stale.txt": "old"})
	code, s, stderr := pull(t, p.Ready.URL, dir)
	if code != 0 || s != (summary{Fetched: 1, Skipped: 1, Bytes: 1}) {
		t.Fatalf("exit %d, %+v; want 1 fetched, 1 skipped; stderr:\n%s", code, s, stderr)
	}
	if n := strings.Count(stderr, "big.bin: skipped: 1025 bytes"); n != 1 {
		t.Fatalf("%d warnings for the skipped file, want one:\n%s", n, stderr)
	}
	for _, want := range []string{"1 fetched (1 B), 0 unchanged, 0 failed, 1 skipped; 1 local files are not in the listing (--delete removes them)"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "deleted") {
		t.Fatalf("a pull without --delete speaks of deletions:\n%s", stderr)
	}
	requireSameTree(t, tree(t, dir), map[string]string{"a.txt": "a", "stale.txt": "old"})
	if code, s, _ = pull(t, "--strict", p.Ready.URL, dir); code != 1 || s.Skipped != 1 || s.Failed != 0 {
		t.Fatalf("--strict: exit %d, %+v; want 1 with skipped 1", code, s)
	}
	code, stdout, _ := harness.RunCLI(t, nil, "files", "ls", p.Ready.URL)
	if code != 0 || !strings.Contains(stdout, "big.bin  (above max_bytes") || strings.Contains(stdout, "a.txt  (above") {
		t.Fatalf("ls does not mark exactly the file above max_bytes: %q", stdout)
	}
}
