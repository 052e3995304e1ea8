package limits

import (
	"context"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Metrics listener bounds: a scraper, the probes and an operator's curl need little.
const (
	// MetricsMaxConns caps the metrics listener's open connections.
	MetricsMaxConns = 16
	// MetricsReadHeaderTimeout is how long a client of the metrics listener may take to send
	// its request header: a probe or a scraper sends it at once, so a connection that dribbles
	// it holds a slot for at most this long.
	MetricsReadHeaderTimeout = 2 * time.Second
	// metricsWriteTimeout bounds writing one answer on the metrics listener.
	metricsWriteTimeout = 30 * time.Second
	// metricsMaxHeaderBlock bounds a request's line and header block on the metrics listener.
	metricsMaxHeaderBlock = 8 << 10
	// metricsEvictAfter is how long a new connection has to get its request into the handler
	// before it may lose its slot: far longer than a probe takes, far shorter than the header
	// timeout, so a flood of reconnects cannot close a probe between accept and answer.
	metricsEvictAfter = 250 * time.Millisecond
)

// MetricsOptions are the metrics listener's: a 2 s header timeout (MetricsReadHeaderTimeout,
// whatever --read-header-timeout says), a 30 s bound on an answer and an 8 KiB header block.
// Serve it on ListenMetrics.
func MetricsOptions() Options {
	return Options{ReadHeaderTimeout: MetricsReadHeaderTimeout, WriteTimeout: metricsWriteTimeout,
		MaxHeaderBlock: metricsMaxHeaderBlock, Local: true}
}

// ListenMetrics returns l capped at MetricsMaxConns open connections for srv (hardened with
// MetricsOptions; it installs srv's ConnContext and wraps its Handler, so call it last), such
// that clients that merely hold slots cannot starve the probes
// (docs/decisions/0131-the-metrics-listener-evicts-connections-without-a-request.md). A
// connection counts as answering while its request is in srv's handler. When every slot is
// taken, a new connection is not left waiting: the connection that was accepted first among
// those not answering (one sending its header slowly, or idle between requests) is closed to
// make room, once it has been open metricsEvictAfter. Until one has, or when all of them are
// answering, Accept waits for a slot to free.
func ListenMetrics(srv *http.Server, l net.Listener) net.Listener {
	el := &evictingListener{Listener: l, max: MetricsMaxConns, freed: make(chan struct{}, 1), done: make(chan struct{})}
	prev := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		if ec, ok := c.(*evictableConn); ok {
			ctx = context.WithValue(ctx, evictableKey{}, ec)
		}
		return ctx
	}
	next := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ec, ok := r.Context().Value(evictableKey{}).(*evictableConn); ok {
			el.answering(ec, 1)
			defer el.answering(ec, -1)
		}
		next.ServeHTTP(w, r)
	})
	return el
}

// evictableKey is the request context key of the request's *evictableConn.
type evictableKey struct{}

// evictingListener is ListenMetrics's listener.
type evictingListener struct {
	net.Listener
	max   int
	freed chan struct{} // a token whenever a slot frees
	done  chan struct{} // closed by Close
	once  sync.Once

	mu   sync.Mutex
	open []*evictableConn // in the order accepted
}

// evictableConn is one connection of an evictingListener.
type evictableConn struct {
	net.Conn
	l         *evictingListener
	answering int // requests of it in the handler; under l.mu
	accepted  time.Time
	once      sync.Once
}

// Accept takes the next connection and gives it a slot: a free one, else one taken from the
// oldest connection that is not answering (closed) once it has been open metricsEvictAfter,
// else the first to be given back.
func (l *evictingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	ec := &evictableConn{Conn: c, l: l, accepted: time.Now()}
	for {
		admitted, victim, wait := l.admit(ec)
		if admitted {
			return ec, nil
		}
		if victim != nil {
			_ = victim.Conn.Close()
			continue
		}
		if !l.waitForSlot(wait) {
			_ = c.Close()
			return nil, net.ErrClosed
		}
	}
}

// waitForSlot waits for a slot to free, or for wait (when positive) to pass; false when the
// listener was closed meanwhile.
func (l *evictingListener) waitForSlot(wait time.Duration) bool {
	var ripe <-chan time.Time
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		ripe = timer.C
	}
	select {
	case <-l.freed:
	case <-ripe:
	case <-l.done:
		return false
	}
	return true
}

// admit gives ec a slot when one is free; otherwise it takes the oldest connection that is
// not answering out of the open ones and returns it, for the caller to close. When that
// connection is younger than metricsEvictAfter, it returns how long until it is not.
func (l *evictingListener) admit(ec *evictableConn) (bool, *evictableConn, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.open) < l.max {
		l.open = append(l.open, ec)
		return true, nil, 0
	}
	for i, c := range l.open {
		if c.answering == 0 {
			if young := metricsEvictAfter - time.Since(c.accepted); young > 0 {
				return false, nil, young
			}
			l.open = slices.Delete(l.open, i, i+1)
			return false, c, 0
		}
	}
	return false, nil, 0
}

// answering counts a request of ec into (+1) or out of (-1) the handler.
func (l *evictingListener) answering(ec *evictableConn, delta int) {
	l.mu.Lock()
	ec.answering += delta
	l.mu.Unlock()
}

// leave gives ec's slot back, if it still holds one.
func (l *evictingListener) leave(ec *evictableConn) {
	l.mu.Lock()
	if i := slices.Index(l.open, ec); i >= 0 {
		l.open = slices.Delete(l.open, i, i+1)
	}
	l.mu.Unlock()
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *evictingListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.done) })
	return err
}

// Close closes the connection and gives its slot back, once.
func (c *evictableConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.leave(c) })
	return err
}
