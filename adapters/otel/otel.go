// Package otel exports every trace event as an OpenTelemetry span over OTLP/HTTP
// (docs/operator-guide.md, "Metrics and tracing"), with the OpenTelemetry Go SDK.
//
// Sink is a ports.TraceSink: the fan-out (adapters/fanout) hands it every event, and it makes
// one span of it with the SDK's tracer — named after the event type, with the event's fields as
// murmur.* attributes. The spans wait in the tracer provider's span processor until the fan-out
// ends a batch (Flush), which encodes them as OTLP protobuf (the exporter, otlp.go) and has the
// SDK's OTLP/HTTP client send them, in requests of up to OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans.
// The events queue in the fan-out (Batching says how); there is no second queue and no
// goroutine of the Sink's own.
//
// Guarantees:
//
//   - One span per event: its name is the event type, its start and end are the moment the
//     event was recorded (trace.Stamped), its attributes are murmur.session_id and, for every
//     field of the event that is not null, murmur.<field>. A span whose outcome is not ok has
//     the status Error, described by the outcome.
//   - No token reaches a span: every string of an event's Fields has passed through the handle
//     redactor already (trace.Text), the session id passes through it here, and the events
//     carry handle ids, never tokens. Strings are made valid UTF-8 (each invalid byte becomes
//     U+FFFD), so one hostile path cannot make a batch unencodable.
//   - Bounded: Batching, from the standard OTEL_BSP_* variables, is what the fan-out's queue
//     for this sink must be built with: at most OTEL_BSP_MAX_QUEUE_SIZE events wait (2048 by
//     default) — beyond that the fan-out drops and counts them — and a batch is flushed when
//     OTEL_BSP_MAX_EXPORT_BATCH_SIZE events wait (512) or OTEL_BSP_SCHEDULE_DELAY after the
//     first of them (5 s). Each export request carries at most OTEL_BSP_MAX_EXPORT_BATCH_SIZE
//     spans and is bounded by OTEL_BSP_EXPORT_TIMEOUT (30 s). Spans the exporter fails to
//     deliver, and spans still unsent when Shutdown gives up, are reported to
//     Config.OnExportFailure.
//   - The standard OTEL_* variables the SDK reads are honoured: OTEL_SERVICE_NAME and
//     OTEL_RESOURCE_ATTRIBUTES (the resource's service.name is resplane otherwise),
//     OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE and their TRACES_
//     forms, OTEL_BSP_* (read by New, as Batching), OTEL_TRACES_SAMPLER. The endpoint is
//     resolved by Endpoint. A malformed OTEL_RESOURCE_ATTRIBUTES entry, or an OTEL_BSP_* value
//     that is not a positive integer, is reported to Config.OnError and left out.
//   - Record never waits for the exporter; Flush does, on its caller's goroutine — the
//     fan-out's queue's, never a request's.
//   - Shutdown exports what Record made and Flush has not sent, within its context's deadline.
//
// Non-guarantees:
//
//   - A span is a point in time: the event does not carry the request's start, whose
//     duration is the metrics' histogram (adapters/prometheus).
//   - Spans are not linked to one another, nor to the trace.jsonl line's event_id; each is the
//     root of a trace of its own, found by its murmur.session_id and fields.
//   - Only OTLP over HTTP with protobuf is spoken; OTEL_EXPORTER_OTLP_PROTOCOL is not read.
//   - New installs the SDK's process-wide error handler and logger (otel.SetErrorHandler,
//     otel.SetLogger) so that the SDK's own errors reach Config.OnError rather than stderr.
package otel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"unicode/utf8"

	"github.com/go-logr/logr/funcr"
	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/ports"
)

// ServiceName is the resource's service.name unless OTEL_SERVICE_NAME names another.
const ServiceName = "resplane"

// tracerName names the tracer that makes the spans.
const tracerName = "github.com/resplane/resplane/adapters/otel"

// AttributePrefix is put before every event field's name to make its attribute key.
const AttributePrefix = "murmur."

