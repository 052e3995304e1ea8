package files_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

func TestLsPrintsATableOrTheServicesJSONVerbatim(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: manifest, Files: fixture.Layout{"out/a.txt": "a", "out/sub/\x1b[31mred.txt": "r"}})
	code, stdout, stderr := harness.RunCLI(t, nil, "files", "ls", p.Ready.URL+"/resources/files/", "--json")
	raw := harness.Get(t, p.Ready.Listen, "/resources/files")
	if code != 0 || stdout != string(raw.Body)+"\n" {
		t.Fatalf("ls --json: exit %d, %q (stderr %q); want the listing verbatim %q", code, stdout, stderr, raw.Body)
	}
	code, stdout, _ = harness.RunCLI(t, nil, "files", "ls", p.Ready.URL)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || len(lines) != 3 || !strings.Contains(lines[0], "PATH") {
		t.Fatalf("ls: exit %d, %q; want a header and two rows", code, stdout)
	}
	mtime := fixture.MTime.UTC().Format("2006-01-02 15:04:05")
	if row := lines[1]; !strings.HasSuffix(row, " a.txt") || !strings.Contains(row, mtime) ||
		!strings.Contains(row, harness.SHA256Hex([]byte("a"))[:12]) || !strings.HasPrefix(strings.TrimSpace(row), "1 ") {
		t.Errorf("row %q; want size 1, the mtime %s, a short sha256 and the path", row, mtime)
	}
	if strings.Contains(stdout, "\x1b") || !strings.Contains(lines[2], `"sub/\x1b[31mred.txt"`) {
		t.Errorf("a name with a control character reached the terminal unquoted: %q", lines[2])
	}
}

func TestGetLandsOneVerifiedFile(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: manifest, Files: fixture.Layout{"out/sub/report.md": "# report\n", "out/big.bin": strings.Repeat("b", 1025)}})
	dir := t.TempDir()
	target := filepath.Join(dir, "copy.md")
	code, _, stderr := harness.RunCLI(t, nil, "files", "get", p.Ready.URL, "sub/report.md", "-o", target)
	if data, _ := os.ReadFile(target); code != 0 || string(data) != "# report\n" {
		t.Fatalf("get -o: exit %d, %q, stderr %q", code, data, stderr)
	}
	if info, _ := os.Stat(target); !info.ModTime().Equal(fixture.MTime) {
		t.Errorf("the file's mtime is %v, want the service's %v", info.ModTime(), fixture.MTime)
	}
	code, stdout, _ := harness.RunCLI(t, nil, "files", "get", p.Ready.URL, "sub/report.md", "-o", "-")
	if code != 0 || stdout != "# report\n" {
		t.Fatalf("get -o -: exit %d, %q", code, stdout)
	}
	cmd := exec.Command(harness.Binary(t), "files", "get", p.Ready.URL, "sub/report.md")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("get without -o: %v %s", err, out)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "report.md")); string(data) != "# report\n" {
		t.Fatalf("get without -o wrote %q to report.md; want the file under its own name in the current directory", data)
	}
	code, _, stderr = harness.RunCLI(t, nil, "files", "get", p.Ready.URL, "big.bin", "-o", filepath.Join(dir, "big.bin"))
	if code != 1 || !strings.Contains(stderr, "big.bin: too_large: The file exceeds the 1024-byte limit") {
		t.Fatalf("get of a file over max_bytes: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "big.bin")); !os.IsNotExist(err) {
		t.Fatalf("a refused get left a file: %v", err)
	}
}

func TestUsageErrorsExitTwoAndHelpExitsZero(t *testing.T) {
	url := "http://127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"files"}, 2},
		{[]string{"files", "sync", url}, 2},
		{[]string{"files", "ls"}, 2},
		{[]string{"files", "ls", url, "extra"}, 2},
		{[]string{"files", "ls", "ftp://host"}, 2},
		{[]string{"files", "ls", url, "--bogus"}, 2},
		{[]string{"files", "get", url}, 2},
		{[]string{"files", "get", url, "../secret"}, 2},
		{[]string{"files", "pull", url, t.TempDir(), "--jobs", "0"}, 2},
		{[]string{"files", "pull", url, t.TempDir(), "--jobs", "many"}, 2},
		{[]string{"files", "pull", url, t.TempDir(), "--watch", "--interval", "100ms"}, 2},
		{[]string{"files", "pull", url, t.TempDir(), "--watch", "--dry-run"}, 2},
		{[]string{"files", "pull", url, t.TempDir(), "--watch", "--strict"}, 2},
		{[]string{"files", "--help"}, 0},
		{[]string{"files", "pull", "--help"}, 0},
		{[]string{"files", "ls", "-h"}, 0},
		{[]string{"files", "ls", url}, 1}, // nothing listens there: not a usage error
	} {
		code, stdout, stderr := harness.RunCLI(t, nil, tc.args...)
		if code != tc.code {
			t.Errorf("resplane %q: exit %d, want %d (stdout %q, stderr %q)", tc.args, code, tc.code, stdout, stderr)
		}
		if tc.code == 0 && !strings.Contains(stdout, "Usage") {
			t.Errorf("resplane %q: the help is not on stdout: %q", tc.args, stdout)
		}
		if tc.code == 0 && stderr != "" {
			t.Errorf("resplane %q: help asked for, yet stderr says %q", tc.args, stderr)
		}
		if tc.code == 2 && strings.HasPrefix(tc.args[len(tc.args)-1], "--") && !strings.Contains(stderr, tc.args[len(tc.args)-1]) {
			t.Errorf("resplane %q: the usage error does not name %s: %q", tc.args, tc.args[len(tc.args)-1], stderr)
		}
	}
}

// A command's positional arguments may come after the flags, or before: `pull --delete URL DIR`
// and `pull URL DIR --delete` are the same command, and "--" ends the flags.
func TestFlagsMayComeBeforeOrAfterTheArguments(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: manifest, Files: fixture.Layout{"out/a.txt": "a"}})
	dir := t.TempDir()
	fixture.Write(t, dir, fixture.Layout{"stale.txt": "x"})
	code, s, stderr := pull(t, p.Ready.URL, "--jobs", "1", dir, "--delete")
	if code != 0 || s.Fetched != 1 || s.Deleted != 1 {
		t.Fatalf("exit %d, %+v, stderr %q", code, s, stderr)
	}
	code, stdout, _ := harness.RunCLI(t, nil, "files", "get", p.Ready.URL, "-o", "-", "--", "a.txt")
	if code != 0 || stdout != "a" {
		t.Fatalf("get with --: exit %d, %q", code, stdout)
	}
}

// TestAServiceThatIsNotThereIsNamedWithItsCause: ls of a port nothing listens on names the
// URL and the cause, with the service_unreachable code, and exits 1.
func TestAServiceThatIsNotThereIsNamedWithItsCause(t *testing.T) {
	code, stdout, stderr := harness.RunCLI(t, nil, "files", "ls", "http://127.0.0.1:1")
	want := "resplane files ls: http://127.0.0.1:1/resources/files: service_unreachable: The connection to the service failed: connection refused"
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and one line starting %q", code, stdout, stderr, want)
	}
}
