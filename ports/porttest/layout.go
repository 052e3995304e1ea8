package porttest

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Layout describes a workdir in a mini-language, one entry per key (paths relative to the
// workdir, "/"-separated):
//
//	"out/real.txt": "bytes"        a regular file holding the value
//	"out/alias.txt -> real.txt": "" a symlink; $WD in the target stands for the workdir's
//	                                canonical absolute path, $WDNAME for its last component
//	"out/dir/": ""                 an empty directory
//	"out/pipe|": ""                a FIFO
//	"out/sock=": ""                a socket
//	"out/null#": ""                a character device node
//	"out/locked.txt !": "bytes"    a trailing " !" on a file or directory: no permission at
//	"out/locked/ !": ""            all (mode 000), so reading it or searching it is denied
//
// Parent directories are implied. A key starting with "../" names something outside the
// workdir; only a builder whose filesystem has an outside (osfs) creates it. Nothing outside
// the workdir can ever be served, so an in-memory builder may ignore such entries.
type Layout map[string]string

// Kind is the kind of one layout entry.
type Kind int

// The kinds of entry a Layout can describe.
const (
	File Kind = iota
	Dir
	Symlink
	FIFO
	Socket
	Device
)

// MTime is the modification time a builder must give every regular file, so the suite can
// check that ModTime comes from the opened file.
var MTime = time.Date(2026, time.January, 2, 3, 4, 5, 6_000_000, time.UTC)

// Entry is one parsed layout entry.
type Entry struct {
	// Path is relative to the workdir, "/"-separated, without a trailing "/". It starts with
	// "../" for an entry outside the workdir.
	Path string
	Kind Kind
	// Data is a regular file's content.
	Data string
	// Target is a symlink's text, with $WD already replaced.
	Target string
	// Denied asks for mode 000 on a file or directory.
	Denied bool
}

// Outside reports whether the entry lies outside the workdir.
func (e Entry) Outside() bool { return strings.HasPrefix(e.Path, "../") }

// Entries parses the layout, replacing $WD in symlink targets with workdir, and returns the
// entries sorted by path, so a parent comes before its children. A builder creates them in
// this order and applies Denied afterwards in reverse order, so a denied directory can still
// be filled first.
func (l Layout) Entries(workdir string) []Entry {
	entries := make([]Entry, 0, len(l))
	for key, data := range l {
		e := Entry{Data: data}
		if p, denied := strings.CutSuffix(key, " !"); denied {
			key, e.Denied = p, true
		}
		switch {
		case strings.Contains(key, " -> "):
			e.Kind = Symlink
			key, e.Target, _ = strings.Cut(key, " -> ")
			e.Target = strings.ReplaceAll(e.Target, "$WDNAME", path.Base(workdir))
			e.Target = strings.ReplaceAll(e.Target, "$WD", workdir)
		case strings.HasSuffix(key, "/"):
			e.Kind, key = Dir, strings.TrimSuffix(key, "/")
		case strings.HasSuffix(key, "|"):
			e.Kind, key = FIFO, strings.TrimSuffix(key, "|")
		case strings.HasSuffix(key, "="):
			e.Kind, key = Socket, strings.TrimSuffix(key, "=")
		case strings.HasSuffix(key, "#"):
			e.Kind, key = Device, strings.TrimSuffix(key, "#")
		}
		if key == "" || strings.HasPrefix(key, "/") || e.Kind != File && data != "" {
			panic(fmt.Sprintf("porttest: bad layout entry %q: %q", key, data))
		}
		e.Path = key
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return entries
}

// with returns the union of layouts; later ones win.
func with(layouts ...Layout) Layout {
	u := Layout{}
	for _, l := range layouts {
		for k, v := range l {
			u[k] = v
		}
	}
	return u
}
