package trace

import "time"

// Stamped is an event together with the moment it was recorded. A sink that receives events
// after the fact — from a queue, such as the fan-out's (docs/trace.md, "Other sinks") — takes
// the event's time from At rather than from its own clock, which would read the moment the
// queue was drained. Type is the event's own; so are Fields, built once by Stamp for every
// sink the stamped event is handed to.
type Stamped struct {
	Event
	At time.Time
	// fields is what the event's Fields returned when Stamp was called; nil for a Stamped
	// made without Stamp, whose Fields asks the event.
	fields []Field
}

// Stamp returns e stamped with the moment at, its fields built now, once. The slice Fields
// then returns is shared by every reader of the stamped event, across goroutines: a sink
// reads it and never modifies it.
func Stamp(e Event, at time.Time) Stamped {
	return Stamped{Event: e, At: at, fields: e.Fields()}
}

// Fields implements Event: the fields built by Stamp, or the event's own.
func (s Stamped) Fields() []Field {
	if s.fields != nil {
		return s.fields
	}
	return s.Event.Fields()
}

// RecordedAt returns the moment e was recorded: At when e is Stamped, otherwise now().
func RecordedAt(e Event, now func() time.Time) time.Time {
	if s, ok := e.(Stamped); ok {
		return s.At
	}
	return now()
}
