package resolve

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/refusal"
)

// MaxDepth is how many directories deep beneath the export root a listing descends. A
// directory nested deeper makes the whole listing io_error, never a shorter listing: the walk
// holds one descriptor and one directory's sorted names per level, so the depth bounds both
// (docs/decisions/0068-listing-and-resolution-bounds.md).
const MaxDepth = 256

// MaxEntries is how many directory entries one listing reads in all, of every kind, the
// root's included. One more makes the whole listing io_error, never a shorter listing: the
// memory a listing holds grows with its entries
// (docs/decisions/0068-listing-and-resolution-bounds.md).
const MaxEntries = 100_000

// The refusals only a listing gives. Each is io_error: the listing could not be produced
// whole, and a listing is never shorter than the tree.
var (
	tooDeep = refusal.WithMessage(refusal.IOError, "The listing was refused: a directory beneath the export root is nested more than "+
		strconv.Itoa(MaxDepth)+" levels deep, and a listing descends at most "+strconv.Itoa(MaxDepth)+".")
	tooMany = refusal.WithMessage(refusal.IOError, "The listing was refused: the export root holds more than "+
		strconv.Itoa(MaxEntries)+" directory entries, and a listing reads at most "+strconv.Itoa(MaxEntries)+".")
)

// abandoned is the refusal of a listing whose request ended (the client went away, or the
// service is shutting down) before the walk was complete.
func abandoned(cause error) error {
	return refusal.WithMessage(refusal.IOError, "The listing was abandoned: its request ended before the walk was complete.").Wrapping(cause)
}

// Leaves is what Walk does with each listable regular file it meets: it asks Known about
// the file, which may Stat it, and then, unless Known knew the file, Opens and Visits it.
// Each callback is handed a Result that names the file through its parent directory (as for
// Open), valid only during the call.
type Leaves[S any, F io.Closer] struct {
	// Stat reads what the file is without opening it: through r.Parent by r.Name, never
	// following a symlink. A name that is no longer a regular file is not_a_regular_file, and,
	// when r.Node.ID is set, a file other than that node is Replaced.
	Stat func(r *Result) (S, error)
	// Known, when set, is asked with the reported path, valid only during the call (a caller
	// that keeps it copies it), the Inode the file's directory entry names (the zero Inode
	// for a file reached through a symlink, or when the Dir does not say), and stat, which
	// Stats the file when Known calls it and reports false when that failed. True means the
	// caller lists the file from that alone: it is neither opened nor visited. A failed stat
	// is judged as a failed open is, whatever Known answers. When Known is nil every file is
	// opened. Known may be asked again about the same path when the file was replaced between
	// its stat and its open (RetryReplaced).
	Known func(path []byte, inode Inode, stat func() (S, bool)) bool
	// Open opens the file, as the open callback of Open does.
	Open func(r *Result) (F, error)
	// Visit is handed the opened file under its reported path; the file is closed after it
	// returns.
	Visit func(path string, f F) error
}

