package httpapi

import (
	"net/http"
	"strings"

	"github.com/resplane/resplane/adapters/httpapi/rawtarget"
)

// The planes PlaneOf names.
const (
	PlaneFiles = "files"
	PlanePeer  = "peer"
)

// PlaneOf names the plane whose route r's raw target is on, by the routing rules
// (docs/http-api.md, "Routing"): PlaneFiles for /resources/files and beneath it, PlanePeer
// for /resources/peer and beneath it, "" for every other target. The metrics adapter times
// requests by it.
func PlaneOf(r *http.Request) string {
	path, _, _ := strings.Cut(rawtarget.OriginalTarget(r), "?")
	switch {
	case path == peerRoute || strings.HasPrefix(path, peerRoute+"/"):
		return PlanePeer
	case path == filesRoute || strings.HasPrefix(path, filesRoute+"/"):
		return PlaneFiles
	default:
		return ""
	}
}
