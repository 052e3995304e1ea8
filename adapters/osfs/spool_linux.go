package osfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/internal/eintr"
	"github.com/resplane/resplane/ports"
)

// ErrNoUnnamedFiles is wrapped by Open's error when the directory's filesystem cannot make
// unnamed files (O_TMPFILE): NFS, FAT, and kernels before 3.11, among others.
var ErrNoUnnamedFiles = errors.New("the spool directory's filesystem cannot make unnamed files (O_TMPFILE)")

// Spool keeps the private snapshots of large reads in unnamed files (ports.Spool), so a
// response waiting for a slow client holds a file descriptor and disk-backed page cache instead
// of the process's memory.
//
// A Spool holds one descriptor of the spool directory, opened by OpenSpool with
// O_DIRECTORY|O_NOFOLLOW, and makes every snapshot relative to it with
// openat(".", O_TMPFILE|O_EXCL|O_RDWR), mode 0600. Fill copies a source that has a descriptor
// with copy_file_range(2), which the kernel turns into a reflink (a copy-on-write clone of the
// extents, no data copied) where the filesystem supports it (XFS, btrfs) and into an in-kernel
// copy elsewhere; only a source without a descriptor, or a pair of files the kernel cannot copy
// between, passes through a 64 KiB buffer. Fill writes at explicit offsets, so a snapshot's
// own file offset stays on its first byte until it is read out.
//
// What this guarantees:
//
//   - A snapshot never has a name: O_TMPFILE creates it unlinked, and O_EXCL stops it from
//     ever being linked into a directory. Nothing can open it by a path, and a crash or
//     kill -9 at any instant leaves no file behind; the kernel frees its blocks when its last
//     descriptor is closed.
//   - Its bytes are written only by Fill, from the source the caller hands it: no other
//     writer shares the file, so the bytes read back (hashed, then sent) are the bytes
//     filled.
//   - A snapshot's file offset is moved only by reading Content, which therefore starts at
//     the first byte and stops at the last one filled; it is an *io.LimitedReader over the
//     *os.File, so net/http sends it with sendfile(2).
//   - Every snapshot is a new file, never one an earlier snapshot used: sendfile(2) leaves
//     references to the file's pages on the socket, not copies, and rewriting them for a
//     later snapshot would change a body already counted sent. Closing a snapshot frees its
//     file once the socket lets go of the pages, and the pages are never written again.
//   - Errors are io_error refusals carrying the operating system's text, never a host path.
//   - A directory whose filesystem cannot make unnamed files is found at OpenSpool, by making one
//     (ErrNoUnnamedFiles), not at the first large read.
//
// What it does not guarantee:
//
//   - A process of the same user that may ptrace this one can open a snapshot through
//     /proc/<pid>/fd and change it between hashing and sending, as it could change the
//     process's memory. Marking the process non-dumpable closes that to everyone but root.
//   - A snapshot's bytes may reach the spool directory's disk: the kernel writes dirty pages
//     back after about 30 s (vm.dirty_expire_centisecs) or under memory pressure, and frees
//     them only when the snapshot is closed. They are the export's bytes, on the filesystem
//     the operator chose with --spool-dir.
//   - A full spool filesystem fails the read (io_error: no space left on device); the spool
//     budget (--spool-budget) is what keeps the total below what the filesystem holds.
//   - The directory's descriptor keeps pointing at the directory that was opened; if it is
//     removed later, every Create fails.
//
// A Spool is safe for concurrent use.
type Spool struct {
	fd int
}

var _ ports.Spool = (*Spool)(nil)

// OpenSpool creates dir (mode 0700) when it is missing, opens it without following a final
// symlink, and hands it to OpenSpoolDirectory. The error names the path; it is meant for the
// operator at startup. The caller must Close the Spool.
func OpenSpool(dir string) (*Spool, error) {
	fd, err := createDir(dir, 0o700, unix.O_NOFOLLOW, "the spool directory")
	if err != nil {
		return nil, err
	}
	return OpenSpoolDirectory(os.NewFile(uintptr(fd), dir))
}

// OpenSpoolDirectory takes dir, an opened directory (such as the held session directory's
// descriptor), as the spool, and makes one unnamed file in it to learn that it can; it owns
// dir from then on, closing it on failure. The error names the directory; it is meant for
// the operator at startup.
func OpenSpoolDirectory(dir *os.File) (*Spool, error) {
	fd, err := unix.FcntlInt(dir.Fd(), unix.F_DUPFD_CLOEXEC, 0) // close-on-exec from the start
	name := dir.Name()
	_ = dir.Close()
	if err != nil {
		return nil, fmt.Errorf("taking the spool directory %s: %w", name, err)
	}
	probe, err := openUnnamed(fd)
	if err != nil {
		unix.Close(fd)
		if noUnnamedFiles(err) {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoUnnamedFiles, name, err)
		}
		return nil, fmt.Errorf("making an unnamed file in the spool directory %s: %w", name, err)
	}
	unix.Close(probe)
	return &Spool{fd: fd}, nil
}

