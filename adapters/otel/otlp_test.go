package otel

import (
	"bytes"
	"context"
	"math"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/test/harness"
)

// everyAttributeType is one attribute of each type the SDK has, zero values included (a
// oneof member that holds its zero value must still be sent).
var everyAttributeType = []attribute.KeyValue{
	attribute.Bool("bool", true), attribute.Bool("bool.false", false),
	attribute.Int64("int", -7), attribute.Int64("int.zero", 0), attribute.Int64("int.max", math.MaxInt64),
	attribute.Float64("float", 2.5), attribute.Float64("float.zero", 0),
	attribute.String("string", "é\x00"), attribute.String("string.empty", ""),
	attribute.ByteSlice("bytes", []byte{0, 1, 255}), attribute.ByteSlice("bytes.empty", nil),
	attribute.BoolSlice("bools", []bool{true, false}), attribute.Int64Slice("ints", []int64{1, -1, 0}),
	attribute.Float64Slice("floats", []float64{0.5, 0}), attribute.StringSlice("strings", []string{"a", ""}),
	attribute.StringSlice("strings.empty", nil),
	attribute.Slice("slice", attribute.StringValue("x"), attribute.Int64Value(3), attribute.SliceValue(attribute.BoolValue(true))),
	attribute.Map("map", attribute.String("k", "v"), attribute.Map("inner", attribute.Int64("n", 1))),
	{Key: "empty"},
}

// sinkSpans are the spans the Sink makes of one event of each kind, a refusal among them.
func sinkSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	sink, spans := recorded(t)
	for _, e := range []trace.Event{
		trace.SessionStart{}, trace.SessionEnd{},
		trace.ResourceList{Root: "out/", EntryCount: 3, TotalBytes: 4096, Generation: 1, Containment: "advisory"},
		trace.ResourceRead{Path: "a.txt", Bytes: 1024, SHA256: "868db1c5", Generation: 2, Containment: "sealed"},
		trace.ResourceRead{Path: "b.txt", Containment: "scoped", Err: refusal.New(refusal.NotFound)},
		trace.PeerHandleMint{HandleID: "3f2a91c40b7e5d68", Path: "a.txt", Audience: "b@h:1"},
		trace.PeerHandleRedeem{HandleID: "3f2a91c40b7e5d68", Audience: "b@h:1", AudienceSent: true},
		trace.PeerFileFetch{Peer: "127.0.0.1:9", HandleID: "3f2a91c40b7e5d68", StoredPath: "peer-in/x", Bytes: 1, SHA256: "ab"},
	} {
		sink.Record(e)
	}
	return spans.Ended()
}

// detailedSpans are spans with everything a span can carry: every attribute type, events and
// links with attributes, a remote parent with a trace state, both statuses, dropped
// attributes, events and links, a resource with a schema, and a scope with a version,
// attributes and a schema.
func detailedSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "resplane"), attribute.Int64("shard", 3))
	limits := sdktrace.NewSpanLimits()
	limits.AttributeCountLimit = len(everyAttributeType)
	limits.EventCountLimit, limits.LinkCountLimit = 2, 1
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans), sdktrace.WithResource(res), sdktrace.WithRawSpanLimits(limits))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	tracer := provider.Tracer("detail", oteltrace.WithInstrumentationVersion("1.2.3"),
		oteltrace.WithSchemaURL("https://example.com/scope"), oteltrace.WithInstrumentationAttributes(attribute.String("scope.k", "v")))

	state, err := oteltrace.ParseTraceState("vendor=value")
	if err != nil {
		t.Fatal(err)
	}
	parent := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: oteltrace.TraceID{1, 2, 3}, SpanID: oteltrace.SpanID{4, 5, 6}, TraceFlags: oteltrace.FlagsSampled,
		TraceState: state, Remote: true,
	})
	linked := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: oteltrace.TraceID{9}, SpanID: oteltrace.SpanID{8}, TraceState: state})
	ctx := oteltrace.ContextWithRemoteSpanContext(context.Background(), parent)
	_, span := tracer.Start(ctx, "detailed", oteltrace.WithSpanKind(oteltrace.SpanKindProducer),
		oteltrace.WithLinks(oteltrace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("why", "because")}},
			oteltrace.Link{SpanContext: linked}))
	span.SetAttributes(everyAttributeType...)
	span.SetAttributes(attribute.String("one.too.many", "dropped"))
	for _, name := range []string{"first", "second", "third"} {
		span.AddEvent(name, oteltrace.WithAttributes(attribute.Int64("n", 1)))
	}
	span.SetStatus(codes.Ok, "")
	span.End()

	_, failed := tracer.Start(context.Background(), "failed", oteltrace.WithSpanKind(oteltrace.SpanKindConsumer))
	failed.SetStatus(codes.Error, "it broke")
	failed.End()
	_, plain := tracer.Start(context.Background(), "")
	plain.End()
	return spans.Ended()
}

