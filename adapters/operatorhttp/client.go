package operatorhttp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/resplane/resplane/adapters/internal/httpclient"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// The defaults of Options.
const (
	DefaultConnectTimeout  = 10 * time.Second
	DefaultIdleTimeout     = 30 * time.Second
	DefaultMaxListingBytes = 256 << 20
)

// maxErrorBody bounds what is read of a refusal body, and the response head.
const maxErrorBody = 64 << 10

// filesRoute is the operator plane's route, below the base URL.
const filesRoute = "/resources/files"

// Options configures a Client. Zero values take the defaults.
type Options struct {
	// ConnectTimeout bounds the TCP connect and, separately, the TLS handshake.
	ConnectTimeout time.Duration
	// IdleTimeout bounds every read and write on the connection: an answer that makes no
	// progress for this long is abandoned. A body that keeps arriving is never cut off.
	IdleTimeout time.Duration
	// MaxListingBytes bounds a listing body.
	MaxListingBytes int64
}

// Client reads one service's operator plane. It is safe for concurrent use.
type Client struct {
	origin  string // scheme://host[:port]
	prefix  string // the escaped path below the origin that the service lives at, "" or "/…"
	http    *http.Client
	idle    time.Duration
	connect time.Duration
	listMax int64
}

var _ ports.RemoteExport = (*Client)(nil)

// New returns a client for the service at base: its URL as the ready line prints it
// (http://127.0.0.1:8080), optionally with /resources/files already on it. The URL must be
// http or https with a host, and carry no user information, query or fragment; the error
// says which rule it broke and is meant for a usage message.
func New(base string, o Options) (*Client, error) {
	u, err := url.Parse(base)
	switch {
	case err != nil:
		return nil, fmt.Errorf("the URL %q does not parse", base)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("the URL %q must start with http:// or https://", base)
	case u.Host == "":
		return nil, fmt.Errorf("the URL %q has no host", base)
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("the URL %q may not carry user information, a query or a fragment", base)
	}
	prefix := strings.TrimSuffix(u.EscapedPath(), "/")
	prefix = strings.TrimSuffix(prefix, filesRoute)
	if strings.HasPrefix(prefix, "//") {
		return nil, fmt.Errorf("the URL %q has a path that starts with an empty segment", base)
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxListingBytes <= 0 {
		o.MaxListingBytes = DefaultMaxListingBytes
	}
	return &Client{
		origin: u.Scheme + "://" + u.Host,
		prefix: prefix,
		http: httpclient.New(httpclient.Options{
			Connect: o.ConnectTimeout, Idle: o.IdleTimeout, MaxHeaderBytes: maxErrorBody,
		}),
		idle: o.IdleTimeout, connect: o.ConnectTimeout, listMax: o.MaxListingBytes,
	}, nil
}

// target returns the request target of rel: the prefix, the route and each component
// escaped on its own.
func (c *Client) target(rel pathpolicy.RelPath) string {
	var b strings.Builder
	b.WriteString(c.prefix + filesRoute)
	for _, component := range rel.Components() {
		b.WriteString("/" + url.PathEscape(component))
	}
	return b.String()
}

// FilesURL returns the absolute URL of the listing.
func (c *Client) FilesURL() string { return c.origin + c.prefix + filesRoute }

// FileURL returns the absolute URL of rel on the operator plane.
func (c *Client) FileURL(rel pathpolicy.RelPath) string { return c.origin + c.target(rel) }

// get sends GET with the exact target given, never cleaned or re-encoded.
func (c *Client) get(ctx context.Context, target string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.origin+"/", nil)
	if err != nil {
		return nil, refusal.WithMessage(refusal.ServiceUnreachable, "The service's URL does not form a request.")
	}
	req.URL.Opaque = target // sent verbatim as the request target
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreachable(err)
	}
	return resp, nil
}

// listingJSON is the listing's documented shape (docs/http-api.md, "The listing").
type listingJSON struct {
	Root        string `json:"root"`
	Mode        string `json:"mode"`
	MaxBytes    int64  `json:"max_bytes"`
	Generation  uint64 `json:"generation"`
	Containment string `json:"containment_achieved"`
	Entries     *[]struct {
		Path    string `json:"path"`
		Size    int64  `json:"size_bytes"`
		MtimeMs int64  `json:"mtime_ms"`
		SHA256  string `json:"sha256"`
	} `json:"entries"`
}

