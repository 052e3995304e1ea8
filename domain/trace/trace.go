// Package trace defines the events resplane appends to trace.jsonl (docs/trace.md) as ordered
// fields, so the schema — names, order and null rules — lives in one place and a sink only
// has to encode it.
package trace

import "github.com/resplane/resplane/domain/refusal"

// Field is one key of an event body. Value is one of: nil (JSON null), string, int64, uint64,
// bool or []string. Every string an event's Fields returns, alone or in a list, is field text
// (Text): tokens redacted and the length capped.
type Field struct {
	Key   string
	Value any
}

// Event is one trace line's body; the sink writes the envelope (event_type, event_id,
// parent_id, session_id, timestamp) before Fields.
type Event interface {
	// Type is the event_type, such as "resource_read".
	Type() string
	// Fields returns the body's fields in schema order.
	Fields() []Field
}

// OutcomeOK is the outcome of a request that succeeded.
const OutcomeOK = "ok"

// The planes a request event belongs to, by name: the plane label of the metrics and of the
// request timing (docs/operator-guide.md, "Metrics and tracing").
const (
	PlaneFiles = "files" // resource_list, resource_read
	PlanePeer  = "peer"  // peer_handle_redeem
)

// Outcome returns the outcome and reason fields for a result: "ok" and null on success,
// otherwise the refusal's code and message (refusal.From: an error that is not a refusal is
// io_error with its generic message), so no unvetted text — no cause — reaches the trace.
func Outcome(err error) (outcome string, reason any) {
	if err == nil {
		return OutcomeOK, nil
	}
	r := refusal.From(err)
	return string(r.Code), r.Message
}

// OptionalInt64 is a nullable integer field: nil when absent.
func OptionalInt64(v int64, present bool) any {
	if !present {
		return nil
	}
	return v
}

// OptionalString is a nullable string field: nil when absent.
func OptionalString(v string, present bool) any {
	if !present {
		return nil
	}
	return v
}

// SessionStart is the first line of a session resplane started itself.
type SessionStart struct {
	Capsule, Version, Containment, Workdir string
	Planes, Tools                          []string
}

// Type implements Event.
func (SessionStart) Type() string { return "session_start" }

// Fields implements Event.
func (e SessionStart) Fields() []Field {
	return fields([]Field{
		{"capsule", e.Capsule}, {"version", e.Version}, {"containment_achieved", e.Containment},
		{"planes", nonNil(e.Planes)}, {"tools", nonNil(e.Tools)}, {"workdir", e.Workdir},
	})
}

// SessionEnd is the last line of a session resplane started itself, written on a graceful
// shutdown only.
type SessionEnd struct {
	Generation uint64
	Reason     string
}

// Type implements Event.
func (SessionEnd) Type() string { return "session_end" }

// Fields implements Event.
func (e SessionEnd) Fields() []Field {
	return fields([]Field{{"generation", e.Generation}, {"reason", e.Reason}})
}

// ResourceList records one request on the listing route.
type ResourceList struct {
	Root        string // the declared root; "" on any refusal
	EntryCount  int64
	TotalBytes  int64
	Generation  uint64
	Containment string
	Err         error // nil on success
}

// Type implements Event.
func (ResourceList) Type() string { return "resource_list" }

// Fields implements Event.
func (e ResourceList) Fields() []Field {
	outcome, reason := Outcome(e.Err)
	root, count, total := e.Root, e.EntryCount, e.TotalBytes
	if e.Err != nil {
		root, count, total = "", 0, 0
	}
	return fields([]Field{
		{"root", root}, {"entry_count", count}, {"total_bytes", total}, {"generation", e.Generation},
		{"containment_achieved", e.Containment}, {"outcome", outcome}, {"reason", reason},
	})
}

// ResourceRead records one request on a read route of the operator plane.
type ResourceRead struct {
	Path        string // decoded once, before validation, invalid UTF-8 replaced
	Bytes       int64  // recorded only on success
	SHA256      string // recorded only on success
	Generation  uint64
	Containment string
	Err         error
}

// Type implements Event.
func (ResourceRead) Type() string { return "resource_read" }

// Fields implements Event.
func (e ResourceRead) Fields() []Field {
	outcome, reason := Outcome(e.Err)
	ok := e.Err == nil
	return fields([]Field{
		{"path", e.Path}, {"outcome", outcome}, {"bytes", OptionalInt64(e.Bytes, ok)},
		{"sha256", OptionalString(e.SHA256, ok)}, {"generation", e.Generation},
		{"containment_achieved", e.Containment}, {"reason", reason},
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