// Walk lists the export root declared beneath workdir (docs/http-api.md, "The listing"): it
// resolves the root as Open does, then visits every listable regular file beneath it, depth
// first, in bytewise order of the reported path.
//
// The reported path is relative to the root, "/"-separated, with every byte that is not part
// of valid UTF-8 replaced by U+FFFD; the order is the order of those reported bytes. Each
// listable file is handed to leaves (see Leaves): offered to Known, and otherwise opened and
// visited.
//
// Silently left out are FIFOs, sockets, devices, every symlink when follow is false, and,
// when follow is true, symlinks that do not resolve to a regular file beneath the root by the
// class rule; a symlink that does is visited under its own path, and a symlink is never
// descended. A file or directory that vanished (not_found), that is no longer a regular file
// (not_a_regular_file) or that permission is denied on is left out too, whether Stat or Open
// found it so. Any other failure (a descriptor shortage, an I/O error) ends the walk with
// io_error: a listing is never silently shorter than the tree.
//
// The walk holds one directory per level and reads each directory once. It refuses, with
// io_error, a directory nested more than MaxDepth levels beneath the root, more than
// MaxEntries entries, and a ctx that ends before it is done. Within one walk a symlink is
// resolved at most once, however many links lead through it (links.go).
//
// A root that does not exist or is not a directory is visited as empty. A root that loops is
// symlink_refused, one that leaves the workdir outside_root, and a root that cannot be read
// io_error. An error returned by Visit stops the walk and is returned as is.
func Walk[S any, F io.Closer](ctx context.Context, workdir Dir, workdirPath, declared string, follow bool, leaves Leaves[S, F]) error {
	rt, rootPath, err := root(workdir, workdirPath, declared)
	if refusal.Is(err, refusal.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer rt.close()
	entries, err := rt.Node.Dir.Entries()
	if err != nil {
		return refusal.From(err)
	}
	w := &walker[S, F]{ctx: ctx, rule: beneathRoot(rootPath, follow), leaves: leaves, stack: []frame{{dir: rt.Node.Dir}}, names: make([]string, 0, 1)}
	w.statLeaf = w.stat
	if follow {
		w.memo = linkMemo{}
	}
	if err := w.count(entries); err != nil {
		return err
	}
	return w.dir(rt.Node.Dir, entries)
}

// walker is the state of one Walk. Its memory is linear in the depth: one frame, one name and
// one directory's sorted entries per level, and the reported path built in one buffer.
type walker[S any, F io.Closer] struct {
	ctx    context.Context
	rule   rule
	leaves Leaves[S, F]
	// stack holds the directories from the root (stack[0], which the walker does not own)
	// down to the one being listed; names holds the same directories' names below the root.
	stack []frame
	names []string
	// sorted holds, per level, the sorted entries of the directory listed at that level.
	sorted [][]item
	// path is the reported path of the directory being listed, each name followed by "/".
	path    []byte
	entries int
	memo    linkMemo
	// leaf is the Result handed to the leaves for a regular file in a directory the walk
	// holds: valid only during those calls, so one serves every file.
	leaf Result
	// statLeaf is stat, the one function handed to every Known call; stated is the file it
	// states, statErr what its latest call failed with.
	statLeaf func() (S, bool)
	stated   *Result
	statErr  error
}

// count adds the entries of one directory to the walk's total.
func (w *walker[S, F]) count(entries []Entry) error {
	if w.entries += len(entries); w.entries > MaxEntries {
		return tooMany
	}
	return nil
}

// item is the key a directory entry is sorted by, and where the entry is. It is kept small,
// for sorting moves it about: a listing sorts every directory it reads.
type item struct {
	key string // the reported name, plus "/" for a directory
	at  int    // the entry's index in the directory's entries
}

// dir visits the entries of d, the directory on top of the stack.
func (w *walker[S, F]) dir(d Dir, entries []Entry) error {
	items := w.items(len(entries))
	for i, e := range entries {
		key := lossy(e.Name)
		if e.Kind == Directory {
			// Every path beneath a directory starts with its name and "/", so sorting the
			// directory by that key puts its whole subtree where it belongs among its
			// siblings: "a.txt" before "a/x", because '.' sorts before '/'.
			key += "/"
		}
		items[i] = item{key: key, at: i}
	}
	// Two names can report the same key (invalid UTF-8 replaced alike); their raw bytes then
	// decide, so the order never depends on the directory's.
	slices.SortFunc(items, func(a, b item) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(entries[a.at].Name, entries[b.at].Name)
	})

	for _, it := range items {
		if err := w.ctx.Err(); err != nil {
			return abandoned(err)
		}
		e := entries[it.at]
		mark := len(w.path)
		w.path = append(w.path, it.key...)
		var err error
		switch e.Kind {
		case Directory:
			err = w.subdir(d, e.Name)
		case Regular:
			err = w.file(d, e.Name, e.Inode)
		case Symlink:
			if w.rule.follow {
				err = w.link(e.Name)
			}
		}
		w.path = w.path[:mark]
		if err != nil {
			return err
		}
	}
	return nil
}

