package prometheus

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/resplane/resplane/domain/hostpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/trace"
)

// token is a handle token as an event could carry it in a path.
const token = "mh1.eyJ2IjoxfQ.c2lnbmF0dXJl"

func TestEventsCountUnderTheirPlaneOrToolAndOutcome(t *testing.T) {
	peerCode := refusal.WithMessage("quota_exceeded", "the peer refused")
	for _, tc := range []struct {
		name   string
		event  trace.Event
		metric string // "requests" or "tools"
		labels []string
		bytes  float64 // served bytes expected under the first label
	}{
		{"a read that served counts ok and its bytes", trace.ResourceRead{Path: "a.txt", Bytes: 1024, SHA256: "ab"}, "requests", []string{"files", "ok"}, 1024},
		{"a refused read counts its code and no bytes", trace.ResourceRead{Path: "../x", Err: refusal.New(refusal.OutsideRoot)}, "requests", []string{"files", "outside_root"}, 0},
		{"a listing counts on the files plane", trace.ResourceList{Root: "out/", EntryCount: 3, TotalBytes: 90}, "requests", []string{"files", "ok"}, 0},
		{"a redeem counts on the peer plane", trace.PeerHandleRedeem{HandleID: "3f2a91c40b7e5d68", Bytes: 32}, "requests", []string{"peer", "ok"}, 32},
		{"a redeem refused counts its code", trace.PeerHandleRedeem{HandleID: "3f2a91c40b7e5d68", Err: refusal.New(refusal.HandleNotValid)}, "requests", []string{"peer", "handle_not_valid"}, 0},
		{"a mint counts as share-file", trace.PeerHandleMint{HandleID: "3f2a91c40b7e5d68"}, "tools", []string{"share-file", "ok"}, 0},
		{"a fetch counts as fetch-peer-file", trace.PeerFileFetch{Err: refusal.WithMessage(refusal.PeerNotAllowed, "no")}, "tools", []string{"fetch-peer-file", "peer_not_allowed"}, 0},
		{"a peer's own code is folded into other", trace.PeerFileFetch{Err: peerCode}, "tools", []string{"fetch-peer-file", "other"}, 0},
		{"an http status outcome is folded into other", trace.PeerFileFetch{Err: refusal.WithMessage("http_502", "bad gateway")}, "tools", []string{"fetch-peer-file", "other"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			m.Record(tc.event)
			m.Record(trace.Stamped{Event: tc.event, At: time.Now()}) // as the fan-out hands it on
			vec := m.requests
			if tc.metric == "tools" {
				vec = m.tools
			}
			if got := testutil.ToFloat64(vec.WithLabelValues(tc.labels...)); got != 2 {
				t.Errorf("%s%v = %v, want 2", tc.metric, tc.labels, got)
			}
			if total := counted(t, m, "resplane_requests_total", "resplane_tool_calls_total"); total != 2 {
				t.Errorf("requests and tool calls sum to %v: a series other than %v moved", total, tc.labels)
			}
			if got := testutil.ToFloat64(m.served.WithLabelValues(tc.labels[0])); tc.metric == "requests" && got != 2*tc.bytes {
				t.Errorf("served bytes %v, want %v", got, 2*tc.bytes)
			}
		})
	}
}

func TestSessionEventsCountNothing(t *testing.T) {
	m := New()
	m.Record(trace.SessionStart{Capsule: "reporter"})
	m.Record(trace.SessionEnd{Reason: "signal"})
	if total := counted(t, m, "resplane_requests_total", "resplane_tool_calls_total", "resplane_served_bytes_total"); total != 0 {
		t.Fatalf("session events counted %v, want nothing", total)
	}
}

// counted sums every series of the named counters.
func counted(t *testing.T, m *Metrics, names ...string) float64 {
	t.Helper()
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if slices.Contains(names, f.GetName()) {
			for _, metric := range f.GetMetric() {
				total += metric.GetCounter().GetValue()
			}
		}
	}
	return total
}

