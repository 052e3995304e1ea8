// Package porttest holds contract test suites that every implementation of a port must pass,
// so an in-memory fake can never drift from the real adapter (the way testing/fstest.TestFS
// tests any fs.FS).
package porttest

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// Fixture is an ExportFS over a freshly built workdir.
type Fixture struct {
	FS ports.ExportFS
	// Workdir is the workdir's canonical absolute path (what $WD stands for). No refusal
	// message may contain it.
	Workdir string
	// Apply adds entries to the workdir after FS was made, as fixture.Write does: each entry
	// replaces whatever was at its path (a whole directory included), except that a directory
	// entry keeps an existing directory.
	Apply func(fixture.Layout)
	// Rewrite changes the regular file at path (relative to the workdir) in place, as a write
	// through an open descriptor does: the same inode then holds content, and its
	// modification time is set back to fixture.MTime (touch -d).
	Rewrite func(path, content string)
}

// Builder makes a fresh workdir holding layout and an ExportFS over it; every regular file has
// the modification time fixture.MTime. It may skip t when its filesystem cannot represent the
// layout (say, a device node without the privilege to make one), saying why.
type Builder func(t *testing.T, layout fixture.Layout) Fixture

// secret starts the content of every file outside the export root in the suite's layouts;
// no call may ever serve or list it.
const secret = "SECRET"

// around is merged into every layout: files outside the root, in the workdir and outside it.
var around = fixture.Layout{
	"secret.txt":            secret + " in the workdir",
	"../outside/secret.txt": secret + " outside the workdir",
	"../outside/a.txt":      secret + " outside, named like a file in the root",
}

var (
	classes = []containment.Class{containment.Advisory, containment.Scoped, containment.Sealed}
	tooLong = strings.Repeat("n", 300)
)

// RunExportFS holds the filesystem build makes to the ports.ExportFS rules, for every
// containment class (docs/operator-guide.md, "Containment classes and symlinks";
// docs/http-api.md, "The listing").
func RunExportFS(t *testing.T, build Builder) {
	t.Run("OpenFile", func(t *testing.T) { runOpenFile(t, build) })
	t.Run("Walk", func(t *testing.T) { runWalk(t, build) })
	t.Run("Changes", func(t *testing.T) { runChanges(t, build) })
	t.Run("Stat", func(t *testing.T) { runStat(t, build) })
	t.Run("Known", func(t *testing.T) { runKnown(t, build) })
}

// want is one expected answer: a refusal code, or a served file's content and canonical path.
type want struct {
	code    refusal.Code
	message string // checked when set
	content string
	path    string
}

func served(content, path string) want { return want{content: content, path: path} }
func refused(code refusal.Code) want   { return want{code: code} }
func ioError(message string) want {
	return want{code: refusal.IOError, message: refusal.IO(message).Message}
}

// both is the same answer at every class.
func both(w want) [2]want { return [2]want{w, w} }

// byClass gives the answer under sealed and advisory, then under scoped.
func byClass(follow, scoped want) [2]want { return [2]want{follow, scoped} }

func expected(w [2]want, class containment.Class) want {
	if class.FollowsSymlinks() {
		return w[0]
	}
	return w[1]
}

type openCase struct {
	rule   string
	layout fixture.Layout
	root   string // "out" when empty
	path   string
	want   [2]want
}

