package observability_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchPerfHz is the rate at which perf samples each server: one sample per millisecond of
// CPU, about.
const benchPerfHz = 999

// benchPerfParts are where a server's CPU goes, each the frames (substrings of a symbol) that
// put a sample there. A sample goes to the first part any frame of its stack matches, so the
// metrics the fan-out updates inside a request are the metrics', the rest of its hand-over the
// fan-out's, and a garbage collector's assist inside a request is GC.
var benchPerfParts = []struct {
	name   string
	frames []string
}{
	{"spans: made", []string{"adapters/otel.(*Sink).Record"}},
	{"spans: exported", []string{"adapters/otel.(*batcher)", "otlptrace", "(*batchSpanProcessor)"}},
	{"metrics", []string{"adapters/prometheus", "prometheus/client_golang"}},
	{"fan-out", []string{"adapters/fanout.(*queue)", "adapters/fanout.(*Sink).handOn"}},
	{"GC", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcStart"}},
	{"request", []string{"net/http.(*conn).serve"}},
	{"accept", []string{"net/http.(*Server).Serve"}},
	{"sysmon", []string{"runtime.sysmon"}},
	{"scheduler", []string{"runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.goexit0", "runtime.mstart"}},
}

// benchProfiles records each server's CPU with perf while the reads run; nil when
// RESPLANE_BENCH_PERF is not set.
type benchProfiles struct {
	dir     string
	servers []*benchServer
	perf    []*exec.Cmd
}

// benchPerfStart starts one perf record per server, into RESPLANE_BENCH_PERF.
func benchPerfStart(b *testing.B, servers []*benchServer) *benchProfiles {
	b.Helper()
	dir := os.Getenv("RESPLANE_BENCH_PERF")
	if dir == "" {
		return nil
	}
	if _, err := exec.LookPath("perf"); err != nil {
		b.Fatal("RESPLANE_BENCH_PERF needs perf (Debian: apt-get install linux-perf)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	p := &benchProfiles{dir: dir, servers: servers}
	for _, s := range servers {
		cmd := exec.Command("perf", "record", "-F", strconv.Itoa(benchPerfHz), "-g",
			"-p", strconv.Itoa(s.p.PID()), "-o", p.file(s))
		cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		p.perf = append(p.perf, cmd)
	}
	time.Sleep(500 * time.Millisecond) // let every perf attach
	return p
}

func (p *benchProfiles) file(s *benchServer) string {
	return filepath.Join(p.dir, s.name+".perf.data")
}

// stop ends the recordings and writes, for each server, its CPU per read in each part to
// split.txt beside the recordings.
func (p *benchProfiles) stop(b *testing.B, reads float64) {
	b.Helper()
	if p == nil {
		return
	}
	for _, cmd := range p.perf {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait() // perf record ends with the interrupt; benchPerfSplit reports a bad file
	}
	var report strings.Builder
	fmt.Fprintf(&report, "µs of CPU per read, from perf samples (%s):\n%-16s %7s", p.dir, "server", "total")
	for _, part := range benchPerfParts {
		fmt.Fprintf(&report, " %9.9s", part.name)
	}
	fmt.Fprintf(&report, " %7s\n", "other")
	for _, s := range p.servers {
		samples, total := benchPerfSplit(b, p.file(s))
		perRead := func(n int) float64 { return float64(n) * 1e6 / benchPerfHz / reads }
		fmt.Fprintf(&report, "%-16s %7.1f", s.name, perRead(total))
		other := total
		for _, part := range benchPerfParts {
			fmt.Fprintf(&report, " %9.1f", perRead(samples[part.name]))
			other -= samples[part.name]
		}
		fmt.Fprintf(&report, " %7.1f\n", perRead(other))
	}
	split := filepath.Join(p.dir, "split.txt")
	if err := os.WriteFile(split, []byte(report.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("where the CPU of each read goes: %s", split)
}

// benchPerfSplit counts the samples of one recording by part (benchPerfParts), and in all.
func benchPerfSplit(b *testing.B, file string) (map[string]int, int) {
	b.Helper()
	out, err := exec.Command("perf", "script", "-i", file, "-F", "comm,ip,sym").Output()
	if err != nil {
		b.Fatalf("perf script %s: %v", file, err)
	}
	samples, total := map[string]int{}, 0
	var stack []string
	count := func() {
		if len(stack) == 0 {
			return
		}
		total++
		for _, part := range benchPerfParts {
			if benchStackHas(stack, part.frames) {
				samples[part.name]++
				break
			}
		}
		stack = stack[:0]
	}
	lines := bufio.NewScanner(bytes.NewReader(out))
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		switch {
		case strings.TrimSpace(line) == "":
			count()
		case line[0] == ' ' || line[0] == '\t':
			stack = append(stack, line) // a frame: address and symbol
		}
	}
	count()
	return samples, total
}

func benchStackHas(stack, frames []string) bool {
	for _, line := range stack {
		for _, frame := range frames {
			if strings.Contains(line, frame) {
				return true
			}
		}
	}
	return false
}
