package operator

import (
	"context"
	"time"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// The bounds of a watch (docs/operator-guide.md, "Watching an export").
const (
	// DefaultInterval is how often a watch lists the export unless told otherwise.
	DefaultInterval = 2 * time.Second
	// MinInterval is the shortest interval a watch accepts
	// (docs/decisions/0151-the-watch-interval-is-at-least-200ms.md).
	MinInterval = 200 * time.Millisecond
	// MaxBackoff is the longest a watch waits between two listings of a service that does
	// not answer (docs/decisions/0150-a-watch-backs-off-doubling-to-30s.md).
	MaxBackoff = 30 * time.Second
)

// Poller is the one watch loop `resplane files pull --watch` and the subscriptions of
// `resplane mcp --files` share (docs/operator-guide.md, "Watching an export"): it lists the
// export once per interval, compares each listing with the last one (DiffListings), and
// hands both to its caller. A cycle never starts while the previous one runs: the caller's
// Cycle runs on the poller's goroutine, and the next listing is sent an interval after the
// previous one was, or at once when the cycle took longer.
//
// A service that does not answer is retried with backoff: the interval, doubled after each
// failure up to MaxBackoff; the caller is told once when the listing starts failing and once
// when it works again, never once per try.
type Poller struct {
	files *RemoteFiles
	clock ports.Clock
}

// NewPoller returns the poller over files.
func NewPoller(files *RemoteFiles, clock ports.Clock) *Poller {
	return &Poller{files: files, clock: clock}
}

// Poll is one successful listing of a watch.
type Poll struct {
	// Listing is the listing, held to the service's bounds (RemoteFiles.List).
	Listing ports.RemoteListing
	// Diff is what changed since the previous successful listing; for the first, every
	// listed path is added.
	Diff ListingDiff
	// First is set for the watch's first listing.
	First bool
	// At is when the listing arrived.
	At time.Time
}

// PollHooks is what a watch tells its caller.
type PollHooks struct {
	// Cycle receives every successful listing, changed or not, in order.
	Cycle func(ctx context.Context, p Poll)
	// Lost is called once when the listing starts failing: the failure, and how long until
	// the next try. It may be nil.
	Lost func(err *refusal.Refusal, retry time.Duration)
	// Back is called once when a listing succeeds after Lost. It may be nil.
	Back func()
}

// Run watches, listing once per interval, until ctx ends; then it returns nil. The first listing's refusal by the service
// (anything but service_unreachable) is returned at once: a watch of what the service will
// not list has nothing to follow. Any later failure is retried with backoff.
func (p *Poller) Run(ctx context.Context, interval time.Duration, hooks PollHooks) error {
	var previous []ports.RemoteEntry
	first, lost, failures := true, false, 0
	for {
		start := p.clock.Now()
		listing, err := p.files.List(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := interval
		switch {
		case err != nil:
			r := refusal.From(err)
			if first && r.Code != refusal.ServiceUnreachable {
				return err
			}
			wait = backoff(interval, failures)
			failures++
			if !lost && hooks.Lost != nil {
				hooks.Lost(r, wait)
			}
			lost = true
		default:
			if lost && hooks.Back != nil {
				hooks.Back()
			}
			lost, failures = false, 0
			poll := Poll{Listing: listing, Diff: DiffListings(previous, listing.Entries), First: first, At: p.clock.Now()}
			first, previous = false, listing.Entries
			hooks.Cycle(ctx, poll)
		}
		if !sleep(ctx, wait-p.clock.Now().Sub(start)) {
			return nil
		}
	}
}

// backoff is how long to wait after the failures-th consecutive failure (0 for the first):
// the interval doubled that many times, at most MaxBackoff.
func backoff(interval time.Duration, failures int) time.Duration {
	wait := interval
	for range failures {
		if wait >= MaxBackoff/2 {
			return MaxBackoff
		}
		wait *= 2
	}
	return min(wait, MaxBackoff)
}

// sleep waits d, or returns false at once when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
