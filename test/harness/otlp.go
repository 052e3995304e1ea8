package harness

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPReceiver is an OpenTelemetry collector inside the test process: it answers OTLP/HTTP
// exports at /v1/traces, decodes each request's protobuf body (gzip-compressed or not) with
// the OTLP protocol's own types, and keeps every span and every raw body with its headers.
type OTLPReceiver struct {
	srv *httptest.Server

	mu     sync.Mutex
	spans  []Span
	bodies [][]byte
	heads  []http.Header
	status int
}

// Span is one span a receiver decoded, with what a test checks.
type Span struct {
	Name string
	// Service is the service.name of the span's resource.
	Service string
	// Attrs are the span's attributes: string, int64, bool or []string values.
	Attrs map[string]any
	// Error is true when the span's status is Error; Message is the status's description.
	Error   bool
	Message string
	Kind    tracepb.Span_SpanKind
	Start   time.Time
	End     time.Time
}

// NewOTLPReceiver starts a receiver that answers 200 until told otherwise; it stops when the
// test ends.
func NewOTLPReceiver(t testing.TB) *OTLPReceiver {
	t.Helper()
	r := &OTLPReceiver{status: http.StatusOK}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the receiver's base URL, the form --otel-endpoint takes (http://127.0.0.1:<port>).
func (r *OTLPReceiver) URL() string { return r.srv.URL }

// AnswerWith makes the receiver answer every later export with status (and keep nothing), as
// a collector that refuses or fails would.
func (r *OTLPReceiver) AnswerWith(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

// Spans returns every span received so far, in the order received.
func (r *OTLPReceiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Bodies returns every export request's body as received (before decompression).
func (r *OTLPReceiver) Bodies() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// Headers returns the headers of every export request Bodies returns, in the same order.
func (r *OTLPReceiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.heads...)
}

// WaitForSpans waits (up to 10 s) until at least n spans have arrived and returns them all.
func (r *OTLPReceiver) WaitForSpans(t testing.TB, n int) []Span {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := r.Spans()
		if len(spans) >= n || time.Now().After(deadline) {
			if len(spans) < n {
				t.Fatalf("the collector received %d spans, want at least %d", len(spans), n)
			}
			return spans
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *OTLPReceiver) serve(w http.ResponseWriter, req *http.Request) {
	raw, err := io.ReadAll(req.Body)
	if err != nil || req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP/HTTP trace export", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	status := r.status
	r.mu.Unlock()
	if status != http.StatusOK {
		w.WriteHeader(status)
		return
	}
	body := raw
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err == nil {
			body, err = io.ReadAll(zr)
		}
		if err != nil {
			http.Error(w, "bad gzip body", http.StatusBadRequest)
			return
		}
	}
	var export coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &export); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	var spans []Span
	for _, rs := range export.GetResourceSpans() {
		service, _ := attributes(rs.GetResource().GetAttributes())["service.name"].(string)
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				spans = append(spans, Span{
					Name: s.GetName(), Service: service, Attrs: attributes(s.GetAttributes()),
					Error:   s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					Message: s.GetStatus().GetMessage(), Kind: s.GetKind(),
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
				})
			}
		}
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, raw)
	r.heads = append(r.heads, req.Header.Clone())
	r.spans = append(r.spans, spans...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// attributes flattens OTLP key-values into Go values.
func attributes(kvs []*commonpb.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = v.IntValue
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = v.BoolValue
		case *commonpb.AnyValue_ArrayValue:
			var list []string
			for _, item := range v.ArrayValue.GetValues() {
				list = append(list, item.GetStringValue())
			}
			out[kv.GetKey()] = list
		}
	}
	return out
}
