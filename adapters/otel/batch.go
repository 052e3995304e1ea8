package otel

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The standard variables that shape batching.
const (
	EnvMaxQueueSize       = "OTEL_BSP_MAX_QUEUE_SIZE"
	EnvMaxExportBatchSize = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
	EnvScheduleDelay      = "OTEL_BSP_SCHEDULE_DELAY"
	EnvExportTimeout      = "OTEL_BSP_EXPORT_TIMEOUT"
)

// DefaultBatching is what BatchingFrom gives when no variable is set: the SDK's own defaults,
// those of the OpenTelemetry specification's batch span processor. Larger batches were
// measured and cost no less
// (docs/decisions/0081-metrics-and-spans-one-queue-sdk-tracer-own-encoding.md).
var DefaultBatching = Batching{
	QueueSize:     sdktrace.DefaultMaxQueueSize,
	BatchSize:     sdktrace.DefaultMaxExportBatchSize,
	Delay:         sdktrace.DefaultScheduleDelay * time.Millisecond,
	ExportTimeout: sdktrace.DefaultExportTimeout * time.Millisecond,
}

// Batching is how the events wait to become spans and how the spans are exported.
type Batching struct {
	// QueueSize is how many events may wait for the exporter (OTEL_BSP_MAX_QUEUE_SIZE).
	QueueSize int
	// BatchSize is how many spans one export request carries at most, and how many waiting
	// events end a batch early (OTEL_BSP_MAX_EXPORT_BATCH_SIZE). Never above QueueSize.
	BatchSize int
	// Delay is the longest the first event of a batch waits before the batch is exported
	// (OTEL_BSP_SCHEDULE_DELAY, milliseconds).
	Delay time.Duration
	// ExportTimeout bounds one export request, its retries included (OTEL_BSP_EXPORT_TIMEOUT,
	// milliseconds).
	ExportTimeout time.Duration
}

// BatchingFrom reads Batching from the OTEL_BSP_* variables by the SDK's rules: an unset or
// empty variable keeps DefaultBatching's value, the two durations are in milliseconds, and a
// batch size above the queue size is cut to it. A value that is not a positive integer is
// reported to onError and keeps the default.
func BatchingFrom(getenv func(string) string, onError func(error)) Batching {
	number := func(name string, def int) int {
		raw := getenv(name)
		if raw == "" {
			return def
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n <= 0 {
			onError(fmt.Errorf("otel: %s=%q is not a positive integer; using %d", name, raw, def))
			return def
		}
		return n
	}
	millis := func(name string, def time.Duration) time.Duration {
		return time.Duration(number(name, int(def/time.Millisecond))) * time.Millisecond
	}
	d := DefaultBatching
	b := Batching{
		QueueSize:     number(EnvMaxQueueSize, d.QueueSize),
		BatchSize:     number(EnvMaxExportBatchSize, d.BatchSize),
		Delay:         millis(EnvScheduleDelay, d.Delay),
		ExportTimeout: millis(EnvExportTimeout, d.ExportTimeout),
	}
	b.BatchSize = min(b.BatchSize, b.QueueSize)
	return b
}

// batcher is the tracer provider's span processor. It keeps every sampled span the tracer
// ends until ForceFlush, which the Sink's Flush calls on the fan-out's goroutine at the end of
// each batch, hands them to the exporter BatchSize at a time on that same goroutine. It is the
// SDK's batch span processor less its queue and its goroutine: the fan-out's queue already
// batches the events, and one queue with one goroutine costs each read less than two in series
// (docs/decisions/0081-metrics-and-spans-one-queue-sdk-tracer-own-encoding.md).
type batcher struct {
	exporter sdktrace.SpanExporter
	batching Batching
	// onFailure receives the number of spans an export request lost; onError its error.
	onFailure func(spans int)
	onError   func(error)

	exporting chan struct{} // holds a token while an export runs: one at a time
	// flushing is the context of the exports flush starts; Shutdown cancels it as it returns,
	// so that an export still running then (Shutdown's context ended first) gives up and
	// counts what it lost.
	flushing context.Context
	cancel   context.CancelFunc

	mu      sync.Mutex
	spans   []sdktrace.ReadOnlySpan
	stopped bool

	shutdown    sync.Once
	shutdownErr error
}

var _ sdktrace.SpanProcessor = (*batcher)(nil)

func newBatcher(exporter sdktrace.SpanExporter, b Batching, onFailure func(int), onError func(error)) *batcher {
	flushing, cancel := context.WithCancel(context.Background())
	return &batcher{
		exporter: exporter, batching: b, onFailure: onFailure, onError: onError,
		exporting: make(chan struct{}, 1), flushing: flushing, cancel: cancel,
	}
}

// OnStart implements sdktrace.SpanProcessor: nothing to do until the span ends.
func (*batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd keeps span for the next export, unless the sampler left it out of the export
// (recorded but not sampled) or the processor is shut down.
func (p *batcher) OnEnd(span sdktrace.ReadOnlySpan) {
	if !span.SpanContext().IsSampled() {
		return
	}
	p.mu.Lock()
	if !p.stopped {
		p.spans = append(p.spans, span)
	}
	p.mu.Unlock()
}

// ForceFlush exports every span kept so far, BatchSize per request, each request within
// ExportTimeout, and all of them within ctx. A request that fails is reported with its span
// count; spans not yet tried when ctx ends are reported the same way, and ctx's error returned.
func (p *batcher) ForceFlush(ctx context.Context) error {
	select {
	case p.exporting <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.exporting }()
	p.mu.Lock()
	spans := p.spans
	p.spans = nil
	p.mu.Unlock()
	for len(spans) > 0 {
		if err := ctx.Err(); err != nil {
			p.onFailure(len(spans))
			return err
		}
		n := min(len(spans), p.batching.BatchSize)
		p.export(ctx, spans[:n])
		clear(spans[:n]) // let the collector have them
		spans = spans[n:]
	}
	return nil
}

// export sends one request's spans, reporting a failure.
func (p *batcher) export(ctx context.Context, spans []sdktrace.ReadOnlySpan) {
	ctx, cancel := context.WithTimeout(ctx, p.batching.ExportTimeout)
	defer cancel()
	if err := p.exporter.ExportSpans(ctx, spans); err != nil {
		p.onFailure(len(spans))
		p.onError(err)
	}
}

// flush exports every span kept so far, for as long as it takes, unless Shutdown gives up.
func (p *batcher) flush() { _ = p.ForceFlush(p.flushing) }

// Shutdown exports what is kept within ctx, keeps nothing more, and shuts the exporter down;
// spans it could not send are reported. A flush still exporting when it returns (ctx ended
// first) is cancelled. Later calls return the first one's error.
func (p *batcher) Shutdown(ctx context.Context) error {
	p.shutdown.Do(func() {
		defer p.cancel()
		err := p.ForceFlush(ctx)
		p.mu.Lock()
		p.stopped = true
		left := len(p.spans) // ForceFlush could not start before ctx ended
		p.spans = nil
		p.mu.Unlock()
		if left > 0 {
			p.onFailure(left)
		}
		p.shutdownErr = errors.Join(err, p.exporter.Shutdown(ctx))
	})
	return p.shutdownErr
}
