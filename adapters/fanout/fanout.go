// Package fanout implements ports.TraceSink over several sinks: trace.jsonl, the record of
// truth, first and synchronously, then every other sink — spans through a bounded queue of
// their own, counters in memory inline (docs/trace.md, "Other sinks").
//
// Guarantees:
//
//   - The primary sink is written first, on the recording goroutine, exactly as if it were the
//     only sink: whatever the other sinks do, the record is never delayed beyond its own write,
//     never reordered and never lost because of them.
//   - Handing an event to a queued sink never blocks: it is put on that sink's queue, or, when
//     the queue is full, dropped for that sink alone and reported to Config.OnDrop. A sink that
//     blocks fills its own queue and loses its own events; the request, the primary write and
//     every other sink go on. An Inline sink is called on the recording goroutine instead; it
//     must never block (Extra.Inline).
//   - Each other sink receives its events in the order they were recorded, a queued sink on one
//     goroutine of its own, each event as a trace.Stamped carrying the moment it was recorded.
//     An event's fields are built once for every sink, the primary included (trace.Stamp);
//     a sink only reads them.
//   - A queued sink with a Batch is woken once per batch, not once per event: when Batch events
//     wait, when Delay has passed since the first of them, or when the fan-out closes; its
//     goroutine then hands over every event that waits and, if the sink is a Flusher, calls
//     Flush once.
//   - A sink that panics loses that one event (reported to Config.OnFailure) and keeps receiving
//     the next ones; the process goes on.
//   - With no queued sink there is no queue and no goroutine; with no other sink at all, Record
//     is the primary's Record.
//
// Non-guarantees:
//
//   - Another sink may lag behind the primary — a batched sink by up to its Delay — and loses
//     whatever is still queued when Close gives up waiting. Only the primary is the record.
//   - Events recorded after Close reach the primary and the inline sinks only.
package fanout

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/ports"
)

// Primary is the record of truth: trace.jsonl, whose session_start and session_end lines are
// written by Start and End (adapters/jsonl.File).
type Primary interface {
	ports.TraceSink
	Start(trace.SessionStart)
	End(trace.SessionEnd)
}

// Extra is another sink, fed after the primary.
type Extra struct {
	// Name names the sink in OnDrop and OnFailure, such as "prometheus" or "otel".
	Name string
	Sink ports.TraceSink
	// Inline hands events to Sink on the recording goroutine, without a queue: only for a sink
	// whose Record never blocks and costs no more than queueing would, such as counters in
	// memory. Any other sink gets a queue and a goroutine of its own.
	Inline bool
	// QueueSize bounds this sink's queue; zero or less means Config.QueueSize.
	QueueSize int
	// Batch, when above zero, lets the queue's goroutine sleep until Batch events wait or Delay
	// has passed since the first of them, so that a busy plane costs one wake-up per batch
	// rather than per event. Zero wakes it for every event (several are taken at once when they
	// have piled up meanwhile). A Batch above the queue's size is the queue's size. A Delay of
	// zero hands a batch over as soon as it is seen.
	Batch int
	Delay time.Duration
}

// Flusher is a queued sink that wants to know where a batch ends: its Flush is called on the
// sink's goroutine after each batch has been handed over, such as to send what Record gathered
// in one request. A Flush that panics is reported to Config.OnFailure.
type Flusher interface {
	Flush()
}

// DefaultQueueSize is how many events wait for one queued sink before further events are
// dropped for it: a few seconds of a busy plane, about 200 KiB of small event values.
const DefaultQueueSize = 4096

// Config is what a fan-out needs besides its sinks.
type Config struct {
	// Clock stamps each event with the moment it was recorded.
	Clock ports.Clock
	// QueueSize bounds each queued sink's queue; zero or less means DefaultQueueSize.
	QueueSize int
	// Joined is true in a session joined with --trace-parent, where the primary writes no
	// session_start or session_end: the other sinks then get neither.
	Joined bool
	// OnDrop is called, on the recording goroutine, for each event dropped for a sink because
	// its queue was full. It must not block. nil ignores drops.
	OnDrop func(sink string)
	// OnFailure is called when a sink panicked on an event, on the goroutine that delivered it.
	// nil ignores failures.
	OnFailure func(sink string, err error)
}

// Sink is the fan-out. It is safe for concurrent use.
type Sink struct {
	primary Primary
	cfg     Config
	inline  []Extra
	queues  []*queue
}

var _ ports.TraceSink = (*Sink)(nil)

// New returns a fan-out over primary and extras, and starts one goroutine per extra that is
// not Inline.
func New(primary Primary, cfg Config, extras ...Extra) *Sink {
	size := cfg.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	s := &Sink{primary: primary, cfg: cfg}
	for _, extra := range extras {
		if extra.Inline {
			s.inline = append(s.inline, extra)
			continue
		}
		q := &queue{Extra: extra, limit: size, wake: make(chan struct{}, 1), done: make(chan struct{}), onFailure: cfg.OnFailure}
		if extra.QueueSize > 0 {
			q.limit = extra.QueueSize
		}
		q.Batch = min(q.Batch, q.limit) // a full queue is a full batch
		go q.run()
		s.queues = append(s.queues, q)
	}
	return s
}

