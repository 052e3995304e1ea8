package limits

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// dialFrom connects to addr from the loopback address local, so one test can be several
// client addresses.
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// fromConn is one end of a pipe that says it comes from a given address.
type fromConn struct {
	net.Conn
	remote net.Addr
	closed chan struct{}
}

func (c *fromConn) RemoteAddr() net.Addr { return c.remote }
func (c *fromConn) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return c.Conn.Close()
}

// queueListener hands out the connections pushed into it, in order.
type queueListener struct {
	conns chan *fromConn
	done  chan struct{}
}

func newQueueListener() *queueListener {
	return &queueListener{conns: make(chan *fromConn, 16), done: make(chan struct{})}
}

func (l *queueListener) push(ip string) *fromConn {
	server, _ := net.Pipe()
	c := &fromConn{Conn: server, remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}, closed: make(chan struct{})}
	l.conns <- c
	return c
}

func (l *queueListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *queueListener) Close() error   { close(l.done); return nil }
func (l *queueListener) Addr() net.Addr { return &net.TCPAddr{} }

// acceptAsync runs one Accept and returns where its connection arrives.
func acceptAsync(l net.Listener) <-chan net.Conn {
	got := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			got <- c
		}
	}()
	return got
}

func accepted(t *testing.T, got <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-got:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("Accept returned nothing")
		return nil
	}
}

func TestOneAddressHoldsAtMostItsShareOfTheSlots(t *testing.T) {
	var mu sync.Mutex
	var refused []netip.Addr
	inner := newQueueListener()
	l := newLimitListener(inner, Caps{Total: 8, PerAddress: 2, Refused: func(a netip.Addr) {
		mu.Lock()
		defer mu.Unlock()
		refused = append(refused, a)
	}})
	defer l.Close()

	inner.push("203.0.113.7")
	first := accepted(t, acceptAsync(l))
	inner.push("203.0.113.7")
	accepted(t, acceptAsync(l))
	// The third from the same address is closed at once; Accept goes on to the next one.
	third := inner.push("203.0.113.7")
	other := inner.push("198.51.100.1")
	got := accepted(t, acceptAsync(l))
	if got.RemoteAddr().String() != other.remote.String() {
		t.Fatalf("Accept handed out %v; want the other address's connection", got.RemoteAddr())
	}
	select {
	case <-third.closed:
	default:
		t.Fatal("the connection beyond the address's share was not closed")
	}
	mu.Lock()
	if len(refused) != 1 || refused[0] != netip.MustParseAddr("203.0.113.7") {
		t.Errorf("Refused saw %v, want [203.0.113.7]", refused)
	}
	mu.Unlock()

	// Closing one connection gives the address its slot back.
	_ = first.Close()
	again := inner.push("203.0.113.7")
	if c := accepted(t, acceptAsync(l)); c.RemoteAddr() != again.remote {
		t.Fatalf("Accept handed out %v; want the address's new connection", c.RemoteAddr())
	}
}

func TestAddressesAreCountedByIPv4AddressAndIPv6Slash64(t *testing.T) {
	for _, tc := range []struct {
		rule string
		a, b string
		same bool
	}{
		{"two IPv4 addresses are two clients", "203.0.113.7", "203.0.113.8", false},
		{"two IPv6 addresses in one /64 are one client", "2001:db8:1:2::1", "2001:db8:1:2:ffff::9", true},
		{"two IPv6 /64s are two clients", "2001:db8:1:2::1", "2001:db8:1:3::1", false},
		{"an IPv4-mapped IPv6 address is its IPv4 address", "::ffff:203.0.113.7", "203.0.113.7", true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			key := func(s string) netip.Prefix {
				return addressKey(netip.MustParseAddr(s).Unmap())
			}
			if same := key(tc.a) == key(tc.b); same != tc.same {
				t.Fatalf("%s and %s counted together: %v, want %v", tc.a, tc.b, same, tc.same)
			}
		})
	}
}

