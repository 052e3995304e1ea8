package tarball_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/tarball"
	"github.com/resplane/resplane/domain/refusal"
)

// failAfter is an output that accepts n bytes, then fails.
type failAfter struct {
	buf bytes.Buffer
	n   int
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.buf.Len()+len(p) > f.n {
		k := f.n - f.buf.Len()
		f.buf.Write(p[:k])
		return k, errors.New("disk full")
	}
	return f.buf.Write(p)
}

func add(t *testing.T, w *tarball.Writer, name, body string) error {
	t.Helper()
	m, err := w.Member(name)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(m, body); err != nil {
		t.Fatal(err)
	}
	return m.Commit(time.UnixMilli(1_700_000_000_999))
}

func TestAMemberIsWrittenOnlyOnCommitAndTheArchiveEndsCleanly(t *testing.T) {
	var out bytes.Buffer
	w := tarball.New(&out)
	dropped, err := w.Member("dropped.txt")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(dropped, "never")
	dropped.Discard()
	if err := add(t, w, "kept.txt", "kept"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := tar.NewReader(&out)
	hdr, err := r.Next()
	if err != nil || hdr.Name != "kept.txt" || hdr.Size != 4 || hdr.Mode != 0o644 || !hdr.ModTime.Equal(time.Unix(1_700_000_000, 0)) {
		t.Fatalf("first member %+v, %v", hdr, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the one member: %v, want the archive's clean end", err)
	}
}

func TestAnArchiveWhoseOutputFailedIsNeverEnded(t *testing.T) {
	out := &failAfter{n: 700}
	w := tarball.New(out)
	if err := add(t, w, "big.txt", string(bytes.Repeat([]byte("x"), 2000))); refusal.From(err).Code != refusal.IOError {
		t.Fatalf("a member cut short: %v, want io_error", err)
	}
	if _, err := w.Member("next.txt"); err == nil {
		t.Fatal("a cut-short archive took another member")
	}
	if err := w.Close(); err == nil {
		t.Fatal("a cut-short archive was ended")
	}
	if out.buf.Len() != 700 {
		t.Fatalf("%d bytes written after the failure, want the 700 before it", out.buf.Len())
	}
	r := tar.NewReader(bytes.NewReader(out.buf.Bytes()))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading the cut-short archive: %v, want unexpected EOF", err)
	}
}
