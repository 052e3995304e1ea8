package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// CA is a test certificate authority: a self-signed root that issues leaves for the black-box
// suites' TLS listeners (docs/operator-guide.md, "TLS").
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the root certificate, for --peer-ca.
	PEM []byte
}

// NewCA makes a fresh root, valid for a day.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "resplane test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool is a certificate pool holding the root alone.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// Leaf issues a server certificate for localhost and 127.0.0.1 with the given serial number,
// and returns it and its private key as PEM.
func (ca *CA) Leaf(t testing.TB, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// TLSResponse is a raw HTTPS answer and the serial number of the certificate that served it.
type TLSResponse struct {
	Response
	Serial int64
}

// GetTLS sends a raw GET for target over TLS to addr, verifying the server against roots for
// the name localhost, and reads until the server closes.
func GetTLS(t testing.TB, addr string, roots *x509.CertPool, target string, headers ...string) TLSResponse {
	t.Helper()
	r, err := ExchangeTLS(addr, &tls.Config{RootCAs: roots, ServerName: "localhost"}, RequestText(addr, "GET", target, headers...))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ExchangeTLS sends request bytes exactly as given over TLS under config and reads the whole
// answer within Deadline; it reports failures, a refused handshake included, as errors.
func ExchangeTLS(addr string, config *tls.Config, request string) (TLSResponse, error) {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", addr, config)
	if err != nil {
		return TLSResponse{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(Deadline))
	state := conn.ConnectionState()
	if _, err := io.WriteString(conn, request); err != nil {
		return TLSResponse{}, err
	}
	raw, err := io.ReadAll(conn)
	if err != nil {
		return TLSResponse{}, fmt.Errorf("no complete response within %v: %v (got %q)", Deadline, err, raw)
	}
	r, err := parse(raw, strings.HasPrefix(request, "HEAD "))
	return TLSResponse{Response: r, Serial: state.PeerCertificates[0].SerialNumber.Int64()}, err
}
