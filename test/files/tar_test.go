package files_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// member is one tar member read back.
type member struct {
	name   string
	size   int64
	mtime  time.Time
	mode   int64
	sha256 string
}

// readTar reads every member of a whole archive; an archive not ended cleanly fails the test.
func readTar(t *testing.T, data []byte) []member {
	t.Helper()
	r := tar.NewReader(bytes.NewReader(data))
	var out []member
	for {
		hdr, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading the archive: %v", err)
		}
		h := sha256.New()
		if _, err := io.Copy(h, r); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg {
			t.Fatalf("member %q has type %q, want a regular file", hdr.Name, hdr.Typeflag)
		}
		out = append(out, member{hdr.Name, hdr.Size, hdr.ModTime, hdr.Mode, hex.EncodeToString(h.Sum(nil))})
	}
}

// TestTarHoldsTheListingVerifiedInOrder archives an export with a nested file and a name
// too long for a USTAR header: every member's name, size, mtime (whole seconds of the
// service's mtime_ms), mode and sha256 equal the listing, in its order, read back with
// archive/tar and with tar -t where it is installed; -o - writes the same archive.
func TestTarHoldsTheListingVerifiedInOrder(t *testing.T) {
	long := "out/" + strings.Repeat("d", 90) + "/" + strings.Repeat("n", 60) + ".txt"
	p := harness.Start(t, harness.Capsule{Manifest: manifest, Files: fixture.Layout{
		"out/a.txt": "a\n", "out/deep/b.bin": "\x00\x01b", "out/empty": "", long: "long\n"}})
	code, stdout, stderr := harness.RunCLI(t, nil, "files", "ls", "--json", p.Ready.URL)
	if code != 0 {
		t.Fatalf("ls: exit %d, %s", code, stderr)
	}
	var listing struct {
		Entries []struct {
			Path    string `json:"path"`
			Size    int64  `json:"size_bytes"`
			MtimeMs int64  `json:"mtime_ms"`
			SHA256  string `json:"sha256"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(stdout), &listing); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "export.tar")
	code, _, stderr = harness.RunCLI(t, nil, "files", "tar", p.Ready.URL, "-o", file)
	if code != 0 || !strings.Contains(stderr, "archived 4 files") {
		t.Fatalf("tar: exit %d, stderr %q", code, stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	members := readTar(t, data)
	if len(members) != len(listing.Entries) {
		t.Fatalf("%d members, want the listing's %d", len(members), len(listing.Entries))
	}
	for i, e := range listing.Entries {
		m := members[i]
		want := member{e.Path, e.Size, time.UnixMilli(e.MtimeMs).Truncate(time.Second), 0o644, e.SHA256}
		if m.name != want.name || m.size != want.size || !m.mtime.Equal(want.mtime) || m.mode != want.mode || m.sha256 != want.sha256 {
			t.Fatalf("member %d = %+v, want %+v", i, m, want)
		}
	}
	if tarCmd, err := exec.LookPath("tar"); err == nil {
		out, err := exec.Command(tarCmd, "-tf", file).Output()
		if err != nil {
			t.Fatalf("tar -t: %v", err)
		}
		var want []string
		for _, m := range members {
			want = append(want, m.name)
		}
		if got := strings.Split(strings.TrimSpace(string(out)), "\n"); !slices.Equal(got, want) {
			t.Fatalf("tar -t lists %q, want %q", got, want)
		}
	}
	code, stdout, _ = harness.RunCLI(t, nil, "files", "tar", p.Ready.URL, "-o", "-")
	if code != 0 || len(readTar(t, []byte(stdout))) != len(members) {
		t.Fatalf("tar -o -: exit %d, %d bytes", code, len(stdout))
	}
}

// TestTarLeavesOutWhatFailsAndWhatIsUnsafe archives the hostile service: a path a pull would
// refuse is never requested nor archived, a body that fails its etag is left out, each with a
// line on stderr; the exit status is 1 and the archive is still whole.
func TestTarLeavesOutWhatFailsAndWhatIsUnsafe(t *testing.T) {
	h := &hostile{}
	server := httptest.NewServer(h)
	defer server.Close()
	file := filepath.Join(t.TempDir(), "export.tar")
	code, _, stderr := harness.RunCLI(t, nil, "files", "tar", server.URL, "-o", file)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range readTar(t, data) {
		names = append(names, m.name)
	}
	if !slices.Equal(names, []string{"ok.txt", "link/through.txt"}) {
		t.Fatalf("members %q, want ok.txt and link/through.txt", names)
	}
	for _, line := range []string{"../escape.txt: unsafe_path", "a/../../up.txt: unsafe_path", "bad-etag.txt: etag_mismatch",
		"short.txt: service_unreachable", "archived 2 files"} {
		if !strings.Contains(stderr, line) {
			t.Errorf("stderr lacks %q:\n%s", line, stderr)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.requested {
		if strings.Contains(r, "escape") || strings.Contains(r, "up.txt") || strings.Contains(r, "dot.txt") {
			t.Fatalf("an unsafe path was requested: %s", r)
		}
	}
}

// TestTarRefusesAServiceThatIsNotThereWithoutCreatingTheFile: no listing, no archive file.
func TestTarRefusesAServiceThatIsNotThereWithoutCreatingTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "export.tar")
	code, _, stderr := harness.RunCLI(t, nil, "files", "tar", "http://127.0.0.1:1", "-o", file)
	if code != 1 || !strings.Contains(stderr, "service_unreachable") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed archive left %s: %v", file, err)
	}
}
