package otel

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/test/harness"
)

const (
	sessionID = "ses_0190a1b2c3d47e5f8a9b0c1d2e3f4a5b"
	token     = "mh1.eyJ2IjoxfQ.c2lnbmF0dXJl"
)

var (
	recordedAt = time.UnixMilli(1_800_000_000_000)
	clockNow   = recordedAt.Add(time.Minute)
)

// recorded returns a sink over the SDK's in-memory span recorder, and the recorder.
func recorded(t *testing.T) (*Sink, *tracetest.SpanRecorder) {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	return newSink(provider, Config{SessionID: sessionID, Clock: clock.NewManual(clockNow)}), spans
}

func attrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	out := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value
	}
	return out
}

func TestOneSpanPerEventNamedAfterItWithTheFieldsAsAttributes(t *testing.T) {
	notFound := refusal.New(refusal.NotFound)
	for _, tc := range []struct {
		name  string
		event trace.Event
		kind  oteltrace.SpanKind
		want  map[string]attribute.Value
	}{
		{"a served read carries its fields; nulls are left out", trace.ResourceRead{Path: "a.txt", Bytes: 3, SHA256: "abc", Generation: 2, Containment: "sealed"},
			oteltrace.SpanKindServer, map[string]attribute.Value{
				"murmur.path": attribute.StringValue("a.txt"), "murmur.outcome": attribute.StringValue("ok"),
				"murmur.bytes": attribute.Int64Value(3), "murmur.sha256": attribute.StringValue("abc"),
				"murmur.generation": attribute.Int64Value(2), "murmur.containment_achieved": attribute.StringValue("sealed"),
			}},
		{"a refused read carries its outcome and reason", trace.ResourceRead{Path: "b.txt", Containment: "scoped", Err: notFound},
			oteltrace.SpanKindServer, map[string]attribute.Value{
				"murmur.path": attribute.StringValue("b.txt"), "murmur.outcome": attribute.StringValue("not_found"),
				"murmur.generation": attribute.Int64Value(0), "murmur.containment_achieved": attribute.StringValue("scoped"),
				"murmur.reason": attribute.StringValue(notFound.Message),
			}},
		{"a redeem carries its handle id", trace.PeerHandleRedeem{HandleID: "3f2a91c40b7e5d68", Audience: "b@h:1", AudienceSent: true, Err: refusal.New(refusal.HandleExpired)},
			oteltrace.SpanKindServer, map[string]attribute.Value{
				"murmur.handle_id": attribute.StringValue("3f2a91c40b7e5d68"), "murmur.generation": attribute.Int64Value(0),
				"murmur.audience_asserted": attribute.StringValue("b@h:1"), "murmur.outcome": attribute.StringValue("handle_expired"),
				"murmur.reason": attribute.StringValue(refusal.New(refusal.HandleExpired).Message),
			}},
		{"a fetch is a client span", trace.PeerFileFetch{Peer: "127.0.0.1:9", HandleID: "3f2a91c40b7e5d68", StoredPath: "peer-in/x", Bytes: 1, SHA256: "ab"},
			oteltrace.SpanKindClient, map[string]attribute.Value{
				"murmur.peer": attribute.StringValue("127.0.0.1:9"), "murmur.handle_id": attribute.StringValue("3f2a91c40b7e5d68"),
				"murmur.stored_path": attribute.StringValue("peer-in/x"), "murmur.bytes": attribute.Int64Value(1),
				"murmur.sha256": attribute.StringValue("ab"), "murmur.outcome": attribute.StringValue("ok"),
			}},
		{"session_start is an internal span with its lists", trace.SessionStart{Capsule: "reporter", Version: "1.0", Containment: "sealed", Planes: []string{"files"}, Workdir: "/w"},
			oteltrace.SpanKindInternal, map[string]attribute.Value{
				"murmur.capsule": attribute.StringValue("reporter"), "murmur.version": attribute.StringValue("1.0"),
				"murmur.containment_achieved": attribute.StringValue("sealed"), "murmur.planes": attribute.StringSliceValue([]string{"files"}),
				"murmur.tools": attribute.StringSliceValue([]string{}), "murmur.workdir": attribute.StringValue("/w"),
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink, spans := recorded(t)
			sink.Record(trace.Stamped{Event: tc.event, At: recordedAt})
			ended := spans.Ended()
			if len(ended) != 1 {
				t.Fatalf("%d spans, want 1", len(ended))
			}
			span := ended[0]
			if span.Name() != tc.event.Type() || span.SpanKind() != tc.kind {
				t.Errorf("span %q kind %v, want %q kind %v", span.Name(), span.SpanKind(), tc.event.Type(), tc.kind)
			}
			want := map[string]attribute.Value{"murmur.session_id": attribute.StringValue(sessionID)}
			for k, v := range tc.want {
				want[k] = v
			}
			if got := attrs(span); !reflect.DeepEqual(got, want) {
				t.Errorf("attributes\n got %v\nwant %v", got, want)
			}
			if !span.StartTime().Equal(recordedAt) || !span.EndTime().Equal(recordedAt) {
				t.Errorf("span from %v to %v, want both at the recorded moment %v", span.StartTime(), span.EndTime(), recordedAt)
			}
		})
	}
}

func TestASpanWhoseOutcomeIsNotOkIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		event   trace.Event
		code    codes.Code
		message string
	}{
		{"a refusal is an error described by its code", trace.ResourceRead{Err: refusal.New(refusal.OutsideRoot)}, codes.Error, "outside_root"},
		{"ok leaves the status unset", trace.ResourceRead{}, codes.Unset, ""},
		{"an event without an outcome leaves it unset", trace.SessionEnd{Reason: "signal"}, codes.Unset, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink, spans := recorded(t)
			sink.Record(tc.event)
			status := spans.Ended()[0].Status()
			if status.Code != tc.code || status.Description != tc.message {
				t.Fatalf("status %v %q, want %v %q", status.Code, status.Description, tc.code, tc.message)
			}
		})
	}
}

func TestAnEventHandedOverWithoutAMomentIsTakenAsRecordedNow(t *testing.T) {
	sink, spans := recorded(t)
	sink.Record(trace.SessionEnd{Reason: "signal"})
	if got := spans.Ended()[0].StartTime(); !got.Equal(clockNow) {
		t.Fatalf("start %v, want the clock's %v", got, clockNow)
	}
}

// TestNoTokenAndNoInvalidUTF8ReachAnAttribute pushes a token and invalid bytes through every
// string an event carries.
func TestNoTokenAndNoInvalidUTF8ReachAnAttribute(t *testing.T) {
	sink, spans := recorded(t)
	sink.Record(trace.ResourceRead{Path: "dir/" + token + "/\xff.md", Err: refusal.WithMessage(refusal.Code(token), "refused "+token)})
	sink.Record(trace.PeerFileFetch{Peer: "http://h/" + token, HandleID: token, Err: refusal.New(refusal.PeerUnreachable)})
	sink.Record(trace.SessionStart{Planes: []string{token}, Workdir: "/srv/" + token})
	placeholder := "<handle:" + handle.ID(token) + ">"
	seen := false
	for _, span := range spans.Ended() {
		texts := []string{span.Status().Description}
		for _, kv := range span.Attributes() {
			texts = append(texts, kv.Value.String())
		}
		for _, text := range texts {
			if strings.Contains(text, "mh1.") {
				t.Errorf("span %s holds a token: %q", span.Name(), text)
			}
			if strings.Contains(text, "\xff") {
				t.Errorf("span %s holds invalid UTF-8: %q", span.Name(), text)
			}
			seen = seen || strings.Contains(text, placeholder)
		}
	}
	if !seen {
		t.Errorf("no attribute holds %s: the token was dropped rather than redacted", placeholder)
	}
	if got := attrs(spans.Ended()[0])["murmur.path"].AsString(); got != "dir/"+placeholder+"/\uFFFD.md" {
		t.Errorf("path %q, want the token redacted and the byte replaced", got)
	}
}

