package mcp

import (
	"context"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/resplane/resplane/application/operator"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
)

// watcher serves resources/subscribe (docs/mcp.md, "Subscriptions"): while at least one URI
// is subscribed it runs the shared poller (operator.Poller) over the operator plane, one
// listing per interval, and turns each listing's diff into the SDK's own notifications:
// Server.ResourceUpdated for a subscribed URI whose file changed, appeared or disappeared,
// and, through the SDK's resource registry, notifications/resources/list_changed when the set
// of files changed. With no subscription nothing is polled.
//
// The registry holds the files of the last listing, so that the SDK announces a change of the
// set as it announces any change of its resources. Filling it from the first listing of a
// watch is not a change a client was told about: sendList lets a list_changed through only
// when a later listing changed the set.
type watcher struct {
	s        *Server
	poller   *operator.Poller
	interval time.Duration

	mu sync.Mutex
	// base is the server's context; every watch runs beneath it.
	base context.Context
	// subs are the subscribed URIs of each session.
	subs map[subscription]bool
	// stop ends the running watch; nil when none runs.
	stop context.CancelFunc
	// registered are the URIs in the SDK's registry.
	registered map[string]bool
	// announce is set when a listing changed the set of files and its list_changed is owed.
	announce bool
}

// subscription is one session's subscription to one URI.
type subscription struct {
	session *sdk.ServerSession
	uri     string
}

func newWatcher(s *Server, poller *operator.Poller, interval time.Duration) *watcher {
	return &watcher{s: s, poller: poller, interval: interval, subs: map[subscription]bool{}, registered: map[string]bool{}}
}

// subscribe records a subscription and starts the watch when it is the first. A URI that is
// not a file of this operator plane is refused as resources/read refuses it.
func (w *watcher) subscribe(_ context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	if _, err := w.s.cfg.Files.PathOf(uri); err != nil {
		return w.s.rpcError(uri, refusal.From(err))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs[subscription{req.Session, uri}] = true
	if w.stop == nil {
		ctx, stop := context.WithCancel(w.base)
		w.stop = stop
		go w.run(ctx)
	}
	return nil
}

// unsubscribe drops a subscription and stops the watch when it was the last.
func (w *watcher) unsubscribe(_ context.Context, req *sdk.UnsubscribeRequest) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.subs, subscription{req.Session, req.Params.URI})
	if len(w.subs) == 0 && w.stop != nil {
		w.stop()
		w.stop = nil
	}
	return nil
}

// run is one watch, until ctx ends. Its error (the first listing refused) is logged: the
// subscriptions stay, and the next first subscription starts a new watch.
func (w *watcher) run(ctx context.Context) {
	err := w.poller.Run(ctx, w.interval, operator.PollHooks{
		Cycle: w.cycle,
		Lost: func(r *refusal.Refusal, retry time.Duration) {
			w.s.cfg.Log.Warn().Str("code", string(r.Code)).Dur("retry", retry).Msg("the listing for the subscriptions failed; retrying with backoff")
		},
		Back: func() { w.s.cfg.Log.Info().Msg("the listing for the subscriptions works again") },
	})
	if err != nil {
		w.s.logged("the listing for the subscriptions was refused", err)
		w.mu.Lock()
		if w.stop != nil && ctx.Err() == nil {
			w.stop()
			w.stop = nil
		}
		w.mu.Unlock()
	}
}

// cycle turns one listing into notifications.
func (w *watcher) cycle(ctx context.Context, p operator.Poll) {
	uris := map[string]string{} // path → URI, of every listed path the service could serve
	for _, e := range p.Listing.Entries {
		if rel, err := pathpolicy.Lower(e.Path); err == nil {
			uris[e.Path] = w.s.cfg.Files.FileURL(rel)
		}
	}
	w.mu.Lock()
	if ctx.Err() != nil {
		w.mu.Unlock()
		return
	}
	subscribed := map[string]bool{}
	for sub := range w.subs {
		subscribed[sub.uri] = true
	}
	if !p.First && p.Diff.SetChanged() {
		w.announce = true
	}
	added, removed := w.sync(uris)
	w.mu.Unlock()

	for _, uri := range removed {
		w.s.sdk.RemoveResources(uri)
	}
	for _, uri := range added {
		w.s.sdk.AddResource(&sdk.Resource{URI: uri, Name: uri}, w.read)
	}
	if p.First {
		return
	}
	for _, path := range append(append(p.Diff.Changed, p.Diff.Added...), p.Diff.Removed...) {
		uri := uris[path]
		if uri == "" {
			if rel, err := pathpolicy.Lower(path); err == nil {
				uri = w.s.cfg.Files.FileURL(rel)
			}
		}
		if subscribed[uri] {
			_ = w.s.sdk.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri})
		}
	}
}

// sync makes registered the URIs of uris and returns what to add to and remove from the
// SDK's registry.
func (w *watcher) sync(uris map[string]string) (added, removed []string) {
	now := make(map[string]bool, len(uris))
	for _, uri := range uris {
		now[uri] = true
		if !w.registered[uri] {
			added = append(added, uri)
		}
	}
	for uri := range w.registered {
		if !now[uri] {
			removed = append(removed, uri)
		}
	}
	w.registered = now
	return added, removed
}

// read is the registry's handler of a registered resource: the same verified read as any.
func (w *watcher) read(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	return w.s.read(ctx, req.Params.URI)
}

// sendList is the sending middleware that lets notifications/resources/list_changed through
// only when a listing changed the set of files since the last one was sent: the SDK also
// announces the registry being filled from a watch's first listing, which changed nothing a
// client was told.
func (w *watcher) sendList(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method == "notifications/resources/list_changed" {
			w.mu.Lock()
			owed := w.announce
			w.announce = false
			w.mu.Unlock()
			if !owed {
				return nil, nil
			}
		}
		return next(ctx, method, req)
	}
}
