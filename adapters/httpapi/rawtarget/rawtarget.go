// Package rawtarget lets an HTTP/1.1 handler see the request target exactly as the client sent
// it, including targets that net/http would otherwise refuse with a plain-text 400 before any
// handler runs, so that such a target still reaches our rules (docs/http-api.md,
// "The raw-target repair").
//
// # How
//
// [NewListener] wraps a listener. Each accepted connection reads the first line of the
// connection (the request line) before net/http sees any byte, records the request target as
// it appeared between the two spaces of that line, and hands net/http the line with one repair
// applied (see below); every other byte, the rest of the header block and the body included,
// passes through unchanged. [ConnContext] (for [http.Server.ConnContext]) puts the connection
// in the request's context and [OriginalTarget] returns the recorded target to the handler.
//
// Only the first line of a connection is inspected, so the server must serve one request per
// connection (package limits makes every response "Connection: close"). OriginalTarget stays
// correct even if it does not: it returns the recorded target only when the target net/http parsed is that
// target's repaired form, and otherwise falls back to [http.Request.RequestURI].
//
// # What is repaired, and what is not
//
// For an origin-form target (one that starts with "/"), net/http's url.ParseRequestURI fails
// on exactly two things: an ASCII control byte (0x00–0x1F, 0x7F) anywhere in the target, and,
// in the path (the part before the first "?"), a "%" that is not followed by two hex digits.
// Nothing else is refused: raw non-ASCII and invalid UTF-8 bytes, "#", "\", "//" at the start,
// "%2e%2e" and "%2f" all parse. The query is never unescaped by net/http, so it needs nothing.
//
//   - Repaired: in the path of an origin-form target, every "%" not followed by two hex digits
//     (either case) becomes "%25". net/http then decodes it back to the same literal "%", which
//     is our lowering rule ("anything else is kept literally", docs/http-api.md,
//     "Lowering a path"), so even the decoded r.URL.Path agrees with it. Valid escapes,
//     including "%25", are left as they are.
//   - Not repaired: control bytes. A NUL or a tab inside the target is not a valid HTTP/1.1
//     request-target, and such a request may get a bare 400 (as may a raw space, which net/http
//     reads as a malformed request line; docs/http-api.md, "The raw-target repair").
//   - Not repaired: targets that do not start with "/" ("*", absolute-form "http://h/p",
//     authority-form). None of them can name one of our routes, which are matched on the raw
//     origin-form path, so repairing them would only turn net/http's 400 into our bare 404.
//   - Not repaired: everything that is not the target — a malformed request line, an invalid
//     method or version, a missing or malformed Host header, an invalid header name or value.
//     Those requests do not parse as HTTP/1.1 and keep net/http's bare 400.
//
// # Limits
//
// A request line longer than [MaxRequestLine] bytes is passed through untouched and nothing is
// recorded; net/http's header-size limit then answers 400 or 431. A repaired line is longer
// than the original by two bytes per repaired "%", and net/http's header-size limit counts the
// repaired bytes.
//
// The wrapper sees the bytes net/http parses, so it must wrap a plain-text HTTP/1.x listener
// (not TLS), and it must be the outermost wrapper: ConnContext recognises only connections
// returned by a listener from NewListener. Like the connections of package limits, which it
// wraps in this service, a connection does not offer CloseWrite; net/http then skips only
// the early FIN of its half-close and still waits before closing, so a client that sent a body
// nobody read still receives the response before the reset. It does offer ReadFrom, passed on
// to the connection it wraps, so net/http still sends a file with sendfile(2) through it.
package rawtarget

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
)

// MaxRequestLine is the longest request line, in bytes including its line ending, that a
// connection inspects and repairs. It equals the service's whole header-block cap, so any
// longer line is refused by net/http anyway.
const MaxRequestLine = 16 << 10

// NewListener returns a listener whose connections record and repair the request target of the
// first request line, as described in the package documentation.
func NewListener(inner net.Listener) net.Listener {
	return listener{inner}
}

