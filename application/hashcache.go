package application

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resplane/resplane/domain/resolve"
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

// The listing hash cache's modes, as the ready line and GET /v1/status report them
// ("listing_cache", Files.ListingCache).
const (
	// ListingCacheLease: the service takes read leases (Files.LeaseHashes). A hash taken under
	// a lease is reused while its stat proves the file unchanged and the lease is unbroken,
	// however old it is, and without the stat while the lease's watch reports no change since
	// a stat proved it (cachedHash.quiet); a file that was open for writing when it was hashed
	// is hashed again at every listing; any other file the service could not lease keeps the
	// max-age bound.
	ListingCacheLease = "lease"
	// ListingCacheMaxAge: no leases. A cached hash is reused only while its stat proves the
	// file unchanged and for at most --hash-cache-max-age after it was taken
	// (Files.BoundHashAge).
	ListingCacheMaxAge = "max-age"
)

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
	// lease, when set, is the read lease held on the file from before its bytes were read;
	// nil when the file could not be leased (or no leases are taken), and the hash then has
	// the age bound.
	lease *heldLease
	// proven is set once a stat taken after the lease was (and while its watch is) in place
	// proved the entry unchanged, and changes is the lease's Changes read just before that
	// stat: while the count stays that, the stat still holds (quiet).
	proven  bool
	changes uint64
}

// heldLease is a read lease that the generations listing its file share: it is released
// when the last of them lets it go, and only then.
type heldLease struct {
	ports.Lease
	// refs counts the generations that list it; each lists it while stored or read by a
	// listing (hashGeneration.refs).
	refs atomic.Int32
}

// hold adds a generation that lists the lease; it is called only while another generation
// holds it, or for a lease just taken.
func (l *heldLease) hold() { l.refs.Add(1) }

// drop lets one generation go, and releases the lease after the last.
func (l *heldLease) drop() {
	if l.refs.Add(-1) == 0 {
		l.Release()
	}
}

// reusable reports whether c may be listed again by a listing that starts at moment, the
// file's stat, and the entry the new listing keeps for it (c itself, or c with a later proof).
// c is reusable without a stat when it is quiet (its proof still holds, and the file's entry
// names the inode c was taken of). Otherwise the stat must prove the file unchanged
// (provesUnchanged), and either c's lease be still unbroken, or c have no lease and its age
// bound (maxAge, when positive) not have passed. stat is called only when the age allows
// reuse, and the lease asked only when the stat proves; a watched lease's count is read
// before the stat, and kept with the entry as its proof.
func (c *cachedHash) reusable(moment int64, maxAge time.Duration, inode resolve.Inode, stat func() (ports.FileStat, bool)) (ports.FileStat, cachedHash, bool) {
	if c.quiet(inode) {
		return c.stat(), *c, true
	}
	if c.lease == nil && maxAge > 0 && moment > c.expiresAt(maxAge) {
		return ports.FileStat{}, cachedHash{}, false
	}
	var changes uint64
	var watched bool
	if c.lease != nil {
		changes, watched = c.lease.Changes()
	}
	st, ok := stat()
	if !ok || !c.provesUnchanged(st) || c.lease != nil && !c.lease.Held() {
		return ports.FileStat{}, cachedHash{}, false
	}
	kept := *c
	kept.proven, kept.changes = watched, changes
	return st, kept, true
}

// quiet reports whether c is provably unchanged without a stat: a stat proved it (proven,
// which also means the racy rule held, by c's own times, which nothing changes), its lease
// is still unbroken, no change to the inode was reported since that stat (the watched
// count is the one read before it), and inode, what the file's directory entry names, is
// the inode c was taken of, on c's device. The lease pins that inode, so no other file can
// take its number while the lease is held; an entry's device is its directory's, so a file
// on another filesystem than its directory (a mount) is never quiet.
func (c *cachedHash) quiet(inode resolve.Inode) bool {
	if !c.proven || inode.Number != c.inode || inode.Device != c.device || inode.Number == 0 || !c.lease.Held() {
		return false
	}
	changes, watched := c.lease.Changes()
	return watched && changes == c.changes
}