// items returns room for the n sorted entries of the directory on top of the stack: the
// room its level had for the previous directory at that level, grown if need be, so that a
// walk allocates it once per level rather than once per directory.
func (w *walker[S, F]) items(n int) []item {
	level := len(w.stack) - 1
	if level == len(w.sorted) {
		w.sorted = append(w.sorted, nil)
	}
	w.sorted[level] = slices.Grow(w.sorted[level][:0], n)[:n]
	return w.sorted[level]
}

// subdir descends into the directory name of d.
func (w *walker[S, F]) subdir(d Dir, name string) error {
	if len(w.stack) > MaxDepth {
		return tooDeep
	}
	child, err := d.OpenDir(name)
	if err != nil {
		return leftOut(err)
	}
	defer child.Close()
	entries, err := child.Entries()
	if err != nil {
		return leftOut(err)
	}
	if err := w.count(entries); err != nil {
		return err
	}
	w.stack = append(w.stack, frame{dir: child, name: name})
	// One spare slot, so that the Path of each file's Result is built without allocating.
	w.names = slices.Grow(append(w.names, name), 1)
	err = w.dir(child, entries)
	w.stack = w.stack[:len(w.stack)-1]
	w.names = w.names[:len(w.names)-1]
	return err
}

// file lists the regular file name of d, whose entry names inode.
func (w *walker[S, F]) file(d Dir, name string, inode Inode) error {
	w.leaf = Result{Path: append(w.names, name), Parent: d, Name: name, Node: Node{Kind: Regular}}
	f, known, err := w.take(&w.leaf, inode)
	return w.emit(f, known, err)
}

// link resolves the symlink name in the directory on top of the stack by the class rule,
// starting from the directories the walk holds, and lists the regular file it leads to. A
// file replaced between its resolution and its open is resolved again (RetryReplaced).
func (w *walker[S, F]) link(name string) error {
	var known bool
	f, err := RetryReplaced(func() (f F, err error) {
		r, err := regular(resolveLink(w.stack, w.rule, w.memo, name))
		if err != nil {
			return f, err
		}
		defer r.close()
		f, known, err = w.take(r, Inode{}) // the entry names the link, not the file
		return f, err
	})
	return w.emit(f, known, err)
}

// take asks Known about the file r names, listed under the current path, whose directory
// entry names inode, and opens it unless Known knew it.
func (w *walker[S, F]) take(r *Result, inode Inode) (f F, known bool, err error) {
	if w.leaves.Known != nil {
		w.stated, w.statErr = r, nil
		known = w.leaves.Known(w.path, inode, w.statLeaf)
		w.stated = nil
		if w.statErr != nil {
			return f, false, w.statErr
		}
		if known {
			return f, true, nil
		}
	}
	f, err = w.leaves.Open(r)
	return f, false, err
}

// stat states the file take is asking Known about, and keeps a failure for take to judge.
func (w *walker[S, F]) stat() (S, bool) {
	s, err := w.leaves.Stat(w.stated)
	w.statErr = err
	return s, err == nil
}

// emit visits f, which take opened, under the current path; a file Known knew, and one whose
// stat or open failed in a way leftOut forgives, is not visited.
func (w *walker[S, F]) emit(f F, known bool, err error) error {
	if err != nil {
		return leftOut(err)
	}
	if known {
		return nil
	}
	defer f.Close()
	return w.leaves.Visit(string(w.path), f)
}

// leftOut returns nil for a failure the listing silently leaves its entry out for: a name
// that vanished or is no longer what the directory said (not_found, not_a_regular_file), a
// symlink the class rule refuses (symlink_refused, outside_root), and permission denied.
// Anything else is the io_error that ends the walk.
func leftOut(err error) error {
	r := refusal.From(err)
	switch {
	case r.Code == refusal.NotFound, r.Code == refusal.NotARegularFile, r.Code == refusal.SymlinkRefused,
		r.Code == refusal.OutsideRoot, errors.Is(r, fs.ErrPermission):
		return nil
	}
	return r
}

// lossy replaces every byte of s that is not part of valid UTF-8 with U+FFFD, one
// replacement per byte, as encoding/json does.
func lossy(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
