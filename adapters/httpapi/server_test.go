package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane/domain/hostpolicy"
)

func TestTheAccessLogNeverRecordsAPeerToken(t *testing.T) {
	cases := map[string]string{
		"/resources/peer/mh1%2EeyJ2IjoxfQ.AAAA":     "/resources/peer/<handle:",
		"/resources/peer/anything?x=1":              "/resources/peer/<handle:",
		"/resources/files/report.md":                "/resources/files/report.md",
		"/resources/peer/":                          "/resources/peer/",
		"/resources/peerless/mh1%2EeyJ2IjoxfQ.AAAA": "/resources/peerless/mh1%2EeyJ2IjoxfQ.AAAA",
	}
	for target, prefix := range cases {
		got := loggedTarget(target)
		if !strings.HasPrefix(got, prefix) || (strings.HasPrefix(target, "/resources/peer/") && len(target) > len("/resources/peer/") && strings.Contains(got, "eyJ2")) {
			t.Errorf("loggedTarget(%q) = %q; want it to start with %q and hold no token", target, got, prefix)
		}
	}
	if got := loggedTarget("/resources/peer/x?y=1"); !strings.HasSuffix(got, ">?y=1") {
		t.Errorf("the query was not kept: %q", got)
	}
}

func TestTheAgentCardIsABare404ForAHostNotAllowed(t *testing.T) {
	e := NewEcho(NewResources(nil, nil, AgentCard{JSON: []byte(`{}`)}, hostpolicy.New("capsule.example")), zerolog.New(&bytes.Buffer{}))
	for host, want := range map[string]int{"capsule.example:8080": http.StatusOK, "rebound.example": http.StatusNotFound} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, agentCardRoute, nil)
		req.Host = host
		e.ServeHTTP(rec, req)
		if rec.Code != want || (want == http.StatusNotFound && rec.Body.Len() != 0) {
			t.Errorf("Host %s: the card answered %d %q; want %d (a bare 404 has no body)", host, rec.Code, rec.Body, want)
		}
	}
}

func TestEveryResourcesRouteRefusesAHostNotAllowedFirst(t *testing.T) {
	e := NewEcho(NewResources(nil, nil, AgentCard{}, hostpolicy.New()), zerolog.New(&bytes.Buffer{}))
	for _, target := range []string{"/resources/zzz", "/resources/"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader("body"))
		req.Host = "rebound.example"
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusMisdirectedRequest || !strings.Contains(rec.Body.String(), `"error":"host_not_allowed"`) {
			t.Errorf("%s answered %d %s; want 421 host_not_allowed before the method and the body", target, rec.Code, rec.Body)
		}
	}
}
