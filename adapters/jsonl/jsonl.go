// Package jsonl implements ports.TraceSink on a JSON Lines file: File appends events to
// trace.jsonl (docs/trace.md).
package jsonl

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

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
	// Redact is applied to every line before it is written (the handle redactor): to each
	// event's encoded fields, and once to the envelope's session and parent ids (the rest of
	// the envelope is the event type, a generated id and a number). It must keep the text
	// valid JSON; nil writes lines as encoded.
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
	// ids is the envelope's parent_id and session_id members, encoded and redacted once: the
	// parent is the joined parent, else null until Start has written session_start, then
	// that line's event_id.
	ids []byte
	// dropped counts the lines write failures dropped since the last report, dropErr is the
	// last such failure, and reportedAt is when the last report was made (zero: never).
	dropped    int
	dropErr    error
	reportedAt time.Time
	// random is where event ids take their random bits, guarded by mu: crypto/rand read
	// randomBatch bytes at a time, so that a line costs no getrandom call of its own.
	random *bufio.Reader
}

// randomBatch is how many random bytes the trace reads from crypto/rand at once: the random
// bits of 64 event ids. An event id is unique, not secret, so the bytes may wait in memory.
const randomBatch = 64 * 16

var _ ports.TraceSink = (*File)(nil)

// lineBuffers holds the buffers a line is encoded in, reused from one line to the next.
var lineBuffers = sync.Pool{New: func() any { return new(lineBuffer) }}

type lineBuffer struct{ body, line []byte }

// Open returns the trace that appends to cfg.File. It fails without a file or a clock, and
// then does not close the file.
func Open(cfg Config) (*File, error) {
	if cfg.File == nil {
		return nil, errors.New("trace: no file given")
	}
	if cfg.Clock == nil {
		return nil, errors.New("trace: no clock configured")
	}
	t := &File{cfg: cfg, f: cfg.File, random: bufio.NewReaderSize(rand.Reader, randomBatch)}
	var parent any
	if cfg.Parent != "" {
		parent = cfg.Parent
	}
	t.ids = t.encodeIDs(parent)
	return t, nil
}

// encodeIDs encodes and redacts the envelope's parent_id and session_id members.
func (t *File) encodeIDs(parent any) []byte {
	ids, _ := appendFields(nil, []trace.Field{{Key: "parent_id", Value: parent}, {Key: "session_id", Value: t.cfg.SessionID}})
	return t.redact(ids) // a session id may look like a token too
}

// Start writes session_start, whose event_id becomes the parent_id of every later line. Call
// it once, before the first Record; lines recorded earlier have a null parent_id. It writes
// nothing in a joined session.
func (t *File) Start(e trace.SessionStart) {
	if t.cfg.Parent != "" {
		return
	}
	t.record(e, func(id uuid.UUID) { t.ids = t.encodeIDs(eventID(id)) })
}

// Record implements ports.TraceSink.
func (t *File) Record(e trace.Event) {
	t.record(e, nil)
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

// record encodes and redacts the event's own fields outside the lock that serialises writes;
// only the envelope is built under it. Holding the lock while the id and timestamp are taken
// keeps lines in timestamp order. written, when not nil, is called under the lock with the
// event id of the line once it is written.
func (t *File) record(e trace.Event, written func(uuid.UUID)) {
	buf := lineBuffers.Get().(*lineBuffer)
	defer lineBuffers.Put(buf)
	var err error
	if buf.body, err = appendFields(buf.body[:0], e.Fields()); err != nil {
		t.report(fmt.Errorf("trace: encode %s: %w", e.Type(), err))
		return
	}
	body := t.redact(buf.body)
	t.mu.Lock()
	defer t.mu.Unlock()
	id, err := uuid.NewV7FromReader(t.random)
	if err != nil {
		t.report(fmt.Errorf("trace: new event id for %s: %w", e.Type(), err))
		return
	}
	line := append(buf.line[:0], `{"event_type":`...)
	line = appendString(line, e.Type())
	line = append(line, `,"event_id":"evt_`...)
	line = hex.AppendEncode(line, id[:])
	line = append(append(line, `",`...), t.ids...)
	line = append(line, `,"timestamp":`...)
	line = strconv.AppendInt(line, t.cfg.Clock.Now().UnixMilli(), 10)
	if len(body) > 0 {
		line = append(append(line, ','), body...)
	}
	buf.line = append(line, '}', '\n')
	if _, err := t.f.Write(buf.line); err != nil {
		t.dropped++
		t.dropErr = fmt.Errorf("write %s: %w", e.Type(), err)
		t.reportDroppedDueLocked()
		return
	}
	t.reportDroppedDueLocked()
	if written != nil {
		written(id)
	}
}

// redact applies the configured redactor to encoded text, returning the text itself when
// there is no redactor or nothing to redact.
func (t *File) redact(encoded []byte) []byte {
	if t.cfg.Redact == nil {
		return encoded
	}
	text := string(encoded)
	if redacted := t.cfg.Redact(text); redacted != text {
		return []byte(redacted)
	}
	return encoded
}

// eventID is the event_id of the line written with id.
func eventID(id uuid.UUID) string {
	return "evt_" + hex.EncodeToString(id[:])
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