var openCases = []openCase{
	// Plain names.
	{"a regular file is served", fixture.Layout{"out/a.txt": "A"}, "", "a.txt", both(served("A", "a.txt"))},
	{"a nested file is served", fixture.Layout{"out/d/e/f.txt": "F"}, "", "d/e/f.txt", both(served("F", "d/e/f.txt"))},
	{"a non-ASCII name is served", fixture.Layout{"out/é ü.txt": "U"}, "", "é ü.txt", both(served("U", "é ü.txt"))},
	{"a dotfile is served", fixture.Layout{"out/.env": "E"}, "", ".env", both(served("E", ".env"))},
	{"an empty file is served", fixture.Layout{"out/empty": ""}, "", "empty", both(served("", "empty"))},
	{"a missing name is not_found", fixture.Layout{"out/a.txt": "A"}, "", "b.txt", both(refused(refusal.NotFound))},
	{"a missing directory on the path is not_found", fixture.Layout{"out/a.txt": "A"}, "", "d/a.txt", both(refused(refusal.NotFound))},
	{"a file used as a directory (ENOTDIR) is not_found", fixture.Layout{"out/a.txt": "A"}, "", "a.txt/b", both(refused(refusal.NotFound))},
	{"a directory is not_a_regular_file", fixture.Layout{"out/d/": ""}, "", "d", both(refused(refusal.NotARegularFile))},
	{"a FIFO answers at once with not_a_regular_file", fixture.Layout{"out/pipe|": ""}, "", "pipe", both(refused(refusal.NotARegularFile))},
	{"a socket is not_a_regular_file", fixture.Layout{"out/sock=": ""}, "", "sock", both(refused(refusal.NotARegularFile))},
	{"a device node is not_a_regular_file", fixture.Layout{"out/null#": ""}, "", "null", both(refused(refusal.NotARegularFile))},
	{"an unreadable file is io_error permission denied", fixture.Layout{"out/locked.txt !": "L"}, "", "locked.txt", both(ioError("permission denied"))},
	{"a file in an unsearchable directory is io_error permission denied", fixture.Layout{"out/locked/ !": "", "out/locked/a.txt": "A"}, "", "locked/a.txt", both(ioError("permission denied"))},
	{"a name too long is io_error", fixture.Layout{"out/a.txt": "A"}, "", tooLong, both(ioError("file name too long"))},

	// Symlinks beneath the root: followed under sealed and advisory, refused under scoped.
	{"a relative link inside the root is followed", fixture.Layout{"out/a.txt": "A", "out/l -> a.txt": ""}, "", "l",
		byClass(served("A", "a.txt"), refused(refusal.SymlinkRefused))},
	{"a link may climb within the root", fixture.Layout{"out/a.txt": "A", "out/d/l -> ../a.txt": ""}, "", "d/l",
		byClass(served("A", "a.txt"), refused(refusal.SymlinkRefused))},
	{"an absolute link inside the root is followed", fixture.Layout{"out/d/a.txt": "A", "out/l -> $WD/out/d/a.txt": ""}, "", "l",
		byClass(served("A", "d/a.txt"), refused(refusal.SymlinkRefused))},
	{"an absolute link into the workdir outside the root is outside_root", fixture.Layout{"out/l -> $WD/secret.txt": ""}, "", "l",
		byClass(refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused))},
	{"an absolute link out of the workdir is outside_root", fixture.Layout{"out/l -> $WD/../outside/secret.txt": ""}, "", "l",
		byClass(refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused))},
	{"an absolute link to a system file is outside_root", fixture.Layout{"out/l -> /etc/passwd": ""}, "", "l",
		byClass(refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused))},
	{"an absolute link that leaves after naming the root is outside_root", fixture.Layout{"out/a.txt": "A", "out/l -> $WD/out/../out/a.txt": ""}, "", "l",
		byClass(refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused))},
	{"a relative link out of the root is outside_root", fixture.Layout{"out/l -> ../secret.txt": ""}, "", "l",
		byClass(refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused))},
	{"a relative link out of the workdir is outside_root", fixture.Layout{"out/l -> ../../outside/secret.txt": ""}, "", "l",
		byClass(refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused))},
	{"a link leaving the root and coming back is outside_root", fixture.Layout{"out/a.txt": "A", "out/l -> ../out/a.txt": ""}, "", "l",
		byClass(refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused))},
	{"a link out of the root to nothing is outside_root", fixture.Layout{"out/l -> ../nowhere": ""}, "", "l",
		byClass(refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused))},
	{"an intermediate symlinked directory is followed", fixture.Layout{"out/real/b.txt": "B", "out/d -> real": ""}, "", "d/b.txt",
		byClass(served("B", "real/b.txt"), refused(refusal.SymlinkRefused))},
	{"an intermediate absolute symlinked directory is followed", fixture.Layout{"out/real/b.txt": "B", "out/d -> $WD/out/real": ""}, "", "d/b.txt",
		byClass(served("B", "real/b.txt"), refused(refusal.SymlinkRefused))},
	{"an intermediate link out of the workdir is outside_root", fixture.Layout{"out/d -> ../../outside": ""}, "", "d/secret.txt",
		byClass(refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused))},
	{"a dangling link is not_found", fixture.Layout{"out/l -> nowhere": ""}, "", "l",
		byClass(refused(refusal.NotFound), refused(refusal.SymlinkRefused))},
	{"a dangling intermediate link is not_found", fixture.Layout{"out/l -> nowhere": ""}, "", "l/x",
		byClass(refused(refusal.NotFound), refused(refusal.SymlinkRefused))},
	{"a link with a trailing slash after a file is not_found", fixture.Layout{"out/a.txt": "A", "out/l -> a.txt/": ""}, "", "l",
		byClass(refused(refusal.NotFound), refused(refusal.SymlinkRefused))},
	{"a self loop is symlink_refused", fixture.Layout{"out/l -> l": ""}, "", "l", both(refused(refusal.SymlinkRefused))},
	{"a two-link loop is symlink_refused", fixture.Layout{"out/l1 -> l2": "", "out/l2 -> l1": ""}, "", "l1", both(refused(refusal.SymlinkRefused))},
	{"a link to the root itself is outside_root", fixture.Layout{"out/self -> .": ""}, "", "self",
		byClass(refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused))},
	{"a file through a link to the root is served under its canonical path", fixture.Layout{"out/a.txt": "A", "out/self -> .": ""}, "", "self/a.txt",
		byClass(served("A", "a.txt"), refused(refusal.SymlinkRefused))},
	{"a link climbing back to the root as the final target is outside_root", fixture.Layout{"out/d/up -> ..": ""}, "", "d/up",
		byClass(refused(refusal.OutsideRoot), refused(refusal.SymlinkRefused))},
	{"a file through a link climbing to the root is served", fixture.Layout{"out/a.txt": "A", "out/d/up -> ..": ""}, "", "d/up/a.txt",
		byClass(served("A", "a.txt"), refused(refusal.SymlinkRefused))},
	{"a link to a directory is not_a_regular_file", fixture.Layout{"out/d/": "", "out/l -> d": ""}, "", "l",
		byClass(refused(refusal.NotARegularFile), refused(refusal.SymlinkRefused))},
	{"a link to a FIFO is not_a_regular_file", fixture.Layout{"out/pipe|": "", "out/l -> pipe": ""}, "", "l",
		byClass(refused(refusal.NotARegularFile), refused(refusal.SymlinkRefused))},
	{"a link to a socket is not_a_regular_file", fixture.Layout{"out/sock=": "", "out/l -> sock": ""}, "", "l",
		byClass(refused(refusal.NotARegularFile), refused(refusal.SymlinkRefused))},

	// The declared root's own path: symlinks followed at every class, never out of the workdir.
	{"a missing root is not_found", fixture.Layout{}, "", "a.txt", both(refused(refusal.NotFound))},
	{"a root that is a file is not_found", fixture.Layout{"out": "A"}, "", "a.txt", both(refused(refusal.NotFound))},
	{"a root that is a FIFO is not_found", fixture.Layout{"out|": ""}, "", "a.txt", both(refused(refusal.NotFound))},
	{"a root beneath a file is not_found", fixture.Layout{"data": "D"}, "data/out", "a.txt", both(refused(refusal.NotFound))},
	{"a root with a trailing slash is served", fixture.Layout{"out/a.txt": "A"}, "out/", "a.txt", both(served("A", "a.txt"))},
	{"a nested root is served", fixture.Layout{"data/out/a.txt": "A"}, "data/out", "a.txt", both(served("A", "a.txt"))},
	{"a root symlinked inside the workdir is followed at every class", fixture.Layout{"real/a.txt": "R", "out -> real": ""}, "", "a.txt",
		both(served("R", "a.txt"))},
	{"a root symlinked absolutely inside the workdir is followed at every class", fixture.Layout{"real/a.txt": "R", "out -> $WD/real": ""}, "", "a.txt",
		both(served("R", "a.txt"))},
	{"a root beneath a symlinked directory is followed at every class", fixture.Layout{"store/out/a.txt": "S", "data -> store": ""}, "data/out", "a.txt",
		both(served("S", "a.txt"))},
	{"a root symlinked to the workdir itself is the workdir", fixture.Layout{"w.txt": "W", "out -> .": ""}, "", "w.txt",
		both(served("W", "w.txt"))},
	{"the class rule still applies beneath a symlinked root", fixture.Layout{"real/a.txt": "R", "real/l -> a.txt": "", "out -> real": ""}, "", "l",
		byClass(served("R", "a.txt"), refused(refusal.SymlinkRefused))},
	{"a root symlinked out of the workdir is outside_root", fixture.Layout{"out -> ../outside": ""}, "", "secret.txt",
		both(refused(refusal.OutsideRoot))},
	{"a root symlinked absolutely out of the workdir is outside_root", fixture.Layout{"out -> $WD/../outside": ""}, "", "a.txt",
		both(refused(refusal.OutsideRoot))},
	{"a root linked out of the workdir and straight back is followed", fixture.Layout{"real/a.txt": "R", "out -> ../$WDNAME/real": ""}, "", "a.txt",
		both(served("R", "a.txt"))},
	{"a root linked absolutely through the workdir's parent and back is followed", fixture.Layout{"real/a.txt": "R", "out -> $WD/../$WDNAME/real": ""}, "", "a.txt",
		both(served("R", "a.txt"))},
	{"a root that comes back only through a symlink outside the workdir is outside_root",
		fixture.Layout{"real/a.txt": "R", "../alias -> $WD": "", "out -> ../alias/real": ""}, "", "a.txt",
		both(refused(refusal.OutsideRoot))},
	{"a root symlink loop is symlink_refused", fixture.Layout{"out -> out": ""}, "", "a.txt", both(refused(refusal.SymlinkRefused))},
	{"a dangling root symlink is not_found", fixture.Layout{"out -> nowhere": ""}, "", "a.txt", both(refused(refusal.NotFound))},
	{"an unsearchable root is io_error permission denied", fixture.Layout{"out/ !": "", "out/a.txt": "A"}, "", "a.txt", both(ioError("permission denied"))},
}

