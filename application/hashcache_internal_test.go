package application

import (
	"slices"
	"testing"
	"time"

	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
)

// cacheFixture is a cache and the moment of its latest listing.
type cacheFixture struct {
	c      hashCache
	moment time.Time
}

func stOf(inode uint64) ports.FileStat {
	return ports.FileStat{Device: 1, Inode: inode, Size: 1, ModTime: time.Unix(1, 0), ChangeTime: time.Unix(1, 0)}
}

func statOf(inode uint64) func() (ports.FileStat, bool) {
	return func() (ports.FileStat, bool) { return stOf(inode), true }
}

// stored is the latest generation's entries.
func (c *hashCache) stored() []cachedHash {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest.entries
}

func (f *cacheFixture) paths() []string {
	var p []string
	for _, e := range f.c.stored() {
		p = append(p, e.path+"="+e.sha256)
	}
	return p
}

// listing starts a listing one minute after the previous one.
func (f *cacheFixture) listing() *hashWalk {
	f.moment = f.moment.Add(time.Minute)
	return f.c.start(f.moment)
}

// TestTheCacheHoldsOnlyTheLatestCompleteListing pins docs/operator-guide.md, "Listing cost":
// a completed listing replaces the cache with exactly the files it listed, and one that does
// not complete leaves it as it was.
func TestTheCacheHoldsOnlyTheLatestCompleteListing(t *testing.T) {
	f := &cacheFixture{moment: time.Unix(1000, 0)}
	first := f.listing()
	first.took("a", stOf(1), 1, "1", nil)
	first.took("b", stOf(2), 1, "2", nil)
	first.took("grown", stOf(3), 2, "3", nil) // read 2 bytes of a 1-byte file: not kept
	first.finish()
	if got := f.paths(); !slices.Equal(got, []string{"a=1", "b=2"}) {
		t.Fatalf("after the first listing the cache holds %q", got)
	}

	second := f.listing()
	if c, _, ok := second.reuse([]byte("a"), resolve.Inode{}, statOf(1)); !ok || c.sha256 != "1" {
		t.Fatal("a was not reused")
	}
	second.finish() // b is gone
	if got := f.paths(); !slices.Equal(got, []string{"a=1"}) {
		t.Fatalf("after a listing without b the cache holds %q", got)
	}

	abandoned := f.listing()
	abandoned.took("c", stOf(4), 1, "4", nil) // never finished
	if got := f.paths(); !slices.Equal(got, []string{"a=1"}) {
		t.Fatalf("an unfinished listing changed the cache to %q", got)
	}
}

