package osfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/internal/eintr"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
)

// Mirror is the operator's local side of `resplane files pull`: the directory a pull mirrors
// into (ports.LocalMirror). See docs/operator-guide.md, "Pulling outputs". The landings of
// `resplane files get` (CreateAt, WriteOnCommit) share its guarantees for the one file they
// land.
//
// What it guarantees:
//
//   - A Mirror holds one descriptor of its directory, and every path beneath it is resolved
//     one component at a time relative to a descriptor, each directory opened with
//     O_NOFOLLOW|O_DIRECTORY, never by a path string. A symlink (or a file) on the way is
//     refused, unsafe_path, so a symlink planted in the directory can never redirect a read,
//     a write or a deletion outside it.
//   - A download is written into a new temp file (.resplane-<16 random hex>.part, created
//     O_CREAT|O_EXCL|O_NOFOLLOW) in the directory of its destination, flushed, and renamed
//     over the destination in one step through the same directory descriptor: a reader of
//     the destination sees the earlier file or the whole new one, never a mix, and a discarded
//     or failed download leaves no temp file.
//   - A destination that exists as anything but a regular file (a symlink, a directory, a
//     FIFO) is never replaced or written through: unsafe_path. A name the filesystem refuses
//     (too long, invalid) is unsafe_path too.
//   - Files lists and Delete removes regular files only; symlinks are neither followed nor
//     removed, and directories are left in place. Files holds at most MirrorDepth+1
//     descriptors however deep the directory is, and refuses a tree nested deeper than that
//     rather than list part of it.
//   - Refusals name no host path; an io_error carries the operating system's description of
//     the failure.
//
// What it does not guarantee:
//
//   - The directory given to OpenMirror, and the path to it, are trusted: symlinks there are
//     followed, as for any path the operator types. So is the destination of CreateAt.
//   - Another process changing the directory while a pull runs can make a comparison stale
//     or a step fail; it cannot make a write land outside the directory.
//   - The temp file is flushed before the rename, the directory is not: after a power loss
//     the destination holds its earlier or its new version, whole.
//   - A temp file survives a crash (kill -9) of the pull that made it; a later pull with
//     --delete removes it, as it removes every file the listing does not have.
//
// A Mirror is safe for concurrent use.
type Mirror struct {
	fd int
}

var _ ports.LocalMirror = (*Mirror)(nil)

// OpenMirror creates path (and its parents) when it is missing and opens it. The error names
// the path; it is meant for the operator.
func OpenMirror(path string) (*Mirror, error) {
	fd, err := createDir(path, 0o777, 0, "the target directory")
	if err != nil {
		return nil, err
	}
	return &Mirror{fd: fd}, nil
}

// Close releases the directory's descriptor. No call may be running or follow.
func (d *Mirror) Close() error { return unix.Close(d.fd) }

// errMissing reports a directory on the way that does not exist (and was not to be created).
var errMissing = errors.New("missing")

