package ports

import (
	"context"
	"io"

	"github.com/resplane/resplane/domain/pathpolicy"
)

// RemoteExport is one service's operator plane seen from its client (docs/http-api.md): the
// listing, and the reads of single files, at one base URL. The service is not trusted: an
// implementation reports what it received and decides nothing beyond the transport. Whether
// a listed path may be written, whether a body matches its etag and how much of it to accept
// is the caller's decision.
//
// Every error it returns is a *refusal.Refusal: service_unreachable for a connection that
// fails, an answer that does not arrive in time or a body that ends before its
// content-length; invalid_listing for a listing 200 whose body is not a listing. A non-200
// answer is not an error: it is reported with its status and its refusal body's fields.
type RemoteExport interface {
	// List sends GET /resources/files and decodes the listing. Entries are reported as sent,
	// in the order sent, without any check of their paths or digests.
	List(ctx context.Context) (RemoteListing, error)
	// Open sends GET /resources/files/<rel>, with each component of rel percent-encoded so
	// that the service decodes exactly rel, and never a cleaned or re-joined form of it. On a
	// 200 it returns the head and the body, which the caller must close; reading the body
	// fails with service_unreachable when the body ends before its content-length or stalls.
	// On any other status the body has already been read (at most 64 KiB) into the answer's
	// error fields, and the returned body is empty.
	Open(ctx context.Context, rel pathpolicy.RelPath) (RemoteRead, io.ReadCloser, error)
	// FilesURL returns the absolute URL of the listing, which every file's URL extends by
	// "/" and its escaped components.
	FilesURL() string
	// FileURL returns the absolute URL Open requests for rel.
	FileURL(rel pathpolicy.RelPath) string
}

// RemoteAnswer is the status of an answer and, for a non-200 whose body is a JSON object, its
// "error" and "message" strings exactly as sent (possibly empty, never checked).
type RemoteAnswer struct {
	Status       int
	ErrorCode    string
	ErrorMessage string
}

// RemoteListing is the answer to a listing request. Only a 200 carries the listing's fields.
type RemoteListing struct {
	RemoteAnswer
	// Raw is the body exactly as received.
	Raw         []byte
	Root        string
	Mode        string
	MaxBytes    int64
	Generation  uint64
	Containment string
	Entries     []RemoteEntry
}

// RemoteEntry is one listed file, as the service described it.
type RemoteEntry struct {
	Path    string
	Size    int64
	MtimeMs int64
	SHA256  string
}

// RemoteRead is the head of the answer to a file read.
type RemoteRead struct {
	RemoteAnswer
	// ContentLength is the announced body length, -1 when none was announced.
	ContentLength int64
	// ETag is the first etag header; HasETag is false when there was none.
	ETag    string
	HasETag bool
	// MtimeMs is x-murmur-mtime-ms; HasMtime is false when it was absent or not an integer.
	MtimeMs  int64
	HasMtime bool
}
