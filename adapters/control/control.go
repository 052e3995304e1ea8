// Package control is the control API: HTTP/1.1 with JSON bodies over a Unix socket (mode
// 0600), the seam between the agent loop and the service (docs/control-api.md). It is never
// reachable over TCP.
//
// The agent tools appear only when their grant is declared: an undeclared tool is 404
// unknown_tool, exactly as if it did not exist.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/refusal"
)

// Status is the static part of GET /v1/status; the generation is read per request and the
// tools are the ones the API offers.
type Status struct {
	SessionID   string
	Containment string
	// Confinement is "landlock-v<ABI>" or "none" (docs/operator-guide.md, "Confinement").
	Confinement string
	Planes      []string
	Audience    string
	URL         string
	// PeerProof is "bound", "required" or "none" (docs/control-api.md, "GET /v1/status").
	PeerProof string
	// TLS is whether the resource listener serves TLS.
	TLS bool
	// ListingCache is the listing hash cache's mode: "lease" or "max-age".
	ListingCache string
}

// API is the control API's handler set.
type API struct {
	status Status
	tasks  *application.Tasks
	share  *application.ShareFile     // nil when exports.peer_files is not declared
	fetch  *application.FetchPeerFile // nil when capabilities.peer_fetch is not declared
	rotate *application.RotateKey
	log    zerolog.Logger
}

// NewAPI returns the control API. share and fetch are nil for undeclared tools. log receives
// one error line, with its cause, for every call answered io_error; it must already redact
// handles.
func NewAPI(status Status, tasks *application.Tasks, share *application.ShareFile, fetch *application.FetchPeerFile,
	rotate *application.RotateKey, log zerolog.Logger) *API {
	return &API{status: status, tasks: tasks, share: share, fetch: fetch, rotate: rotate, log: log}
}

// maxBodyBytes bounds a control request body; tool inputs are a few short strings.
const maxBodyBytes = 64 << 10

// NewEcho assembles the control socket's echo instance.
func (a *API) NewEcho() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler
	e.JSONSerializer = rawJSON{}
	route(e, http.MethodGet, "/v1/status", a.getStatus)
	route(e, http.MethodGet, "/v1/tools", a.listTools)
	route(e, http.MethodPost, "/v1/tools/:name", a.callTool)
	route(e, http.MethodPost, "/v1/tasks/terminal", a.terminal)
	route(e, http.MethodPost, "/v1/peer/rotate-key", a.rotateKey)
	return e
}

// route serves path with h for method only. Every other method — OPTIONS included, which
// echo would otherwise answer 204 itself — is 405 method_not_allowed naming the one allowed.
func route(e *echo.Echo, method, path string, h echo.HandlerFunc) {
	e.Any(path, func(c echo.Context) error {
		if c.Request().Method != method {
			c.Response().Header().Set(echo.HeaderAllow, method)
			return echo.ErrMethodNotAllowed
		}
		return h(c)
	})
}

// errorHandler renders echo's own routing errors in our refusal shape: an unknown path is
// not_found and a wrong method method_not_allowed.
func errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, status := refusal.IOError, http.StatusInternalServerError
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			code, status = refusal.NotFound, http.StatusNotFound
		case http.StatusMethodNotAllowed:
			code, status = refusal.MethodNotAllowed, http.StatusMethodNotAllowed
		}
	}
	_ = c.JSON(status, errorBody{Error: string(code), Message: controlMessages[code]})
}

var controlMessages = map[refusal.Code]string{
	refusal.NotFound:         "No such control API route; see GET /v1/tools and GET /v1/status.",
	refusal.MethodNotAllowed: "This control API route does not accept that method.",
	refusal.IOError:          "The control API failed to answer.",
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func (a *API) getStatus(c echo.Context) error {
	return c.JSON(http.StatusOK, statusBody{
		SessionID: a.status.SessionID, Generation: a.tasks.Current(), Containment: a.status.Containment,
		Confinement: a.status.Confinement, Planes: nonNil(a.status.Planes), Tools: a.Tools(), Audience: a.status.Audience, URL: a.status.URL,
		PeerProof: a.status.PeerProof, TLS: a.status.TLS, ListingCache: a.status.ListingCache,
	})
}

type statusBody struct {
	SessionID    string   `json:"session_id"`
	Generation   uint64   `json:"generation"`
	Containment  string   `json:"containment"`
	Confinement  string   `json:"confinement"`
	Planes       []string `json:"planes"`
	Tools        []string `json:"tools"`
	Audience     string   `json:"audience"`
	URL          string   `json:"url"`
	PeerProof    string   `json:"peer_proof"`
	TLS          bool     `json:"tls"`
	ListingCache string   `json:"listing_cache"`
}

func (a *API) terminal(c echo.Context) error {
	object, err := readObject(c)
	if err != nil {
		return a.refuse(c, err)
	}
	state, _ := stringField(object, "state")
	gen, err := a.tasks.Terminal(state)
	if err != nil {
		return a.refuse(c, err)
	}
	return c.JSON(http.StatusOK, map[string]uint64{"generation": gen})
}

// rotateKey answers POST /v1/peer/rotate-key (docs/control-api.md): every handle minted so far
// stops verifying. A request body, if any, is not read.
func (a *API) rotateKey(c echo.Context) error {
	at, err := a.rotate.Rotate()
	if err != nil {
		return a.refuse(c, err)
	}
	a.log.Info().Int64("rotated_at_ms", at).Msg("rotated the instance key: every handle minted before no longer verifies")
	return c.JSON(http.StatusOK, map[string]int64{"rotated_at_ms": at})
}

// readObject reads a bounded request body that must be a JSON object.
func readObject(c echo.Context) (map[string]json.RawMessage, error) {
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, maxBodyBytes+1))
	if err != nil || len(raw) > maxBodyBytes {
		return nil, refusal.WithMessage(refusal.InvalidInput, "The request body must be a JSON object of at most 64 KiB.")
	}
	var object map[string]json.RawMessage
	if json.Unmarshal(raw, &object) != nil || object == nil {
		return nil, refusal.WithMessage(refusal.InvalidInput, "The request body must be a JSON object.")
	}
	return object, nil
}

// refuse answers a refusal with 422 (the tool and lifecycle refusals) in the refusal shape. An
// error that is not a refusal is an io_error (refusal.From); every io_error is logged once,
// here, at error level with its cause, which never reaches the answer.
func (a *API) refuse(c echo.Context, err error) error {
	r := refusal.From(err)
	if r.Code == refusal.IOError && errors.Is(err, context.Canceled) {
		r = refusal.WithMessage(refusal.IOError, "The call was cancelled.").Wrapping(err)
	}
	if r.Code == refusal.IOError {
		line := a.log.Error().Str("method", c.Request().Method).Str("route", c.Request().URL.Path).
			Str("outcome", string(r.Code)).Str("reason", r.Message)
		if cause := r.Cause(); cause != nil {
			line = line.AnErr("cause", cause)
		}
		line.Msg("control call failed")
	}
	status := http.StatusUnprocessableEntity
	if r.Code == refusal.UnknownTool || r.Code == refusal.NoPeerPlane {
		status = http.StatusNotFound
	}
	return c.JSON(status, errorBody{Error: string(r.Code), Message: r.Message})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// rawJSON is echo's JSON serializer without HTML escaping, so "<", ">" and "&" in a message
// travel as themselves, as on the resource listener.
type rawJSON struct{ echo.DefaultJSONSerializer }

// Serialize implements echo.JSONSerializer.
func (rawJSON) Serialize(c echo.Context, v any, _ string) error {
	enc := json.NewEncoder(c.Response())
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