type listener struct {
	net.Listener
}

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, scanning: true}, nil
}

// conn reads the request line ahead of net/http. net/http never calls Read concurrently on one
// connection, and the fields below are written before the first byte of the request reaches
// net/http, so a handler reading target is ordered after the write.
type conn struct {
	net.Conn
	scanning bool        // the request line has not been read yet
	pending  []byte      // bytes read ahead (the repaired line and what followed it), not yet handed on
	err      error       // the read error that ended the scan, returned once pending is drained
	target   string      // the request target as sent
	recorded bool        // target was recorded
	grown    atomic.Bool // the first RemoteAddr has grown the stack
}

// RemoteAddr is the wrapped connection's. Its first call, which net/http makes as the first
// thing on the connection's goroutine, grows that goroutine's stack (growStack).
func (c *conn) RemoteAddr() net.Addr {
	if !c.grown.Load() {
		c.grown.Store(true)
		growStack(len(c.target))
	}
	return c.Conn.RemoteAddr()
}

func (c *conn) Read(p []byte) (int, error) {
	if c.scanning {
		if n, whole := c.scanInto(p); whole {
			return n, nil
		}
	}
	if len(c.pending) == 0 && c.err == nil {
		return c.Conn.Read(p)
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	if len(c.pending) > 0 {
		return n, nil
	}
	err := c.err
	c.err = nil
	return n, err
}

// ReadFrom passes r to the wrapped connection's ReadFrom, so that net/http's response.ReadFrom
// still reaches a *net.TCPConn's sendfile(2) through this wrapper.
func (c *conn) ReadFrom(r io.Reader) (int64, error) { return ReadFromConn(c.Conn, r) }

// ReadFromConn is io.ReaderFrom for a connection wrapper: it uses the wrapped connection's own
// ReadFrom when it has one — for a *net.TCPConn that is sendfile(2) from a file, which a
// wrapper without ReadFrom hides from net/http — and otherwise copies r to its Write.
func ReadFromConn(c net.Conn, r io.Reader) (int64, error) {
	if rf, ok := c.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{c}, r)
}

// writerOnly hides every method but Write, so io.Copy cannot loop back into a ReadFrom.
type writerOnly struct{ io.Writer }

// scanInto makes the connection's first read into p, the caller's own buffer. When that read
// brings the whole request line, which needs no repair, the line is recorded and the n bytes
// are handed on where they already are (whole is true): no buffer of the connection's own, no
// copy, as for nearly every request. Otherwise what was read becomes pending (a repaired line
// and what followed it, or a read error) or seeds scan, which reads on, and whole is false.
func (c *conn) scanInto(p []byte) (n int, whole bool) {
	c.scanning = false
	if len(p) == 0 {
		c.scan(nil)
		return 0, false
	}
	n, err := c.Conn.Read(p)
	read := p[:n]
	if i := bytes.IndexByte(read[:min(n, MaxRequestLine)], '\n'); i >= 0 {
		end := i + 1
		line := c.repairLine(read[:end])
		if len(line) == end && err == nil { // a repair only ever lengthens the line
			return n, true
		}
		c.pending = append(slices.Clip(line), read[end:]...) // never p's bytes, which the caller reuses
		c.err = err
		return 0, false
	}
	if err != nil || n >= MaxRequestLine {
		c.pending, c.err = slices.Clone(read), err
		return 0, false
	}
	c.scan(slices.Clone(read))
	return 0, false
}

// scan reads on, after the bytes already read, until the end of the first line, the line
// limit or a read error, whichever comes first. Blocking here is what net/http would do
// anyway: it cannot parse anything before the request line is complete. Read deadlines set by
// net/http (ReadHeaderTimeout) apply.
func (c *conn) scan(buf []byte) {
	for {
		buf = slices.Grow(buf, min(4096, MaxRequestLine-len(buf)))
		start := len(buf)
		n, err := c.Conn.Read(buf[start:cap(buf)])
		buf = buf[:start+n]
		if i := bytes.IndexByte(buf[start:min(len(buf), MaxRequestLine)], '\n'); i >= 0 {
			end := start + i + 1
			c.pending = append(c.repairLine(buf[:end]), buf[end:]...)
			c.err = err
			return
		}
		if err != nil || len(buf) >= MaxRequestLine {
			c.pending, c.err = buf, err
			return
		}
	}
}