// List sends GET /resources/files and decodes the listing of a 200; a non-200 is reported
// in the answer.
func (c *Client) List(ctx context.Context) (ports.RemoteListing, error) {
	resp, err := c.get(ctx, c.prefix+filesRoute)
	if err != nil {
		return ports.RemoteListing{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ports.RemoteListing{RemoteAnswer: c.answer(resp)}, nil
	}
	raw, err := io.ReadAll(io.LimitReader(c.body(resp), c.listMax+1))
	if err != nil {
		return ports.RemoteListing{}, err
	}
	if int64(len(raw)) > c.listMax {
		return ports.RemoteListing{}, refusal.WithMessage(refusal.InvalidListing,
			"The listing is larger than "+strconv.FormatInt(c.listMax, 10)+" bytes.")
	}
	var decoded listingJSON
	if err := json.Unmarshal(raw, &decoded); err != nil || decoded.Entries == nil {
		return ports.RemoteListing{}, refusal.WithMessage(refusal.InvalidListing,
			"The answer to the listing request is not a listing (a JSON object with an entries array).")
	}
	listing := ports.RemoteListing{
		RemoteAnswer: ports.RemoteAnswer{Status: resp.StatusCode}, Raw: raw,
		Root: decoded.Root, Mode: decoded.Mode, MaxBytes: decoded.MaxBytes, Generation: decoded.Generation,
		Containment: decoded.Containment, Entries: make([]ports.RemoteEntry, len(*decoded.Entries)),
	}
	for i, e := range *decoded.Entries {
		listing.Entries[i] = ports.RemoteEntry{Path: e.Path, Size: e.Size, MtimeMs: e.MtimeMs, SHA256: e.SHA256}
	}
	return listing, nil
}

// Open sends GET for rel and returns the head and, on a 200, the body.
func (c *Client) Open(ctx context.Context, rel pathpolicy.RelPath) (ports.RemoteRead, io.ReadCloser, error) {
	resp, err := c.get(ctx, c.target(rel))
	if err != nil {
		return ports.RemoteRead{}, nil, err
	}
	head := ports.RemoteRead{ContentLength: resp.ContentLength}
	if resp.StatusCode != http.StatusOK {
		head.RemoteAnswer = c.answer(resp)
		resp.Body.Close()
		return head, io.NopCloser(strings.NewReader("")), nil
	}
	head.Status = resp.StatusCode
	if etags := resp.Header.Values("Etag"); len(etags) > 0 {
		head.ETag, head.HasETag = etags[0], true
	}
	if ms, err := strconv.ParseInt(resp.Header.Get("X-Murmur-Mtime-Ms"), 10, 64); err == nil {
		head.MtimeMs, head.HasMtime = ms, true
	}
	return head, struct {
		io.Reader
		io.Closer
	}{c.body(resp), resp.Body}, nil
}

// answer reads a non-200 answer: its status and, when its body (at most 64 KiB of it) is a
// JSON object, its "error" and "message" strings.
func (c *Client) answer(resp *http.Response) ports.RemoteAnswer {
	a := ports.RemoteAnswer{Status: resp.StatusCode}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return a
	}
	var body struct {
		Error   any `json:"error"`
		Message any `json:"message"`
	}
	if json.Unmarshal(data, &body) == nil {
		a.ErrorCode, _ = body.Error.(string)
		a.ErrorMessage, _ = body.Message.(string)
	}
	return a
}

// body wraps resp's body so that its failures are refusals of ours.
func (c *Client) body(resp *http.Response) io.Reader {
	return bodyReader{r: resp.Body, c: c}
}

type bodyReader struct {
	r io.Reader
	c *Client
}

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = b.c.unreachable(err)
	}
	return n, err
}

// dialCause names why a connection could not be made, in the operating system's words for
// the common causes, never in err's text (which holds the URL as the request spelled it).
func dialCause(err error) string {
	for _, cause := range []struct {
		errno syscall.Errno
		words string
	}{
		{syscall.ECONNREFUSED, "connection refused (nothing listens there)"},
		{syscall.ECONNRESET, "connection reset"},
		{syscall.EHOSTUNREACH, "host unreachable"},
		{syscall.ENETUNREACH, "network unreachable"},
		{syscall.EADDRNOTAVAIL, "address not available"},
		{syscall.EACCES, "permission denied"},
	} {
		if errors.Is(err, cause.errno) {
			return cause.words
		}
	}
	return "the connection could not be made"
}

// unreachable turns a transport failure into a service_unreachable refusal with a sentence
// naming the kind of failure. It never uses err's text: a *url.Error holds the URL.
func (c *Client) unreachable(err error) *refusal.Refusal {
	var (
		verify  *tls.CertificateVerificationError
		dns     *net.DNSError
		timeout net.Error
		op      *net.OpError
	)
	var sentence string
	switch {
	case errors.Is(err, context.Canceled):
		sentence = "The request was cancelled before it completed."
	case errors.Is(err, io.ErrUnexpectedEOF):
		sentence = "The service's answer ended before its content-length."
	case errors.As(err, &verify):
		sentence = "The service's TLS certificate does not verify against the system's roots."
	case errors.As(err, &dns):
		sentence = "The service's host name could not be resolved."
	case errors.As(err, &op) && op.Op == "dial" && !(errors.As(err, &timeout) && timeout.Timeout()):
		sentence = "The connection to the service failed: " + dialCause(err) + "."
	case errors.As(err, &timeout) && timeout.Timeout():
		sentence = "The service made no progress for " + c.idle.String() + " (or did not accept a connection within " +
			c.connect.String() + "), so the request was abandoned."
	default:
		sentence = "The connection to the service failed before a complete answer arrived."
	}
	return refusal.WithMessage(refusal.ServiceUnreachable, sentence).Wrapping(err)
}