func runOpenFile(t *testing.T, build Builder) {
	for _, c := range openCases {
		for _, class := range classes {
			t.Run(c.rule+"/"+string(class), func(t *testing.T) {
				t.Parallel()
				fx := build(t, with(around, c.layout))
				root := c.root
				if root == "" {
					root = "out"
				}
				rel, err := pathpolicy.Parse(c.path)
				if err != nil {
					t.Fatalf("bad case path %q: %v", c.path, err)
				}
				checkOpen(t, fx, root, rel, class, expected(c.want, class))
			})
		}
	}
}

// checkOpen opens rel and compares the answer with w, reading the whole file.
func checkOpen(t *testing.T, fx Fixture, root string, rel pathpolicy.RelPath, class containment.Class, w want) {
	t.Helper()
	var f ports.File
	var err error
	within(t, func() { f, err = fx.FS.OpenFile(root, rel, class) })
	if err != nil {
		checkRefusal(t, fx, err, w)
		return
	}
	defer f.Close()
	data, rerr := io.ReadAll(f)
	if rerr != nil {
		t.Fatalf("reading: %v", rerr)
	}
	if strings.HasPrefix(string(data), secret) {
		t.Fatalf("served bytes from outside the root: %q", data)
	}
	if w.code != "" {
		t.Fatalf("served %q (path %q), want %s", data, f.Path(), w.code)
	}
	if string(data) != w.content || f.Path() != w.path {
		t.Errorf("served %q at %q, want %q at %q", data, f.Path(), w.content, w.path)
	}
	if f.Size() != int64(len(data)) {
		t.Errorf("Size() = %d, read %d bytes", f.Size(), len(data))
	}
	if !f.ModTime().Equal(fixture.MTime) {
		t.Errorf("ModTime() = %v, want %v", f.ModTime(), fixture.MTime)
	}
}

