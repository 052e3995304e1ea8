package limits

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Inflight tracks the requests the service's servers are handling. When shutdown begins,
// Drain tells every request so (Draining), so that a body whose client has stopped taking
// bytes ends at once instead of holding the shutdown for its grace. On shutdown, requests that
// outlive the grace are cancelled through their context and waited for, so that the cleanup —
// which closes the workdir, the inbox and zeroes the key — never runs under a request still
// using them, and a fetch still streaming removes its temp file before the process exits.
type Inflight struct {
	ctx      context.Context
	cancel   context.CancelFunc
	draining chan struct{}
	drain    sync.Once

	mu     sync.Mutex
	active int
	idle   chan struct{} // closed while active is 0
}

func NewInflight() *Inflight {
	draining := make(chan struct{})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), drainingKey{}, draining))
	idle := make(chan struct{})
	close(idle)
	return &Inflight{ctx: ctx, cancel: cancel, draining: draining, idle: idle}
}

// drainingKey is the context key of the channel Drain closes.
type drainingKey struct{}

// Drain says that shutdown has begun: the channel Draining returns for every request's
// context is closed. Calling it again does nothing.
func (f *Inflight) Drain() { f.drain.Do(func() { close(f.draining) }) }

// Draining returns a channel that is closed once the shutdown of the server whose request ctx
// belongs to has begun (Inflight.Drain); nil, which never is, for a context of no Inflight.
func Draining(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(drainingKey{}).(chan struct{})
	return ch
}

// BaseContext is an http.Server.BaseContext: every request's context derives from ours.
func (f *Inflight) BaseContext(net.Listener) context.Context { return f.ctx }

// Track wraps h so the request is counted while it runs.
func (f *Inflight) Track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		if f.active == 0 {
			f.idle = make(chan struct{})
		}
		f.active++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			if f.active--; f.active == 0 {
				close(f.idle)
			}
			f.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// Abandon cancels every request still running and waits up to wait for them to return. It
// reports whether they all did.
func (f *Inflight) Abandon(wait time.Duration) bool {
	f.cancel()
	f.mu.Lock()
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-time.After(wait):
		return false
	}
}
