package peer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/test/harness"
)

// secretVolume is a directory laid out as Kubernetes mounts a secret: the files are links
// through ..data to a timestamped directory, and an update swaps ..data in one rename
// (docs/operator-guide.md, "TLS").
type secretVolume struct {
	dir     string
	version int
}

func newSecretVolume(t *testing.T, cert, key []byte) *secretVolume {
	t.Helper()
	v := &secretVolume{dir: filepath.Join(t.TempDir(), "tls")}
	if err := os.Mkdir(v.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	v.update(t, cert, key)
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// update writes a new version of the pair and swaps ..data to it, as the kubelet does.
func (v *secretVolume) update(t *testing.T, cert, key []byte) {
	t.Helper()
	v.version++
	version := "..v" + strconv.Itoa(v.version)
	if err := os.Mkdir(filepath.Join(v.dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(v.dir, version, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

func (v *secretVolume) args() []string {
	return []string{"--tls-cert", filepath.Join(v.dir, "tls.crt"), "--tls-key", filepath.Join(v.dir, "tls.key")}
}

// TestAMinterServesTLSAndRotatesItsCertificateWithoutARestart pins docs/operator-guide.md,
// "TLS": under --tls-cert/--tls-key the card is served over https with an https url, a fetcher
// trusting the test CA through --peer-ca mints nothing but fetches a bound handle over https;
// plain HTTP is not answered; a new pair swapped into the secret volume is served within 15 s
// without a restart, behind the Landlock wall where there is one; a broken new pair keeps the
// previous one, logged once.
func TestAMinterServesTLSAndRotatesItsCertificateWithoutARestart(t *testing.T) {
	t.Parallel()
	ca := harness.NewCA(t)
	cert1, key1 := ca.Leaf(t, 1)
	volume := newSecretVolume(t, cert1, key1)
	a := startMinter(t, volume.args()...)
	if !a.Ready.TLS || !strings.HasPrefix(a.Ready.URL, "https://localhost:") {
		t.Fatalf("ready line tls %v url %q, want true and https://localhost:<port>", a.Ready.TLS, a.Ready.URL)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startFetcher(t, "--peer-ca", caFile)

	r := harness.GetTLS(t, a.Ready.Listen, ca.Pool(), "/.well-known/agent-card.json")
	var card struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(r.Body, &card); r.Status != 200 || err != nil || card.URL != a.Ready.URL || r.Serial != 1 {
		t.Fatalf("card over https: %d serial %d %s", r.Status, r.Serial, r.Body)
	}
	if plain, err := harness.Fetch(a.Ready.Listen, "/.well-known/agent-card.json", 3*time.Second); err == nil && plain.Status == 200 {
		t.Fatal("the TLS listener served a plain HTTP request")
	}
	status := harness.Control(t, a.Ready.Control, "GET", "/v1/status", nil)
	if !strings.Contains(string(status.Raw), `"tls":true`) {
		t.Fatalf("status %s, want tls true", status.Raw)
	}

	m := mint(t, a, b.Ready.Listen, "report.md")
	peer := "https://127.0.0.1:" + portOf(a.Ready.Listen)
	got := fetch(t, b, peer, m.Handle)
	if got.Status != 200 {
		t.Fatalf("fetch over https: %d %s", got.Status, got.Raw)
	}
	raw := harness.GetTLS(t, a.Ready.Listen, ca.Pool(), "/resources/peer/"+m.Handle, aud(b.Ready.Audience))
	requireRefusal(t, raw.Response, 403, "handle_not_valid", m.HandleID)

	cert2, key2 := ca.Leaf(t, 2)
	volume.update(t, cert2, key2)
	waitForSerial(t, a, ca, 2, 15*time.Second)
	if got := fetch(t, b, peer, m.Handle); got.Status != 200 {
		t.Fatalf("fetch after the rotation: %d %s", got.Status, got.Raw)
	}

	cert3, _ := ca.Leaf(t, 3)
	volume.update(t, cert3, key2) // a certificate without its key
	time.Sleep(12 * time.Second)  // past the 10 s between looks
	if r := harness.GetTLS(t, a.Ready.Listen, ca.Pool(), "/.well-known/agent-card.json"); r.Serial != 2 {
		t.Fatalf("serial %d after a broken pair, want the previous 2", r.Serial)
	}
	harness.GetTLS(t, a.Ready.Listen, ca.Pool(), "/.well-known/agent-card.json")
	if n := strings.Count(a.Stderr(), "does not load"); n != 1 {
		t.Fatalf("the broken pair was logged %d times, want once:\n%s", n, a.Stderr())
	}
}

// waitForSerial polls the card over TLS until the certificate with serial is served.
func waitForSerial(t *testing.T, p *harness.Process, ca *harness.CA, serial int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := harness.GetTLS(t, p.Ready.Listen, ca.Pool(), "/.well-known/agent-card.json")
		if r.Serial == serial {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still serial %d after %v, want %d", r.Serial, within, serial)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// TestABadTLSSettingIsAUsageError pins docs/operator-guide.md, "TLS": --tls-cert without
// --tls-key, and a pair that does not load, exit 2 with one line on stderr, before anything is
// created.
func TestABadTLSSettingIsAUsageError(t *testing.T) {
	t.Parallel()
	ca := harness.NewCA(t)
	cert, _ := ca.Leaf(t, 1)
	_, otherKey := ca.Leaf(t, 2)
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tls.crt": cert, "other.key": otherKey, "murmur.yaml": []byte(manifestMinter)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	workdir := filepath.Join(dir, "wd")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a certificate without its key", []string{"--tls-cert", filepath.Join(dir, "tls.crt")}, "--tls-cert requires --tls-key"},
		{"a key that is not the certificate's", []string{"--tls-cert", filepath.Join(dir, "tls.crt"), "--tls-key", filepath.Join(dir, "other.key")}, "does not load"},
		{"a missing certificate", []string{"--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", filepath.Join(dir, "other.key")}, "none.crt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--manifest", filepath.Join(dir, "murmur.yaml"), "--workdir", workdir, "--listen", "127.0.0.1:0"}, tc.args...)
			code, out, errOut := cli(t, args...)
			if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line saying %q", code, out, errOut, tc.want)
			}
			if _, err := os.Stat(workdir); !os.IsNotExist(err) {
				t.Fatalf("the refused launch created the workdir (%v)", err)
			}
		})
	}
}
