package limits

import (
	"net"
	"syscall"
	"testing"
)

// TestBoundListenersAcceptConnectionsWithoutKeepalive pins Bind's one difference from
// net.Listen: an accepted connection has SO_KEEPALIVE off, where net.Listen's have it on.
func TestBoundListenersAcceptConnectionsWithoutKeepalive(t *testing.T) {
	for _, c := range []struct {
		name   string
		listen func() (net.Listener, error)
		want   int
	}{
		{"Bind turns keepalive off", func() (net.Listener, error) { return Bind("127.0.0.1:0") }, 0},
		{"net.Listen leaves it on, so the check can tell", func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := c.listen()
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			client := dialFrom(t, "127.0.0.1", ln.Addr().String())
			defer client.Close()
			conn, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			raw, err := conn.(*net.TCPConn).SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var got int
			var optErr error
			if err := raw.Control(func(fd uintptr) {
				got, optErr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
			}); err != nil || optErr != nil {
				t.Fatal(err, optErr)
			}
			if got != c.want {
				t.Fatalf("SO_KEEPALIVE = %d, want %d", got, c.want)
			}
		})
	}
}
