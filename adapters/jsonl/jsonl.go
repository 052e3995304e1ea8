// Package jsonl implements ports.TraceSink on a JSON Lines file: File appends events to
// trace.jsonl (docs/trace.md).
package jsonl

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/ports"
)

// Config is what a File needs.
type Config struct {
	// File is the trace file, opened for appending (O_APPEND) by the caller, who decides how
	// it is reached (adapters/osfs, SessionDir.OpenTrace). The File takes it over and closes
	// it on Close.
	File *os.File
	// SessionID is written on every line.
	SessionID string
	// Parent, when not empty, joins a session the runtime already started (--trace-parent):
	// it is the parent_id of every line, and Start and End write nothing.
	Parent string
	// Clock supplies each line's timestamp.
	Clock ports.Clock
	// Redact is applied to every encoded line before it is written (the handle redactor). It
	// must keep the line valid JSON; nil writes lines as encoded.
	Redact func(string) string
	// OnError receives every failure to encode a line, and the lines write failures dropped
	// as a *DroppedLines, at most once per WriteFailureInterval. nil discards them.
	OnError func(error)
}

// WriteFailureInterval is the least time between two reports of lines that could not be
// written. A full disk fails every line, and a report per line would fill the log the way the
// trace filled the disk.
const WriteFailureInterval = time.Minute

// DroppedLines reports lines that write failures dropped: the first failure at once, and then
// the lines dropped since the previous report, at most once per WriteFailureInterval, when a
// later write fails or succeeds, and at Close.
type DroppedLines struct {
	// Count is the number of lines dropped since the previous report.
	Count int
	// Err is the last write failure.
	Err error
}

func (d *DroppedLines) Error() string {
	return fmt.Sprintf("trace: %d line(s) could not be written: %v", d.Count, d.Err)
}

// Unwrap returns the last write failure, so errors.Is(err, syscall.ENOSPC) tells a full disk.
func (d *DroppedLines) Unwrap() error { return d.Err }

// File appends trace events to a JSONL file. Each event becomes one line — the envelope
// (event_type, event_id, parent_id, session_id, timestamp) and then the event's fields in
// schema order — written with a single write(2) on a descriptor opened with O_APPEND, under a
// mutex, so lines are never interleaved and appear in timestamp order. Nothing is buffered in
// the process; lines are not fsynced.
//
// Strings are raw UTF-8 (no HTML escaping), with invalid bytes replaced by U+FFFD. A line that
// cannot be encoded or written is dropped and reported to Config.OnError (write failures at a
// bounded rate, DroppedLines): recording never fails or panics the caller. A File is safe for
// concurrent use.
type File struct {
	cfg Config
	mu  sync.Mutex
	f   *os.File
	// root is the parent_id of every line: the joined parent, else nil until Start has
	// written session_start, then that line's event_id.
	root any
	// dropped counts the lines write failures dropped since the last report, dropErr is the
	// last such failure, and reportedAt is when the last report was made (zero: never).
	dropped    int
	dropErr    error
	reportedAt time.Time
}

var _ ports.TraceSink = (*File)(nil)

// Open returns the trace that appends to cfg.File. It fails without a file or a clock, and
// then does not close the file.
func Open(cfg Config) (*File, error) {
	if cfg.File == nil {
		return nil, errors.New("trace: no file given")
	}
	if cfg.Clock == nil {
		return nil, errors.New("trace: no clock configured")
	}
	t := &File{cfg: cfg, f: cfg.File}
	if cfg.Parent != "" {
		t.root = cfg.Parent
	}
	return t, nil
}

// Start writes session_start, whose event_id becomes the parent_id of every later line. Call
// it once, before the first Record; lines recorded earlier have a null parent_id. It writes
// nothing in a joined session.
func (t *File) Start(e trace.SessionStart) {
	if t.cfg.Parent != "" {
		return
	}
	body, ok := t.encodeBody(e)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.writeLocked(e.Type(), body); ok {
		t.root = id
	}
}

// Record implements ports.TraceSink.
func (t *File) Record(e trace.Event) {
	body, ok := t.encodeBody(e)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writeLocked(e.Type(), body)
}

// End writes session_end, on a graceful shutdown only. It writes nothing in a joined session.
func (t *File) End(e trace.SessionEnd) {
	if t.cfg.Parent != "" {
		return
	}
	t.Record(e)
}

