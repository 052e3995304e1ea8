package resolve

import (
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/refusal"
)

// Walk lists the export root declared beneath workdir (docs/http-api.md, "The listing"): it
// resolves the root as Open does, then visits every listable regular file beneath it, depth
// first, in bytewise order of the reported path.
//
// The reported path is relative to the root, "/"-separated, with every byte that is not part
// of valid UTF-8 replaced by U+FFFD; the order is the order of those reported bytes. Each
// listable file is handed to open (its Result names it through its parent directory, as for
// Open) and, if open succeeds, to visit, after which the file is closed. A file open fails
// on is silently left out, as are FIFOs, sockets, devices, directories that cannot be opened
// or read, every symlink when follow is false, and, when follow is true, symlinks that do not
// resolve to a regular file beneath the root by the class rule. A symlink that does is
// visited under its own path; a symlink is never descended.
//
// A root that does not exist or is not a directory is visited as empty. A root that loops is
// symlink_refused, one that leaves the workdir outside_root, and a root that cannot be read
// io_error. An error returned by visit stops the walk and is returned as is.
func Walk[F io.Closer](workdir Dir, workdirPath, declared string, follow bool, open func(*Result) (F, error), visit func(path string, f F) error) error {
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
	w := walker[F]{root: rt.Node.Dir, rootPath: rootPath, follow: follow, open: open, visit: visit}
	return w.dir(rt.Node.Dir, entries, "", nil)
}

type walker[F io.Closer] struct {
	root     Dir
	rootPath string
	follow   bool
	open     func(*Result) (F, error)
	visit    func(string, F) error
}

// dir visits the entries of d, whose reported path is prefix and canonical path names.
func (w *walker[F]) dir(d Dir, entries []Entry, prefix string, names []string) error {
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
	slices.SortStableFunc(items, func(a, b item) int { return strings.Compare(a.key, b.key) })

	for _, it := range items {
		path := prefix + it.key
		childNames := append(slices.Clip(names), it.Name)
		var err error
		switch it.Kind {
		case Directory:
			err = w.subdir(d, it.Name, path, childNames)
		case Regular:
			err = w.emit(path, &Result{Path: childNames, Parent: d, Name: it.Name, Node: Node{Kind: Regular}})
		case Symlink:
			if !w.follow {
				continue
			}
			r, rerr := file(w.root, w.rootPath, childNames, true)
			if rerr != nil {
				continue
			}
			err = w.emit(path, r)
			r.close()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// subdir descends into the directory name of d; one that cannot be opened or read is left
// out.
func (w *walker[F]) subdir(d Dir, name, path string, names []string) error {
	child, err := d.OpenDir(name)
	if err != nil {
		return nil
	}
	defer child.Close()
	entries, err := child.Entries()
	if err != nil {
		return nil
	}
	return w.dir(child, entries, path, names)
}

// emit opens the file r names and visits it; a file that cannot be opened is left out.
func (w *walker[F]) emit(path string, r *Result) error {
	f, err := w.open(r)
	if err != nil {
		return nil
	}
	defer f.Close()
	return w.visit(path, f)
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
