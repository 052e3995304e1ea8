package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/hostpolicy"
)

func TestTheAccessLogNeverRecordsAPeerToken(t *testing.T) {
	token := "mh1.eyJ2IjoxfQ.AAAA"
	encoded := "mh1%2EeyJ2IjoxfQ%2eAAAA"
	cases := []struct {
		rule, target, want string
	}{
		{"a redeem's token is replaced whatever its shape", "/resources/peer/mh1%2EeyJ2IjoxfQ.AAAA", "/resources/peer/" + handle.Placeholder("mh1%2EeyJ2IjoxfQ.AAAA")},
		{"the query of a redeem is kept", "/resources/peer/anything?x=1", "/resources/peer/" + handle.Placeholder("anything") + "?x=1"},
		{"a target without a token is logged as received", "/resources/files/report%2Emd", "/resources/files/report%2Emd"},
		{"the bare peer route has no token", "/resources/peer/", "/resources/peer/"},
		{"an encoded token on a files route is logged decoded and redacted", "/resources/files/" + encoded, "/resources/files/" + handle.Placeholder(token)},
		{"an encoded token on any other route is logged decoded and redacted", "/resources/peerless/" + encoded, "/resources/peerless/" + handle.Placeholder(token)},
		{"an encoded token in the query is logged decoded and redacted", "/resources/files/x?h=" + encoded, "/resources/files/x?h=" + handle.Placeholder(token)},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			if got := loggedTarget(tc.target); got != tc.want {
				t.Fatalf("loggedTarget(%q) = %q; want %q", tc.target, got, tc.want)
			}
		})
	}
}

func TestTheAgentCardIsABare404ForAHostNotAllowed(t *testing.T) {
	e := NewEcho(NewResources(nil, nil, AgentCard{JSON: []byte(`{}`)}, hostpolicy.New("capsule.example"), Send{}), zerolog.New(&bytes.Buffer{}))
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
	e := NewEcho(NewResources(nil, nil, AgentCard{}, hostpolicy.New(), Send{}), zerolog.New(&bytes.Buffer{}))
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