func checkRefusal(t *testing.T, fx Fixture, err error, w want) {
	t.Helper()
	r, ok := refusal.As(err)
	if !ok {
		t.Fatalf("error %v is not a *refusal.Refusal", err)
	}
	if strings.Contains(r.Message, fx.Workdir) {
		t.Errorf("refusal message names a host path: %q", r.Message)
	}
	if w.code == "" {
		t.Fatalf("refused %v, want %q served at %q", err, w.content, w.path)
	}
	if r.Code != w.code {
		t.Fatalf("refused %s (%s), want %s", r.Code, r.Message, w.code)
	}
	if w.message != "" && r.Message != w.message {
		t.Errorf("message %q, want %q", r.Message, w.message)
	}
}

type walkCase struct {
	rule   string
	layout fixture.Layout
	root   string // "out" when empty
	// want lists "path=content", or "path(canonical)=content" when the file's Path differs
	// from the reported path, under sealed and advisory, then under scoped.
	want [2][]string
	code refusal.Code // the refusal at every class, instead of a listing
}

var walkCases = []walkCase{
	{rule: "files are listed recursively in bytewise order, dotfiles included",
		layout: fixture.Layout{"out/b.txt": "B", "out/a/x": "X", "out/a.txt": "A", "out/.hidden": "H", "out/a-b": "AB", "out/a0": "Z", "out/d/e/f": "F"},
		want:   bothList(".hidden=H", "a-b=AB", "a.txt=A", "a/x=X", "a0=Z", "b.txt=B", "d/e/f=F")},
	{rule: "order is by the reported bytes, invalid UTF-8 replaced per byte",
		layout: fixture.Layout{"out/é.txt": "E", "out/z": "Z", "out/ä/x": "AX", "out/a\xff\xfe": "BAD", "out/a\uFFFE": "NC"},
		want:   bothList("a\uFFFD\uFFFD(a\xff\xfe)=BAD", "a\uFFFE=NC", "z=Z", "ä/x=AX", "é.txt=E")},
	{rule: "FIFOs, sockets, unreadable files and directories, and empty directories are left out",
		layout: fixture.Layout{"out/a": "A", "out/pipe|": "", "out/sock=": "", "out/locked.txt !": "L", "out/locked/ !": "",
			"out/locked/x": "X", "out/empty/": "", "out/z": "Z"},
		want: bothList("a=A", "z=Z")},
	{rule: "device nodes are left out", layout: fixture.Layout{"out/a": "A", "out/null#": ""}, want: bothList("a=A")},
	{rule: "a symlink to a regular file inside is listed under its own path; scoped lists no symlink",
		layout: fixture.Layout{
			"out/real.txt": "R", "out/alias -> real.txt": "", "out/abs -> $WD/out/real.txt": "", "out/d/up -> ../real.txt": "",
			"out/d/f": "F", "out/self -> .": "", "out/selfpath -> ./real.txt": "",
		},
		want: byClassList(
			[]string{"abs(real.txt)=R", "alias(real.txt)=R", "d/f=F", "d/up(real.txt)=R", "real.txt=R", "selfpath(real.txt)=R"},
			[]string{"d/f=F", "real.txt=R"})},
	{rule: "symlinks that dangle, loop, leave the root or name no regular file are left out; linked directories are not descended",
		layout: fixture.Layout{
			"out/a": "A", "out/dangling -> nowhere": "", "out/loop -> loop": "", "out/out -> ../secret.txt": "",
			"out/back -> ../out/a": "", "out/far -> ../../outside/secret.txt": "", "out/abs -> $WD/secret.txt": "",
			"out/dirlink -> d": "", "out/d/f": "F", "out/outdir -> ../../outside": "", "out/pipe|": "",
			"out/pipelink -> pipe": "", "out/lockedlink -> locked": "", "out/locked !": "L",
		},
		want: bothList("a=A", "d/f=F")},
	{rule: "a missing root is empty", layout: fixture.Layout{}, want: bothList()},
	{rule: "an empty root is empty", layout: fixture.Layout{"out/": ""}, want: bothList()},
	{rule: "a root that is a file is empty", layout: fixture.Layout{"out": "A"}, want: bothList()},
	{rule: "a root beneath a file is empty", layout: fixture.Layout{"data": "D"}, root: "data/out", want: bothList()},
	{rule: "a root symlinked inside the workdir is listed at every class", layout: fixture.Layout{"real/a": "A", "out -> real": ""},
		want: bothList("a=A")},
	{rule: "a root symlinked out of the workdir is outside_root", layout: fixture.Layout{"out -> ../outside": ""}, code: refusal.OutsideRoot},
	{rule: "a root symlink loop is symlink_refused", layout: fixture.Layout{"out -> out": ""}, code: refusal.SymlinkRefused},
	{rule: "an unreadable root is io_error", layout: fixture.Layout{"out/ !": "", "out/a": "A"}, code: refusal.IOError},
}

