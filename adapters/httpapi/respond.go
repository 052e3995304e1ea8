package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/resplane/resplane/adapters/httpapi/limits"
	"github.com/resplane/resplane/domain/refusal"
)

// The provenance headers of both planes (docs/http-api.md, docs/peer-plane.md), spelled as the
// reference runtime spells them (docs/decisions/0009-etag-and-x-murmur-headers-in-lower-case.md).
const (
	headerGeneration  = "x-murmur-generation"
	headerContainment = "x-murmur-containment"
	headerExportRoot  = "x-murmur-export-root"
	headerMTime       = "x-murmur-mtime-ms"
	headerHandleID    = "x-murmur-handle-id"
	headerAudience    = "x-murmur-audience"
	// headerDPoP carries a redeem's proof of possession (RFC 9449; docs/peer-plane.md,
	// "Proof of possession"). It is never logged or traced: its htu holds the handle.
	headerDPoP = "DPoP"
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

// writeResource sends a complete response under /resources/ whose body is small (a refusal):
// one write, within the server's write timeout. Every such response carries an exact
// content-length and connection: close; headers holds the plane's provenance headers.
func writeResource(c echo.Context, status int, contentType string, headers map[string]string, body []byte) error {
	setHead(c, status, contentType, headers, int64(len(body)))
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(body)
	return err
}

// setHead sets the headers every response under /resources/ carries: the plane's provenance
// headers, content-type, an exact content-length, connection: close, and allow on a 405.
func setHead(c echo.Context, status int, contentType string, headers map[string]string, size int64) {
	h := c.Response().Header()
	// Every value is a one-element slice of one array: one allocation for the whole head.
	values := make([]string, 0, len(headers)+4)
	set := func(key, value string) {
		values = append(values, value)
		n := len(values)
		h[key] = values[n-1 : n : n]
	}
	for k, v := range headers {
		set(k, v)
	}
	set(echo.HeaderContentType, contentType)
	set(echo.HeaderContentLength, strconv.FormatInt(size, 10))
	set(echo.HeaderConnection, "close")
	if status == http.StatusMethodNotAllowed {
		set(echo.HeaderAllow, http.MethodGet)
	}
}

// smallBody is the largest body sent in one write: it fits the socket's buffers, so the write
// returns at once even to a client that does not read.
const smallBody = 64 << 10

// progressWindow is how often a body that is still being sent checks for progress.
const progressWindow = time.Second

// A body sent from memory spills its rest into the spool once its client is slow: when a
// spillWindow passes without the client taking a byte (it stalled, or is too slow to keep the
// socket's buffers from filling), or when the body is still being sent after keepInMemory (it
// takes its bytes too slowly to hold memory for).
const (
	spillWindow  = 30 * time.Millisecond
	keepInMemory = time.Second
)

// The reasons a response is given up before its body is sent, for the access log.
var (
	// errStalled ends a response whose client accepted no byte for the send timeout.
	errStalled = errors.New("the client accepted no byte of the response for the send timeout")
	// errTooSlow ends a response whose client takes it more slowly than the minimum rate.
	errTooSlow = errors.New("the client took the response more slowly than the minimum send rate")
	// errDrained ends a response whose client took no byte for a whole window after shutdown
	// began: its shutdown grace would only be waited out.
	errDrained = errors.New("the service is shutting down and the client accepted no byte of the response")
)

// writeBody sends a complete response under /resources/ whose body is size bytes of content
// (docs/operator-guide.md, "Memory and connection bounds"). The head goes out first; a body
// larger than smallBody then goes straight to the connection's ReadFrom — sendfile(2) for a
// spooled body, one write for a buffer — under a write deadline that follows progress: it is
// pushed back every progressWindow while the client takes bytes, and the response is given
// up once send.Timeout has passed without the client taking one, or as soon as the client
// falls below send.MinRate (sendrate.Meter): a body holds a reservation while it is sent, so
// progress, not presence, is what keeps it. The whole response's time therefore scales with
// the body instead of being fixed. When spill is given (a body sent from memory), a body
// whose client turns out slow (see spillWindow) is handed to it once, with the bytes sent so
// far, and goes on from the reader it returns (the rest, moved to the spool), if any. Once
// shutdown has begun (limits.Draining), a window in which the client takes no byte ends the
// response, and once the request is cancelled (after the grace) the next window ends it
// whatever its progress.
// Returning ends the request, which closes the connection and lets the handler release the
// body.
func writeBody(c echo.Context, send Send, status int, contentType string, headers map[string]string,
	size int64, content io.Reader, spill func(sent int64) io.Reader) error {
	setHead(c, status, contentType, headers, size)
	res := c.Response()
	res.WriteHeader(status)
	rf, direct := res.Writer.(io.ReaderFrom)
	if size <= smallBody || !direct {
		// The server's own write timeout, the send timeout, bounds it (limits.Harden).
		n, err := io.Copy(res.Writer, content)
		res.Size += n
		return err
	}
	rc := http.NewResponseController(res.Writer)
	_ = rc.SetWriteDeadline(time.Now().Add(send.Timeout))
	if err := rc.Flush(); err != nil {
		return err
	}
	steady := min(send.Timeout, progressWindow)
	if !send.MinRate.IsOff() {
		// Often enough that a slow client is closed within a quarter of the rate's window.
		steady = min(steady, max(send.MinRate.Per/4, spillWindow))
	}
	window := steady
	if spill != nil {
		window = min(window, spillWindow)
	}
	ctx := c.Request().Context()
	draining := limits.Draining(ctx)
	start := time.Now()
	last := start
	meter := send.MinRate.Start(start)
	var sent int64
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(window))
		n, err := rf.ReadFrom(content)
		sent += n
		res.Size += n
		now := time.Now()
		if n > 0 {
			last = now
		}
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return err
		case now.Sub(last) >= send.Timeout:
			c.Set(closedKey, "send_timeout")
			return errStalled
		case ctx.Err() != nil:
			return ctx.Err()
		case n == 0 && closed(draining):
			return errDrained
		case meter.Slow(now, sent):
			c.Set(closedKey, "min_send_rate")
			return errTooSlow
		}
		if spill != nil && (n == 0 || now.Sub(start) >= keepInMemory) {
			if rest := spill(sent); rest != nil {
				content = rest
				c.Set(spilledKey, true)
			}
			spill, window = nil, steady
		}
	}
}

// closed reports whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
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

// spilledKey marks a response whose body moved to the spool because its client was slow, for
// the access log.
const spilledKey = "resplane.spilled"

// spillFailureKey is where a response whose body could not move to the spool (the spool
// failed) leaves the cause for the access log, which logs each cause once.
const spillFailureKey = "resplane.spill_failure"

// closedKey names the bound that closed a response before its body was sent, for the access
// log: "send_timeout" or "min_send_rate".
const closedKey = "resplane.closed"

// failureKey is where a handler leaves the internal failure behind an io_error answer for the
// access log.
const failureKey = "resplane.failure"
