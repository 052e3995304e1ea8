package refusal

import "slices"

// declared lists every code this package declares. Known answers from it, so that a consumer
// that must keep to a fixed set of values — a metric label — can tell our codes from anything
// else that travels as an outcome (a peer's own error code, an http_<status>). A test keeps it
// equal to the Code constants of this package.
var declared = []Code{
	NoResourcePlane, NoPeerPlane, NotFound, OutsideRoot, SymlinkRefused, NotARegularFile, TooLarge,
	MethodNotAllowed, IOError, MalformedHandle, MissingAudience, HandleNotValid, HandleExpired,
	InvalidInput, PeerUnreachable, PeerNotAllowed, EtagMismatch, UnknownTool, HostNotAllowed,
	BodyNotAllowed, TargetTooLong, InvalidProof, PeerKeyMissing, ServiceUnreachable, InvalidListing, UnsafePath, Interrupted,
}

// Known reports whether c is one of the codes declared in this package.
func Known(c Code) bool { return slices.Contains(declared, c) }

// Codes returns every code declared in this package, for a test elsewhere that must cover each
// of them (such as the HTTP edge's table from code to status).
func Codes() []Code { return slices.Clone(declared) }
