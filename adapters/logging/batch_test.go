package logging

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is stderr as a test reads it while the Batch's timer writes to it.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) read() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.writes
}

// messages returns the "message" of each line in out, in order.
func messages(out string) []string {
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if i := strings.Index(line, `"message":"`); i >= 0 {
			rest := line[i+len(`"message":"`):]
			got = append(got, rest[:strings.IndexByte(rest, '"')])
		}
	}
	return got
}

// TestTheServiceLogBatchesInfoLinesAndKeepsTheirOrder pins docs/operator-guide.md, "Logs": an
// info line (the access log's) may wait (up to BatchDelay; an hour here, so that only the rules
// below write it) to share one write with the lines
// logged meanwhile; a warning or an error goes out at once, after every line logged before it;
// Close writes what waits, and every line after it goes out at once.
func TestTheServiceLogBatchesInfoLinesAndKeepsTheirOrder(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			var out lockedBuffer
			log, batch, err := newService(&out, "info", format, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			log.Info().Msg("first")
			log.Info().Msg("second")
			if got, _ := out.read(); got != "" {
				t.Fatalf("info lines were written before their batch: %q", got)
			}
			log.Warn().Msg("third")
			got, writes := out.read()
			if !strings.Contains(got, "first") || !strings.Contains(got, "second") || !strings.Contains(got, "third") ||
				strings.Index(got, "first") > strings.Index(got, "second") || strings.Index(got, "second") > strings.Index(got, "third") {
				t.Fatalf("a warning must write the waiting lines, then itself, in order; got %q", got)
			}
			if writes != 2 {
				t.Errorf("%d writes for two waiting lines and a warning; want 2 (the batch, then the warning)", writes)
			}
			log.Info().Msg("fourth")
			if err := batch.Close(); err != nil {
				t.Fatal(err)
			}
			if got, _ := out.read(); !strings.Contains(got, "fourth") {
				t.Fatalf("Close must write the waiting line; got %q", got)
			}
			log.Info().Msg("fifth")
			if got, _ := out.read(); !strings.Contains(got, "fifth") {
				t.Fatalf("a line after Close must be written at once; got %q", got)
			}
		})
	}
}

// TestAWaitingLineIsWrittenWithoutAnotherLine: the batch's own timer writes it, with no later
// line or Close to push it out.
func TestAWaitingLineIsWrittenWithoutAnotherLine(t *testing.T) {
	var out lockedBuffer
	log, batch, err := NewService(&out, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Close()
	log.Info().Msg("alone")
	for deadline := time.Now().Add(5 * time.Second); ; {
		got, _ := out.read()
		if strings.Contains(got, "alone") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("an info line was still waiting 5 s after it was logged")
		}
		time.Sleep(BatchDelay)
	}
}

// TestAFullBatchIsWrittenByTheLineThatFillsIt: the lines waiting never pass batchMax bytes,
// so a stderr that takes lines slowly holds the loggers back instead of growing memory.
func TestAFullBatchIsWrittenByTheLineThatFillsIt(t *testing.T) {
	var out lockedBuffer
	log, batch, err := newService(&out, "info", "json", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Close()
	value := strings.Repeat("x", 200)
	var logged []string
	for i := 0; i < 2*batchMax/200; i++ {
		name := fmt.Sprintf("line%05d", i)
		log.Info().Str("v", value).Msg(name)
		logged = append(logged, name)
		if _, writes := out.read(); writes > 0 {
			break
		}
	}
	got, writes := out.read()
	if writes != 1 {
		t.Fatalf("%d writes after %d lines of about 300 bytes; want the one that the full batch made", writes, len(logged))
	}
	if len(got) < batchMax || len(got) > batchMax+400 {
		t.Errorf("the full batch wrote %d bytes; want from %d to one line more", len(got), batchMax)
	}
	if m := messages(got); len(m) != len(logged) || m[len(m)-1] != logged[len(logged)-1] {
		t.Errorf("the full batch holds %d lines ending %v; want all %d logged, in order", len(m), m[len(m)-1:], len(logged))
	}
}

// TestAClientLogWritesEveryLineAtOnce: New, the clients' logger, holds nothing back.
func TestAClientLogWritesEveryLineAtOnce(t *testing.T) {
	var out lockedBuffer
	log, err := New(&out, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("now")
	if got, writes := out.read(); writes != 1 || !strings.Contains(got, "now") {
		t.Fatalf("got %q in %d writes; want the line in one write at once", got, writes)
	}
}
