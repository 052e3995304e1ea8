package application

import "github.com/resplane/resplane/domain/refusal"

// Request is what a use case of either plane is told about one request under /resources/
// besides its route: the facts that the first checks of every route decide on
// (docs/http-api.md, "Routing").
type Request struct {
	// Method is the request method exactly as sent.
	Method string
	// HostAllowed is whether the request's Host is one the listener answers
	// (domain/hostpolicy). The zero Request's is false: it is refused.
	HostAllowed bool
	// HasBody is whether the request declares a body: a Content-Length above zero or any
	// Transfer-Encoding.
	HasBody bool
	// Client is the address the request's reservations of a shared budget (the spool) are
	// counted against, "" for a client the edge cannot tell apart from others (loopback).
	Client string
}

// Admit applies the checks that come first on every route under /resources/, in their
// documented order: the Host (host_not_allowed), the method (method_not_allowed), the body
// (body_not_allowed). It returns nil when the request passes all three.
func Admit(req Request) error {
	switch {
	case !req.HostAllowed:
		return refusal.New(refusal.HostNotAllowed)
	case req.Method != ServedMethod:
		return refusal.New(refusal.MethodNotAllowed)
	case req.HasBody:
		return refusal.New(refusal.BodyNotAllowed)
	}
	return nil
}
