package ports

import (
	"context"
	"io"
	"time"

	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/resolve"
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
	// (relative to the root, "/"-separated, invalid UTF-8 replaced by U+FFFD), as visit says
	// (see Visitor): each file is first offered to visit.Known, which may read its FileStat
	// without opening it; a file Known does not know is opened once and handed to visit.Visit.
	// Walk silently leaves out FIFOs, sockets, devices, every symlink under scoped, and under
	// sealed/advisory symlinks that dangle, loop or leave the root; a symlink to a regular file
	// inside the root is visited under the symlink's own path; a symlink to a directory is never
	// descended. A file or directory that vanished, that is no longer a regular file, or that
	// permission is denied on, is left out too; any other failure (a descriptor shortage, an
	// I/O error) is io_error, so a walk that returns nil visited every listable file. A
	// directory nested more than resolve.MaxDepth levels beneath the root, more than
	// resolve.MaxEntries directory entries, and ctx ending before the walk is done are io_error
	// as well (docs/http-api.md, "The listing").
	//
	// A root that does not exist or is not a directory is visited as empty. A root that is a
	// symlink loop is symlink_refused, a root that resolves outside the workdir outside_root,
	// any other failure on the root io_error. An error returned by visit.Visit stops the walk
	// and is returned as is.
	Walk(ctx context.Context, root string, class containment.Class, visit Visitor) error
}

// Visitor is what ExportFS.Walk does with each listable regular file, in the walk's order.
type Visitor struct {
	// Known, when set, is asked first about each file, with its reported path (valid only
	// during the call: Known copies it to keep it), the inode its directory entry names (its
	// Device and Number are a FileStat's Device and Inode when nothing is mounted on the
	// name; the zero resolve.Inode through a followed symlink, or when the implementation
	// cannot say), and stat, which reads the file's FileStat
	// without opening it (docs/operator-guide.md, "Listing cost"): the stat of the inode
	// linked at the file's name, taken relative to the directory the walk holds and never
	// following a symlink there; through a followed symlink, of the inode the link resolved
	// to. That is the FileStat an open of the file at that instant would give. stat may be
	// called during Known only; it reports false when the file could not be stated, and the
	// walk then judges that failure as it judges a failed open (the file is left out, or the
	// walk fails), whatever Known answers. Known returns true when it lists the file from its
	// stat alone: the file is then neither opened nor visited. Known may be asked again about
	// the same path when the file was replaced before it could be opened. When Known is nil
	// every file is opened.
	Known func(path []byte, inode resolve.Inode, stat func() (FileStat, bool)) bool
	// Visit is handed each file Known did not know, opened; it must not retain it, and Walk
	// closes it afterwards. Its Stat, Size and ModTime come from the opened descriptor, and
	// may differ from what stat gave Known if the file changed in between.
	Visit func(path string, f File) error
}

// File is one open regular file. Size, ModTime and Stat come from the same descriptor the
// bytes are read from. A File is not safe for concurrent use.
type File interface {
	io.Reader
	io.Closer
	// Size is the file's size at open time.
	Size() int64
	// ModTime is the file's modification time at open time.
	ModTime() time.Time
	// Stat is what identifies this version of the file, taken from the descriptor when it was
	// opened, with the same Size and ModTime.
	Stat() FileStat
	// Path is the canonical, symlink-free path of the file relative to the export root,
	// "/"-separated. Through a followed symlink it names the target, not the link.
	Path() string
}

// FileStat is what a file's descriptor says about the inode it is open on, to the nanosecond.
// A listing reuses an earlier hash of a file only when the file's FileStat is the one the
// hash was taken with, and the file was already unchanged long enough before that hash
// (docs/operator-guide.md, "Listing cost"). So an implementation must give a file that
// changed in any way since an earlier open a different FileStat, as the kernel does: any
// write, truncation or attribute change sets the change time, which no caller can set back.
type FileStat struct {
	// Device and Inode identify the inode; a file replaced by another one (a rename over it)
	// has another inode.
	Device, Inode uint64
	Size          int64
	// ModTime is the modification time, which a writer may set to anything (touch -d).
	ModTime time.Time
	// ChangeTime is the inode's change time: set by the kernel at every change to the file's
	// bytes or attributes, never by a caller.
	ChangeTime time.Time
}
