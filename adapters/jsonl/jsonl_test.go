package jsonl

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/trace"
)

// fixedClock is always at the same instant.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

var testNow = time.UnixMilli(1_700_000_000_123)

// errorLog collects what a File reports.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *errorLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// open returns a File at a fresh path with the fixed clock, and the log of its failures.
func open(t *testing.T, mutate func(*Config)) (*File, *errorLog) {
	t.Helper()
	log := &errorLog{}
	cfg := Config{
		File:      appendTo(t, filepath.Join(t.TempDir(), "trace.jsonl")),
		SessionID: "ses_test",
		Clock:     fixedClock(testNow),
		OnError:   log.add,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	f, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, log
}

// lines returns the file's lines without their newlines, failing if the file does not end in
// one.
func lines(t *testing.T, f *File) []string {
	t.Helper()
	data, err := os.ReadFile(f.cfg.File.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		return nil
	}
	if data[len(data)-1] != '\n' {
		t.Fatalf("file does not end in a newline: %q", data)
	}
	return strings.Split(string(data[:len(data)-1]), "\n")
}

// keys returns the keys of the JSON object line in the order they appear.
func keys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %q", line)
	}
	var out []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("key in %q: %v", line, err)
		}
		out = append(out, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("value in %q: %v", line, err)
		}
	}
	return out
}

func decode(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return m
}

var envelope = []string{"event_type", "event_id", "parent_id", "session_id", "timestamp"}

var eventIDPattern = regexp.MustCompile(`^evt_[0-9a-f]{32}$`)

// checkEventID asserts that id is "evt_" and a UUIDv7 in lowercase hex without dashes.
func checkEventID(t *testing.T, id any) string {
	t.Helper()
	s, _ := id.(string)
	if !eventIDPattern.MatchString(s) {
		t.Fatalf("event_id %q is not evt_ + 32 lowercase hex digits", id)
	}
	u, err := uuid.Parse(strings.TrimPrefix(s, "evt_"))
	if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		t.Fatalf("event_id %q is not a UUIDv7 (%v)", s, err)
	}
	return s
}

