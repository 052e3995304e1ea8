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

// MaxLinkComponents is how many components the symlinks one resolution follows may splice in,
// all of them together: every name, "..", "." and empty one of their texts counts, except the
// leading components of an absolute target that spell the base's canonical path. One more is
// symlink_refused, as a loop is. MaxSymlinks alone would let 40 links of 4095 bytes each make
// one resolution walk some 65,000 components; this bounds the work whatever the links
// hold, and still lets a link in the deepest directory a listing visits (MaxDepth) climb to
// the root and come back down twice over
// (docs/decisions/0068-listing-and-resolution-bounds.md).
const MaxLinkComponents = 4 * MaxDepth

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
	// Inode is the inode the name linked when the directory was read, as the directory
	// entry itself says (getdents64's d_ino, with the directory's own device): the zero
	// Inode when the Dir does not say.
	Inode Inode
}

// Inode names an inode as a directory entry does: by the device of the directory that holds
// the entry and the inode number the entry records. A name that is a mount point records
// the inode it covers, so an entry's Inode equals the one a stat of the name gives only when
// no other filesystem is mounted there. The zero Inode is unknown: it equals no stat.
type Inode struct{ Device, Number uint64 }

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
	// even if the path would come back); see
	// docs/decisions/0027-root-link-may-step-out-and-straight-back.md.
	passOutside bool
}

type frame struct {
	dir  Dir
	name string
}

// resolution is one walk of names from a stack of opened directories.
type resolution struct {
	rule
	// stack holds the opened directories from the base (stack[0]) down to the current one.
	stack []frame
	// borrowed is how many directories at the bottom of stack belong to the caller: they are
	// never closed here, and stack is kept clipped above them so that pushing never writes
	// over the caller's slice. The base is always borrowed.
	borrowed int
	// pending is a LIFO of the names still to resolve: the next one is last.
	pending []string
	spent   spent
	// memo, when not nil, remembers where the links met led (see links.go); watches are the
	// links met and not yet resolved.
	memo    linkMemo
	watches []watch
}

// resolve walks names from the top of stack by rule r. stack holds opened directories from
// the base down (at least the base); they belong to the caller and are never closed here.
// names may hold "", "." (stay, but the current position must be a directory) and ".."
// (pop); they are the same units a symlink's text is split into. memo, when not nil, is
// consulted and filled so that a link met again is not resolved again (links.go).
func resolve(stack []frame, names []string, r rule, memo linkMemo) (*Result, error) {
	return newResolution(stack, r, memo).run(names)
}

func newResolution(stack []frame, r rule, memo linkMemo) *resolution {
	return &resolution{rule: r, stack: slices.Clip(stack), borrowed: len(stack), memo: memo}
}

// run resolves names, then whatever is still pending.
func (z *resolution) run(names []string) (*Result, error) {
	z.pending = pushReversed(z.pending, names)
	for len(z.pending) > 0 {
		name := z.pending[len(z.pending)-1]
		z.pending = z.pending[:len(z.pending)-1]
		res, err := z.step(name)
		if err != nil {
			z.release()
			return nil, err
		}
		if res != nil {
			return res, nil
		}
		z.settle(func() []string { return stackPath(z.stack) })
	}
	if len(z.stack) == 1 {
		if !z.allowBase {
			return nil, refusal.New(refusal.OutsideRoot)
		}
		return &Result{Node: Node{Kind: Directory, Dir: z.stack[0].dir}}, nil
	}
	top := z.stack[len(z.stack)-1]
	return &Result{
		Path:   stackPath(z.stack),
		Parent: z.stack[len(z.stack)-2].dir,
		Name:   top.name,
		Node:   Node{Kind: Directory, Dir: top.dir},
		owned:  z.owned(),
	}, nil
}

// step resolves one name. It returns a Result when the name is the final component and not
// a directory, an error when resolution fails, and neither when it goes on.
func (z *resolution) step(name string) (*Result, error) {
	switch name {
	case "", ".":
		return nil, nil
	case "..":
		return nil, z.up()
	}
	node, err := z.stack[len(z.stack)-1].dir.Lookup(name)
	if err != nil {
		return nil, z.fail(refusal.From(err), false)
	}
	switch node.Kind {
	case Directory:
		z.stack = append(z.stack, frame{dir: node.Dir, name: name})
		return nil, nil
	case Symlink:
		return nil, z.followLink(name, node.Target)
	}
	path := append(stackPath(z.stack), name)
	z.settle(func() []string { return path })
	if len(z.pending) > 0 {
		// A non-directory with names after it: ENOTDIR, which is answered not_found
		// (docs/operator-guide.md, "Containment classes and symlinks").
		return nil, z.fail(refusal.New(refusal.NotFound), false)
	}
	return &Result{Path: path, Parent: z.stack[len(z.stack)-1].dir, Name: name, Node: node, owned: z.owned()}, nil
}

