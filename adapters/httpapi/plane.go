package httpapi

import (
	"net/http"
	"strings"

	"github.com/resplane/resplane/adapters/httpapi/rawtarget"
	"github.com/resplane/resplane/domain/trace"
)

// PlaneOf names the plane whose route r's raw target is on, by the routing rules
// (docs/http-api.md, "Routing"): trace.PlaneFiles for /resources/files and beneath it,
// trace.PlanePeer for /resources/peer and beneath it, "" for every other target. The metrics adapter times
// requests by it.
func PlaneOf(r *http.Request) string {
	switch path := routedPath(r); {
	case onRoute(path, peerRoute):
		return trace.PlanePeer
	case onRoute(path, filesRoute):
		return trace.PlaneFiles
	default:
		return ""
	}
}

// routedPath is what routing looks at: r's raw target as sent, cut at the first "?".
func routedPath(r *http.Request) string {
	path, _, _ := strings.Cut(rawtarget.OriginalTarget(r), "?")
	return path
}

// onRoute reports whether path is route or beneath it, by whole segments.
func onRoute(path, route string) bool {
	return path == route || strings.HasPrefix(path, route+"/")
}
