package limits

import (
	"io"
	"net"
	"net/netip"
	"sync"

	"github.com/resplane/resplane/adapters/httpapi/rawtarget"
)

// Caps bound the connections a listener from Listen keeps open. A zero or negative field takes
// its default.
type Caps struct {
	// Total is the most connections open at once (default DefaultMaxConns). While it is
	// reached, Accept waits and further connections wait in the kernel's accept backlog.
	Total int
	// PerAddress is the most connections one client address may hold open at once (default
	// half of Total). A connection beyond it is closed at once, without a byte read or
	// written, so one address can never hold most of the slots; the other addresses keep the
	// rest. An IPv6 client counts by its /64, which one host usually holds whole. Loopback
	// clients are not counted per address: every local client shares 127.0.0.1, and a local
	// process can use any address of 127.0.0.0/8 anyway, so such a cap would only refuse the
	// operator's own bursts; they share Total alone.
	PerAddress int
	// Refused, when set, is called (from Accept's goroutine, so it must not block) with the
	// address of each connection closed for exceeding PerAddress.
	Refused func(remote netip.Addr)
}

// limitListener is a connection cap like golang.org/x/net/netutil.LimitListener, plus the
// per-address cap. Unlike netutil's, its connections keep *net.TCPConn's ReadFrom, so net/http
// can still send a file with sendfile(2) through them.
type limitListener struct {
	net.Listener
	caps  Caps
	slots chan struct{} // one token per open connection
	done  chan struct{} // closed by Close
	once  sync.Once

	mu     sync.Mutex
	byAddr map[netip.Prefix]int
}

func newLimitListener(l net.Listener, caps Caps) *limitListener {
	if caps.Total <= 0 {
		caps.Total = DefaultMaxConns
	}
	if caps.PerAddress <= 0 {
		caps.PerAddress = max(1, caps.Total/2)
	}
	return &limitListener{
		Listener: l, caps: caps,
		slots:  make(chan struct{}, caps.Total),
		done:   make(chan struct{}),
		byAddr: map[netip.Prefix]int{},
	}
}

// Accept waits for a free slot, then for a connection. A connection whose address already
// holds PerAddress connections is closed and Accept goes on waiting for the next one.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		addr := remoteAddr(c)
		if addr.IsLoopback() {
			return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
		}
		key := addressKey(addr)
		if l.admit(key) {
			return &limitedConn{Conn: c, release: func() { l.leave(key) }}, nil
		}
		_ = c.Close()
		<-l.slots
		if l.caps.Refused != nil {
			l.caps.Refused(addr)
		}
	}
}

// admit counts a connection from the address key, unless it already holds PerAddress
// connections.
func (l *limitListener) admit(key netip.Prefix) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[key] >= l.caps.PerAddress {
		return false
	}
	l.byAddr[key]++
	return true
}

// leave gives back a connection's slot and its address key's count.
func (l *limitListener) leave(key netip.Prefix) {
	l.mu.Lock()
	if l.byAddr[key]--; l.byAddr[key] <= 0 {
		delete(l.byAddr, key)
	}
	l.mu.Unlock()
	<-l.slots
}

// addressKey is what the per-address cap counts by: an IPv4 address, or an IPv6 address's /64.
func addressKey(addr netip.Addr) netip.Prefix {
	bits := addr.BitLen()
	if addr.Is6() {
		bits = 64
	}
	key, err := addr.Prefix(bits)
	if err != nil {
		// The zero Addr (no IP address at all): such connections share one count.
		return netip.Prefix{}
	}
	return key
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.done) })
	return err
}

// remoteAddr is the client's IP address, IPv4-mapped IPv6 addresses as IPv4; the zero Addr
// when the connection has no IP address (all such connections share one count).
func remoteAddr(c net.Conn) netip.Addr {
	if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return tcp.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// limitedConn gives its slot back when it is first closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// ReadFrom hands r to the connection's own ReadFrom (sendfile(2) or splice(2) for a
// *net.TCPConn) when it has one, else copies.
func (c *limitedConn) ReadFrom(r io.Reader) (int64, error) {
	return rawtarget.ReadFromConn(c.Conn, r)
}
