package otel

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/domain/trace"
)

// benchRead is the event of a served 1 KiB read, as the fan-out hands it over.
var benchRead = trace.Stamped{
	Event: trace.ResourceRead{Path: "1k.bin", Bytes: 1024, SHA256: "868db1c52a946cae0278871d41b60fcdef206b933946bf8668a42ac1ea443412", Containment: "advisory"},
	At:    recordedAt,
}

// discard is an exporter that takes every span and sends nothing.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkSpan is what one span costs this process in the OpenTelemetry SDK, as the service
// makes and exports it (docs/benchmarks.md, "Observability cost"): "made" is Record alone (the
// SDK's tracer, our attributes, the span kept by the batcher) with an exporter that sends
// nothing; "exported" adds the service's exporter posting each batch over the SDK's OTLP/HTTP
// client to a collector in the process that drains it, in batches of the default size (the
// SDK's) and of four times that; "exported-by-sdk" is the SDK's own exporter (otlptracehttp.New)
// in its place, for comparison. It reports the process's CPU time per span (every goroutine's,
// the collector's included), besides the allocations.
func BenchmarkSpan(b *testing.B) {
	for _, tc := range []struct {
		name     string
		batch    int
		exporter func(*testing.B) sdktrace.SpanExporter
	}{
		{"made", DefaultBatching.BatchSize, func(*testing.B) sdktrace.SpanExporter { return discard{} }},
		{"exported/batch=512", DefaultBatching.BatchSize, benchExporter},
		{"exported/batch=2048", 4 * DefaultBatching.BatchSize, benchExporter},
		{"exported-by-sdk/batch=512", DefaultBatching.BatchSize, benchSDKExporter},
	} {
		b.Run(tc.name, func(b *testing.B) {
			exporter := tc.exporter(b)
			batching := DefaultBatching
			batching.BatchSize = tc.batch
			batcher := newBatcher(exporter, batching, func(int) {}, func(error) {})
			sink := newSink(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(batcher)), Config{SessionID: sessionID, Clock: clock.NewManual(clockNow)})
			sink.batcher, sink.batching = batcher, batching
			b.ReportAllocs()
			start := benchCPU(b)
			for i := 0; b.Loop(); i++ {
				sink.Record(benchRead)
				if (i+1)%tc.batch == 0 {
					sink.Flush()
				}
			}
			sink.Flush()
			b.ReportMetric(float64(benchCPU(b)-start)/float64(b.N), "cpu-ns/span")
			if err := sink.Shutdown(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// benchExporter is the service's exporter posting to a collector that drains each request and
// answers 200.
func benchExporter(b *testing.B) sdktrace.SpanExporter {
	exporter, err := newExporter(context.Background(), benchCollector(b))
	if err != nil {
		b.Fatal(err)
	}
	return exporter
}

// benchSDKExporter is the SDK's own OTLP/HTTP exporter posting to such a collector.
func benchSDKExporter(b *testing.B) sdktrace.SpanExporter {
	exporter, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(benchCollector(b)))
	if err != nil {
		b.Fatal(err)
	}
	return exporter
}

// benchCollector starts a collector that drains each request and answers 200, and returns
// its traces URL.
func benchCollector(b *testing.B) string {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(collector.Close)
	return collector.URL + "/v1/traces"
}

// benchCPU is the CPU time this process has used so far, all its threads together.
func benchCPU(b *testing.B) time.Duration {
	b.Helper()
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		b.Fatal(err)
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}
