package httpapi

import (
	"net/http"

	"github.com/resplane/resplane/domain/refusal"
)

// statusOf is the one table from refusal code to HTTP status. A code missing from it is a
// programming error and answers 500.
var statusOf = map[refusal.Code]int{
	refusal.NoResourcePlane:  http.StatusNotFound,
	refusal.NoPeerPlane:      http.StatusNotFound,
	refusal.NotFound:         http.StatusNotFound,
	refusal.OutsideRoot:      http.StatusForbidden,
	refusal.SymlinkRefused:   http.StatusForbidden,
	refusal.NotARegularFile:  http.StatusForbidden,
	refusal.TooLarge:         http.StatusRequestEntityTooLarge,
	refusal.MethodNotAllowed: http.StatusMethodNotAllowed,
	refusal.IOError:          http.StatusInternalServerError,
	refusal.MalformedHandle:  http.StatusBadRequest,
	refusal.MissingAudience:  http.StatusBadRequest,
	refusal.HandleNotValid:   http.StatusForbidden,
	refusal.HandleExpired:    http.StatusGone,
	refusal.HostNotAllowed:   http.StatusMisdirectedRequest,
	refusal.BodyNotAllowed:   http.StatusBadRequest,
	refusal.TargetTooLong:    http.StatusRequestURITooLong,
	refusal.InvalidProof:     http.StatusBadRequest,
}

func statusFor(code refusal.Code) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}