// with returns the union of layouts; later ones win.
func with(layouts ...fixture.Layout) fixture.Layout {
	u := fixture.Layout{}
	for _, l := range layouts {
		maps.Copy(u, l)
	}
	return u
}

func bothList(l ...string) [2][]string                { return [2][]string{l, l} }
func byClassList(follow, scoped []string) [2][]string { return [2][]string{follow, scoped} }

func runWalk(t *testing.T, build Builder) {
	for _, c := range walkCases {
		for _, class := range classes {
			t.Run(c.rule+"/"+string(class), func(t *testing.T) {
				t.Parallel()
				fx := build(t, with(around, c.layout))
				root := c.root
				if root == "" {
					root = "out"
				}
				got, err := list(t, fx.FS, root, class)
				if c.code != "" {
					checkRefusal(t, fx, err, refused(c.code))
					return
				}
				if err != nil {
					t.Fatalf("Walk: %v", err)
				}
				want := c.want[0]
				if !class.FollowsSymlinks() {
					want = c.want[1]
				}
				if !slices.Equal(got, want) {
					t.Errorf("listed %q\nwant   %q", got, want)
				}
			})
		}
	}
}

// list walks root and describes every visited file as walkCase.want does. Known states every
// file and knows none, and every visited file must have been stated first, with the Stat it
// was opened with: nothing in the suite's layouts changes during a walk.
func list(t *testing.T, fs ports.ExportFS, root string, class containment.Class) ([]string, error) {
	t.Helper()
	got := []string{}
	shown := map[string]ports.FileStat{}
	var err error
	within(t, func() {
		err = fs.Walk(context.Background(), root, class, ports.Visitor{
			Known: func(p []byte, _ resolve.Inode, stat func() (ports.FileStat, bool)) bool {
				if st, ok := stat(); ok {
					shown[string(p)] = st
				}
				return false
			},
			Visit: func(p string, f ports.File) error {
				data, rerr := io.ReadAll(f)
				if rerr != nil {
					t.Errorf("reading %q: %v", p, rerr)
				}
				if strings.HasPrefix(string(data), secret) {
					t.Errorf("listed bytes from outside the root under %q", p)
					return errors.New("listed bytes from outside the root")
				}
				if f.Size() != int64(len(data)) {
					t.Errorf("%q: Size() = %d, read %d bytes", p, f.Size(), len(data))
				}
				if !f.ModTime().Equal(fixture.MTime) {
					t.Errorf("%q: ModTime() = %v, want %v", p, f.ModTime(), fixture.MTime)
				}
				if st, ok := shown[p]; !ok || !sameStat(st, f.Stat()) {
					t.Errorf("%q: visited with Stat %+v, but Known was shown %+v (asked: %v)", p, f.Stat(), st, ok)
				}
				entry := p
				if f.Path() != p {
					entry += "(" + f.Path() + ")"
				}
				got = append(got, entry+"="+string(data))
				return nil
			},
		})
	})
	return got, err
}

