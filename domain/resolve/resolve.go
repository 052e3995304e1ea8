// Package resolve is the one resolution algorithm behind every export filesystem: the class
// rule and the declared-root rule (docs/operator-guide.md, "Containment classes and symlinks"),
// written once over a small Dir
// interface so the real filesystem (adapters/osfs) and the test double (adapters/memfs) cannot
// disagree about which path is served.
//
// Resolution walks a path one component at a time beneath a base directory, keeping a stack
// of the directories it has opened. It never asks the filesystem for "..": a ".." pops the
// stack, and a ".." at the base is leaving the base, which is refused outside_root. A symlink,
// when the rule follows it, is read and its target spliced in place of the link: a relative
// target continues from the link's directory, an absolute one is accepted only if its leading
// components are exactly the base's canonical absolute path, after which it continues from
// the base. Any step that would leave the base is refused, even if later components would
// come back inside and whether or not the target exists. Because the stack holds opened
// directories, a Dir backed by descriptors resolves without ever re-reading a path by name.
//
// Every error this package returns is a *refusal.Refusal, except an error from the open or
// visit callback an adapter passes in, which is returned as is.
package resolve

import (
	"path"
	"slices"
	"strings"

	"github.com/resplane/resplane/domain/refusal"
)

// MaxSymlinks is how many symlinks one resolution follows, as Linux's MAXSYMLINKS; meeting
// one more is treated as a loop (symlink_refused).
const MaxSymlinks = 40

// Kind is what a name in a directory is, as seen without following it.
type Kind uint8

// The kinds a Dir reports. Other covers FIFOs, sockets and device nodes: anything that is
// neither served nor descended.
const (
	Regular Kind = iota + 1
	Directory
	Symlink
	Other
)

// Node is what Dir.Lookup found under one name.
type Node struct {
	Kind Kind
	// Dir is the opened directory when Kind is Directory. The receiver of the Node owns it.
	Dir Dir
	// Target is the link's text when Kind is Symlink.
	Target string
	// ID optionally identifies a non-directory (an adapter's inode, say). An adapter that
	// opens the node later must refuse to hand out anything but the node with this identity.
	// It is compared with ==, so it must hold a comparable value.
	ID any
}

// Entry is one name in a directory listing and its kind, not following symlinks.
type Entry struct {
	Name string
	Kind Kind
}

// Dir is an opened directory. Implementations answer for exactly this directory, never by
// re-resolving a path, and never follow a symlink themselves.
//
// Errors are *refusal.Refusal values: not_found for a name that does not exist (or a
// directory that vanished), io_error carrying the operating system's text for anything else.
// Any other error is treated as io_error, keeping it as the refusal's cause (refusal.From).
type Dir interface {
	// Lookup reports what name is. It must not follow a symlink, must not open a regular
	// file, FIFO, socket or device for reading, and returns an opened Dir for a directory.
	// name is never "", "." or "..".
	Lookup(name string) (Node, error)
	// Entries lists the directory's names except "." and "..", in any order. It is called
	// at most once per Dir.
	Entries() ([]Entry, error)
	// OpenDir opens the child directory name for listing. It must fail, not follow, when
	// name is a symlink or anything but a directory.
	OpenDir(name string) (Dir, error)
	// Close releases the directory.
	Close() error
}

// replaced is the one refusal Replaced returns, so RetryReplaced can recognise it.
var replaced = refusal.IO("the file was replaced while it was being opened")

// Replaced is the refusal for a final component that is no longer the node Lookup saw (its ID
// changed between resolution and open): a concurrent swap, answered io_error rather than
// with whatever was swapped in.
func Replaced() error { return replaced }

// replacedAttempts bounds how often RetryReplaced resolves again.
const replacedAttempts = 8

// RetryReplaced calls open until it answers anything but Replaced, at most a few times. A
// writer that renames a finished temp file over the target replaces the inode between
// resolution and open; resolving again serves the new version whole, as docs/operator-guide.md
// ("Writing files that are read while you write them") promises such a writer's readers. Only a
// target replaced on every attempt is refused.
func RetryReplaced[F any](open func() (F, error)) (F, error) {
	f, err := open()
	for attempt := 1; attempt < replacedAttempts && err == replaced; attempt++ {
		f, err = open()
	}
	return f, err
}

// Result is where a resolution ended. It is valid only during the callback it is handed to;
// the directories it refers to are closed afterwards.
type Result struct {
	// Path is the canonical, symlink-free path of the final component relative to the base,
	// as components. It is empty when the final target is the base itself.
	Path []string
	// Parent is the directory holding the final component, nil when the final target is the
	// base itself. A final non-directory must be opened through Parent by Name, never by path.
	Parent Dir
	// Name is the final component's name within Parent.
	Name string
	// Node is the final component. For a directory, Node.Dir is that directory, opened.
	Node Node

	owned []Dir // the opened directories on the stack, closed by close
}

