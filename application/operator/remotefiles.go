package operator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
)

// RemoteFiles is the operator's client of one service's operator plane (docs/operator-guide.md,
// "Pulling outputs"): it lists the export and fetches single files, verified, onto a Landing.
// The service is not trusted: a refusal it sends keeps its code only when that code is
// plausible, its message is stripped of control characters, and a body is landed only when it
// matches its etag.
type RemoteFiles struct {
	remote ports.RemoteExport
}

// NewRemoteFiles returns the client over remote.
func NewRemoteFiles(remote ports.RemoteExport) *RemoteFiles {
	return &RemoteFiles{remote: remote}
}

// Unlimited is the limit that accepts a body of any length.
const Unlimited = int64(1<<63 - 1)

// List fetches the listing. A non-200 is returned as the service's refusal. A listing with
// more entries than a service ever lists (resolve.MaxEntries) is refused whole,
// invalid_listing: no service produced it, and nothing of it is acted on.
func (u *RemoteFiles) List(ctx context.Context) (ports.RemoteListing, error) {
	listing, err := u.remote.List(ctx)
	if err != nil {
		return ports.RemoteListing{}, err
	}
	if listing.Status != 200 {
		return ports.RemoteListing{}, serviceRefusal(listing.RemoteAnswer)
	}
	if n := len(listing.Entries); n > resolve.MaxEntries {
		return ports.RemoteListing{}, refusal.WithMessage(refusal.InvalidListing, "The listing has "+strconv.Itoa(n)+
			" entries; a service lists at most "+strconv.Itoa(resolve.MaxEntries)+", so none of it was used.")
	}
	return listing, nil
}

// maxListedComponents is the most components a listed path can have: a file in a directory
// resolve.MaxDepth levels beneath the export root.
const maxListedComponents = resolve.MaxDepth + 1

// lowerListed lowers a listed path with the service's own rules (pathpolicy.Lower, no
// decoding: a listing carries paths as they are) and applies the service's own bounds: no
// longer than pathpolicy.MaxLen bytes, no deeper than a listing descends. A path that fails
// is refused with what a client may print, and nothing is created for it.
func lowerListed(path string) (pathpolicy.RelPath, *refusal.Refusal) {
	if len(path) > pathpolicy.MaxLen {
		return pathpolicy.RelPath{}, refusal.WithMessage(refusal.InvalidListing, "The listed path is "+strconv.Itoa(len(path))+
			" bytes long; a service serves none longer than "+strconv.Itoa(pathpolicy.MaxLen)+", so it was not written.")
	}
	rel, err := pathpolicy.Lower(path)
	if err != nil {
		return pathpolicy.RelPath{}, refusal.WithMessage(refusal.UnsafePath,
			`The listed path is empty or absolute, or has an empty, "." or ".." component; it was not written.`)
	}
	if n := len(rel.Components()); n > maxListedComponents {
		return pathpolicy.RelPath{}, refusal.WithMessage(refusal.InvalidListing, "The listed path has "+strconv.Itoa(n)+
			" components; a service lists none deeper than "+strconv.Itoa(maxListedComponents)+", so it was not written.")
	}
	return rel, nil
}

// FilesURL is the URL of the listing.
func (u *RemoteFiles) FilesURL() string { return u.remote.FilesURL() }

// FileURL is the URL rel is read from.
func (u *RemoteFiles) FileURL(rel pathpolicy.RelPath) string { return u.remote.FileURL(rel) }

// PathOf returns the path whose URL is fileURL, decoded once and lowered exactly as the
// service would (pathpolicy.Parse), so a path the service would refuse is refused here,
// outside_root, without a request. A URL that is not a file's on this service is not_found.
func (u *RemoteFiles) PathOf(fileURL string) (pathpolicy.RelPath, error) {
	rest, found := strings.CutPrefix(fileURL, u.remote.FilesURL()+"/")
	if !found {
		return pathpolicy.RelPath{}, refusal.WithMessage(refusal.NotFound, "The URI is not a file of this service's operator plane.")
	}
	return pathpolicy.Parse(rest)
}

