package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
)

func TestReportLevelsAndCounts(t *testing.T) {
	for _, tc := range []struct {
		rule  string
		err   error
		level string
		lines int
	}{
		{"a line that could not be encoded is an error, counted once", errors.New("json: unsupported value"), "error", 1},
		{"lines dropped on a full disk are a warning", &DroppedLines{Count: 7, Err: fmt.Errorf("write: %w", syscall.ENOSPC)}, "warn", 7},
		{"lines dropped over quota are a warning", &DroppedLines{Count: 2, Err: syscall.EDQUOT}, "warn", 2},
		{"lines dropped for any other cause are an error", &DroppedLines{Count: 3, Err: syscall.EIO}, "error", 3},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var out bytes.Buffer
			counted := 0
			Report(zerolog.New(&out), func(n int) { counted += n })(tc.err)
			var line map[string]any
			if err := json.Unmarshal(out.Bytes(), &line); err != nil {
				t.Fatalf("log line %q: %v", out.String(), err)
			}
			if line["level"] != tc.level || counted != tc.lines {
				t.Errorf("level %v, counted %d; want %s, %d", line["level"], counted, tc.level, tc.lines)
			}
		})
	}
}
