// Package memfs is an in-memory ports.ExportFS for tests: component tests run the whole
// application on it, and the ports/porttest contract suite holds it to exactly the answers
// adapters/osfs gives on a real filesystem.
//
// It resolves through domain/resolve, the same algorithm osfs uses, over a tree of
// directories, regular files (bytes, an inode number, a modification and a change time),
// symlinks (relative, or absolute
// against the fake absolute workdir path the FS is made with), FIFOs, sockets, device nodes
// and entries without permissions (mode 000: a file that cannot be read, a directory that
// cannot be searched or listed). It models the Linux behaviour osfs relies on: a name longer
// than 255 bytes is io_error "file name too long", and permission failures are io_error
// "permission denied". A walk states a file as fstatat(AT_SYMLINK_NOFOLLOW) does,
// needing no permission on the file itself, before it opens it.
//
// Leases is its ports.ReadLeases, held to the same contract suite as osfs's: a lease is
// broken by every Rewrite and OpenForWriting of its file, and refused while an
// OpenForWriting holds the file; WriteMapped changes a file's bytes as a write through an
// already-dirty shared mapping does, moving no time. Each lease is watched: its Changes move
// at the next Sync after any change an inotify watch on the file would report (every
// mutator's change to a file or its names but WriteMapped's), and Overflow moves them all as
// an overflowed event queue does.
//
// The mutators (Mkdir, WriteFile, Rewrite, SetTimes, Rename, WriteMapped, OpenForWriting,
// Symlink, MakeFIFO, MakeSocket, MakeDevice, Deny, Remove) let a test change the tree while
// the FS is in use;
// every method is safe for concurrent use. WriteFile replaces a file with a new one (a new
// inode), as a rename into place does; Rewrite changes a file in place (the same inode) with
// the timestamps the test names, so a test controls exactly what a file's ports.FileStat
// says. Either way a file already opened keeps reading the bytes it was opened with.
package memfs

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
)

// nameMax is Linux's NAME_MAX: the longest name one directory entry can have.
const nameMax = 255

type kind uint8

const (
	kindDir kind = iota
	kindFile
	kindSymlink
	kindFIFO
	kindSocket
	kindDevice
)

type node struct {
	kind     kind
	children map[string]*node // kindDir
	data     []byte           // kindFile; replaced, never modified, by Rewrite
	inode    uint64           // kindFile
	mtime    time.Time        // kindFile
	ctime    time.Time        // kindFile
	target   string           // kindSymlink
	denied   bool             // mode 000
	// writers counts the opens for writing OpenForWriting holds; breaks counts every open
	// for writing and every Rewrite, each of which breaks the file's read leases (Leases).
	writers, breaks int // kindFile
	// changes counts every change an inotify watch on the file would report: a Rewrite,
	// SetTimes, Deny, a rename of it, and the loss of a name (Leases' Changes).
	changes uint64 // kindFile
}

// device is the device number every file of an FS reports.
const device = 1

// FS is an in-memory workdir. Its zero value is not usable; call New.
type FS struct {
	mu        sync.RWMutex
	workdir   string
	top       *node
	lastInode uint64
	// synced holds each leased file's changes as of the latest Leases.Sync, and epoch the
	// overflows synced; overflows counts those since.
	synced           map[*node]uint64
	epoch, overflows uint64
}

var _ ports.ExportFS = (*FS)(nil)

// New returns an empty workdir that pretends to live at workdir, an absolute, clean path such
// as "/srv/capsule": absolute symlink targets are read against it.
func New(workdir string) *FS {
	return &FS{workdir: workdir, top: &node{kind: kindDir, children: map[string]*node{}}, synced: map[*node]uint64{}}
}

// OpenFile implements ports.ExportFS.
func (m *FS) OpenFile(root string, rel pathpolicy.RelPath, class containment.Class) (ports.File, error) {
	return resolve.RetryReplaced(func() (ports.File, error) {
		return resolve.Open(m.dir(m.top), m.workdir, root, rel.Components(), class.FollowsSymlinks(), m.open)
	})
}

