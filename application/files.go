package application

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strconv"
	"time"

	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/generation"
	"github.com/resplane/resplane/domain/manifest"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/ports"
)

// ServedMethod is the only request method either plane serves; every other method, whatever
// its spelling, is refused method_not_allowed.
const ServedMethod = "GET"

// ExportPlane is one declared export: its root as declared (trimmed, relative to the workdir)
// and its per-file ceiling.
type ExportPlane struct {
	Root     string
	MaxBytes int64
}

// FilesPlane is m's exports.files, nil when it is not declared.
func FilesPlane(m manifest.Manifest) *ExportPlane {
	if f := m.Files; f != nil {
		return &ExportPlane{Root: f.Root.String(), MaxBytes: f.MaxBytes.Int64()}
	}
	return nil
}

// PeerPlane is m's exports.peer_files, nil when it is not declared.
func PeerPlane(m manifest.Manifest) *ExportPlane {
	if p := m.PeerFiles; p != nil {
		return &ExportPlane{Root: p.Root.String(), MaxBytes: p.MaxBytes.Int64()}
	}
	return nil
}

// Session is what every use case reports as provenance: the generation counter shared by both
// planes and the containment class the session achieved.
type Session struct {
	Generation  *generation.Counter
	Containment containment.Class
}

// Files is the operator plane (docs/http-api.md): the listing and the read of one file beneath
// exports.files.root. Every request, refusals and wrong methods included, is traced.
type Files struct {
	plane   *ExportPlane // nil when exports.files is not declared
	session Session
	fs      ports.ExportFS
	reader  *Reader
	clock   ports.Clock
	trace   ports.TraceSink
	// listings holds one token per listing under way, from the start of its walk until its
	// answer is encoded and held (List).
	listings chan struct{}
	hashes   hashCache
}

// MaxListings is how many listings may be under way at once, from the start of the walk until
// the encoded answer is held like a body (Reader.Hold); further listings wait for one to
// finish, for as long as their request lasts. Each holds at most resolve.MaxDepth directories
// open and memory for at most resolve.MaxEntries entries
// (docs/decisions/0068-listing-and-resolution-bounds.md). A listing's turn never waits on its
// client: the answer is sent after the turn has ended, from a reservation that a slow client
// spills or loses (docs/decisions/0140-a-listing-is-sent-like-a-body.md).
const MaxListings = 2

// BoundHashAge makes every listing recompute a file's sha256 no later than maxAge after it was
// taken, whatever the file's stat says (hashCache.maxAge); zero or less leaves the age
// unbounded. Call it before the first listing.
func (s *Files) BoundHashAge(maxAge time.Duration) { s.hashes.maxAge = maxAge }

// LeaseHashes makes every listing take a read lease on each file it hashes, before reading it,
// and reuse a hash taken under a lease only while the lease is unbroken, without the age bound
// (docs/decisions/0175-the-listing-hash-cache-holds-read-leases.md). A file that was open for
// writing when it was hashed is hashed again by the next listing; one that could not be
// leased otherwise keeps the age bound. Call it before the first listing.
func (s *Files) LeaseHashes(leases ports.ReadLeases) { s.hashes.leases = leases }

// ListingCache is the listing hash cache's mode: ListingCacheLease once LeaseHashes was
// given leases, else ListingCacheMaxAge.
func (s *Files) ListingCache() string {
	if s.hashes.leases != nil {
		return ListingCacheLease
	}
	return ListingCacheMaxAge
}

// NewFiles returns the operator plane. plane is nil when the manifest declares no
// exports.files; every request is then refused no_resource_plane (after the method check).
// clock dates the hashes a listing takes, for the listing hash cache.
func NewFiles(plane *ExportPlane, session Session, fs ports.ExportFS, reader *Reader, clock ports.Clock, sink ports.TraceSink) *Files {
	return &Files{
		plane: plane, session: session, fs: fs, reader: reader, clock: clock, trace: sink,
		listings: make(chan struct{}, MaxListings),
	}
}

