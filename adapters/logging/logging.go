// Package logging is the service's and the clients' logger (zerolog) on stderr: JSON lines or,
// for a person, console lines. It guarantees that no line holds an mh1 token (every token
// becomes <handle:id>, whichever call site logged it: the access log records request targets,
// and a redeem's target is a token) and that no string a request controls makes a line longer
// than about 1 KB (docs/operator-guide.md, "Logs"), and that the lines reach stderr in the
// order they were logged. It does not guarantee that a line is written: a failing stderr
// loses it, and so does a process killed while the line waits in a Batch (at most
// BatchDelay).
package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/trace"
)

// New returns a logger writing to w (stderr) as JSON lines or, with format "console",
// human-readable lines, each line written as it is logged. Every line passes through
// lineWriter before it is written, so whichever call site logged it, a token never reaches
// the log — the access log records request targets, and a redeem's target is a token — and
// no string a request controls makes a line longer than about 1 KB (docs/operator-guide.md,
// "Logs").
func New(w io.Writer, level, format string) (zerolog.Logger, error) {
	return newLogger(w, w, level, format)
}

// NewService returns the service's logger: New's, except that lines at info level and below
// (the access log's) wait in a Batch to be written together (docs/operator-guide.md, "Logs").
// Close the Batch when the service stops, so that its last lines are written.
func NewService(w io.Writer, level, format string) (zerolog.Logger, *Batch, error) {
	return newService(w, level, format, BatchDelay)
}

// newService is NewService with lines waiting up to delay.
func newService(w io.Writer, level, format string, delay time.Duration) (zerolog.Logger, *Batch, error) {
	b := newBatch(w, delay)
	log, err := newLogger(nowWriter{b}, laterWriter{b}, level, format)
	return log, b, err
}

// newLogger is a logger writing lines at warn level and above (and those logged without a
// level) to now, the others to later.
func newLogger(now, later io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || lvl == zerolog.NoLevel {
		return zerolog.Nop(), fmt.Errorf("log level %q is not one of trace, debug, info, warn, error, fatal, panic, disabled", level)
	}
	switch format {
	case "json":
	case "console":
		now = zerolog.ConsoleWriter{Out: now, TimeFormat: time.RFC3339, NoColor: true}
		later = zerolog.ConsoleWriter{Out: later, TimeFormat: time.RFC3339, NoColor: true}
	default:
		return zerolog.Nop(), fmt.Errorf("log format %q is not one of json, console", format)
	}
	return zerolog.New(lineWriter{now: now, later: later}).Level(lvl).With().Timestamp().Logger(), nil
}

// lineWriter receives each log line as zerolog's JSON (one whole line per Write), replaces
// every mh1 token in it with <handle:id>, caps every string value with trace.Cap, the rule the
// trace's fields follow, and hands the line on to the JSON or console output: later for a
// line at info level or below, now for any other. The one value left whole is "stack", a
// recovered panic's stack trace: the runtime writes it, not a request.
type lineWriter struct{ now, later io.Writer }

func (l lineWriter) Write(p []byte) (int, error) { return l.WriteLevel(zerolog.NoLevel, p) }

// WriteLevel implements zerolog.LevelWriter.
func (l lineWriter) WriteLevel(level zerolog.Level, p []byte) (int, error) {
	line := p
	if bytes.Contains(line, []byte("mh1.")) {
		line = []byte(handle.Redact(string(line)))
	}
	out := l.now
	if level >= zerolog.TraceLevel && level <= zerolog.InfoLevel {
		out = l.later
	}
	if _, err := out.Write(capStrings(line)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// uncappedKey is the one key whose string value lineWriter leaves whole.
const uncappedKey = "stack"

// uncappedKeyLiteral is uncappedKey as a JSON string literal, as a key is written.
var uncappedKeyLiteral = []byte(`"` + uncappedKey + `"`)

// capStrings returns the JSON line with every string value that trace.Cap would change
// replaced by its capped form. A value that fits and does not end in "]" — the marker's last
// byte — cannot change, so a short line is returned as it is.
func capStrings(line []byte) []byte {
	if len(line) <= trace.MaxFieldBytes && !bytes.Contains(line, []byte(`]"`)) {
		return line
	}
	var out []byte // nil until a value changes
	copied, uncapped := 0, false
	for start := bytes.IndexByte(line, '"'); start >= 0; {
		end := stringEnd(line, start)
		if end < 0 {
			break
		}
		literal := line[start:end]
		if isKey(line, end) {
			// Keys are the service's own names, which zerolog writes without escapes.
			uncapped = bytes.Equal(literal, uncappedKeyLiteral)
		} else if capped, changed := capLiteral(uncapped, literal); changed {
			out = append(append(out, line[copied:start]...), capped...)
			copied = end
		}
		next := bytes.IndexByte(line[end:], '"')
		if next < 0 {
			break
		}
		start = end + next
	}
	if out == nil {
		return line
	}
	return append(out, line[copied:]...)
}

// capLiteral returns the JSON string literal that replaces literal, a value whose key is
// uncapped or not, and whether it differs.
func capLiteral(uncapped bool, literal []byte) ([]byte, bool) {
	inner := literal[1 : len(literal)-1]
	if uncapped || (len(inner) <= trace.MaxFieldBytes && !bytes.HasSuffix(inner, []byte("]"))) {
		return nil, false
	}
	// Without an escape the literal's inner bytes are the value (zerolog escapes every
	// control byte and invalid UTF-8), which saves decoding a long target.
	s := string(inner)
	if bytes.IndexByte(inner, '\\') >= 0 && json.Unmarshal(literal, &s) != nil {
		return nil, false
	}
	capped := trace.Cap(s)
	if capped == s {
		return nil, false
	}
	return encodeString(capped), true
}

// stringEnd returns the offset just past the JSON string literal that starts at line[start],
// or -1 if it does not end.
func stringEnd(line []byte, start int) int {
	for j := start + 1; j < len(line); j++ {
		switch line[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// isKey reports whether the literal ending at end is an object key: a ":" follows it.
func isKey(line []byte, end int) bool {
	rest := bytes.TrimLeft(line[end:], " \t")
	return len(rest) > 0 && rest[0] == ':'
}

// encodeString renders s as a JSON string literal without HTML escaping, like zerolog.
func encodeString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