func runChanges(t *testing.T, build Builder) {
	a := mustParse(t, "a.txt")
	t.Run("a root created after the filesystem is served and listed", func(t *testing.T) {
		fx := build(t, around)
		checkOpen(t, fx, "out", a, containment.Sealed, refused(refusal.NotFound))
		fx.Apply(fixture.Layout{"out/a.txt": "A"})
		checkOpen(t, fx, "out", a, containment.Sealed, served("A", "a.txt"))
		got, err := list(t, fx.FS, "out", containment.Scoped)
		if err != nil || !slices.Equal(got, []string{"a.txt=A"}) {
			t.Errorf("listed %q, %v", got, err)
		}
	})
	t.Run("a root re-pointed out of the workdir is refused at the next call", func(t *testing.T) {
		fx := build(t, with(around, fixture.Layout{"out/a.txt": "A"}))
		checkOpen(t, fx, "out", a, containment.Advisory, served("A", "a.txt"))
		fx.Apply(fixture.Layout{"out -> ../outside": ""})
		for _, class := range classes {
			checkOpen(t, fx, "out", a, class, refused(refusal.OutsideRoot))
			if _, err := list(t, fx.FS, "out", class); !refusal.Is(err, refusal.OutsideRoot) {
				t.Errorf("%s: Walk = %v, want outside_root", class, err)
			}
		}
	})
	t.Run("a file replaced after it was opened keeps serving the opened bytes", func(t *testing.T) {
		fx := build(t, with(around, fixture.Layout{"out/a.txt": "old bytes"}))
		f, err := fx.FS.OpenFile("out", a, containment.Sealed)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fx.Apply(fixture.Layout{"out/a.txt": "new"})
		data, err := io.ReadAll(f)
		if err != nil || string(data) != "old bytes" || f.Size() != int64(len("old bytes")) {
			t.Errorf("read %q (size %d), %v; want the opened version", data, f.Size(), err)
		}
		checkOpen(t, fx, "out", a, containment.Sealed, served("new", "a.txt"))
	})
	t.Run("an error from visit stops the walk and is returned as is", func(t *testing.T) {
		fx := build(t, with(around, fixture.Layout{"out/a": "A", "out/b": "B", "out/c": "C"}))
		stop := errors.New("stop")
		var seen []string
		err := fx.FS.Walk(context.Background(), "out", containment.Sealed, ports.Visitor{Visit: func(p string, _ ports.File) error {
			seen = append(seen, p)
			if p == "b" {
				return stop
			}
			return nil
		}})
		if err != stop || !slices.Equal(seen, []string{"a", "b"}) {
			t.Errorf("Walk = %v after visiting %q; want the visit error after a, b", err, seen)
		}
	})
	t.Run("a file handed to visit is closed after visit returns", func(t *testing.T) {
		fx := build(t, with(around, fixture.Layout{"out/a": "A"}))
		var kept ports.File
		err := fx.FS.Walk(context.Background(), "out", containment.Sealed, ports.Visitor{Visit: func(_ string, f ports.File) error {
			kept = f
			return nil
		}})
		if err != nil || kept == nil {
			t.Fatalf("Walk = %v, visited %v", err, kept)
		}
		if n, err := kept.Read(make([]byte, 1)); err == nil || err == io.EOF {
			t.Errorf("Read after Walk returned = %d, %v; want a closed-file error", n, err)
		}
	})
}

