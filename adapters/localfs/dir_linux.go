package localfs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// Dir is a directory a pull mirrors into.
type Dir struct {
	fd int
}

var _ ports.LocalMirror = (*Dir)(nil)

// Open creates path (and its parents) when it is missing and opens it. The error names the
// path; it is meant for the operator.
func Open(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o777); err != nil {
		return nil, fmt.Errorf("creating the target directory: %w", err)
	}
	fd, err := retry(func() (int, error) { return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return nil, fmt.Errorf("opening the target directory %s: %w", path, err)
	}
	return &Dir{fd: fd}, nil
}

// Close releases the directory's descriptor. No call may be running or follow.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// errMissing reports a directory on the way that does not exist (and was not to be created).
var errMissing = errors.New("missing")

// parent opens the directory that holds rel's last component, walking the components before
// it from d's descriptor with O_NOFOLLOW. With create, a missing directory is made (and a
// concurrent maker tolerated); without, it is errMissing. It returns the descriptor, which
// the caller closes, and the last component.
func (d *Dir) parent(rel pathpolicy.RelPath, create bool) (int, string, error) {
	components := rel.Components()
	dir, err := retry(func() (int, error) { return unix.Openat(d.fd, ".", dirFlags, 0) })
	if err != nil {
		return -1, "", refuse(err)
	}
	for _, name := range components[:len(components)-1] {
		next, err := openDir(dir, name)
		if errors.Is(err, unix.ENOENT) && create {
			if err = retryErr(func() error { return unix.Mkdirat(dir, name, 0o777) }); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openDir(dir, name)
			}
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			err = onTheWay(dir, name, err)
		}
		unix.Close(dir)
		if errors.Is(err, unix.ENOENT) {
			return -1, "", errMissing
		}
		if err != nil {
			return -1, "", refuse(err)
		}
		dir = next
	}
	return dir, components[len(components)-1], nil
}

// onTheWay says what stands where a directory was needed: the kernel reports a symlink
// opened with O_NOFOLLOW|O_DIRECTORY as ENOTDIR, so the entry itself is looked at.
func onTheWay(dir int, name string, err error) error {
	if st, serr := lstatAt(dir, name); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.ELOOP
	}
	return err
}

// dirFlags opens a directory for reading its entries and for use as an *at anchor, never
// through a symlink.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

func openDir(dir int, name string) (int, error) {
	return retry(func() (int, error) { return unix.Openat(dir, name, dirFlags, 0) })
}

// regularAt stats name in dir without following a symlink: missing when nothing is there, a
// refusal when something other than a regular file is.
func regularAt(dir int, name string) (st unix.Stat_t, missing bool, err error) {
	st, err = lstatAt(dir, name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return st, true, nil
	case err != nil:
		return st, false, refuse(err)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return st, false, notRegular(st.Mode)
	}
	return st, false, nil
}

