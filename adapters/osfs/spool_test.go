package osfs_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

func openDir(t *testing.T, dir string) *osfs.Spool {
	t.Helper()
	d, err := osfs.OpenSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func create(t *testing.T, d *osfs.Spool) ports.Snapshot {
	t.Helper()
	s, err := d.Create()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// readBack reads a snapshot's n bytes with ReadAt, then whole with Read.
func readBack(t *testing.T, s ports.Snapshot, n int) (atOffsets, sequential []byte) {
	t.Helper()
	atOffsets = make([]byte, n)
	if _, err := s.ReadAt(atOffsets, 0); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		t.Fatal(err)
	}
	sequential, err := io.ReadAll(s.Content())
	if err != nil {
		t.Fatal(err)
	}
	return atOffsets, sequential
}

// plainReader hides every method of its reader but Read, like a source with no descriptor.
type plainReader struct{ io.Reader }

func TestFillCopiesExactlyWhatItIsAskedFor(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789abcdef"), 20_000) // 320,000 bytes
	srcPath := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(srcPath, content, 0o600); err != nil {
		t.Fatal(err)
	}
	sources := map[string]func(t *testing.T) io.Reader{
		"a file, copied in the kernel": func(t *testing.T) io.Reader {
			f, err := os.Open(srcPath)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = f.Close() })
			return f
		},
		"a reader without a descriptor, copied through a buffer": func(*testing.T) io.Reader {
			return plainReader{bytes.NewReader(content)}
		},
	}
	for name, source := range sources {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				rule   string
				chunks []int64 // successive Fill sizes
				want   int64
			}{
				{"one fill of the whole file plus one byte stops at its end", []int64{320_001}, 320_000},
				{"a fill shorter than the file copies that much", []int64{1000}, 1000},
				{"successive fills append where the last one stopped", []int64{1000, 200_000, 200_000}, 320_000},
				{"an empty fill copies nothing", []int64{0}, 0},
			} {
				t.Run(tc.rule, func(t *testing.T) {
					src := source(t)
					s := create(t, openDir(t, t.TempDir()))
					var total int64
					for _, n := range tc.chunks {
						got, err := s.Fill(src, n)
						if err != nil {
							t.Fatal(err)
						}
						total += got
					}
					if total != tc.want {
						t.Fatalf("filled %d bytes, want %d", total, tc.want)
					}
					at, seq := readBack(t, s, int(tc.want))
					if !bytes.Equal(at, content[:tc.want]) || !bytes.Equal(seq, content[:tc.want]) {
						t.Fatalf("read back %d/%d bytes that differ from the source's first %d", len(at), len(seq), tc.want)
					}
				})
			}
		})
	}
}

func TestASnapshotHasNoNameAndLeavesNothingBehind(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	d := openDir(t, dir)
	s := create(t, d)
	if _, err := s.Fill(strings.NewReader("private bytes"), 100); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("the spool directory holds %v while a snapshot is open; want nothing", entries)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("spool directory mode %v (%v), want 0700", st.Mode().Perm(), err)
	}
}

func TestASnapshotCanNeverBeLinkedIntoADirectory(t *testing.T) {
	dir := t.TempDir()
	s := create(t, openDir(t, dir))
	lr, ok := s.Content().(*io.LimitedReader)
	if !ok {
		t.Fatalf("a snapshot's content is %T, not an *io.LimitedReader", s.Content())
	}
	sc, ok := lr.R.(syscall.Conn)
	if !ok {
		t.Fatal("a snapshot's content is not a kernel file: net/http could not sendfile it")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var linkErr error
	_ = raw.Control(func(fd uintptr) {
		// The documented way to name an O_TMPFILE file, which O_EXCL forbids.
		linkErr = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(fd)), unix.AT_FDCWD,
			filepath.Join(dir, "named"), unix.AT_SYMLINK_FOLLOW)
	})
	if linkErr == nil {
		t.Fatal("a snapshot was given a name")
	}
}

func TestOpenRefusesASymlinkedDirectory(t *testing.T) {
	base := t.TempDir()
	fixture.Write(t, base, fixture.Layout{"real/": "", "link -> real": ""})
	if _, err := osfs.OpenSpool(filepath.Join(base, "link")); err == nil || errors.Is(err, osfs.ErrNoUnnamedFiles) {
		t.Fatalf("Open through a symlink = %v, want a refusal that is not about O_TMPFILE", err)
	}
}

func TestOpenTellsAFilesystemWithoutUnnamedFiles(t *testing.T) {
	// procfs cannot make O_TMPFILE files; it is on every Linux this runs on.
	_, err := osfs.OpenSpool("/proc")
	if !errors.Is(err, osfs.ErrNoUnnamedFiles) {
		t.Fatalf("Open(/proc) = %v, want ErrNoUnnamedFiles", err)
	}
}

// failingReader fails like a file whose storage went away.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, syscall.EIO }

func TestASourceReadFailureIsReturnedAsIs(t *testing.T) {
	s := create(t, openDir(t, t.TempDir()))
	if _, err := s.Fill(failingReader{}, 10); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Fill = %v, want the source's EIO", err)
	}
}

func TestASnapshotFailureIsAnIOErrorWithoutAPath(t *testing.T) {
	dir := t.TempDir()
	s := create(t, openDir(t, dir))
	// A descriptor opened for writing only cannot be copied from: the kernel says EBADF.
	src, err := os.OpenFile(filepath.Join(dir, "..", "w-only"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Fill(src, 3)
	r, ok := refusal.As(err)
	if !ok || r.Code != refusal.IOError || strings.Contains(r.Message, dir) || strings.Contains(r.Message, "w-only") {
		t.Fatalf("Fill from a write-only descriptor = %v, want io_error without a path", err)
	}
}

// TestAClosedSnapshotsBytesAreNeverRewritten pins that no later snapshot reuses an earlier
// one's file: sendfile queues references to a file's pages on the socket, not copies, so a
// reused file would change the bytes of a body already counted sent. A duplicate of the first
// snapshot's descriptor stands for such a reference.
func TestAClosedSnapshotsBytesAreNeverRewritten(t *testing.T) {
	const earlier = "an earlier snapshot's bytes"
	d := openDir(t, t.TempDir())
	first := create(t, d)
	if _, err := first.Fill(strings.NewReader(earlier), 100); err != nil {
		t.Fatal(err)
	}
	raw, err := first.Content().(*io.LimitedReader).R.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	held := -1
	_ = raw.Control(func(fd uintptr) { held, err = unix.Dup(int(fd)) })
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(held)
	_ = first.Close()
	for range 3 {
		if _, err := create(t, d).Fill(strings.NewReader(strings.Repeat("later bytes ", 10)), 200); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, 100)
	n, err := unix.Pread(held, got, 0)
	if err != nil || string(got[:n]) != earlier {
		t.Fatalf("the first snapshot's file now holds %q (%v); want %q", got[:n], err, earlier)
	}
}

func TestAClosedSnapshotCannotBeFilled(t *testing.T) {
	s := create(t, openDir(t, t.TempDir()))
	_ = s.Close()
	if _, err := s.Fill(strings.NewReader("abc"), 3); !refusal.Is(err, refusal.IOError) {
		t.Fatalf("Fill after Close = %v, want io_error", err)
	}
}
