package harness

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// EventIDPattern is what every event_id looks like: evt_ and the 32 hex digits of a UUIDv7.
var EventIDPattern = regexp.MustCompile(`^evt_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$`)

// Event is one trace line: its keys in document order, its values (numbers as json.Number)
// and its text.
type Event struct {
	Keys []string
	M    map[string]any
	Raw  string
}

// Str returns the string field key, failing the test when it is not a string.
func (e Event) Str(t testing.TB, key string) string {
	t.Helper()
	s, ok := e.M[key].(string)
	if !ok {
		t.Fatalf("trace field %s = %#v, want a string: %s", key, e.M[key], e.Raw)
	}
	return s
}

// ParseEvent parses one trace line, which must be one JSON object.
func ParseEvent(t testing.TB, line string) Event {
	t.Helper()
	keys, err := objectKeys([]byte(line))
	if err != nil {
		t.Fatalf("trace line %q: %v", line, err)
	}
	return Event{Keys: keys, M: Object(t, []byte(line)), Raw: line}
}

// TraceLines returns the lines of the trace file at path; a file not written yet has none. A
// trace that does not end with a newline fails the test: a line was written in pieces.
func TraceLines(t testing.TB, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		t.Fatalf("trace does not end with a newline: a line was written in pieces:\n%s", raw)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// TraceFrom waits (up to 5 s) until the trace at path has at least from+n lines and returns
// the lines from index from on.
func TraceFrom(t testing.TB, path string, from, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines := TraceLines(t, path)
		if len(lines) >= from+n {
			return lines[from:]
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace has %d lines, want at least %d; tail:\n%s", len(lines), from+n, strings.Join(lines[max(0, len(lines)-5):], "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Events parses every line of the trace at path.
func Events(t testing.TB, path string) []Event {
	t.Helper()
	var events []Event
	for _, line := range TraceLines(t, path) {
		events = append(events, ParseEvent(t, line))
	}
	return events
}

// Session is what the envelope of every event of one session carries: the session id, and
// the event every other event is parented on.
type Session struct {
	ID     string
	Parent string
}

// SessionOf returns the session of a process started without --trace-parent: the ready line's
// session id, and the event_id of its session_start, which must be the first line of its trace
// and the only session_start there.
func SessionOf(t testing.TB, ready Ready) Session {
	t.Helper()
	lines := TraceFrom(t, ready.Trace, 0, 1)
	start := ParseEvent(t, lines[0])
	if start.M["event_type"] != "session_start" {
		t.Fatalf("first trace line is not session_start: %s", lines[0])
	}
	for _, line := range lines[1:] {
		if ParseEvent(t, line).M["event_type"] == "session_start" {
			t.Fatalf("a second session_start in the trace: %s", line)
		}
	}
	return Session{ID: ready.SessionID, Parent: start.Str(t, "event_id")}
}

// RequireEnvelope fails the test unless e is an event of type eventType in session s: exactly
// the envelope's keys (event_type, event_id, parent_id, session_id, timestamp) and then
// fields, in that order; an evt_<UUIDv7> event_id; s's parent and session id; and a current
// Unix-millisecond timestamp.
func RequireEnvelope(t testing.TB, s Session, e Event, eventType string, fields ...string) {
	t.Helper()
	RequireKeys(t, eventType+" event", []byte(e.Raw), append([]string{"event_type", "event_id", "parent_id", "session_id", "timestamp"}, fields...)...)
	if e.M["event_type"] != eventType {
		t.Fatalf("event_type %v, want %s: %s", e.M["event_type"], eventType, e.Raw)
	}
	if id, _ := e.M["event_id"].(string); !EventIDPattern.MatchString(id) {
		t.Errorf("event_id %q is not evt_<uuidv7 hex>: %s", e.M["event_id"], e.Raw)
	}
	if e.M["parent_id"] != s.Parent {
		t.Errorf("parent_id %v, want %s: %s", e.M["parent_id"], s.Parent, e.Raw)
	}
	if e.M["session_id"] != s.ID {
		t.Errorf("session_id %v, want %s: %s", e.M["session_id"], s.ID, e.Raw)
	}
	n, _ := e.M["timestamp"].(json.Number)
	ts, err := n.Int64()
	if err != nil || ts < time.Now().Add(-time.Hour).UnixMilli() || ts > time.Now().Add(time.Minute).UnixMilli() {
		t.Errorf("timestamp %v is not a current Unix millisecond integer: %s", e.M["timestamp"], e.Raw)
	}
}
