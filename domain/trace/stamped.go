package trace

import "time"

// Stamped is an event together with the moment it was recorded. A sink that receives events
// after the fact — from a queue, such as the fan-out's (docs/trace.md, "Other sinks") — takes
// the event's time from At rather than from its own clock, which would read the moment the
// queue was drained. Type and Fields are the event's own.
type Stamped struct {
	Event
	At time.Time
}

// Unstamp returns the event inside e and the moment it was recorded: At when e is Stamped,
// otherwise now().
func Unstamp(e Event, now func() time.Time) (Event, time.Time) {
	if s, ok := e.(Stamped); ok {
		return s.Event, s.At
	}
	return e, now()
}