// repairLine records the target of a request line (with its line ending) and returns the line
// with the target repaired. A line that net/http cannot split into method, target and version
// is returned as is: net/http refuses it whatever its target.
func (c *conn) repairLine(line []byte) []byte {
	content := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	// The same split as net/http's parseRequestLine: method, target, then the version.
	method, rest, ok1 := bytes.Cut(content, []byte(" "))
	target, _, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 {
		return line
	}
	c.target, c.recorded = string(target), true
	repaired := repair(c.target)
	if repaired == c.target {
		return line
	}
	out := make([]byte, 0, len(line)+len(repaired)-len(target))
	out = append(out, method...)
	out = append(out, ' ')
	out = append(out, repaired...)
	return append(out, line[len(method)+1+len(target):]...)
}

// repair returns target with every "%" in the path of an origin-form target that does not
// start a valid escape replaced by "%25". Any other target is returned unchanged.
func repair(target string) string {
	if !strings.HasPrefix(target, "/") {
		return target
	}
	pathEnd := strings.IndexByte(target, '?')
	if pathEnd < 0 {
		pathEnd = len(target)
	}
	first := strings.IndexByte(target[:pathEnd], '%')
	if first < 0 {
		return target // nothing to repair: the common case, found without a loop over the bytes
	}
	var b strings.Builder
	copied := 0 // target[:copied] has been written to b
	for i := first; i < pathEnd; i++ {
		if target[i] == '%' && !(i+2 < pathEnd && isHex(target[i+1]) && isHex(target[i+2])) {
			b.WriteString(target[copied : i+1])
			b.WriteString("25")
			copied = i + 1
		}
	}
	if copied == 0 {
		return target
	}
	b.WriteString(target[copied:])
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

type connKey struct{}

// ConnContext is an [http.Server.ConnContext] hook: it makes the connection's recorded target
// available to [OriginalTarget]. It leaves ctx unchanged for a connection that was not
// accepted by a listener from [NewListener].
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*conn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// OriginalTarget returns r's request target exactly as the client sent it. It falls back to
// r.RequestURI (net/http's copy of the target, identical to the original whenever no repair
// was needed) when the connection recorded nothing for this request: a connection not
// wrapped by [NewListener] or not hooked by [ConnContext], a request line longer than
// [MaxRequestLine], or a second request on a kept-alive connection.
func OriginalTarget(r *http.Request) string {
	tc, ok := r.Context().Value(connKey{}).(*conn)
	if ok && tc.recorded && repair(tc.target) == r.RequestURI {
		return tc.target
	}
	return r.RequestURI
}

// growStack makes the runtime grow the calling goroutine's stack to 8 KiB while it is
// shallow: net/http's conn.serve has grown a connection's goroutine to 4 KiB by its first
// RemoteAddr, and serving a read or a redeem needs 8 KiB, which the runtime otherwise
// reached deep in the handler, copying and adjusting every frame of the middleware chain
// (docs/decisions/0187-a-connection-grows-its-stack-before-its-first-request.md). A frame of
// stackFrame bytes does not fit in 4 KiB, so called from there it costs one copy of two
// frames. b stays on the stack (no allocation; TestGrowStackAllocatesNothing):
// its only cost is being zeroed.
//
//go:noinline
func growStack(i int) byte {
	var b [stackFrame]byte
	b[i%stackFrame] = 1
	return b[(i*7)%stackFrame]
}

// stackFrame is growStack's frame: more than a 4 KiB stack can hold, less than an 8 KiB one
// has left near its top.
const stackFrame = 4 << 10
