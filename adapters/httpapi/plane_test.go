package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/resplane/resplane/domain/trace"
)

func TestPlaneOfFollowsTheRoutingRules(t *testing.T) {
	for _, tc := range []struct {
		name, target, want string
	}{
		{"the listing is the files plane", "/resources/files", trace.PlaneFiles},
		{"a read is the files plane", "/resources/files/dir/a.txt", trace.PlaneFiles},
		{"a read with a query is the files plane", "/resources/files/a.txt?x=/resources/peer/", trace.PlaneFiles},
		{"a redeem is the peer plane", "/resources/peer/mh1.a.b", trace.PlanePeer},
		{"the bare peer route is the peer plane", "/resources/peer", trace.PlanePeer},
		{"a whole segment is needed", "/resources/peerless/x", ""},
		{"a files look-alike is no plane", "/resources/filesystem", ""},
		{"an unknown resource route is no plane", "/resources/other", ""},
		{"the agent card is no plane", "/.well-known/agent-card.json", ""},
		{"an encoded route is not decoded", "/resources/%66iles/a.txt", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PlaneOf(httptest.NewRequest(http.MethodGet, tc.target, nil)); got != tc.want {
				t.Fatalf("PlaneOf(%q) = %q, want %q", tc.target, got, tc.want)
			}
		})
	}
}