// parent opens the directory that holds rel's last component, walking the components before
// it from d's descriptor with O_NOFOLLOW. With create, a missing directory is made (and a
// concurrent maker tolerated); without, it is errMissing. It returns the descriptor, which
// the caller closes, and the last component.
func (d *Mirror) parent(rel pathpolicy.RelPath, create bool) (int, string, error) {
	components := rel.Components()
	dir, err := eintr.Retry(func() (int, error) { return unix.Openat(d.fd, ".", dirFlags, 0) })
	if err != nil {
		return -1, "", refuse(inTarget, err)
	}
	for _, name := range components[:len(components)-1] {
		next, err := openDirAt(dir, name)
		if errors.Is(err, unix.ENOENT) && create {
			if err = eintr.RetryErr(func() error { return unix.Mkdirat(dir, name, 0o777) }); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openDirAt(dir, name)
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
			return -1, "", refuse(inTarget, err)
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

// regularAt stats name in dir without following a symlink: missing when nothing is there, a
// refusal when something other than a regular file is.
func regularAt(dir int, name string) (st unix.Stat_t, missing bool, err error) {
	st, err = lstatAt(dir, name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return st, true, nil
	case err != nil:
		return st, false, refuse(inTarget, err)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return st, false, notRegular(st.Mode)
	}
	return st, false, nil
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
func (d *Mirror) Compare(rel pathpolicy.RelPath, size int64, sum string) (ports.LocalState, error) {
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
	fd, err := eintr.Retry(func() (int, error) {
		return unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return 0, refuse(inTarget, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	hash := sha256.New()
	if _, err := io.Copy(hash, f); err != nil {
		return 0, refuse(inTarget, err)
	}
	if hex.EncodeToString(hash.Sum(nil)) != sum {
		return ports.LocalDifferent, nil
	}
	return ports.LocalSame, nil
}

// Stage makes the directories on the way to rel and a temp file beside it.
func (d *Mirror) Stage(rel pathpolicy.RelPath) (ports.Landing, error) {
	dir, name, err := d.parent(rel, true)
	if err != nil {
		return nil, err
	}
	return stage(dir, name)
}

// MirrorDepth is the most directory levels Files descends beneath the directory: as deep as a
// service lists (resolve.MaxDepth), so everything a pull can have written is seen.
const MirrorDepth = resolve.MaxDepth

// Files lists every regular file beneath the directory. The walk is iterative and holds one
// descriptor per level it is in, at most MirrorDepth+1; a directory nested deeper refuses the
// walk (unsafe_path), so a caller deletes nothing on a partial view. Entry types come from
// fstatat without following, so a symlink is neither listed nor descended.
func (d *Mirror) Files() ([]string, error) {
	root, err := eintr.Retry(func() (int, error) { return unix.Openat(d.fd, ".", dirFlags, 0) })
	if err != nil {
		return nil, refuse(inTarget, err)
	}
	var files []string
	w := &walker{}
	defer w.close()
	if err := w.push(root, ""); err != nil {
		return nil, err
	}
	for len(w.stack) > 0 {
		top := &w.stack[len(w.stack)-1]
		if len(top.names) == 0 {
			w.pop()
			continue
		}
		name := top.names[0]
		top.names = top.names[1:]
		fd, prefix := int(top.dir.Fd()), top.prefix
		st, err := lstatAt(fd, name)
		if errors.Is(err, unix.ENOENT) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, refuse(inTarget, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			files = append(files, prefix+name)
		case unix.S_IFDIR:
			if len(w.stack) > MirrorDepth {
				return nil, refusal.WithMessage(refusal.UnsafePath, "The directory has directories nested more than "+
					strconv.Itoa(MirrorDepth)+" levels deep, deeper than a service lists; nothing was deleted.")
			}
			sub, err := openDirAt(fd, name)
			if err != nil {
				return nil, refuse(inTarget, err)
			}
			if err := w.push(sub, prefix+name+"/"); err != nil {
				return nil, err
			}
		}
	}
	return files, nil
}

// walker is Files' stack: the directories it is in, each open, with the names it has yet to
// visit there.
type walker struct {
	stack []walkLevel
}

type walkLevel struct {
	dir    *os.File
	prefix string
	names  []string
}

// push reads the names of the directory fd (which the walker now owns) and enters it.
func (w *walker) push(fd int, prefix string) error {
	dir := os.NewFile(uintptr(fd), prefix)
	names, err := dir.Readdirnames(-1)
	if err != nil {
		dir.Close()
		return refuse(inTarget, err)
	}
	w.stack = append(w.stack, walkLevel{dir: dir, prefix: prefix, names: names})
	return nil
}

// pop leaves the innermost directory, closing it.
func (w *walker) pop() {
	w.stack[len(w.stack)-1].dir.Close()
	w.stack = w.stack[:len(w.stack)-1]
}

// close leaves every directory the walk is still in.
func (w *walker) close() {
	for len(w.stack) > 0 {
		w.pop()
	}
}

// Delete removes the regular file at rel.
func (d *Mirror) Delete(rel pathpolicy.RelPath) error {
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
	if err := eintr.RetryErr(func() error { return unix.Unlinkat(dir, name, 0) }); err != nil && !errors.Is(err, unix.ENOENT) {
		return refuse(inTarget, err)
	}
	return nil
}
