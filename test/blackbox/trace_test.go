package blackbox_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbSessionIDRe is what a session id of our own looks like: ses_ and the 32 hex digits of a
// UUIDv7.
var bbSessionIDRe = regexp.MustCompile(`^ses_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$`)

// TestTraceSessionStartFirstAndSessionEndLast pins docs/trace.md ("The envelope",
// "session_start", "session_end"): session_start is the first line (envelope event_type, event_id, parent_id null,
// session_id, timestamp; then capsule, version, containment_achieved, planes, tools, workdir);
// every other event is parented on it and shares its session id; event ids are unique
// evt_<uuidv7>; session_end (generation, reason "signal") is the last line after SIGTERM; no
// file content reaches the trace.
func TestTraceSessionStartFirstAndSessionEndLast(t *testing.T) {
	const secret = "file-content-must-not-be-traced"
	p := harness.Start(t, harness.Capsule{
		Manifest: "name: reporter\nversion: 1.0\nexports:\n  files:\n    root: out/\n    mode: read-only\n",
		Files:    fixture.Layout{"out/a.txt": secret},
		Args:     []string{"--containment", "sealed"},
	})
	s := bbSessionOf(t, p.Ready)
	if !bbSessionIDRe.MatchString(p.Ready.SessionID) {
		t.Errorf("session id %q is not ses_<uuidv7 hex>", p.Ready.SessionID)
	}
	harness.Get(t, s.addr, "/resources/files/a.txt")
	harness.Get(t, s.addr, "/resources/files")
	harness.Get(t, s.addr, "/resources/files/%2e%2e/x")
	harness.RequestWithin(t, s.addr, "POST", "/resources/files/a.txt", bbFifoDeadline)
	if a := harness.Control(t, p.Ready.Control, "POST", "/v1/tasks/terminal", `{"state":"completed"}`); a.Status != 200 {
		t.Fatalf("terminal: %d %s", a.Status, a.Raw)
	}
	harness.Get(t, s.addr, "/resources/files/a.txt")
	if code := p.Stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	lines := harness.TraceLines(t, p.Ready.Trace)
	if len(lines) != 7 {
		t.Fatalf("want session_start, 5 resource events and session_end, got %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}

	t.Run("session_start first", func(t *testing.T) {
		harness.RequireKeys(t, "session_start", []byte(lines[0]), "event_type", "event_id", "parent_id", "session_id", "timestamp",
			"capsule", "version", "containment_achieved", "planes", "tools", "workdir")
		start := harness.Object(t, []byte(lines[0]))
		want := `{"event_type":"session_start","event_id":"` + s.Parent + `","parent_id":null,"session_id":"` + p.Ready.SessionID +
			`","timestamp":` + start["timestamp"].(json.Number).String() +
			`,"capsule":"reporter","version":"1.0","containment_achieved":"sealed","planes":["files"],"tools":[],"workdir":"` + p.Workdir + `"}`
		if lines[0] != want {
			t.Errorf("session_start\n got %s\nwant %s", lines[0], want)
		}
		if !harness.EventIDPattern.MatchString(s.Parent) {
			t.Errorf("session_start event_id %q is not evt_<uuidv7 hex>", s.Parent)
		}
	})
	t.Run("resource events in order, parented on session_start", func(t *testing.T) {
		bbCheckRead(t, s, lines[1], bbReadEvent{path: "a.txt", bbOutcome: "ok", body: []byte(secret)})
		bbCheckList(t, s, lines[2], bbListEvent{root: "out/", entries: 1, totalBytes: len(secret), bbOutcome: "ok"})
		for i, want := range []struct {
			path, bbOutcome string
			gen             int
		}{{"../x", "outside_root", 0}, {"a.txt", "method_not_allowed", 0}, {"a.txt", "ok", 1}} {
			ev := harness.ParseEvent(t, lines[3+i])
			if ev.M["path"] != want.path || ev.M["outcome"] != want.bbOutcome || ev.M["generation"] != bbInt(want.gen) {
				t.Errorf("line %d: %s, want path %s outcome %s generation %d", 3+i, lines[3+i], want.path, want.bbOutcome, want.gen)
			}
			harness.RequireEnvelope(t, s.Session, ev, "resource_read", "path", "outcome", "bytes", "sha256", "generation", "containment_achieved", "reason")
		}
	})
	t.Run("session_end last", func(t *testing.T) {
		end := harness.ParseEvent(t, lines[6])
		harness.RequireEnvelope(t, s.Session, end, "session_end", "generation", "reason")
		if end.M["generation"] != bbInt(1) || end.M["reason"] != "signal" {
			t.Errorf("session_end %s, want generation 1 reason signal", lines[6])
		}
	})
	t.Run("ids unique, timestamps ordered, no content", func(t *testing.T) {
		seen := map[string]bool{}
		var last int64
		for _, line := range lines {
			ev := harness.Object(t, []byte(line))
			id := ev["event_id"].(string)
			if seen[id] {
				t.Errorf("event_id %s repeated", id)
			}
			seen[id] = true
			ts, _ := ev["timestamp"].(json.Number).Int64()
			if ts < last {
				t.Errorf("timestamp went backwards: %s", line)
			}
			last = ts
			if strings.Contains(line, secret) {
				t.Errorf("file content in the trace: %s", line)
			}
		}
	})
}

// TestTraceJoinsARuntimeSession pins --session-id/--trace-parent (docs/trace.md,
// "Joining a runtime's session"): with both, no
// session_start or session_end of our own is written and every event carries the given
// session id and parent; with --session-id alone we start (and end) the session under that id.
func TestTraceJoinsARuntimeSession(t *testing.T) {
	tests := []struct {
		name, sessionID, parent string
		ownLines                bool
	}{
		{"session id and trace parent", "ses_runtime-1.a", "evt_01a0000000007000800000000000abcd", false},
		{"session id alone", "joined_session", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--session-id", tc.sessionID}
			if tc.parent != "" {
				args = append(args, "--trace-parent", tc.parent)
			}
			p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: fixture.Layout{"out/a.txt": "A"}, Args: args})
			if p.Ready.SessionID != tc.sessionID {
				t.Errorf("ready session_id %q, want %q", p.Ready.SessionID, tc.sessionID)
			}
			if want := filepath.Join(p.Workdir, ".murmur", tc.sessionID, "trace.jsonl"); p.Ready.Trace != want {
				t.Errorf("trace %q, want %q", p.Ready.Trace, want)
			}
			harness.Get(t, p.Ready.Listen, "/resources/files/a.txt")
			harness.Get(t, p.Ready.Listen, "/resources/files")
			if code := p.Stop(t); code != 0 {
				t.Fatalf("exit %d", code)
			}
			lines := harness.TraceLines(t, p.Ready.Trace)
			s := bbSession{Session: harness.Session{ID: tc.sessionID, Parent: tc.parent}, class: "advisory"}
			if tc.ownLines {
				if len(lines) != 4 {
					t.Fatalf("want 4 lines, got:\n%s", strings.Join(lines, "\n"))
				}
				start := harness.Object(t, []byte(lines[0]))
				if start["event_type"] != "session_start" || start["parent_id"] != nil || start["session_id"] != tc.sessionID {
					t.Errorf("first line %s", lines[0])
				}
				s.Parent = start["event_id"].(string)
				harness.RequireEnvelope(t, s.Session, harness.ParseEvent(t, lines[3]), "session_end", "generation", "reason")
				lines = lines[1:3]
			}
			if len(lines) != 2 {
				t.Fatalf("want exactly the two resource events, got:\n%s", strings.Join(lines, "\n"))
			}
			bbCheckRead(t, s, lines[0], bbReadEvent{path: "a.txt", bbOutcome: "ok", body: []byte("A")})
			bbCheckList(t, s, lines[1], bbListEvent{root: "out/", entries: 1, totalBytes: 1, bbOutcome: "ok"})
		})
	}
}

