// Package prometheus exposes the service's metrics for Prometheus (docs/operator-guide.md,
// "Metrics and tracing"), with github.com/prometheus/client_golang.
//
// Metrics is a ports.TraceSink: the fan-out (adapters/fanout) hands it every trace event, and
// it counts requests, tool calls and bytes served from the event's outcome and bytes fields.
// The readings that are not events come in through their own hooks: InstrumentRequests times
// each request on the resource listener, TrackConnections counts its connections,
// WatchBudget reads a byte budget, TraceWritesFailed and EventsDropped count what the trace
// sinks lost. Handler serves /metrics, /healthz and /readyz on the metrics listener.
//
// Guarantees:
//
//   - Every label value comes from a fixed set: plane is files or peer; outcome is ok, one of
//     the codes domain/refusal declares, or "other" (a peer's own error code or an http_<status>
//     never becomes a label value of its own); tool is share-file or fetch-peer-file. No path,
//     handle, handle id, audience or session id is ever a label value, so nothing an event
//     carries can grow the number of series or leak a token.
//   - Record and every hook only update counters, gauges and histograms in memory: they never
//     block on a scrape and never fail, so the fan-out calls Record inline, on the request's
//     goroutine (adapters/fanout, Extra.Inline).
//   - A nil *Metrics is valid and records nothing; its hooks hand back what they were given.
//
// Non-guarantees:
//
//   - A counter fed by events counts it just after trace.jsonl records it, not atomically with
//     it: a scrape between the two sees the line without the count.
//   - Requests that no trace event records (the agent card, unknown routes, refusals before
//     a plane's trace point) are not in resplane_requests_total; the duration histogram times
//     every request on a plane's route.
package prometheus

import (
	"net"
	"net/http"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/ports"
)

// Why a trace sink lost an event, the reason label of resplane_trace_sink_dropped_events_total.
const (
	// QueueFull: the fan-out's queue for the sink was full.
	QueueFull = "queue_full"
	// SinkFailed: the sink panicked on the event.
	SinkFailed = "sink_failed"
	// ExportFailed: the span could not be delivered to the collector.
	ExportFailed = "export_failed"
)

// otherOutcome is the outcome label of every outcome that is neither ok nor a declared code.
const otherOutcome = "other"

// The event types counted as requests, by plane, and as tool calls, by tool.
var (
	planeOfEvent = map[string]string{
		trace.ResourceList{}.Type():     trace.PlaneFiles,
		trace.ResourceRead{}.Type():     trace.PlaneFiles,
		trace.PeerHandleRedeem{}.Type(): trace.PlanePeer,
	}
	toolOfEvent = map[string]string{
		trace.PeerHandleMint{}.Type(): "share-file",
		trace.PeerFileFetch{}.Type():  "fetch-peer-file",
	}
)

// durationBuckets spans a cached 1 KiB read (about 100 µs) to a large file sent to a slow client.
var durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Metrics is the service's metric registry. It is safe for concurrent use.
type Metrics struct {
	registry *prom.Registry

	requests      *prom.CounterVec
	duration      map[string]prom.Observer
	served        *prom.CounterVec
	tools         *prom.CounterVec
	openConns     prom.Gauge
	conns         prom.Counter
	traceFailures prom.Counter
	dropped       *prom.CounterVec
}

var _ ports.TraceSink = (*Metrics)(nil)

