package peerhttp

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// The bounds on an agent-card fetch (docs/peer-plane.md, "share-file", step 3).
const (
	DefaultCardConnectTimeout = 5 * time.Second
	DefaultCardTimeout        = 10 * time.Second
)

// cardPath is where a peer publishes its agent card.
const cardPath = "/.well-known/agent-card.json"

// CardOptions configures a CardFetcher. Zero durations take the documented defaults.
type CardOptions struct {
	// Roots verifies https peers; nil means the system roots (see LoadRoots).
	Roots *x509.CertPool
	// ConnectTimeout bounds the TCP connect and, separately, the TLS handshake.
	ConnectTimeout time.Duration
	// Timeout bounds the whole fetch, from connecting to the last byte of the body.
	Timeout time.Duration
}

// CardFetcher reads peers' agent cards (ports.CardFetcher). It is safe for concurrent use.
type CardFetcher struct {
	client  *client
	timeout time.Duration
}

var _ ports.CardFetcher = (*CardFetcher)(nil)

// NewCardFetcher returns a CardFetcher with the given options.
func NewCardFetcher(o CardOptions) *CardFetcher {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultCardConnectTimeout
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultCardTimeout
	}
	return &CardFetcher{client: newClient(o.Roots, o.ConnectTimeout), timeout: o.Timeout}
}

// FetchCard sends GET /.well-known/agent-card.json to the peer's scheme, host and port and
// returns the card's top-level name and url, each left empty unless it is a non-blank string
// (returned verbatim), and the proof key its peer-plane extension advertises (proofKeyOf). It fails with a peer_unreachable refusal on a transport or TLS failure,
// on any status but 200 (a redirect included; none is followed), when the whole answer takes
// longer than the timeout, when the body exceeds 64 KiB (nothing beyond that is read), or when
// the body is not a JSON object.
func (f *CardFetcher) FetchCard(ctx context.Context, peer destination.Peer) (ports.PeerCard, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, f.timeout,
		deadline("The peer's agent card did not arrive whole within "+f.timeout.String()+"."))
	defer cancel()
	resp, err := f.client.get(ctx, peer.BaseURL()+cardPath, http.Header{"Accept": {"application/json"}})
	if err != nil {
		return ports.PeerCard{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ports.PeerCard{}, refusal.WithMessage(refusal.PeerUnreachable,
			"The peer answered its agent card request with status "+strconv.Itoa(resp.StatusCode)+", not 200.")
	}
	data, err := readSmall(resp.Body)
	switch {
	case errors.Is(err, errTooBig):
		return ports.PeerCard{}, refusal.WithMessage(refusal.PeerUnreachable, "The peer's agent card is larger than 64 KiB.")
	case err != nil:
		return ports.PeerCard{}, f.client.unreachable(ctx, err)
	}
	card, ok := jsonObject(data)
	if !ok {
		return ports.PeerCard{}, refusal.WithMessage(refusal.PeerUnreachable, "The peer's agent card is not a JSON object.")
	}
	return ports.PeerCard{Name: nonBlank(stringField(card, "name")), URL: nonBlank(stringField(card, "url")),
		ProofKey: proofKeyOf(card)}, nil
}

// proofKeyOf reads the proof key a card advertises (docs/peer-plane.md, "Proof of
// possession"): params.proof_key of the one entry of capabilities.extensions whose uri is the
// peer-plane extension's, read by proof.ParseJWK. It is nil when there is no such entry, when
// there are several (which one would be meant?), or when its key is not exactly an Ed25519
// public JWK: a card that cannot be read this way advertises no key.
func proofKeyOf(card map[string]json.RawMessage) []byte {
	// Maps, not structs: encoding/json would match a struct's field names in any case, and
	// a member is read only under its exact name.
	capabilities, ok := jsonObject(card["capabilities"])
	if !ok {
		return nil
	}
	var extensions []map[string]json.RawMessage
	if json.Unmarshal(capabilities["extensions"], &extensions) != nil {
		return nil
	}
	var key []byte
	found := 0
	for _, ext := range extensions {
		if stringField(ext, "uri") != proof.ExtensionURI {
			continue
		}
		found++
		params, _ := jsonObject(ext["params"])
		key, _ = proof.ParseJWK(params["proof_key"])
	}
	if found != 1 {
		return nil
	}
	return key
}

// nonBlank returns s, or "" when s is only whitespace.
func nonBlank(s string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return s
}
