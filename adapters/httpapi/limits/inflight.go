package limits

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Inflight tracks the requests the service's servers are handling. On shutdown, requests that outlive
// the grace are cancelled through their context and waited for, so that the cleanup — which
// closes the workdir, the inbox and zeroes the key — never runs under a request still using
// them, and a fetch still streaming removes its temp file before the process exits.
type Inflight struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	active int
	idle   chan struct{} // closed while active is 0
}

func NewInflight() *Inflight {
	ctx, cancel := context.WithCancel(context.Background())
	idle := make(chan struct{})
	close(idle)
	return &Inflight{ctx: ctx, cancel: cancel, idle: idle}
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
