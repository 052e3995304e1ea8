package osfs

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/domain/refusal"
)

// A place is the role of the directory a system call failed in. It decides what an errno
// means there and how an io_error says what failed.
type place int

const (
	// inExport is an export root, read for a client: docs/operator-guide.md, "Containment
	// classes and symlinks", gives the codes.
	inExport place = iota
	// inTarget is the operator's target directory, which a pull or `files get` writes: what
	// stands where a path needs a directory or a regular file is unsafe_path.
	inTarget
	// inInbox is peer-in/, where a fetched file is stored: every failure is io_error.
	inInbox
	// inSpool is the spool directory, where the snapshots of large reads are made: every
	// failure is io_error.
	inSpool
)

// refuse is the refusal for a system call's failure at a place: the errno's decision there,
// else an io_error carrying the operating system's description of the errno (no number, no
// path). The error is kept as its cause, so that a listing can tell permission denied
// (errors.Is fs.ErrPermission), which it leaves out, from a descriptor shortage, which it
// refuses.
func refuse(at place, err error) *refusal.Refusal { return failed(at, "", err) }

// failed is refuse for a failed step the message names (what), or for a failure that has no
// errno (err nil, or another error).
func failed(at place, what string, err error) *refusal.Refusal {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return at.ioError(what).Wrapping(err)
	}
	if r := decision(at, errno); r != nil {
		return r.Wrapping(err)
	}
	if what != "" {
		what += ": "
	}
	return at.ioError(what + errno.Error()).Wrapping(err)
}

// decision is the package's one map from an errno to the refusal it means at a place; nil
// when it means no decision there, only a failure.
func decision(at place, errno unix.Errno) *refusal.Refusal {
	switch at {
	case inExport:
		switch errno {
		case unix.ENOENT, unix.ENOTDIR:
			return refusal.New(refusal.NotFound)
		case unix.ELOOP:
			return refusal.New(refusal.SymlinkRefused)
		case unix.ENXIO, unix.ENODEV, unix.EOPNOTSUPP:
			return refusal.New(refusal.NotARegularFile)
		case unix.EXDEV:
			return refusal.New(refusal.OutsideRoot)
		}
	case inTarget:
		switch errno {
		case unix.ELOOP:
			return unsafePath("A symlink is on the way to this path in the target directory; nothing is written through a symlink.")
		case unix.ENOTDIR:
			return unsafePath("A file that is not a directory is on the way to this path in the target directory.")
		case unix.EISDIR, unix.ENOTEMPTY:
			return unsafePath("The path names a directory in the target directory; it is never replaced.")
		case unix.ENAMETOOLONG, unix.EINVAL, unix.EILSEQ:
			return unsafePath("The local filesystem refuses this name: " + errno.Error() + ".")
		}
	}
	return nil
}

// ioError is the io_error refusal of a failure at the place: its sentence, then detail when
// there is one.
func (at place) ioError(detail string) *refusal.Refusal {
	var sentence string
	switch at {
	case inTarget:
		sentence = "The local file could not be used"
	case inInbox:
		sentence = "The fetched file could not be stored"
	default:
		return refusal.IO(detail)
	}
	if detail != "" {
		sentence += ": " + detail
	}
	return refusal.WithMessage(refusal.IOError, sentence+".")
}

func unsafePath(message string) *refusal.Refusal {
	return refusal.WithMessage(refusal.UnsafePath, message)
}

// noUnnamedFiles reports whether an O_TMPFILE open failed because the filesystem or kernel
// cannot make unnamed files, rather than for a reason of the directory's own.
func noUnnamedFiles(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL)
}
