package resolve

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// fakeFS is a tiny in-test tree built from a fixture.Layout. It has no outside. A denied
// directory's contents cannot be read, and a denied file cannot be opened.
type fakeFS struct {
	top     *fakeNode
	open    int // directories opened and not yet closed
	maxOpen int // the most directories open at once
	// lookups counts the lookups of each node; a symlink's text is read by each.
	lookups map[*fakeNode]int
	stats   int // leaves stated
	opens   int // leaves opened
}

type fakeNode struct {
	kind     Kind
	content  string
	target   string
	denied   bool
	children map[string]*fakeNode
	// fail, when set, is what looking the node up, opening it or listing it fails with.
	fail error
}

// kinds maps each kind of layout entry to the kind resolution sees.
var kinds = map[fixture.Kind]Kind{
	fixture.File: Regular, fixture.Dir: Directory, fixture.Symlink: Symlink,
	fixture.FIFO: Other, fixture.Socket: Other, fixture.Device: Other,
}

func newFake(t *testing.T, layout fixture.Layout) *fakeFS {
	t.Helper()
	fs := &fakeFS{top: &fakeNode{kind: Directory, children: map[string]*fakeNode{}}, lookups: map[*fakeNode]int{}}
	for _, e := range layout.Entries(workdir) {
		if e.Outside() {
			t.Fatalf("layout: the fake tree has no outside: %s", e.Path)
		}
		n := &fakeNode{kind: kinds[e.Kind], content: e.Data, target: e.Target, denied: e.Denied}
		if n.kind == Directory {
			n.children = map[string]*fakeNode{}
		}
		fs.put(t, e.Path, n)
	}
	return fs
}

// put places n at p, making the missing directories above it. Entries come parents first, so
// a directory the layout names is made before anything inside it.
func (fs *fakeFS) put(t *testing.T, p string, n *fakeNode) {
	t.Helper()
	names := strings.Split(p, "/")
	d := fs.top
	for _, name := range names[:len(names)-1] {
		c, ok := d.children[name]
		if !ok {
			c = &fakeNode{kind: Directory, children: map[string]*fakeNode{}}
			d.children[name] = c
		}
		if c.kind != Directory {
			t.Fatalf("layout: %s is not a directory", name)
		}
		d = c
	}
	d.children[names[len(names)-1]] = n
}

func (fs *fakeFS) dir(n *fakeNode) *fakeDir {
	fs.open++
	fs.maxOpen = max(fs.maxOpen, fs.open)
	return &fakeDir{fs: fs, n: n}
}

// node returns the node at p, which must exist.
func (fs *fakeFS) node(t *testing.T, p string) *fakeNode {
	t.Helper()
	n := fs.top
	for _, name := range strings.Split(p, "/") {
		if n = n.children[name]; n == nil {
			t.Fatalf("no %s in the fake tree", p)
		}
	}
	return n
}

type fakeDir struct {
	fs     *fakeFS
	n      *fakeNode
	closed bool
}

func (d *fakeDir) Lookup(name string) (Node, error) {
	if name == "" || name == "." || name == ".." {
		panic("Lookup(" + name + ")")
	}
	if d.n.denied {
		return Node{}, denied()
	}
	c, ok := d.n.children[name]
	if !ok {
		return Node{}, refusal.New(refusal.NotFound)
	}
	d.fs.lookups[c]++
	if c.fail != nil {
		return Node{}, c.fail
	}
	switch c.kind {
	case Directory:
		return Node{Kind: Directory, Dir: d.fs.dir(c)}, nil
	case Symlink:
		return Node{Kind: Symlink, Target: c.target}, nil
	}
	return Node{Kind: c.kind, ID: c}, nil
}

func (d *fakeDir) Entries() ([]Entry, error) {
	if d.n.denied {
		return nil, denied()
	}
	var es []Entry
	for name, c := range d.n.children {
		es = append(es, Entry{Name: name, Kind: c.kind})
	}
	return es, nil
}