// Close reports the lines dropped since the last report, if any, and closes the file. Lines
// recorded afterwards are dropped and reported to OnError.
func (t *File) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped > 0 {
		t.reportDroppedLocked()
	}
	return t.f.Close()
}

// encodeBody encodes and redacts the event's own fields outside the lock that serialises
// writes; only the small envelope is built and redacted under it.
func (t *File) encodeBody(e trace.Event) (string, bool) {
	body, err := encodeFields(e.Fields())
	if err != nil {
		t.report(fmt.Errorf("trace: encode %s: %w", e.Type(), err))
		return "", false
	}
	if t.cfg.Redact != nil {
		body = t.cfg.Redact(body)
	}
	return body, true
}

// writeLocked prefixes body with the envelope and writes the line, returning its event_id.
// Holding the lock while the id and timestamp are taken keeps lines in timestamp order.
func (t *File) writeLocked(eventType, body string) (string, bool) {
	id, err := uuid.NewV7()
	if err != nil {
		t.report(fmt.Errorf("trace: new event id for %s: %w", eventType, err))
		return "", false
	}
	eventID := "evt_" + hex.EncodeToString(id[:])
	envelope, err := encodeFields([]trace.Field{
		{Key: "event_type", Value: eventType},
		{Key: "event_id", Value: eventID},
		{Key: "parent_id", Value: t.root},
		{Key: "session_id", Value: t.cfg.SessionID},
		{Key: "timestamp", Value: t.cfg.Clock.Now().UnixMilli()},
	})
	if err != nil {
		t.report(fmt.Errorf("trace: encode %s: %w", eventType, err))
		return "", false
	}
	if t.cfg.Redact != nil {
		envelope = t.cfg.Redact(envelope) // a session id may look like a token too
	}
	line := "{" + envelope
	if body != "" {
		line += "," + body
	}
	if _, err := t.f.WriteString(line + "}\n"); err != nil {
		t.dropped++
		t.dropErr = fmt.Errorf("write %s: %w", eventType, err)
		t.reportDroppedDueLocked()
		return "", false
	}
	t.reportDroppedDueLocked()
	return eventID, true
}

// reportDroppedDueLocked reports the lines dropped since the last report when there are any
// and no report was made within WriteFailureInterval.
func (t *File) reportDroppedDueLocked() {
	if t.dropped == 0 {
		return
	}
	if !t.reportedAt.IsZero() && t.cfg.Clock.Now().Sub(t.reportedAt) < WriteFailureInterval {
		return
	}
	t.reportDroppedLocked()
}

// reportDroppedLocked reports the lines dropped since the last report and starts a new count.
func (t *File) reportDroppedLocked() {
	t.report(&DroppedLines{Count: t.dropped, Err: t.dropErr})
	t.dropped, t.dropErr, t.reportedAt = 0, nil, t.cfg.Clock.Now()
}

func (t *File) report(err error) {
	if t.cfg.OnError != nil {
		t.cfg.OnError(err)
	}
}

// encodeFields renders the fields as the members of a JSON object, in the given order and
// without the braces: "key":value pairs joined by commas.
func encodeFields(fields []trace.Field) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		// Encode appends a newline after each value; drop it.
		if err := enc.Encode(f.Key); err != nil {
			return "", err
		}
		b.Truncate(b.Len() - 1)
		b.WriteByte(':')
		if err := enc.Encode(validUTF8(f.Value)); err != nil {
			return "", fmt.Errorf("field %s: %w", f.Key, err)
		}
		b.Truncate(b.Len() - 1)
	}
	return b.String(), nil
}

// validUTF8 replaces each byte of a string (or of a []string's elements) that is not part of
// valid UTF-8 with U+FFFD, as encoding/json would, so that the encoder writes the replacement
// raw rather than as the escape \ufffd. Other values are returned unchanged.
func validUTF8(v any) any {
	switch v := v.(type) {
	case string:
		return validString(v)
	case []string:
		if slices.ContainsFunc(v, func(s string) bool { return !utf8.ValidString(s) }) {
			out := make([]string, len(v))
			for i, s := range v {
				out[i] = validString(s)
			}
			return out
		}
	}
	return v
}

func validString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	// Converting to runes turns every invalid byte into utf8.RuneError (U+FFFD).
	return string([]rune(s))
}
