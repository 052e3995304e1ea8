package otel

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
)

// exporter is the span exporter: it encodes each batch of spans as OTLP protobuf itself and
// hands the bytes to the SDK's OTLP/HTTP client (otlptracehttp.NewClient), which sends them.
//
// Guarantees:
//
//   - What a collector decodes is what the SDK's own exporter (otlptrace.New over the same
//     client) sends for the same spans: every field of a span, its events and links, and
//     every attribute type, with the SDK's choices where OTLP leaves one open (a span's
//     status is always present; a link carries no trace state). TestTheEncodingIsTheSDKs
//     compares the two on every kind of span.
//   - Everything about sending stays the SDK's: the endpoint, the OTEL_EXPORTER_OTLP_*
//     headers, timeout, compression and certificates, retries with backoff, and the
//     collector's partial-success answers.
//   - A batch costs one buffer, reused from batch to batch, and no object per span or
//     attribute (docs/decisions/0081-metrics-and-spans-one-queue-sdk-tracer-own-encoding.md).
//
// Non-guarantees:
//
//   - The bytes differ from the SDK's where protobuf lets them (field order, one ResourceSpans
//     per run of spans sharing a resource and scope rather than one per resource); a decoder
//     sees the same message.
//   - The SDK's experimental self-observability of the client (OTEL_GO_X_OBSERVABILITY)
//     counts zero spans per request: the client counts the spans of the objects it is
//     handed, and these carry their spans as encoded bytes.
type exporter struct {
	client otlptrace.Client

	mu  sync.Mutex // one batch encodes and uploads at a time: they share buf
	buf []byte
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

// newExporter starts the SDK's OTLP/HTTP client for endpoint, the full URL spans are posted to,
// and returns the exporter over it.
func newExporter(ctx context.Context, endpoint string) (*exporter, error) {
	client := otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(endpoint))
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	return &exporter{client: client}, nil
}

// ExportSpans implements sdktrace.SpanExporter: one request for spans, sent by the client
// with its retries. A batch with no span sends nothing.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.buf = e.buf[:0]
	var ends []int // where each run of spans of one origin ends in buf
	for i := 0; i < len(spans); {
		if spans[i] == nil {
			i++
			continue
		}
		n := sameOrigin(spans[i:])
		e.buf = appendResourceSpans(e.buf, spans[i:i+n])
		ends = append(ends, len(e.buf))
		i += n
	}
	if len(ends) == 0 {
		return nil
	}
	groups := make([]*tracepb.ResourceSpans, len(ends))
	start := 0
	for k, end := range ends {
		// The client marshals what it is handed, unknown fields included, byte for byte: the
		// run's encoded fields ride there, and the message it sends is an ordinary one.
		groups[k] = new(tracepb.ResourceSpans)
		groups[k].ProtoReflect().SetUnknown(e.buf[start:end:end])
		start = end
	}
	if err := e.client.UploadTraces(ctx, groups); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// Shutdown implements sdktrace.SpanExporter: it stops the client, interrupting a request in
// flight.
func (e *exporter) Shutdown(ctx context.Context) error { return e.client.Stop(ctx) }

// sameOrigin is how many of spans, from the first, share its resource and instrumentation
// scope.
func sameOrigin(spans []sdktrace.ReadOnlySpan) int {
	res, scope := spans[0].Resource(), spans[0].InstrumentationScope()
	n := 1
	for n < len(spans) && spans[n] != nil && spans[n].Resource().Equal(res) && spans[n].InstrumentationScope() == scope {
		n++
	}
	return n
}

// The field numbers of the OTLP messages this file writes (opentelemetry/proto/*/v1).
const (
	resourceSpansResource, resourceSpansScopeSpans, resourceSpansSchemaURL = 1, 2, 3
	resourceAttributes                                                     = 1
	scopeSpansScope, scopeSpansSpans, scopeSpansSchemaURL                  = 1, 2, 3
	scopeName, scopeVersion, scopeAttributes                               = 1, 2, 3

	spanTraceID, spanSpanID, spanTraceState, spanParentSpanID  = 1, 2, 3, 4
	spanName, spanKind, spanStart, spanEnd                     = 5, 6, 7, 8
	spanAttributes, spanDroppedAttributes                      = 9, 10
	spanEvents, spanDroppedEvents, spanLinks, spanDroppedLinks = 11, 12, 13, 14
	spanStatus, spanFlags                                      = 15, 16

	statusMessage, statusCode = 2, 3

	eventTime, eventName, eventAttributes, eventDroppedAttributes = 1, 2, 3, 4

	linkTraceID, linkSpanID, linkAttributes, linkDroppedAttributes, linkFlags = 1, 2, 4, 5, 6

	keyValueKey, keyValueValue = 1, 2
	listValues                 = 1 // of ArrayValue and KeyValueList

	anyString, anyBool, anyInt, anyDouble, anyArray, anyKVList, anyBytes = 1, 2, 3, 4, 5, 6, 7
)

