package application

import (
	"sync"
	"testing"
	"time"

	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
)

// fakeLease counts its releases.
type fakeLease struct {
	mu       sync.Mutex
	broken   bool
	releases int
}

func (l *fakeLease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.broken && l.releases == 0
}

// Changes reports the fake lease unwatched: every reuse of its file is proved by a stat.
func (l *fakeLease) Changes() (uint64, bool) { return 0, false }

func (l *fakeLease) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releases++
}

func (l *fakeLease) released() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.releases
}

// oneLease hands out the lease it holds.
type oneLease struct{ l *fakeLease }

func (o oneLease) Lease(ports.File) (ports.Lease, error) { return o.l, nil }

func (oneLease) Sync() {}

// leasedFixture is a cache that takes leases.
func leasedFixture() *cacheFixture {
	return &cacheFixture{moment: time.Unix(1000, 0), c: hashCache{leases: oneLease{}}}
}

// hashLeased records, in w, a hash of path (inode, one byte) taken under a new lease, and
// returns the lease; grown makes the read longer than the file, so that it is not recorded.
func (f *cacheFixture) hashLeased(w *hashWalk, path string, inode uint64, grown bool) *fakeLease {
	l := &fakeLease{}
	f.c.leases = oneLease{l}
	held, cacheable := w.lease(nil)
	if !cacheable || held == nil {
		panic("the fake lease was refused")
	}
	n := int64(1)
	if grown {
		n = 2
	}
	w.took(path, stOf(inode), n, path, held)
	return l
}

// TestALeaseIsReleasedOnceNoStoredGenerationListsIt pins hashCache's leases: a lease is held
// while a stored generation, or one a listing still reads, lists its file; it is released
// exactly once, when the last of them lets it go; a listing that fails, or a file not read
// whole, releases the leases taken for it at once.
func TestALeaseIsReleasedOnceNoStoredGenerationListsIt(t *testing.T) {
	t.Run("a file the next listing no longer lists has its lease released as it ends", func(t *testing.T) {
		f := leasedFixture()
		first := f.listing()
		a := f.hashLeased(first, "a", 1, false)
		b := f.hashLeased(first, "b", 2, false)
		first.finish()
		second := f.listing()
		if _, _, ok := second.reuse([]byte("a"), resolve.Inode{}, statOf(1)); !ok {
			t.Fatal("a held lease with the same stat was not reused")
		}
		if b.released() != 0 {
			t.Fatal("b's lease was released while its listing is stored")
		}
		second.finish()
		if a.released() != 0 || b.released() != 1 {
			t.Fatalf("releases: a %d (want 0), b %d (want 1)", a.released(), b.released())
		}
	})

	t.Run("a broken lease is not reused and the file's new lease replaces it", func(t *testing.T) {
		f := leasedFixture()
		first := f.listing()
		old := f.hashLeased(first, "a", 1, false)
		first.finish()
		old.mu.Lock()
		old.broken = true
		old.mu.Unlock()
		second := f.listing()
		if _, _, ok := second.reuse([]byte("a"), resolve.Inode{}, statOf(1)); ok {
			t.Fatal("a broken lease's hash was reused")
		}
		renewed := f.hashLeased(second, "a", 1, false)
		second.finish()
		if old.released() != 1 || renewed.released() != 0 {
			t.Fatalf("releases: the broken lease %d (want 1), the new one %d (want 0)", old.released(), renewed.released())
		}
		if c, _, ok := f.listing().reuse([]byte("a"), resolve.Inode{}, statOf(1)); !ok || c.lease.Lease != renewed {
			t.Fatal("the next listing does not reuse the hash under the new lease")
		}
	})

	t.Run("a failed listing releases what it took and keeps what is stored", func(t *testing.T) {
		f := leasedFixture()
		first := f.listing()
		kept := f.hashLeased(first, "a", 1, false)
		first.finish()
		failed := f.listing()
		failed.reuse([]byte("a"), resolve.Inode{}, statOf(1))
		taken := f.hashLeased(failed, "b", 2, false)
		failed.abandon()
		if kept.released() != 0 || taken.released() != 1 {
			t.Fatalf("releases: the stored lease %d (want 0), the failed listing's %d (want 1)", kept.released(), taken.released())
		}
	})

	t.Run("a lease of a file not read whole is released as the listing ends", func(t *testing.T) {
		f := leasedFixture()
		w := f.listing()
		grown := f.hashLeased(w, "a", 1, true)
		w.finish()
		if grown.released() != 1 || len(f.c.stored()) != 0 {
			t.Fatalf("the grown file's lease was released %d times (want 1); the cache holds %d entries (want 0)", grown.released(), len(f.c.stored()))
		}
	})

	t.Run("a generation a listing still reads keeps its leases until that listing stores them", func(t *testing.T) {
		f := leasedFixture()
		first := f.listing()
		a := f.hashLeased(first, "a", 1, false)
		first.finish()
		dropping, reusing := f.listing(), f.listing() // both read the first generation
		dropping.finish()                             // no longer lists a
		if a.released() != 0 {
			t.Fatal("a's lease was released while a listing still reads the generation listing it")
		}
		if _, _, ok := reusing.reuse([]byte("a"), resolve.Inode{}, statOf(1)); !ok {
			t.Fatal("a was not reused")
		}
		reusing.finish() // stores a again, under its lease
		if a.released() != 0 || !a.Held() {
			t.Fatal("a's lease was released though the stored generation lists it")
		}
		f.listing().finish() // no longer lists a
		if a.released() != 1 {
			t.Fatalf("a's lease was released %d times once no generation lists it, want 1", a.released())
		}
	})

	t.Run("two listings that hash a file each release the lease the other stored once", func(t *testing.T) {
		f := leasedFixture()
		w1, w2 := f.listing(), f.listing()
		l1 := f.hashLeased(w1, "a", 1, false)
		l2 := f.hashLeased(w2, "a", 1, false)
		w1.finish()
		w2.finish() // replaces w1's generation
		if l1.released() != 1 || l2.released() != 0 {
			t.Fatalf("releases: the replaced lease %d (want 1), the stored one %d (want 0)", l1.released(), l2.released())
		}
	})
}

