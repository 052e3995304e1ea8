package application

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
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
// (docs/decisions/0083-the-listing-hash-cache-proved-by-a-stat.md).
const RacyWindow = 2 * time.Second

// ListingCacheMaxAge is the listing hash cache's mode as the ready line and GET /v1/status
// report it ("listing_cache"): a cached hash is reused only while its stat proves the file
// unchanged and for at most --hash-cache-max-age after it was taken (Files.BoundHashAge).
// The service takes no read lease, so "lease" is never in force.
const ListingCacheMaxAge = "max-age"

// cachedHash is the sha256 one listing took of the file it listed under path, with what the
// file's descriptor said when it was opened (times in Unix nanoseconds) and the moment the
// hash was taken: about 150 bytes, the path's not counted; the path and the hex are strings
// the listings share.
type cachedHash struct {
	path               string
	device, inode      uint64
	size, mtime, ctime int64
	// hashedAt is the moment the listing that read the bytes started: no later than the open
	// they were read from.
	hashedAt int64
	sha256   string // lowercase hex, as listed
}

// provesUnchanged reports whether a file whose stat is st is provably the version c was
// taken of, by git's racy rule: the same device, inode, size, modification and change time
// to the nanosecond, and both times older than the moment the hash was taken by more than
// RacyWindow. A write after that moment would have moved the times past the window, so the
// file's bytes now are the bytes hashed then. Two changes within one timestamp tick leave
// the times as they were; the window makes sure no hash taken within that tick is ever
// reused.
func (c *cachedHash) provesUnchanged(st ports.FileStat) bool {
	return c.sameStat(st) && c.mtime < c.hashedAt-int64(RacyWindow) && c.ctime < c.hashedAt-int64(RacyWindow)
}

// sameStat reports whether st is the stat c was taken with.
func (c *cachedHash) sameStat(st ports.FileStat) bool {
	return st.Device == c.device && st.Inode == c.inode && st.Size == c.size &&
		st.ModTime.UnixNano() == c.mtime && st.ChangeTime.UnixNano() == c.ctime
}

// expiresAt is the moment (Unix nanoseconds) after which c is not reused whatever the file's
// stat says, under a bound of maxAge: a write through a shared writable mapping that is
// already dirty moves neither time, so the stat cannot prove such a file unchanged. The
// bound is spread over its second half, by a number drawn from the file's path and inode,
// so that files hashed by one listing are not all hashed again by the same later one
// (docs/decisions/0132-hash-cache-max-age-60s-spread-over-its-second-half.md).
func (c *cachedHash) expiresAt(maxAge time.Duration) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(c.path))
	var inode [8]byte
	binary.LittleEndian.PutUint64(inode[:], c.inode)
	_, _ = h.Write(inode[:])
	half := int64(maxAge / 2)
	return c.hashedAt + half + int64(h.Sum64()%uint64(half+1))
}

// hashCache holds the hashes the latest complete listing took or reused, in the listing's
// order (bytewise by path), so that its memory follows the tree: a file no longer listed is
// forgotten at the next listing. A listing walks the files in that same order, so it finds a
// file's earlier hash by moving a cursor forward, never by a lookup. Listings running at once
// each read the same earlier generation and the last to finish replaces it. A generation is
// never changed once stored.
type hashCache struct {
	latest atomic.Pointer[[]cachedHash]
	// maxAge, when positive, bounds how long after it was taken a hash is reused
	// (cachedHash.expiresAt).
	maxAge time.Duration
}

// start begins one listing's use of the cache at moment, which must be no later than any open
// the listing makes.
func (c *hashCache) start(moment time.Time) *hashWalk {
	w := &hashWalk{cache: c, moment: moment.UnixNano()}
	if earlier := c.latest.Load(); earlier != nil {
		w.earlier = *earlier
	}
	return w
}

// hashWalk is one listing's use of the cache.
type hashWalk struct {
	cache   *hashCache
	moment  int64
	earlier []cachedHash
	next    int // the first entry of earlier not yet passed
	// What this listing took or reused becomes the cache when the listing ends. While it is
	// exactly earlier[:kept], the entries reused one after the other from the start, seen is
	// nil and nothing is copied: a listing of an unchanged tree builds no new cache.
	kept int
	seen []cachedHash
}

// files is how many files the latest listing hashed or reused: what this one will likely see.
func (w *hashWalk) files() int { return len(w.earlier) }

// reuse returns the earlier listing's hash of the file listed under path, and the file's stat,
// when there is one and stat proves the file unchanged since (provesUnchanged). It calls stat
// only when the earlier listing listed a file under path. Paths must come in the listing's
// order; the same path may be asked about again.
func (w *hashWalk) reuse(path []byte, stat func() (ports.FileStat, bool)) (*cachedHash, ports.FileStat, bool) {
	for w.next < len(w.earlier) && w.earlier[w.next].path < string(path) {
		w.next++
	}
	if w.next == len(w.earlier) || w.earlier[w.next].path != string(path) {
		return nil, ports.FileStat{}, false
	}
	c := &w.earlier[w.next]
	if w.cache.maxAge > 0 && w.moment > c.expiresAt(w.cache.maxAge) {
		return nil, ports.FileStat{}, false
	}
	st, ok := stat()
	if !ok || !c.provesUnchanged(st) {
		return nil, ports.FileStat{}, false
	}
	if w.seen == nil && w.next == w.kept {
		w.kept++
	} else {
		w.record(*c)
	}
	return c, st, true
}

// took records the hash (lowercase hex) of the n bytes read from the file listed under path
// and open with stat st. A file that was not read whole (it changed while it was read) is not
// recorded.
func (w *hashWalk) took(path string, st ports.FileStat, n int64, sha256 string) {
	if n == st.Size {
		w.record(cachedHash{
			path: path, device: st.Device, inode: st.Inode, size: st.Size,
			mtime: st.ModTime.UnixNano(), ctime: st.ChangeTime.UnixNano(), hashedAt: w.moment, sha256: sha256,
		})
	}
}

// record appends c to what this listing saw, copying the entries it kept first.
func (w *hashWalk) record(c cachedHash) {
	if w.seen == nil {
		w.seen = make([]cachedHash, w.kept, len(w.earlier)+1)
		copy(w.seen, w.earlier)
	}
	w.seen = append(w.seen, c)
}

// finish makes what this listing took and reused the cache. A listing that reused every
// earlier entry in order leaves the cache as it is; one that kept a part of them only stores
// a copy of that part, so that the entries it dropped are not held.
func (w *hashWalk) finish() {
	seen := w.seen
	switch {
	case seen != nil:
	case w.kept == len(w.earlier):
		seen = w.earlier
	default:
		seen = slices.Clone(w.earlier[:w.kept])
	}
	w.cache.latest.Store(&seen)
}
