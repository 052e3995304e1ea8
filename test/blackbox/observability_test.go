package blackbox_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbObservedManifest declares both planes and both tools; the capsule may reach itself on
// 127.0.0.1, so it can share a file with itself and fetch it back.
const bbObservedManifest = `name: reporter
exports:
  files:
    root: out/
    mode: read-only
  peer_files:
    root: out/
    max_ttl: 1h
capabilities:
  network:
    allow: ["127.0.0.1"]
  peer_fetch:
    allow: ["127.0.0.1"]
`

// bbTokenRe is what a handle token looks like wherever it could leak (docs/trace.md,
// "Redaction").
var bbTokenRe = regexp.MustCompile(`mh1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+`)

// bbScrape fetches the metrics listener's /metrics over raw HTTP/1.0 (so the body is neither
// chunked nor kept alive) and parses it with the Prometheus text parser.
func bbScrape(t *testing.T, addr string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	r := harness.Raw(t, addr, "GET /metrics HTTP/1.0\r\nHost: "+addr+"\r\n\r\n")
	if r.Status != http.StatusOK {
		t.Fatalf("/metrics answered %d:\n%s", r.Status, r.Raw)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(r.Body)))
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v\n%s", err, r.Body)
	}
	return string(r.Body), families
}

// bbValue is the value of the series of family name whose labels include labels: a counter's
// or gauge's value, a histogram's sample count; -1 when there is no such series.
func bbValue(families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	for _, m := range families[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i < len(labels); i += 2 {
			match = match && have[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// bbForgedToken is a token of the right shape whose MAC no key made: it reaches the MAC check
// and is refused handle_not_valid.
func bbForgedToken() string {
	tag := make([]byte, 32)
	_, _ = rand.Read(tag)
	b64 := base64.RawURLEncoding
	return "mh1." + b64.EncodeToString([]byte(`{"v":1,"iss":"ses_x","p":"a.txt","exp":1,"n":"00"}`)) + "." + b64.EncodeToString(tag)
}

// bbOutcomesOf counts p's trace events by plane (files, peer) or tool and outcome, the way the
// metrics label them.
func bbOutcomesOf(t *testing.T, trace string) map[[3]string]int {
	t.Helper()
	kind := map[string][2]string{
		"resource_list": {"requests", "files"}, "resource_read": {"requests", "files"}, "peer_handle_redeem": {"requests", "peer"},
		"peer_handle_mint": {"tools", "share-file"}, "peer_file_fetch": {"tools", "fetch-peer-file"},
	}
	counts := map[[3]string]int{}
	for _, e := range harness.Events(t, trace) {
		if k, ok := kind[e.Str(t, "event_type")]; ok {
			counts[[3]string{k[0], k[1], e.Str(t, "outcome")}]++
		}
	}
	return counts
}

// TestMetricsAndSpansSeeEveryTracedRequestAndNoToken pins docs/operator-guide.md ("Metrics
// and tracing"): with --metrics-listen and --otel-endpoint, every traced request is counted
// under its plane (or tool) and outcome exactly as often as trace.jsonl records it, timed in
// the duration histogram, its bytes counted; /healthz and /readyz answer; and every trace line
// becomes one span at the collector — named after its event type, with its outcome and the
// session id, its resource service.name resplane — flushed on SIGTERM. A real token exchange
// and tokens in request targets run through it all, and no token reaches the metrics, an
// export request, the trace or the log.
func TestMetricsAndSpansSeeEveryTracedRequestAndNoToken(t *testing.T) {
	collector := harness.NewOTLPReceiver(t)
	p := harness.Start(t, harness.Capsule{
		Manifest: bbObservedManifest,
		Files:    fixture.Layout{"out/report.md": strings.Repeat("r", 1024)},
		Args:     []string{"--metrics-listen", "127.0.0.1:0", "--otel-endpoint", collector.URL()},
		Env:      []string{"OTEL_BSP_SCHEDULE_DELAY=50"}, // the SDK's own variable: export every 50 ms
	})
	if p.Ready.Metrics == nil {
		t.Fatal("the ready line's metrics is null with --metrics-listen")
	}
	metrics, addr := *p.Ready.Metrics, p.Ready.Listen
	if host, port, err := net.SplitHostPort(metrics); err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("the ready line's metrics %q is not the bound address", metrics)
	}
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		r := harness.Raw(t, metrics, "GET "+path+" HTTP/1.0\r\nHost: "+metrics+"\r\n\r\n")
		if r.Status != http.StatusOK || string(r.Body) != want {
			t.Errorf("%s answered %d %q, want 200 %q", path, r.Status, r.Body, want)
		}
	}

	// The requests: on the files plane, refusals and a 405 among them, and a token in a path;
	// a real share and fetch with the capsule itself; redeems of the real token and of a forged
	// one; and requests no plane owns.
	forged := bbForgedToken()
	for range 3 {
		harness.Get(t, addr, "/resources/files/report.md")
	}
	harness.Get(t, addr, "/resources/files")
	harness.Get(t, addr, "/resources/files/missing.txt")
	harness.Get(t, addr, "/resources/files/"+forged)
	harness.Get(t, addr, "/resources/files/%2e%2e/murmur.yaml")
	harness.RequestWithin(t, addr, http.MethodPost, "/resources/files/report.md", bbFifoDeadline)
	share := harness.Control(t, p.Ready.Control, http.MethodPost, "/v1/tools/share-file", map[string]any{"path": "report.md", "peer": addr})
	var minted struct{ Handle string }
	if err := json.Unmarshal(share.Data(t), &minted); err != nil || !bbTokenRe.MatchString(minted.Handle) {
		t.Fatalf("share-file: %v %s", err, share.Raw)
	}
	harness.Control(t, p.Ready.Control, http.MethodPost, "/v1/tools/fetch-peer-file", map[string]any{"peer": addr, "handle": minted.Handle}).Data(t)
	harness.Get(t, addr, "/resources/peer/"+minted.Handle, "x-murmur-audience: charlie@localhost:1")
	harness.Get(t, addr, "/resources/peer/"+forged, "x-murmur-audience: "+p.Ready.Audience)
	harness.Get(t, addr, "/.well-known/agent-card.json")
	harness.Get(t, addr, "/resources/elsewhere")
	const connections = 14 // every request above on the resource listener, the fetch's redeem and the share's card fetch included

	wantCounts := bbOutcomesOf(t, p.Ready.Trace)
	for key, want := range map[[3]string]int{
		{"requests", "files", "ok"}: 4, {"requests", "files", "not_found"}: 2, {"requests", "files", "outside_root"}: 1,
		{"requests", "files", "method_not_allowed"}: 1, {"requests", "peer", "ok"}: 1, {"requests", "peer", "handle_not_valid"}: 2,
		{"tools", "share-file", "ok"}: 1, {"tools", "fetch-peer-file", "ok"}: 1,
	} {
		if wantCounts[key] != want {
			t.Fatalf("the trace records %d %v, want %d (all: %v)", wantCounts[key], key, want, wantCounts)
		}
	}

	t.Run("the metrics count what the trace records", func(t *testing.T) {
		deadline := time.Now().Add(5 * time.Second)
		var text string
		var families map[string]*dto.MetricFamily
		for { // the counters follow the trace through the fan-out's queue
			text, families = bbScrape(t, metrics)
			caughtUp := bbValue(families, "resplane_open_connections") == 0
			for key, want := range wantCounts {
				name, label := "resplane_requests_total", "plane"
				if key[0] == "tools" {
					name, label = "resplane_tool_calls_total", "tool"
				}
				caughtUp = caughtUp && bbValue(families, name, label, key[1], "outcome", key[2]) == float64(want)
			}
			if caughtUp || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		var series int
		for key, want := range wantCounts {
			name, label := "resplane_requests_total", "plane"
			if key[0] == "tools" {
				name, label = "resplane_tool_calls_total", "tool"
			}
			if got := bbValue(families, name, label, key[1], "outcome", key[2]); got != float64(want) {
				t.Errorf("%s{%s=%q,outcome=%q} = %v, want %d as in the trace", name, label, key[1], key[2], got, want)
			}
			series++
		}
		moved := 0 // every series starts at 0 (docs/operator-guide.md, "Metrics"): only the trace's outcomes may move
		for _, name := range []string{"resplane_requests_total", "resplane_tool_calls_total"} {
			for _, m := range families[name].GetMetric() {
				if m.GetCounter().GetValue() != 0 {
					moved++
				}
			}
		}
		if moved != series {
			t.Errorf("%d request and tool series moved, want exactly the %d outcomes the trace holds", moved, series)
		}
		if got := bbValue(families, "resplane_tool_calls_total", "tool", "share-file", "outcome", "peer_unreachable"); got != 0 {
			t.Errorf("share-file's peer_unreachable = %v before any such call, want a series at 0", got)
		}
		leases := 0.0 // the one listing above leased report.md, and the cache holds it
		if p.Ready.ListingCache == "lease" {
			leases = 1
			if limit := bbValue(families, "resplane_listing_lease_limit"); limit < 1 {
				t.Errorf("resplane_listing_lease_limit = %v in lease mode, want the limit", limit)
			}
		}
		for _, want := range []struct {
			name   string
			labels []string
			value  float64
		}{
			{"resplane_listing_leases", nil, leases},
			{"resplane_request_duration_seconds", []string{"plane", "files"}, 8},
			{"resplane_request_duration_seconds", []string{"plane", "peer"}, 3},
			{"resplane_served_bytes_total", []string{"plane", "files"}, 3 * 1024},
			{"resplane_served_bytes_total", []string{"plane", "peer"}, 1024},
			{"resplane_connections_total", nil, connections},
			{"resplane_open_connections", nil, 0},
			{"resplane_budget_limit_bytes", []string{"budget", "memory"}, 256 << 20},
			{"resplane_budget_held_bytes", []string{"budget", "memory"}, 0},
			{"resplane_trace_write_failures_total", nil, 0},
		} {
			if got := bbValue(families, want.name, want.labels...); got != want.value {
				t.Errorf("%s%v = %v, want %v", want.name, want.labels, got, want.value)
			}
		}
		for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
			if _, ok := families[name]; !ok {
				t.Errorf("no %s: the Go and process collectors are missing", name)
			}
		}
		dropped := families["resplane_trace_sink_dropped_events_total"]
		for _, m := range dropped.GetMetric() {
			if m.GetCounter().GetValue() != 0 {
				t.Errorf("trace events were dropped: %v", dropped)
			}
		}
		if n := len(dropped.GetMetric()); n != 4 {
			t.Errorf("%d dropped-event series, want the 4 of the sinks that are on, at 0 from the start", n)
		}
		if strings.Contains(text, "mh1.") || strings.Contains(text, "report.md") {
			t.Errorf("the metrics hold a token or a path:\n%s", text)
		}
	})

	if code := p.Stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	lines := harness.Events(t, p.Ready.Trace)

	t.Run("one span per trace line, all flushed on shutdown", func(t *testing.T) {
		spans := collector.Spans()
		key := func(name string, attrs map[string]any) string {
			return name + " " + attrs["murmur.outcome"].(string) + " " + attrs["murmur.session_id"].(string)
		}
		var fromTrace, fromSpans []string
		for _, e := range lines {
			outcome, _ := e.M["outcome"].(string)
			fromTrace = append(fromTrace, key(e.Str(t, "event_type"), map[string]any{"murmur.outcome": outcome, "murmur.session_id": e.Str(t, "session_id")}))
		}
		for _, s := range spans {
			if _, ok := s.Attrs["murmur.outcome"]; !ok {
				s.Attrs["murmur.outcome"] = ""
			}
			if s.Service != "resplane" {
				t.Errorf("span %s of service %q, want resplane", s.Name, s.Service)
			}
			if outcome := s.Attrs["murmur.outcome"]; s.Error != (outcome != "ok" && outcome != "") || (s.Error && s.Message != outcome) {
				t.Errorf("span %s with outcome %v has error status %v %q", s.Name, outcome, s.Error, s.Message)
			}
			fromSpans = append(fromSpans, key(s.Name, s.Attrs))
		}
		slices.Sort(fromTrace)
		slices.Sort(fromSpans)
		if !slices.Equal(fromTrace, fromSpans) {
			t.Fatalf("spans (name, outcome, session) differ from the trace lines:\n spans %q\n trace %q", fromSpans, fromTrace)
		}
		if !slices.Contains(fromSpans, key("session_end", map[string]any{"murmur.outcome": "", "murmur.session_id": p.Ready.SessionID})) {
			t.Errorf("session_end, recorded during shutdown, never reached the collector")
		}
	})

	t.Run("no token in a metric, a span, the trace or the log", func(t *testing.T) {
		texts := map[string]string{"stderr": p.Stderr()}
		for i, body := range collector.Bodies() {
			texts["export request "+strconv.Itoa(i)] = string(body)
		}
		for _, e := range lines {
			texts["trace line "+e.Str(t, "event_id")] = e.Raw
		}
		placeholders := 0
		for name, text := range texts {
			if m := bbTokenRe.FindString(text); m != "" || strings.Contains(text, minted.Handle) {
				t.Errorf("%s holds a token %q", name, m)
			}
			if strings.HasPrefix(name, "export") {
				placeholders += strings.Count(text, "<handle:")
			}
		}
		if placeholders == 0 {
			t.Error("no span holds <handle:…>: the token in a read path was dropped rather than redacted")
		}
	})
}

// TestSpansFollowTheStandardVariablesAndMetricsAreOffByDefault pins docs/operator-guide.md
// ("Metrics and tracing"): without --otel-endpoint, OTEL_EXPORTER_OTLP_ENDPOINT turns spans
// on (and OTEL_SERVICE_NAME names the service); without --metrics-listen the ready line's
// metrics is null.
func TestSpansFollowTheStandardVariablesAndMetricsAreOffByDefault(t *testing.T) {
	collector := harness.NewOTLPReceiver(t)
	p := harness.Start(t, harness.Capsule{
		Manifest: bbFilesManifest("out/", ""),
		Files:    fixture.Layout{"out/a.txt": "a"},
		Env:      []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL(), "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=capsule-reporter"},
	})
	if p.Ready.Metrics != nil {
		t.Errorf("the ready line's metrics is %q without --metrics-listen, want null", *p.Ready.Metrics)
	}
	harness.Get(t, p.Ready.Listen, "/resources/files/a.txt")
	for _, s := range collector.WaitForSpans(t, 2) { // session_start and the read
		if s.Service != "capsule-reporter" || s.Attrs["murmur.session_id"] != p.Ready.SessionID {
			t.Errorf("span %s of service %q in session %v, want capsule-reporter in %s", s.Name, s.Service, s.Attrs["murmur.session_id"], p.Ready.SessionID)
		}
	}
}

// TestACollectorThatIsDownNeverFailsARequestOrTheTrace pins docs/operator-guide.md ("Metrics
// and tracing"): with the collector unreachable and the SDK's queue one span long, every
// request is still answered and traced, and SIGTERM still exits 0 (the flush is bounded).
func TestACollectorThatIsDownNeverFailsARequestOrTheTrace(t *testing.T) {
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + down.Addr().String()
	_ = down.Close()
	p := harness.Start(t, harness.Capsule{
		Manifest: bbFilesManifest("out/", ""),
		Files:    fixture.Layout{"out/a.txt": "a"},
		Args:     []string{"--otel-endpoint", endpoint},
		Env:      []string{"OTEL_BSP_MAX_QUEUE_SIZE=1", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=1", "OTEL_BSP_SCHEDULE_DELAY=10"},
	})
	const requests = 50
	for range requests {
		if r := harness.Get(t, p.Ready.Listen, "/resources/files/a.txt"); r.Status != http.StatusOK {
			t.Fatalf("a read answered %d while the collector is down", r.Status)
		}
	}
	if code := p.Stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM with the collector down", code)
	}
	reads := 0
	for _, e := range harness.Events(t, p.Ready.Trace) {
		if e.M["event_type"] == "resource_read" && e.M["outcome"] == "ok" {
			reads++
		}
	}
	if reads != requests {
		t.Fatalf("the trace holds %d reads, want %d", reads, requests)
	}
}