// Listing is what a successful listing's walk found, handed to the edge's encoder.
type Listing struct {
	Root        string
	Mode        string
	MaxBytes    int64
	Generation  uint64
	Containment containment.Class
	Entries     []ListedFile
}

// ListedFile is one entry of a listing; size, mtime and hash come from one open of the file,
// and Size is the count of bytes hashed.
type ListedFile struct {
	Path    string
	Size    int64
	MTimeMs int64
	SHA256  string
}

// ReadOnlyMode is the only export mode there is.
const ReadOnlyMode = "read-only"

// List answers GET /resources/files. The generation is read once, at the start; the returned
// value carries it even when err is a refusal, because every files response reports it. A
// listing waits for its turn among MaxListings, and is abandoned when ctx ends first. Within
// its turn it walks the export, renders the result with encode (the wire shape is the edge's)
// and holds those bytes like a file body of their size (Reader.Hold, which may wait for room
// too); the turn ends when List returns, before a byte is sent. The caller sends the served
// body and must Release it.
func (s *Files) List(ctx context.Context, req Request, encode func(*Listing) []byte) (generation uint64, served *Served, err error) {
	gen := s.session.Generation.Current()
	event := trace.ResourceList{Generation: gen, Containment: s.session.Containment.String()}
	served, err = s.list(ctx, req, gen, func(l *Listing) []byte {
		event.Root = l.Root
		event.EntryCount = int64(len(l.Entries))
		for _, e := range l.Entries {
			event.TotalBytes += e.Size
		}
		return encode(l)
	})
	if err != nil {
		event = trace.ResourceList{Generation: gen, Containment: event.Containment, Err: err}
	}
	s.trace.Record(event)
	return gen, served, err
}

func (s *Files) list(ctx context.Context, req Request, gen uint64, encode func(*Listing) []byte) (*Served, error) {
	if err := Admit(req); err != nil {
		return nil, err
	}
	if err := s.declared(); err != nil {
		return nil, err
	}
	select {
	case s.listings <- struct{}{}:
	case <-ctx.Done():
		return nil, refusal.WithMessage(refusal.IOError, "The listing was abandoned: its request ended while it waited for one of the "+
			strconv.Itoa(MaxListings)+" listings that may run at once.").Wrapping(ctx.Err())
	}
	defer func() { <-s.listings }()
	listing := &Listing{
		Root: s.plane.Root, Mode: ReadOnlyMode, MaxBytes: s.plane.MaxBytes,
		Generation: gen, Containment: s.session.Containment,
	}
	if err := s.walk(ctx, listing); err != nil {
		return nil, err
	}
	body, err := s.reader.Hold(ForClient(ctx, req.Client), encode(listing))
	if err != nil {
		return nil, err
	}
	return &Served{Body: body, Containment: s.session.Containment, ExportRoot: s.plane.Root}, nil
}

