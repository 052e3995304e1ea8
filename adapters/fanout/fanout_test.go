package fanout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/jsonl"
	"github.com/resplane/resplane/adapters/memtrace"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/trace"
)

// recordedAt is the manual clock's reading: the moment every event of these tests is recorded.
var recordedAt = time.UnixMilli(1_800_000_000_000)

// primary is a Primary in memory: session_start and session_end are recorded like any event.
type primary struct{ memtrace.Recorder }

func (p *primary) Start(e trace.SessionStart) { p.Record(e) }
func (p *primary) End(e trace.SessionEnd)     { p.Record(e) }

// blocking is a sink that holds every Record until released, and says when it holds one.
type blocking struct {
	entered chan struct{}
	release chan struct{}
	memtrace.Recorder
}

func newBlocking() *blocking {
	return &blocking{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (b *blocking) Record(e trace.Event) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	b.Recorder.Record(e)
}

// panicking panics on every event whose outcome is not ok, and records the others.
type panicking struct{ memtrace.Recorder }

func (p *panicking) Record(e trace.Event) {
	if r, ok := e.(trace.Stamped); ok && r.Event.(trace.ResourceRead).Err != nil {
		panic("a sink bug")
	}
	p.Recorder.Record(e)
}

// drops counts OnDrop calls per sink.
type drops struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *drops) add(sink string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[sink]++
}

func (d *drops) of(sink string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[sink]
}

// failures returns an OnFailure that queues each error it is told, and the queue.
func failures() (func(string, error), chan error) {
	reported := make(chan error, 100)
	return func(_ string, err error) { reported <- err }, reported
}

func read(path string) trace.ResourceRead { return trace.ResourceRead{Path: path} }

func config() Config { return Config{Clock: clock.NewManual(recordedAt)} }

// closeAll closes s, failing the test if a sink has not caught up within a generous bound.
func closeAll(t *testing.T, s *Sink) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if behind := s.Close(ctx); len(behind) > 0 {
		t.Fatalf("sinks %q did not catch up", behind)
	}
}

func paths(events []trace.Event) []string {
	var out []string
	for _, e := range events {
		for _, f := range e.Fields() {
			if f.Key == "path" {
				out = append(out, f.Value.(string))
			}
		}
	}
	return out
}

func TestEverySinkGetsEveryEventInOrderAndTheOthersGetTheRecordedMoment(t *testing.T) {
	p, metrics, spans := &primary{}, &memtrace.Recorder{}, &memtrace.Recorder{}
	s := New(p, config(), Extra{Name: "metrics", Sink: metrics}, Extra{Name: "spans", Sink: spans})
	want := []string{"a.txt", "b.txt", "c.txt"}
	for _, path := range want {
		s.Record(read(path))
	}
	closeAll(t, s)
	for name, got := range map[string][]trace.Event{"primary": p.Events(), "metrics": metrics.Events(), "spans": spans.Events()} {
		if strings.Join(paths(got), ",") != strings.Join(want, ",") {
			t.Errorf("%s got %q, want %q", name, paths(got), want)
		}
	}
	for _, e := range metrics.Events() {
		stamped, ok := e.(trace.Stamped)
		if !ok || !stamped.At.Equal(recordedAt) {
			t.Fatalf("another sink got %#v, want a trace.Stamped at %v", e, recordedAt)
		}
	}
}

func TestAnEventsFieldsAreBuiltOnceForEverySink(t *testing.T) {
	p, metrics, spans := &primary{}, &memtrace.Recorder{}, &memtrace.Recorder{}
	s := New(p, config(), Extra{Name: "metrics", Sink: metrics, Inline: true}, Extra{Name: "spans", Sink: spans})
	event := &countingEvent{}
	s.Record(event)
	closeAll(t, s)
	for name, got := range map[string][]trace.Event{"primary": p.Events(), "metrics": metrics.Events(), "spans": spans.Events()} {
		if len(got) != 1 || len(got[0].Fields()) != 1 {
			t.Fatalf("%s got %v, want the one event", name, got)
		}
	}
	if event.calls.Load() != 1 {
		t.Errorf("the event's Fields was called %d times for three sinks, want once", event.calls.Load())
	}
}

