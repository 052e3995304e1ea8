package resplane

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane/domain/handle"
)

// NewLogger returns the service's logger writing to w (stderr) as JSON lines or, with format
// "console", human-readable lines. Every line passes through the handle redactor before it is
// written, so a token can never reach a log, whichever call site logged it — the access log
// records request targets, and a redeem's target is a token.
func NewLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || lvl == zerolog.NoLevel {
		return zerolog.Nop(), fmt.Errorf("log level %q is not one of trace, debug, info, warn, error, fatal, panic, disabled", level)
	}
	out := io.Writer(redactingWriter{w})
	switch format {
	case "json":
	case "console":
		out = zerolog.ConsoleWriter{Out: out, TimeFormat: time.RFC3339, NoColor: true}
	default:
		return zerolog.Nop(), fmt.Errorf("log format %q is not one of json, console", format)
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger(), nil
}

// redactingWriter replaces every mh1 token in a log line with <handle:id> before writing it.
// zerolog hands it one whole line per Write.
type redactingWriter struct{ w io.Writer }

func (r redactingWriter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("mh1.")) {
		return r.w.Write(p)
	}
	redacted := handle.Redact(string(p))
	if _, err := io.WriteString(r.w, redacted); err != nil {
		return 0, err
	}
	return len(p), nil
}