// stat is the FileStat c was taken with.
func (c *cachedHash) stat() ports.FileStat {
	return ports.FileStat{
		Device: c.device, Inode: c.inode, Size: c.size,
		ModTime: time.Unix(0, c.mtime), ChangeTime: time.Unix(0, c.ctime),
	}
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
// forgotten at the next listing, and its lease released. A listing walks the files in that
// same order, so it finds a file's earlier hash by moving a cursor forward, never by a
// lookup. Listings running at once each read the same earlier generation and the last to
// finish replaces it. A generation is never changed once stored; it lets its leases go when
// it is neither stored nor read by a listing any more.
type hashCache struct {
	mu     sync.Mutex
	latest *hashGeneration // guarded by mu
	// maxAge, when positive, bounds how long after it was taken a hash without a lease is
	// reused (cachedHash.expiresAt).
	maxAge time.Duration
	// leases, when set, takes a read lease on each file a listing hashes.
	leases ports.ReadLeases
}

// hashGeneration is the hashes one listing stored.
type hashGeneration struct {
	entries []cachedHash
	refs    int // guarded by hashCache.mu: 1 while stored, and 1 per listing reading it
}

// start begins one listing's use of the cache at moment, which must be no later than any open
// the listing makes, and brings the leases' counts up to date (ReadLeases.Sync): a change
// completed before the listing started is seen by it. The listing must end with finish or
// abandon.
func (c *hashCache) start(moment time.Time) *hashWalk {
	w := &hashWalk{cache: c, moment: moment.UnixNano()}
	if c.leases != nil {
		c.leases.Sync()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.latest; g != nil {
		g.refs++
		w.from, w.earlier = g, g.entries
	}
	return w
}

// let lets one holder of g go (g may be nil); after the last, g lets its leases go.
func (c *hashCache) let(g *hashGeneration) {
	if g == nil {
		return
	}
	c.mu.Lock()
	g.refs--
	last := g.refs == 0
	c.mu.Unlock()
	if last {
		for i := range g.entries {
			if l := g.entries[i].lease; l != nil {
				l.drop()
			}
		}
	}
}

// hashWalk is one listing's use of the cache.
type hashWalk struct {
	cache   *hashCache
	moment  int64
	from    *hashGeneration // the generation earlier is, held until the listing ends; nil when none
	earlier []cachedHash
	taken   []*heldLease // the leases this listing took
	next    int          // the first entry of earlier not yet passed
	// What this listing took or reused becomes the cache when the listing ends. While it is
	// exactly earlier[:kept], the entries reused one after the other from the start, seen is
	// nil and nothing is copied: a listing of an unchanged tree builds no new cache.
	kept int
	seen []cachedHash
}

// files is how many files the latest listing hashed or reused: what this one will likely see.
func (w *hashWalk) files() int { return len(w.earlier) }

// reuse returns the earlier listing's hash of the file listed under path, whose directory
// entry names inode, and the file's stat, when there is one and it is reusable
// (cachedHash.reusable). It calls stat only when the earlier listing listed a file under
// path. Paths must come in the listing's order; the same path may be asked about again.
func (w *hashWalk) reuse(path []byte, inode resolve.Inode, stat func() (ports.FileStat, bool)) (*cachedHash, ports.FileStat, bool) {
	for w.next < len(w.earlier) && w.earlier[w.next].path < string(path) {
		w.next++
	}
	if w.next == len(w.earlier) || w.earlier[w.next].path != string(path) {
		return nil, ports.FileStat{}, false
	}
	c := &w.earlier[w.next]
	st, kept, ok := c.reusable(w.moment, w.cache.maxAge, inode, stat)
	if !ok {
		return nil, ports.FileStat{}, false
	}
	if w.seen == nil && w.next == w.kept && kept.sameProof(c) {
		w.kept++
	} else {
		w.record(kept)
	}
	return c, st, true
}

// sameProof reports whether c keeps the proof d has.
func (c *cachedHash) sameProof(d *cachedHash) bool {
	return c.proven == d.proven && c.changes == d.changes
}

// lease takes a read lease on f, the file about to be read and hashed, when the cache takes
// leases. cacheable is false when f is open for writing (ports.ErrOpenForWriting): a writer
// holds it, through a mapping perhaps, so no stat can prove its hash later. A file that
// cannot be leased for any other reason is cacheable without a lease, with the age bound.
func (w *hashWalk) lease(f ports.File) (lease *heldLease, cacheable bool) {
	if w.cache.leases == nil {
		return nil, true
	}
	l, err := w.cache.leases.Lease(f)
	if err != nil {
		return nil, !errors.Is(err, ports.ErrOpenForWriting)
	}
	held := &heldLease{Lease: l}
	w.taken = append(w.taken, held)
	return held, true
}

// took records the hash (lowercase hex) of the n bytes read from the file listed under path
// and open with stat st, under lease (nil for none). A file that was not read whole (it
// changed while it was read) is not recorded.
func (w *hashWalk) took(path string, st ports.FileStat, n int64, sha256 string, lease *heldLease) {
	if n == st.Size {
		w.record(cachedHash{
			path: path, device: st.Device, inode: st.Inode, size: st.Size,
			mtime: st.ModTime.UnixNano(), ctime: st.ChangeTime.UnixNano(), hashedAt: w.moment, sha256: sha256,
			lease: lease,
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
// earlier entry in order stores the earlier generation again; one that kept a part of them
// only stores a copy of that part, so that the entries it dropped are not held. The new
// generation holds every lease it lists before the one it replaces, and the one this listing
// read, let theirs go; a lease this listing took and did not record is released.
func (w *hashWalk) finish() {
	g := w.from
	switch {
	case w.seen != nil:
		g = &hashGeneration{entries: w.seen}
	case w.kept == len(w.earlier) && g != nil:
	default:
		g = &hashGeneration{entries: slices.Clone(w.earlier[:w.kept])}
	}
	if g != w.from {
		for i := range g.entries {
			if l := g.entries[i].lease; l != nil {
				l.hold()
			}
		}
	}
	w.releaseUnlisted()
	w.cache.mu.Lock()
	replaced := w.cache.latest
	g.refs++
	w.cache.latest = g
	w.cache.mu.Unlock()
	w.cache.let(replaced)
	w.cache.let(w.from)
	w.from = nil
}

// abandon ends a listing that stores nothing (it failed): the leases it took are released,
// and the generation it read is let go.
func (w *hashWalk) abandon() {
	w.releaseUnlisted()
	w.cache.let(w.from)
	w.from = nil
}

// releaseUnlisted releases the leases this listing took that no generation holds. It runs
// before the listing's generation is stored, while no other listing can see those leases.
func (w *hashWalk) releaseUnlisted() {
	for _, l := range w.taken {
		if l.refs.Load() == 0 {
			l.Release()
		}
	}
	w.taken = nil
}
