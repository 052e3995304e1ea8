package ports

import (
	"io"
	"time"

	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/pathpolicy"
)

// ExportFS resolves and opens regular files beneath one export root of the capsule's workdir.
//
// root is the declared, already validated export root (relative to the workdir, such as
// "out/"). It is resolved at every call: symlinks on the root's own path are followed, but the
// result must stay the canonical workdir or beneath it, else the call fails outside_root.
//
// Beneath the root, class decides symlinks (docs/operator-guide.md,
// "Containment classes and symlinks"): under scoped any symlink on the path is refused
// (symlink_refused); under sealed and advisory symlinks are followed but every step of
// resolution must stay the root or beneath it (outside_root), a loop is symlink_refused, a
// dangling link not_found, and a final target that is the root itself outside_root. No
// concurrent rename or swap may make an implementation open anything outside the root: a race
// may only turn into a refusal.
//
// Every error an ExportFS returns is a *refusal.Refusal with one of the codes not_found,
// outside_root, symlink_refused, not_a_regular_file or io_error; an io_error's message never
// contains a host path.
type ExportFS interface {
	// OpenFile resolves rel beneath root and opens it read-only. The final open never follows a
	// symlink and never blocks, and the file type is decided from the opened descriptor: a
	// directory, FIFO, socket or device is not_a_regular_file. A missing root, a missing
	// component and a non-directory where a directory is needed are not_found.
	OpenFile(root string, rel pathpolicy.RelPath, class containment.Class) (File, error)

	// Walk visits every listable regular file beneath root in bytewise order of its path
	// (relative to the root, "/"-separated, invalid UTF-8 replaced by U+FFFD). Each file is
	// opened once and handed to visit, which must not retain it; Walk closes it afterwards.
	// Walk silently leaves out FIFOs, sockets, devices, files that cannot be opened, every
	// symlink under scoped, and under sealed/advisory symlinks that dangle, loop or leave the
	// root; a symlink to a regular file inside the root is visited under the symlink's own path;
	// a symlink to a directory is never descended. A root that does not exist or is not a
	// directory is visited as empty. A root that is a symlink loop is symlink_refused, a root
	// that resolves outside the workdir outside_root, any other failure on the root io_error.
	// An error returned by visit stops the walk and is returned as is.
	Walk(root string, class containment.Class, visit func(path string, f File) error) error
}

// File is one open regular file. Size and ModTime come from the same descriptor the bytes are
// read from.
type File interface {
	io.Reader
	io.Closer
	// Size is the file's size at open time.
	Size() int64
	// ModTime is the file's modification time at open time.
	ModTime() time.Time
	// Path is the canonical, symlink-free path of the file relative to the export root,
	// "/"-separated. Through a followed symlink it names the target, not the link.
	Path() string
}
