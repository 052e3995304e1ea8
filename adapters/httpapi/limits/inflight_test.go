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