func TestSessionLinesAndFieldOrder(t *testing.T) {
	f, log := open(t, nil)
	f.Start(trace.SessionStart{
		Capsule: "reporter", Version: "1.0", Containment: "advisory", Workdir: "/w",
		Planes: []string{"files"},
	})
	f.Record(trace.ResourceRead{Path: "a.txt", Bytes: 5, SHA256: "ab12", Generation: 2, Containment: "advisory"})
	f.Record(trace.ResourceList{Root: "out/", EntryCount: 3, Generation: 2, Containment: "scoped", Err: refusal.New(refusal.SymlinkRefused)})
	f.End(trace.SessionEnd{Generation: 2, Reason: "signal"})

	got := lines(t, f)
	want := []struct {
		eventType string
		fields    []string
	}{
		{"session_start", []string{"capsule", "version", "containment_achieved", "planes", "tools", "workdir"}},
		{"resource_read", []string{"path", "outcome", "bytes", "sha256", "generation", "containment_achieved", "reason"}},
		{"resource_list", []string{"root", "entry_count", "total_bytes", "generation", "containment_achieved", "outcome", "reason"}},
		{"session_end", []string{"generation", "reason"}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	var start string
	seen := map[string]bool{}
	for i, line := range got {
		if k, w := keys(t, line), append(append([]string(nil), envelope...), want[i].fields...); strings.Join(k, ",") != strings.Join(w, ",") {
			t.Errorf("line %d keys\n got %v\nwant %v", i, k, w)
		}
		m := decode(t, line)
		id := checkEventID(t, m["event_id"])
		if seen[id] {
			t.Errorf("event_id %s repeated", id)
		}
		seen[id] = true
		if m["event_type"] != want[i].eventType || m["session_id"] != "ses_test" || m["timestamp"] != float64(testNow.UnixMilli()) {
			t.Errorf("line %d envelope: %s", i, line)
		}
		if i == 0 {
			start = id
			if m["parent_id"] != nil {
				t.Errorf("session_start parent_id = %v, want null", m["parent_id"])
			}
		} else if m["parent_id"] != start {
			t.Errorf("line %d parent_id = %v, want session_start's %s", i, m["parent_id"], start)
		}
	}
	if !strings.Contains(got[0], `"planes":["files"],"tools":[],`) {
		t.Errorf("session_start lists: %s", got[0])
	}
	if errs := log.all(); len(errs) != 0 {
		t.Errorf("errors reported: %v", errs)
	}
}

func TestLineIsExactlyEncoded(t *testing.T) {
	f, _ := open(t, func(c *Config) { c.Parent = "evt_runtime" })
	f.Record(trace.ResourceRead{Path: "dir/", Generation: 1, Containment: "sealed", Err: refusal.New(refusal.NotFound)})
	got := lines(t, f)
	if len(got) != 1 {
		t.Fatalf("got %d lines, want 1", len(got))
	}
	id := checkEventID(t, decode(t, got[0])["event_id"])
	want := `{"event_type":"resource_read","event_id":"` + id + `","parent_id":"evt_runtime","session_id":"ses_test",` +
		`"timestamp":1700000000123,"path":"dir/","outcome":"not_found","bytes":null,"sha256":null,"generation":1,` +
		`"containment_achieved":"sealed","reason":"The path names nothing under the export root."}`
	if got[0] != want {
		t.Errorf("line\n got %s\nwant %s", got[0], want)
	}
}

func TestJoinedSessionWritesNoSessionLines(t *testing.T) {
	f, _ := open(t, func(c *Config) { c.Parent = "evt_runtime" })
	f.Start(trace.SessionStart{Capsule: "reporter"})
	f.Record(trace.ResourceList{Root: "out/", Containment: "advisory"})
	f.End(trace.SessionEnd{Reason: "signal"})
	got := lines(t, f)
	if len(got) != 1 {
		t.Fatalf("got %d lines, want only the resource_list:\n%s", len(got), strings.Join(got, "\n"))
	}
	if m := decode(t, got[0]); m["event_type"] != "resource_list" || m["parent_id"] != "evt_runtime" {
		t.Errorf("line: %s", got[0])
	}
}

func TestRawUTF8(t *testing.T) {
	f, _ := open(t, nil)
	f.Record(trace.ResourceRead{Path: "a<b>&c\xff\xfe.txt", Err: refusal.New(refusal.OutsideRoot)})
	f.Record(trace.SessionStart{Planes: []string{"ok", "bad\xc3"}, Tools: []string{"é"}})
	got := lines(t, f)
	line := got[0]
	if !strings.Contains(line, `"path":"a<b>&c`+"\uFFFD\uFFFD"+`.txt"`) {
		t.Errorf("path not written as raw UTF-8 with U+FFFD replacements: %s", line)
	}
	if !strings.Contains(got[1], `"planes":["ok","bad`+"\uFFFD"+`"],"tools":["é"]`) {
		t.Errorf("lists not written as raw UTF-8 with U+FFFD replacements: %s", got[1])
	}
	if strings.Contains(line, `\u003c`) || strings.Contains(line, `\u0026`) {
		t.Errorf("HTML characters escaped: %s", line)
	}
}

func TestRedactorSeesTheWholeLine(t *testing.T) {
	// The events' own fields arrive redacted already (trace.Text); the sink's redactor is
	// applied to the whole line on top, envelope included. A pattern only it knows shows that.
	f, _ := open(t, func(c *Config) {
		c.SessionID = "ses_SECRET"
		c.Redact = func(s string) string { return strings.ReplaceAll(s, "SECRET", "<x>") }
	})
	f.Record(trace.ResourceRead{Path: "out/SECRET", Err: refusal.New(refusal.NotFound)})
	line := lines(t, f)[0]
	if strings.Contains(line, "SECRET") || strings.Count(line, "<x>") != 2 {
		t.Errorf("not redacted everywhere: %s", line)
	}
	decode(t, line)
}

// appendTo opens path for appending, creating it, as the trace's opener does; the test closes
// it if no File took it over.
func appendTo(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func TestReopeningAppendsAndCloseClosesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	file := appendTo(t, path)
	f, err := Open(Config{File: file, SessionID: "ses_x", Clock: fixedClock(testNow)})
	if err != nil {
		t.Fatal(err)
	}
	f.Record(trace.SessionEnd{Reason: "first"})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the file is still open after Close: write = %v", err)
	}

	f, err = Open(Config{File: appendTo(t, path), SessionID: "ses_x", Clock: fixedClock(testNow)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Record(trace.SessionEnd{Reason: "second"})
	got := lines(t, f)
	if len(got) != 2 || decode(t, got[0])["reason"] != "first" || decode(t, got[1])["reason"] != "second" {
		t.Errorf("reopening did not append:\n%s", strings.Join(got, "\n"))
	}
}

func TestConcurrentRecordsAreNeverInterleaved(t *testing.T) {
	const goroutines, perGoroutine = 50, 200
	f, log := open(t, nil)
	f.Start(trace.SessionStart{Capsule: "reporter"})
	// Padding makes each line long, so that two writes mixing would break a line's JSON or
	// its path; it stays within the field cap, so that the path is written whole.
	pad := strings.Repeat("x", 200)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				f.Record(trace.ResourceRead{Path: fmt.Sprintf("%d/%d/%s", g, i, pad), Err: refusal.New(refusal.NotFound)})
			}
		})
	}
	wg.Wait()

	got := lines(t, f)
	if len(got) != 1+goroutines*perGoroutine {
		t.Fatalf("got %d lines, want %d", len(got), 1+goroutines*perGoroutine)
	}
	root := decode(t, got[0])["event_id"]
	paths, ids := map[string]bool{}, map[string]bool{}
	for _, line := range got[1:] {
		m := decode(t, line)
		path, _ := m["path"].(string)
		if !strings.HasSuffix(path, "/"+pad) || m["parent_id"] != root {
			t.Fatalf("damaged line: %.200s", line)
		}
		paths[path] = true
		ids[checkEventID(t, m["event_id"])] = true
	}
	if len(paths) != goroutines*perGoroutine {
		t.Errorf("%d distinct events, want %d", len(paths), goroutines*perGoroutine)
	}
	// The ids' random bits are read from crypto/rand many lines at a time: no two lines
	// share an id however the batches fall.
	if len(ids) != goroutines*perGoroutine {
		t.Errorf("%d distinct event ids among %d lines; want one each", len(ids), goroutines*perGoroutine)
	}
	if errs := log.all(); len(errs) != 0 {
		t.Errorf("errors reported: %v", errs[:1])
	}
}