// Config is what a Sink needs.
type Config struct {
	// Endpoint is the full URL spans are posted to, as Endpoint resolves it, such as
	// http://127.0.0.1:4318/v1/traces. Required.
	Endpoint string
	// SessionID is the murmur.session_id of every span.
	SessionID string
	// Clock reads the moment of an event handed over without one (not a trace.Stamped).
	Clock ports.Clock
	// OnExportFailure receives the number of spans of each export request the exporter could
	// not deliver, and of the spans Shutdown gave up on. nil ignores it.
	OnExportFailure func(spans int)
	// OnError receives the SDK's own errors: a failed export, a bad OTEL_* value. nil discards
	// them.
	OnError func(error)
}

// Sink turns trace events into spans. It is safe for concurrent use.
type Sink struct {
	provider  *sdktrace.TracerProvider
	tracer    oteltrace.Tracer
	clock     ports.Clock
	sessionID attribute.KeyValue
	scratch   sync.Pool // of *scratch
	// batcher is the provider's span processor, and batching its settings; nil and the zero
	// value for a sink built by newSink over a provider of the caller's.
	batcher  *batcher
	batching Batching
}

// scratch is what one Record builds and the tracer does not keep: the span's attributes (the
// span copies them) and the options of its start and end.
type scratch struct {
	attrs []attribute.KeyValue
	start [2]oteltrace.SpanStartOption
	end   [1]oteltrace.SpanEndOption
}

var _ ports.TraceSink = (*Sink)(nil)

// New builds the exporter, the span processor and the tracer provider for cfg, with the
// Batching the OTEL_BSP_* variables give. It opens no connection: the first export does.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("otel: no endpoint")
	}
	if cfg.Clock == nil {
		return nil, errors.New("otel: no clock configured")
	}
	onError := cfg.OnError
	if onError == nil {
		onError = func(error) {}
	}
	onExportFailure := cfg.OnExportFailure
	if onExportFailure == nil {
		onExportFailure = func(int) {}
	}
	otelapi.SetErrorHandler(otelapi.ErrorHandlerFunc(onError))
	otelapi.SetLogger(funcr.New(func(prefix, args string) { onError(fmt.Errorf("%s%s", prefix, args)) }, funcr.Options{}))

	exporter, err := newExporter(ctx, cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("otel: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(ServiceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, which win
		resource.WithTelemetrySDK(),
	)
	switch {
	case errors.Is(err, resource.ErrPartialResource):
		onError(fmt.Errorf("otel: the resource: %w", err)) // a malformed OTEL_RESOURCE_ATTRIBUTES entry is left out
	case err != nil:
		return nil, fmt.Errorf("otel: the resource: %w", err)
	}
	batching := BatchingFrom(os.Getenv, onError)
	batcher := newBatcher(exporter, batching, onExportFailure, onError)
	sink := newSink(sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(batcher)), cfg)
	sink.batcher, sink.batching = batcher, batching
	return sink, nil
}

// newSink makes spans on provider; the tests hand it one with an in-memory span recorder.
func newSink(provider *sdktrace.TracerProvider, cfg Config) *Sink {
	return &Sink{
		provider:  provider,
		tracer:    provider.Tracer(tracerName),
		clock:     cfg.Clock,
		sessionID: attribute.String(AttributePrefix+"session_id", handle.Redact(valid(cfg.SessionID))),
		scratch:   sync.Pool{New: func() any { return new(scratch) }},
	}
}

// Batching is how the fan-out must queue this sink's events (fanout.Extra's QueueSize, Batch
// and Delay) and how the sink exports them.
func (s *Sink) Batching() Batching { return s.batching }

// spanKinds says which events answer a request (server) and which make one (client), as the
// start option of that kind, made once; the other events are internal.
var spanKinds = map[string]oteltrace.SpanStartOption{
	trace.ResourceList{}.Type():     oteltrace.WithSpanKind(oteltrace.SpanKindServer),
	trace.ResourceRead{}.Type():     oteltrace.WithSpanKind(oteltrace.SpanKindServer),
	trace.PeerHandleRedeem{}.Type(): oteltrace.WithSpanKind(oteltrace.SpanKindServer),
	trace.PeerFileFetch{}.Type():    oteltrace.WithSpanKind(oteltrace.SpanKindClient),
}

