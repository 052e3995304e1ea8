package resplane

import (
	"context"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/fanout"
	"github.com/resplane/resplane/adapters/httpapi/limits"
	"github.com/resplane/resplane/adapters/jsonl"
	"github.com/resplane/resplane/adapters/otel"
	"github.com/resplane/resplane/adapters/prometheus"
	"github.com/resplane/resplane/domain/hostpolicy"
)

// The providers of the observability adapters (docs/operator-guide.md, "Metrics and
// tracing"): the metrics, the span exporter, the fan-out that feeds them from the trace, and
// the metrics listener. Each adapter is built only when its setting is given; otherwise its
// provider returns nil, which the fan-out and the metrics hooks take as "off".

// The names of the trace's other sinks, in logs and in the sink label of
// resplane_trace_sink_dropped_events_total.
const (
	sinkPrometheus = "prometheus"
	sinkOTel       = "otel"
)

const (
	// sinkDrainWait bounds how long shutdown waits for the other sinks to take what is queued:
	// for the spans, to make them and export them.
	sinkDrainWait = 5 * time.Second
	// spanFlushWait bounds how long shutdown then waits for the span exporter to send what the
	// drain left and to stop.
	spanFlushWait = 2 * time.Second
)

// provideMetrics builds the metrics when --metrics-listen is given, and watches the three
// budgets reads draw on ("memory", "spool" and "send_buffer"); it returns nil otherwise.
func provideMetrics(o Observability, b budgets) *prometheus.Metrics {
	if o.MetricsListener == nil {
		return nil
	}
	m := prometheus.New()
	m.WatchBudget("memory", b.memory)
	m.WatchBudget("spool", b.spool.Budget)
	m.WatchBudget("send_buffer", b.buffered)
	return m
}

// provideSpans builds the span exporter when an OTLP endpoint is configured; it returns nil
// otherwise. The cleanup, which runs after the fan-out's has drained the queue into it,
// exports what is left, for at most spanFlushWait.
func provideSpans(o Observability, id Identity, clk *clock.System, metrics *prometheus.Metrics, logger zerolog.Logger) (*otel.Sink, func(), error) {
	if o.OTelEndpoint == "" {
		return nil, func() {}, nil
	}
	sink, err := otel.New(context.Background(), otel.Config{
		Endpoint: o.OTelEndpoint, SessionID: id.SessionID, Clock: clk,
		OnExportFailure: func(spans int) { metrics.EventsDropped(sinkOTel, prometheus.ExportFailed, spans) },
		OnError:         func(err error) { logger.Warn().Err(err).Msg("the OpenTelemetry exporter reported an error") },
	})
	if err != nil {
		return nil, nil, err
	}
	logger.Info().Str("endpoint", o.OTelEndpoint).Msg("exporting trace events as OpenTelemetry spans")
	return sink, func() {
		ctx, cancel := context.WithTimeout(context.Background(), spanFlushWait)
		defer cancel()
		if err := sink.Shutdown(ctx); err != nil {
			logger.Warn().Err(err).Msg("the last spans could not be exported before shutdown")
		}
	}, nil
}

// provideTraceFanout puts trace.jsonl first and hands every event on to the metrics (inline)
// and the span exporter (through a queue), whichever are on. The cleanup waits up to
// sinkDrainWait for them to catch up and logs how many events they lost.
func provideTraceFanout(file *jsonl.File, id Identity, clk *clock.System, metrics *prometheus.Metrics, spans *otel.Sink,
	logger zerolog.Logger) (*fanout.Sink, func()) {
	var extras []fanout.Extra
	if metrics != nil {
		// Counters in memory, updated without waiting on a scrape: inline, no queue.
		extras = append(extras, fanout.Extra{Name: sinkPrometheus, Sink: metrics, Inline: true})
		metrics.ExportSink(sinkPrometheus, prometheus.SinkFailed)
	}
	if spans != nil {
		// The spans' one queue, shaped by the OTEL_BSP_* variables: its goroutine is woken
		// once per batch, and the end of a batch (fanout.Flusher) is an export.
		b := spans.Batching()
		extras = append(extras, fanout.Extra{Name: sinkOTel, Sink: spans, QueueSize: b.QueueSize, Batch: b.BatchSize, Delay: b.Delay})
		metrics.ExportSink(sinkOTel, prometheus.QueueFull, prometheus.SinkFailed, prometheus.ExportFailed)
	}
	var dropped atomic.Int64
	sink := fanout.New(file, fanout.Config{
		Clock: clk, Joined: id.TraceParent != "",
		OnDrop: func(name string) {
			dropped.Add(1)
			metrics.EventsDropped(name, prometheus.QueueFull, 1)
		},
		OnFailure: func(name string, err error) {
			metrics.EventsDropped(name, prometheus.SinkFailed, 1)
			logger.Error().Err(err).Str("sink", name).Msg("a trace sink failed on an event")
		},
	}, extras...)
	return sink, func() {
		ctx, cancel := context.WithTimeout(context.Background(), sinkDrainWait)
		defer cancel()
		if behind := sink.Close(ctx); len(behind) > 0 {
			logger.Warn().Strs("sinks", behind).Msg("trace sinks had not caught up at shutdown; their queued events are lost")
		}
		if n := dropped.Load(); n > 0 {
			logger.Warn().Int64("events", n).Msg("trace events were dropped for the metrics or span sinks because their queue was full")
		}
	}
}

// readiness is what /readyz reports: true from the ready line until shutdown begins.
type readiness struct{ atomic.Bool }

func newReadiness() *readiness { return &readiness{} }

// metricsServer serves the metrics listener; both fields are nil when --metrics-listen is not
// given.
type metricsServer struct {
	srv *http.Server
	ln  net.Listener
}

// provideMetricsServer builds the metrics listener's server, hardened for it
// (limits.MetricsOptions) on its own capped listener (limits.ListenMetrics), /metrics under
// the resource listener's Host rule.
func provideMetricsServer(o Observability, metrics *prometheus.Metrics, ready *readiness, hosts hostpolicy.Policy,
	logger zerolog.Logger) metricsServer {
	if metrics == nil {
		return metricsServer{}
	}
	errorLog := log.New(logger, "", 0)
	srv := &http.Server{Handler: metrics.Handler(ready.Load, hosts, errorLog), ErrorLog: errorLog}
	limits.Harden(srv, limits.MetricsOptions())
	return metricsServer{srv: srv, ln: limits.ListenMetrics(srv, o.MetricsListener)}
}
