package prometheus

import (
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/resplane/resplane/domain/hostpolicy"
)

// scrapeTimeout bounds one scrape; a scrape that would take longer is answered 503.
const scrapeTimeout = 10 * time.Second

// maxScrapesInFlight bounds concurrent scrapes; further ones are answered 503 at once.
const maxScrapesInFlight = 4

// Handler serves the metrics listener (docs/operator-guide.md, "Metrics and tracing"):
//
//   - GET /metrics: the metrics in the Prometheus text format (or OpenMetrics, when asked for),
//     including promhttp's own scrape counters, for a request whose Host hosts allows (an IP
//     literal, localhost, a name the policy holds); any other Host is answered 421
//     "host_not_allowed", so a page in a browser that rebound a name to the listener cannot
//     read the metrics;
//   - GET /healthz: 200 "ok" while the process serves at all (liveness);
//   - GET /readyz: 200 "ready" while ready() is true — from the ready line until shutdown
//     begins — else 503 "not ready" (readiness);
//
// HEAD is answered like GET; any other method 405; any other path 404. errorLog receives the
// errors of gathering metrics; nil discards them.
func (m *Metrics) Handler(ready func() bool, hosts hostpolicy.Policy, errorLog promhttp.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", hostAllowed(hosts, promhttp.InstrumentMetricHandler(m.registry, promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorLog:            errorLog,
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            m.registry,
		MaxRequestsInFlight: maxScrapesInFlight,
		Timeout:             scrapeTimeout,
		EnableOpenMetrics:   true,
	}))))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { plain(w, http.StatusOK, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready() {
			plain(w, http.StatusOK, "ready\n")
			return
		}
		plain(w, http.StatusServiceUnavailable, "not ready\n")
	})
	return mux
}

// hostAllowed answers 421 for a request whose Host hosts does not allow, and hands the others
// to next.
func hostAllowed(hosts hostpolicy.Policy, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts.Allows(r.Host) {
			plain(w, http.StatusMisdirectedRequest, "host_not_allowed: this listener answers /metrics only for an IP address, "+
				"localhost, the advertise URL's host or an --allowed-hosts name\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func plain(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}