func TestEndpointIsTheFlagThenTheTracesVariableThenTheBaseVariable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flag    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"nothing set turns spans off", "", nil, "", ""},
		{"the flag is a base URL", "http://127.0.0.1:4318", nil, "http://127.0.0.1:4318/v1/traces", ""},
		{"a flag with a path keeps it before /v1/traces", "https://collector.example/otlp/", nil, "https://collector.example/otlp/v1/traces", ""},
		{"the flag wins over the variables", "http://flag:4318", map[string]string{EnvTracesEndpoint: "http://traces:1/x", EnvEndpoint: "http://base:2"}, "http://flag:4318/v1/traces", ""},
		{"the traces variable is used as it is", "", map[string]string{EnvTracesEndpoint: "http://traces:1/custom", EnvEndpoint: "http://base:2"}, "http://traces:1/custom", ""},
		{"the base variable gets /v1/traces", "", map[string]string{EnvEndpoint: " http://base:4318 "}, "http://base:4318/v1/traces", ""},
		{"an empty variable counts as unset", "", map[string]string{EnvTracesEndpoint: "", EnvEndpoint: "http://base:2"}, "http://base:2/v1/traces", ""},
		{"a variable that is not a URL names itself", "", map[string]string{EnvEndpoint: "collector:4318"}, "", EnvEndpoint},
		{"a scheme other than http(s) is refused", "", map[string]string{EnvTracesEndpoint: "grpc://c:4317"}, "", EnvTracesEndpoint},
		{"credentials in the URL are refused", "http://user:secret@c:4318", nil, "", "OTEL_EXPORTER_OTLP_HEADERS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Endpoint(tc.flag, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Endpoint = %q, %v; want an error naming %s", got, err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("the error repeats the credentials: %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Endpoint = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// exporting returns a real sink posting to a receiver in the test, and counts the spans it
// reports undelivered.
func exporting(t *testing.T, receiver *harness.OTLPReceiver) (*Sink, *atomic.Int64) {
	t.Helper()
	var failed atomic.Int64
	sink, err := New(context.Background(), Config{
		Endpoint: receiver.URL() + "/v1/traces", SessionID: sessionID, Clock: clock.NewManual(clockNow),
		OnExportFailure: func(n int) { failed.Add(int64(n)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return sink, &failed
}

func shutdown(t *testing.T, sink *Sink) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sink.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownExportsEverySpanOverOTLPHTTP(t *testing.T) {
	for _, tc := range []struct {
		name        string
		serviceName string
		want        string
	}{
		{"the service is resplane by default", "", ServiceName},
		{"OTEL_SERVICE_NAME names it otherwise", "capsule-reporter", "capsule-reporter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_SERVICE_NAME", tc.serviceName)
			receiver := harness.NewOTLPReceiver(t)
			sink, failed := exporting(t, receiver)
			sink.Record(trace.ResourceRead{Path: "a.txt", Bytes: 1})
			sink.Record(trace.ResourceRead{Path: "\xff" + token, Err: refusal.New(refusal.NotFound)})
			shutdown(t, sink)
			spans := receiver.Spans()
			if len(spans) != 2 || failed.Load() != 0 {
				t.Fatalf("received %d spans (%d failed), want both: %+v", len(spans), failed.Load(), spans)
			}
			for _, span := range spans {
				if span.Name != "resource_read" || span.Service != tc.want || span.Attrs["murmur.session_id"] != sessionID {
					t.Errorf("span %s of service %q session %v, want resource_read of %q in %s",
						span.Name, span.Service, span.Attrs["murmur.session_id"], tc.want, sessionID)
				}
			}
			for _, body := range receiver.Bodies() {
				if strings.Contains(string(body), "mh1.") {
					t.Fatal("an export request holds a token")
				}
			}
		})
	}
}

func TestSpansACollectorRefusesAreReportedUndelivered(t *testing.T) {
	receiver := harness.NewOTLPReceiver(t)
	receiver.AnswerWith(http.StatusBadRequest) // not retried
	sink, failed := exporting(t, receiver)
	for range 3 {
		sink.Record(trace.ResourceRead{Path: "a.txt"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = sink.Shutdown(ctx)
	if got := failed.Load(); got != 3 {
		t.Fatalf("%d spans reported undelivered, want 3", got)
	}
}

func TestAMalformedResourceVariableIsReportedAndLeftOut(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "team=agents,no-equals-sign")
	receiver := harness.NewOTLPReceiver(t)
	var reported []error
	sink, err := New(context.Background(), Config{
		Endpoint: receiver.URL() + "/v1/traces", SessionID: sessionID, Clock: clock.NewManual(clockNow),
		OnError: func(err error) { reported = append(reported, err) },
	})
	if err != nil {
		t.Fatalf("New refused a partly malformed OTEL_RESOURCE_ATTRIBUTES: %v", err)
	}
	sink.Record(trace.SessionEnd{Reason: "signal"})
	shutdown(t, sink)
	if len(reported) == 0 || !strings.Contains(reported[0].Error(), "resource") {
		t.Errorf("reported %v, want the resource error", reported)
	}
	if spans := receiver.Spans(); len(spans) != 1 || spans[0].Service != ServiceName {
		t.Errorf("spans %+v, want one of service %s", spans, ServiceName)
	}
}

func TestBatchingIsTheStandardVariablesOverTheDefaults(t *testing.T) {
	d := DefaultBatching
	for _, tc := range []struct {
		name     string
		env      map[string]string
		want     Batching
		reported string // a variable the error names; "" when none is reported
	}{
		{"nothing set gives the defaults", nil, d, ""},
		{"each variable sets its own value, the durations in milliseconds",
			map[string]string{EnvMaxQueueSize: "100", EnvMaxExportBatchSize: "10", EnvScheduleDelay: "50", EnvExportTimeout: "2000"},
			Batching{QueueSize: 100, BatchSize: 10, Delay: 50 * time.Millisecond, ExportTimeout: 2 * time.Second}, ""},
		{"an empty variable counts as unset", map[string]string{EnvScheduleDelay: ""}, d, ""},
		{"a batch above the queue is cut to the queue", map[string]string{EnvMaxQueueSize: "8", EnvMaxExportBatchSize: "9"},
			Batching{QueueSize: 8, BatchSize: 8, Delay: d.Delay, ExportTimeout: d.ExportTimeout}, ""},
		{"a value that is not a number keeps the default and is reported", map[string]string{EnvScheduleDelay: "5s"}, d, EnvScheduleDelay},
		{"zero keeps the default and is reported", map[string]string{EnvMaxQueueSize: "0"}, d, EnvMaxQueueSize},
		{"a negative value keeps the default and is reported", map[string]string{EnvMaxExportBatchSize: "-1"}, d, EnvMaxExportBatchSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reported []error
			got := BatchingFrom(func(k string) string { return tc.env[k] }, func(err error) { reported = append(reported, err) })
			if got != tc.want {
				t.Errorf("BatchingFrom = %+v, want %+v", got, tc.want)
			}
			switch {
			case tc.reported == "" && len(reported) > 0:
				t.Errorf("reported %v, want nothing", reported)
			case tc.reported != "" && (len(reported) != 1 || !strings.Contains(reported[0].Error(), tc.reported)):
				t.Errorf("reported %v, want one error naming %s", reported, tc.reported)
			}
		})
	}
}

func TestFlushExportsWhatWasRecordedInRequestsOfAtMostTheBatchSize(t *testing.T) {
	t.Setenv(EnvMaxExportBatchSize, "2")
	receiver := harness.NewOTLPReceiver(t)
	sink, failed := exporting(t, receiver)
	if got := sink.Batching().BatchSize; got != 2 {
		t.Fatalf("the sink's batch size is %d, want %s's 2", got, EnvMaxExportBatchSize)
	}
	for i := range 5 {
		sink.Record(trace.ResourceRead{Path: fmt.Sprintf("%d.txt", i)})
	}
	if got := len(receiver.Bodies()); got != 0 {
		t.Fatalf("%d export requests before Flush, want none: Record never exports", got)
	}
	sink.Flush()
	if got := len(receiver.Bodies()); got != 3 {
		t.Errorf("%d export requests for 5 spans in batches of 2, want 3", got)
	}
	var paths []string
	for _, s := range receiver.Spans() {
		paths = append(paths, s.Attrs["murmur.path"].(string))
	}
	if strings.Join(paths, ",") != "0.txt,1.txt,2.txt,3.txt,4.txt" || failed.Load() != 0 {
		t.Errorf("the collector got %q (%d failed), want the five in order", paths, failed.Load())
	}
	sink.Flush() // nothing left: no request
	if got := len(receiver.Bodies()); got != 3 {
		t.Errorf("%d export requests after an empty Flush, want still 3", got)
	}
	shutdown(t, sink)
}

func TestASpanTheSamplerLeavesOutIsNeverExported(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	receiver := harness.NewOTLPReceiver(t)
	sink, _ := exporting(t, receiver)
	sink.Record(trace.ResourceRead{Path: "a.txt"})
	sink.Flush()
	shutdown(t, sink)
	if got := len(receiver.Bodies()); got != 0 {
		t.Errorf("%d export requests with every span sampled out, want none", got)
	}
}

func TestSpansAFlushCannotDeliverAreReportedUndelivered(t *testing.T) {
	receiver := harness.NewOTLPReceiver(t)
	receiver.AnswerWith(http.StatusBadRequest) // not retried
	var reported []error
	var failed atomic.Int64
	sink, err := New(context.Background(), Config{
		Endpoint: receiver.URL() + "/v1/traces", SessionID: sessionID, Clock: clock.NewManual(clockNow),
		OnExportFailure: func(n int) { failed.Add(int64(n)) },
		OnError:         func(err error) { reported = append(reported, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		sink.Record(trace.ResourceRead{Path: "a.txt"})
	}
	sink.Flush()
	if got := failed.Load(); got != 3 || len(reported) == 0 {
		t.Errorf("%d spans reported undelivered and errors %v, want 3 and the exporter's error", got, reported)
	}
	shutdown(t, sink)
}

func TestSpansShutdownHasNoTimeToSendAreReportedUndelivered(t *testing.T) {
	receiver := harness.NewOTLPReceiver(t)
	sink, failed := exporting(t, receiver)
	for range 4 {
		sink.Record(trace.ResourceRead{Path: "a.txt"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sink.Shutdown(ctx); err == nil {
		t.Error("Shutdown with its context done reported no error")
	}
	if got := failed.Load(); got != 4 || len(receiver.Spans()) != 0 {
		t.Errorf("%d spans reported undelivered, %d received; want 4 and none", got, len(receiver.Spans()))
	}
	sink.Record(trace.ResourceRead{Path: "late.txt"}) // after Shutdown: kept nowhere
	sink.Flush()
	if got := len(receiver.Bodies()); got != 0 {
		t.Errorf("%d export requests after Shutdown, want none", got)
	}
}
