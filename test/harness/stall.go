package harness

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Stall opens n connections to addr that each send request whole and then never read a byte
// of the answer, as a hostile client would. They are closed when the test ends.
func Stall(t testing.TB, addr, request string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
	}
	return conns
}

// RequirePeakRSSUnder fails the test when the process's peak resident set size (VmHWM)
// reached limit bytes, and returns it.
func (p *Process) RequirePeakRSSUnder(t testing.TB, limit int64) int64 {
	t.Helper()
	rss := p.peakRSS(t)
	if rss >= limit {
		t.Errorf("peak RSS %.1f MiB, want under %.1f MiB", float64(rss)/(1<<20), float64(limit)/(1<<20))
	}
	return rss
}

// peakRSS is the process's peak resident set size (VmHWM), in bytes.
func (p *Process) peakRSS(t testing.TB) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM line %q: %v", line, err)
			}
			return kib << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// AwaitOK waits until the trace at path holds at least n events of eventType whose outcome is
// ok — for a read or a redeem, the moment its snapshot exists, before any byte is sent — and
// fails the test when that takes longer than within.
func AwaitOK(t testing.TB, path, eventType string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := 0
		for _, e := range Events(t, path) {
			if e.M["event_type"] == eventType && e.M["outcome"] == "ok" {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s events with outcome ok after %v, want %d", got, eventType, within, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Dripper is a client that reads its answer slowly but steadily: chunk bytes every interval,
// through a small receive buffer, so the service's send buffer fills and it sees progress all
// the same. Its connection is closed when the test ends.
type Dripper struct {
	conn net.Conn
	read atomic.Int64
	done chan struct{}
}

// Drip sends request to addr and then reads chunk bytes of the answer every interval until
// the service closes the connection or the test ends.
func Drip(t testing.TB, addr, request string, chunk int, interval time.Duration) *Dripper {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	dr := &Dripper{conn: conn, done: make(chan struct{})}
	t.Cleanup(func() { _ = conn.Close(); <-dr.done })
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(dr.done)
		buf := make([]byte, chunk)
		for {
			n, err := io.ReadFull(conn, buf)
			dr.read.Add(int64(n))
			if err != nil {
				return
			}
			time.Sleep(interval)
		}
	}()
	return dr
}

// Read is how many bytes of the answer, head included, the dripper has taken so far.
func (d *Dripper) Read() int64 { return d.read.Load() }

// Closed reports whether the service has closed the connection (the dripper has read its end).
func (d *Dripper) Closed() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// AwaitClosed waits up to within for the service to close the dripper's connection and
// returns how long after the call that was, failing the test when it stays open.
func (d *Dripper) AwaitClosed(t testing.TB, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-d.done:
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("the drip reader's connection is still open after %v (%d bytes taken)", within, d.Read())
		return 0
	}
}
