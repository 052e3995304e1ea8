// Command loadgen drives HTTP/1.1 load against a list of targets and reports, for each,
// requests per second, throughput, p50/p99/max latency and the responses by status. It is the
// load half of the benchmark rule ("a load script against the real binary"); bench/load.sh
// starts bin/resplane and runs it.
//
// Requests are written byte for byte over TCP, one request per connection with
// "Connection: close" (resplane serves one request per connection, so every target gets the
// same treatment). A request's latency runs from the dial to the server's close after the
// whole response; a response counts as ok only when its status is 200 and its body length
// equals its content-length.
//
// With -baseline-dir, loadgen starts a second copy of itself as a separate process serving
// that directory with net/http.FileServer on 127.0.0.1 (so the baseline, like resplane, has a
// runtime and two cores to itself rather than sharing the load generator's), and targets may
// name it as "baseline". -compare a,b prints the ratios of target a to target b.
//
// The targets run one after another, never at once, so they do not compete for the CPU; with
// -rounds N each target runs N slices of -d/N, interleaved, so drift over the run (thermal,
// a noisy neighbour) spreads over all targets alike.
//
// Usage:
//
//	go run ./bench/loadgen -c 64 -d 10s -baseline-dir DIR \
//	    -target resplane-4k=127.0.0.1:8080/resources/files/small.bin \
//	    -target baseline-4k=baseline/small.bin \
//	    -compare resplane-4k,baseline-4k
//
// Load goes only to loopback addresses; any other host is refused.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func run(args []string) error {
	fl := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	var targets, compares listFlag
	concurrency := fl.Int("c", 64, "concurrent workers (one connection each at a time)")
	duration := fl.Duration("d", 5*time.Second, "measured time per target, in total over all rounds")
	warmup := fl.Duration("warmup", 500*time.Millisecond, "unmeasured load per target before its first round")
	rounds := fl.Int("rounds", 1, "interleaved rounds: each target runs -d/rounds per round")
	timeout := fl.Duration("timeout", 30*time.Second, "deadline of one request, dial to close")
	baselineDir := fl.String("baseline-dir", "", "serve this directory with net/http.FileServer in a child process; targets name it \"baseline\"")
	serveBaseline := fl.String("serve-baseline", "", "internal: be the baseline server for this directory")
	fl.Var(&targets, "target", "name=HOST:PORT/PATH or name=baseline/PATH (repeatable); PATH is sent as is")
	fl.Var(&compares, "compare", "a,b: print target a's figures as ratios to target b's (repeatable)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *serveBaseline != "" {
		return serveDir(*serveBaseline)
	}
	if len(targets) == 0 {
		return errors.New("no -target given")
	}
	if *concurrency < 1 || *rounds < 1 || *duration <= 0 {
		return errors.New("-c, -rounds and -d must be positive")
	}

	var baseline *baselineServer
	if *baselineDir != "" {
		var err error
		if baseline, err = startBaseline(*baselineDir); err != nil {
			return err
		}
		defer baseline.stop()
	}
	var ts []*target
	for _, spec := range targets {
		t, err := parseTarget(spec, baseline)
		if err != nil {
			return err
		}
		ts = append(ts, t)
	}
	byName := map[string]*target{}
	for _, t := range ts {
		if byName[t.name] != nil {
			return fmt.Errorf("target %q given twice", t.name)
		}
		byName[t.name] = t
	}
	for _, c := range compares {
		a, b, ok := strings.Cut(c, ",")
		if !ok || byName[a] == nil || byName[b] == nil {
			return fmt.Errorf("-compare %q: want two target names, comma-separated", c)
		}
	}

	fmt.Printf("loadgen: %d workers, %s per target in %d round(s), %d target(s), %d CPUs\n",
		*concurrency, *duration, *rounds, len(ts), runtime.NumCPU())
	for _, t := range ts {
		if *warmup > 0 {
			drive(t, *concurrency, *warmup, *timeout, nil)
		}
	}
	slice := *duration / time.Duration(*rounds)
	for range *rounds {
		for _, t := range ts {
			t.elapsed += drive(t, *concurrency, slice, *timeout, t.stats)
		}
	}

	fmt.Println()
	fmt.Printf("%-16s %9s %10s %10s %9s %9s %9s  %s\n", "target", "requests", "req/s", "MiB/s", "p50", "p99", "max", "responses")
	for _, t := range ts {
		t.report()
	}
	if len(compares) > 0 {
		fmt.Println()
		for _, c := range compares {
			a, b, _ := strings.Cut(c, ",")
			ta, tb := byName[a], byName[b]
			fmt.Printf("ratio %s / %s: req/s %.2fx, p50 %.2fx, p99 %.2fx\n", a, b,
				ratio(ta.rate(), tb.rate()),
				ratio(float64(ta.percentile(50)), float64(tb.percentile(50))),
				ratio(float64(ta.percentile(99)), float64(tb.percentile(99))))
		}
	}
	if baseline != nil {
		if hwm, err := vmHWM(baseline.cmd.Process.Pid); err == nil {
			fmt.Printf("\nbaseline server (pid %d) VmHWM %s\n", baseline.cmd.Process.Pid, hwm)
		}
	}
	for _, t := range ts {
		if t.stats.ok == 0 {
			return fmt.Errorf("target %s: no successful response", t.name)
		}
	}
	return nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// target is one URL under load and what its measured rounds collected.