func (d *fakeDir) OpenDir(name string) (Dir, error) {
	c, ok := d.n.children[name]
	switch {
	case !ok || c.kind != Directory:
		return nil, refusal.New(refusal.NotFound)
	case c.fail != nil:
		return nil, c.fail
	}
	return d.fs.dir(c), nil
}

func (d *fakeDir) Close() error {
	if d.closed {
		panic("directory closed twice")
	}
	d.closed = true
	d.fs.open--
	return nil
}

type fakeFile struct {
	content string
	path    string
}

func (fakeFile) Close() error { return nil }

func (fs *fakeFS) openLeaf(r *Result) (fakeFile, error) {
	parent := r.Parent.(*fakeDir)
	if parent.closed {
		panic("leaf opened through a closed directory")
	}
	n := parent.n.children[r.Name]
	switch {
	case n == nil:
		return fakeFile{}, refusal.New(refusal.NotFound)
	case n.fail != nil:
		return fakeFile{}, n.fail
	case n.denied:
		return fakeFile{}, denied()
	case n.kind != Regular:
		return fakeFile{}, errors.New("leaf changed")
	case r.Node.ID != nil && n != r.Node.ID:
		return fakeFile{}, Replaced()
	}
	fs.opens++
	return fakeFile{content: n.content, path: strings.Join(r.Path, "/")}, nil
}

// statLeaf states the leaf a resolution ended on as an adapter's Leaves.Stat does: without
// opening it (a denied file is stated), refusing anything but a regular file and a node other
// than the one resolved. It counts the stats.
func (fs *fakeFS) statLeaf(r *Result) (*fakeNode, error) {
	parent := r.Parent.(*fakeDir)
	if parent.closed {
		panic("leaf stated through a closed directory")
	}
	fs.stats++
	n := parent.n.children[r.Name]
	switch {
	case n == nil:
		return nil, refusal.New(refusal.NotFound)
	case n.fail != nil:
		return nil, n.fail
	case n.kind != Regular:
		return nil, refusal.New(refusal.NotARegularFile)
	case r.Node.ID != nil && n != r.Node.ID:
		return nil, Replaced()
	}
	return n, nil
}

// leaves states, opens and visits every file: a Known that states every file and knows none.
func (fs *fakeFS) leaves(visit func(string, fakeFile) error) Leaves[*fakeNode, fakeFile] {
	return Leaves[*fakeNode, fakeFile]{
		Stat: fs.statLeaf,
		Known: func(_ []byte, _ Inode, stat func() (*fakeNode, bool)) bool {
			stat()
			return false
		},
		Open:  fs.openLeaf,
		Visit: visit,
	}
}

const workdir = "/srv/wd"

// denied is the refusal a real directory answers without permission: io_error, keeping the
// permission error as its cause, as adapters do.
func denied() error { return refusal.IO("permission denied").Wrapping(fs.ErrPermission) }

type outcome struct {
	code    refusal.Code
	content string
	path    string
}

func served(content, path string) outcome { return outcome{content: content, path: path} }
func refused(code refusal.Code) outcome   { return outcome{code: code} }

