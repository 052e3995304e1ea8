package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/trace"
)

// logLine logs one line through a JSON logger built like serve's and returns it decoded, with
// its length.
func logLine(t *testing.T, format string, log func(l *bytes.Buffer) error) (string, map[string]any) {
	t.Helper()
	var out bytes.Buffer
	if err := log(&out); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSuffix(out.String(), "\n")
	if strings.Contains(line, "\n") {
		t.Fatalf("one log call wrote several lines: %q", line)
	}
	if format == "console" {
		return line, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("the log line is not JSON: %v: %s", err, line)
	}
	return line, m
}

// TestEveryLoggedStringIsCappedAndRedacted pins docs/operator-guide.md, "Logs": whatever a
// request sends, each string in a log line is within the trace's field cap, marked with its
// length when cut, with no token — so the line stays about 1 KB.
func TestEveryLoggedStringIsCappedAndRedacted(t *testing.T) {
	token := "mh1.eyJ2IjoxfQ.c2lnbmF0dXJl"
	target := "/resources/files/" + token + strings.Repeat("%01", 4000)
	method := strings.Repeat("M", 3000)
	line, m := logLine(t, "json", func(b *bytes.Buffer) error {
		log, err := New(b, "info", "json")
		log.Info().Str("method", method).Str("target", target).Str("remote", "127.0.0.1:1").
			AnErr("cause", errors.New(strings.Repeat("\x01", 5000))).Int("status", 414).Msg("request")
		return err
	})
	if len(line) > 1200 {
		t.Errorf("the line is %d bytes; want about 1 KB at most: %s", len(line), line)
	}
	if strings.Contains(line, "mh1.") {
		t.Errorf("the line holds a token: %s", line)
	}
	wantTarget := trace.Cap("/resources/files/" + handle.Placeholder(token) + strings.Repeat("%01", 4000))
	if m["target"] != wantTarget || m["method"] != trace.Cap(method) || m["remote"] != "127.0.0.1:1" {
		t.Errorf("target %q method %q remote %q; want them capped (%q) and short values kept", m["target"], m["method"], m["remote"], wantTarget)
	}
	if cause, _ := m["cause"].(string); !strings.HasSuffix(cause, "…[truncated from 5000 bytes]") {
		t.Errorf("cause %q does not end with the marker stating its length", cause)
	}
}

func TestLogCapRules(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		rule  string
		key   string
		value string
		want  string
	}{
		{"a short value is kept", "target", "/resources/files/report.md", "/resources/files/report.md"},
		{"a long value is capped", "target", long, trace.Cap(long)},
		{"a value ending like a marker gets a marker of its own", "target", "a…[truncated from 9 bytes]", trace.Cap("a…[truncated from 9 bytes]")},
		{"a value ending in a bracket is kept", "target", "a[1]", "a[1]"},
		{"a panic's stack trace is kept whole", "stack", long, long},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, m := logLine(t, "json", func(b *bytes.Buffer) error {
				log, err := New(b, "info", "json")
				log.Info().Str(tc.key, tc.value).Msg("m")
				return err
			})
			if m[tc.key] != tc.want {
				t.Fatalf("%s logged as %q; want %q", tc.key, m[tc.key], tc.want)
			}
		})
	}
}

func TestTheConsoleFormatIsCappedAndRedactedToo(t *testing.T) {
	token := "mh1.eyJ2IjoxfQ.c2lnbmF0dXJl"
	line, _ := logLine(t, "console", func(b *bytes.Buffer) error {
		log, err := New(b, "info", "console")
		log.Info().Str("target", token+"/"+strings.Repeat("y", 5000)).Msg("request")
		return err
	})
	if strings.Contains(line, "mh1.") || len(line) > 600 || !strings.Contains(line, "…[truncated from") {
		t.Errorf("console line %d bytes, want it redacted and capped: %s", len(line), line)
	}
}

// BenchmarkLogLine is what the logger's writer (redaction and cap) costs for one access-log
// line: an ordinary request's, and one whose target is 12 KB.
func BenchmarkLogLine(b *testing.B) {
	for _, bc := range []struct{ name, target string }{
		{"ordinary target", "/resources/files/reports/2026/summary.md"},
		{"12 KB target", "/resources/files/" + strings.Repeat("%01", 4000)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			log, err := New(io.Discard, "info", "json")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				log.Info().Str("method", "GET").Str("target", bc.target).Int("status", 200).
					Int64("bytes_out", 38).Str("remote", "127.0.0.1:40000").Msg("request")
			}
		})
	}
}