// countingLeases hands out a new fakeLease at each Lease and remembers them all.
type countingLeases struct {
	mu  sync.Mutex
	all []*fakeLease
}

func (c *countingLeases) Lease(ports.File) (ports.Lease, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := &fakeLease{}
	c.all = append(c.all, l)
	return l, nil
}

func (*countingLeases) Sync() {}

// TestConcurrentListingsReleaseEveryLeaseOnceAndNoneStillListed pins hashCache's leases under
// listings running at once, each reusing, re-hashing and dropping files of the generation it
// read while others store theirs: once they are done, every lease the stored generation lists
// is held and unreleased, and every other one was released exactly once.
func TestConcurrentListingsReleaseEveryLeaseOnceAndNoneStillListed(t *testing.T) {
	leases := &countingLeases{}
	c := &hashCache{leases: leases}
	paths := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var wg sync.WaitGroup
	for worker := range 4 {
		wg.Go(func() {
			for round := range 200 {
				w := c.start(time.Unix(1000+int64(round), 0))
				for i, p := range paths {
					if (i+round+worker)%5 == 0 {
						continue // gone from this listing
					}
					inode := uint64(i + 1)
					if (i*7+round+worker)%3 != 0 {
						if _, _, ok := w.reuse([]byte(p), resolve.Inode{}, statOf(inode)); ok {
							continue
						}
					}
					held, _ := w.lease(nil)
					w.took(p, stOf(inode), 1, p, held)
				}
				if round%17 == 0 {
					w.abandon()
				} else {
					w.finish()
				}
			}
		})
	}
	wg.Wait()
	listed := map[*fakeLease]bool{}
	for _, e := range c.stored() {
		listed[e.lease.Lease.(*fakeLease)] = true
	}
	for i, l := range leases.all {
		want := 1
		if listed[l] {
			want = 0
		}
		if got := l.released(); got != want {
			t.Errorf("lease %d (listed by the stored generation: %v) was released %d times, want %d", i, listed[l], got, want)
		}
	}
	if len(leases.all) < 100 {
		t.Fatalf("only %d leases were taken: the listings did not exercise the cache", len(leases.all))
	}
}
