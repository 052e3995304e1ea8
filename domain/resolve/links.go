package resolve

import (
	"strings"

	"github.com/resplane/resplane/domain/refusal"
)

// spent is how much of its bounds (MaxSymlinks, MaxLinkComponents) one resolution has used.
type spent struct{ links, components int }

func (s spent) plus(o spent) spent  { return spent{s.links + o.links, s.components + o.components} }
func (s spent) minus(o spent) spent { return spent{s.links - o.links, s.components - o.components} }

func (s spent) exceeded() bool { return s.links > MaxSymlinks || s.components > MaxLinkComponents }

// linkMemo remembers, for the resolutions of one listing, where each symlink they met led, so
// that no link is resolved twice in one listing however many links lead through it. It is
// keyed by the link's canonical path beneath the base ("/"-separated).
//
// What resolving a link's own text gives does not depend on the path that led to the link:
// only whether the bounds still allow it does, and the outcome records what it spent. Reusing
// an outcome therefore gives the answer resolving the link again would give, as of the moment
// it was first resolved in this listing; a target is re-entered from the base by its canonical
// path, under the same rule, so nothing the rule refuses can be reached through the memo.
type linkMemo map[string]linkOutcome

// linkOutcome is what resolving one link's text gave.
type linkOutcome struct {
	// target is the canonical location (components beneath the base, empty for the base
	// itself) that the text led to, a directory or the final non-directory.
	target []string
	// err is the refusal met instead, while resolving the text.
	err error
	// cost is what resolving the text spent of the bounds.
	cost spent
	// exhausted says that err is a bound being exceeded.
	exhausted bool
	// partial says the exhausted resolution started with part of the bounds already spent,
	// so the link alone might have stayed within them: cost is then only what the link
	// costs at least, and proves the bounds exceeded only from a start it pushes over them.
	partial bool
}

// watch is a link met and not resolved yet.
type watch struct {
	key string
	// depth is the length of pending once the link's name was taken from it: the link's text
	// is resolved when pending is back to this length.
	depth int
	start spent
}

// resolveLink resolves the symlink name, which a listing met in the directory on top of stack,
// as a final component by rule r: it recalls the link's outcome when memo holds it, without
// looking the link up again.
func resolveLink(stack []frame, r rule, memo linkMemo, name string) (*Result, error) {
	z := newResolution(stack, r, memo)
	if o, ok := memo[z.key(name)]; ok {
		if done, err := z.recall(o); done {
			if err != nil {
				return nil, err
			}
			return z.run(nil)
		}
	}
	return z.run([]string{name})
}

// key is the memo key of the link name in the current directory.
func (z *resolution) key(name string) string {
	var b strings.Builder
	for _, f := range z.stack[1:] {
		b.WriteString(f.name)
		b.WriteByte('/')
	}
	b.WriteString(name)
	return b.String()
}

// recall applies the outcome of a link resolved before instead of resolving it again. done is
// false when the outcome does not decide the answer from here (a partial one that does not
// exceed the bounds from the current start): the link must then be resolved.
func (z *resolution) recall(o linkOutcome) (done bool, err error) {
	total := z.spent.plus(o.cost)
	if o.partial && !total.exceeded() {
		return false, nil
	}
	z.spent = total
	switch {
	case o.exhausted || z.spent.exceeded():
		return true, z.fail(refusal.New(refusal.SymlinkRefused), true)
	case o.err != nil:
		return true, z.fail(o.err, false)
	}
	z.toBase()
	z.pending = pushReversed(z.pending, o.target)
	return true, nil
}

// settle records the links whose text has just been resolved, at the location where returns.
func (z *resolution) settle(where func() []string) {
	var location []string
	for n := len(z.watches); n > 0 && z.watches[n-1].depth == len(z.pending); n-- {
		w := z.watches[n-1]
		if location == nil {
			location = where()
		}
		z.memo[w.key] = linkOutcome{target: location, cost: z.spent.minus(w.start)}
		z.watches = z.watches[:n-1]
	}
}

// fail records err as the outcome of every link whose text was being resolved, and returns
// it. exhausted says err is a bound being exceeded.
func (z *resolution) fail(err error, exhausted bool) error {
	for _, w := range z.watches {
		partial := exhausted && w.start != (spent{})
		z.memo[w.key] = linkOutcome{err: err, cost: z.spent.minus(w.start), exhausted: exhausted, partial: partial}
	}
	z.watches = nil
	return err
}
