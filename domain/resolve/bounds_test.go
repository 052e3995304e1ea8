package resolve

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// shortage is the io_error a descriptor shortage (EMFILE) gives.
var shortage = refusal.IO("too many open files")

// chain is a layout of depth nested directories beneath out/ with one file at the bottom, and
// the file's path beneath the root.
func chain(depth int) (fixture.Layout, string) {
	p := strings.Repeat("d/", depth) + "f"
	return fixture.Layout{"out/" + p: "F"}, p
}

// walk lists out/ of fs (following symlinks) as "path=content" lines.
func walk(ctx context.Context, fs *fakeFS) ([]string, error) {
	var got []string
	err := Walk(ctx, fs.dir(fs.top), workdir, "out", true, fs.leaves(func(p string, f fakeFile) error {
		got = append(got, p+"="+f.content)
		return nil
	}))
	return got, err
}

func TestWalkBounds(t *testing.T) {
	deepest, deepestPath := chain(MaxDepth)
	tooDeepLayout, _ := chain(MaxDepth + 1)
	// wide is out/ holding n empty files, plus more: built node by node, as a layout of
	// 100,000 entries would take seconds to parse under the race detector.
	wide := func(n int, more fixture.Layout) func(*testing.T) *fakeFS {
		return func(t *testing.T) *fakeFS {
			fs := newFake(t, more)
			out := fs.node(t, "out")
			for i := range n {
				out.children[strconv.Itoa(i)] = &fakeNode{kind: Regular}
			}
			return fs
		}
	}
	layout := func(l fixture.Layout) func(*testing.T) *fakeFS {
		return func(t *testing.T) *fakeFS { return newFake(t, l) }
	}
	cases := []struct {
		rule    string
		tree    func(*testing.T) *fakeFS
		listed  int
		first   string
		refused string // a part of the io_error's message, when the listing is refused
	}{
		{"a file beneath MaxDepth directories is listed", layout(deepest), 1, deepestPath + "=F", ""},
		{"a directory nested deeper than MaxDepth refuses the listing, naming the limit", layout(tooDeepLayout), 0, "",
			"nested more than " + strconv.Itoa(MaxDepth) + " levels deep"},
		{"MaxEntries entries in all are listed", wide(MaxEntries-1, fixture.Layout{"out/z": "Z"}), MaxEntries, "0=", ""},
		{"one entry more than MaxEntries refuses the listing, naming the limit", wide(MaxEntries, fixture.Layout{"out/z": "Z"}), 0, "",
			"more than " + strconv.Itoa(MaxEntries) + " directory entries"},
		{"entries of every kind and level count towards MaxEntries",
			wide(MaxEntries-2, fixture.Layout{"out/d/x": "", "out/pipe|": ""}), 0, "", "directory entries"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			fs := c.tree(t)
			got, err := walk(context.Background(), fs)
			if fs.open != 1 {
				t.Errorf("%d directories left open", fs.open-1)
			}
			if c.refused != "" {
				r, ok := refusal.As(err)
				if !ok || r.Code != refusal.IOError || !strings.Contains(r.Message, c.refused) {
					t.Fatalf("Walk = %v after %d entries, want io_error saying %q", err, len(got), c.refused)
				}
				return
			}
			if err != nil || len(got) != c.listed || got[0] != c.first {
				t.Fatalf("Walk = %v, listed %d (first %.40q), want %d (first %q)", err, len(got), first(got), c.listed, c.first)
			}
		})
	}
}

func first(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return l[0]
}

func TestWalkHoldsOneDirectoryPerLevel(t *testing.T) {
	layout, _ := chain(MaxDepth)
	for i := range 50 {
		layout[fmt.Sprintf("out/d/d/sibling%02d/f", i)] = "S"
	}
	fs := newFake(t, layout)
	if _, err := walk(context.Background(), fs); err != nil {
		t.Fatal(err)
	}
	// The workdir, the root, and one directory per level below it.
	if want := MaxDepth + 2; fs.maxOpen > want {
		t.Errorf("%d directories open at once, want at most %d", fs.maxOpen, want)
	}
}