func (r *Result) close() {
	for i := len(r.owned) - 1; i >= 0; i-- {
		_ = r.owned[i].Close()
	}
	r.owned = nil
}

// rule says how a resolution treats symlinks and the base.
type rule struct {
	// boundary is the base's canonical absolute path, as components: the only prefix an
	// absolute symlink target may have.
	boundary []string
	// follow says whether symlinks are followed; when false any symlink is symlink_refused.
	follow bool
	// allowBase says whether a final target equal to the base itself is acceptable.
	allowBase bool
	// passOutside says whether a step out of the base may come back into it: the steps taken
	// outside are then followed lexically from the base's canonical path, and resolution
	// resumes for real at the moment they re-enter the base. It holds for the declared root
	// (which must resolve inside the workdir), never beneath the root (where leaving is refused
	// even if the path would come back); see docs/decisions.md,
	// "A root link may step out of the workdir and straight back".
	passOutside bool
}

type frame struct {
	dir  Dir
	name string
}

// resolve walks names beneath base by rule r. names may hold "", "." (stay, but the current
// position must be a directory) and ".." (pop); they are the same units a symlink's text is
// split into.
func resolve(base Dir, names []string, r rule) (*Result, error) {
	stack := []frame{{dir: base}}
	release := func() {
		for i := len(stack) - 1; i > 0; i-- {
			_ = stack[i].dir.Close()
		}
	}
	// pending is a LIFO of the names still to resolve: the next one is last.
	pending := pushReversed(nil, names)
	links := 0
	for len(pending) > 0 {
		name := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(stack) == 1 {
				release()
				if !r.passOutside {
					return nil, refusal.New(refusal.OutsideRoot)
				}
				rest, ok := reenter(r.boundary[:len(r.boundary)-1], popAll(&pending), r.boundary)
				if !ok {
					return nil, refusal.New(refusal.OutsideRoot)
				}
				pending = pushReversed(pending, rest)
				continue
			}
			_ = stack[len(stack)-1].dir.Close()
			stack = stack[:len(stack)-1]
			continue
		}
		node, err := stack[len(stack)-1].dir.Lookup(name)
		if err != nil {
			release()
			return nil, refusal.From(err)
		}
		switch node.Kind {
		case Directory:
			stack = append(stack, frame{dir: node.Dir, name: name})
		case Symlink:
			if !r.follow {
				release()
				return nil, refusal.New(refusal.SymlinkRefused)
			}
			if links++; links > MaxSymlinks {
				release()
				return nil, refusal.New(refusal.SymlinkRefused)
			}
			target := node.Target
			if target == "" {
				release()
				return nil, refusal.New(refusal.NotFound)
			}
			if strings.HasPrefix(target, "/") {
				match := beneath
				if r.passOutside {
					match = func(target, boundary []string) ([]string, bool) { return reenter(nil, target, boundary) }
				}
				rest, ok := match(strings.Split(target, "/"), r.boundary)
				if !ok {
					release()
					return nil, refusal.New(refusal.OutsideRoot)
				}
				release()
				stack = stack[:1]
				pending = pushReversed(pending, rest)
				continue
			}
			pending = pushReversed(pending, strings.Split(target, "/"))
		default:
			if len(pending) > 0 {
				// A non-directory with names after it: ENOTDIR, which is answered not_found
				// (docs/operator-guide.md, "Containment classes and symlinks").
				release()
				return nil, refusal.New(refusal.NotFound)
			}
			top := stack[len(stack)-1]
			return &Result{
				Path:   append(stackPath(stack), name),
				Parent: top.dir,
				Name:   name,
				Node:   node,
				owned:  stackDirs(stack),
			}, nil
		}
	}
	if len(stack) == 1 {
		if !r.allowBase {
			return nil, refusal.New(refusal.OutsideRoot)
		}
		return &Result{Node: Node{Kind: Directory, Dir: base}}, nil
	}
	top := stack[len(stack)-1]
	return &Result{
		Path:   stackPath(stack),
		Parent: stack[len(stack)-2].dir,
		Name:   top.name,
		Node:   Node{Kind: Directory, Dir: top.dir},
		owned:  stackDirs(stack),
	}, nil
}

// beneath matches the components of an absolute symlink target against the base's
// canonical absolute path, component by component ("" and "." are no components; ".." never
// matches), and returns what follows it.
func beneath(target, boundary []string) ([]string, bool) {
	i := 0
	for len(boundary) > 0 {
		if i == len(target) {
			return nil, false
		}
		switch c := target[i]; c {
		case "", ".":
		case boundary[0]:
			boundary = boundary[1:]
		default:
			return nil, false
		}
		i++
	}
	return target[i:], true
}

