// Command otlpsink is the collector of bench/observability-bench.sh: an OTLP/HTTP trace
// receiver that decodes every export, counts its spans and keeps nothing else.
//
// It answers POST <prefix>/v1/traces with 200 and an empty protobuf body, as a collector that
// accepted every span does, and counts the spans under <prefix>, so that several servers
// pointed at one sink (--otel-endpoint http://ADDR/<name>) are counted apart. A body that is
// not an uncompressed ExportTraceServiceRequest is answered 400, which the server under test
// reports as an export failure. GET /counts answers the counts so far as a JSON object,
// {"<prefix>": spans, ...}.
//
// Usage:
//
//	otlpsink [-listen 127.0.0.1:0]
//
// It prints its base URL (http://ADDR) on the first line of its standard output once it
// listens, and serves until it is killed. It listens on loopback addresses only.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

const tracesPath = "/v1/traces"

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "the loopback address to listen on")
	flag.Parse()
	if err := run(*listen); err != nil {
		fmt.Fprintln(os.Stderr, "otlpsink:", err)
		os.Exit(1)
	}
}

func run(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("-listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-listen %q: only a loopback IP address is accepted, such as 127.0.0.1:0", listen)
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Printf("http://%s\n", l.Addr())
	return http.Serve(l, newSink().handler())
}

// sink counts the spans received under each path prefix.
type sink struct {
	mu    sync.Mutex
	spans map[string]int
}

func newSink() *sink { return &sink{spans: map[string]int{}} }

// handler answers exports and GET /counts.
func (s *sink) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /counts", s.counts)
	mux.HandleFunc("POST /", s.export)
	return mux
}

func (s *sink) export(w http.ResponseWriter, r *http.Request) {
	prefix, ok := strings.CutSuffix(r.URL.Path, tracesPath)
	if !ok {
		http.Error(w, "spans are posted to <prefix>"+tracesPath, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var export coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &export); err != nil {
		http.Error(w, "not an uncompressed ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	n := 0
	for _, rs := range export.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	s.mu.Lock()
	s.spans[strings.TrimPrefix(prefix, "/")] += n
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func (s *sink) counts(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.spans)
}
