package httpapi

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/resplane/resplane/adapters/httpapi/limits"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/hostpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/sendrate"
)

// Route prefixes, matched on the raw request target by whole segments.
const (
	resourcesPrefix = "/resources/"
	filesRoute      = "/resources/files"
	peerRoute       = "/resources/peer"
	agentCardRoute  = "/.well-known/agent-card.json"
)

// Resources answers everything the resource listener receives.
type Resources struct {
	files  *application.Files
	peer   *application.Redeem
	card   []byte
	hosts  hostpolicy.Policy
	bounds Send
	// listings renders listings, reusing what the previous one encoded (listing.go).
	listings listingEncoder
}

// DefaultSendTimeout is how long a response may go without the client taking a byte of it
// (--send-timeout) when NewResources is given no timeout.
const DefaultSendTimeout = 30 * time.Second

// Send bounds how a body that holds a reservation is sent (docs/operator-guide.md, "Memory and
// connection bounds"): a response that breaks either bound is closed and its body released.
type Send struct {
	// Timeout closes a response whose client takes no byte of it for that long
	// (--send-timeout); DefaultSendTimeout when it is not positive.
	Timeout time.Duration
	// MinRate closes a response whose client takes it more slowly than this, after its grace
	// (--min-send-rate); the zero Rate is off.
	MinRate sendrate.Rate
}

// NewResources returns the listener's handler set. card is our agent card, already rendered;
// hosts decides which Host headers are answered (docs/http-api.md, "Host names"); send bounds
// how bodies are sent.
func NewResources(files *application.Files, peer *application.Redeem, card AgentCard, hosts hostpolicy.Policy, send Send) *Resources {
	if send.Timeout <= 0 {
		send.Timeout = DefaultSendTimeout
	}
	return &Resources{files: files, peer: peer, card: card.JSON, hosts: hosts, bounds: send}
}

// Register routes every method and every path of e to the raw-target dispatcher. Echo's own
// router is bypassed on purpose: it matches decoded paths and answers unknown methods itself,
// and both are decided on the raw target (docs/http-api.md, "Routing").
func (h *Resources) Register(e *echo.Echo) {
	e.Any("/*", h.dispatch)
	e.RouteNotFound("/*", h.dispatch)
}

func (h *Resources) dispatch(c echo.Context) error {
	r := c.Request()
	path := routedPath(r)
	req := application.Request{Method: r.Method, HostAllowed: h.hosts.Allows(r.Host), HasBody: declaresBody(r),
		Client: limits.ClientKey(r.RemoteAddr)}
	switch {
	case onRoute(path, peerRoute):
		return h.redeem(c, req, strings.TrimPrefix(path, peerRoute))
	case path == filesRoute || path == filesRoute+"/":
		return h.list(c, req)
	case strings.HasPrefix(path, filesRoute+"/"):
		return h.read(c, req, strings.TrimPrefix(path, filesRoute+"/"))
	case strings.HasPrefix(path, resourcesPrefix):
		return h.unknownResource(c, req)
	case path == agentCardRoute && r.Method == http.MethodGet && req.HostAllowed:
		return h.agentCard(c)
	default:
		return c.NoContent(http.StatusNotFound)
	}
}

// declaresBody reports whether r declares a body: a Content-Length above zero or any
// Transfer-Encoding (net/http reports a chunked body's length as -1).
func declaresBody(r *http.Request) bool {
	return r.ContentLength > 0 || len(r.TransferEncoding) > 0
}

// unknownResource answers a /resources/ path no plane owns: the checks every route shares
// (host_not_allowed, method_not_allowed, body_not_allowed), else not_found, with no plane
// headers and no trace.
func (h *Resources) unknownResource(c echo.Context, req application.Request) error {
	err := application.Admit(req)
	if err == nil {
		err = refusal.New(refusal.NotFound)
	}
	return writeRefusal(c, err, nil)
}

func (h *Resources) list(c echo.Context, req application.Request) error {
	gen, served, err := h.files.List(c.Request().Context(), req, h.listings.encode)
	headers := map[string]string{headerGeneration: formatUint(gen)}
	if err != nil {
		return writeRefusal(c, err, headers)
	}
	defer served.Body.Release()
	headers[headerContainment] = served.Containment.String()
	headers[headerExportRoot] = served.ExportRoot
	return h.send(c, contentTypeJSON, headers, served.Body)
}

func (h *Resources) read(c echo.Context, req application.Request, rawPath string) error {
	gen, served, err := h.files.Read(c.Request().Context(), req, rawPath)
	headers := map[string]string{headerGeneration: formatUint(gen)}
	if err != nil {
		return writeRefusal(c, err, headers)
	}
	defer served.Body.Release()
	headers[headerContainment] = served.Containment.String()
	headers[headerExportRoot] = served.ExportRoot
	return h.writeServed(c, headers, served.Body)
}

// writeServed sends a served file's body with the validator headers every served body
// carries, on either plane.
func (h *Resources) writeServed(c echo.Context, headers map[string]string, body *application.Body) error {
	headers["etag"] = body.ETag()
	headers[headerMTime] = strconv.FormatInt(body.ModTime.UnixMilli(), 10)
	return h.send(c, contentTypeBinary, headers, body)
}

// send writes a 200 whose body is held by the reader (a file's or a listing's), spilling it
// when its client is slow, and leaves a spill's failure for the access log.
func (h *Resources) send(c echo.Context, contentType string, headers map[string]string, body *application.Body) error {
	spill := func(sent int64) io.Reader {
		rest := body.Spill(sent)
		if err := body.SpillFailure(); err != nil {
			c.Set(spillFailureKey, err)
		}
		return rest
	}
	return writeBody(c, h.bounds, http.StatusOK, contentType, headers, body.Size, body.Content(), spill)
}

func formatUint(n uint64) string { return strconv.FormatUint(n, 10) }

func (h *Resources) agentCard(c echo.Context) error {
	return c.Blob(http.StatusOK, contentTypeJSON, h.card)
}