// countingEvent counts the calls of its Fields.
type countingEvent struct{ calls atomic.Int64 }

func (*countingEvent) Type() string { return "counting" }

func (e *countingEvent) Fields() []trace.Field {
	return []trace.Field{{Key: "calls", Value: e.calls.Add(1)}}
}

func TestTraceJSONLKeepsBeingWrittenWhileAnotherSinkBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	file, err := jsonl.Open(jsonl.Config{File: out, SessionID: "ses_test", Clock: clock.NewManual(recordedAt)})
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	stuck, dropped := newBlocking(), &drops{}
	cfg := config()
	cfg.QueueSize, cfg.OnDrop = 2, dropped.add
	s := New(file, cfg, Extra{Name: "stuck", Sink: stuck})

	s.Record(read("first.txt"))
	<-stuck.entered // the sink now holds the first event and never returns
	done := make(chan struct{})
	go func() {
		for range 9 {
			s.Record(read("later.txt"))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Record waited for a blocked sink")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(raw), "\n"); lines != 10 {
		t.Fatalf("trace.jsonl has %d lines, want all 10 events:\n%s", lines, raw)
	}
	// One event is held by the sink, two wait in its queue, the other seven were dropped.
	if got := dropped.of("stuck"); got != 7 {
		t.Errorf("%d drops counted for the blocked sink, want 7", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if behind := s.Close(ctx); len(behind) != 1 || behind[0] != "stuck" {
		t.Errorf("Close reported %q behind, want [stuck]", behind)
	}
	close(stuck.release)
}

func TestASinkThatPanicsLosesThatEventOnly(t *testing.T) {
	p, broken, healthy := &primary{}, &panicking{}, &memtrace.Recorder{}
	cfg := config()
	onFailure, reported := failures()
	cfg.OnFailure = onFailure
	s := New(p, cfg, Extra{Name: "broken", Sink: broken}, Extra{Name: "healthy", Sink: healthy})
	s.Record(read("ok.txt"))
	s.Record(trace.ResourceRead{Path: "refused.txt", Err: refusal.New(refusal.NotFound)})
	s.Record(read("after.txt"))
	closeAll(t, s)

	if got := paths(p.Events()); len(got) != 3 {
		t.Errorf("the primary got %q, want all three", got)
	}
	if got := paths(healthy.Events()); len(got) != 3 {
		t.Errorf("the healthy sink got %q, want all three", got)
	}
	if got := strings.Join(paths(broken.Events()), ","); got != "ok.txt,after.txt" {
		t.Errorf("the broken sink got %q, want the events around the one it panicked on", got)
	}
	if n := len(reported); n != 1 {
		t.Fatalf("%d failures reported, want 1", n)
	}
	if err := <-reported; !strings.Contains(err.Error(), "broken") || !strings.Contains(err.Error(), "resource_read") {
		t.Errorf("failure %v, want one naming the sink and the event type", err)
	}
}

func TestSessionLinesAreHandedOnOnlyWhenThePrimaryWritesThem(t *testing.T) {
	for _, tc := range []struct {
		name   string
		joined bool
		want   []string
	}{
		{"a session of our own hands session_start and session_end on", false, []string{"session_start", "resource_read", "session_end"}},
		{"a joined session writes neither, so hands neither on", true, []string{"resource_read"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := &memtrace.Recorder{}
			cfg := config()
			cfg.Joined = tc.joined
			s := New(&primary{}, cfg, Extra{Name: "other", Sink: other})
			s.Start(trace.SessionStart{Capsule: "reporter"})
			s.Record(read("a.txt"))
			s.End(trace.SessionEnd{Reason: "signal"})
			closeAll(t, s)
			var got []string
			for _, e := range other.Events() {
				got = append(got, e.Type())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("handed on %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAfterCloseAQueuedSinkGetsNothingMore(t *testing.T) {
	p, queued, inline, dropped := &primary{}, &memtrace.Recorder{}, &memtrace.Recorder{}, &drops{}
	cfg := config()
	cfg.OnDrop = dropped.add
	s := New(p, cfg, Extra{Name: "queued", Sink: queued}, Extra{Name: "inline", Sink: inline, Inline: true})
	s.Record(read("before.txt"))
	closeAll(t, s)
	closeAll(t, s) // a second Close is harmless
	s.Record(read("after.txt"))
	for name, tc := range map[string]struct {
		got  []trace.Event
		want string
	}{"primary": {p.Events(), "before.txt,after.txt"}, "inline": {inline.Events(), "before.txt,after.txt"}, "queued": {queued.Events(), "before.txt"}} {
		if got := strings.Join(paths(tc.got), ","); got != tc.want {
			t.Errorf("the %s sink got %q, want %q", name, got, tc.want)
		}
	}
	if dropped.of("queued") != 0 {
		t.Error("an event recorded after Close was counted as dropped")
	}
}

func TestWithoutQueuedSinksThereIsNoGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		extras []Extra
	}{
		{"no other sink", nil},
		{"an inline sink only", []Extra{{Name: "counters", Sink: &memtrace.Recorder{}, Inline: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			p := &primary{}
			s := New(p, config(), tc.extras...)
			s.Record(read("a.txt"))
			if after := runtime.NumGoroutine(); after != before {
				t.Errorf("%d goroutines after New, %d before", after, before)
			}
			if behind := s.Close(context.Background()); len(behind) != 0 {
				t.Errorf("Close reported %q behind", behind)
			}
			if len(p.Events()) != 1 {
				t.Errorf("the primary got %d events, want 1", len(p.Events()))
			}
		})
	}
}

func TestAnInlineSinkGetsTheEventBeforeRecordReturns(t *testing.T) {
	p, counters, broken := &primary{}, &memtrace.Recorder{}, &panicking{}
	failures := 0
	cfg := config()
	cfg.OnFailure = func(string, error) { failures++ }
	s := New(p, cfg, Extra{Name: "counters", Sink: counters, Inline: true}, Extra{Name: "broken", Sink: broken, Inline: true})
	s.Record(read("a.txt"))
	if got := paths(counters.Events()); len(got) != 1 {
		t.Fatalf("the inline sink has %q once Record returned, want the event", got)
	}
	if stamped, ok := counters.Events()[0].(trace.Stamped); !ok || !stamped.At.Equal(recordedAt) {
		t.Errorf("the inline sink got %#v, want a trace.Stamped at %v", counters.Events()[0], recordedAt)
	}
	s.Record(trace.ResourceRead{Path: "refused.txt", Err: refusal.New(refusal.NotFound)})
	if failures != 1 || len(p.Events()) != 2 || len(counters.Events()) != 2 {
		t.Errorf("after an inline sink panicked: %d failures, primary %d, other inline sink %d events; want 1, 2, 2",
			failures, len(p.Events()), len(counters.Events()))
	}
}

// batches is a sink that is a Flusher: it records every event and, at each Flush, how many
// events the batch held, and says when a batch ended.
type batches struct {
	memtrace.Recorder
	mu      sync.Mutex
	sizes   []int
	pending int
	flushed chan struct{}
}

func newBatches() *batches { return &batches{flushed: make(chan struct{}, 100)} }

func (b *batches) Record(e trace.Event) {
	b.mu.Lock()
	b.pending++
	b.mu.Unlock()
	b.Recorder.Record(e)
}

func (b *batches) Flush() {
	b.mu.Lock()
	b.sizes = append(b.sizes, b.pending)
	b.pending = 0
	b.mu.Unlock()
	b.flushed <- struct{}{}
}

func (b *batches) batchSizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sizes)
}

// waitFlush fails the test unless b ends a batch within a generous bound.
func (b *batches) waitFlush(t *testing.T) {
	t.Helper()
	select {
	case <-b.flushed:
	case <-time.After(10 * time.Second):
		t.Fatal("no batch was handed over")
	}
}

func TestABatchedSinkGetsItsEventsInBatchesEachEndedByAFlush(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batch   int
		delay   time.Duration
		records int
		close   bool // close the fan-out instead of waiting for the batch
		want    []int
	}{
		{"a full batch is handed over at once, long before its delay", 3, time.Hour, 3, false, []int{3}},
		{"a batch that is not full is handed over when its delay has passed", 100, 20 * time.Millisecond, 2, false, []int{2}},
		{"close hands over a batch that is neither full nor due", 100, time.Hour, 2, true, []int{2}},
		{"a batch larger than the queue is full when the queue is", 10_000, time.Hour, DefaultQueueSize, false, []int{DefaultQueueSize}},
		{"without a batch, a flush ends each wake-up", 0, 0, 1, false, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := newBatches()
			s := New(&primary{}, config(), Extra{Name: "batched", Sink: sink, Batch: tc.batch, Delay: tc.delay})
			for i := range tc.records {
				s.Record(read(fmt.Sprintf("%d.txt", i)))
			}
			if tc.close {
				closeAll(t, s)
			} else {
				sink.waitFlush(t)
				closeAll(t, s)
			}
			if got := sink.batchSizes(); !slices.Equal(got, tc.want) {
				t.Errorf("batches of %v events, want %v", got, tc.want)
			}
			if got := len(sink.Events()); got != tc.records {
				t.Errorf("the sink got %d events, want %d", got, tc.records)
			}
		})
	}
}

func TestABatchedSinkIsNotHandedAnythingBeforeItsBatchIsFullOrDue(t *testing.T) {
	sink := newBatches()
	s := New(&primary{}, config(), Extra{Name: "batched", Sink: sink, Batch: 3, Delay: time.Hour})
	s.Record(read("a.txt"))
	s.Record(read("b.txt"))
	time.Sleep(50 * time.Millisecond) // room for a wrong hand-over to happen
	if got := len(sink.Events()); got != 0 {
		t.Fatalf("the sink got %d events of a batch neither full nor due", got)
	}
	s.Record(read("c.txt"))
	sink.waitFlush(t)
	if got := strings.Join(paths(sink.Events()), ","); got != "a.txt,b.txt,c.txt" {
		t.Errorf("the sink got %q, want the three in order", got)
	}
	closeAll(t, s)
}

func TestAnExtrasOwnQueueSizeBoundsItsQueue(t *testing.T) {
	stuck, dropped := newBlocking(), &drops{}
	cfg := config()
	cfg.QueueSize, cfg.OnDrop = 100, dropped.add
	s := New(&primary{}, cfg, Extra{Name: "stuck", Sink: stuck, QueueSize: 2})
	s.Record(read("first.txt"))
	<-stuck.entered // the sink holds the first event
	for range 9 {
		s.Record(read("later.txt"))
	}
	// Two wait in the sink's own queue of 2, not in the fan-out's default of 100.
	if got := dropped.of("stuck"); got != 7 {
		t.Errorf("%d drops counted, want 7", got)
	}
	close(stuck.release)
	closeAll(t, s)
}

// flushPanics panics on every Flush, and records its events.
type flushPanics struct{ memtrace.Recorder }

func (*flushPanics) Flush() { panic("a flush bug") }

func TestAFlushThatPanicsIsReportedAndTheSinkGoesOn(t *testing.T) {
	cfg := config()
	onFailure, reported := failures()
	cfg.OnFailure = onFailure
	sink := &flushPanics{}
	s := New(&primary{}, cfg, Extra{Name: "flaky", Sink: sink, Batch: 1, Delay: time.Hour})
	s.Record(read("a.txt"))
	s.Record(read("b.txt"))
	closeAll(t, s)
	if got := len(sink.Events()); got != 2 {
		t.Errorf("the sink got %d events, want both", got)
	}
	if len(reported) == 0 {
		t.Fatal("no failure reported for a flush that panicked")
	}
	if err := <-reported; !strings.Contains(err.Error(), "flaky") || !strings.Contains(err.Error(), "flushing") {
		t.Errorf("failure %v, want one naming the sink and the flush", err)
	}
}
