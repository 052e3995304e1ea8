package tlscert_test

import (
	"bytes"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane/adapters/tlscert"
	"github.com/resplane/resplane/test/harness"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// writePair writes a pair under dir, replacing what is there by a rename, as cert-manager
// does.
func writePair(t *testing.T, dir string, cert, key []byte) (certPath, keyPath string) {
	t.Helper()
	certPath, keyPath = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for path, data := range map[string][]byte{certPath: cert, keyPath: key} {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	return certPath, keyPath
}

// serial is the serial number of the certificate the pair serves now.
func serial(t *testing.T, p *tlscert.Pair) int64 {
	t.Helper()
	cert, err := p.Config().GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return cert.Leaf.SerialNumber.Int64()
}

func TestLoadRefusesAMissingOrMismatchedPair(t *testing.T) {
	ca := harness.NewCA(t)
	dir := t.TempDir()
	cert1, key1 := ca.Leaf(t, 1)
	_, key2 := ca.Leaf(t, 2)
	for _, tc := range []struct {
		name, want string
		cert, key  []byte
	}{
		{"a key of another certificate", "does not load", cert1, key2},
		{"a certificate that is not PEM", "does not load", []byte("not a certificate"), key1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, k := writePair(t, t.TempDir(), tc.cert, tc.key)
			if _, err := tlscert.Load(c, k, tlscert.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := tlscert.Load(filepath.Join(dir, "none.crt"), filepath.Join(dir, "none.key"), tlscert.Options{}); err == nil ||
		!strings.Contains(err.Error(), "none.crt") {
		t.Fatalf("Load of missing files = %v, want an error naming the file", err)
	}
}

// TestThePairIsReloadedWhenItChangesAndABrokenOneKeepsTheOld pins docs/operator-guide.md,
// "TLS": a changed pair is picked up by the first handshake once the interval has passed and
// not before; a new pair that does not load leaves the previous one serving and is logged
// once; the pair after it loads again.
func TestThePairIsReloadedWhenItChangesAndABrokenOneKeepsTheOld(t *testing.T) {
	ca := harness.NewCA(t)
	dir := t.TempDir()
	cert1, key1 := ca.Leaf(t, 1)
	certPath, keyPath := writePair(t, dir, cert1, key1)
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	var log bytes.Buffer
	p, err := tlscert.Load(certPath, keyPath, tlscert.Options{Now: clk.Now, Log: zerolog.New(&log)})
	if err != nil {
		t.Fatal(err)
	}
	if serial(t, p) != 1 {
		t.Fatal("not serving the pair loaded at start")
	}
	cert2, key2 := ca.Leaf(t, 2)
	writePair(t, dir, cert2, key2)
	clk.advance(tlscert.CheckInterval - time.Second)
	if got := serial(t, p); got != 1 {
		t.Fatalf("serial %d before the interval passed, want 1", got)
	}
	clk.advance(time.Second)
	if got := serial(t, p); got != 2 {
		t.Fatalf("serial %d once the interval passed, want the new pair's 2", got)
	}

	cert3, _ := ca.Leaf(t, 3)
	writePair(t, dir, cert3, key2) // a certificate without its key: does not load
	for range 3 {
		clk.advance(tlscert.CheckInterval)
		if got := serial(t, p); got != 2 {
			t.Fatalf("serial %d after a broken pair, want the previous 2", got)
		}
	}
	if n := strings.Count(log.String(), "does not load"); n != 1 {
		t.Fatalf("the broken pair was logged %d times, want once:\n%s", n, log.String())
	}
	cert4, key4 := ca.Leaf(t, 4)
	writePair(t, dir, cert4, key4)
	clk.advance(tlscert.CheckInterval)
	if got := serial(t, p); got != 4 {
		t.Fatalf("serial %d after the pair was fixed, want 4", got)
	}
	if !strings.Contains(log.String(), "reloaded the TLS certificate pair") {
		t.Fatalf("no reload was logged:\n%s", log.String())
	}
}

// TestTheConfigSpeaksTLS12AndLaterAndHTTP11Only pins the listener's TLS: a TLS 1.1 client
// and a client offering only h2 fail the handshake; a TLS 1.2 client offering h2 and
// http/1.1 gets http/1.1.
func TestTheConfigSpeaksTLS12AndLaterAndHTTP11Only(t *testing.T) {
	ca := harness.NewCA(t)
	cert, key := ca.Leaf(t, 1)
	certPath, keyPath := writePair(t, t.TempDir(), cert, key)
	p, err := tlscert.Load(certPath, keyPath, tlscert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", p.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	dial := func(cfg *tls.Config) (tls.ConnectionState, error) {
		cfg.RootCAs, cfg.ServerName = ca.Pool(), "localhost"
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
		if err != nil {
			return tls.ConnectionState{}, err
		}
		defer c.Close()
		return c.ConnectionState(), nil
	}
	if _, err := dial(&tls.Config{MaxVersion: tls.VersionTLS11}); err == nil {
		t.Error("a TLS 1.1 client was served")
	}
	if _, err := dial(&tls.Config{NextProtos: []string{"h2"}}); err == nil {
		t.Error("a client offering only h2 was served")
	}
	state, err := dial(&tls.Config{MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil || state.NegotiatedProtocol != "http/1.1" || state.Version != tls.VersionTLS12 {
		t.Fatalf("TLS 1.2 with h2 and http/1.1: %+v, %v; want http/1.1", state.NegotiatedProtocol, err)
	}
}

func TestDirsAreWhereThePairIsReadFrom(t *testing.T) {
	ca := harness.NewCA(t)
	cert, key := ca.Leaf(t, 1)
	real := t.TempDir()
	writePair(t, real, cert, key)
	mounted := t.TempDir()
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join(real, name), filepath.Join(mounted, name)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := tlscert.Load(filepath.Join(mounted, "tls.crt"), filepath.Join(mounted, "tls.key"), tlscert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Dirs(); len(got) != 2 || got[0] != mounted || got[1] != real {
		t.Fatalf("Dirs = %q, want the mounted directory then the one its links lead to: %q, %q", got, mounted, real)
	}
}