// New returns the service's metrics, with the Go runtime and process collectors registered.
func New() *Metrics {
	m := &Metrics{registry: prom.NewRegistry()}
	m.requests = m.counterVec("resplane_requests_total",
		"Requests on the resource planes, by plane (files, peer) and outcome (ok, a refusal code, or other).",
		"plane", "outcome")
	duration := prom.NewHistogramVec(prom.HistogramOpts{
		Name:    "resplane_request_duration_seconds",
		Help:    "Time from a request on a plane's route reaching the handler to the handler returning, its answer written.",
		Buckets: durationBuckets,
	}, []string{"plane"})
	m.registry.MustRegister(duration)
	m.duration = map[string]prom.Observer{
		trace.PlaneFiles: duration.WithLabelValues(trace.PlaneFiles),
		trace.PlanePeer:  duration.WithLabelValues(trace.PlanePeer),
	}
	m.served = m.counterVec("resplane_served_bytes_total", "File bytes served by successful reads and redeems, by plane.", "plane")
	m.tools = m.counterVec("resplane_tool_calls_total",
		"Agent tool calls past input validation, by tool (share-file, fetch-peer-file) and outcome.", "tool", "outcome")
	m.openConns = prom.NewGauge(prom.GaugeOpts{Name: "resplane_open_connections", Help: "Connections open on the resource listener."})
	m.conns = prom.NewCounter(prom.CounterOpts{Name: "resplane_connections_total", Help: "Connections accepted on the resource listener."})
	m.traceFailures = prom.NewCounter(prom.CounterOpts{
		Name: "resplane_trace_write_failures_total",
		Help: "trace.jsonl lines that could not be encoded or written (each is also logged).",
	})
	m.dropped = m.counterVec("resplane_trace_sink_dropped_events_total",
		"Trace events a sink other than trace.jsonl lost, by sink and reason (queue_full, sink_failed, export_failed).",
		"sink", "reason")
	m.registry.MustRegister(m.openConns, m.conns, m.traceFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.startAtZero()
	return m
}

// startAtZero exports every request and tool-call series the service can count, at 0, from
// the start: increase() and rate() over a series that appears with its first event miss that
// event, so an alert on the first refusal would never fire.
func (m *Metrics) startAtZero() {
	outcomes := []string{trace.OutcomeOK, otherOutcome}
	for _, c := range refusal.Codes() {
		outcomes = append(outcomes, string(c))
	}
	for _, outcome := range outcomes {
		for _, plane := range planeOfEvent {
			m.requests.WithLabelValues(plane, outcome)
		}
		for _, tool := range toolOfEvent {
			m.tools.WithLabelValues(tool, outcome)
		}
	}
}

// ExportSink exports the sink's resplane_trace_sink_dropped_events_total series at 0 for each
// reason it can lose events for, so the first loss is an increase() like any later one.
func (m *Metrics) ExportSink(sink string, reasons ...string) {
	if m == nil {
		return
	}
	for _, reason := range reasons {
		m.dropped.WithLabelValues(sink, reason)
	}
}

func (m *Metrics) counterVec(name, help string, labels ...string) *prom.CounterVec {
	c := prom.NewCounterVec(prom.CounterOpts{Name: name, Help: help}, labels)
	m.registry.MustRegister(c)
	return c
}

// Record implements ports.TraceSink: a request event counts under its plane and outcome (and
// its bytes, on success), a tool event under its tool and outcome; other events count nothing.
func (m *Metrics) Record(e trace.Event) {
	plane, isRequest := planeOfEvent[e.Type()]
	tool, isTool := toolOfEvent[e.Type()]
	if !isRequest && !isTool {
		return
	}
	var outcome string
	var bytes int64
	for _, f := range e.Fields() {
		switch f.Key {
		case "outcome":
			outcome, _ = f.Value.(string)
		case "bytes":
			bytes, _ = f.Value.(int64) // null unless ok
		}
	}
	if isTool {
		m.tools.WithLabelValues(tool, outcomeLabel(outcome)).Inc()
		return
	}
	m.requests.WithLabelValues(plane, outcomeLabel(outcome)).Inc()
	if bytes > 0 {
		m.served.WithLabelValues(plane).Add(float64(bytes))
	}
}

// outcomeLabel keeps an outcome that is ok or a declared refusal code, and folds every other
// one into "other".
func outcomeLabel(outcome string) string {
	if outcome == trace.OutcomeOK || refusal.Known(refusal.Code(outcome)) {
		return outcome
	}
	return otherOutcome
}

// InstrumentRequests wraps the resource listener's handler so that every request planeOf
// places on a plane (trace.PlaneFiles or trace.PlanePeer; anything else is not timed) is
// observed in the duration histogram, from the handler's start to its return.
func (m *Metrics) InstrumentRequests(next http.Handler, planeOf func(*http.Request) string) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		observer, timed := m.duration[planeOf(r)]
		if !timed {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		next.ServeHTTP(w, r)
		observer.Observe(time.Since(start).Seconds())
	})
}

// TrackConnections returns an http.Server.ConnState hook that counts the resource listener's
// connections, then calls prev (which may be nil).
func (m *Metrics) TrackConnections(prev func(net.Conn, http.ConnState)) func(net.Conn, http.ConnState) {
	if m == nil {
		return prev
	}
	return func(c net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			m.conns.Inc()
			m.openConns.Inc()
		case http.StateClosed, http.StateHijacked:
			m.openConns.Dec()
		}
		if prev != nil {
			prev(c, state)
		}
	}
}

// TraceWritesFailed counts n trace.jsonl lines that could not be written.
func (m *Metrics) TraceWritesFailed(n int) {
	if m != nil {
		m.traceFailures.Add(float64(n))
	}
}

// EventsDropped counts n events the named sink lost for reason (QueueFull, SinkFailed,
// ExportFailed). sink must be one of the service's own sink names.
func (m *Metrics) EventsDropped(sink, reason string, n int) {
	if m != nil && n > 0 {
		m.dropped.WithLabelValues(sink, reason).Add(float64(n))
	}
}