// Walk implements ports.ExportFS. A file is stated (stat) before it is opened (open), and
// opened only when visit.Known does not know it by that stat.
func (m *FS) Walk(ctx context.Context, root string, class containment.Class, visit ports.Visitor) error {
	return resolve.Walk(ctx, m.dir(m.top), m.workdir, root, class.FollowsSymlinks(), resolve.Leaves[ports.FileStat, ports.File]{
		Stat: m.stat, Known: visit.Known, Open: m.open, Visit: visit.Visit,
	})
}

// open opens the final component of a resolution as a real open(O_RDONLY|O_NOFOLLOW) would
// answer: a symlink is refused, a denied file is permission denied, anything but a regular
// file is not_a_regular_file, and a node other than the one resolved is refused.
func (m *FS) open(r *resolve.Result) (ports.File, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.leaf(r, true)
	if err != nil {
		return nil, err
	}
	return &file{data: n.data, stat: n.stat(), path: strings.Join(r.Path, "/"), n: n}, nil
}

// stat reads the final component of a resolution as fstatat(AT_SYMLINK_NOFOLLOW) would: it
// needs no permission on the file itself, and anything but a regular file (a symlink
// included) is not_a_regular_file.
func (m *FS) stat(r *resolve.Result) (ports.FileStat, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.leaf(r, false)
	if err != nil {
		return ports.FileStat{}, err
	}
	return n.stat(), nil
}

// leaf finds the regular file a resolution ended on, through its parent by its name, failing
// as the system call would: opening when it is opened for reading, else stated. The caller
// holds m.mu.
func (m *FS) leaf(r *resolve.Result, opening bool) (*node, error) {
	parent := r.Parent.(*dir).n
	if parent.denied {
		return nil, denied()
	}
	n := parent.children[r.Name]
	switch {
	case n == nil:
		return nil, refusal.New(refusal.NotFound)
	case opening && n.kind == kindSymlink:
		return nil, refusal.New(refusal.SymlinkRefused)
	case opening && n.denied:
		return nil, denied()
	case n.kind != kindFile:
		return nil, refusal.New(refusal.NotARegularFile)
	case r.Node.ID != nil && r.Node.ID != n:
		return nil, resolve.Replaced()
	}
	return n, nil
}

// stat is what a descriptor of the regular file n would say.
func (n *node) stat() ports.FileStat {
	return ports.FileStat{Device: device, Inode: n.inode, Size: int64(len(n.data)), ModTime: n.mtime, ChangeTime: n.ctime}
}

// denied is permission denied as osfs answers it: io_error, keeping the errno as its cause.
func denied() error { return refusal.IO(syscall.EACCES.Error()).Wrapping(syscall.EACCES) }

// dir is a resolve.Dir over one directory node.
type dir struct {
	fs *FS
	n  *node
}

func (m *FS) dir(n *node) *dir { return &dir{fs: m, n: n} }

// child finds name in d the way a lookup in a real directory fails: no search permission
// first, then a name too long, then a missing name.
func (d *dir) child(name string) (*node, error) {
	if d.n.denied {
		return nil, denied()
	}
	if len(name) > nameMax {
		return nil, refusal.IO(syscall.ENAMETOOLONG.Error())
	}
	n, ok := d.n.children[name]
	if !ok {
		return nil, refusal.New(refusal.NotFound)
	}
	return n, nil
}

// Lookup implements resolve.Dir.
func (d *dir) Lookup(name string) (resolve.Node, error) {
	d.fs.mu.RLock()
	defer d.fs.mu.RUnlock()
	n, err := d.child(name)
	if err != nil {
		return resolve.Node{}, err
	}
	switch n.kind {
	case kindDir:
		return resolve.Node{Kind: resolve.Directory, Dir: d.fs.dir(n)}, nil
	case kindSymlink:
		return resolve.Node{Kind: resolve.Symlink, Target: n.target}, nil
	case kindFile:
		return resolve.Node{Kind: resolve.Regular, ID: n}, nil
	}
	return resolve.Node{Kind: resolve.Other}, nil
}