// up resolves "..": it pops the stack, and at the base it leaves the base, which only a rule
// with passOutside survives.
func (z *resolution) up() error {
	if len(z.stack) > 1 {
		top := len(z.stack) - 1
		if top >= z.borrowed {
			_ = z.stack[top].dir.Close()
			z.stack = z.stack[:top]
		} else {
			// Clipped, so that the next push cannot write over the caller's stack.
			z.stack = z.stack[:top:top]
			z.borrowed = top
		}
		return nil
	}
	if !z.passOutside {
		return z.fail(refusal.New(refusal.OutsideRoot), false)
	}
	rest, ok := reenter(z.boundary[:len(z.boundary)-1], popAll(&z.pending), z.boundary)
	if !ok {
		return refusal.New(refusal.OutsideRoot)
	}
	z.pending = pushReversed(z.pending, rest)
	return nil
}

// followLink splices the text of the symlink name in place of it, within the bounds
// (MaxSymlinks, MaxLinkComponents): a relative target continues from the link's directory,
// an absolute one from the base, once its leading components proved to be the base's
// canonical path.
func (z *resolution) followLink(name, target string) error {
	if !z.follow {
		return z.fail(refusal.New(refusal.SymlinkRefused), false)
	}
	if z.memo != nil {
		key := z.key(name)
		if o, ok := z.memo[key]; ok {
			if done, err := z.recall(o); done {
				return err
			}
		}
		z.watches = append(z.watches, watch{key: key, depth: len(z.pending), start: z.spent})
	}
	if z.spent.links++; z.spent.exceeded() {
		return z.fail(refusal.New(refusal.SymlinkRefused), true)
	}
	if target == "" {
		return z.fail(refusal.New(refusal.NotFound), false)
	}
	names := strings.Split(target, "/")
	if strings.HasPrefix(target, "/") {
		match := beneath
		if z.passOutside {
			match = func(target, boundary []string) ([]string, bool) { return reenter(nil, target, boundary) }
		}
		rest, ok := match(names, z.boundary)
		if !ok {
			return z.fail(refusal.New(refusal.OutsideRoot), false)
		}
		names = rest
		z.toBase()
	}
	if z.spent.components += len(names); z.spent.exceeded() {
		return z.fail(refusal.New(refusal.SymlinkRefused), true)
	}
	z.pending = pushReversed(z.pending, names)
	return nil
}

// toBase closes the directories this resolution opened and goes back to the base.
func (z *resolution) toBase() {
	z.release()
	z.stack = z.stack[:1:1]
	z.borrowed = 1
}

// release closes the directories this resolution opened, top first.
func (z *resolution) release() {
	for i := len(z.stack) - 1; i >= z.borrowed; i-- {
		_ = z.stack[i].dir.Close()
	}
}

// owned lists the directories this resolution opened, which the Result it returns owns.
func (z *resolution) owned() []Dir {
	dirs := make([]Dir, 0, len(z.stack)-z.borrowed)
	for _, f := range z.stack[z.borrowed:] {
		dirs = append(dirs, f.dir)
	}
	return dirs
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
	r, err := resolve([]frame{{dir: workdir}}, strings.Split(declared, "/"), rule{
		boundary:    components(workdirPath),
		follow:      true,
		allowBase:   true,
		passOutside: true,
	}, nil)
	if err != nil {
		return nil, "", err
	}
	if r.Node.Kind != Directory {
		r.close()
		return nil, "", refusal.New(refusal.NotFound)
	}
	return r, path.Join(append([]string{workdirPath}, r.Path...)...), nil
}

// file resolves names from the top of stack, whose bottom is an export root, by the class
// rule r (docs/operator-guide.md, "Containment classes and symlinks") and requires a regular
// file. stack stays the caller's; memo is as for resolve.
func file(stack []frame, r rule, names []string, memo linkMemo) (*Result, error) {
	return regular(resolve(stack, names, r, memo))
}

// regular passes on a resolution that ended on a regular file: a directory, FIFO, socket or
// device is not_a_regular_file, and a final target that is the root itself outside_root.
func regular(r *Result, err error) (*Result, error) {
	if err != nil {
		return nil, err
	}
	if r.Node.Kind != Regular {
		r.close()
		return nil, refusal.New(refusal.NotARegularFile)
	}
	return r, nil
}

// beneathRoot is the class rule beneath an export root whose canonical absolute path is
// rootPath: follow is true under sealed and advisory, false under scoped.
func beneathRoot(rootPath string, follow bool) rule {
	return rule{boundary: components(rootPath), follow: follow}
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
	r, err := file([]frame{{dir: rt.Node.Dir}}, beneathRoot(rootPath, follow), names, nil)
	if err != nil {
		return zero, err
	}
	defer r.close()
	return open(r)
}
