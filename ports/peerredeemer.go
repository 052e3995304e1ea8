package ports

import (
	"context"
	"io"

	"github.com/resplane/resplane/domain/destination"
)

// PeerRedeemer redeems a handle at a peer capsule: GET /resources/peer/<token> on the peer's
// scheme, host and port with x-murmur-audience set (and DPoP when the request has a proof), TLS for https peers, bounded connect time
// and a bounded time without progress while reading, and no redirects followed.
//
// On a 200 it streams the body into sink, never holding it whole, and fails with a
// too_large refusal as soon as the body (by content-length or while streaming) exceeds limit.
// A transport failure, a timeout, or a body shorter than its content-length is a
// peer_unreachable refusal. A non-200 is not an error: it is reported in the response with
// the body's "error" string when the body is a JSON object carrying one.
type PeerRedeemer interface {
	Redeem(ctx context.Context, req PeerRedeemRequest, sink io.Writer) (PeerRedeemResponse, error)
}

// PeerRedeemRequest is one redeem to send. Token must already be known to hold only
// [A-Za-z0-9._-], so it is safe on a request line.
type PeerRedeemRequest struct {
	Peer     destination.Peer
	Token    string
	Audience string
	Limit    int64
	// Proof is the DPoP header's value, a proof of possession made for
	// Peer.BaseURL() + handle.RedeemPath(Token); "" sends none.
	Proof string
}

// PeerRedeemResponse is what came back.
type PeerRedeemResponse struct {
	Status int
	// ErrorCode is the non-empty string "error" of a non-200 JSON object body, else "".
	ErrorCode string
	// ETag is the first etag header; HasETag is false when there was none.
	ETag    string
	HasETag bool
	// Generation is the peer's x-murmur-generation; HasGeneration is false when it was absent
	// or not a non-negative integer.
	Generation    uint64
	HasGeneration bool
	// Bytes is the count of body bytes written to the sink on a 200.
	Bytes int64
}
