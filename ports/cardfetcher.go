package ports

import (
	"context"

	"github.com/resplane/resplane/domain/destination"
)

// CardFetcher reads a peer capsule's agent card, for share-file's audience derivation.
//
// FetchCard asks GET /.well-known/agent-card.json on the peer's scheme, host and port (never
// on a path of the peer string), with bounded connect and overall time, a bounded body
// (64 KiB) and no redirects followed. Any failure — transport, TLS verification, a status
// other than 200, a body that is not a JSON object — is an error; the caller treats every
// error alike (peer_unreachable), so its text is for logs only and never holds a token.
// A card whose name or url is absent, not a string or blank is returned with that field empty;
// a card that advertises no usable proof key (docs/peer-plane.md, "Proof of possession") is
// returned without one.
type CardFetcher interface {
	FetchCard(ctx context.Context, peer destination.Peer) (PeerCard, error)
}

// PeerCard is what share-file reads from a peer's card.
type PeerCard struct {
	Name string
	URL  string
	// ProofKey is the Ed25519 public key the peer proves possession with, from its card's
	// peer-plane extension (proof.ParseJWK); nil when the card offers none.
	ProofKey []byte
}