// TestNoLabelValueComesFromAnEvent records events whose every string holds a token or a
// path, and requires that the whole exposition holds none of them and that outcomes stayed in
// their fixed set.
func TestNoLabelValueComesFromAnEvent(t *testing.T) {
	m := New()
	hostile := []trace.Event{
		trace.ResourceRead{Path: token, Err: refusal.New(refusal.NotFound)},
		trace.ResourceRead{Path: "secret/" + token + ".md", Bytes: 5, SHA256: token},
		trace.PeerHandleRedeem{HandleID: token, Audience: token, AudienceSent: true, Err: refusal.New(refusal.HandleNotValid)},
		trace.PeerHandleMint{HandleID: token, Path: token, Audience: token},
		trace.PeerFileFetch{Peer: token, HandleID: token, Err: refusal.WithMessage(refusal.Code(token), token)},
	}
	for _, e := range hostile {
		m.Record(e)
	}
	text := scrape(t, m)
	for _, leak := range []string{"mh1.", "secret/", token} {
		if strings.Contains(text, leak) {
			t.Fatalf("the exposition holds %q:\n%s", leak, text)
		}
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"resplane_requests_total", "resplane_tool_calls_total"} {
		for _, metric := range families[name].GetMetric() {
			for _, label := range metric.GetLabel() {
				if label.GetName() == "outcome" && label.GetValue() != "ok" && label.GetValue() != "other" &&
					!refusal.Known(refusal.Code(label.GetValue())) {
					t.Errorf("%s has outcome %q, outside the fixed set", name, label.GetValue())
				}
			}
		}
	}
}

func TestInstrumentRequestsTimesThePlanesOnly(t *testing.T) {
	m := New()
	planeOf := func(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/") }
	h := m.InstrumentRequests(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }), planeOf)
	for _, target := range []string{"/files", "/files", "/peer", "/", "/agent-card"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, target, nil))
	}
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "resplane_request_duration_seconds" {
			continue
		}
		for _, metric := range f.GetMetric() {
			counts[metric.GetLabel()[0].GetValue()] = metric.GetHistogram().GetSampleCount()
		}
	}
	if counts[trace.PlaneFiles] != 2 || counts[trace.PlanePeer] != 1 || len(counts) != 2 {
		t.Fatalf("observations by plane %v, want files 2 and peer 1 only", counts)
	}
}

func TestTrackConnectionsCountsOpenConnectionsAndCallsTheHookBefore(t *testing.T) {
	m := New()
	var seen []http.ConnState
	hook := m.TrackConnections(func(_ net.Conn, s http.ConnState) { seen = append(seen, s) })
	a, b := &net.TCPConn{}, &net.TCPConn{}
	for _, step := range []struct {
		conn  net.Conn
		state http.ConnState
		open  float64
	}{
		{a, http.StateNew, 1},
		{b, http.StateNew, 2},
		{a, http.StateActive, 2},
		{a, http.StateClosed, 1},
		{b, http.StateHijacked, 0},
	} {
		hook(step.conn, step.state)
		if got := testutil.ToFloat64(m.openConns); got != step.open {
			t.Fatalf("after %v: %v open, want %v", step.state, got, step.open)
		}
	}
	if got := testutil.ToFloat64(m.conns); got != 2 {
		t.Errorf("%v connections counted, want 2", got)
	}
	if len(seen) != 5 {
		t.Errorf("the previous hook saw %v, want all five states", seen)
	}
}

// readings is a budget whose readings the test sets.
type readings struct {
	limit, held, waiting int64
	waits                uint64
	waited               time.Duration
}

func (r *readings) LimitBytes() int64         { return r.limit }
func (r *readings) HeldBytes() int64          { return r.held }
func (r *readings) WaitingBytes() int64       { return r.waiting }
func (r *readings) Waits() uint64             { return r.waits }
func (r *readings) WaitedTime() time.Duration { return r.waited }