var internalKind = oteltrace.WithSpanKind(oteltrace.SpanKindInternal)

// Record implements ports.TraceSink: one span for e, ended at once and kept for the next
// Flush. The span is started before its attributes are built, so a span the sampler
// (OTEL_TRACES_SAMPLER) leaves out costs next to nothing.
func (s *Sink) Record(e trace.Event) {
	at := trace.RecordedAt(e, s.clock.Now)
	kind, ok := spanKinds[e.Type()]
	if !ok {
		kind = internalKind
	}
	sc := s.scratch.Get().(*scratch)
	defer s.scratch.Put(sc)
	moment := oteltrace.WithTimestamp(at) // one option for both ends: one allocation, not two
	sc.start = [2]oteltrace.SpanStartOption{moment, kind}
	sc.end = [1]oteltrace.SpanEndOption{moment}
	_, span := s.tracer.Start(context.Background(), e.Type(), sc.start[:]...)
	if !span.IsRecording() {
		return
	}
	attrs := append(sc.attrs[:0], s.sessionID)
	failed := ""
	for _, f := range e.Fields() {
		if kv, ok := attributeOf(f); ok {
			attrs = append(attrs, kv)
		}
		if outcome, ok := f.Value.(string); ok && f.Key == "outcome" && outcome != trace.OutcomeOK {
			failed = outcome
		}
	}
	span.SetAttributes(attrs...) // copied by the span
	clear(attrs)
	sc.attrs = attrs
	if failed != "" {
		span.SetStatus(codes.Error, valid(failed))
	}
	span.End(sc.end[:]...)
}

// Flush implements fanout.Flusher: it exports the spans Record made since the last Flush, on
// the caller's goroutine, BatchSize per request.
func (s *Sink) Flush() {
	if s.batcher != nil {
		s.batcher.flush()
	}
}

// Shutdown exports the spans not yet sent and stops the exporter, giving up when ctx is done;
// the spans it gave up on are reported to Config.OnExportFailure. No span is made after it.
func (s *Sink) Shutdown(ctx context.Context) error {
	err := s.provider.Shutdown(ctx) // which shuts the batcher down too, unless ctx is already done
	if s.batcher == nil {
		return err
	}
	return s.batcher.Shutdown(ctx) // its own error, whether the provider got to it or not
}

// attributeKeys holds the attribute key of every field the events have, made once.
var attributeKeys = func() map[string]attribute.Key {
	keys := map[string]attribute.Key{}
	for _, e := range []trace.Event{
		trace.SessionStart{}, trace.SessionEnd{}, trace.ResourceList{}, trace.ResourceRead{},
		trace.PeerHandleMint{}, trace.PeerHandleRedeem{}, trace.PeerFileFetch{},
	} {
		for _, f := range e.Fields() {
			keys[f.Key] = attribute.Key(AttributePrefix + f.Key)
		}
	}
	return keys
}()

// attributeOf is field f as an attribute: its key under AttributePrefix, strings made valid; a
// null field has no attribute.
func attributeOf(f trace.Field) (attribute.KeyValue, bool) {
	key, ok := attributeKeys[f.Key]
	if !ok {
		key = attribute.Key(AttributePrefix + f.Key)
	}
	switch v := f.Value.(type) {
	case string:
		return key.String(valid(v)), true
	case int64:
		return key.Int64(v), true
	case uint64:
		if v > math.MaxInt64 {
			return key.String(fmt.Sprint(v)), true
		}
		return key.Int64(int64(v)), true
	case bool:
		return key.Bool(v), true
	case []string:
		valids := make([]string, len(v))
		for i, s := range v {
			valids[i] = valid(s)
		}
		return key.StringSlice(valids), true
	default: // nil: the field is null
		return attribute.KeyValue{}, false
	}
}

// valid makes s valid UTF-8 the way trace.jsonl does (each invalid byte becomes U+FFFD). An
// event's strings need nothing more: its Fields has redacted and capped them already
// (trace.Text).
func valid(s string) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s))
	}
	return s
}
