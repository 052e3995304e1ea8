package operator

import (
	"context"
	"time"

	"github.com/resplane/resplane/domain/refusal"
)

// WatchHooks is what `resplane files pull --watch` is told.
type WatchHooks struct {
	// Pulled receives the summary of every cycle that pulled, and when its listing arrived.
	// A cycle cut short by the end of the watch leaves out the files it did not reach.
	Pulled func(s PullSummary, at time.Time)
	// Lost and Back are the poller's (PollHooks): once when the service stops answering, once
	// when it answers again. Either may be nil.
	Lost func(err *refusal.Refusal, retry time.Duration)
	Back func()
}

// Watch is `resplane files pull --watch` (docs/operator-guide.md, "Watching an export"): a
// pull, then one listing per interval through poller, and a pull of that listing whenever it
// differs from the previous one (DiffListings) or the previous pull left a file failed. Only
// what changed is fetched: the pull compares every listed file with its local copy, as a
// single pull does. DryRun is not a watch's option and is ignored.
//
// When ctx ends, the file in flight is dropped (never half-landed) and Watch returns nil;
// its error is the first listing's refusal (Poller.Run).
func (m *Mirror) Watch(ctx context.Context, poller *Poller, interval time.Duration, opts PullOptions, hooks WatchHooks) error {
	opts.DryRun = false
	retry := false
	return poller.Run(ctx, interval, PollHooks{Lost: hooks.Lost, Back: hooks.Back,
		Cycle: func(ctx context.Context, p Poll) {
			if !p.First && p.Diff.Empty() && !retry {
				return
			}
			summary := m.pullListing(ctx, p.Listing, opts)
			if ctx.Err() != nil {
				summary = withoutInterrupted(summary)
			}
			retry = summary.Failed > 0
			hooks.Pulled(summary, p.At)
		}})
}

// withoutInterrupted is s without the files an interruption kept it from reaching: they are
// not failures of the watch, which simply ended.
func withoutInterrupted(s PullSummary) PullSummary {
	kept := s.Failures[:0:0]
	for _, f := range s.Failures {
		if f.Err.Code != refusal.Interrupted {
			kept = append(kept, f)
		}
	}
	s.Failures, s.Failed = kept, len(kept)
	return s
}