// Fetched describes a fetch.
type Fetched struct {
	// Bytes is the length of the body landed.
	Bytes int64
	// SHA256 is the lowercase hex digest of the body landed.
	SHA256 string
	// Announced is the content-length the service announced, -1 for none. It is set on a
	// refusal too, so a caller can say how large the file is.
	Announced int64
	// OverLimit is set when the fetch was refused because the body is longer than the
	// caller's limit (rather than refused by the service).
	OverLimit bool
}

// Fetch reads rel and lands its body: it streams the body into landing while hashing it and
// commits only when the body is whole (its content-length, when announced, was met), at most
// limit bytes long, and its sha256 is exactly what the answer's etag says. Otherwise landing
// is discarded and the error says why: the service's refusal, too_large (a content-length
// above limit before any byte is read, or a body that turns out longer), etag_mismatch (no
// etag, or one that does not describe the body), service_unreachable, or the landing's own
// failure. The landed file gets the answer's x-murmur-mtime-ms as its modification time.
func (u *RemoteFiles) Fetch(ctx context.Context, rel pathpolicy.RelPath, limit int64, landing ports.Landing) (Fetched, error) {
	fetched, err := u.fetch(ctx, rel, limit, landing)
	if err != nil {
		landing.Discard()
	}
	return fetched, err
}

func (u *RemoteFiles) fetch(ctx context.Context, rel pathpolicy.RelPath, limit int64, landing ports.Landing) (Fetched, error) {
	head, body, err := u.remote.Open(ctx, rel)
	if err != nil {
		return Fetched{Announced: -1}, err
	}
	defer body.Close()
	fetched := Fetched{Announced: head.ContentLength}
	if head.Status != 200 {
		return fetched, serviceRefusal(head.RemoteAnswer)
	}
	if head.ContentLength > limit {
		fetched.OverLimit = true
		return fetched, tooLargeToFetch(head.ContentLength, limit)
	}
	hash := sha256.New()
	n, err := io.Copy(io.MultiWriter(landing, hash), io.LimitReader(body, min(limit, Unlimited-1)+1))
	if err != nil {
		return fetched, refusal.From(err)
	}
	if n > limit {
		fetched.OverLimit = true
		return fetched, tooLargeToFetch(-1, limit)
	}
	fetched.Bytes, fetched.SHA256 = n, hex.EncodeToString(hash.Sum(nil))
	if !head.HasETag || head.ETag != `"sha256:`+fetched.SHA256+`"` {
		return fetched, refusal.WithMessage(refusal.EtagMismatch,
			"The answer's etag is missing or does not describe the body received; the file was not landed.")
	}
	var modTime time.Time
	if head.HasMtime {
		modTime = time.UnixMilli(head.MtimeMs)
	}
	if err := landing.Commit(modTime); err != nil {
		return fetched, refusal.From(err)
	}
	return fetched, nil
}

// tooLargeToFetch is the refusal for a body above the client's limit; size is the announced
// length, -1 when the body itself ran past the limit.
func tooLargeToFetch(size, limit int64) *refusal.Refusal {
	what := "The file is more than "
	if size >= 0 {
		what = "The file is " + strconv.FormatInt(size, 10) + " bytes, more than "
	}
	return refusal.WithMessage(refusal.TooLarge, what+strconv.FormatInt(limit, 10)+" bytes; it was not landed.")
}

// serviceRefusal turns a non-200 answer into the service's refusal, with the code rule
// fetch-peer-file applies to a peer's (refusal.Foreign). The message is the service's own, made
// printable, or a sentence of ours when it sent none.
func serviceRefusal(a ports.RemoteAnswer) *refusal.Refusal {
	code := refusal.Foreign(a.Status, a.ErrorCode)
	message := printable(a.ErrorMessage)
	if message == "" {
		message = "The service answered " + strconv.Itoa(a.Status) + " without a refusal message."
	}
	return refusal.WithMessage(code, message)
}

// maxForeignMessage bounds how much of a service's message is shown.
const maxForeignMessage = 512

// printable returns s without control or other non-printing characters (each replaced by
// U+FFFD) and cut to maxForeignMessage bytes, so a hostile service cannot drive the operator's
// terminal through the text it is shown.
func printable(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxForeignMessage {
		s = strings.ToValidUTF8(s[:maxForeignMessage], "") + "…"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return unicode.ReplacementChar
	}, s)
}