func TestLoopbackClientsShareOnlyTheTotalCap(t *testing.T) {
	addr := serve(t, Options{}, Caps{Total: 4, PerAddress: 1})
	// Three connections from 127.0.0.1 that have not finished their header, beyond a
	// per-address cap of 1: the fourth is still served.
	for range 3 {
		_, _ = io.WriteString(dialFrom(t, "127.0.0.1", addr), "GET /held HTTP/1.1\r\n")
	}
	time.Sleep(100 * time.Millisecond)
	c := dialFrom(t, "127.0.0.1", addr)
	if status, body := roundTrip(t, c, "GET /fourth HTTP/1.1\r\nHost: x\r\n\r\n"); status != 200 || body != "/fourth" {
		t.Fatalf("a local client beyond the per-address cap was not served: %d %q", status, body)
	}
}

func TestThePerAddressCapDefaultsToHalfTheSlots(t *testing.T) {
	for _, tc := range []struct {
		rule  string
		caps  Caps
		total int
		per   int
	}{
		{"no caps given: 256 slots, 128 per address", Caps{}, DefaultMaxConns, DefaultMaxConns / 2},
		{"a total alone: half of it per address", Caps{Total: 10}, 10, 5},
		{"a total of one: one per address", Caps{Total: 1}, 1, 1},
		{"both given: both kept", Caps{Total: 10, PerAddress: 9}, 10, 9},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			l := newLimitListener(nil, tc.caps)
			if cap(l.slots) != tc.total || l.caps.PerAddress != tc.per {
				t.Fatalf("total %d, per address %d; want %d, %d", cap(l.slots), l.caps.PerAddress, tc.total, tc.per)
			}
		})
	}
}

func TestCloseWakesAnAcceptWaitingForASlot(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(tcp, Caps{Total: 1})
	c := dialFrom(t, "127.0.0.1", tcp.Addr().String())
	held, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_ = c
	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }()
	time.Sleep(50 * time.Millisecond)
	_ = l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waiting after Close")
	}
}

// readFromRecorder is a TCP connection that records what its ReadFrom was handed.
type readFromRecorder struct {
	*net.TCPConn
	mu   sync.Mutex
	srcs []string
}

func (c *readFromRecorder) ReadFrom(r io.Reader) (int64, error) {
	c.mu.Lock()
	if lr, ok := r.(*io.LimitedReader); ok {
		r = lr.R
	}
	// What net's sendfile path takes: any reader with a descriptor (*os.File, or io.Copy's
	// wrapper of one).
	if _, ok := r.(syscall.Conn); ok {
		c.srcs = append(c.srcs, "file")
	} else {
		c.srcs = append(c.srcs, "other")
	}
	c.mu.Unlock()
	return c.TCPConn.ReadFrom(r)
}

// recordingListener hands out readFromRecorder connections.
type recordingListener struct {
	net.Listener
	conns chan *readFromRecorder
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &readFromRecorder{TCPConn: c.(*net.TCPConn)}
	l.conns <- rc
	return rc, nil
}

// TestAFileBodyReachesTheTCPConnectionsReadFrom pins that neither the connection cap nor the
// raw-target wrapper hides the TCP connection's ReadFrom from net/http: a body copied from a
// file reaches it as the file itself, which is what lets the kernel send it with sendfile(2).
func TestAFileBodyReachesTheTCPConnectionsReadFrom(t *testing.T) {
	path := filepath.Join(t.TempDir(), "body")
	content := make([]byte, 100_000)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inner := recordingListener{Listener: tcp, conns: make(chan *readFromRecorder, 1)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(path)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Length", strconv.Itoa(len(content)))
		_, _ = io.Copy(w, f)
	})}
	Harden(srv, Options{})
	go func() { _ = srv.Serve(Listen(inner, Caps{})) }()
	t.Cleanup(func() { _ = srv.Close() })

	c := dialFrom(t, "127.0.0.1", tcp.Addr().String())
	_, _ = io.WriteString(c, "GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || len(body) != len(content) {
		t.Fatalf("body of %d bytes (%v), want %d", len(body), err, len(content))
	}
	rc := <-inner.conns
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.srcs) != 1 || rc.srcs[0] != "file" {
		t.Fatalf("the TCP connection's ReadFrom saw %v; want the file itself", rc.srcs)
	}
}