func TestOpenClassRule(t *testing.T) {
	chain := func(n int) fixture.Layout {
		l := fixture.Layout{"out/a.txt": "A"}
		for i := range n {
			target := "a.txt"
			if i < n-1 {
				target = "l" + strconv.Itoa(i+1)
			}
			l["out/l"+strconv.Itoa(i)+" -> "+target] = ""
		}
		return l
	}
	cases := []struct {
		rule   string
		layout fixture.Layout
		root   string
		path   string
		follow outcome
		scoped outcome
	}{
		{"a regular file is served", fixture.Layout{"out/a.txt": "A"}, "out", "a.txt",
			served("A", "a.txt"), served("A", "a.txt")},
		{"a nested file is served", fixture.Layout{"out/d/e/f.txt": "F"}, "out", "d/e/f.txt",
			served("F", "d/e/f.txt"), served("F", "d/e/f.txt")},
		{"a missing name is not_found", fixture.Layout{"out/a.txt": "A"}, "out", "b.txt",
			refused(refusal.NotFound), refused(refusal.NotFound)},
		{"a file used as a directory is not_found", fixture.Layout{"out/a.txt": "A"}, "out", "a.txt/b",
			refused(refusal.NotFound), refused(refusal.NotFound)},
		{"a relative link inside the root is followed, and refused under scoped",
			fixture.Layout{"out/a.txt": "A", "out/l -> a.txt": ""}, "out", "l",
			served("A", "a.txt"), refused(refusal.SymlinkRefused)},
		{"a link may climb within the root", fixture.Layout{"out/a.txt": "A", "out/d/l -> ../a.txt": ""}, "out", "d/l",
			served("A", "a.txt"), refused(refusal.SymlinkRefused)},
		{"an absolute link inside the root is followed",
			fixture.Layout{"out/d/a.txt": "A", "out/l -> /srv/wd/out/d/a.txt": ""}, "out", "l",
			served("A", "d/a.txt"), refused(refusal.SymlinkRefused)},
		{"an absolute link may spell the root with extra slashes and dots",
			fixture.Layout{"out/a.txt": "A", "out/l -> //srv/./wd//out/./a.txt": ""}, "out", "l",
			served("A", "a.txt"), refused(refusal.SymlinkRefused)},
		{"an absolute link into the workdir but outside the root is outside_root",
			fixture.Layout{"secret": "S", "out/l -> /srv/wd/secret": ""}, "out", "l",
			refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused)},
		{"an absolute link whose prefix is not the canonical root is outside_root even if it comes back",
			fixture.Layout{"out/a.txt": "A", "out/l -> /srv/wd/x/../out/a.txt": ""}, "out", "l",
			refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused)},
		{"an absolute link to an ancestor of the root is outside_root",
			fixture.Layout{"out/a.txt": "A", "out/l -> /srv": ""}, "out", "l/wd/out/a.txt",
			refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused)},
		{"an absolute link that leaves after matching the root is outside_root",
			fixture.Layout{"out/a.txt": "A", "out/l -> /srv/wd/out/../out/a.txt": ""}, "out", "l",
			refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused)},
		{"a link leaving the root and coming back is outside_root",
			fixture.Layout{"out/a.txt": "A", "out/l -> ../out/a.txt": ""}, "out", "l",
			refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused)},
		{"a link to a missing target outside the root is outside_root",
			fixture.Layout{"out/l -> ../../nowhere/x": ""}, "out", "l",
			refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused)},
		{"an intermediate symlinked directory is followed",
			fixture.Layout{"out/real/b.txt": "B", "out/d -> real": ""}, "out", "d/b.txt",
			served("B", "real/b.txt"), refused(refusal.SymlinkRefused)},
		{"a dangling link is not_found, and symlink_refused under scoped",
			fixture.Layout{"out/l -> nowhere": ""}, "out", "l",
			refused(refusal.NotFound), refused(refusal.SymlinkRefused)},
		{"a link with an empty target is not_found", fixture.Layout{"out/l -> ": ""}, "out", "l",
			refused(refusal.NotFound), refused(refusal.SymlinkRefused)},
		{"a trailing slash after a file in a target is not_found",
			fixture.Layout{"out/a.txt": "A", "out/l -> a.txt/": ""}, "out", "l",
			refused(refusal.NotFound), refused(refusal.SymlinkRefused)},
		{"a self loop is symlink_refused", fixture.Layout{"out/l -> l": ""}, "out", "l",
			refused(refusal.SymlinkRefused), refused(refusal.SymlinkRefused)},
		{"a two-link loop is symlink_refused", fixture.Layout{"out/l1 -> l2": "", "out/l2 -> l1": ""}, "out", "l1",
			refused(refusal.SymlinkRefused), refused(refusal.SymlinkRefused)},
		{"a chain of MaxSymlinks links is followed", chain(MaxSymlinks), "out", "l0",
			served("A", "a.txt"), refused(refusal.SymlinkRefused)},
		{"a chain of MaxSymlinks+1 links is a loop", chain(MaxSymlinks + 1), "out", "l0",
			refused(refusal.SymlinkRefused), refused(refusal.SymlinkRefused)},
		{"a link to the root itself is outside_root", fixture.Layout{"out/self -> .": ""}, "out", "self",
			refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused)},
		{"a file through a link to the root is served under its canonical path",
			fixture.Layout{"out/a.txt": "A", "out/self -> .": ""}, "out", "self/a.txt",
			served("A", "a.txt"), refused(refusal.SymlinkRefused)},
		{"a link that climbs back to the root as the final target is outside_root",
			fixture.Layout{"out/d/up -> ..": ""}, "out", "d/up",
			refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused)},
		{"an absolute link to the root itself is outside_root",
			fixture.Layout{"out/l -> /srv/wd/out": ""}, "out", "l",
			refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused)},
		{"a link above the root is outside_root", fixture.Layout{"out/a.txt": "A", "out/up -> ..": ""}, "out", "up/out/a.txt",
			refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused)},
		{"a directory is not_a_regular_file", fixture.Layout{"out/d/": ""}, "out", "d",
			refused(refusal.NotARegularFile), refused(refusal.NotARegularFile)},
		{"a link to a directory is not_a_regular_file", fixture.Layout{"out/d/": "", "out/l -> d": ""}, "out", "l",
			refused(refusal.NotARegularFile), refused(refusal.SymlinkRefused)},
		{"a link to a directory ending in dot is not_a_regular_file",
			fixture.Layout{"out/d/": "", "out/l -> d/.": ""}, "out", "l",
			refused(refusal.NotARegularFile), refused(refusal.SymlinkRefused)},
		{"a FIFO is not_a_regular_file", fixture.Layout{"out/p|": ""}, "out", "p",
			refused(refusal.NotARegularFile), refused(refusal.NotARegularFile)},
		{"an unreadable directory is io_error", fixture.Layout{"out/d/ !": "", "out/d/a.txt": "A"}, "out", "d/a.txt",
			refused(refusal.IOError), refused(refusal.IOError)},
		{"a missing root is not_found", fixture.Layout{"a.txt": "A"}, "out", "a.txt",
			refused(refusal.NotFound), refused(refusal.NotFound)},
		{"a root that is a file is not_found", fixture.Layout{"out": "A"}, "out", "a.txt",
			refused(refusal.NotFound), refused(refusal.NotFound)},
		{"a symlinked root inside the workdir is followed at every class",
			fixture.Layout{"real/a.txt": "R", "out -> real": ""}, "out", "a.txt",
			served("R", "a.txt"), served("R", "a.txt")},
		{"an absolute symlinked root inside the workdir is followed",
			fixture.Layout{"real/a.txt": "R", "out -> /srv/wd/real": ""}, "out/", "a.txt",
			served("R", "a.txt"), served("R", "a.txt")},
		{"a root linked to the workdir itself is the workdir",
			fixture.Layout{"a.txt": "W", "out -> .": ""}, "out", "a.txt",
			served("W", "a.txt"), served("W", "a.txt")},
		{"a root linked out of the workdir is outside_root", fixture.Layout{"out -> ../elsewhere": ""}, "out", "a.txt",
			refused(refusal.OutsideRoot), refused(refusal.OutsideRoot)},
		{"a root linked out of the workdir and straight back is followed",
			fixture.Layout{"real/a.txt": "R", "out -> ../wd/real": ""}, "out", "a.txt",
			served("R", "a.txt"), served("R", "a.txt")},
		{"a root linked from the filesystem root back into the workdir is followed",
			fixture.Layout{"real/a.txt": "R", "out -> ../../../srv/./wd/real": ""}, "out", "a.txt",
			served("R", "a.txt"), served("R", "a.txt")},
		{"a root linked absolutely with a detour is followed",
			fixture.Layout{"real/a.txt": "R", "out -> /srv/x/../wd/real": ""}, "out", "a.txt",
			served("R", "a.txt"), served("R", "a.txt")},
		{"a root linked to a sibling sharing the workdir's name as a prefix is outside_root",
			fixture.Layout{"out -> ../wd2/real": ""}, "out", "a.txt",
			refused(refusal.OutsideRoot), refused(refusal.OutsideRoot)},
		{"beneath the root a link that leaves and comes back is still outside_root",
			fixture.Layout{"out/a.txt": "A", "out/l -> ../out/a.txt": ""}, "out", "l",
			refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused)},
		{"a root symlink loop is symlink_refused", fixture.Layout{"out -> out": ""}, "out", "a.txt",
			refused(refusal.SymlinkRefused), refused(refusal.SymlinkRefused)},
		{"a dangling root link is not_found", fixture.Layout{"out -> nowhere": ""}, "out", "a.txt",
			refused(refusal.NotFound), refused(refusal.NotFound)},
		{"an absolute declared root is outside_root", fixture.Layout{"out/a.txt": "A"}, "/srv/wd/out", "a.txt",
			refused(refusal.OutsideRoot), refused(refusal.OutsideRoot)},
	}
	for _, c := range cases {
		for _, follow := range []bool{true, false} {
			want, class := c.follow, "follow"
			if !follow {
				want, class = c.scoped, "scoped"
			}
			t.Run(c.rule+"/"+class, func(t *testing.T) {
				fs := newFake(t, c.layout)
				f, err := Open(fs.dir(fs.top), workdir, c.root, strings.Split(c.path, "/"), follow, fs.openLeaf)
				if fs.open != 1 {
					t.Errorf("%d directories left open", fs.open-1)
				}
				got := outcome{content: f.content, path: f.path}
				if err != nil {
					r, ok := refusal.As(err)
					if !ok {
						t.Fatalf("error %v is not a refusal", err)
					}
					got = outcome{code: r.Code}
				}
				if got != want {
					t.Errorf("got %+v, want %+v", got, want)
				}
			})
		}
	}
}

