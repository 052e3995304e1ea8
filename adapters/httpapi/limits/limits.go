// Package limits hardens every HTTP server the service runs — the resource listener, the
// control socket and the metrics listener — in one place (Harden): it bounds how long a client
// may take to send its request and to receive its answer, and how large its header block may
// be. For the resource listener it also bounds how many connections may be open at once and
// installs the raw-target listener (package rawtarget), so that every request that parses
// reaches the handler with its target as sent; there, use both halves together:
//
//	limits.Harden(srv, limits.Options{ReadHeaderTimeout: flagValue})
//	srv.Serve(limits.Listen(tcpListener, limits.Caps{}))
//
// Inflight tracks the requests of every server, so that shutdown can cancel and wait for the
// ones that outlive its grace.
package limits

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/resplane/resplane/adapters/httpapi/rawtarget"
)

const (
	// DefaultReadHeaderTimeout is how long a client may take to send its whole request header
	// (--read-header-timeout; docs/operator-guide.md, "Memory and connection bounds").
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultWriteTimeout bounds the answer to one request, from the end of its header, when
	// Options gives none; the service gives --send-timeout. The handler may push the deadline
	// back while a body makes progress (httpapi writes files and listings that way), so it
	// bounds whole answers only for what is written in one go.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultMaxConns is the cap on open connections used by Listen when none is given. One
	// capsule's peers and operator need few; the cap only has to stop a flood from exhausting
	// file descriptors and goroutines. Connections beyond it wait in the kernel's backlog. One
	// client address may hold at most half of them (Caps.PerAddress).
	DefaultMaxConns = 256
	// MaxHeaderBlock is the most bytes net/http reads for a request line and header block
	// together; a larger block is answered 431 by net/http. It is also rawtarget's limit on the
	// request line.
	MaxHeaderBlock = rawtarget.MaxRequestLine
)

// netHTTPHeaderSlack is what net/http adds to http.Server.MaxHeaderBytes before enforcing it
// (Server.initialReadLimitSize: MaxHeaderBytes + 4096).
const netHTTPHeaderSlack = 4096

// MaxHeaderBytesFor is the http.Server.MaxHeaderBytes under which net/http reads at most block
// bytes of request line and header block, its slack included.
func MaxHeaderBytesFor(block int) int { return block - netHTTPHeaderSlack }

// Options are the tunable limits. A zero or negative value takes the default.
type Options struct {
	ReadHeaderTimeout time.Duration // default DefaultReadHeaderTimeout
	// WriteTimeout bounds writing one answer; default DefaultWriteTimeout, except on a Local
	// server, where the default is no bound.
	WriteTimeout time.Duration
	// MaxHeaderBlock bounds a request's line and header block together; default
	// MaxHeaderBlock.
	MaxHeaderBlock int
	// Local is a server that is not the resource listener: the control socket or the metrics
	// listener. It keeps net/http's own handling of connections and targets (keep-alive, the
	// cleaned target, "OPTIONS *"), and a request's answer is bounded only when WriteTimeout
	// says so: a control API tool call lasts as long as the fetch it runs, which bounds
	// itself.
	Local bool
}

// ControlOptions are the control socket's: the --read-header-timeout, and the header cap.
func ControlOptions(readHeader time.Duration) Options {
	return Options{ReadHeaderTimeout: readHeader, Local: true}
}

// Harden configures srv as opts says. Every server gets:
//
//   - ReadHeaderTimeout: a connection that has not sent its whole header in time is closed;
//   - WriteTimeout: bounds writing the answer;
//   - ReadTimeout = ReadHeaderTimeout + WriteTimeout: bounds reading a request body, which
//     net/http otherwise does without a deadline when it drains an unread body after the
//     handler. It is never shorter than the write deadline because net/http cancels the
//     request's context when a read deadline passes while the handler is still writing;
//     without a write bound there is none either;
//   - IdleTimeout = ReadHeaderTimeout;
//   - MaxHeaderBytes such that net/http's effective cap, slack included, is MaxHeaderBlock.
//
// The resource listener (not Local) also gets:
//
//   - one request per connection, which rawtarget relies on: srv.Handler is wrapped so that
//     every response carries "Connection: close" and net/http closes after it. Keep-alive is
//     deliberately left enabled in net/http itself, because with it disabled net/http strips
//     the header from HTTP/1.0 responses, and every response must carry it
//     (docs/decisions/0008-connection-close-on-every-response.md);
//   - no general "OPTIONS *" handler: that request gets the handler's answer (a bare 404),
//     not net/http's built-in 200;
//   - ConnContext runs rawtarget.ConnContext after any hook srv already had. Serve srv on a
//     listener from Listen, or rawtarget.OriginalTarget falls back to net/http's (repaired)
//     RequestURI.
func Harden(srv *http.Server, opts Options) {
	readHeader := orDefault(opts.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	write := opts.WriteTimeout
	if !opts.Local || write > 0 {
		write = orDefault(write, DefaultWriteTimeout)
		srv.ReadTimeout = readHeader + write
	}
	srv.ReadHeaderTimeout = readHeader
	srv.WriteTimeout = write
	srv.IdleTimeout = readHeader
	block := opts.MaxHeaderBlock
	if block <= 0 {
		block = MaxHeaderBlock
	}
	srv.MaxHeaderBytes = MaxHeaderBytesFor(block)
	if opts.Local {
		return
	}
	if prev := srv.ConnContext; prev != nil {
		srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			return rawtarget.ConnContext(prev(ctx, c), c)
		}
	} else {
		srv.ConnContext = rawtarget.ConnContext
	}
	srv.DisableGeneralOptionsHandler = true
	srv.Handler = closeAfterReply(srv.Handler)
}

// closeAfterReply marks every response "Connection: close" before next writes anything, so
// each connection serves exactly one request whatever the request's HTTP version.
func closeAfterReply(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		next.ServeHTTP(w, r)
	})
}

// Bind binds a TCP listener on address for a server configured by Harden. The connections it
// accepts carry no TCP keepalive: each serves one request and is closed after its answer, and
// a peer that vanishes mid-answer is dropped by the send bounds (--send-timeout,
// --min-send-rate) long before a keepalive probe would notice, so the four socket options a
// keepalive takes per connection would buy nothing
// (docs/decisions/0180-no-tcp-keepalive-on-one-request-connections.md).
func Bind(address string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	return lc.Listen(context.Background(), "tcp", address)
}

// Listen wraps l for a server configured by Harden: the connection caps (Accept waits while
// caps.Total connections are open; a connection from an address that already holds
// caps.PerAddress is closed at once), and the raw-target listener outermost, where
// rawtarget.ConnContext finds it. Both wrappers keep the TCP connection's ReadFrom, so a
// response body sent from a file goes out with sendfile(2).
func Listen(l net.Listener, caps Caps) net.Listener {
	return rawtarget.NewListener(newLimitListener(l, caps))
}

// ListenTLS is Listen serving TLS under config: the TLS layer sits between the connection caps
// and the raw-target listener, which reads the request line from the plain-text side. A
// handshake happens in the connection's first read, so it is bounded by the read deadline
// net/http sets for the request header (--read-header-timeout). A response body goes out
// through the TLS connection's writes: there is no sendfile(2) under TLS.
func ListenTLS(l net.Listener, caps Caps, config *tls.Config) net.Listener {
	return rawtarget.NewListener(tls.NewListener(newLimitListener(l, caps), config))
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
