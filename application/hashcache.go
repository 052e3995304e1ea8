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

// cachedHash is the sha256 one listing took of the file it listed under path, with what the
// file's descriptor said when it was opened (times in Unix nanoseconds) and the moment the
// hash was taken: about 100 bytes, the path's bytes being the listing's own.
type cachedHash struct {
	path               string
	device, inode      uint64
	size, mtime, ctime int64
	// hashedAt is the moment the listing that read the bytes started: no later than the open
	// they were read from.
	hashedAt int64
	sum      [32]byte
}

// provesUnchanged reports whether a file now open with stat st is provably the version c was
// taken of, by git's racy rule: the same device, inode, size, modification and change time
// to the nanosecond, and both times older than the moment the hash was taken by more than
// RacyWindow. A write after that moment would have moved the times past the window, so the
// file's bytes now are the bytes hashed then. Two changes within one timestamp tick leave
// the times as they were; the window makes sure no hash taken within that tick is ever
// reused.
func (c *cachedHash) provesUnchanged(st ports.FileStat) bool {
	settled := c.hashedAt - int64(RacyWindow)
	return st.Device == c.device && st.Inode == c.inode && st.Size == c.size &&
		st.ModTime.UnixNano() == c.mtime && st.ChangeTime.UnixNano() == c.ctime &&
		c.mtime < settled && c.ctime < settled
}

// hashCache holds the hashes the latest complete listing took or reused, in the listing's
// order (bytewise by path), so that its memory follows the tree: a file no longer listed is
// forgotten at the next listing. A listing walks the files in that same order, so it finds a
// file's earlier hash by moving a cursor forward, never by a lookup. Listings running at once
// each read the same earlier generation and the last to finish replaces it.
type hashCache struct {
	latest atomic.Pointer[[]cachedHash]
}

// start begins one listing's use of the cache at moment, which must be no later than any open
// the listing makes.
func (c *hashCache) start(moment time.Time) *hashWalk {
	w := &hashWalk{cache: c, moment: moment.UnixNano()}
	if earlier := c.latest.Load(); earlier != nil {
		w.earlier = *earlier
		w.seen = make([]cachedHash, 0, len(w.earlier))
	}
	return w
}

// hashWalk is one listing's use of the cache.
type hashWalk struct {
	cache   *hashCache
	moment  int64
	earlier []cachedHash
	next    int // the first entry of earlier not yet passed
	// seen is what this listing took or reused; it becomes the cache when the listing ends.
	seen []cachedHash
}

// files is how many files the latest listing hashed or reused: what this one will likely see.
func (w *hashWalk) files() int { return len(w.earlier) }

// reuse returns the size and hash of the file listed under path and open with stat st, when
// the earlier listing's hash of the file under that path proves it unchanged. Paths must come
// in the listing's order.
func (w *hashWalk) reuse(path string, st ports.FileStat) (size int64, sum [32]byte, ok bool) {
	for w.next < len(w.earlier) && w.earlier[w.next].path < path {
		w.next++
	}
	if w.next == len(w.earlier) || w.earlier[w.next].path != path {
		return 0, sum, false
	}
	c := &w.earlier[w.next]
	w.next++
	if !c.provesUnchanged(st) {
		return 0, sum, false
	}
	w.seen = append(w.seen, *c)
	return c.size, c.sum, true
}

// took records the hash of the n bytes read from the file listed under path and open with stat
// st. A file that was not read whole (it changed while it was read) is not recorded.
func (w *hashWalk) took(path string, st ports.FileStat, n int64, sum [32]byte) {
	if n == st.Size {
		w.seen = append(w.seen, cachedHash{
			path: path, device: st.Device, inode: st.Inode, size: st.Size,
			mtime: st.ModTime.UnixNano(), ctime: st.ChangeTime.UnixNano(), hashedAt: w.moment, sum: sum,
		})
	}
}

// finish makes what this listing took and reused the cache.
func (w *hashWalk) finish() { w.cache.latest.Store(&w.seen) }