// appendResourceSpans appends the fields of one ResourceSpans holding spans, which share a
// resource and an instrumentation scope.
func appendResourceSpans(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	res, scope := spans[0].Resource(), spans[0].InstrumentationScope()
	// A tracer provider always has a resource (the SDK's default when none is given).
	b, resourceMark := openMessage(b, resourceSpansResource)
	for iter := res.Iter(); iter.Next(); {
		b = appendKeyValue(b, resourceAttributes, iter.Attribute())
	}
	b = closeMessage(b, resourceMark)
	b, scopeMark := openMessage(b, resourceSpansScopeSpans)
	if scope != (instrumentation.Scope{}) {
		mark := 0
		b, mark = openMessage(b, scopeSpansScope)
		b = appendString(b, scopeName, scope.Name)
		b = appendString(b, scopeVersion, scope.Version)
		for iter := scope.Attributes.Iter(); iter.Next(); {
			b = appendKeyValue(b, scopeAttributes, iter.Attribute())
		}
		b = closeMessage(b, mark)
	}
	for _, s := range spans {
		mark := 0
		b, mark = openMessage(b, scopeSpansSpans)
		b = closeMessage(appendSpan(b, s), mark)
	}
	b = appendString(b, scopeSpansSchemaURL, scope.SchemaURL)
	b = closeMessage(b, scopeMark)
	return appendString(b, resourceSpansSchemaURL, res.SchemaURL())
}

// appendSpan appends the fields of one Span.
func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	traceID, spanID := sc.TraceID(), sc.SpanID()
	b = appendID(b, spanTraceID, traceID[:])
	b = appendID(b, spanSpanID, spanID[:])
	b = appendString(b, spanTraceState, sc.TraceState().String())
	parent := s.Parent()
	if id := parent.SpanID(); id.IsValid() {
		b = appendID(b, spanParentSpanID, id[:])
	}
	b = appendString(b, spanName, s.Name())
	b = appendUint(b, spanKind, uint64(kindOf(s.SpanKind())))
	b = appendFixed64(b, spanStart, unixNanos(s.StartTime().UnixNano()))
	b = appendFixed64(b, spanEnd, unixNanos(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		b = appendKeyValue(b, spanAttributes, kv)
	}
	b = appendUint(b, spanDroppedAttributes, count(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		mark := 0
		b, mark = openMessage(b, spanEvents)
		b = appendFixed64(b, eventTime, unixNanos(ev.Time.UnixNano()))
		b = appendString(b, eventName, ev.Name)
		for _, kv := range ev.Attributes {
			b = appendKeyValue(b, eventAttributes, kv)
		}
		b = appendUint(b, eventDroppedAttributes, count(ev.DroppedAttributeCount))
		b = closeMessage(b, mark)
	}
	b = appendUint(b, spanDroppedEvents, count(s.DroppedEvents()))
	for _, link := range s.Links() {
		mark := 0
		b, mark = openMessage(b, spanLinks)
		linkTrace, linkSpan := link.SpanContext.TraceID(), link.SpanContext.SpanID()
		b = appendID(b, linkTraceID, linkTrace[:])
		b = appendID(b, linkSpanID, linkSpan[:])
		for _, kv := range link.Attributes {
			b = appendKeyValue(b, linkAttributes, kv)
		}
		b = appendUint(b, linkDroppedAttributes, count(link.DroppedAttributeCount))
		b = appendFixed32(b, linkFlags, flagsOf(link.SpanContext.TraceFlags(), link.SpanContext))
		b = closeMessage(b, mark)
	}
	b = appendUint(b, spanDroppedLinks, count(s.DroppedLinks()))
	status := s.Status()
	mark := 0
	b, mark = openMessage(b, spanStatus) // present even when unset, as the SDK sends it
	b = appendString(b, statusMessage, status.Description)
	b = appendUint(b, statusCode, uint64(statusCodeOf(status.Code)))
	b = closeMessage(b, mark)
	return appendFixed32(b, spanFlags, flagsOf(sc.TraceFlags(), parent))
}

// appendKeyValue appends kv as a KeyValue message in field num.
func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b, mark := openMessage(b, num)
	b = appendString(b, keyValueKey, string(kv.Key))
	b, valueMark := openMessage(b, keyValueValue)
	b = appendValue(b, kv.Value)
	return closeMessage(closeMessage(b, valueMark), mark)
}