func runStat(t *testing.T, build Builder) {
	layout := with(around, fixture.Layout{"out/a.txt": "A", "out/b.txt": "B", "out/l -> a.txt": ""})
	a, l := mustParse(t, "a.txt"), mustParse(t, "l")
	t.Run("Stat describes the opened file, as Size and ModTime do", func(t *testing.T) {
		fx := build(t, layout)
		st := statOf(t, fx, a)
		if st.Size != 1 || !st.ModTime.Equal(fixture.MTime) || st.Inode == 0 || st.ChangeTime.IsZero() {
			t.Errorf("Stat = %+v, want size 1, mtime %v, an inode and a change time", st, fixture.MTime)
		}
	})
	t.Run("an untouched file has the same Stat at every open, through a link and in a listing", func(t *testing.T) {
		fx := build(t, layout)
		want := statOf(t, fx, a)
		seen := []ports.FileStat{statOf(t, fx, a), statOf(t, fx, l)}
		err := fx.FS.Walk(context.Background(), "out", containment.Sealed, ports.Visitor{Visit: func(p string, f ports.File) error {
			if p != "b.txt" {
				seen = append(seen, f.Stat())
			}
			return nil
		}})
		if err != nil || len(seen) != 4 {
			t.Fatalf("Walk = %v, saw %d files", err, len(seen))
		}
		for i, st := range seen {
			if !sameStat(st, want) {
				t.Errorf("open %d: Stat = %+v, want %+v", i, st, want)
			}
		}
	})
	t.Run("two files have different inodes", func(t *testing.T) {
		fx := build(t, layout)
		sa, sb := statOf(t, fx, a), statOf(t, fx, mustParse(t, "b.txt"))
		if sa.Device == sb.Device && sa.Inode == sb.Inode {
			t.Errorf("a.txt and b.txt share the inode %d", sa.Inode)
		}
	})
	t.Run("a file rewritten in place keeps its inode and its change time does not go back", func(t *testing.T) {
		fx := build(t, layout)
		before := statOf(t, fx, a)
		fx.Rewrite("out/a.txt", "rewritten")
		after := statOf(t, fx, a)
		if after.Device != before.Device || after.Inode != before.Inode || after.Size != int64(len("rewritten")) ||
			!after.ModTime.Equal(fixture.MTime) || after.ChangeTime.Before(before.ChangeTime) {
			t.Errorf("Stat went from %+v to %+v", before, after)
		}
	})
	t.Run("a walk stops with io_error when its context ends", func(t *testing.T) {
		fx := build(t, layout)
		ctx, cancel := context.WithCancel(context.Background())
		visited := 0
		err := fx.FS.Walk(ctx, "out", containment.Sealed, ports.Visitor{Visit: func(string, ports.File) error {
			visited++
			cancel()
			return nil
		}})
		if !refusal.Is(err, refusal.IOError) || visited != 1 {
			t.Errorf("Walk = %v after %d visits, want io_error after the visit that ended its context", err, visited)
		}
		if err := fx.FS.Walk(ctx, "out", containment.Sealed, ports.Visitor{Visit: func(string, ports.File) error {
			t.Error("a walk under an ended context visited a file")
			return nil
		}}); !refusal.Is(err, refusal.IOError) {
			t.Errorf("Walk under an ended context = %v, want io_error", err)
		}
	})
}

