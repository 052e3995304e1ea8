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
// (docs/decisions.md, "Listing and resolution bounds").
const MaxDepth = 256

// MaxEntries is how many directory entries one listing reads in all, of every kind, the
// root's included. One more makes the whole listing io_error, never a shorter listing: the
// memory a listing holds grows with its entries (docs/decisions.md, "Listing and resolution
// bounds").
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

// Walk lists the export root declared beneath workdir (docs/http-api.md, "The listing"): it
// resolves the root as Open does, then visits every listable regular file beneath it, depth
// first, in bytewise order of the reported path.
//
// The reported path is relative to the root, "/"-separated, with every byte that is not part
// of valid UTF-8 replaced by U+FFFD; the order is the order of those reported bytes. Each
// listable file is handed to open (its Result names it through its parent directory, as for
// Open) and, if open succeeds, to visit, after which the file is closed.
//
// Silently left out are FIFOs, sockets, devices, every symlink when follow is false, and,
// when follow is true, symlinks that do not resolve to a regular file beneath the root by the
// class rule; a symlink that does is visited under its own path, and a symlink is never
// descended. A file or directory that vanished (not_found) or that permission is denied on is
// left out too. Any other failure (a descriptor shortage, an I/O error) ends the walk with
// io_error: a listing is never silently shorter than the tree.
//
// The walk holds one directory per level and reads each directory once. It refuses, with
// io_error, a directory nested more than MaxDepth levels beneath the root, more than
// MaxEntries entries, and a ctx that ends before it is done. Within one walk a symlink is
// resolved at most once, however many links lead through it (links.go).
//
// A root that does not exist or is not a directory is visited as empty. A root that loops is
// symlink_refused, one that leaves the workdir outside_root, and a root that cannot be read
// io_error. An error returned by visit stops the walk and is returned as is.
func Walk[F io.Closer](ctx context.Context, workdir Dir, workdirPath, declared string, follow bool, open func(*Result) (F, error), visit func(path string, f F) error) error {
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
	w := walker[F]{ctx: ctx, rule: beneathRoot(rootPath, follow), open: open, visit: visit, stack: []frame{{dir: rt.Node.Dir}}}
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
type walker[F io.Closer] struct {
	ctx   context.Context
	rule  rule
	open  func(*Result) (F, error)
	visit func(string, F) error
	// stack holds the directories from the root (stack[0], which the walker does not own)
	// down to the one being listed; names holds the same directories' names below the root.
	stack []frame
	names []string
	// path is the reported path of the directory being listed, each name followed by "/".
	path    []byte
	entries int
	memo    linkMemo
	// leaf is the Result handed to open for a regular file: valid only during that call, so
	// one serves every file.
	leaf Result
}

// count adds the entries of one directory to the walk's total.
func (w *walker[F]) count(entries []Entry) error {
	if w.entries += len(entries); w.entries > MaxEntries {
		return tooMany
	}
	return nil
}

// dir visits the entries of d, the directory on top of the stack.
func (w *walker[F]) dir(d Dir, entries []Entry) error {
	type item struct {
		key string // the reported name, plus "/" for a directory
		Entry
	}
	items := make([]item, len(entries))
	for i, e := range entries {
		key := lossy(e.Name)
		if e.Kind == Directory {
			// Every path beneath a directory starts with its name and "/", so sorting the
			// directory by that key puts its whole subtree where it belongs among its
			// siblings: "a.txt" before "a/x", because '.' sorts before '/'.
			key += "/"
		}
		items[i] = item{key: key, Entry: e}
	}
	// Two names can report the same key (invalid UTF-8 replaced alike); their raw bytes then
	// decide, so the order never depends on the directory's.
	slices.SortFunc(items, func(a, b item) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})

	for _, it := range items {
		if err := w.ctx.Err(); err != nil {
			return abandoned(err)
		}
		mark := len(w.path)
		w.path = append(w.path, it.key...)
		var err error
		switch it.Kind {
		case Directory:
			err = w.subdir(d, it.Name)
		case Regular:
			err = w.file(d, it.Name)
		case Symlink:
			if w.rule.follow {
				err = w.link(it.Name)
			}
		}
		w.path = w.path[:mark]
		if err != nil {
			return err
		}
	}
	return nil
}

// subdir descends into the directory name of d.
func (w *walker[F]) subdir(d Dir, name string) error {
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
	w.names = append(w.names, name)
	err = w.dir(child, entries)
	w.stack = w.stack[:len(w.stack)-1]
	w.names = w.names[:len(w.names)-1]
	return err
}

// file opens and visits the regular file name of d.
func (w *walker[F]) file(d Dir, name string) error {
	w.leaf = Result{Path: append(w.names, name), Parent: d, Name: name, Node: Node{Kind: Regular}}
	return w.emit(w.open(&w.leaf))
}

// link resolves the symlink name in the directory on top of the stack by the class rule,
// starting from the directories the walk holds, and visits the regular file it leads to.
func (w *walker[F]) link(name string) error {
	return w.emit(RetryReplaced(func() (F, error) {
		var zero F
		r, err := regular(resolveLink(w.stack, w.rule, w.memo, name))
		if err != nil {
			return zero, err
		}
		defer r.close()
		return w.open(r)
	}))
}

// emit visits f, which an open gave, under the current path; an open leftOut forgives is not
// visited.
func (w *walker[F]) emit(f F, err error) error {
	if err != nil {
		return leftOut(err)
	}
	defer f.Close()
	return w.visit(string(w.path), f)
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