// Record implements ports.TraceSink: the primary first, then every other sink. With other
// sinks, the event's fields are built once, for all of them, the primary included
// (trace.Stamp).
func (s *Sink) Record(e trace.Event) {
	if !s.handsOn() {
		s.primary.Record(e)
		return
	}
	stamped := trace.Stamp(e, s.cfg.Clock.Now())
	s.primary.Record(stamped)
	s.handOn(stamped)
}

// Start writes session_start to the primary and hands it on, unless the session is joined.
func (s *Sink) Start(e trace.SessionStart) {
	s.primary.Start(e)
	if !s.cfg.Joined && s.handsOn() {
		s.handOn(trace.Stamp(e, s.cfg.Clock.Now()))
	}
}

// End writes session_end to the primary and hands it on, unless the session is joined.
func (s *Sink) End(e trace.SessionEnd) {
	s.primary.End(e)
	if !s.cfg.Joined && s.handsOn() {
		s.handOn(trace.Stamp(e, s.cfg.Clock.Now()))
	}
}

// handsOn says whether there is any sink besides the primary.
func (s *Sink) handsOn() bool {
	return len(s.inline) > 0 || len(s.queues) > 0
}

func (s *Sink) handOn(stamped trace.Stamped) {
	for _, extra := range s.inline {
		deliver(extra, stamped, s.cfg.OnFailure)
	}
	for _, q := range s.queues {
		if q.put(stamped) && s.cfg.OnDrop != nil {
			s.cfg.OnDrop(q.Name)
		}
	}
}

// Close stops handing events to the queued sinks and waits until each has received what is
// queued for it, or until ctx is done. It returns the names of the sinks that had not caught
// up by then (their remaining events are lost), and is safe to call more than once. It does
// not close the sinks themselves; inline sinks go on receiving events.
func (s *Sink) Close(ctx context.Context) []string {
	for _, q := range s.queues {
		q.close()
	}
	var behind []string
	for _, q := range s.queues {
		select {
		case <-q.done:
		case <-ctx.Done():
			behind = append(behind, q.Name)
		}
	}
	return behind
}

// deliver hands e to extra's sink, turning a panic into a reported failure.
func deliver(extra Extra, e trace.Stamped, onFailure func(string, error)) {
	defer func() {
		if r := recover(); r != nil {
			report(onFailure, extra.Name, "on a "+e.Type()+" event", r)
		}
	}()
	extra.Sink.Record(e)
}

// flush ends a batch for a sink that is a Flusher, turning a panic into a reported failure.
func flush(extra Extra, onFailure func(string, error)) {
	f, ok := extra.Sink.(Flusher)
	if !ok {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			report(onFailure, extra.Name, "flushing a batch", r)
		}
	}()
	f.Flush()
}

// report tells onFailure that sink panicked with r while doing what.
func report(onFailure func(string, error), sink, doing string, r any) {
	if onFailure != nil {
		onFailure(sink, fmt.Errorf("the %s sink panicked %s: %v", sink, doing, r))
	}
}

// queue feeds one sink from its own goroutine. Events wait in pending, at most limit of them;
// the goroutine takes all that wait at once. Without a Batch it is woken for every event that
// finds it asleep; with one, only by the first event of a batch (to start the Delay), by the
// Batch-th, and by close.
type queue struct {
	Extra
	limit     int
	wake      chan struct{} // holds a token while pending may be non-empty
	done      chan struct{} // closed when run returns
	onFailure func(string, error)

	mu      sync.Mutex
	pending []trace.Stamped
	closed  bool
}

// put queues e and reports whether it was dropped because the queue was full. After close it
// queues nothing and reports no drop.
func (q *queue) put(e trace.Stamped) (dropped bool) {
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		return false
	case len(q.pending) >= q.limit:
		q.mu.Unlock()
		return true
	}
	q.pending = append(q.pending, e)
	n := len(q.pending)
	q.mu.Unlock()
	if q.Batch <= 0 || n == 1 || n == q.Batch {
		q.signal()
	}
	return false
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default: // a token is already there
	}
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// run delivers batches until the queue is closed and empty.
func (q *queue) run() {
	defer close(q.done)
	var timer *time.Timer
	if q.Batch > 0 {
		timer = time.NewTimer(q.Delay)
		timer.Stop()
	}
	var batch []trace.Stamped
	for {
		q.mu.Lock()
		for len(q.pending) == 0 && !q.closed {
			q.mu.Unlock()
			<-q.wake
			q.mu.Lock()
		}
		if len(q.pending) == 0 {
			q.mu.Unlock()
			return
		}
		if timer != nil && !q.full() {
			q.mu.Unlock()
			q.await(timer)
			q.mu.Lock()
		}
		batch, q.pending = q.pending, batch[:0]
		q.mu.Unlock()
		for _, e := range batch {
			deliver(q.Extra, e, q.onFailure)
		}
		flush(q.Extra, q.onFailure)
		clear(batch) // keep no event alive in the spare buffer
	}
}

// full reports whether the batch is ready to be taken before its Delay ends. q.mu is held.
func (q *queue) full() bool { return len(q.pending) >= q.Batch || q.closed }

// await sleeps until the Delay has passed or the batch is full.
func (q *queue) await(timer *time.Timer) {
	timer.Reset(q.Delay)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return
		case <-q.wake:
			q.mu.Lock()
			full := q.full()
			q.mu.Unlock()
			if full {
				return
			}
		}
	}
}
