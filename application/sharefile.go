package application

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/audience"
	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/manifest"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/ports"
)

// SharePlane is the declared exports.peer_files block as share-file needs it.
type SharePlane struct {
	ExportPlane
	MaxTTL time.Duration
}

// ShareFile is the share-file agent tool (docs/peer-plane.md, "share-file"): it mints a handle
// that lets one named peer capsule redeem one file beneath exports.peer_files.root. Minting
// grants no outbound authority: the peer's card is fetched only when capabilities.network.allow
// admits the peer.
type ShareFile struct {
	plane        SharePlane
	networkAllow []destination.Destination
	issuer       PeerIssuer
	proofs       Proofs
	session      Session
	fs           ports.ExportFS
	cards        ports.CardFetcher
	nonces       ports.NonceSource
	clock        ports.Clock
	trace        ports.TraceSink
}

// NewShareFile returns the tool; it exists only when exports.peer_files is declared. proofs'
// mode says whether handles are bound to the key a peer's card advertises.
func NewShareFile(plane SharePlane, networkAllow []destination.Destination, issuer PeerIssuer, proofs Proofs, session Session,
	fs ports.ExportFS, cards ports.CardFetcher, nonces ports.NonceSource, clock ports.Clock, sink ports.TraceSink) *ShareFile {
	return &ShareFile{plane: plane, networkAllow: networkAllow, issuer: issuer, proofs: proofs, session: session, fs: fs,
		cards: cards, nonces: nonces, clock: clock, trace: sink}
}

// ShareInput is the tool's input, exactly as given: nothing is trimmed or repaired. HasTTL is
// false when ttl was absent or not a string (and is then ignored).
type ShareInput struct {
	Path   string
	Peer   string
	TTL    string
	HasTTL bool
}

// ShareResult is the tool's result: exactly these four fields and never a filesystem path. Bound
// is not one of them: it says, for the mint's log line, that the handle is bound to the peer's
// proof key.
type ShareResult struct {
	Handle      string
	HandleID    string
	ExpiresAtMs int64
	Audience    string
	Bound       bool
	// shortenedTo is the lifetime the handle got when the ttl asked for was longer than
	// max_ttl, for the summary; 0 otherwise.
	shortenedTo time.Duration
}

// Summary is the one sentence a tool answer carries (two when the ttl asked for was
// shortened); it names no path and no token.
func (r ShareResult) Summary() string {
	summary := "Minted handle " + r.HandleID + " for " + r.Audience + "; send it to that peer in a message."
	if r.shortenedTo > 0 {
		summary += " The ttl asked for is longer than max_ttl, so the handle expires after " + r.shortenedTo.String() + "."
	}
	return summary
}

// Share runs the tool. Invalid input is refused invalid_input and not traced; every later
// outcome is traced as a peer_handle_mint event.
func (u *ShareFile) Share(ctx context.Context, in ShareInput) (ShareResult, error) {
	ttl, shortened, err := u.ttlFor(in)
	if err != nil {
		return ShareResult{}, err
	}
	event := trace.PeerHandleMint{Path: in.Path}
	result, err := u.share(ctx, in, ttl, &event)
	if shortened {
		result.shortenedTo = ttl
	}
	event.Err = err
	if err == nil {
		event.HandleID, event.ExpiresAtMs = result.HandleID, result.ExpiresAtMs
	}
	u.trace.Record(event)
	return result, err
}

// ttlFor validates the input and returns the handle's lifetime: the given ttl clamped down to
// max_ttl (shortened says it was), or max_ttl when none was given.
func (u *ShareFile) ttlFor(in ShareInput) (ttl time.Duration, shortened bool, err error) {
	if strings.TrimSpace(in.Path) == "" || strings.TrimSpace(in.Peer) == "" {
		return 0, false, refusal.WithMessage(refusal.InvalidInput, `"path" and "peer" are required non-empty strings.`)
	}
	if !in.HasTTL {
		return u.plane.MaxTTL, false, nil
	}
	ttl, err = manifest.ParseTTL(in.TTL)
	if err != nil {
		return 0, false, refusal.WithMessage(refusal.InvalidInput,
			`"ttl" must be a duration: an integer number of seconds, optionally suffixed s, m, h or d (such as "90" or "15m").`)
	}
	return min(ttl, u.plane.MaxTTL), ttl > u.plane.MaxTTL, nil
}