// walk fills listing with the export's regular files. A file the hash cache proves unchanged
// by the stat the walk took without opening it (and, for a hash taken under a lease, by the
// lease), or, under a watched lease quiet since a stat proved it, by that earlier stat and
// its directory entry, is listed from that stat with its earlier hash (hashcache.go) and never
// opened; any other file is opened, leased when the cache takes leases, then read and hashed,
// and listed from the stat of the descriptor it was read from. A file that cannot be read
// whole is io_error: a listing is never shorter than the tree.
func (s *Files) walk(ctx context.Context, listing *Listing) error {
	hashes := s.hashes.start(s.clock.Now())
	listing.Entries = make([]ListedFile, 0, hashes.files()) // never nil: an empty listing is []
	hashBuf := s.reader.pool.get(hashChunk)
	defer s.reader.pool.put(hashBuf)
	h := sha256.New()
	var sum [sha256.Size]byte
	var sumHex [2 * sha256.Size]byte
	add := func(path string, st ports.FileStat, size int64, sha string) {
		listing.Entries = append(listing.Entries, ListedFile{Path: path, Size: size, MTimeMs: st.ModTime.UnixMilli(), SHA256: sha})
	}
	err := s.fs.Walk(ctx, s.plane.Root, s.session.Containment, ports.Visitor{
		Known: func(path []byte, inode resolve.Inode, stat func() (ports.FileStat, bool)) bool {
			c, st, ok := hashes.reuse(path, inode, stat)
			if ok {
				add(c.path, st, c.size, c.sha256)
			}
			return ok
		},
		Visit: func(path string, f ports.File) error {
			st := f.Stat()
			lease, cacheable := hashes.lease(f) // before the first byte is read
			h.Reset()
			n, err := io.CopyBuffer(h, f, hashBuf.bytes)
			if err != nil {
				return readFailure(err)
			}
			hex.Encode(sumHex[:], h.Sum(sum[:0]))
			sha := string(sumHex[:])
			if cacheable {
				hashes.took(path, st, n, sha, lease)
			}
			add(path, st, n, sha)
			return nil
		},
	})
	if err != nil {
		hashes.abandon()
		return err
	}
	hashes.finish()
	return nil
}

// hashChunk is the buffer size a listing streams each file through while hashing it.
const hashChunk = 64 << 10

// Served is a successful read: the body and the provenance the response reports.
type Served struct {
	Body        *Body
	Containment containment.Class
	ExportRoot  string
}

// Read answers GET /resources/files/<rawPath>, where rawPath is the rest of the request target
// exactly as received (not yet decoded). The generation is returned even with a refusal.
func (s *Files) Read(ctx context.Context, req Request, rawPath string) (generation uint64, served *Served, err error) {
	gen := s.session.Generation.Current()
	decoded := pathpolicy.DecodeOnce(rawPath)
	served, err = s.read(ctx, req, decoded)
	event := trace.ResourceRead{
		Path:        decoded, // capped by the event; the trace sink replaces invalid UTF-8
		Generation:  gen,
		Containment: s.session.Containment.String(),
		Err:         err,
	}
	if err == nil {
		event.Bytes, event.SHA256 = served.Body.Size, served.Body.SHA256
	}
	s.trace.Record(event)
	return gen, served, err
}

// read serves decoded, the request path already percent-decoded once. After the checks every
// route shares, a path longer than any that could be served is refused before the declaration
// is looked at, and before the path is lowered.
func (s *Files) read(ctx context.Context, req Request, decoded string) (*Served, error) {
	if err := Admit(req); err != nil {
		return nil, err
	}
	if len(decoded) > pathpolicy.MaxLen {
		return nil, refusal.New(refusal.TargetTooLong)
	}
	if err := s.declared(); err != nil {
		return nil, err
	}
	rel, err := pathpolicy.Lower(decoded)
	if err != nil {
		return nil, err
	}
	body, err := openAndRead(ForClient(ctx, req.Client), s.fs, s.reader, s.plane, rel, s.session.Containment)
	if err != nil {
		return nil, err
	}
	return &Served{Body: body, Containment: s.session.Containment, ExportRoot: s.plane.Root}, nil
}

// declared refuses every request no_resource_plane when exports.files is not declared.
func (s *Files) declared() error {
	if s.plane == nil {
		return refusal.New(refusal.NoResourcePlane)
	}
	return nil
}

// openAndRead is the one read path both planes share: resolve and open beneath the plane's
// root under the class rule, then read once under the plane's ceiling.
func openAndRead(ctx context.Context, fs ports.ExportFS, reader *Reader, plane *ExportPlane, rel pathpolicy.RelPath, class containment.Class) (*Body, error) {
	f, err := fs.OpenFile(plane.Root, rel, class)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return reader.Read(ctx, f, plane.MaxBytes)
}
