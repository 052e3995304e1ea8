package files_test

import (
	"strings"
	"testing"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// TestTarRefusesToWriteAnArchiveToATerminal pins that `files tar` with stdout a terminal
// (no -o, and -o -) is a usage error, exit 2, that names the terminal and the way out, and
// that not one byte of an archive reaches the terminal.
func TestTarRefusesToWriteAnArchiveToATerminal(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: manifest, Files: fixture.Layout{"out/a.txt": "a\n"}})
	for _, args := range [][]string{
		{"files", "tar", p.Ready.URL},
		{"files", "tar", p.Ready.URL, "-o", "-"},
	} {
		code, terminal, stderr := harness.RunCLIOnTerminal(t, args...)
		if code != 2 || !strings.Contains(stderr, "stdout is a terminal") || !strings.Contains(stderr, "-o FILE") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a line naming the terminal and -o FILE", args, code, stderr)
		}
		if terminal != "" {
			t.Errorf("%q wrote %q to the terminal; want nothing", args, terminal)
		}
	}
}

// TestLsShowsHumanSizesOnATerminal pins the one difference a terminal makes to `files ls`:
// sizes in B, KiB, MiB instead of bytes, the rest of each row unchanged (a file above the
// manifest's 1 KiB max_bytes keeps its mark).
func TestLsShowsHumanSizesOnATerminal(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: manifest, Files: fixture.Layout{
		"out/small.txt": "abc", "out/two-k.bin": strings.Repeat("k", 2048), "out/big.bin": strings.Repeat("m", 3<<20/2)}})
	code, terminal, stderr := harness.RunCLIOnTerminal(t, "files", "ls", p.Ready.URL)
	if code != 0 {
		t.Fatalf("ls: exit %d, stderr %q", code, stderr)
	}
	rows := strings.Split(strings.TrimSuffix(terminal, "\r\n"), "\r\n")
	if len(rows) != 4 || !strings.Contains(rows[0], "SIZE") {
		t.Fatalf("the terminal shows %q; want a header and three rows", terminal)
	}
	for _, want := range []struct{ size, path string }{
		{"1.5 MiB", "big.bin"}, {"3 B", "small.txt"}, {"2.0 KiB", "two-k.bin"},
	} {
		found := false
		for _, row := range rows[1:] {
			if fields := strings.Fields(row); len(fields) > 5 && fields[5] == want.path {
				found = strings.HasPrefix(strings.TrimSpace(row), want.size+" ")
				if !found {
					t.Errorf("row %q; want the size %q", row, want.size)
				}
			}
		}
		if !found {
			t.Errorf("no row for %s with size %q in %q", want.path, want.size, terminal)
		}
	}
	code, piped, _ := harness.RunCLI(t, nil, "files", "ls", p.Ready.URL)
	if code != 0 || !strings.Contains(piped, "1572864 ") || strings.Contains(piped, "MiB") {
		t.Errorf("ls to a pipe: exit %d, %q; want sizes in bytes", code, piped)
	}
}