// reenter follows names lexically from position, an absolute location outside the base given
// as components ("" and "." stay, ".." goes up, never above "/"), until the location is the
// base or beneath it; it returns the names still to resolve from the base. Outside the base
// nothing is looked up, so a symlink out there is not followed: a path that only comes back
// through one is refused.
func reenter(position, names, boundary []string) ([]string, bool) {
	position = append([]string(nil), position...)
	for i, name := range names {
		switch name {
		case "", ".":
		case "..":
			if len(position) > 0 {
				position = position[:len(position)-1]
			}
		default:
			position = append(position, name)
		}
		if len(position) >= len(boundary) && slices.Equal(position[:len(boundary)], boundary) {
			return append(position[len(boundary):], names[i+1:]...), true
		}
	}
	return nil, false
}

// popAll empties pending, returning its names in resolution order.
func popAll(pending *[]string) []string {
	names := make([]string, 0, len(*pending))
	for i := len(*pending) - 1; i >= 0; i-- {
		names = append(names, (*pending)[i])
	}
	*pending = (*pending)[:0]
	return names
}

func pushReversed(pending, names []string) []string {
	for i := len(names) - 1; i >= 0; i-- {
		pending = append(pending, names[i])
	}
	return pending
}

func stackPath(stack []frame) []string {
	p := make([]string, 0, len(stack))
	for _, f := range stack[1:] {
		p = append(p, f.name)
	}
	return p
}

func stackDirs(stack []frame) []Dir {
	dirs := make([]Dir, 0, len(stack)-1)
	for _, f := range stack[1:] {
		dirs = append(dirs, f.dir)
	}
	return dirs
}

// components splits a canonical absolute path into its names.
func components(abs string) []string {
	var c []string
	for _, n := range strings.Split(abs, "/") {
		if n != "" {
			c = append(c, n)
		}
	}
	return c
}

// root resolves the declared export root beneath the workdir (docs/operator-guide.md,
// "Containment classes and symlinks"): symlinks on it are
// followed at every class, the result must be the canonical workdir or beneath it (a link
// that steps out and comes straight back, such as out -> ../wd/real, is followed lexically
// while outside), and the root may be the workdir itself. A root that does not exist or is not a directory is
// not_found. It returns the root and its canonical absolute path.
func root(workdir Dir, workdirPath, declared string) (*Result, string, error) {
	if declared == "" || strings.HasPrefix(declared, "/") {
		return nil, "", refusal.New(refusal.OutsideRoot)
	}
	r, err := resolve(workdir, strings.Split(declared, "/"), rule{
		boundary:    components(workdirPath),
		follow:      true,
		allowBase:   true,
		passOutside: true,
	})
	if err != nil {
		return nil, "", err
	}
	if r.Node.Kind != Directory {
		r.close()
		return nil, "", refusal.New(refusal.NotFound)
	}
	return r, path.Join(append([]string{workdirPath}, r.Path...)...), nil
}

// file resolves names beneath an export root by the class rule (docs/operator-guide.md,
// "Containment classes and symlinks") and requires
// a regular file: a directory, FIFO, socket or device is not_a_regular_file, and a final
// target that is the root itself outside_root.
func file(rootDir Dir, rootPath string, names []string, follow bool) (*Result, error) {
	r, err := resolve(rootDir, names, rule{boundary: components(rootPath), follow: follow})
	if err != nil {
		return nil, err
	}
	if r.Node.Kind != Regular {
		r.close()
		return nil, refusal.New(refusal.NotARegularFile)
	}
	return r, nil
}

// Open resolves the declared root beneath workdir (whose canonical absolute path is
// workdirPath), then names beneath that root by the class rule — follow is true under sealed
// and advisory, false under scoped — and hands the final regular file to open, which must
// open it through Result.Parent by Result.Name without following a symlink. What open
// returns is Open's result; the directories held during resolution are closed before Open
// returns.
//
// A missing root, a missing component and a non-directory where a directory is needed are
// not_found; the other refusals are those of the class rule (docs/operator-guide.md,
// "Containment classes and symlinks").
func Open[F any](workdir Dir, workdirPath, declared string, names []string, follow bool, open func(*Result) (F, error)) (F, error) {
	var zero F
	rt, rootPath, err := root(workdir, workdirPath, declared)
	if err != nil {
		return zero, err
	}
	defer rt.close()
	r, err := file(rt.Node.Dir, rootPath, names, follow)
	if err != nil {
		return zero, err
	}
	defer r.close()
	return open(r)
}
