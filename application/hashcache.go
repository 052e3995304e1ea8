package application

import (
	"sync/atomic"
	"time"

	"github.com/resplane/resplane/ports"
)

// RacyWindow is how much older than the moment a hash was taken a file's modification and
// change times must be for a later listing to reuse that hash: the filesystem's timestamp
// granularity, taken as 2 s whatever the filesystem. It covers FAT's 2 s, the 1 s of ext3 and
// HFS+, and the clock tick (at most 10 ms) by which a kernel's file timestamps lag its wall
// clock; a change made in the same tick as the previous one leaves the times as they were, so
// only times older than the window prove that nothing changed after the hash was taken
// (docs/decisions.md, "The listing hash cache").
const RacyWindow = 2 * time.Second

// fileKey identifies an inode.
type fileKey struct{ device, inode uint64 }

func keyOf(st ports.FileStat) fileKey { return fileKey{st.Device, st.Inode} }

// cachedHash is the sha256 of one version of a file and the moment it was taken, with the
// times in Unix nanoseconds: an entry is 64 bytes, so the cache of a listing of
// resolve.MaxEntries files stays under 10 MB.
type cachedHash struct {
	size, mtime, ctime int64
	// hashedAt is the moment the listing that read the bytes started: no later than the open
	// they were read from.
	hashedAt int64
	sum      [32]byte
}

// provesUnchanged reports whether a file now open with stat st is provably the version c was
// taken of, by git's racy rule: the same size, modification and change time to the
// nanosecond (and inode, the cache's key), and both times older than the moment the hash was
// taken by more than RacyWindow. A write after that moment would have moved the times past
// the window, so the file's bytes now are the bytes hashed then. Two changes within one
// timestamp tick leave the times as they were; the window makes sure no hash taken within
// that tick is ever reused.
func (c cachedHash) provesUnchanged(st ports.FileStat) bool {
	settled := c.hashedAt - int64(RacyWindow)
	return st.Size == c.size && st.ModTime.UnixNano() == c.mtime && st.ChangeTime.UnixNano() == c.ctime &&
		c.mtime < settled && c.ctime < settled
}

// hashCache holds the hashes the latest complete listing took or reused, keyed by inode, so
// that its memory follows the tree: a file no longer listed is forgotten at the next listing.
// Listings running at once each read the same earlier generation and the last to finish
// replaces it.
type hashCache struct {
	latest atomic.Pointer[map[fileKey]cachedHash]
}

// start begins one listing's use of the cache at moment, which must be no later than any open
// the listing makes.
func (c *hashCache) start(moment time.Time) *hashWalk {
	w := &hashWalk{cache: c, moment: moment.UnixNano(), seen: map[fileKey]cachedHash{}}
	if earlier := c.latest.Load(); earlier != nil {
		w.earlier = *earlier
		w.seen = make(map[fileKey]cachedHash, len(w.earlier))
	}
	return w
}

// hashWalk is one listing's use of the cache.
type hashWalk struct {
	cache   *hashCache
	moment  int64
	earlier map[fileKey]cachedHash
	// seen is what this listing took or reused; it becomes the cache when the listing ends.
	seen map[fileKey]cachedHash
}

// reuse returns the size and hash of the file open with stat st when an earlier hash proves
// it unchanged (from an earlier listing, or from this one for a file listed twice, through a
// hard link or a symlink).
func (w *hashWalk) reuse(st ports.FileStat) (size int64, sum [32]byte, ok bool) {
	key := keyOf(st)
	c, ok := w.seen[key]
	if !ok {
		c, ok = w.earlier[key]
	}
	if !ok || !c.provesUnchanged(st) {
		return 0, sum, false
	}
	w.seen[key] = c
	return c.size, c.sum, true
}

// took records the hash of the n bytes read from the file open with stat st. A file that was
// not read whole (it changed while it was read) is not recorded.
func (w *hashWalk) took(st ports.FileStat, n int64, sum [32]byte) {
	if n == st.Size {
		w.seen[keyOf(st)] = cachedHash{
			size: st.Size, mtime: st.ModTime.UnixNano(), ctime: st.ChangeTime.UnixNano(), hashedAt: w.moment, sum: sum,
		}
	}
}

// files is how many files the latest listing hashed or reused: what this one will likely see.
func (w *hashWalk) files() int { return len(w.earlier) }

// finish makes what this listing took and reused the cache.
func (w *hashWalk) finish() { w.cache.latest.Store(&w.seen) }