func (u *ShareFile) share(ctx context.Context, in ShareInput, ttl time.Duration, event *trace.PeerHandleMint) (ShareResult, error) {
	peer, err := destination.ParsePeer(in.Peer)
	if err != nil || !destination.AnyMatches(u.networkAllow, peer) {
		return ShareResult{}, refusal.WithMessage(refusal.PeerUnreachable,
			"Refused by policy: the peer is not in capabilities.network.allow, so its agent card may not be fetched "+
				"and nothing was sent to it; to share with this peer, add it to that list in the manifest.")
	}
	card, err := u.cards.FetchCard(ctx, peer)
	if err != nil || strings.TrimSpace(card.Name) == "" || strings.TrimSpace(card.URL) == "" {
		return ShareResult{}, refusal.WithMessage(refusal.PeerUnreachable,
			"The peer's agent card could not be read, or it carries no name and url.")
	}
	aud, err := audience.FromCard(card.Name, card.URL)
	if err != nil {
		return ShareResult{}, refusal.WithMessage(refusal.PeerUnreachable,
			"The peer's agent card carries no usable name and url.")
	}
	event.Audience = aud
	jkt, err := u.binding(card)
	if err != nil {
		return ShareResult{}, err
	}
	canonical, err := u.canonicalPath(in.Path)
	if err != nil {
		return ShareResult{}, err
	}
	event.Path = canonical
	nonce, err := u.nonces.Nonce()
	if err != nil {
		return ShareResult{}, refusal.IO("no random nonce is available").Wrapping(err)
	}
	exp := u.clock.Now().Add(ttl).UnixMilli()
	payload := handle.NewPayload(u.issuer.SessionID, canonical, exp, nonce)
	token := u.issuer.Key.mint(payload, aud, jkt)
	return ShareResult{Handle: token, HandleID: handle.ID(token), ExpiresAtMs: exp, Audience: aud, Bound: jkt != ""}, nil
}

// binding returns the jkt a handle for card's peer is bound to (docs/peer-plane.md, "Proof of
// possession"): the thumbprint of the proof key the card advertises, unless --peer-proof is
// off; "" for an unbound handle. Under --peer-proof required a card without a key is
// peer_key_missing.
func (u *ShareFile) binding(card ports.PeerCard) (string, error) {
	if u.proofs.Mode == proof.Off {
		return "", nil
	}
	jkt := handle.Thumbprint(card.ProofKey)
	if jkt == "" && u.proofs.Mode == proof.Required {
		return "", refusal.WithMessage(refusal.PeerKeyMissing,
			"The peer's agent card advertises no proof key, and --peer-proof required mints only handles bound to one.")
	}
	return jkt, nil
}

// canonicalPath lowers the path argument like a request path and resolves it beneath
// exports.peer_files.root under the class rule, returning the canonical path of the regular
// file it names. The mint does not look at max_bytes: an oversized file is refused at redeem.
func (u *ShareFile) canonicalPath(given string) (string, error) {
	rel, err := pathpolicy.Parse(given)
	if err != nil {
		return "", shareRefusal(err)
	}
	f, err := u.fs.OpenFile(u.plane.Root, rel, u.session.Containment)
	if err != nil {
		return "", shareRefusal(err)
	}
	defer f.Close()
	canonical := f.Path()
	if !utf8.ValidString(canonical) {
		return "", shareRefusal(refusal.New(refusal.OutsideRoot))
	}
	return canonical, nil
}

// shareRefusal keeps a path refusal's code and tells the agent what may be shared instead.
func shareRefusal(err error) error {
	r := refusal.From(err)
	return refusal.WithMessage(r.Code, r.Message+" Only regular files under the declared exports.peer_files.root may be shared.").
		Wrapping(r.Cause())
}
