package resplane_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// BenchmarkRead1KiBObservability measures what metrics and spans cost a 1 KiB read
// (docs/benchmarks.md). It starts the real binary once per configuration over the same
// capsule — observability off; metrics and spans on (the pair the claim is about); metrics
// only; spans only; spans sampled 1 in 10 by the standard OTEL_TRACES_SAMPLER — with spans
// sent to a collector in the test process that drains each export and answers 200; and off
// once more, read last, as a control for the measurement's own noise. GOMAXPROCS
// client goroutines read the file from every server in turn, one new TCP connection per
// request, so whatever else runs on the machine weighs on all of them alike. One op is one
// read from each server.
//
// It reports, per read, each server's CPU time (user + system, from /proc, the sinks' own
// goroutines included: what decides throughput when the CPU is the limit) and its ratio to
// the server with observability off, and the same for the wall time from dial to close of
// the on/off pair.
func BenchmarkRead1KiBObservability(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	spans := []string{"--otel-endpoint", collector.URL}
	servers := []*benchServer{
		{name: "off"},
		{name: "on", args: append([]string{"--metrics-listen", "127.0.0.1:0"}, spans...)},
		{name: "metrics", args: []string{"--metrics-listen", "127.0.0.1:0"}},
		{name: "spans", args: spans},
		{name: "spans10%", args: spans, env: []string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.1"}},
		// off again, read last: its ratio to off is what the measurement itself wobbles by.
		{name: "off-again"},
	}
	for _, s := range servers {
		s.p = harness.Start(b, harness.Capsule{
			Manifest: "name: bench\nexports:\n  files:\n    root: out/\n    mode: read-only\n",
			Files:    fixture.Layout{"out/1k.bin": strings.Repeat("x", 1024)},
			Args:     s.args, Env: s.env,
		})
		s.request = []byte(harness.RequestText(s.p.Ready.Listen, http.MethodGet, "/resources/files/1k.bin"))
		if err := s.get(make([]byte, 4096)); err != nil { // warm up, and check it serves
			b.Fatal(err)
		}
		s.cpu = -benchCPU(b, s.p.PID())
	}

	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 4096)
		for pb.Next() {
			for _, s := range servers {
				if err := s.get(buf); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
	b.StopTimer()
	time.Sleep(100 * time.Millisecond) // let the sinks take the last events
	reads := float64(b.N)
	off, on := servers[0], servers[1]
	for _, s := range servers {
		s.cpu += benchCPU(b, s.p.PID())
		b.ReportMetric(float64(s.cpu.Microseconds())/reads, "cpu-µs/read-"+s.name)
		if s != off {
			b.ReportMetric(float64(s.cpu)/float64(off.cpu), "cpu-"+s.name+"/off")
		}
	}
	b.ReportMetric(float64(on.wall.Load())/float64(off.wall.Load()), "wall-on/off")
}

// benchServer is one server under the benchmark, with what its reads cost.
type benchServer struct {
	name      string
	args, env []string
	p         *harness.Process
	request   []byte
	wall      atomic.Int64  // nanoseconds, over all reads
	cpu       time.Duration // the process's CPU time over the timed loop
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

// benchCPU is the CPU time (user and system, every thread) process pid has used so far:
// fields 14 and 15 of /proc/<pid>/stat, in clock ticks of 10 ms (USER_HZ).
func benchCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces; the fields after it follow its ")".
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
