package blackbox_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// TestAGibibyteFileIsServedInLittleMemory pins docs/operator-guide.md, "Memory and connection
// bounds": under max_bytes: 2Gi a 1 GiB file is served whole, with the etag of its bytes, while
// the process's peak RSS stays under 128 MiB. It writes and reads 1 GiB, so it runs only when
// RESPLANE_TEST_LARGE=1 (make test-large).
func TestAGibibyteFileIsServedInLittleMemory(t *testing.T) {
	if os.Getenv("RESPLANE_TEST_LARGE") != "1" {
		t.Skip("writes and serves a 1 GiB file: set RESPLANE_TEST_LARGE=1 (make test-large)")
	}
	const size = 1 << 30
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", "2Gi"), Files: fixture.Layout{"out/": ""}})
	f, err := os.Create(filepath.Join(p.Workdir, "out/huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.New()
	chunk := bbPattern(1 << 20)
	for i := range size / len(chunk) {
		chunk[0], chunk[1] = byte(i), byte(i>>8)
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
		want.Write(chunk)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	addr := p.Ready.Listen
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Minute))
	start := time.Now()
	if _, err := io.WriteString(conn, harness.RequestText(addr, "GET", "/resources/files/huge.bin")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := sha256.New()
	n, err := io.Copy(got, resp.Body)
	if err != nil || resp.StatusCode != 200 || n != size {
		t.Fatalf("status %d, %d bytes (%v); want 200 and %d bytes", resp.StatusCode, n, err, size)
	}
	wantSum := hex.EncodeToString(want.Sum(nil))
	if sum := hex.EncodeToString(got.Sum(nil)); sum != wantSum || resp.Header.Get("etag") != `"sha256:`+wantSum+`"` {
		t.Fatalf("body sha256 %s, etag %s; want both to be the file's %s", sum, resp.Header.Get("etag"), wantSum)
	}
	rss := p.RequirePeakRSSUnder(t, 128<<20)
	t.Logf("served 1 GiB in %v; peak RSS %.1f MiB", time.Since(start), float64(rss)/(1<<20))
}
