package application

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"

	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/generation"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
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
	trace   ports.TraceSink
}

// NewFiles returns the operator plane. plane is nil when the manifest declares no
// exports.files; every request is then refused no_resource_plane (after the method check).
func NewFiles(plane *ExportPlane, session Session, fs ports.ExportFS, reader *Reader, sink ports.TraceSink) *Files {
	return &Files{plane: plane, session: session, fs: fs, reader: reader, trace: sink}
}

// Listing is the body of a successful listing.
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
// value carries it even when err is a refusal, because every files response reports it.
func (s *Files) List(method string) (generation uint64, listing *Listing, err error) {
	gen := s.session.Generation.Current()
	listing, err = s.list(method, gen)
	event := trace.ResourceList{Generation: gen, Containment: s.session.Containment.String(), Err: err}
	if err == nil {
		event.Root = listing.Root
		event.EntryCount = int64(len(listing.Entries))
		for _, e := range listing.Entries {
			event.TotalBytes += e.Size
		}
	}
	s.trace.Record(event)
	return gen, listing, err
}

func (s *Files) list(method string, gen uint64) (*Listing, error) {
	if err := s.admit(method); err != nil {
		return nil, err
	}
	listing := &Listing{
		Root: s.plane.Root, Mode: ReadOnlyMode, MaxBytes: s.plane.MaxBytes,
		Generation: gen, Containment: s.session.Containment, Entries: []ListedFile{},
	}
	hashBuf := s.reader.pool.get(hashChunk)
	defer s.reader.pool.put(hashBuf)
	h := sha256.New()
	err := s.fs.Walk(s.plane.Root, s.session.Containment, func(path string, f ports.File) error {
		h.Reset()
		n, err := io.CopyBuffer(h, f, hashBuf.bytes)
		if err != nil {
			return nil // a file that cannot be hashed is left out, silently
		}
		listing.Entries = append(listing.Entries, ListedFile{
			Path: path, Size: n, MTimeMs: f.ModTime().UnixMilli(), SHA256: hex.EncodeToString(h.Sum(nil)),
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return listing, nil
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
func (s *Files) Read(ctx context.Context, method, rawPath string) (generation uint64, served *Served, err error) {
	gen := s.session.Generation.Current()
	decoded := pathpolicy.DecodeOnce(rawPath)
	served, err = s.read(ctx, method, decoded)
	event := trace.ResourceRead{
		Path:        decoded, // the trace sink replaces invalid UTF-8
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

// read serves decoded, the request path already percent-decoded once.
func (s *Files) read(ctx context.Context, method, decoded string) (*Served, error) {
	if err := s.admit(method); err != nil {
		return nil, err
	}
	rel, err := pathpolicy.Lower(decoded)
	if err != nil {
		return nil, err
	}
	body, err := openAndRead(ctx, s.fs, s.reader, s.plane, rel, s.session.Containment)
	if err != nil {
		return nil, err
	}
	return &Served{Body: body, Containment: s.session.Containment, ExportRoot: s.plane.Root}, nil
}

// admit applies the checks that precede any path handling: the method, then the declaration.
func (s *Files) admit(method string) error {
	if method != ServedMethod {
		return refusal.New(refusal.MethodNotAllowed)
	}
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