func TestOpenRefusesAMissingFileOrClock(t *testing.T) {
	if _, err := Open(Config{Clock: fixedClock(testNow)}); err == nil {
		t.Error("Open succeeded without a file")
	}
	if _, err := Open(Config{File: appendTo(t, filepath.Join(t.TempDir(), "trace.jsonl"))}); err == nil {
		t.Error("Open succeeded without a clock")
	}
}

// unencodable is an event whose field JSON cannot represent.
type unencodable struct{}

func (unencodable) Type() string { return "broken" }
func (unencodable) Fields() []trace.Field {
	return []trace.Field{{Key: "value", Value: func() {}}}
}

func TestFailuresAreReportedNotRaised(t *testing.T) {
	t.Run("closed file", func(t *testing.T) {
		f, log := open(t, nil)
		_ = f.Close()
		f.Start(trace.SessionStart{})
		f.Record(trace.ResourceList{})
		f.End(trace.SessionEnd{})
		errs := log.all()
		if len(errs) != 1 || !errors.Is(errs[0], os.ErrClosed) {
			t.Errorf("reported %v, want one report of the write errors on a closed file", errs)
		}
	})
	t.Run("device full", func(t *testing.T) {
		if _, err := os.Stat("/dev/full"); err != nil {
			t.Skip("no /dev/full")
		}
		log := &errorLog{}
		full, err := os.OpenFile("/dev/full", os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Skipf("cannot open /dev/full: %v", err)
		}
		f, err := Open(Config{File: full, Clock: fixedClock(testNow), OnError: log.add})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.Start(trace.SessionStart{})
		f.Record(trace.ResourceList{})
		// session_start failed, so later lines keep a null parent rather than a dangling one.
		if want := `"parent_id":null,`; !strings.HasPrefix(string(f.ids), want) {
			t.Errorf("envelope ids %s after a session_start that was not written, want %s…", f.ids, want)
		}
		if errs := log.all(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "no space") {
			t.Errorf("reported %v, want one report of the write errors", errs)
		}
	})
	t.Run("unencodable field", func(t *testing.T) {
		f, log := open(t, nil)
		f.Record(unencodable{})
		f.Record(trace.ResourceList{})
		if errs := log.all(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "field value") {
			t.Errorf("reported %v, want one encoding error naming the field", errs)
		}
		if got := lines(t, f); len(got) != 1 || decode(t, got[0])["event_type"] != "resource_list" {
			t.Errorf("file holds %q, want only the good line", got)
		}
	})
	t.Run("no error callback", func(t *testing.T) {
		f, _ := open(t, func(c *Config) { c.OnError = nil })
		_ = f.Close()
		f.Record(trace.ResourceList{})
	})
}