// TestWalkMemoryIsLinearInDepth pins the walk's memory to one shared stack of names: twice as
// deep a chain must not cost four times the allocations, as copying the names at every level
// did.
func TestWalkMemoryIsLinearInDepth(t *testing.T) {
	allocated := func(depth int) uint64 {
		layout, _ := chain(depth)
		fs := newFake(t, layout)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := walk(context.Background(), fs); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	half, full := allocated(MaxDepth/2), allocated(MaxDepth)
	if ratio := float64(full) / float64(half); ratio > 2.5 {
		t.Errorf("a chain %d deep allocated %d bytes, %d deep %d: %.1f times as much for twice the depth", MaxDepth, full, MaxDepth/2, half, ratio)
	}
}

func TestWalkLeavesOutOnlyWhatVanishedOrIsDenied(t *testing.T) {
	layout := fixture.Layout{
		"out/a": "A", "out/d/b": "B", "out/e/c": "C", "out/l -> e/c": "", "out/z": "Z",
	}
	cases := []struct {
		rule   string
		path   string // the node that fails
		fail   error
		want   []string
		reason string // the io_error's message when the listing is refused
	}{
		{"a file that vanished is left out", "out/a", refusal.New(refusal.NotFound), []string{"d/b=B", "e/c=C", "l=C", "z=Z"}, ""},
		{"a file permission is denied on is left out", "out/a", denied(), []string{"d/b=B", "e/c=C", "l=C", "z=Z"}, ""},
		{"a directory that vanished is left out", "out/d", refusal.New(refusal.NotFound), []string{"a=A", "e/c=C", "l=C", "z=Z"}, ""},
		{"a directory permission is denied on is left out", "out/d", denied(), []string{"a=A", "e/c=C", "l=C", "z=Z"}, ""},
		{"a file swapped for something else is left out", "out/a", refusal.New(refusal.NotARegularFile), []string{"d/b=B", "e/c=C", "l=C", "z=Z"}, ""},
		{"a file that cannot be opened for want of descriptors refuses the listing", "out/a", shortage, nil, shortage.Message},
		{"a directory that cannot be opened for want of descriptors refuses the listing", "out/d", shortage, nil, shortage.Message},
		{"a symlink that cannot be resolved for want of descriptors refuses the listing", "out/e", shortage, nil, shortage.Message},
		{"a symlink's target that cannot be opened for want of descriptors refuses the listing", "out/e/c", shortage, nil, shortage.Message},
		{"any other error refuses the listing as io_error", "out/z", fmt.Errorf("an I/O error"), nil, refusal.New(refusal.IOError).Message},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			fs := newFake(t, layout)
			fs.node(t, c.path).fail = c.fail
			got, err := walk(context.Background(), fs)
			if fs.open != 1 {
				t.Errorf("%d directories left open", fs.open-1)
			}
			if c.reason != "" {
				r, ok := refusal.As(err)
				if !ok || r.Code != refusal.IOError || r.Message != c.reason {
					t.Fatalf("Walk = %v after listing %q, want io_error %q", err, got, c.reason)
				}
				return
			}
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("Walk = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestWalkStopsWhenItsContextEnds(t *testing.T) {
	fs := newFake(t, fixture.Layout{"out/a": "A", "out/b": "B", "out/d/c": "C"})
	ctx, cancel := context.WithCancel(context.Background())
	var got []string
	err := Walk(ctx, fs.dir(fs.top), workdir, "out", true, fs.leaves(func(p string, _ fakeFile) error {
		got = append(got, p)
		cancel()
		return nil
	}))
	if r, ok := refusal.As(err); !ok || r.Code != refusal.IOError || !strings.Contains(r.Message, "abandoned") || r.Cause() != context.Canceled {
		t.Fatalf("Walk = %v, want the io_error of an abandoned listing, caused by the cancellation", err)
	}
	if !slices.Equal(got, []string{"a"}) || fs.open != 1 {
		t.Errorf("visited %q and left %d directories open after the context ended", got, fs.open-1)
	}
	got = nil
	if _, err := walk(ctx, fs); err == nil {
		t.Fatal("a walk under an ended context succeeded")
	}
}

// padded is a symlink text that reaches target through n components of "x/.." padding.
func padded(n int, target string) string {
	return strings.Repeat("x/../", n/2) + target
}

func TestLinkComponentsAreBounded(t *testing.T) {
	dots := func(n int) string { return strings.Repeat("./", n-1) + "a.txt" }
	cases := []struct {
		rule   string
		layout fixture.Layout
		want   outcome
	}{
		{"a link splicing MaxLinkComponents components is followed",
			fixture.Layout{"out/a.txt": "A", "out/l -> " + dots(MaxLinkComponents): ""}, served("A", "a.txt")},
		{"a link splicing one component more is symlink_refused",
			fixture.Layout{"out/a.txt": "A", "out/l -> " + dots(MaxLinkComponents+1): ""}, refused(refusal.SymlinkRefused)},
		{"the bound counts the components of every link on the way",
			fixture.Layout{"out/a.txt": "A", "out/l -> m": "", "out/m -> " + dots(MaxLinkComponents): ""}, refused(refusal.SymlinkRefused)},
		{"an absolute target's canonical prefix is not counted",
			fixture.Layout{"out/a.txt": "A", "out/l -> /srv/wd/out/" + dots(MaxLinkComponents): ""}, served("A", "a.txt")},
		{"padding is counted, whatever it resolves to",
			fixture.Layout{"out/a.txt": "A", "out/x/": "", "out/l -> " + padded(MaxLinkComponents, "a.txt"): ""}, refused(refusal.SymlinkRefused)},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			fs := newFake(t, c.layout)
			f, err := Open(fs.dir(fs.top), workdir, "out", []string{"l"}, true, fs.openLeaf)
			got := outcome{content: f.content, path: f.path}
			if r, ok := refusal.As(err); ok {
				got = outcome{code: r.Code}
			}
			if got != c.want || fs.open != 1 {
				t.Errorf("got %+v, %v (%d directories left open), want %+v", got, err, fs.open-1, c.want)
			}
		})
	}
}

// TestPaddedLinkChainsCostBoundedLookups is the shape an agent plants to burn CPU: links of
// x/.. padding chained up to MaxSymlinks deep, and many links into the chain. One resolution
// looks up at most what MaxLinkComponents allows, and a listing does not walk a link's
// padding again for every link that leads into it.
func TestPaddedLinkChainsCostBoundedLookups(t *testing.T) {
	const heads, links, padding = 200, MaxSymlinks, 400
	layout := fixture.Layout{"out/a.txt": "A", "out/x/": ""}
	for i := range links {
		next := "a.txt"
		if i < links-1 {
			next = fmt.Sprintf("c%02d", i+1)
		}
		layout[fmt.Sprintf("out/c%02d -> %s", i, padded(padding, next))] = ""
	}
	for i := range heads {
		layout[fmt.Sprintf("out/h%03d -> c00", i)] = ""
		layout[fmt.Sprintf("out/a%03d -> %s", i, padded(padding, "c00"))] = ""
	}
	total := func(fs *fakeFS) (n int) {
		for _, count := range fs.lookups {
			n += count
		}
		return n
	}

	fs := newFake(t, layout)
	_, err := Open(fs.dir(fs.top), workdir, "out", []string{"c00"}, true, fs.openLeaf)
	if !refusal.Is(err, refusal.SymlinkRefused) {
		t.Fatalf("Open through the padded chain = %v, want symlink_refused", err)
	}
	if n := total(fs); n > MaxLinkComponents {
		t.Errorf("one resolution made %d lookups, more than the %d components it may splice", n, MaxLinkComponents)
	}

	fs = newFake(t, layout)
	// Two padded links fit within MaxLinkComponents, three do not; the heads add a link.
	got, err := walk(context.Background(), fs)
	if want := []string{"a.txt=A", "c38=A", "c39=A"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("Walk = %q, %v; want %q", got, err, want)
	}
	// A link whose resolution completed is never resolved again; one whose resolution, reached
	// through another link, was cut short by the bounds is resolved once more on its own. So
	// the padding of a head is walked once, that of a chain link at most twice.
	x := fs.node(t, "out/x")
	if limit := (heads + 2*links) * padding / 2; fs.lookups[x] > limit {
		t.Errorf("the listing looked up the padding %d times, more than the %d of walking each head's once and each chain link's twice", fs.lookups[x], limit)
	}
}

// TestWalkAgreesWithOpenOnEveryLink pins that remembering links within a listing changes no
// answer: on trees of links with random targets (chains, loops, links through links,
// climbing, padding near the bounds), a link is listed exactly when Open serves it, with the
// same content.
func TestWalkAgreesWithOpenOnEveryLink(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	names := []string{"a", "b", "d/c", "d/e/f", "g", "d/h", "d/e/i", "j"}
	for round := range 300 {
		layout := fixture.Layout{"out/file": "F", "out/d/file": "DF", "out/d/e/file": "EF", "out/x/": "", "out/d/x/": ""}
		for _, name := range names {
			layout["out/"+name+" -> "+randomTarget(rng, names)] = ""
		}
		fs := newFake(t, layout)
		listed := map[string]string{}
		got, err := walk(context.Background(), fs)
		if err != nil {
			t.Fatalf("round %d: Walk: %v", round, err)
		}
		for _, line := range got {
			p, content, _ := strings.Cut(line, "=")
			listed[p] = content
		}
		for _, name := range names {
			f, err := Open(fs.dir(fs.top), workdir, "out", strings.Split(name, "/"), true, fs.openLeaf)
			content, ok := listed[name]
			if (err == nil) != ok || err == nil && f.content != content {
				t.Fatalf("round %d: %s: listed %v (%q), Open = %q, %v\nlayout %q", round, name, ok, content, f.content, err, layout)
			}
		}
	}
}

// randomTarget is a relative or absolute link text: another link or a file, directly, through
// "..", through another link used as a directory, or behind padding of random length (some
// near MaxLinkComponents).
func randomTarget(rng *rand.Rand, names []string) string {
	pick := func() string {
		switch rng.IntN(4) {
		case 0:
			return "file"
		case 1:
			return "d/file"
		default:
			return names[rng.IntN(len(names))]
		}
	}
	target := pick()
	switch rng.IntN(6) {
	case 0:
		target = "/srv/wd/out/" + target
	case 1:
		target = padded(rng.IntN(MaxLinkComponents/3), target)
	case 2:
		target = padded(MaxLinkComponents/2-rng.IntN(4), target)
	case 3:
		target = names[rng.IntN(len(names))] + "/../" + target
	}
	return target
}
