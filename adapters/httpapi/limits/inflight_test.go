package resplane

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestAbandonCancelsRunningRequestsAndWaitsForThem(t *testing.T) {
	requests := newInflight()
	started, cleanedUp := make(chan struct{}), make(chan struct{})
	h := requests.track(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // a fetch still streaming, say
		close(cleanedUp)     // its deferred cleanup runs before it returns
	}))
	req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(requests.baseContext(nil))
	go h.ServeHTTP(httptest.NewRecorder(), req)
	<-started
	if !requests.abandon(5 * time.Second) {
		t.Fatal("abandon gave up on a request that returns once cancelled")
	}
	select {
	case <-cleanedUp:
	default:
		t.Fatal("abandon returned before the request had cleaned up")
	}
}

func TestAbandonGivesUpOnARequestThatIgnoresCancellation(t *testing.T) {
	requests := newInflight()
	release, started := make(chan struct{}), make(chan struct{})
	defer close(release)
	h := requests.track(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { close(started); <-release }))
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	<-started
	if requests.abandon(20 * time.Millisecond) {
		t.Fatal("abandon reported a stuck request as finished")
	}
}

func TestAbandonWithNothingRunningReturnsAtOnce(t *testing.T) {
	if !newInflight().abandon(time.Millisecond) {
		t.Fatal("abandon with no request running did not report idle")
	}
}
