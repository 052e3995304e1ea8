package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/rs/zerolog"

	"github.com/resplane/resplane/adapters/httpapi/rawtarget"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
)

// NewEcho assembles the resource listener's echo instance: panic recovery, one access-log line
// per request and the raw-target dispatcher. log must already redact handles: the access log
// records the request target, and a redeem's target holds a token.
func NewEcho(resources *Resources, log zerolog.Logger) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = bareStatus
	e.Use(endUnreadBody)
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisableStackAll: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			log.Error().Err(err).Bytes("stack", stack).Msg("handler panicked")
			return err
		},
	}))
	e.Use(accessLog(log))
	resources.Register(e)
	return e
}

// unreadBodyGrace is how long, after the answer, a connection whose request declared a body
// may still deliver it. net/http reads an unread body after the handler returns, before it
// closes the connection, and without a nearer deadline it would wait for the whole read
// timeout; the body is never used, so a client that holds it back must not hold the
// connection. A client that sends its body at once still has it drained within the grace, so
// that closing does not reset the connection under the answer.
const unreadBodyGrace = 500 * time.Millisecond

// endUnreadBody bounds how long net/http drains the body of a request that declared one
// (docs/http-api.md, "Request bodies"): every such request is answered without its body being
// read, and its connection closes at most unreadBodyGrace after the answer.
func endUnreadBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if declaresBody(c.Request()) {
			// Only a server connection has a read deadline; under a test recorder this fails,
			// and there is no connection to free.
			_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(unreadBodyGrace))
		}
		return err
	}
}

// accessLog writes one line per request with the raw target as received (so an operator can
// see what a client really sent, peer tokens redacted), the status and the duration. The line
// is at info level, except for a request answered io_error: that line is at error level and
// carries the internal failure's cause — the one place an internal error is logged, and never
// in the response.
func accessLog(log zerolog.Logger) echo.MiddlewareFunc {
	spillFailures := &onceEach{}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			r := c.Request()
			if failure, ok := c.Get(spillFailureKey).(error); ok && spillFailures.first(causeOf(failure)) {
				log.Warn().Err(failure).Msg("a slow client's body could not move to the spool and stays in memory, " +
					"within --read-buffer-budget; check the filesystem of --spool-dir (this is logged once per cause)")
			}
			line := log.Info()
			if failure, ok := c.Get(failureKey).(*refusal.Refusal); ok {
				line = log.Error().Str("outcome", string(failure.Code)).Str("reason", failure.Message)
				if cause := failure.Cause(); cause != nil {
					line = line.AnErr("cause", cause)
				}
			}
			if spilled, _ := c.Get(spilledKey).(bool); spilled {
				line = line.Bool("spilled", true)
			}
			if closed, ok := c.Get(closedKey).(string); ok {
				line = line.Str("closed", closed)
			}
			line.
				Str("method", r.Method).
				Str("target", loggedTarget(rawtarget.OriginalTarget(r))).
				Int("status", c.Response().Status).
				Int64("bytes_out", c.Response().Size).
				Dur("duration", time.Since(start)).
				Str("remote", r.RemoteAddr).
				Msg("request")
			return err
		}
	}
}

// onceEach remembers the causes already logged, up to maxCauses of them (past that, every
// cause counts as logged: a spool failing in ever new ways is one trouble, said often enough).
type onceEach struct {
	mu   sync.Mutex
	seen map[string]bool
}

const maxCauses = 32

// first reports whether cause is new, and remembers it.
func (o *onceEach) first(cause string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[cause] || len(o.seen) >= maxCauses {
		return false
	}
	if o.seen == nil {
		o.seen = map[string]bool{}
	}
	o.seen[cause] = true
	return true
}

// causeOf is what tells one failure's cause from another's: the system error inside err when
// there is one (ENOSPC, EIO, …), whatever the path or size around it, else err's text.
func causeOf(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// bareStatus answers what echo itself refuses (such as "OPTIONS *", whose target no route can
// match) with the bare status and an empty body, like every path outside our routes.
func bareStatus(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status := http.StatusInternalServerError
	var he *echo.HTTPError
	if errors.As(err, &he) {
		status = he.Code
	}
	_ = c.NoContent(status)
}

// loggedTarget is target as the access log records it: exactly as received, with two
// exceptions, because a token with characters percent-encoded is still a credential and the
// log redactor only recognises the literal form:
//
//   - on the peer route, whatever follows /resources/peer/ is logged as <handle:id>, whatever
//     its shape;
//   - elsewhere, a target whose percent-decoded form holds a token is logged decoded, with
//     every token replaced by <handle:id> (the id of the token as a redeem would use it).
func loggedTarget(target string) string {
	path, query, hasQuery := strings.Cut(target, "?")
	token, ok := strings.CutPrefix(path, peerRoute+"/")
	if !ok || token == "" {
		decoded := pathpolicy.DecodeOnce(target)
		if redacted := handle.Redact(decoded); redacted != decoded {
			return redacted
		}
		return target
	}
	logged := peerRoute + "/" + handle.Placeholder(token)
	if hasQuery {
		logged += "?" + query
	}
	return logged
}
