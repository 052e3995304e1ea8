// Package refusal holds the one error type every refusal of the resource plane travels as.
//
// A refusal is data: a stable machine code and a fixed human sentence. Adapters map the code to
// a transport status in exactly one table; they never render err.Error() of anything else to a
// client. Messages never contain a host path, a token or file content; the only number a
// message ever carries is the max_bytes limit of a too_large refusal.
//
// An unexpected failure — anything that is not a decision to refuse — travels as an io_error
// refusal that keeps its cause (Internal, From): the client sees the generic sentence, and the
// inbound adapter that answers logs the cause once, at error level (Refusal.Cause).
package refusal

import (
	"errors"
	"strconv"
)

// Code is the machine-readable name of a refusal, exactly as it appears on the wire and in the
// trace's outcome field.
type Code string

// The refusal codes of both planes, the agent tools and the control API.
const (
	NoResourcePlane  Code = "no_resource_plane"
	NoPeerPlane      Code = "no_peer_plane"
	NotFound         Code = "not_found"
	OutsideRoot      Code = "outside_root"
	SymlinkRefused   Code = "symlink_refused"
	NotARegularFile  Code = "not_a_regular_file"
	TooLarge         Code = "too_large"
	MethodNotAllowed Code = "method_not_allowed"
	IOError          Code = "io_error"
	MalformedHandle  Code = "malformed_handle"
	MissingAudience  Code = "missing_audience"
	HandleNotValid   Code = "handle_not_valid"
	HandleExpired    Code = "handle_expired"
	InvalidInput     Code = "invalid_input"
	PeerUnreachable  Code = "peer_unreachable"
	PeerNotAllowed   Code = "peer_not_allowed"
	EtagMismatch     Code = "etag_mismatch"
	UnknownTool      Code = "unknown_tool"
	HostNotAllowed   Code = "host_not_allowed"
	BodyNotAllowed   Code = "body_not_allowed"
	TargetTooLong    Code = "target_too_long"
	// InvalidProof: a redeem's DPoP header is not exactly one valid proof of possession for
	// this request, or its proof was already used (docs/peer-plane.md, "Proof of possession").
	InvalidProof Code = "invalid_proof"
	// PeerKeyMissing: share-file under --peer-proof required, for a peer whose agent card
	// advertises no usable proof key.
	PeerKeyMissing Code = "peer_key_missing"
)

// Refusal is a request the service declined, with the sentence that explains why.
type Refusal struct {
	Code    Code
	Message string
	// cause is the internal failure behind an io_error, for the operator's log only.
	cause error
}

// Error returns "code: message"; it exists for logs and tests, never for clients. It never
// includes the cause, which may hold a host path.
func (r *Refusal) Error() string { return string(r.Code) + ": " + r.Message }

// Unwrap returns the cause, so errors.Is and errors.As see through an internal refusal.
func (r *Refusal) Unwrap() error { return r.cause }

// Cause returns what the operator needs to understand an io_error: the internal error it
// wraps, or nil when the message itself describes the failure (IO). It is for logs only.
func (r *Refusal) Cause() error { return r.cause }

// Internal returns the io_error refusal for an unexpected failure: the client sees only the
// generic io_error sentence, and cause is kept for the log (Cause).
func Internal(cause error) *Refusal {
	return &Refusal{Code: IOError, Message: fixedMessages[IOError], cause: cause}
}

// Wrapping returns a copy of r that keeps cause for the log, for a refusal whose message
// already says what failed (such as an io_error naming the step that failed).
func (r *Refusal) Wrapping(cause error) *Refusal {
	wrapped := *r
	wrapped.cause = cause
	return &wrapped
}

// From returns err as a refusal: a refusal, or the refusal err wraps, as it is; anything else
// becomes Internal(err). It is the one place where "an error that is not a refusal is an
// io_error" is decided; nil gives nil.
func From(err error) *Refusal {
	if err == nil {
		return nil
	}
	if r, ok := As(err); ok {
		return r
	}
	return Internal(err)
}

// fixedMessages is the one sentence each code answers with. Codes whose message depends on
// the situation (too_large, io_error, the tool refusals) are built by their own constructors.
var fixedMessages = map[Code]string{
	NoResourcePlane:  "This capsule declares no exports.files, so it has no operator resource plane.",
	NoPeerPlane:      "This capsule declares no exports.peer_files, so it has no peer plane.",
	NotFound:         "The path names nothing under the export root.",
	OutsideRoot:      "The path, or a symlink on it, resolves outside the export root; paths are refused, never normalised.",
	SymlinkRefused:   "A symlink on the path was refused under this session's containment class.",
	NotARegularFile:  "The path names a directory, FIFO, socket or device node; only regular files are served.",
	MethodNotAllowed: "Only GET is allowed under /resources/.",
	MalformedHandle:  "The handle is not a well-formed mh1 handle (mh1.<base64url payload>.<base64url tag>, payload v1 JSON).",
	MissingAudience:  "The x-murmur-audience header is required and must not be empty.",
	HandleNotValid:   "The handle is not valid for this capsule instance and audience.",
	HandleExpired:    "The handle has expired; ask the peer for a new one.",
	IOError:          "The file could not be opened or read.",
	HostNotAllowed:   "The Host header names a host this service does not answer to; it answers IP addresses, localhost, the host of its agent card's url and the names its operator allowed.",
	BodyNotAllowed:   "Requests under /resources/ take no body; send the GET without Content-Length or Transfer-Encoding.",
	TargetTooLong:    "The path is longer than any path that could be served, so it was not looked up; send a shorter path.",
}

// New returns the refusal for code with its fixed message. A code without a fixed message gets
// a generic sentence naming the code, so New never returns an empty message.
func New(code Code) *Refusal {
	if m, ok := fixedMessages[code]; ok {
		return &Refusal{Code: code, Message: m}
	}
	return &Refusal{Code: code, Message: "The request was refused (" + string(code) + ")."}
}

// WithMessage returns a refusal with a caller-chosen message, for the agent tools and control
// API, whose messages explain what was wrong with the input and what is accepted.
func WithMessage(code Code, message string) *Refusal {
	return &Refusal{Code: code, Message: message}
}

// TooLargeFor returns the too_large refusal naming the limit that was exceeded.
func TooLargeFor(maxBytes int64) *Refusal {
	return &Refusal{Code: TooLarge, Message: "The file exceeds the " + strconv.FormatInt(maxBytes, 10) + "-byte limit (max_bytes)."}
}

// IO returns the io_error refusal. detail is the operating system's description of the
// failure (such as "permission denied"); callers must pass text that holds no path and no
// errno number.
func IO(detail string) *Refusal {
	if detail == "" {
		return New(IOError)
	}
	return &Refusal{Code: IOError, Message: "The file could not be opened or read: " + detail + "."}
}

// As reports whether err is (or wraps) a Refusal and returns it.
func As(err error) (*Refusal, bool) {
	var r *Refusal
	if errors.As(err, &r) {
		return r, true
	}
	return nil, false
}

// Is reports whether err is a Refusal with the given code.
func Is(err error, code Code) bool {
	r, ok := As(err)
	return ok && r.Code == code
}
