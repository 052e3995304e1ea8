package blackbox_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbMetricsSlots is the metrics listener's connection cap (docs/operator-guide.md, "The
// metrics listener").
const bbMetricsSlots = 16

// TestProbesAreAnsweredWhileHalfRequestsHoldEveryMetricsSlot pins docs/operator-guide.md,
// "The metrics listener" and "Threat model": any process that can reach the metrics listener
// (in the sidecar example, any pod) holds all 16 of its slots with connections that send half
// a request line and reconnect as soon as they are closed; meanwhile every liveness and
// readiness probe is still answered within 1 s, because a connection without a request in the
// handler gives its slot to a new one. A half-sent request is closed after the listener's 2 s
// header timeout.
func TestProbesAreAnsweredWhileHalfRequestsHoldEveryMetricsSlot(t *testing.T) {
	p := harness.Start(t, harness.Capsule{
		Manifest: bbFilesManifest("out/", ""),
		Files:    fixture.Layout{"out/a.txt": "a"},
		Args:     []string{"--metrics-listen", "127.0.0.1:0"},
	})
	metrics := *p.Ready.Metrics

	// The half-request holders: each dials, sends half a request line and waits for the
	// service to close it, then dials again, until the test is done.
	stop := make(chan struct{})
	var holders sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	for range bbMetricsSlots {
		holders.Add(1)
		go func() {
			defer holders.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.Dial("tcp", metrics)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				mu.Lock()
				open = append(open, c)
				mu.Unlock()
				_, _ = io.WriteString(c, "GET /heal")
				_, _ = io.Copy(io.Discard, c) // until the service closes it (or the test does)
				_ = c.Close()
			}
		}()
	}
	defer func() {
		close(stop)
		mu.Lock()
		for _, c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		holders.Wait()
	}()
	time.Sleep(200 * time.Millisecond) // let the holders take every slot

	// Probes over more than one header timeout, so that the holders' own reconnects run too.
	for i := range 12 {
		path, want := "/healthz", "ok\n"
		if i%2 == 1 {
			path, want = "/readyz", "ready\n"
		}
		start := time.Now()
		r := harness.RawWithin(t, metrics, "GET "+path+" HTTP/1.0\r\nHost: "+metrics+"\r\n\r\n", time.Second)
		if r.Status != http.StatusOK || string(r.Body) != want {
			t.Fatalf("probe %d of %s answered %d %q, want 200 %q", i, path, r.Status, r.Body, want)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("probe %d of %s took %v", i, path, took)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestTheMetricsListenerClosesAHalfRequestAfterTwoSeconds pins the metrics listener's 2 s
// header timeout, whatever --read-header-timeout says.
func TestTheMetricsListenerClosesAHalfRequestAfterTwoSeconds(t *testing.T) {
	p := harness.Start(t, harness.Capsule{
		Manifest: bbFilesManifest("out/", ""),
		Files:    fixture.Layout{"out/a.txt": "a"},
		Args:     []string{"--metrics-listen", "127.0.0.1:0", "--read-header-timeout", "30s"},
	})
	c, err := net.Dial("tcp", *p.Ready.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, "GET /healthz HT"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.Copy(io.Discard, c)
	if took := time.Since(start); took < 1500*time.Millisecond || took > 4*time.Second {
		t.Fatalf("the half-sent request was closed after %v, want about 2 s", took)
	}
}

// TestMetricsAnswerOnlyTheHostsTheResourceListenerAnswers pins docs/operator-guide.md, "The
// metrics listener": /metrics applies the resource listener's Host rule (an IP literal,
// localhost, the advertise URL's host, an --allowed-hosts name; anything else 421), so a page
// in a browser that rebinds a name to the listener cannot read the metrics; the probes answer
// any Host (a kubelet probes by the pod's address, and they reveal nothing).
func TestMetricsAnswerOnlyTheHostsTheResourceListenerAnswers(t *testing.T) {
	p := harness.Start(t, harness.Capsule{
		Manifest: bbFilesManifest("out/", ""),
		Files:    fixture.Layout{"out/a.txt": "a"},
		Args:     []string{"--metrics-listen", "127.0.0.1:0", "--allowed-hosts", "reporter.svc"},
	})
	metrics := *p.Ready.Metrics
	for _, tc := range []struct {
		host, path string
		status     int
	}{
		{metrics, "/metrics", http.StatusOK},
		{"localhost:9090", "/metrics", http.StatusOK},
		{"reporter.svc:9090", "/metrics", http.StatusOK},
		{"[::1]:9090", "/metrics", http.StatusOK},
		{"rebound.example", "/metrics", http.StatusMisdirectedRequest},
		{"rebound.example:9090", "/metrics", http.StatusMisdirectedRequest},
		{"rebound.example", "/healthz", http.StatusOK},
		{"rebound.example", "/readyz", http.StatusOK},
	} {
		r := harness.Raw(t, metrics, "GET "+tc.path+" HTTP/1.0\r\nHost: "+tc.host+"\r\n\r\n")
		if r.Status != tc.status {
			t.Errorf("%s with Host %s answered %d, want %d", tc.path, tc.host, r.Status, tc.status)
		}
		if tc.status == http.StatusMisdirectedRequest && (strings.Contains(string(r.Body), "resplane_") || !strings.Contains(string(r.Body), "host_not_allowed")) {
			t.Errorf("the refusal's body %.200q holds metrics or does not name host_not_allowed", r.Body)
		}
	}
}
