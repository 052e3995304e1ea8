package control

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestEveryRouteAnswersOnlyItsMethod(t *testing.T) {
	e := NewAPI(Status{}, nil, nil, nil, nil, zerolog.Nop()).NewEcho()
	for _, tc := range []struct{ method, path string }{
		{http.MethodOptions, "/v1/status"},
		{http.MethodPost, "/v1/status"},
		{http.MethodOptions, "/v1/tasks/terminal"},
		{http.MethodGet, "/v1/tasks/terminal"},
		{http.MethodDelete, "/v1/tools/share-file"},
		{"FOO", "/v1/tools"},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != http.StatusMethodNotAllowed || !strings.Contains(rec.Body.String(), `"error":"method_not_allowed"`) {
			t.Errorf("%s %s = %d %s; want 405 method_not_allowed", tc.method, tc.path, rec.Code, rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/nothing", nil))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"error":"not_found"`) {
		t.Errorf("GET /v1/nothing = %d %s; want 404 not_found", rec.Code, rec.Body)
	}
}
