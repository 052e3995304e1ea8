package refusal

// The codes only resplane's own clients produce (`resplane files`, `resplane mcp`), for what
// goes wrong on the client's side of the operator plane or the control socket
// (docs/operator-guide.md, "Pulling outputs"). The service never answers with them. The
// client also reports the service's own codes, and etag_mismatch and too_large for a body it
// will not land.
const (
	// ServiceUnreachable: the service could not be reached, did not answer in time, or its
	// answer ended before its content-length.
	ServiceUnreachable Code = "service_unreachable"
	// InvalidListing: the answer to a listing request is not a listing.
	InvalidListing Code = "invalid_listing"
	// UnsafePath: a listed path that the client will not write beneath its target directory.
	UnsafePath Code = "unsafe_path"
	// Interrupted: the pull was stopped (a signal) before this file was mirrored.
	Interrupted Code = "interrupted"
)