// steppingClock is a clock a test moves by hand.
type steppingClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *steppingClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *steppingClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// droppedReports returns the DroppedLines reported so far, and fails on any other report.
func droppedReports(t *testing.T, log *errorLog) []*DroppedLines {
	t.Helper()
	var out []*DroppedLines
	for _, err := range log.all() {
		var d *DroppedLines
		if !errors.As(err, &d) {
			t.Fatalf("unexpected report: %v", err)
		}
		out = append(out, d)
	}
	return out
}

func counts(reports []*DroppedLines) []int {
	var n []int
	for _, r := range reports {
		n = append(n, r.Count)
	}
	return n
}

// TestAFullDiskCostsOneReportAMinute pins docs/trace.md, "Write guarantees": on a full disk
// (/dev/full fails every write with ENOSPC) every line is dropped without failing the caller,
// and the drops are reported at once, then at most once per WriteFailureInterval with the
// count since the previous report, and the rest at Close.
func TestAFullDiskCostsOneReportAMinute(t *testing.T) {
	clk := &steppingClock{now: testNow}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("this test needs /dev/full: %v", err)
	}
	f, log := open(t, func(c *Config) { c.File = full; c.Clock = clk })
	record := func(n int) {
		for range n {
			f.Record(trace.ResourceRead{Path: "report.md"})
		}
	}
	record(100)
	reports := droppedReports(t, log)
	if len(reports) != 1 || reports[0].Count != 1 || !errors.Is(reports[0], syscall.ENOSPC) {
		t.Fatalf("100 dropped lines reported %v; want one report of the first, naming ENOSPC", counts(reports))
	}
	clk.advance(WriteFailureInterval - time.Millisecond)
	record(1)
	if got := counts(droppedReports(t, log)); len(got) != 1 {
		t.Fatalf("a drop within the interval was reported: %v", got)
	}
	clk.advance(time.Millisecond)
	record(1)
	if got := counts(droppedReports(t, log)); len(got) != 2 || got[1] != 101 {
		t.Fatalf("reports %v; want the 101 lines dropped since the first report, once the interval passed", got)
	}
	record(5)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := counts(droppedReports(t, log)); len(got) != 3 || got[2] != 5 {
		t.Fatalf("reports %v; want Close to report the last 5 dropped lines", got)
	}
}

// TestDropsAreReportedWhenWritingRecovers: lines dropped within the interval are reported by
// the first successful write after it, so a disk that was full for a while is not silent.
func TestDropsAreReportedWhenWritingRecovers(t *testing.T) {
	clk := &steppingClock{now: testNow}
	f, log := open(t, func(c *Config) { c.Clock = clk })
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	working := f.f
	f.f = full
	f.Record(trace.ResourceRead{Path: "a"})
	f.Record(trace.ResourceRead{Path: "b"})
	f.Record(trace.ResourceRead{Path: "c"})
	f.f = working
	_ = full.Close()
	f.Record(trace.ResourceRead{Path: "d"})
	if got := counts(droppedReports(t, log)); len(got) != 1 {
		t.Fatalf("reports %v; want only the first drop, within the interval", got)
	}
	clk.advance(WriteFailureInterval)
	f.Record(trace.ResourceRead{Path: "e"})
	if got := counts(droppedReports(t, log)); len(got) != 2 || got[1] != 2 {
		t.Fatalf("reports %v; want the 2 later drops reported by the first write after the interval", got)
	}
	if n := len(lines(t, f)); n != 2 {
		t.Errorf("%d lines written; want the 2 that found room", n)
	}
}
