package httpapi

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/resplane/resplane/adapters/httpapi/rawtarget"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/refusal"
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
	files       *application.Files
	peer        *application.Redeem
	card        []byte
	sendTimeout time.Duration
}

// DefaultSendTimeout is how long a response may go without the client taking a byte of it
// (--send-timeout) when NewResources is given no timeout.
const DefaultSendTimeout = 30 * time.Second

// NewResources returns the listener's handler set. card is our agent card, already rendered;
// sendTimeout closes a response that makes no progress for that long (DefaultSendTimeout when
// it is not positive).
func NewResources(files *application.Files, peer *application.Redeem, card AgentCard, sendTimeout time.Duration) *Resources {
	if sendTimeout <= 0 {
		sendTimeout = DefaultSendTimeout
	}
	return &Resources{files: files, peer: peer, card: card.JSON, sendTimeout: sendTimeout}
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
	path, _, _ := strings.Cut(rawtarget.OriginalTarget(r), "?")
	switch {
	case path == peerRoute || strings.HasPrefix(path, peerRoute+"/"):
		return h.redeem(c, strings.TrimPrefix(path, peerRoute))
	case path == filesRoute || path == filesRoute+"/":
		return h.list(c)
	case strings.HasPrefix(path, filesRoute+"/"):
		return h.read(c, strings.TrimPrefix(path, filesRoute+"/"))
	case strings.HasPrefix(path, resourcesPrefix):
		return h.unknownResource(c)
	case path == agentCardRoute && r.Method == http.MethodGet:
		return h.agentCard(c)
	default:
		return c.NoContent(http.StatusNotFound)
	}
}

// unknownResource answers a /resources/ path no plane owns: 405 for a method other than GET,
// else not_found, with no plane headers and no trace.
func (h *Resources) unknownResource(c echo.Context) error {
	code := refusal.NotFound
	if c.Request().Method != application.ServedMethod {
		code = refusal.MethodNotAllowed
	}
	return writeRefusal(c, refusal.New(code), nil)
}

func (h *Resources) list(c echo.Context) error {
	gen, listing, err := h.files.List(c.Request().Method)
	headers := map[string]string{headerGeneration: formatUint(gen)}
	if err != nil {
		return writeRefusal(c, err, headers)
	}
	headers[headerContainment] = listing.Containment.String()
	headers[headerExportRoot] = listing.Root
	body := encodeJSON(listingBodyOf(listing))
	return writeBody(c, h.sendTimeout, http.StatusOK, contentTypeJSON, headers, int64(len(body)), bytes.NewReader(body), nil)
}

func (h *Resources) read(c echo.Context, rawPath string) error {
	gen, served, err := h.files.Read(c.Request().Context(), c.Request().Method, rawPath)
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
	return writeBody(c, h.sendTimeout, http.StatusOK, contentTypeBinary, headers, body.Size, body.Content(), body.Spill)
}

func formatUint(n uint64) string { return strconv.FormatUint(n, 10) }

// listingBody is the wire shape of a listing; field order is the documented key order
// (docs/http-api.md, "The listing").
type listingBody struct {
	Root        string         `json:"root"`
	Mode        string         `json:"mode"`
	MaxBytes    int64          `json:"max_bytes"`
	Generation  uint64         `json:"generation"`
	Containment string         `json:"containment_achieved"`
	Entries     []listingEntry `json:"entries"`
}

type listingEntry struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	MTimeMs   int64  `json:"mtime_ms"`
	SHA256    string `json:"sha256"`
}

func listingBodyOf(l *application.Listing) listingBody {
	entries := make([]listingEntry, len(l.Entries))
	for i, e := range l.Entries {
		entries[i] = listingEntry{Path: e.Path, SizeBytes: e.Size, MTimeMs: e.MTimeMs, SHA256: e.SHA256}
	}
	return listingBody{
		Root: l.Root, Mode: l.Mode, MaxBytes: l.MaxBytes, Generation: l.Generation,
		Containment: l.Containment.String(), Entries: entries,
	}
}

func (h *Resources) agentCard(c echo.Context) error {
	return c.Blob(http.StatusOK, contentTypeJSON, h.card)
}