// lstatAt stats name in dir without following a symlink.
func lstatAt(dir int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := retryErr(func() error { return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	return st, err
}

// notRegular is the refusal for a destination that exists as something else.
func notRegular(mode uint32) *refusal.Refusal {
	what := "something that is not a regular file"
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		what = "a symlink"
	case unix.S_IFDIR:
		what = "a directory"
	}
	return refusal.WithMessage(refusal.UnsafePath, "The path names "+what+" in the target directory; it is never replaced or written through.")
}

// Compare reports whether rel is missing, the same file as described, or different.
func (d *Dir) Compare(rel pathpolicy.RelPath, size int64, sum string) (ports.LocalState, error) {
	dir, name, err := d.parent(rel, false)
	if errors.Is(err, errMissing) {
		return ports.LocalMissing, nil
	}
	if err != nil {
		return 0, err
	}
	defer unix.Close(dir)
	st, missing, err := regularAt(dir, name)
	switch {
	case err != nil:
		return 0, err
	case missing:
		return ports.LocalMissing, nil
	case st.Size != size:
		return ports.LocalDifferent, nil
	}
	fd, err := retry(func() (int, error) {
		return unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return 0, refuse(err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	hash := sha256.New()
	if _, err := io.Copy(hash, f); err != nil {
		return 0, refuse(err)
	}
	if hex.EncodeToString(hash.Sum(nil)) != sum {
		return ports.LocalDifferent, nil
	}
	return ports.LocalSame, nil
}

// Stage makes the directories on the way to rel and a temp file beside it.
func (d *Dir) Stage(rel pathpolicy.RelPath) (ports.Landing, error) {
	dir, name, err := d.parent(rel, true)
	if err != nil {
		return nil, err
	}
	return stage(dir, name)
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
	fd, err := retry(func() (int, error) {
		return unix.Openat(dir, temp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
	})
	if err != nil {
		unix.Close(dir)
		return nil, refuse(err)
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
		return n, refuse(err)
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
		err = retryErr(func() error { return unix.Renameat(l.dir, l.temp, l.dir, l.name) })
	}
	if err != nil {
		l.Discard()
		return refuse(err)
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

// Files lists every regular file beneath the directory.
func (d *Dir) Files() ([]string, error) {
	root, err := retry(func() (int, error) { return unix.Openat(d.fd, ".", dirFlags, 0) })
	if err != nil {
		return nil, refuse(err)
	}
	var files []string
	err = walk(root, "", &files)
	return files, err
}

// walk appends the regular files beneath dir (whose descriptor it closes) to files, each
// prefixed with prefix. Entry types come from fstatat without following, so a symlink is
// neither listed nor descended.
func walk(dir int, prefix string, files *[]string) error {
	f := os.NewFile(uintptr(dir), prefix)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return refuse(err)
	}
	for _, name := range names {
		st, err := lstatAt(dir, name)
		if errors.Is(err, unix.ENOENT) {
			continue // removed meanwhile
		}
		if err != nil {
			return refuse(err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			*files = append(*files, prefix+name)
		case unix.S_IFDIR:
			sub, err := openDir(dir, name)
			if err != nil {
				return refuse(err)
			}
			if err := walk(sub, prefix+name+"/", files); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes the regular file at rel.
func (d *Dir) Delete(rel pathpolicy.RelPath) error {
	dir, name, err := d.parent(rel, false)
	if errors.Is(err, errMissing) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if _, missing, err := regularAt(dir, name); err != nil || missing {
		return err
	}
	if err := retryErr(func() error { return unix.Unlinkat(dir, name, 0) }); err != nil && !errors.Is(err, unix.ENOENT) {
		return refuse(err)
	}
	return nil
}

// refuse turns a system call's failure into a refusal naming no path: what stands on the way,
// or the name the filesystem rejects, is unsafe_path; anything else io_error with the
// operating system's description.
func refuse(err error) *refusal.Refusal {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return refusal.WithMessage(refusal.IOError, "The local file could not be used.").Wrapping(err)
	}
	var r *refusal.Refusal
	switch errno {
	case unix.ELOOP:
		r = refusal.WithMessage(refusal.UnsafePath, "A symlink is on the way to this path in the target directory; nothing is written through a symlink.")
	case unix.ENOTDIR:
		r = refusal.WithMessage(refusal.UnsafePath, "A file that is not a directory is on the way to this path in the target directory.")
	case unix.EISDIR, unix.ENOTEMPTY:
		r = refusal.WithMessage(refusal.UnsafePath, "The path names a directory in the target directory; it is never replaced.")
	case unix.ENAMETOOLONG, unix.EINVAL, unix.EILSEQ:
		r = refusal.WithMessage(refusal.UnsafePath, "The local filesystem refuses this name: "+errno.Error()+".")
	default:
		r = refusal.WithMessage(refusal.IOError, "The local file could not be used: "+errno.Error()+".")
	}
	return r.Wrapping(err)
}

// retry runs a system call again while a signal interrupts it.
func retry(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// retryErr is retry for a system call that returns only an error.
func retryErr(call func() error) error {
	_, err := retry(func() (int, error) { return 0, call() })
	return err
}
