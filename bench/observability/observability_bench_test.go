// Package observability_test holds BenchmarkRead1KiBObservability, what metrics and spans cost
// a 1 KiB read, measured in process against the real binary (docs/benchmarks.md,
// "Observability cost"). It drives the binary through test/harness and uses nothing of the
// root package, so it lives with the rest of the measurement apparatus under bench/. Like every
// benchmark it runs only with -bench (make bench); under make test the package compiles and
// runs nothing.
package observability_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/otel"
	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// BenchmarkRead1KiBObservability measures what metrics and spans cost a 1 KiB read
// (docs/benchmarks.md, "Observability cost"). It starts the real binary once per
// configuration over the same capsule — observability off; metrics and spans on (the pair the
// claim is about); metrics only; spans only; spans sampled 1 in 10 by the standard
// OTEL_TRACES_SAMPLER; spans in batches four times the default size (2048 spans, a queue of
// 8192); and off once more, as a control for the measurement's own noise — with
// spans sent to a collector in the test process that drains each export and answers 200.
// GOMAXPROCS client goroutines read the file from every server, in a new random order each
// time, one new TCP connection per request, so that whatever else runs on the machine, and
// whatever one server's own background work costs the server read after it, weighs on all of
// them alike. One op is one read from each server.
//
// It reports, per read, each server's CPU time (every thread's time on a CPU, from
// /proc/<pid>/task/*/schedstat: the sinks' goroutines and their exports included, which is
// what decides throughput when the CPU is the limit) and its ratio to the server with
// observability off, and the wall time from dial to close of the on/off pair. The CPU is read
// once the last batch of spans has had time to be exported.
//
// Two opt-in variables widen it:
//
//   - RESPLANE_BENCH_BASELINE=<binary> adds "on-baseline" and "spans-baseline": that binary
//     (such as one built from an earlier commit) with metrics and spans, and spans only, side
//     by side with the others.
//   - RESPLANE_BENCH_PERF=<dir> records each server's CPU profile with Linux perf (Debian's
//     linux-perf) while the reads run, into <dir>/<server>.perf.data, and writes where each
//     server's CPU per read goes to <dir>/split.txt (benchPerfSplit).
func BenchmarkRead1KiBObservability(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	spans := []string{"--otel-endpoint", collector.URL}
	metricsAndSpans := append([]string{"--metrics-listen", "127.0.0.1:0"}, spans...)
	servers := []*benchServer{
		{name: "off"},
		{name: "on", args: metricsAndSpans},
		{name: "metrics", args: []string{"--metrics-listen", "127.0.0.1:0"}},
		{name: "spans", args: spans},
		{name: "spans10%", args: spans, env: []string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.1"}},
		{name: "spans-batch2048", args: spans, env: []string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE=2048", "OTEL_BSP_MAX_QUEUE_SIZE=8192"}},
		// off again: its ratio to off is what the measurement itself wobbles by.
		{name: "off-again"},
	}
	if baseline := os.Getenv("RESPLANE_BENCH_BASELINE"); baseline != "" {
		// The harness runs <wrapper> <binary> serve …: this wrapper runs the baseline instead.
		wrapper := []string{"sh", "-c", `shift; exec "$0" "$@"`, baseline}
		servers = append(servers,
			&benchServer{name: "on-baseline", args: metricsAndSpans, wrapper: wrapper},
			&benchServer{name: "spans-baseline", args: spans, wrapper: wrapper})
	}
	for _, s := range servers {
		s.p = harness.Start(b, harness.Capsule{
			Manifest: "name: bench\nexports:\n  files:\n    root: out/\n    mode: read-only\n",
			Files:    fixture.Layout{"out/1k.bin": strings.Repeat("x", 1024)},
			Args:     s.args, Env: s.env, Wrapper: s.wrapper,
		})
		s.request = []byte(harness.RequestText(s.p.Ready.Listen, http.MethodGet, "/resources/files/1k.bin"))
		if err := s.get(make([]byte, 4096)); err != nil { // warm up, and check it serves
			b.Fatal(err)
		}
		s.cpu = -benchCPU(b, s.p.PID())
	}
	profiles := benchPerfStart(b, servers)

	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 4096)
		order := slices.Clone(servers)
		for pb.Next() {
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, s := range order {
				if err := s.get(buf); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
	b.StopTimer()
	// The last events wait for their batch's delay; their spans' cost is the read's too.
	time.Sleep(otel.DefaultBatching.Delay + time.Second)
	reads := float64(b.N)
	for _, s := range servers {
		s.cpu += benchCPU(b, s.p.PID())
	}
	profiles.stop(b, reads)
	off, on := servers[0], servers[1]
	for _, s := range servers {
		b.ReportMetric(float64(s.cpu.Microseconds())/reads, "cpu-µs/read-"+s.name)
		if s != off {
			b.ReportMetric(float64(s.cpu)/float64(off.cpu), "cpu-"+s.name+"/off")
		}
	}
	b.ReportMetric(float64(on.wall.Load())/float64(off.wall.Load()), "wall-on/off")
}

// benchServer is one server under the benchmark, with what its reads cost.
type benchServer struct {
	name               string
	args, env, wrapper []string
	p                  *harness.Process
	request            []byte
	wall               atomic.Int64  // nanoseconds, over all reads
	cpu                time.Duration // the process's CPU time over the timed loop
}

// get reads the file on a new connection until the server closes it, and adds the wall time.
func (s *benchServer) get(buf []byte) error {
	start := time.Now()
	conn, err := net.Dial("tcp", s.p.Ready.Listen)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write(s.request); err != nil {
		return err
	}
	var n, total int
	for err == nil {
		n, err = conn.Read(buf[total:])
		total += n
	}
	s.wall.Add(int64(time.Since(start)))
	if err != io.EOF || !bytes.HasPrefix(buf, []byte("HTTP/1.1 200 ")) || !bytes.HasSuffix(buf[:total], bytes.Repeat([]byte("x"), 1024)) {
		return fmt.Errorf("%s: not a whole 200 answer: %q (%v)", s.name, buf[:min(total, 64)], err)
	}
	return nil
}

// benchCPU is the CPU time process pid has used so far: the sum over its threads of the first
// field of /proc/<pid>/task/<tid>/schedstat, their time on a CPU in nanoseconds. (The clock
// ticks of /proc/<pid>/stat are 10 ms, too coarse for a few seconds of reads.) A Go process
// keeps its threads, so none of the time is lost with an exited thread.
func benchCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("no threads of process %d: %v", pid, err)
	}
	var total time.Duration
	for _, path := range tasks {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // the thread has just exited
		}
		ns, err := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
		if err != nil {
			b.Fatalf("%s: %q", path, raw)
		}
		total += time.Duration(ns)
	}
	return total
}
