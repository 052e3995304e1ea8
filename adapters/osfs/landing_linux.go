package osfs

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/internal/eintr"
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
	dir, err := eintr.Retry(func() (int, error) {
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

// stage checks that name in dir (whose descriptor it takes over) is missing or a regular file
// and creates the temp file that will replace it.
func stage(dir int, name string) (ports.Landing, error) {
	if _, _, err := regularAt(dir, name); err != nil {
		unix.Close(dir)
		return nil, err
	}
	var random [8]byte
	_, _ = rand.Read(random[:])
	temp := ".resplane-" + hex.EncodeToString(random[:]) + ".part"
	fd, err := eintr.Retry(func() (int, error) {
		return unix.Openat(dir, temp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
	})
	if err != nil {
		unix.Close(dir)
		return nil, refuse(inTarget, err)
	}
	return &landing{dir: dir, temp: temp, name: name, file: os.NewFile(uintptr(fd), temp)}, nil
}

// landing is one temp file and the directory descriptor it was created in; the rename goes
// through that same descriptor. It is used by one goroutine.
type landing struct {
	dir        int
	temp, name string
	file       *os.File
	done       bool
}

func (l *landing) Write(p []byte) (int, error) {
	n, err := l.file.Write(p)
	if err != nil {
		return n, refuse(inTarget, err)
	}
	return n, nil
}

// Commit flushes the temp file, gives it modTime, and renames it over the destination.
func (l *landing) Commit(modTime time.Time) error {
	if l.done {
		return refusal.WithMessage(refusal.IOError, "The download was already landed or discarded.")
	}
	err := l.file.Sync()
	if err == nil && !modTime.IsZero() {
		ts := unix.NsecToTimespec(modTime.UnixNano())
		err = unix.UtimesNanoAt(l.dir, l.temp, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err == nil {
		err = l.file.Close()
	}
	if err == nil {
		err = eintr.RetryErr(func() error { return unix.Renameat(l.dir, l.temp, l.dir, l.name) })
	}
	if err != nil {
		l.Discard()
		return refuse(inTarget, err)
	}
	l.done = true
	unix.Close(l.dir)
	return nil
}

// Discard closes and removes the temp file; after Commit or a first Discard it does nothing.
func (l *landing) Discard() {
	if l.done {
		return
	}
	l.done = true
	l.file.Close()
	unix.Unlinkat(l.dir, l.temp, 0)
	unix.Close(l.dir)
}

// WriteOnCommit returns a landing that holds the download in an unnamed temp file and copies
// it to w only on Commit, once it has been verified: a download that fails writes nothing to
// w.
func WriteOnCommit(w io.Writer) (ports.Landing, error) {
	f, err := unnamedTemp()
	if err != nil {
		return nil, fmt.Errorf("creating a temp file to hold the download: %w", err)
	}
	return &heldLanding{file: f, out: w}, nil
}

// unnamedTemp opens an O_TMPFILE file in the temp directory or, where the filesystem does not
// support that, a named one it removes at once.
func unnamedTemp() (*os.File, error) {
	dir := os.TempDir()
	fd, err := eintr.Retry(func() (int, error) { return unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600) })
	if err == nil {
		return os.NewFile(uintptr(fd), "download"), nil
	}
	if !noUnnamedFiles(err) {
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

// heldLanding is a landing onto a writer, held in an unnamed temp file until Commit.
type heldLanding struct {
	file *os.File
	out  io.Writer
	done bool
}

func (h *heldLanding) Write(p []byte) (int, error) {
	n, err := h.file.Write(p)
	if err != nil {
		return n, refuse(inTarget, err)
	}
	return n, nil
}

// Commit copies the whole download to the writer. The modification time has no meaning
// there.
func (h *heldLanding) Commit(time.Time) error {
	if h.done {
		return refusal.WithMessage(refusal.IOError, "The download was already landed or discarded.")
	}
	h.done = true
	defer h.file.Close()
	if _, err := h.file.Seek(0, io.SeekStart); err != nil {
		return refuse(inTarget, err)
	}
	if _, err := io.Copy(h.out, h.file); err != nil {
		return refusal.WithMessage(refusal.IOError, "The download could not be written out.").Wrapping(err)
	}
	return nil
}

// Discard drops the download.
func (h *heldLanding) Discard() {
	if !h.done {
		h.done = true
		h.file.Close()
	}
}
