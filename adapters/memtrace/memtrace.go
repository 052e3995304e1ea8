// Package memtrace is an in-memory ports.TraceSink for tests: Recorder keeps every event it is
// handed, in order, so a test can assert exactly what a use case traced.
package memtrace

import (
	"slices"
	"sync"

	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/ports"
)

var _ ports.TraceSink = (*Recorder)(nil)

// Recorder is an in-memory ports.TraceSink for tests: it keeps every recorded event, in order,
// without an envelope. It is safe for concurrent use; the zero value is ready.
type Recorder struct {
	mu     sync.Mutex
	events []trace.Event
}

// Record implements ports.TraceSink.
func (r *Recorder) Record(e trace.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns a copy of every event recorded so far, oldest first.
func (r *Recorder) Events() []trace.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// OfType returns the recorded events whose event_type is eventType, oldest first.
func (r *Recorder) OfType(eventType string) []trace.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []trace.Event
	for _, e := range r.events {
		if e.Type() == eventType {
			out = append(out, e)
		}
	}
	return out
}
