package application

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/ports"
)

// FetchPeerFile is the fetch-peer-file agent tool (docs/peer-plane.md, "fetch-peer-file"): it
// redeems a handle a peer sent and lands the bytes as a file under the workdir's peer-in/. The
// peer is checked against capabilities.peer_fetch.allow before any connection opens. The body
// is streamed to a temp file while it is hashed and renamed into place only after every check
// passed, so the agent sees a whole, verified file or none.
type FetchPeerFile struct {
	allow    []destination.Destination
	audience string
	limit    int64
	prover   ports.Prover // nil when this capsule proves nothing (--peer-proof off)
	redeemer ports.PeerRedeemer
	inbox    ports.PeerInbox
	clock    ports.Clock
	trace    ports.TraceSink
}

// NewFetchPeerFile returns the tool; it exists only when capabilities.peer_fetch is declared.
// ourAudience is what we assert in x-murmur-audience; limit is the receive limit in bytes;
// prover makes the proof of possession every redeem carries, nil for none.
func NewFetchPeerFile(allow []destination.Destination, ourAudience string, limit int64, prover ports.Prover,
	redeemer ports.PeerRedeemer, inbox ports.PeerInbox, clock ports.Clock, sink ports.TraceSink) *FetchPeerFile {
	return &FetchPeerFile{allow: allow, audience: ourAudience, limit: limit, prover: prover, redeemer: redeemer, inbox: inbox,
		clock: clock, trace: sink}
}

// FetchInput is the tool's input, exactly as given: nothing is trimmed or repaired.
type FetchInput struct {
	Peer   string
	Handle string
}

// FetchResult is the tool's result. The file's bytes are never part of it.
type FetchResult struct {
	Path          string // relative to the workdir
	Bytes         int64
	SHA256        string
	Generation    uint64
	HasGeneration bool
	Peer          string
}

// Summary is the one sentence a tool answer carries; it names no filesystem path and no token
// (docs/control-api.md, "POST /v1/tools/fetch-peer-file"): the result's path field names the
// stored file.
func (r FetchResult) Summary() string {
	return "Stored " + strconv.FormatInt(r.Bytes, 10) + " bytes from the peer as a file; the result's path field names it, so read that file to use it."
}

// handleChars is the alphabet a handle may use; anything else never goes onto a request line.
var handleChars = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// Fetch runs the tool. Invalid input is refused invalid_input and not traced; every later
// outcome is traced as a peer_file_fetch event.
func (u *FetchPeerFile) Fetch(ctx context.Context, in FetchInput) (FetchResult, error) {
	if strings.TrimSpace(in.Peer) == "" || strings.TrimSpace(in.Handle) == "" {
		return FetchResult{}, refusal.WithMessage(refusal.InvalidInput, `"peer" and "handle" are required non-empty strings.`)
	}
	if !handleChars.MatchString(in.Handle) {
		return FetchResult{}, refusal.WithMessage(refusal.InvalidInput, `"handle" may contain only A-Z, a-z, 0-9, ".", "_" and "-".`)
	}
	handleID := handle.ID(in.Handle)
	result, err := u.fetch(ctx, in, handleID)
	event := trace.PeerFileFetch{Peer: in.Peer, HandleID: handleID, Err: err}
	if err == nil {
		event.StoredPath, event.Bytes, event.SHA256 = result.Path, result.Bytes, result.SHA256
	}
	u.trace.Record(event)
	return result, err
}

func (u *FetchPeerFile) fetch(ctx context.Context, in FetchInput, handleID string) (FetchResult, error) {
	peer, err := destination.ParsePeer(in.Peer)
	if err != nil || !destination.AnyMatches(u.allow, peer) {
		return FetchResult{}, refusal.WithMessage(refusal.PeerNotAllowed,
			"Refused by policy: the peer is not in capabilities.peer_fetch.allow, so no connection was made; "+
				"to fetch from this peer, add it to that list in the manifest.")
	}
	hint, hasHint := handle.PeekPath(in.Handle)
	landing, stored, err := u.inbox.Stage(handleID, handleID+"-"+handle.SanitisedBasename(hint, hasHint))
	if err != nil {
		return FetchResult{}, err
	}
	committed := false
	defer func() {
		if !committed {
			landing.Discard()
		}
	}()
	req := ports.PeerRedeemRequest{Peer: peer, Token: in.Handle, Audience: u.audience, Limit: u.limit}
	if req.Proof, err = u.prove(peer, in.Handle); err != nil {
		return FetchResult{}, err
	}
	hash := sha256.New()
	resp, err := u.redeemer.Redeem(ctx, req, io.MultiWriter(landing, hash))
	if err != nil {
		return FetchResult{}, err
	}
	if resp.Status != 200 {
		return FetchResult{}, peerRefusal(resp)
	}
	sum := hex.EncodeToString(hash.Sum(nil))
	if resp.HasETag && resp.ETag != `"sha256:`+sum+`"` {
		return FetchResult{}, refusal.WithMessage(refusal.EtagMismatch,
			"The peer's etag does not describe the bytes received; nothing was stored.")
	}
	if err := landing.Commit(time.Time{}); err != nil {
		return FetchResult{}, err
	}
	committed = true
	return FetchResult{Path: stored, Bytes: resp.Bytes, SHA256: sum, Generation: resp.Generation,
		HasGeneration: resp.HasGeneration, Peer: in.Peer}, nil
}

// prove returns the proof of possession for redeeming token at peer (docs/peer-plane.md,
// "Proof of possession"): htm GET and htu the URL the redeem requests. It is "" when this
// capsule proves nothing.
func (u *FetchPeerFile) prove(peer destination.Peer, token string) (string, error) {
	if u.prover == nil {
		return "", nil
	}
	p, err := u.prover.Prove(proof.Method, peer.BaseURL()+handle.RedeemPath(token), u.clock.Now())
	if err != nil {
		return "", refusal.WithMessage(refusal.IOError, "No proof of possession could be made for the redeem; nothing was fetched.").Wrapping(err)
	}
	return p, nil
}

// peerRefusal turns a peer's non-200 answer into our outcome (refusal.Foreign).
func peerRefusal(resp ports.PeerRedeemResponse) error {
	code := refusal.Foreign(resp.Status, resp.ErrorCode)
	return refusal.WithMessage(code, "The peer refused the redeem ("+string(code)+"); nothing was stored.")
}