func TestWatchBudgetReadsTheBudgetAtEachScrape(t *testing.T) {
	m := New()
	memory := &readings{limit: 256 << 20}
	m.WatchBudget("memory", memory)
	m.WatchBudget("spool", &readings{limit: 2 << 30})
	memory.held, memory.waiting, memory.waits, memory.waited = 4096, 1024, 3, 1500*time.Millisecond

	want := `
# HELP resplane_budget_held_bytes Bytes of the budget that reads hold now.
# TYPE resplane_budget_held_bytes gauge
resplane_budget_held_bytes{budget="memory"} 4096
resplane_budget_held_bytes{budget="spool"} 0
# HELP resplane_budget_limit_bytes The whole budget, in bytes.
# TYPE resplane_budget_limit_bytes gauge
resplane_budget_limit_bytes{budget="memory"} 2.68435456e+08
resplane_budget_limit_bytes{budget="spool"} 2.147483648e+09
# HELP resplane_budget_wait_seconds_total Time reads have spent waiting for room, all together.
# TYPE resplane_budget_wait_seconds_total counter
resplane_budget_wait_seconds_total{budget="memory"} 1.5
resplane_budget_wait_seconds_total{budget="spool"} 0
# HELP resplane_budget_waiting_bytes Bytes asked for by the reads waiting for room now.
# TYPE resplane_budget_waiting_bytes gauge
resplane_budget_waiting_bytes{budget="memory"} 1024
resplane_budget_waiting_bytes{budget="spool"} 0
# HELP resplane_budget_waits_total Reads that found no room at once and waited.
# TYPE resplane_budget_waits_total counter
resplane_budget_waits_total{budget="memory"} 3
resplane_budget_waits_total{budget="spool"} 0
`
	if err := testutil.GatherAndCompare(m.registry, strings.NewReader(want),
		"resplane_budget_held_bytes", "resplane_budget_limit_bytes", "resplane_budget_wait_seconds_total",
		"resplane_budget_waiting_bytes", "resplane_budget_waits_total"); err != nil {
		t.Fatal(err)
	}
}

// leaseCount is a LeaseReadings whose count the test sets.
type leaseCount int

func (c *leaseCount) Count() int { return int(*c) }

