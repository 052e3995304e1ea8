package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// export is an export request of spans spans, split over two ScopeSpans and two
// ResourceSpans, as a server with more than one resource would send them.
func export(t *testing.T, spans int) []byte {
	t.Helper()
	req := &coltrace.ExportTraceServiceRequest{}
	for i := 0; i < spans; i++ {
		if i%2 == 0 {
			req.ResourceSpans = append(req.ResourceSpans, &tracepb.ResourceSpans{})
		}
		rs := req.ResourceSpans[len(req.ResourceSpans)-1]
		rs.ScopeSpans = append(rs.ScopeSpans, &tracepb.ScopeSpans{Spans: []*tracepb.Span{{Name: "resource_read"}}})
	}
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestTheSinkCountsSpansByPrefix(t *testing.T) {
	srv := httptest.NewServer(newSink().handler())
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		name, path string
		body       []byte
		status     int
	}{
		{"a request of three spans under both", "/both/v1/traces", export(t, 3), http.StatusOK},
		{"two more under both", "/both/v1/traces", export(t, 2), http.StatusOK},
		{"one under spans", "/spans/v1/traces", export(t, 1), http.StatusOK},
		{"a request of no span still counts its prefix", "/empty/v1/traces", export(t, 0), http.StatusOK},
		{"a body that is not protobuf is refused", "/both/v1/traces", []byte{0xff, 0xff}, http.StatusBadRequest},
		{"a path without /v1/traces is refused", "/both", export(t, 1), http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+tc.path, "application/x-protobuf", bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}

	resp, err := http.Get(srv.URL + "/counts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"both": 5, "spans": 1, "empty": 0}; !maps.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}

func TestOnlyLoopbackIsListenedOn(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", "localhost:0", ":0"} {
		if err := run(addr); err == nil {
			t.Errorf("run(%q) listened; want a refusal", addr)
		}
	}
}
