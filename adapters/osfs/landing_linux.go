package osfs

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
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
	l := &landing{at: inTarget, dir: dir, name: name, prefix: ".resplane-"}
	temp := l.newTempName()
	fd, err := eintr.Retry(func() (int, error) {
		return unix.Openat(dir, temp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
	})
	if err != nil {
		unix.Close(dir)
		return nil, refuse(inTarget, err)
	}
	l.temp = temp
	l.setFile(fd, temp)
	return l, nil
}

// procFD is where a descriptor of this process has a name; an unnamed file is linked into its
// directory through it.
const procFD = "/proc/self/fd/"

// landing is a file being filled in a held directory and named into place through that same
// descriptor (ports.Landing): the operator's target directory (stage) or peer-in (Inbox.Stage).
// It is used by one goroutine.
type landing struct {
	at      place  // inTarget or inInbox: what a failure means there
	dir     int    // the destination's directory; closed once committed or discarded
	name    string // the destination's name in dir, one path component
	prefix  string // how the landing's temp names start
	temp    string // the temp name; "" while the file has no name (O_TMPFILE)
	syncDir bool   // flush dir once the file is named, so that the name survives a crash
	fd      int
	file    *os.File
	done    bool
}

// setFile adopts fd, the file being filled.
func (l *landing) setFile(fd int, name string) {
	l.fd, l.file = fd, os.NewFile(uintptr(fd), name)
}

// newTempName returns a fresh temp name: the prefix, 16 random hex digits, ".part".
func (l *landing) newTempName() string {
	var random [8]byte
	_, _ = rand.Read(random[:])
	return l.prefix + hex.EncodeToString(random[:]) + ".part"
}

// Write appends to the file.
func (l *landing) Write(p []byte) (int, error) {
	n, err := l.file.Write(p)
	if err != nil {
		return n, failed(l.at, "writing the temp file failed", err)
	}
	return n, nil
}

// Commit flushes the file, gives it modTime, names it in dir (replacing an earlier file or
// symlink of that name, never writing through it) and, with syncDir, flushes dir. On any
// failure neither a temp file nor a new name remains.
func (l *landing) Commit(modTime time.Time) error {
	if l.done {
		return failed(l.at, "the file was already landed or discarded", nil)
	}
	if err := l.file.Sync(); err != nil {
		l.Discard()
		return failed(l.at, "flushing the temp file failed", err)
	}
	if err := l.setModTime(modTime); err != nil {
		l.Discard()
		return failed(l.at, "setting the modification time failed", err)
	}
	if err := l.place(); err != nil {
		l.Discard()
		return failed(l.at, "moving the file into place failed", err)
	}
	l.done = true
	defer unix.Close(l.dir)
	if l.syncDir {
		if err := eintr.RetryErr(func() error { return unix.Fsync(l.dir) }); err != nil {
			unlinkAt(l.dir, l.name)
			return failed(l.at, "flushing the directory failed", err)
		}
	}
	return nil
}

// setModTime sets the file's access and modification times to t, unless t is zero: by its temp
// name, never following a symlink, or, while it has none, through its descriptor's name in
// /proc/self/fd.
func (l *landing) setModTime(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	ts := unix.NsecToTimespec(t.UnixNano())
	times := []unix.Timespec{ts, ts}
	if l.temp != "" {
		return eintr.RetryErr(func() error { return unix.UtimesNanoAt(l.dir, l.temp, times, unix.AT_SYMLINK_NOFOLLOW) })
	}
	path := procFD + strconv.Itoa(l.fd)
	return eintr.RetryErr(func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, path, times, 0) })
}

// place gives the file its name in dir and closes it. On failure no new name remains; the
// caller discards the file.
func (l *landing) place() error {
	if l.temp != "" {
		if err := l.file.Close(); err != nil {
			return err
		}
		return eintr.RetryErr(func() error { return unix.Renameat(l.dir, l.temp, l.dir, l.name) })
	}
	if err := l.link(); err != nil {
		return err
	}
	if err := l.file.Close(); err != nil {
		unlinkAt(l.dir, l.name)
		return err
	}
	return nil
}

// link names the unnamed file: directly when nothing has its name, else by a link to a temp
// name renamed over it. On failure no temp name remains.
func (l *landing) link() error {
	source := procFD + strconv.Itoa(l.fd)
	linkAs := func(target string) error {
		return eintr.RetryErr(func() error { return unix.Linkat(unix.AT_FDCWD, source, l.dir, target, unix.AT_SYMLINK_FOLLOW) })
	}
	err := linkAs(l.name)
	if err != unix.EEXIST {
		return err
	}
	temp := l.newTempName()
	if err := linkAs(temp); err != nil {
		return err
	}
	if err := eintr.RetryErr(func() error { return unix.Renameat(l.dir, temp, l.dir, l.name) }); err != nil {
		unlinkAt(l.dir, temp)
		return err
	}
	return nil
}

// Discard closes and removes the file; after Commit or a first Discard it does nothing.
func (l *landing) Discard() {
	if l.done {
		return
	}
	l.done = true
	l.file.Close()
	if l.temp != "" {
		unlinkAt(l.dir, l.temp)
	}
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
