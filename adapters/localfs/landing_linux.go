package localfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// CreateAt returns a landing that replaces the file at path, the way a pull lands a file: a
// temp file in path's directory, renamed over path on Commit. path is the operator's own
// choice, so its directory is opened following symlinks; the file itself must be missing or
// a regular file. The error names the path; it is meant for the operator.
func CreateAt(path string) (ports.Landing, error) {
	name := filepath.Base(path)
	if name == "." || name == ".." || name == string(filepath.Separator) {
		return nil, fmt.Errorf("%s does not name a file", path)
	}
	dir, err := retry(func() (int, error) {
		return unix.Open(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("opening the directory of %s: %w", path, err)
	}
	l, err := stage(dir, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// Spool returns a landing that holds the download in an unnamed temp file and copies it to w
// only on Commit, once it has been verified: a download that fails writes nothing to w.
func Spool(w io.Writer) (ports.Landing, error) {
	f, err := unnamedTemp()
	if err != nil {
		return nil, fmt.Errorf("creating a temp file to hold the download: %w", err)
	}
	return &spool{file: f, out: w}, nil
}

// unnamedTemp opens an O_TMPFILE file in the temp directory or, where the filesystem does not
// support that, a named one it removes at once.
func unnamedTemp() (*os.File, error) {
	dir := os.TempDir()
	fd, err := retry(func() (int, error) { return unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600) })
	if err == nil {
		return os.NewFile(uintptr(fd), "download"), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".resplane-*.part")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// spool is a landing onto a writer, through an unnamed temp file.
type spool struct {
	file *os.File
	out  io.Writer
	done bool
}

func (s *spool) Write(p []byte) (int, error) {
	n, err := s.file.Write(p)
	if err != nil {
		return n, refuse(err)
	}
	return n, nil
}

// Commit copies the whole download to the writer. The modification time has no meaning
// there.
func (s *spool) Commit(time.Time) error {
	if s.done {
		return refusal.WithMessage(refusal.IOError, "The download was already landed or discarded.")
	}
	s.done = true
	defer s.file.Close()
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return refuse(err)
	}
	if _, err := io.Copy(s.out, s.file); err != nil {
		return refusal.WithMessage(refusal.IOError, "The download could not be written out.").Wrapping(err)
	}
	return nil
}

// Discard drops the download.
func (s *spool) Discard() {
	if !s.done {
		s.done = true
		s.file.Close()
	}
}
