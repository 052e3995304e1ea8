package osfs

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/internal/eintr"
	"github.com/resplane/resplane/domain/resolve"
)

// dirFD is a resolve.Dir over one directory descriptor. Every method acts relative to the
// descriptor and never follows a symlink.
type dirFD struct {
	fd int
	// pathOnly marks an O_PATH descriptor: it anchors lookups but cannot be read, so
	// Entries opens the directory again for reading.
	pathOnly bool
}

// Lookup opens name with O_PATH|O_NOFOLLOW, which opens nothing for reading (a FIFO or
// device is not touched) and, on a symlink, yields the link itself, whose text is then read
// from that same descriptor.
func (d *dirFD) Lookup(name string) (resolve.Node, error) {
	fd, err := eintr.Retry(func() (int, error) {
		return unix.Openat(d.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return resolve.Node{}, refuse(inExport, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return resolve.Node{}, refuse(inExport, err)
	}
	switch kind := kindOfMode(st.Mode); kind {
	case resolve.Directory:
		return resolve.Node{Kind: kind, Dir: &dirFD{fd: fd, pathOnly: true}}, nil
	case resolve.Symlink:
		target, err := readlink(fd)
		unix.Close(fd)
		if err != nil {
			return resolve.Node{}, refuse(inExport, err)
		}
		return resolve.Node{Kind: kind, Target: target}, nil
	case resolve.Regular:
		unix.Close(fd)
		return resolve.Node{Kind: kind, ID: idOf(&st)}, nil
	default:
		unix.Close(fd)
		return resolve.Node{Kind: kind}, nil
	}
}

// Entries reads the directory with getdents64, taking each entry's kind from d_type (and
// from fstatat without following, on a filesystem that does not fill d_type in) and its
// inode from d_ino, on the device one fstat of the directory gives (none when it fails).
func (d *dirFD) Entries() ([]resolve.Entry, error) {
	fd := d.fd
	if d.pathOnly {
		rfd, err := eintr.Retry(func() (int, error) {
			return unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			return nil, refuse(inExport, err)
		}
		defer unix.Close(rfd)
		fd = rfd
	}
	var device uint64
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil {
		device = uint64(st.Dev)
	}
	var entries []resolve.Entry
	pooled := direntBuffers.Get().(*[]byte)
	defer direntBuffers.Put(pooled)
	buf := *pooled
	for {
		n, err := eintr.Retry(func() (int, error) { return unix.Getdents(fd, buf) })
		if err != nil {
			return nil, refuse(inExport, err)
		}
		if n <= 0 {
			return entries, nil
		}
		entries = appendDirents(entries, fd, device, buf[:n])
	}
}

// direntBuffers recycles the buffers directory entries are read into, so a listing of many
// directories does not allocate one per directory.
var direntBuffers = sync.Pool{New: func() any {
	buf := make([]byte, 32<<10)
	return &buf
}}

// The layout of struct linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1),
// then the NUL-terminated name, padded to d_reclen.
const (
	direntIno    = 0
	direntReclen = 16
	direntType   = 18
	direntName   = 19
)

// appendDirents appends the entries of buf, the records one getdents64 call filled in from
// dirfd, a directory on device (zero: unknown, and no entry then names its inode). The names
// are cut from one string copied from buf, so that a batch costs one allocation for its
// names and at most one to grow entries, not one per name.
func appendDirents(entries []resolve.Entry, dirfd int, device uint64, buf []byte) []resolve.Entry {
	records := 0
	for rest := buf; len(rest) >= direntName; records++ {
		reclen := int(binary.NativeEndian.Uint16(rest[direntReclen:]))
		if reclen < direntName || reclen > len(rest) {
			break
		}
		rest = rest[reclen:]
	}
	entries = slices.Grow(entries, records)
	names := string(buf)
	for off := 0; records > 0; records-- {
		reclen := int(binary.NativeEndian.Uint16(buf[off+direntReclen:]))
		name := names[off+direntName : off+reclen]
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		typ := buf[off+direntType]
		var inode resolve.Inode
		if device != 0 {
			inode = resolve.Inode{Device: device, Number: binary.NativeEndian.Uint64(buf[off+direntIno:])}
		}
		off += reclen
		if name == "." || name == ".." {
			continue
		}
		kind := kindOfDirent(typ)
		if kind == 0 {
			st, err := lstatAt(dirfd, name)
			if err != nil {
				continue // vanished since it was read
			}
			kind = kindOfMode(st.Mode)
		}
		entries = append(entries, resolve.Entry{Name: name, Kind: kind, Inode: inode})
	}
	return entries
}

// openDirAt opens the directory name in dirfd, for listing and as an *at anchor, never
// through a symlink: a symlink, or anything else that is not a directory, fails (a symlink
// with ENOTDIR or ELOOP).
func openDirAt(dirfd int, name string) (int, error) {
	return eintr.Retry(func() (int, error) { return unix.Openat(dirfd, name, dirFlags, 0) })
}

// dirFlags opens a directory for reading its entries and for use as an *at anchor, never
// through a symlink.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// OpenDir opens name for listing with O_RDONLY|O_DIRECTORY|O_NOFOLLOW: a symlink, or
// anything else that is not a directory, fails.
func (d *dirFD) OpenDir(name string) (resolve.Dir, error) {
	fd, err := openDirAt(d.fd, name)
	if err != nil {
		return nil, refuse(inExport, err)
	}
	return &dirFD{fd: fd}, nil
}

// Close closes the descriptor.
func (d *dirFD) Close() error { return unix.Close(d.fd) }

// createDir creates the directory at path (mode perm, with its parents) when it is missing and
// opens it with O_RDONLY|O_DIRECTORY and flags, by name: path is the operator's choice. The
// error names what and the path; it is meant for the operator.
func createDir(path string, perm os.FileMode, flags int, what string) (int, error) {
	if err := os.MkdirAll(path, perm); err != nil {
		return -1, fmt.Errorf("creating %s: %w", what, err)
	}
	fd, err := eintr.Retry(func() (int, error) { return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|flags, 0) })
	if err != nil {
		return -1, fmt.Errorf("opening %s %s: %w", what, path, err)
	}
	return fd, nil
}

// lstatAt stats name in dir without following a symlink.
func lstatAt(dir int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := eintr.RetryErr(func() error { return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	return st, err
}

// unlinkAt removes name from dir, as a cleanup: a failure leaves at worst a temp file behind,
// which nothing reports.
func unlinkAt(dir int, name string) {
	_ = eintr.RetryErr(func() error { return unix.Unlinkat(dir, name, 0) })
}

// oneName reports whether name is one path component: not empty, "." or "..", and without "/"
// or NUL.
func oneName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// readlink reads the text of the symlink fd was opened on (O_PATH|O_NOFOLLOW).
func readlink(fd int) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := eintr.Retry(func() (int, error) { return unix.Readlinkat(fd, "", buf) })
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

func kindOfMode(mode uint32) resolve.Kind {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return resolve.Directory
	case unix.S_IFREG:
		return resolve.Regular
	case unix.S_IFLNK:
		return resolve.Symlink
	}
	return resolve.Other
}

// kindOfDirent maps d_type; 0 means the filesystem did not say (DT_UNKNOWN).
func kindOfDirent(typ uint8) resolve.Kind {
	switch typ {
	case unix.DT_UNKNOWN:
		return 0
	case unix.DT_DIR:
		return resolve.Directory
	case unix.DT_REG:
		return resolve.Regular
	case unix.DT_LNK:
		return resolve.Symlink
	}
	return resolve.Other
}
