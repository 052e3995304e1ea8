package application

import (
	"slices"
	"testing"
	"time"

	"github.com/resplane/resplane/ports"
)

// TestTheCacheHoldsOnlyTheLatestCompleteListing pins docs/operator-guide.md, "Listing cost":
// a completed listing replaces the cache with exactly the files it listed, and one that does
// not complete leaves it as it was.
func TestTheCacheHoldsOnlyTheLatestCompleteListing(t *testing.T) {
	var c hashCache
	moment := time.Unix(1000, 0)
	st := func(inode uint64) ports.FileStat {
		return ports.FileStat{Device: 1, Inode: inode, Size: 1, ModTime: time.Unix(1, 0), ChangeTime: time.Unix(1, 0)}
	}
	paths := func() []string {
		var p []string
		for _, e := range *c.latest.Load() {
			p = append(p, e.path)
		}
		return p
	}
	first := c.start(moment)
	first.took("a", st(1), 1, [32]byte{1})
	first.took("b", st(2), 1, [32]byte{2})
	first.took("grown", st(3), 2, [32]byte{3}) // read 2 bytes of a 1-byte file: not kept
	first.finish()
	if got := paths(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after the first listing the cache holds %q", got)
	}

	second := c.start(moment.Add(time.Minute))
	if _, sum, ok := second.reuse("a", st(1)); !ok || sum != [32]byte{1} {
		t.Fatal("a was not reused")
	}
	second.finish() // b is gone
	if got := paths(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after a listing without b the cache holds %q", got)
	}

	abandoned := c.start(moment.Add(2 * time.Minute))
	abandoned.took("c", st(4), 1, [32]byte{4}) // never finished
	if got := paths(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("an unfinished listing changed the cache to %q", got)
	}
}