func TestWalkListing(t *testing.T) {
	cases := []struct {
		rule   string
		layout fixture.Layout
		follow []string
		scoped []string
		err    refusal.Code
	}{
		{"files are listed recursively in bytewise order with dotfiles",
			fixture.Layout{"out/b.txt": "B", "out/a/x": "X", "out/a.txt": "A", "out/.hidden": "H", "out/a-b": "AB", "out/a0": "A0"},
			[]string{".hidden=H", "a-b=AB", "a.txt=A", "a/x=X", "a0=A0", "b.txt=B"},
			[]string{".hidden=H", "a-b=AB", "a.txt=A", "a/x=X", "a0=A0", "b.txt=B"}, ""},
		{"order is by the reported bytes, invalid UTF-8 replaced per byte",
			fixture.Layout{"out/é.txt": "E", "out/z": "Z", "out/ä/x": "AX", "out/a\xff\xfe": "BAD", "out/a\uFFFE": "NC"},
			[]string{"a\uFFFD\uFFFD=BAD", "a\uFFFE=NC", "z=Z", "ä/x=AX", "é.txt=E"},
			[]string{"a\uFFFD\uFFFD=BAD", "a\uFFFE=NC", "z=Z", "ä/x=AX", "é.txt=E"}, ""},
		{"symlinks to files inside are listed under their own path; scoped lists none",
			fixture.Layout{
				"out/real.txt": "R", "out/alias -> real.txt": "", "out/abs -> /srv/wd/out/real.txt": "",
				"out/d/up -> ../real.txt": "", "out/secret -> ../secret": "", "secret": "S",
				"out/back -> ../out/real.txt": "", "out/dangling -> nowhere": "", "out/loop -> loop": "",
				"out/dirlink -> d": "", "out/self -> .": "", "out/pipe|": "", "out/pipelink -> pipe": "",
				"out/d/f": "F",
			},
			[]string{"abs=R", "alias=R", "d/f=F", "d/up=R", "real.txt=R"},
			[]string{"d/f=F", "real.txt=R"}, ""},
		{"unreadable directories and FIFOs are left out",
			fixture.Layout{"out/a": "A", "out/locked/ !": "", "out/locked/x": "X", "out/p|": ""},
			[]string{"a=A"}, []string{"a=A"}, ""},
		{"a missing root is empty", fixture.Layout{"a": "A"}, nil, nil, ""},
		{"a root that is a file is empty", fixture.Layout{"out": "A"}, nil, nil, ""},
		{"a symlinked root is followed at every class", fixture.Layout{"real/a": "A", "out -> real": ""},
			[]string{"a=A"}, []string{"a=A"}, ""},
		{"a root leaving the workdir is outside_root", fixture.Layout{"out -> ../x": ""}, nil, nil, refusal.OutsideRoot},
		{"a root loop is symlink_refused", fixture.Layout{"out -> out": ""}, nil, nil, refusal.SymlinkRefused},
		{"an unreadable root is io_error", fixture.Layout{"out/ !": "", "out/a": "A"}, nil, nil, refusal.IOError},
	}
	for _, c := range cases {
		for _, follow := range []bool{true, false} {
			want, class := c.follow, "follow"
			if !follow {
				want, class = c.scoped, "scoped"
			}
			t.Run(c.rule+"/"+class, func(t *testing.T) {
				fs := newFake(t, c.layout)
				var got []string
				err := Walk(context.Background(), fs.dir(fs.top), workdir, "out", follow, fs.leaves(func(p string, f fakeFile) error {
					got = append(got, p+"="+f.content)
					return nil
				}))
				if fs.open != 1 {
					t.Errorf("%d directories left open", fs.open-1)
				}
				if c.err != "" {
					if !refusal.Is(err, c.err) {
						t.Fatalf("err = %v, want %s", err, c.err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("got  %q\nwant %q", got, want)
				}
			})
		}
	}
}

func TestWalkStopsAtVisitError(t *testing.T) {
	fs := newFake(t, fixture.Layout{"out/a": "A", "out/d/b": "B", "out/d/c": "C"})
	stop := errors.New("stop")
	var seen []string
	err := Walk(context.Background(), fs.dir(fs.top), workdir, "out", true, fs.leaves(func(p string, _ fakeFile) error {
		seen = append(seen, p)
		if p == "d/b" {
			return stop
		}
		return nil
	}))
	if err != stop {
		t.Fatalf("err = %v, want the visit error as is", err)
	}
	if !slices.Equal(seen, []string{"a", "d/b"}) {
		t.Errorf("visited %q after the error", seen)
	}
	if fs.open != 1 {
		t.Errorf("%d directories left open", fs.open-1)
	}
}

// TestWalkAsksKnownBeforeOpening pins Leaves: each listable file is stated, then offered to
// Known, and opened and visited only when Known does not know it; a failed stat is judged as
// a failed open is.
func TestWalkAsksKnownBeforeOpening(t *testing.T) {
	layout := fixture.Layout{"out/a": "A", "out/b": "B", "out/l -> a": "", "out/locked !": "L", "out/p|": "", "out/d/c": "C"}
	cases := []struct {
		rule    string
		known   func(fs *fakeFS, path string) bool // nil: Leaves.Known is nil
		fail    map[string]error                   // what stating (and opening) a node fails with
		asked   []string
		visited []string
		opens   int
		code    refusal.Code
	}{
		{rule: "a file Known knows is neither opened nor visited, an unreadable one included",
			known: func(*fakeFS, string) bool { return true }, asked: []string{"a", "b", "d/c", "l", "locked"}},
		{rule: "a file Known does not know is opened and visited; one that cannot be opened is left out",
			known: func(*fakeFS, string) bool { return false }, asked: []string{"a", "b", "d/c", "l", "locked"},
			visited: []string{"a=A", "b=B", "d/c=C", "l=A"}, opens: 4},
		{rule: "without Known nothing is stated and every file is opened",
			visited: []string{"a=A", "b=B", "d/c=C", "l=A"}, opens: 4},
		{rule: "a file whose stat says it vanished is left out, unasked",
			known: func(*fakeFS, string) bool { return false }, fail: map[string]error{"out/b": refusal.New(refusal.NotFound)},
			asked: []string{"a", "d/c", "l", "locked"}, visited: []string{"a=A", "d/c=C", "l=A"}, opens: 3},
		{rule: "a file whose stat fails otherwise ends the walk with io_error",
			known: func(*fakeFS, string) bool { return false }, fail: map[string]error{"out/b": shortage},
			asked: []string{"a"}, visited: []string{"a=A"}, opens: 1, code: refusal.IOError},
		{rule: "a linked file replaced between its stat and its open is resolved and asked about again",
			known: func(fs *fakeFS, path string) bool {
				if path == "l" && fs.stats == 4 { // l's first stat: a, b and d/c came before
					fs.node(t, "out").children["a"] = &fakeNode{kind: Regular, content: "A2"}
				}
				return false
			},
			asked: []string{"a", "b", "d/c", "l", "l", "locked"}, visited: []string{"a=A", "b=B", "d/c=C", "l=A2"}, opens: 4},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			fs := newFake(t, layout)
			for p, err := range c.fail {
				fs.node(t, p).fail = err
			}
			var asked, visited []string
			leaves := fs.leaves(func(p string, f fakeFile) error {
				visited = append(visited, p+"="+f.content)
				return nil
			})
			leaves.Known = nil
			if c.known != nil {
				leaves.Known = func(p []byte, _ Inode, stat func() (*fakeNode, bool)) bool {
					if _, ok := stat(); !ok {
						return false
					}
					asked = append(asked, string(p))
					return c.known(fs, string(p))
				}
			}
			err := Walk(context.Background(), fs.dir(fs.top), workdir, "out", true, leaves)
			if c.code != "" && !refusal.Is(err, c.code) || c.code == "" && err != nil {
				t.Fatalf("Walk = %v, want %q", err, c.code)
			}
			if !slices.Equal(asked, c.asked) || !slices.Equal(visited, c.visited) || fs.opens != c.opens {
				t.Errorf("asked %q, visited %q, %d opens; want %q, %q, %d", asked, visited, fs.opens, c.asked, c.visited, c.opens)
			}
			if c.known == nil && fs.stats != 0 {
				t.Errorf("%d files stated without Known", fs.stats)
			}
			if fs.open != 1 {
				t.Errorf("%d directories left open", fs.open-1)
			}
		})
	}
}

