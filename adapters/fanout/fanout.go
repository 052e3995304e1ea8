// Package fanout implements ports.TraceSink over several sinks: trace.jsonl, the record of
// truth, first and synchronously, then every other sink (metrics, spans) through a bounded
// queue of its own (docs/trace.md, "Other sinks").
//
// Guarantees:
//
//   - The primary sink is written first, on the recording goroutine, exactly as if it were the
//     only sink: whatever the other sinks do, the record is never delayed beyond its own write,
//     never reordered and never lost because of them.
//   - Handing an event to another sink never blocks: it is put on that sink's queue, or, when the
//     queue is full, dropped for that sink alone and reported to Config.OnDrop. A sink that
//     blocks fills its own queue and loses its own events; the request, the primary write and
//     every other sink go on.
//   - Each other sink receives its events in the order they were recorded, on one goroutine of
//     its own, each as a trace.Stamped carrying the moment it was recorded.
//   - A sink that panics loses that one event (reported to Config.OnFailure) and keeps receiving
//     the next ones; the process goes on.
//   - With no other sink there is no queue and no goroutine: Record is the primary's Record.
//
// Non-guarantees:
//
//   - Another sink may lag behind the primary, and loses whatever is still queued when Close
//     gives up waiting. Only the primary is the record.
//   - Events recorded after Close reach the primary only.
package fanout

import (
	"context"
	"fmt"
	"sync"

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
}

// DefaultQueueSize is how many events wait for one other sink before further events are
// dropped for it: a few seconds of a busy plane, about 200 KiB of small event values.
const DefaultQueueSize = 4096

// Config is what a fan-out needs besides its sinks.
type Config struct {
	// Clock stamps each event with the moment it was recorded.
	Clock ports.Clock
	// QueueSize bounds each other sink's queue; zero or less means DefaultQueueSize.
	QueueSize int
	// Joined is true in a session joined with --trace-parent, where the primary writes no
	// session_start or session_end: the other sinks then get neither.
	Joined bool
	// OnDrop is called, on the recording goroutine, for each event dropped for a sink because
	// its queue was full. It must not block. nil ignores drops.
	OnDrop func(sink string)
	// OnFailure is called, on the sink's goroutine, when a sink panicked on an event. nil
	// ignores failures.
	OnFailure func(sink string, err error)
}

// Sink is the fan-out. It is safe for concurrent use.
type Sink struct {
	primary Primary
	cfg     Config

	mu     sync.RWMutex // held for reading while events are queued, for writing by Close
	closed bool
	queues []*queue
}

var _ ports.TraceSink = (*Sink)(nil)

// New returns a fan-out over primary and extras, and starts one goroutine per extra.
func New(primary Primary, cfg Config, extras ...Extra) *Sink {
	size := cfg.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	s := &Sink{primary: primary, cfg: cfg}
	for _, extra := range extras {
		q := &queue{Extra: extra, events: make(chan trace.Stamped, size), done: make(chan struct{}), onFailure: cfg.OnFailure}
		go q.run()
		s.queues = append(s.queues, q)
	}
	return s
}

// Record implements ports.TraceSink: the primary first, then every other sink's queue.
func (s *Sink) Record(e trace.Event) {
	s.primary.Record(e)
	s.handOn(e)
}

// Start writes session_start to the primary and hands it on, unless the session is joined.
func (s *Sink) Start(e trace.SessionStart) {
	s.primary.Start(e)
	if !s.cfg.Joined {
		s.handOn(e)
	}
}

// End writes session_end to the primary and hands it on, unless the session is joined.
func (s *Sink) End(e trace.SessionEnd) {
	s.primary.End(e)
	if !s.cfg.Joined {
		s.handOn(e)
	}
}

func (s *Sink) handOn(e trace.Event) {
	if len(s.queues) == 0 {
		return
	}
	stamped := trace.Stamped{Event: e, At: s.cfg.Clock.Now()}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return
	}
	for _, q := range s.queues {
		select {
		case q.events <- stamped:
		default:
			if s.cfg.OnDrop != nil {
				s.cfg.OnDrop(q.Name)
			}
		}
	}
}

// Close stops handing events on and waits until every other sink has received what is queued
// for it, or until ctx is done. It returns the names of the sinks that had not caught up by
// then (their remaining events are lost), and is safe to call more than once. It does not close
// the sinks themselves.
func (s *Sink) Close(ctx context.Context) []string {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for _, q := range s.queues {
			close(q.events)
		}
	}
	s.mu.Unlock()
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

// queue feeds one other sink from its own goroutine.
type queue struct {
	Extra
	events    chan trace.Stamped
	done      chan struct{}
	onFailure func(string, error)
}

func (q *queue) run() {
	defer close(q.done)
	for e := range q.events {
		q.deliver(e)
	}
}

func (q *queue) deliver(e trace.Stamped) {
	defer func() {
		if r := recover(); r != nil && q.onFailure != nil {
			q.onFailure(q.Name, fmt.Errorf("the %s sink panicked on a %s event: %v", q.Name, e.Type(), r))
		}
	}()
	q.Sink.Record(e)
}