type target struct {
	name    string
	addr    string // host:port
	request []byte
	stats   *stats
	elapsed time.Duration
}

// parseTarget reads name=HOST:PORT/PATH, or name=baseline/PATH when a baseline runs.
func parseTarget(spec string, baseline *baselineServer) (*target, error) {
	name, rest, ok := strings.Cut(spec, "=")
	if !ok || name == "" {
		return nil, fmt.Errorf("-target %q: want name=HOST:PORT/PATH", spec)
	}
	rest = strings.TrimPrefix(rest, "http://")
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return nil, fmt.Errorf("-target %q: no /PATH after the address", spec)
	}
	addr, path := rest[:i], rest[i:]
	if addr == "baseline" {
		if baseline == nil {
			return nil, fmt.Errorf("-target %q names the baseline, but no -baseline-dir was given", spec)
		}
		addr = baseline.addr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("-target %q: %v", spec, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("-target %q: load goes only to loopback addresses", spec)
	}
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: resplane-loadgen\r\nConnection: close\r\n\r\n", path, addr)
	return &target{name: name, addr: addr, request: []byte(req), stats: newStats()}, nil
}

// stats is what one target's measured requests gave.
type stats struct {
	mu        sync.Mutex
	latencies []time.Duration // of ok responses
	byStatus  map[string]int  // "200", "503", "dial", "read", "short", ...
	ok        int
	bytes     int64 // body bytes of ok responses
}

func newStats() *stats { return &stats{byStatus: map[string]int{}} }

func (s *stats) merge(o *stats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latencies = append(s.latencies, o.latencies...)
	for k, v := range o.byStatus {
		s.byStatus[k] += v
	}
	s.ok += o.ok
	s.bytes += o.bytes
}