// exported is the request an exporter posts for spans, decoded.
func exported(t *testing.T, makeExporter func(ctx context.Context, endpoint string) sdktrace.SpanExporter, spans []sdktrace.ReadOnlySpan) *coltrace.ExportTraceServiceRequest {
	t.Helper()
	receiver := harness.NewOTLPReceiver(t)
	exporter := makeExporter(context.Background(), receiver.URL()+"/v1/traces")
	if err := exporter.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	if err := exporter.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	bodies := receiver.Bodies()
	if len(bodies) != 1 {
		t.Fatalf("%d export requests, want 1", len(bodies))
	}
	var request coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(bodies[0], &request); err != nil {
		t.Fatal(err)
	}
	return &request
}

func TestTheEncodingIsTheSDKs(t *testing.T) {
	sdk := func(ctx context.Context, endpoint string) sdktrace.SpanExporter {
		exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
		if err != nil {
			t.Fatal(err)
		}
		return exporter
	}
	ours := func(ctx context.Context, endpoint string) sdktrace.SpanExporter {
		exporter, err := newExporter(ctx, endpoint)
		if err != nil {
			t.Fatal(err)
		}
		return exporter
	}
	for _, tc := range []struct {
		name  string
		spans []sdktrace.ReadOnlySpan
	}{
		{"the spans the sink makes of every event", sinkSpans(t)},
		{"spans carrying everything a span can", detailedSpans(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, got := exported(t, sdk, tc.spans), exported(t, ours, tc.spans)
			if n := len(got.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()); n != len(tc.spans) {
				t.Fatalf("%d spans sent, want %d", n, len(tc.spans))
			}
			if !proto.Equal(got, want) {
				t.Fatalf("the collector decodes\n%s\nwhere the SDK's exporter sends\n%s", protojson.Format(got), protojson.Format(want))
			}
		})
	}
}

func TestABatchWithNoSpanSendsNothing(t *testing.T) {
	receiver := harness.NewOTLPReceiver(t)
	exporter, err := newExporter(context.Background(), receiver.URL()+"/v1/traces")
	if err != nil {
		t.Fatal(err)
	}
	for _, spans := range [][]sdktrace.ReadOnlySpan{nil, {nil}} {
		if err := exporter.ExportSpans(context.Background(), spans); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(receiver.Bodies()); n != 0 {
		t.Fatalf("%d export requests for no span, want none", n)
	}
}

func TestTheStandardExporterVariablesShapeTheRequests(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=agents,authorization=Bearer%20collector-key")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	receiver := harness.NewOTLPReceiver(t)
	sink, failed := exporting(t, receiver)
	sink.Record(trace.ResourceRead{Path: "a.txt", Bytes: 1})
	shutdown(t, sink)
	if spans := receiver.Spans(); len(spans) != 1 || spans[0].Name != "resource_read" || failed.Load() != 0 {
		t.Fatalf("received %+v (%d failed), want the one resource_read span", spans, failed.Load())
	}
	head, body := receiver.Headers()[0], receiver.Bodies()[0]
	if head.Get("X-Team") != "agents" || head.Get("Authorization") != "Bearer collector-key" {
		t.Errorf("the request's headers are %v, want those of OTEL_EXPORTER_OTLP_TRACES_HEADERS", head)
	}
	if head.Get("Content-Encoding") != "gzip" || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		t.Errorf("the body is not gzip-compressed (Content-Encoding %q), as OTEL_EXPORTER_OTLP_COMPRESSION asks", head.Get("Content-Encoding"))
	}
}