// TestAListingCopiesTheCacheOnlyWhenItDiffers pins
// docs/decisions/0083-the-listing-hash-cache-proved-by-a-stat.md: a listing that reuses every
// earlier hash in order keeps the cache as it is, without copying it; any other listing stores
// exactly what it saw, in order, and never holds on to an entry it dropped.
func TestAListingCopiesTheCacheOnlyWhenItDiffers(t *testing.T) {
	cases := []struct {
		rule   string
		list   func(w *hashWalk)
		want   []string
		shared bool // whether the cache is still the earlier generation's array
	}{
		{"reusing every entry in order keeps the cache without a copy", func(w *hashWalk) {
			w.reuse([]byte("a"), resolve.Inode{}, statOf(1))
			w.reuse([]byte("b"), resolve.Inode{}, statOf(2))
			w.reuse([]byte("c"), resolve.Inode{}, statOf(3))
		}, []string{"a=1", "b=2", "c=3"}, true},
		{"a stat that fails the proof and is hashed again is stored in its place", func(w *hashWalk) {
			w.reuse([]byte("a"), resolve.Inode{}, statOf(1))
			if _, _, ok := w.reuse([]byte("b"), resolve.Inode{}, statOf(9)); ok {
				t.Error("b was reused under another inode")
			}
			w.took("b", stOf(9), 1, "9", nil)
			w.reuse([]byte("c"), resolve.Inode{}, statOf(3))
		}, []string{"a=1", "b=9", "c=3"}, false},
		{"a file added in the middle is stored in order", func(w *hashWalk) {
			w.reuse([]byte("a"), resolve.Inode{}, statOf(1))
			w.took("ab", stOf(7), 1, "7", nil)
			w.reuse([]byte("b"), resolve.Inode{}, statOf(2))
			w.reuse([]byte("c"), resolve.Inode{}, statOf(3))
		}, []string{"a=1", "ab=7", "b=2", "c=3"}, false},
		{"a file gone from the middle is dropped", func(w *hashWalk) {
			w.reuse([]byte("a"), resolve.Inode{}, statOf(1))
			w.reuse([]byte("c"), resolve.Inode{}, statOf(3))
		}, []string{"a=1", "c=3"}, false},
		{"files gone from the end are dropped from a copy", func(w *hashWalk) {
			w.reuse([]byte("a"), resolve.Inode{}, statOf(1))
		}, []string{"a=1"}, false},
		{"a path asked about again after a failed open is kept once", func(w *hashWalk) {
			w.reuse([]byte("a"), resolve.Inode{}, statOf(1))
			w.reuse([]byte("b"), resolve.Inode{}, func() (ports.FileStat, bool) { return ports.FileStat{}, false })
			w.reuse([]byte("b"), resolve.Inode{}, statOf(2))
			w.reuse([]byte("c"), resolve.Inode{}, statOf(3))
		}, []string{"a=1", "b=2", "c=3"}, true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			f := &cacheFixture{moment: time.Unix(1000, 0)}
			first := f.listing()
			for i, p := range []string{"a", "b", "c"} {
				first.took(p, stOf(uint64(i+1)), 1, string(rune('1'+i)), nil)
			}
			first.finish()
			earlier := f.c.stored()

			w := f.listing()
			c.list(w)
			w.finish()
			if got := f.paths(); !slices.Equal(got, c.want) {
				t.Errorf("the cache holds %q, want %q", got, c.want)
			}
			latest := f.c.stored()
			if shared := &latest[0] == &earlier[0]; shared != c.shared {
				t.Errorf("the cache shares the earlier array: %v, want %v", shared, c.shared)
			}
			for _, dropped := range latest[len(latest):cap(latest)] {
				if dropped.path != "" {
					t.Errorf("the cache still holds the dropped entry %q", dropped.path)
				}
			}
		})
	}
}

// TestAHashIsReusedNoLongerThanTheMaxAgeAndExpiriesAreSpread pins hashCache.maxAge: a hash
// whose stat still proves the file unchanged is not reused past its expiry, which lies in the
// second half of the max age after the hash was taken, differently for different files; with
// no max age the stat alone decides.
func TestAHashIsReusedNoLongerThanTheMaxAgeAndExpiriesAreSpread(t *testing.T) {
	const maxAge = time.Minute
	hashedAt := time.Unix(100, 0)
	expiries := map[int64]bool{}
	for i := range uint64(200) {
		c := cachedHash{path: "f" + string(rune('a'+i%26)) + string(rune('a'+i/26)), inode: i, hashedAt: hashedAt.UnixNano()}
		at := c.expiresAt(maxAge)
		if at < hashedAt.Add(maxAge/2).UnixNano() || at > hashedAt.Add(maxAge).UnixNano() {
			t.Fatalf("%s expires %v after its hash, want within [%v, %v]", c.path, time.Duration(at-c.hashedAt), maxAge/2, maxAge)
		}
		expiries[at] = true
	}
	if len(expiries) < 150 {
		t.Errorf("200 files share %d expiries: not spread", len(expiries))
	}

	for _, tc := range []struct {
		rule   string
		maxAge time.Duration
		after  time.Duration
		reused bool
	}{
		{"within half the max age the stat decides", maxAge, maxAge / 2, true},
		{"past the max age the hash is taken again", maxAge, maxAge + time.Nanosecond, false},
		{"without a max age the stat alone decides", 0, time.Hour, true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			f := &cacheFixture{c: hashCache{maxAge: tc.maxAge}}
			w := f.c.start(hashedAt)
			w.took("a", stOf(7), 1, "aa", nil)
			w.finish()
			_, _, ok := f.c.start(hashedAt.Add(tc.after)).reuse([]byte("a"), resolve.Inode{}, statOf(7))
			if ok != tc.reused {
				t.Fatalf("reused %v, want %v", ok, tc.reused)
			}
		})
	}
}