// drive runs c workers against t for d and merges what they saw into into (nil: discard).
// It returns the wall time the workers ran.
func drive(t *target, c int, d, timeout time.Duration, into *stats) time.Duration {
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := newStats()
			local.latencies = make([]time.Duration, 0, 1024)
			buf := make([]byte, 64<<10)
			for time.Now().Before(deadline) {
				began := time.Now()
				status, n, err := fetch(t, buf, timeout)
				lat := time.Since(began)
				switch {
				case err != nil:
					local.byStatus[err.Error()]++
				case status != http.StatusOK:
					local.byStatus[strconv.Itoa(status)]++
				default:
					local.byStatus["200"]++
					local.ok++
					local.bytes += n
					local.latencies = append(local.latencies, lat)
				}
			}
			if into != nil {
				into.merge(local)
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// fetchError names a failed request by the step that failed, so errors group by kind.
type fetchError string

func (e fetchError) Error() string { return string(e) }

// fetch sends one request on a new connection and reads the response until the server
// closes, returning the status and the body length.
func fetch(t *target, buf []byte, timeout time.Duration) (int, int64, error) {
	conn, err := net.DialTimeout("tcp", t.addr, timeout)
	if err != nil {
		return 0, 0, fetchError("dial")
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(t.request); err != nil {
		return 0, 0, fetchError("write")
	}
	br := bufio.NewReaderSize(conn, 4096)
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, 0, fetchError("read")
	}
	fields := bytes.Fields(line)
	if len(fields) < 2 {
		return 0, 0, fetchError("bad-status-line")
	}
	status, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		return 0, 0, fetchError("bad-status-line")
	}
	contentLength := int64(-1)
	for {
		h, err := br.ReadSlice('\n')
		if err != nil {
			return 0, 0, fetchError("read")
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if ok && strings.EqualFold(string(name), "content-length") {
			if contentLength, err = strconv.ParseInt(string(bytes.TrimSpace(value)), 10, 64); err != nil {
				return 0, 0, fetchError("bad-content-length")
			}
		}
	}
	n, err := io.CopyBuffer(io.Discard, br, buf)
	if err != nil {
		return 0, 0, fetchError("read")
	}
	if contentLength >= 0 && n != contentLength {
		return 0, 0, fetchError("short")
	}
	return status, n, nil
}

func (t *target) rate() float64 {
	if t.elapsed <= 0 {
		return 0
	}
	return float64(t.stats.ok) / t.elapsed.Seconds()
}

// percentile returns the p-th percentile latency of the ok responses (nearest rank).
func (t *target) percentile(p float64) time.Duration {
	l := t.stats.latencies
	if len(l) == 0 {
		return 0
	}
	if !slices.IsSorted(l) {
		slices.Sort(l)
	}
	i := int(p/100*float64(len(l))+0.5) - 1
	return l[max(0, min(i, len(l)-1))]
}

func (t *target) report() {
	s := t.stats
	var codes []string
	for k := range s.byStatus {
		codes = append(codes, k)
	}
	slices.Sort(codes)
	var resp strings.Builder
	for i, k := range codes {
		if i > 0 {
			resp.WriteString(" ")
		}
		fmt.Fprintf(&resp, "%s:%d", k, s.byStatus[k])
	}
	mibs := float64(s.bytes) / (1 << 20) / t.elapsed.Seconds()
	fmt.Printf("%-16s %9d %10.0f %10.1f %9s %9s %9s  %s\n", t.name, s.ok, t.rate(), mibs,
		round(t.percentile(50)), round(t.percentile(99)), round(t.percentile(100)), resp.String())
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}

// baselineServer is the child process serving -baseline-dir.
type baselineServer struct {
	cmd  *exec.Cmd
	addr string
}

// startBaseline runs this executable again with -serve-baseline and reads the address it
// prints.
func startBaseline(dir string) (*baselineServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-serve-baseline", dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case line, ok := <-lines:
		if !ok || !strings.HasPrefix(line, "listening ") {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("baseline server did not start (said %q)", line)
		}
		return &baselineServer{cmd: cmd, addr: strings.TrimPrefix(line, "listening ")}, nil
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, errors.New("baseline server did not start within 10 s")
	}
}

func (b *baselineServer) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}

// serveDir is the baseline server: net/http.FileServer over dir on an ephemeral loopback
// port, with the same header timeout resplane uses, until SIGTERM or SIGINT.
func serveDir(dir string) error {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("-serve-baseline %s: not a directory", dir)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; _ = srv.Close() }()
	fmt.Printf("listening %s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// vmHWM returns the VmHWM line's value (peak resident set) of process pid.
func vmHWM(pid int) (string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("no VmHWM line")
}