func TestBeneathMatchesComponents(t *testing.T) {
	root := []string{"srv", "wd", "out"}
	cases := []struct {
		target string
		rest   []string
		ok     bool
	}{
		{"/srv/wd/out", []string{}, true},
		{"/srv/wd/out/a", []string{"a"}, true},
		{"/srv/wd/out/", []string{""}, true},
		{"/srv/wd/outside/a", nil, false},
		{"/srv/wd/ou", nil, false},
		{"/srv/wd", nil, false},
		{"/srv/wd/../wd/out/a", nil, false},
		{"/", nil, false},
	}
	for _, c := range cases {
		rest, ok := beneath(strings.Split(c.target, "/"), root)
		if ok != c.ok || ok && !slices.Equal(rest, c.rest) {
			t.Errorf("beneath(%q) = %q, %v; want %q, %v", c.target, rest, ok, c.rest, c.ok)
		}
	}
	if rest, ok := beneath(strings.Split("/etc/passwd", "/"), nil); !ok || !slices.Equal(rest, []string{"", "etc", "passwd"}) {
		t.Errorf("with the root at /, every absolute target is beneath it; got %q, %v", rest, ok)
	}
}

func TestRetryReplacedResolvesAgainAfterARenameIntoPlace(t *testing.T) {
	calls := 0
	got, err := RetryReplaced(func() (string, error) {
		calls++
		if calls < 3 {
			return "", Replaced()
		}
		return "new version", nil
	})
	if err != nil || got != "new version" || calls != 3 {
		t.Fatalf("RetryReplaced = %q, %v after %d calls; want the third attempt's file", got, err, calls)
	}
	calls = 0
	if _, err := RetryReplaced(func() (string, error) { calls++; return "", Replaced() }); err != Replaced() || calls != replacedAttempts {
		t.Fatalf("a file replaced on every attempt: %v after %d calls; want Replaced after %d", err, calls, replacedAttempts)
	}
	calls = 0
	if _, err := RetryReplaced(func() (string, error) { calls++; return "", errors.New("other") }); err == nil || calls != 1 {
		t.Fatalf("another error must not be retried: %v after %d calls", err, calls)
	}
}