// appendValue appends the fields of v as an AnyValue. A oneof's member is written even when
// it holds its type's zero value: that is how a decoder knows which member is set.
func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return appendBool(b, v.AsBool())
	case attribute.INT64:
		return appendInt(b, v.AsInt64())
	case attribute.FLOAT64:
		return appendDouble(b, v.AsFloat64())
	case attribute.STRING:
		return appendStringValue(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, anyBytes, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), appendBool)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), appendInt)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), appendDouble)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), appendStringValue)
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), appendValue)
	case attribute.MAP:
		b, mark := openMessage(b, anyKVList)
		for _, kv := range v.AsMap() {
			b = appendKeyValue(b, listValues, kv)
		}
		return closeMessage(b, mark)
	case attribute.EMPTY:
		return b
	default:
		return appendStringValue(b, "INVALID")
	}
}

// appendArray appends values as an ArrayValue, each an AnyValue whose fields appendOne writes.
func appendArray[T any](b []byte, values []T, appendOne func([]byte, T) []byte) []byte {
	b, mark := openMessage(b, anyArray)
	for _, v := range values {
		valueMark := 0
		b, valueMark = openMessage(b, listValues)
		b = closeMessage(appendOne(b, v), valueMark)
	}
	return closeMessage(b, mark)
}

func appendBool(b []byte, v bool) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, anyBool, protowire.VarintType), protowire.EncodeBool(v))
}

func appendInt(b []byte, v int64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, anyInt, protowire.VarintType), uint64(v))
}

func appendDouble(b []byte, v float64) []byte {
	return protowire.AppendFixed64(protowire.AppendTag(b, anyDouble, protowire.Fixed64Type), math.Float64bits(v))
}

func appendStringValue(b []byte, v string) []byte {
	return protowire.AppendString(protowire.AppendTag(b, anyString, protowire.BytesType), v)
}

// openMessage appends the tag of a message field num and one byte for its length, and returns
// where its body starts; the body is appended after it and closeMessage sets the length.
func openMessage(b []byte, num protowire.Number) ([]byte, int) {
	b = append(protowire.AppendTag(b, num, protowire.BytesType), 0)
	return b, len(b)
}

// closeMessage sets the length of the body that starts at mark. Most bodies (an attribute, a
// status) are shorter than 128 bytes, whose length is the one byte openMessage kept; a longer
// body is moved up by the bytes its length needs beyond that one, once per message around it.
func closeMessage(b []byte, mark int) []byte {
	body := len(b) - mark
	if body < 0x80 {
		b[mark-1] = byte(body)
		return b
	}
	var prefix [binary.MaxVarintLen64]byte
	length := protowire.AppendVarint(prefix[:0], uint64(body))
	b = append(b, length[1:]...)
	copy(b[mark-1+len(length):], b[mark:mark+body])
	copy(b[mark-1:], length)
	return b
}

// appendString, appendUint, appendFixed64 and appendFixed32 append a scalar field of a
// message, leaving out a zero value as protobuf's proto3 fields do.
func appendString(b []byte, num protowire.Number, v string) []byte {
	return appendNonZero(b, num, protowire.BytesType, v, protowire.AppendString)
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	return appendNonZero(b, num, protowire.VarintType, v, protowire.AppendVarint)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	return appendNonZero(b, num, protowire.Fixed64Type, v, protowire.AppendFixed64)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	return appendNonZero(b, num, protowire.Fixed32Type, v, protowire.AppendFixed32)
}

// appendNonZero appends field num of wire type typ, written by appendValue, unless v is its
// type's zero value.
func appendNonZero[T comparable](b []byte, num protowire.Number, typ protowire.Type, v T, appendValue func([]byte, T) []byte) []byte {
	var zero T
	if v == zero {
		return b
	}
	return appendValue(protowire.AppendTag(b, num, typ), v)
}

// appendID appends a trace or span id, always: an id is a fixed-size array, which the SDK
// sends even when it is all zeros (an invalid link's).
func appendID(b []byte, num protowire.Number, id []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), id)
}

// unixNanos is a moment in nanoseconds since the epoch, none before it.
func unixNanos(ns int64) uint64 { return uint64(max(0, ns)) }

// count is a dropped count as OTLP's uint32 holds it: clamped to its range.
func count(n int) uint64 { return uint64(min(max(0, n), math.MaxUint32)) }

// flagsOf is a span's or link's flags: the W3C trace flags, the bit that says whether the
// parent's remoteness is known (it always is), and the bit that says it is remote.
func flagsOf(flags oteltrace.TraceFlags, parent oteltrace.SpanContext) uint32 {
	out := uint32(flags) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if parent.IsRemote() {
		out |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return out
}

func kindOf(kind oteltrace.SpanKind) tracepb.Span_SpanKind {
	switch kind {
	case oteltrace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case oteltrace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case oteltrace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case oteltrace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case oteltrace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	default:
		return tracepb.Span_SPAN_KIND_UNSPECIFIED
	}
}

func statusCodeOf(code codes.Code) tracepb.Status_StatusCode {
	switch code {
	case codes.Ok:
		return tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		return tracepb.Status_STATUS_CODE_ERROR
	default:
		return tracepb.Status_STATUS_CODE_UNSET
	}
}
