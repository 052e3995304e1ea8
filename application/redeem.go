package application

import (
	"context"
	"strings"

	"github.com/resplane/resplane/domain/audience"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/ports"
)

// PeerIssuer is what both halves of the peer plane that touch handles share: this process's
// session id (a handle's iss) and its instance key.
type PeerIssuer struct {
	SessionID string
	Key       *Keyring // used only when exports.peer_files is declared
}

// Redeem is the peer plane's one verb, GET /resources/peer/<token> (docs/peer-plane.md,
// "Redeem"). It runs the checks in their documented order and evaluates nothing downstream of
// the MAC before the MAC has verified. It keeps no per-handle state: a handle redeems as often
// as its holder likes until it expires or this process ends. The one memory it keeps is of the
// proofs bound redeems used, so that each proof is accepted once (Replays).
type Redeem struct {
	plane   *ExportPlane // nil when exports.peer_files is not declared
	issuer  PeerIssuer
	proofs  Proofs
	replays *Replays // the proofs of bound redeems
	session Session
	fs      ports.ExportFS
	reader  *Reader
	clock   ports.Clock
	trace   ports.TraceSink
}

// NewRedeem returns the redeem use case. plane is nil when the manifest declares no
// exports.peer_files.
func NewRedeem(plane *ExportPlane, issuer PeerIssuer, proofs Proofs, session Session, fs ports.ExportFS, reader *Reader,
	clock ports.Clock, sink ports.TraceSink) *Redeem {
	u := &Redeem{plane: plane, issuer: issuer, proofs: proofs, replays: NewReplays(DefaultReplayCapacity), session: session,
		fs: fs, reader: reader, clock: clock, trace: sink}
	return u
}

// RedeemRequest is one redeem as received.
type RedeemRequest struct {
	Request
	// Rest is the raw target after "/resources/peer": "", "/" or "/<token>".
	Rest string
	// Audience is the last x-murmur-audience header's value; AudienceSent is false when the
	// request carried none.
	Audience     string
	AudienceSent bool
	// Proofs are the values of the request's DPoP headers, none when it carried none; Host is
	// its Host header. A proof must name the request's Host and raw path.
	Proofs []string
	Host   string
}

// RedeemAnswer is what a redeem reports besides its body. Traced is false for the answers to a
// request that is not a GET with a token (a wrong method, no token), which carry no plane
// headers.
type RedeemAnswer struct {
	Traced     bool
	Generation uint64
	HandleID   string
	Served     *Served
}

// Do runs one redeem. A refusal is returned as err alongside the answer's headers.
//
// The checks every route shares come first (Admit). A GET with a token is a redeem: it is
// traced, whichever check refuses it, the shared ones included. Anything else — another
// method, or /resources/peer with no token — is answered untraced.
func (u *Redeem) Do(ctx context.Context, req RedeemRequest) (RedeemAnswer, error) {
	token := strings.TrimPrefix(req.Rest, "/")
	admitted := Admit(req.Request)
	if req.Method != ServedMethod || token == "" {
		if admitted == nil {
			admitted = refusal.New(refusal.NotFound)
		}
		return RedeemAnswer{}, admitted
	}
	answer := RedeemAnswer{Traced: true, Generation: u.session.Generation.Current(), HandleID: handle.ID(token)}
	asserted := audience.Asserted(req.Audience)
	var p string
	var body *Body
	err := admitted
	if err == nil {
		p, body, err = u.redeem(ctx, req, token, asserted)
	}
	event := trace.PeerHandleRedeem{
		HandleID: answer.HandleID, Audience: asserted, AudienceSent: req.AudienceSent,
		Generation: answer.Generation, Err: err,
	}
	if err == nil {
		event.Path, event.Bytes, event.SHA256 = p, body.Size, body.SHA256
		answer.Served = &Served{Body: body, Containment: u.session.Containment}
	}
	u.trace.Record(event)
	return answer, err
}

// redeem runs checks 3–10 (docs/peer-plane.md, "Redeem"), with the proof of possession's
// 5b and 6b (docs/peer-plane.md, "Proof of possession"), and returns the handle's path and the
// body. An absent audience header reaches here as "", which is refused missing_audience after
// the shape, as a blank one is.
func (u *Redeem) redeem(ctx context.Context, req RedeemRequest, token, audience string) (string, *Body, error) {
	if u.plane == nil {
		return "", nil, refusal.New(refusal.NoPeerPlane)
	}
	t, err := handle.ParseShape(token)
	if err != nil {
		return "", nil, err
	}
	if err := handle.RequireAudience(audience); err != nil {
		return "", nil, err
	}
	now := u.clock.Now()
	target := proof.Target{Method: req.Method, Path: handle.RedeemPath(token), Host: req.Host}
	jkt, jti, err := u.proofs.check(req.Proofs, target, now)
	if err != nil {
		return "", nil, err
	}
	bound, err := u.issuer.Key.verifyMAC(t, audience, jkt)
	if err != nil {
		return "", nil, err
	}
	if bound {
		if err := u.replays.Remember(jkt, jti, now); err != nil {
			return "", nil, err
		}
	}
	payload, err := t.Check(u.issuer.SessionID, now.UnixMilli())
	if err != nil {
		return "", nil, err
	}
	// p was decoded once when it was minted; it is lowered again, never decoded again.
	rel, err := pathpolicy.Lower(payload.P)
	if err != nil {
		return "", nil, err
	}
	body, err := openAndRead(ForClient(ctx, req.Client), u.fs, u.reader, u.plane, rel, u.session.Containment)
	if err != nil {
		return "", nil, err
	}
	return payload.P, body, nil
}