// Entries implements resolve.Dir.
func (d *dir) Entries() ([]resolve.Entry, error) {
	d.fs.mu.RLock()
	defer d.fs.mu.RUnlock()
	if d.n.denied {
		return nil, denied()
	}
	entries := make([]resolve.Entry, 0, len(d.n.children))
	for name, n := range d.n.children {
		e := resolve.Entry{Name: name, Kind: resolve.Other}
		switch n.kind {
		case kindDir:
			e.Kind = resolve.Directory
		case kindFile:
			e.Kind, e.Inode = resolve.Regular, resolve.Inode{Device: device, Number: n.inode}
		case kindSymlink:
			e.Kind = resolve.Symlink
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// OpenDir implements resolve.Dir: like open(O_RDONLY|O_DIRECTORY|O_NOFOLLOW), it refuses
// anything but a directory and a directory that cannot be read.
func (d *dir) OpenDir(name string) (resolve.Dir, error) {
	d.fs.mu.RLock()
	defer d.fs.mu.RUnlock()
	n, err := d.child(name)
	switch {
	case err != nil:
		return nil, err
	case n.kind != kindDir:
		return nil, refusal.New(refusal.NotFound)
	case n.denied:
		return nil, denied()
	}
	return d.fs.dir(n), nil
}

// Close implements resolve.Dir; there is nothing to release.
func (d *dir) Close() error { return nil }

// file is an opened regular file: a snapshot of the node's bytes and stat at open time.
type file struct {
	data   []byte
	off    int
	closed bool
	stat   ports.FileStat
	path   string
	n      *node // what the file is open on, for Leases
}

func (f *file) Read(p []byte) (int, error) {
	if f.closed {
		return 0, fs.ErrClosed
	}
	if f.off >= len(f.data) {
		return 0, io.EOF
	}
	n := copy(p, f.data[f.off:])
	f.off += n
	return n, nil
}

func (f *file) Close() error {
	if f.closed {
		return fs.ErrClosed
	}
	f.closed = true
	return nil
}

func (f *file) Size() int64          { return f.stat.Size }
func (f *file) ModTime() time.Time   { return f.stat.ModTime }
func (f *file) Stat() ports.FileStat { return f.stat }
func (f *file) Path() string         { return f.path }

// Mkdir makes the directory p (relative to the workdir, "/"-separated) and any missing
// parents. An existing directory is kept as it is; anything else at p is replaced.
func (m *FS) Mkdir(p string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, name, err := m.parent(p)
	if err != nil {
		return err
	}
	if n, ok := parent.children[name]; ok && n.kind == kindDir {
		return nil
	}
	parent.children[name] = &node{kind: kindDir, children: map[string]*node{}}
	return nil
}

// WriteFile puts a new regular file (a new inode) holding data at p, replacing whatever was
// there, and makes any missing parents. Its change time is its modification time.
func (m *FS) WriteFile(p string, data []byte, mtime time.Time) error {
	m.mu.Lock()
	m.lastInode++
	n := &node{kind: kindFile, data: append([]byte(nil), data...), inode: m.lastInode, mtime: mtime, ctime: mtime}
	m.mu.Unlock()
	return m.put(p, n)
}

// Rewrite changes the regular file at p in place, as a write through an open descriptor does:
// the same inode now holds data, with the modification and change times given. A kernel sets
// the change time itself at every change; the test names it, so it can also give a rewrite
// the same times as before, as two rewrites within one timestamp tick get.
func (m *FS) Rewrite(p string, data []byte, mtime, ctime time.Time) error {
	return m.update("rewrite", p, func(_ *node, _ string, n *node) error {
		if n.kind != kindFile {
			return fmt.Errorf("memfs: rewrite %s: not a regular file", p)
		}
		n.data, n.mtime, n.ctime = append([]byte(nil), data...), mtime, ctime
		n.breaks++
		n.changes++
		return nil
	})
}

// SetTimes sets the times of the regular file at p, as utimensat (touch -d) does through any
// of its names: the same inode keeps its bytes, and no lease is broken.
func (m *FS) SetTimes(p string, mtime, ctime time.Time) error {
	return m.update("set times", p, func(_ *node, _ string, n *node) error {
		if n.kind != kindFile {
			return fmt.Errorf("memfs: set times %s: not a regular file", p)
		}
		n.mtime, n.ctime = mtime, ctime
		n.changes++
		return nil
	})
}

// Rename moves the entry at from to to, replacing whatever was there, and makes any missing
// parents of to, as rename(2) does: a file moved, or one that lost its name to it, changes
// (its change time, its link count); the files beneath a moved directory do not.
func (m *FS) Rename(from, to string) error {
	return m.update("rename", from, func(parent *node, name string, n *node) error {
		dest, destName, err := m.parent(to)
		if err != nil {
			return err
		}
		delete(parent.children, name)
		unlinked(dest.children[destName])
		if n.kind == kindFile {
			n.changes++
		}
		dest.children[destName] = n
		return nil
	})
}

// unlinked records that n (nil for none) lost a name.
func unlinked(n *node) {
	if n != nil && n.kind == kindFile {
		n.changes++
	}
}

// Symlink puts a symlink with the given target text at p, replacing whatever was there.
func (m *FS) Symlink(target, p string) error {
	return m.put(p, &node{kind: kindSymlink, target: target})
}

// MakeFIFO puts a FIFO at p, replacing whatever was there.
func (m *FS) MakeFIFO(p string) error { return m.put(p, &node{kind: kindFIFO}) }

// MakeSocket puts a Unix socket at p, replacing whatever was there.
func (m *FS) MakeSocket(p string) error { return m.put(p, &node{kind: kindSocket}) }

// MakeDevice puts a device node at p, replacing whatever was there.
func (m *FS) MakeDevice(p string) error { return m.put(p, &node{kind: kindDevice}) }

// Deny takes every permission from the entry at p (not following a symlink there): a file
// can no longer be read, a directory no longer searched or listed.
func (m *FS) Deny(p string) error {
	return m.update("deny", p, func(_ *node, _ string, n *node) error {
		n.denied = true
		n.changes++
		return nil
	})
}

// Remove removes the entry at p, a directory with everything beneath it.
func (m *FS) Remove(p string) error {
	return m.update("remove", p, func(parent *node, name string, n *node) error {
		delete(parent.children, name)
		unlinked(n)
		return nil
	})
}

// update runs change on the existing entry at p, its parent and its name, under the write
// lock; verb names the mutator when there is no such entry.
func (m *FS) update(verb, p string, change func(parent *node, name string, n *node) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, name, err := m.parent(p)
	if err != nil {
		return err
	}
	n, ok := parent.children[name]
	if !ok {
		return fmt.Errorf("memfs: %s %s: no such entry", verb, p)
	}
	return change(parent, name, n)
}

func (m *FS) put(p string, n *node) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, name, err := m.parent(p)
	if err != nil {
		return err
	}
	unlinked(parent.children[name])
	parent.children[name] = n
	return nil
}

// parent returns the directory that holds p and p's last name, making missing parents. It
// never follows a symlink: a parent that exists as anything but a directory is an error.
// The caller holds m.mu for writing.
func (m *FS) parent(p string) (*node, string, error) {
	names := strings.Split(p, "/")
	for _, name := range names {
		if name == "" || name == "." || name == ".." {
			return nil, "", fmt.Errorf("memfs: %q is not a relative path of plain names", p)
		}
	}
	d := m.top
	for _, name := range names[:len(names)-1] {
		c, ok := d.children[name]
		if !ok {
			c = &node{kind: kindDir, children: map[string]*node{}}
			d.children[name] = c
		}
		if c.kind != kindDir {
			return nil, "", fmt.Errorf("memfs: %s: %s is not a directory", p, name)
		}
		d = c
	}
	return d, names[len(names)-1], nil
}