// runKnown holds Walk to the rules of ports.Visitor.Known: a file is shown to Known, with
// the Stat an open would give, before the walk opens it; a file Known knows is never opened;
// a file Known does not know is opened, and described by what was opened.
func runKnown(t *testing.T, build Builder) {
	layout := with(around, fixture.Layout{
		"out/a.txt": "A", "out/b.txt": "BB", "out/l -> a.txt": "", "out/locked.txt !": "L",
		"out/pipe|": "", "out/dangling -> nowhere": "", "out/x -> ../secret.txt": "", "out/d/": "", "out/dl -> d": "",
	})
	for _, class := range classes {
		t.Run("Known is asked before any open, about an unreadable file too, and about nothing left out/"+string(class), func(t *testing.T) {
			t.Parallel()
			fx := build(t, layout)
			a, b := statOf(t, fx, mustParse(t, "a.txt")), statOf(t, fx, mustParse(t, "b.txt"))
			want := map[string]ports.FileStat{"a.txt": a, "b.txt": b}
			if class.FollowsSymlinks() {
				want["l"] = a
			}
			shown := map[string]ports.FileStat{}
			told := map[string]resolve.Inode{}
			var err error
			within(t, func() {
				err = fx.FS.Walk(context.Background(), "out", class, ports.Visitor{
					Known: func(p []byte, inode resolve.Inode, stat func() (ports.FileStat, bool)) bool {
						st, ok := stat()
						if !ok {
							t.Errorf("%q could not be stated", p)
						}
						shown[string(p)] = st
						told[string(p)] = inode
						return true
					},
					Visit: func(p string, _ ports.File) error {
						t.Errorf("%q was known, yet opened and visited", p)
						return nil
					},
				})
			})
			if err != nil {
				t.Fatalf("Walk: %v", err)
			}
			// The unreadable file cannot be opened: that it is shown at all proves no open.
			locked, ok := shown["locked.txt"]
			if !ok || locked.Size != 1 || !locked.ModTime.Equal(fixture.MTime) {
				t.Errorf("locked.txt was shown as %+v (asked: %v), want its stat, taken without opening it", locked, ok)
			}
			// A file's own entry names the inode its stat gives; an entry that is a link names
			// no inode of the file it leads to.
			for p, st := range shown {
				want := resolve.Inode{Device: st.Device, Number: st.Inode}
				if p == "l" {
					want = resolve.Inode{}
				}
				if told[p] != want {
					t.Errorf("Known was told %s links %+v, want %+v", p, told[p], want)
				}
			}
			delete(shown, "locked.txt")
			if !maps.EqualFunc(shown, want, sameStat) {
				t.Errorf("Known was shown %+v\nwant               %+v", shown, want)
			}
		})
	}
	for _, p := range []string{"a.txt", "l"} {
		t.Run("a file changed between Known and its open is visited as opened: "+p, func(t *testing.T) {
			fx := build(t, layout)
			const changed = "changed, and longer"
			var shown, opened []ports.FileStat
			var got []string
			err := fx.FS.Walk(context.Background(), "out", containment.Sealed, ports.Visitor{
				Known: func(q []byte, _ resolve.Inode, stat func() (ports.FileStat, bool)) bool {
					if string(q) == p {
						st, _ := stat()
						if len(shown) == 0 {
							fx.Apply(fixture.Layout{"out/a.txt": changed})
						}
						shown = append(shown, st)
					}
					return false
				},
				Visit: func(q string, f ports.File) error {
					if q == p {
						data, err := io.ReadAll(f)
						if err != nil {
							t.Fatal(err)
						}
						got = append(got, string(data))
						opened = append(opened, f.Stat())
					}
					return nil
				},
			})
			if err != nil || !slices.Equal(got, []string{changed}) {
				t.Fatalf("Walk = %v, visited %s with %q; want it visited once with the bytes it holds since", err, p, got)
			}
			if shown[0].Size != 1 || opened[0].Size != int64(len(changed)) {
				t.Errorf("Known was shown size %d, the opened file says %d; want the size before, then the size after", shown[0].Size, opened[0].Size)
			}
		})
	}
}

// statOf opens rel beneath out/ under sealed and returns its Stat.
func statOf(t *testing.T, fx Fixture, rel pathpolicy.RelPath) ports.FileStat {
	t.Helper()
	f, err := fx.FS.OpenFile("out", rel, containment.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st := f.Stat(); st.Size != f.Size() || !st.ModTime.Equal(f.ModTime()) {
		t.Errorf("Stat %+v disagrees with Size %d and ModTime %v", st, f.Size(), f.ModTime())
	}
	return f.Stat()
}

func sameStat(a, b ports.FileStat) bool {
	return a.Device == b.Device && a.Inode == b.Inode && a.Size == b.Size && a.ModTime.Equal(b.ModTime) && a.ChangeTime.Equal(b.ChangeTime)
}

func mustParse(t *testing.T, raw string) pathpolicy.RelPath {
	t.Helper()
	rel, err := pathpolicy.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// within runs fn and fails the test if it has not returned within a few seconds: a call that
// blocks (on a FIFO without a writer, say) is a contract violation, not a slow test.
func within(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call blocked for 10 s")
	}
}
