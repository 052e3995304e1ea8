package osfs

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/internal/eintr"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
)

// FS is the workdir of one capsule on the real filesystem.
type FS struct {
	wd     *dirFD // the workdir, O_PATH; never closed before Close
	wdPath string // its canonical absolute path, for absolute symlink targets
	// openat2 is false once openat2 was found unavailable, or disabled by WithoutOpenat2.
	openat2 atomic.Bool
}

var _ ports.ExportFS = (*FS)(nil)

// Option configures New.
type Option func(*FS)

// WithoutOpenat2 makes the FS resolve every path one component at a time, as it does on a
// kernel without openat2, so tests can hold that path to the same contract.
func WithoutOpenat2() Option {
	return func(fs *FS) { fs.openat2.Store(false) }
}

// New opens the workdir, which must exist, and records its canonical absolute path. The
// caller must Close the FS.
func New(workdir string, opts ...Option) (*FS, error) {
	abs, err := filepath.Abs(workdir)
	if err != nil {
		return nil, fmt.Errorf("osfs: workdir: %w", err)
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("osfs: workdir: %w", err)
	}
	fd, err := eintr.Retry(func() (int, error) {
		return unix.Open(canon, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("osfs: open workdir %s: %w", canon, err)
	}
	fs := &FS{wd: &dirFD{fd: fd, pathOnly: true}, wdPath: canon}
	fs.openat2.Store(true)
	for _, opt := range opts {
		opt(fs)
	}
	return fs, nil
}

// Close releases the workdir descriptor. Calls after Close fail with io_error.
func (fs *FS) Close() error { return fs.wd.Close() }

// OpenFile implements ports.ExportFS.
func (fs *FS) OpenFile(root string, rel pathpolicy.RelPath, class containment.Class) (ports.File, error) {
	return resolve.RetryReplaced(func() (ports.File, error) { return fs.openOnce(root, rel, class) })
}

// openOnce resolves and opens rel once; a file replaced between lookup and open is refused
// with resolve.Replaced, and OpenFile resolves again.
func (fs *FS) openOnce(root string, rel pathpolicy.RelPath, class containment.Class) (ports.File, error) {
	if fs.openat2.Load() {
		path := rel.String()
		if f, done, err := fs.openFast(root+"/"+path, path); done {
			return f, err
		}
	}
	return resolve.Open(fs.wd, fs.wdPath, root, rel.Components(), class.FollowsSymlinks(), openLeaf)
}

// Walk implements ports.ExportFS. A file is stated before it is opened (statLeaf), and opened
// (openLeaf) only when visit.Known does not know it by that stat.
func (fs *FS) Walk(ctx context.Context, root string, class containment.Class, visit ports.Visitor) error {
	return resolve.Walk(ctx, fs.wd, fs.wdPath, root, class.FollowsSymlinks(), resolve.Leaves[ports.FileStat, ports.File]{
		Stat: statLeaf, Known: visit.Known, Open: openLeaf, Visit: visit.Visit,
	})
}

// beneath is how every openat2 call resolves: never out of the workdir, through no symlink
// at all (the last component included) and no /proc magic link.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openFast opens wdRel, the root and the path beneath it joined, when no symlink is on it:
// a symlink-free path relative to the workdir that resolves beneath it cannot be anything
// but the root's path followed by the requested one, and every class serves it. done is
// false when the caller must resolve component by component instead: the kernel met a
// symlink, or openat2 is unavailable. path is the file's canonical path beneath the root.
//
// The common case, a regular file, costs an fstatat, the read open and its fstat: the
// fstatat learns the type without opening anything, and the open must land on the inode it
// saw. The fstatat resolves without openat2's confinement, so it decides only whether to
// open at once; the bytes come from the confined open alone. Anything else (the fstatat
// fails or sees another type, or the open fails for a reason other than a symlink on the
// way) is decided by an O_PATH descriptor's fstat, so that every refusal is that route's.
func (fs *FS) openFast(wdRel, path string) (f ports.File, done bool, err error) {
	if st, err := lstatAt(fs.wd.fd, wdRel); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		switch fd, err := fs.openRead(wdRel); err {
		case nil:
			f, err := newFile(fd, idOf(&st), path)
			return f, true, err
		case unix.ELOOP:
			return nil, false, nil
		}
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath}
	pfd, err := eintr.Retry(func() (int, error) { return unix.Openat2(fs.wd.fd, wdRel, &how) })
	switch err {
	case nil:
	case unix.ELOOP:
		return nil, false, nil
	case unix.ENOSYS, unix.EPERM:
		// No openat2 here, or a seccomp filter refusing it; an O_PATH open checks no
		// permission of the file itself, so EPERM cannot be about the file.
		fs.openat2.Store(false)
		return nil, false, nil
	default:
		return nil, true, refuse(inExport, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, true, refuse(inExport, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		// O_PATH|O_NOFOLLOW opens a final symlink itself rather than failing ELOOP.
		return nil, false, nil
	default:
		return nil, true, refusal.New(refusal.NotARegularFile)
	}
	fd, err := fs.openRead(wdRel)
	if err != nil {
		return nil, true, refuse(inExport, err)
	}
	f, err = newFile(fd, idOf(&st), path)
	return f, true, err
}

// openRead opens wdRel for reading with openat2, resolved as every openat2 call is (beneath),
// never blocking.
func (fs *FS) openRead(wdRel string) (int, error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: beneath}
	return eintr.Retry(func() (int, error) { return unix.Openat2(fs.wd.fd, wdRel, &how) })
}

// openLeaf opens the regular file a resolution ended on, relative to its held parent
// descriptor, never following a symlink and never blocking.
func openLeaf(r *resolve.Result) (ports.File, error) {
	parent := r.Parent.(*dirFD)
	fd, err := eintr.Retry(func() (int, error) {
		return unix.Openat(parent.fd, r.Name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, refuse(inExport, err)
	}
	return newFile(fd, r.Node.ID, strings.Join(r.Path, "/"))
}

// statLeaf reads what the regular file a resolution ended on is, without opening it: one
// fstatat of its name relative to its held parent descriptor, not following a symlink. That
// is the stat an open of the name would give at that instant: both are the same kernel
// attributes of the inode linked there. It must be a regular file and, when the resolution
// looked the file up, the inode it found.
func statLeaf(r *resolve.Result) (ports.FileStat, error) {
	st, err := lstatAt(r.Parent.(*dirFD).fd, r.Name)
	if err != nil {
		return ports.FileStat{}, refuse(inExport, err)
	}
	if err := regularFile(&st, r.Node.ID); err != nil {
		return ports.FileStat{}, err
	}
	return statOf(&st), nil
}

// newFile takes ownership of fd, a read descriptor, and returns it as a File if it is a
// regular file and, when want is set, the inode that was resolved.
func newFile(fd int, want any, path string) (ports.File, error) {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	if err != nil {
		err = refuse(inExport, err)
	} else {
		err = regularFile(&st, want)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &file{fd: fd, stat: statOf(&st), path: path}, nil
}

// regularFile refuses st unless it describes a regular file and, when want is set, the inode
// want identifies (else the file was replaced since it was looked up).
func regularFile(st *unix.Stat_t, want any) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return refusal.New(refusal.NotARegularFile)
	case want != nil && want != idOf(st):
		return resolve.Replaced()
	}
	return nil
}

// statOf is the identity of the version of a file st describes.
func statOf(st *unix.Stat_t) ports.FileStat {
	return ports.FileStat{
		Device: uint64(st.Dev), Inode: uint64(st.Ino), Size: st.Size,
		ModTime: time.Unix(st.Mtim.Unix()), ChangeTime: time.Unix(st.Ctim.Unix()),
	}
}

// fileID identifies an inode.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)} }

// file is an open regular file; its stat was read from its own descriptor. It reads with
// read(2) on the descriptor itself rather than through an *os.File, whose setup costs a
// listing, which opens every file and reads few, two more system calls per file (fcntl, and
// epoll_ctl for the O_NONBLOCK open). A regular file's read never returns EAGAIN.
//
// A read that ends exactly at the size the descriptor's stat gave, having been asked for
// more, returns io.EOF with its bytes: a regular file's read returns fewer bytes than asked
// only at the end of the file, so the read(2) that would return 0 is not made (one system
// call saved on every whole read). A file that grew since the stat fills the request and is
// read on; one that shrank ends short of the size and is read until read(2) returns 0.
type file struct {
	fd   int // -1 once closed
	stat ports.FileStat
	path string
	off  int64 // bytes read so far
}

func (f *file) Read(p []byte) (int, error) {
	if f.fd < 0 {
		return 0, fs.ErrClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := eintr.Retry(func() (int, error) { return unix.Read(f.fd, p) })
	switch {
	case err != nil:
		return 0, &fs.PathError{Op: "read", Path: f.path, Err: err}
	case n == 0:
		return 0, io.EOF
	}
	f.off += int64(n)
	if n < len(p) && f.off == f.stat.Size {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) Close() error {
	if f.fd < 0 {
		return fs.ErrClosed
	}
	err := unix.Close(f.fd)
	f.fd = -1
	return err
}

func (f *file) Size() int64          { return f.stat.Size }
func (f *file) ModTime() time.Time   { return f.stat.ModTime }
func (f *file) Stat() ports.FileStat { return f.stat }
func (f *file) Path() string         { return f.path }
