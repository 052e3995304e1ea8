package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/resplane/resplane/domain/refusal"
)

// The provenance headers of both planes (docs/http-api.md, docs/peer-plane.md), spelled as the
// reference runtime spells them (docs/decisions.md).
const (
	headerGeneration  = "x-murmur-generation"
	headerContainment = "x-murmur-containment"
	headerExportRoot  = "x-murmur-export-root"
	headerMTime       = "x-murmur-mtime-ms"
	headerHandleID    = "x-murmur-handle-id"
	headerAudience    = "x-murmur-audience"
)

const (
	contentTypeJSON   = "application/json"
	contentTypeBinary = "application/octet-stream"
)

// encodeJSON renders v as compact JSON without HTML escaping and without the encoder's
// trailing newline, so "<", ">" and "&" travel as themselves.
func encodeJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every value rendered here is built from strings and numbers; failing to encode one
		// is a programming error worth surfacing loudly.
		panic("httpapi: cannot encode response: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// errorBody is the JSON shape of every refusal: {"error":"<code>","message":"<sentence>"}.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// writeResource sends a complete response under /resources/: every such response carries an
// exact content-length and connection: close. headers holds the plane's provenance headers.
func writeResource(c echo.Context, status int, contentType string, headers map[string]string, body []byte) error {
	h := c.Response().Header()
	for k, v := range headers {
		h[k] = []string{v}
	}
	h.Set(echo.HeaderContentType, contentType)
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(body)))
	h.Set(echo.HeaderConnection, "close")
	if status == http.StatusMethodNotAllowed {
		h.Set(echo.HeaderAllow, http.MethodGet)
	}
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(body)
	return err
}

// writeRefusal sends err as the JSON refusal (refusal.From) with its status from the one
// table. Only the refusal's code and message reach the client; an io_error is also handed to
// the access log (failureKey), which logs it, with its cause, at error level.
func writeRefusal(c echo.Context, err error, headers map[string]string) error {
	r := refusal.From(err)
	if r.Code == refusal.IOError {
		c.Set(failureKey, r)
	}
	body := encodeJSON(errorBody{Error: string(r.Code), Message: r.Message})
	return writeResource(c, statusFor(r.Code), contentTypeJSON, headers, body)
}

// failureKey is where a handler leaves the internal failure behind an io_error answer for the
// access log.
const failureKey = "resplane.failure"