func TestWatchLeasesReadsTheCountAtEachScrape(t *testing.T) {
	for _, tc := range []struct {
		rule          string
		leases        *leaseCount
		limit         int
		held, ceiling string
	}{
		{"a service that takes leases reports those held and its limit", new(leaseCount), 100000, "7", "100000"},
		{"a service that takes none reports zero of zero", nil, 0, "0", "0"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			m := New()
			if tc.leases == nil {
				m.WatchLeases(nil, tc.limit)
			} else {
				m.WatchLeases(tc.leases, tc.limit)
				*tc.leases = 7 // after the watch: read at the scrape, not at the watch
			}
			want := `
# HELP resplane_listing_lease_limit The most read leases the listing hash cache holds at once.
# TYPE resplane_listing_lease_limit gauge
resplane_listing_lease_limit ` + tc.ceiling + `
# HELP resplane_listing_leases Read leases the listing hash cache holds now.
# TYPE resplane_listing_leases gauge
resplane_listing_leases ` + tc.held + `
`
			if err := testutil.GatherAndCompare(m.registry, strings.NewReader(want),
				"resplane_listing_leases", "resplane_listing_lease_limit"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestTraceLossesAreCounted(t *testing.T) {
	m := New()
	m.TraceWritesFailed(1)
	m.EventsDropped("otel", QueueFull, 1)
	m.EventsDropped("otel", ExportFailed, 512)
	m.EventsDropped("prometheus", SinkFailed, 0) // nothing lost, no series
	if got := testutil.ToFloat64(m.traceFailures); got != 1 {
		t.Errorf("trace write failures %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.dropped.WithLabelValues("otel", ExportFailed)); got != 512 {
		t.Errorf("export failures %v, want 512", got)
	}
	if n := testutil.CollectAndCount(m.dropped); n != 2 {
		t.Errorf("%d dropped-event series, want 2", n)
	}
}

func TestCountersStartAtZeroForEveryKnownLabelSet(t *testing.T) {
	m := New()
	if got := testutil.ToFloat64(m.tools.WithLabelValues("fetch-peer-file", "peer_not_allowed")); got != 0 {
		t.Errorf("a tool outcome before any call: %v, want 0", got)
	}
	outcomes := len(refusal.Codes()) + 2 // and ok and other
	if n := testutil.CollectAndCount(m.tools); n != 2*outcomes {
		t.Errorf("%d tool-call series before any call, want %d: both tools, every outcome", n, 2*outcomes)
	}
	if n := testutil.CollectAndCount(m.requests); n != 2*outcomes {
		t.Errorf("%d request series before any request, want %d: both planes, every outcome", n, 2*outcomes)
	}
	m.ExportSink("otel", QueueFull, SinkFailed, ExportFailed)
	m.ExportSink("prometheus", SinkFailed)
	if n := testutil.CollectAndCount(m.dropped); n != 4 {
		t.Errorf("%d dropped-event series for the sinks exported, want 4 at 0", n)
	}
	m.EventsDropped("otel", QueueFull, 3)
	if got := testutil.ToFloat64(m.dropped.WithLabelValues("otel", QueueFull)); got != 3 {
		t.Errorf("queue_full after 3 drops: %v", got)
	}
}

func TestANilMetricsRecordsNothingAndHandsHooksBack(t *testing.T) {
	var m *Metrics
	next := http.NotFoundHandler()
	if got := m.InstrumentRequests(next, nil); got == nil {
		t.Error("InstrumentRequests on nil lost the handler")
	}
	if m.TrackConnections(nil) != nil {
		t.Error("TrackConnections on nil made a hook")
	}
	m.TraceWritesFailed(1)
	m.EventsDropped("otel", QueueFull, 1)
	m.WatchBudget("memory", &readings{})
}

func TestTheMetricsListenerAnswersMetricsHealthAndReadiness(t *testing.T) {
	m := New()
	m.Record(trace.ResourceRead{Path: "a.txt", Bytes: 3})
	ready := false
	srv := httptest.NewServer(m.Handler(func() bool { return ready }, hostpolicy.New(), nil))
	defer srv.Close()
	get := func(method, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		name, method, path string
		ready              bool
		status             int
		body               string
	}{
		{"healthz answers while the process serves", "GET", "/healthz", false, 200, "ok\n"},
		{"readyz is 503 before the ready line", "GET", "/readyz", false, 503, "not ready\n"},
		{"readyz is 200 once ready", "GET", "/readyz", true, 200, "ready\n"},
		{"metrics holds the request counter", "GET", "/metrics", true, 200, `resplane_requests_total{outcome="ok",plane="files"} 1`},
		{"metrics holds the Go collector", "GET", "/metrics", true, 200, "go_goroutines "},
		{"metrics holds the process collector", "GET", "/metrics", true, 200, "process_resident_memory_bytes "},
		{"another method is 405", "POST", "/metrics", true, 405, ""},
		{"another path is 404", "GET", "/resources/files", true, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready = tc.ready
			status, body := get(tc.method, tc.path)
			if status != tc.status || !strings.Contains(body, tc.body) {
				t.Fatalf("%s %s = %d %q, want %d with %q", tc.method, tc.path, status, body, tc.status, tc.body)
			}
		})
	}
}

// scrape returns m's exposition in the text format.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(func() bool { return true }, hostpolicy.New("example.com"), nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics answered %d", rec.Code)
	}
	return rec.Body.String()
}
