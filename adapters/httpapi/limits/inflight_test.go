package limits

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestAbandonCancelsRunningRequestsAndWaitsForThem(t *testing.T) {
	requests := NewInflight()
	started, cleanedUp := make(chan struct{}), make(chan struct{})
	h := requests.Track(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // a fetch still streaming, say
		close(cleanedUp)     // its deferred cleanup runs before it returns
	}))
	req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(requests.BaseContext(nil))
	go h.ServeHTTP(httptest.NewRecorder(), req)
	<-started
	if !requests.Abandon(5 * time.Second) {
		t.Fatal("abandon gave up on a request that returns once cancelled")
	}
	select {
	case <-cleanedUp:
	default:
		t.Fatal("abandon returned before the request had cleaned up")
	}
}

func TestAbandonGivesUpOnARequestThatIgnoresCancellation(t *testing.T) {
	requests := NewInflight()
	release, started := make(chan struct{}), make(chan struct{})
	defer close(release)
	h := requests.Track(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { close(started); <-release }))
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	<-started
	if requests.Abandon(20 * time.Millisecond) {
		t.Fatal("abandon reported a stuck request as finished")
	}
}

func TestAbandonWithNothingRunningReturnsAtOnce(t *testing.T) {
	if !NewInflight().Abandon(time.Millisecond) {
		t.Fatal("abandon with no request running did not report idle")
	}
}

// TestDrainIsSeenByEveryRequestBeforeItIsCancelled pins Drain and Draining: a request's
// context carries the channel Drain closes, which is open until shutdown begins and closed
// after, while the context itself stays live until Abandon; a context of no Inflight has none.
func TestDrainIsSeenByEveryRequestBeforeItIsCancelled(t *testing.T) {
	requests := NewInflight()
	ctx := requests.BaseContext(nil)
	draining := Draining(ctx)
	if draining == nil {
		t.Fatal("a request's context carries no draining channel")
	}
	select {
	case <-draining:
		t.Fatal("draining is closed before shutdown began")
	default:
	}
	requests.Drain()
	requests.Drain() // twice is harmless
	select {
	case <-draining:
	default:
		t.Fatal("draining is still open after Drain")
	}
	if ctx.Err() != nil {
		t.Fatal("Drain cancelled the request; only Abandon may")
	}
	if Draining(httptest.NewRequest(http.MethodGet, "/", nil).Context()) != nil {
		t.Fatal("a context of no Inflight has a draining channel")
	}
}