// TestTraceLinesStayWholeUnderConcurrency pins docs/trace.md, "Write guarantees": each line is
// written whole with a
// single append, so 200 concurrent requests of every kind leave exactly 200 parseable lines,
// one per request, with the right outcome counts.
func TestTraceLinesStayWholeUnderConcurrency(t *testing.T) {
	big := strings.Repeat("0123456789", 5000)
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""),
		Files: fixture.Layout{"out/a.txt": "A", "out/big.bin": big, "out/dir/b.txt": "B"}})
	s := bbSessionOf(t, p.Ready)
	mark := len(harness.TraceLines(t, s.trace))
	targets := []struct {
		target, bbOutcome, eventType string
	}{
		{"/resources/files/a.txt", "ok", "resource_read"},
		{"/resources/files/big.bin", "ok", "resource_read"},
		{"/resources/files", "ok", "resource_list"},
		{"/resources/files/%2e%2e/" + strings.Repeat("long-name-", 40), "outside_root", "resource_read"},
		{"/resources/files/missing", "not_found", "resource_read"},
	}
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tc := targets[i%len(targets)]
			r, err := harness.Fetch(s.addr, tc.target, 20*time.Second)
			if err != nil || r.Status == 0 {
				errs <- fmt.Errorf("%s: %d %v", tc.target, r.Status, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	lines := harness.TraceFrom(t, s.trace, mark, n)
	if len(lines) != n {
		t.Fatalf("%d concurrent requests wrote %d lines", n, len(lines))
	}
	counts := map[string]int{}
	for _, line := range lines {
		ev := harness.Object(t, []byte(line))
		if ev["parent_id"] != s.Parent || ev["session_id"] != s.ID {
			t.Errorf("line not of this session: %s", line)
		}
		counts[ev["event_type"].(string)+" "+ev["outcome"].(string)]++
	}
	want := map[string]int{}
	for i := range n {
		tc := targets[i%len(targets)]
		want[tc.eventType+" "+tc.bbOutcome]++
	}
	keys := func(m map[string]int) []string {
		var k []string
		for key, v := range m {
			k = append(k, fmt.Sprintf("%s=%d", key, v))
		}
		slices.Sort(k)
		return k
	}
	if got, w := keys(counts), keys(want); !slices.Equal(got, w) {
		t.Errorf("trace outcomes %v, want %v", got, w)
	}
}

// TestUnwritableTraceNeverStopsARequest pins docs/trace.md, "Write guarantees": a trace that
// cannot be written
// (here /dev/full, every write ENOSPC) never stops a request from being answered; the failure
// is logged on stderr.
func TestUnwritableTraceNeverStopsARequest(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: fixture.Layout{"out/a.txt": "A"},
		Args: []string{"--trace", "/dev/full"}})
	bbServed(t, harness.Get(t, p.Ready.Listen, "/resources/files/a.txt"), []byte("A"), 0, "advisory", "out/")
	bbDecodeListing(t, harness.Get(t, p.Ready.Listen, "/resources/files"), 0, "advisory", "out/")
	bbFilesRefusal(t, harness.Get(t, p.Ready.Listen, "/resources/files/nope"), 404, "not_found", 0)
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	if !strings.Contains(p.Stderr(), "no space left on device") {
		t.Errorf("the trace failure was not logged:\n%s", p.Stderr())
	}
}