// Close releases the directory's descriptor. No Create may be running or follow; snapshots
// already made stay usable.
func (d *Spool) Close() error { return unix.Close(d.fd) }

// Create implements ports.Spool: always a new unnamed file. A file is never reused for a
// later snapshot: sendfile(2) queues references to the file's pages on the socket, not copies,
// so rewriting them for the next snapshot would change bytes of a body already counted sent
// (docs/decisions/0082-the-read-path-budgets-snapshots-and-deadlines.md).
func (d *Spool) Create() (ports.Snapshot, error) {
	fd, err := openUnnamed(d.fd)
	if err != nil {
		return nil, failed(inSpool, "no snapshot file could be made", err)
	}
	return &snapshot{file: os.NewFile(uintptr(fd), "spool snapshot")}, nil
}

// openUnnamed makes a new unnamed file in the directory dirfd: readable and writable by this
// process only, and never linkable into a directory (O_EXCL).
func openUnnamed(dirfd int) (int, error) {
	return eintr.Retry(func() (int, error) {
		return unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	})
}

// snapshot is one unnamed file holding size bytes.
type snapshot struct {
	file   *os.File
	size   int64
	closed bool
}

// Fill implements ports.Snapshot: in the kernel as far as it goes, then through a buffer for
// what is left — a source without a descriptor, a pair of files the kernel cannot copy
// between, or only the read that confirms the source's end.
func (s *snapshot) Fill(src io.Reader, n int64) (int64, error) {
	if s.closed {
		return 0, failed(inSpool, "the snapshot was closed", os.ErrClosed)
	}
	copied, err := s.copyInKernel(src, n)
	if err == nil && copied < n {
		var more int64
		more, err = s.copyThrough(src, n-copied)
		copied += more
	}
	return copied, err
}

// copyInKernel copies up to n bytes from src's descriptor, at its offset, with
// copy_file_range(2). It copies nothing, and returns no error, when src has no descriptor or
// the kernel cannot copy between the two files; it stops at the source's end.
func (s *snapshot) copyInKernel(src io.Reader, n int64) (int64, error) {
	sc, ok := src.(syscall.Conn)
	if !ok {
		return 0, nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, nil
	}
	dst := int(s.file.Fd())
	var copied int64
	var copyErr error
	err = raw.Control(func(fd uintptr) {
		for copied < n {
			off := s.size
			m, err := eintr.Retry(func() (int, error) {
				return unix.CopyFileRange(int(fd), nil, dst, &off, int(min(n-copied, maxCopy)), 0)
			})
			switch {
			case err != nil:
				if copied > 0 || !cannotCopy(err) {
					copyErr = failed(inSpool, "the snapshot could not be filled", err)
				}
				return
			case m == 0:
				return
			}
			copied += int64(m)
			s.size += int64(m)
		}
	})
	if err != nil {
		return copied, failed(inSpool, "the file's descriptor could not be used", err)
	}
	return copied, copyErr
}

// maxCopy is the most one copy_file_range call is asked for.
const maxCopy = 1 << 30

// cannotCopy reports whether copy_file_range failed because the kernel cannot copy between
// these two files (different filesystems, an unsupported filesystem, a seccomp filter), rather
// than because of the files' contents or space.
func cannotCopy(err error) bool {
	switch err {
	case unix.EXDEV, unix.EOPNOTSUPP, unix.ENOSYS, unix.EINVAL, unix.EPERM:
		return true
	}
	return false
}

// copyThrough copies up to n bytes from src through a pooled buffer, writing at the
// snapshot's end. An error reading src is returned as src returned it.
func (s *snapshot) copyThrough(src io.Reader, n int64) (int64, error) {
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	var copied int64
	for copied < n {
		m, err := src.Read((*buf)[:min(int64(len(*buf)), n-copied)])
		if m > 0 {
			if _, werr := s.file.WriteAt((*buf)[:m], s.size); werr != nil {
				return copied, failed(inSpool, "the snapshot could not be written", werr)
			}
			copied += int64(m)
			s.size += int64(m)
		}
		switch {
		case err == io.EOF:
			return copied, nil
		case err != nil:
			return copied, err
		}
	}
	return copied, nil
}

// buffers are copyThrough's buffers.
var buffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// ReadAt implements ports.Snapshot: the filled bytes, and io.EOF past them (a file only ever
// holds its own snapshot, but the port promises nothing past the bytes filled).
func (s *snapshot) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	if rest := s.size - off; int64(len(p)) > rest {
		n, err := s.file.ReadAt(p[:rest], off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return s.file.ReadAt(p, off)
}

// Content implements ports.Snapshot: the file from its first byte, limited to the filled
// bytes. Only Content moves the file's offset; Fill and ReadAt use explicit offsets.
func (s *snapshot) Content() io.Reader {
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return errReader{failed(inSpool, "the snapshot could not be rewound", err)}
	}
	return &io.LimitedReader{R: s.file, N: s.size}
}

// errReader fails every Read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// Close implements ports.Snapshot: the file is closed, and the kernel frees it once the
// socket no longer holds its pages.
func (s *snapshot) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return s.file.Close()
}
