package peerhttp

import (
	"context"
	"crypto/x509"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// The bounds on a redeem (docs/peer-plane.md, "fetch-peer-file", step 4).
const (
	DefaultRedeemConnectTimeout = 10 * time.Second
	DefaultRedeemIdleTimeout    = 30 * time.Second
)

// RedeemOptions configures a Redeemer. Zero durations take the documented defaults.
type RedeemOptions struct {
	// Roots verifies https peers; nil means the system roots (see LoadRoots).
	Roots *x509.CertPool
	// ConnectTimeout bounds the TCP connect and, separately, the TLS handshake.
	ConnectTimeout time.Duration
	// IdleTimeout bounds every wait without progress: from sending the request to its
	// response headers, and between two reads of the body that returned bytes. A body that
	// keeps arriving is never cut off, however long it takes in total.
	IdleTimeout time.Duration
}

// Redeemer redeems handles at peer capsules (ports.PeerRedeemer). It is safe for concurrent
// use.
type Redeemer struct {
	client *client
	idle   time.Duration
}

var _ ports.PeerRedeemer = (*Redeemer)(nil)

// NewRedeemer returns a Redeemer with the given options.
func NewRedeemer(o RedeemOptions) *Redeemer {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultRedeemConnectTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultRedeemIdleTimeout
	}
	return &Redeemer{client: newClient(o.Roots, o.ConnectTimeout), idle: o.IdleTimeout}
}

// copyBuffers recycles the fixed buffer a 200 body is streamed through, so a redeem holds
// 32 KiB of body in memory whatever the file's size.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// Redeem sends GET /resources/peer/<token> with x-murmur-audience, and DPoP when req carries a
// proof, to the peer's scheme, host and port. Every answer reports its status, its first etag header and a well-formed
// x-murmur-generation.
//
// On a 200 the body is streamed into sink through a fixed buffer: a content-length above
// req.Limit is a too_large refusal before any byte is read, and a body that turns out longer
// is a too_large refusal as soon as the byte past req.Limit arrives, so sink never receives
// more than req.Limit bytes. A body shorter than its content-length, or a stall longer than the
// idle timeout, is a peer_unreachable refusal; a failing sink is an io_error refusal (the
// sink's own refusal when it returned one).
//
// Any other status is not an error: at most 64 KiB of its body is read and, when that is a JSON
// object with a non-empty string "error", it becomes ErrorCode. A 3xx is returned this way and
// never followed.
//
// Transport and TLS failures are peer_unreachable refusals. On any error the response is the
// zero value. No error text ever holds the token or the request URL.
func (r *Redeemer) Redeem(ctx context.Context, req ports.PeerRedeemRequest, sink io.Writer) (ports.PeerRedeemResponse, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stalled := deadline("The peer made no progress for " + r.idle.String() + ", so the redeem was abandoned.")
	watchdog := time.AfterFunc(r.idle, func() { cancel(stalled) })
	defer watchdog.Stop()

	header := http.Header{"X-Murmur-Audience": {req.Audience}}
	if req.Proof != "" {
		header["Dpop"] = []string{req.Proof}
	}
	resp, err := r.client.get(ctx, req.Peer.BaseURL()+handle.RedeemPath(req.Token), header)
	if err != nil {
		return ports.PeerRedeemResponse{}, err
	}
	defer resp.Body.Close()
	watchdog.Reset(r.idle)
	body := &progressReader{r: resp.Body, watchdog: watchdog, idle: r.idle}

	out := ports.PeerRedeemResponse{Status: resp.StatusCode}
	out.ETag, out.HasETag = firstHeader(resp.Header, "Etag")
	if g, ok := firstHeader(resp.Header, "X-Murmur-Generation"); ok {
		if n, err := strconv.ParseUint(g, 10, 64); err == nil {
			out.Generation, out.HasGeneration = n, true
		}
	}
	if resp.StatusCode != http.StatusOK {
		if data, err := readSmall(body); err == nil {
			if obj, ok := jsonObject(data); ok {
				out.ErrorCode = stringField(obj, "error")
			}
		}
		return out, nil
	}
	if resp.ContentLength > req.Limit {
		return ports.PeerRedeemResponse{}, refusal.TooLargeFor(req.Limit)
	}
	if out.Bytes, err = r.stream(ctx, body, sink, req.Limit); err != nil {
		return ports.PeerRedeemResponse{}, err
	}
	return out, nil
}

// stream copies body into sink through a pooled buffer and returns the byte count, refusing
// too_large before writing any chunk that would take the total past limit.
func (r *Redeemer) stream(ctx context.Context, body io.Reader, sink io.Writer, limit int64) (int64, error) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	var total int64
	for {
		n, err := body.Read(buf)
		if n > 0 {
			total += int64(n)
			if total > limit {
				return 0, refusal.TooLargeFor(limit)
			}
			if _, werr := sink.Write(buf[:n]); werr != nil {
				return 0, sinkFailure(werr)
			}
		}
		switch {
		case err == io.EOF:
			return total, nil
		case err != nil:
			return 0, r.client.unreachable(ctx, err)
		}
	}
}

// sinkFailure keeps a sink's own refusal and turns any other error into an io_error that
// keeps it as its cause, so no text of it (which may hold a host path) reaches a message.
func sinkFailure(err error) error {
	if _, ok := refusal.As(err); ok {
		return err
	}
	return refusal.WithMessage(refusal.IOError, "The fetched bytes could not be written.").Wrapping(err)
}

// progressReader pushes the watchdog back by idle after every read that returned bytes.
type progressReader struct {
	r        io.Reader
	watchdog *time.Timer
	idle     time.Duration
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.watchdog.Reset(p.idle)
	}
	return n, err
}

// firstHeader returns the first value of the header key and whether there was one.
func firstHeader(h http.Header, key string) (string, bool) {
	values := h.Values(key)
	if len(values) == 0 {
		return "", false
	}
	return values[0], true
}
