package peerhttp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/peerhttp"
	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

const token = "mh1.eyJ2IjoxLCJwIjoicmVwb3J0Lm1kIn0.c2lnbmF0dXJlX2J5dGVz"

func redeemReq(peer destination.Peer, limit int64) ports.PeerRedeemRequest {
	return ports.PeerRedeemRequest{Peer: peer, Token: token, Audience: "fetcher@localhost:4000", Limit: limit}
}

// redeem runs one redeem with a short idle timeout and returns the answer, the error and what
// reached the sink.
func redeem(t *testing.T, o peerhttp.RedeemOptions, req ports.PeerRedeemRequest) (ports.PeerRedeemResponse, []byte, error) {
	t.Helper()
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 2 * time.Second
	}
	var sink bytes.Buffer
	resp, err := peerhttp.NewRedeemer(o).Redeem(context.Background(), req, &sink)
	if err != nil && strings.Contains(err.Error(), "mh1.") {
		t.Errorf("error text holds the token: %v", err)
	}
	return resp, sink.Bytes(), err
}

func fileHandler(body []byte, header map[string][]string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}
}

func TestRedeemSendsTheTokenAndAudienceAndStreamsTheBody(t *testing.T) {
	body := make([]byte, 3<<20+17)
	rand.Read(body)
	var got *http.Request
	srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		got = r
		fileHandler(body, map[string][]string{
			"Etag":                {`"sha256:abc"`},
			"X-Murmur-Generation": {"3"},
		})(w, r)
	})
	peer := peerOf(t, srv.URL+"/ignored/path")

	resp, sunk, err := redeem(t, peerhttp.RedeemOptions{}, redeemReq(peer, int64(len(body))))
	if err != nil {
		t.Fatal(err)
	}
	want := ports.PeerRedeemResponse{Status: 200, ETag: `"sha256:abc"`, HasETag: true, Generation: 3, HasGeneration: true, Bytes: int64(len(body))}
	if resp != want {
		t.Errorf("response = %+v, want %+v", resp, want)
	}
	if !bytes.Equal(sunk, body) {
		t.Errorf("sink got %d bytes that differ from the %d sent", len(sunk), len(body))
	}
	if got.Method != http.MethodGet || got.URL.RequestURI() != "/resources/peer/"+token {
		t.Errorf("request = %s %s", got.Method, got.URL.RequestURI())
	}
	if a := got.Header.Values("X-Murmur-Audience"); len(a) != 1 || a[0] != "fetcher@localhost:4000" {
		t.Errorf("x-murmur-audience = %q", a)
	}
	if enc := got.Header.Get("Accept-Encoding"); enc != "" {
		t.Errorf("accept-encoding = %q; compression must not be requested", enc)
	}
}

func TestRedeemReportsTheFirstEtagAndOnlyAWellFormedGeneration(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header map[string][]string
		want   ports.PeerRedeemResponse
	}{
		{"neither", nil, ports.PeerRedeemResponse{}},
		{"first etag of two", map[string][]string{"Etag": {`"one"`, `"two"`}}, ports.PeerRedeemResponse{ETag: `"one"`, HasETag: true}},
		{"empty etag is present", map[string][]string{"Etag": {""}}, ports.PeerRedeemResponse{HasETag: true}},
		{"generation 0", map[string][]string{"X-Murmur-Generation": {"0"}}, ports.PeerRedeemResponse{HasGeneration: true}},
		{"largest generation", map[string][]string{"X-Murmur-Generation": {"18446744073709551615"}},
			ports.PeerRedeemResponse{Generation: 1<<64 - 1, HasGeneration: true}},
		{"overflowing generation", map[string][]string{"X-Murmur-Generation": {"18446744073709551616"}}, ports.PeerRedeemResponse{}},
		{"negative generation", map[string][]string{"X-Murmur-Generation": {"-1"}}, ports.PeerRedeemResponse{}},
		{"signed generation", map[string][]string{"X-Murmur-Generation": {"+1"}}, ports.PeerRedeemResponse{}},
		{"text generation", map[string][]string{"X-Murmur-Generation": {"three"}}, ports.PeerRedeemResponse{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, peer := serve(t, fileHandler([]byte("x"), tc.header))
			resp, _, err := redeem(t, peerhttp.RedeemOptions{}, redeemReq(peer, 10))
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Status, tc.want.Bytes = 200, 1
			if resp != tc.want {
				t.Errorf("response = %+v, want %+v", resp, tc.want)
			}
		})
	}
}

func TestRedeemRefusesTooLargeByContentLengthBeforeReading(t *testing.T) {
	_, peer := serve(t, fileHandler(bytes.Repeat([]byte("a"), 101), nil))
	resp, sunk, err := redeem(t, peerhttp.RedeemOptions{}, redeemReq(peer, 100))
	wantRefusal(t, err, refusal.TooLarge, "100-byte limit")
	if len(sunk) != 0 || resp != (ports.PeerRedeemResponse{}) {
		t.Errorf("sink got %d bytes, response %+v; want nothing", len(sunk), resp)
	}
}

func TestRedeemAcceptsABodyOfExactlyTheLimit(t *testing.T) {
	_, peer := serve(t, fileHandler(bytes.Repeat([]byte("a"), 100), nil))
	resp, sunk, err := redeem(t, peerhttp.RedeemOptions{}, redeemReq(peer, 100))
	if err != nil || resp.Bytes != 100 || len(sunk) != 100 {
		t.Fatalf("bytes = %d, sunk %d, err = %v; want 100, 100, nil", resp.Bytes, len(sunk), err)
	}
}

func TestRedeemRefusesTooLargeWhileStreamingABodyWithoutLength(t *testing.T) {
	const limit = 100 << 10
	_, peer := serve(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("a"), 8<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	_, sunk, err := redeem(t, peerhttp.RedeemOptions{}, redeemReq(peer, limit))
	wantRefusal(t, err, refusal.TooLarge)
	if len(sunk) > limit {
		t.Errorf("sink got %d bytes, more than the %d-byte limit", len(sunk), limit)
	}
}

func TestRedeemRefusesABodyShorterThanItsContentLength(t *testing.T) {
	_, peer := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n0123456789")
		buf.Flush()
	})
	_, _, err := redeem(t, peerhttp.RedeemOptions{}, redeemReq(peer, 1000))
	wantRefusal(t, err, refusal.PeerUnreachable, "ended before its content-length")
}

func TestRedeemAbandonsAPeerThatStalls(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"before the headers", func(_ http.ResponseWriter, r *http.Request) { hang(r) }},
		{"mid-body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			w.Write(make([]byte, 100))
			w.(http.Flusher).Flush()
			hang(r)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, peer := serve(t, tc.handler)
			start := time.Now()
			_, _, err := redeem(t, peerhttp.RedeemOptions{IdleTimeout: 200 * time.Millisecond}, redeemReq(peer, 1000))
			wantRefusal(t, err, refusal.PeerUnreachable, "no progress for 200ms")
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("took %v with a 200ms idle bound", elapsed)
			}
		})
	}
}

func TestRedeemReportsANon200WhoseBodyStallsWithoutAnErrorCode(t *testing.T) {
	_, peer := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"error":`))
		w.(http.Flusher).Flush()
		hang(r)
	})
	resp, _, err := redeem(t, peerhttp.RedeemOptions{IdleTimeout: 200 * time.Millisecond}, redeemReq(peer, 1000))
	if want := (ports.PeerRedeemResponse{Status: http.StatusForbidden}); err != nil || resp != want {
		t.Fatalf("response, err = %+v, %v; want %+v, nil", resp, err, want)
	}
}

func TestRedeemKeepsReadingABodyThatKeepsArriving(t *testing.T) {
	const chunks = 12
	_, peer := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(chunks))
		for range chunks {
			w.Write([]byte("a"))
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	})
	start := time.Now()
	resp, _, err := redeem(t, peerhttp.RedeemOptions{IdleTimeout: 300 * time.Millisecond}, redeemReq(peer, 100))
	if err != nil || resp.Bytes != chunks {
		t.Fatalf("bytes, err = %d, %v; want %d, nil", resp.Bytes, err, chunks)
	}
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
		t.Errorf("took only %v; the test must outlast the idle bound to mean anything", elapsed)
	}
}

func TestRedeemReportsANon200WithThePeersErrorCode(t *testing.T) {
	var redirectTargetHit atomic.Bool
	_, target := serve(t, func(w http.ResponseWriter, r *http.Request) {
		redirectTargetHit.Store(true)
		fileHandler([]byte("redirected"), nil)(w, r)
	})
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"peer refusal", 403, `{"error":"handle_not_valid","message":"The handle is not valid."}`, "handle_not_valid"},
		{"expired", 410, `{"error":"handle_expired"}`, "handle_expired"},
		{"empty error", 404, `{"error":""}`, ""},
		{"error not a string", 400, `{"error":7}`, ""},
		{"not an object", 500, `["handle_not_valid"]`, ""},
		{"null", 500, `null`, ""},
		{"not JSON", 502, `<html>bad gateway</html>`, ""},
		{"empty body", 503, ``, ""},
		{"body over 64 KiB", 403, `{"error":"handle_not_valid","pad":"` + strings.Repeat("x", 64<<10) + `"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, peer := serve(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("X-Murmur-Generation", "4")
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			})
			resp, sunk, err := redeem(t, peerhttp.RedeemOptions{}, redeemReq(peer, 1<<20))
			want := ports.PeerRedeemResponse{Status: tc.status, ErrorCode: tc.want, Generation: 4, HasGeneration: true}
			if err != nil || resp != want {
				t.Errorf("response, err = %+v, %v; want %+v, nil", resp, err, want)
			}
			if len(sunk) != 0 {
				t.Errorf("sink got %q from a non-200", sunk)
			}
		})
	}
	t.Run("redirect", func(t *testing.T) {
		_, peer := serve(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.BaseURL()+r.URL.Path, http.StatusTemporaryRedirect)
		})
		resp, sunk, err := redeem(t, peerhttp.RedeemOptions{}, redeemReq(peer, 1<<20))
		if err != nil || resp.Status != http.StatusTemporaryRedirect || len(sunk) != 0 {
			t.Errorf("response, err, sunk = %+v, %v, %q; want the 307 itself", resp, err, sunk)
		}
		if redirectTargetHit.Load() {
			t.Error("the redirect was followed")
		}
	})
}

func TestRedeemVerifiesTLS(t *testing.T) {
	_, peer, roots := serveTLS(t, fileHandler([]byte("secret"), nil))
	_, sunk, err := redeem(t, peerhttp.RedeemOptions{}, redeemReq(peer, 100))
	wantRefusal(t, err, refusal.PeerUnreachable, "does not verify")
	if len(sunk) != 0 {
		t.Errorf("sink got %q from an unverified peer", sunk)
	}
	resp, sunk, err := redeem(t, peerhttp.RedeemOptions{Roots: roots}, redeemReq(peer, 100))
	if err != nil || resp.Status != 200 || string(sunk) != "secret" {
		t.Fatalf("response, err, sunk = %+v, %v, %q", resp, err, sunk)
	}
}

func TestRedeemErrorsNeverHoldTheTokenOrTheRequestPath(t *testing.T) {
	_, untrusted, _ := serveTLS(t, fileHandler([]byte("x"), nil))
	_, stalling := serve(t, func(_ http.ResponseWriter, r *http.Request) { hang(r) })
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		peer destination.Peer
		o    peerhttp.RedeemOptions
	}{
		{"connection refused", context.Background(), closedPort(t), peerhttp.RedeemOptions{}},
		{"TLS handshake timeout", context.Background(), silentListener(t), peerhttp.RedeemOptions{ConnectTimeout: 100 * time.Millisecond}},
		{"untrusted certificate", context.Background(), untrusted, peerhttp.RedeemOptions{}},
		{"stall", context.Background(), stalling, peerhttp.RedeemOptions{IdleTimeout: 100 * time.Millisecond}},
		{"cancelled", cancelled, stalling, peerhttp.RedeemOptions{}},
		{"unusable address", context.Background(), destination.Peer{Scheme: "http", Host: "bad host", Port: 80}, peerhttp.RedeemOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := peerhttp.NewRedeemer(tc.o).Redeem(tc.ctx, redeemReq(tc.peer, 100), &bytes.Buffer{})
			wantRefusal(t, err, refusal.PeerUnreachable)
			for _, secret := range []string{"mh1.", "/resources/peer", "eyJ2Ijox"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q holds %q", err, secret)
				}
			}
		})
	}
}

type failingSink struct{ err error }

func (s failingSink) Write([]byte) (int, error) { return 0, s.err }

func TestRedeemReportsAFailingSinkAsIOError(t *testing.T) {
	_, peer := serve(t, fileHandler([]byte("payload"), nil))
	own := refusal.WithMessage(refusal.IOError, "The fetched file could not be stored: no space left on device.")
	for _, tc := range []struct {
		name string
		sink error
		want string
	}{
		{"the sink's own refusal", own, own.Message},
		{"any other error, without its text", errors.New("write /host/workdir/peer-in/x: disk full"), "could not be written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := peerhttp.NewRedeemer(peerhttp.RedeemOptions{}).Redeem(context.Background(), redeemReq(peer, 100), failingSink{tc.sink})
			wantRefusal(t, err, refusal.IOError, tc.want)
			if strings.Contains(err.Error(), "/host") {
				t.Errorf("error %q holds the sink's host path", err)
			}
		})
	}
}

func TestRedeemIsSafeForConcurrentUse(t *testing.T) {
	var hits atomic.Int64
	_, peer := serve(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fileHandler([]byte(r.Header.Get("X-Murmur-Audience")), nil)(w, r)
	})
	r := peerhttp.NewRedeemer(peerhttp.RedeemOptions{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			req := redeemReq(peer, 100)
			req.Audience = "fetcher" + strconv.Itoa(i) + "@localhost:1"
			var sink bytes.Buffer
			if _, err := r.Redeem(context.Background(), req, &sink); err != nil || sink.String() != req.Audience {
				t.Errorf("redeem %d: sink %q, err %v", i, sink.String(), err)
			}
		})
	}
	wg.Wait()
	if hits.Load() != 16 {
		t.Errorf("%d requests reached the peer, want 16", hits.Load())
	}
}

func TestRedeemSendsOneDPoPHeaderOnlyWithAProof(t *testing.T) {
	for _, tc := range []struct {
		name, proof string
		want        []string
	}{
		{"with a proof", "eyJ0eXAiOiJkcG9wK2p3dCJ9.e30.c2ln", []string{"eyJ0eXAiOiJkcG9wK2p3dCJ9.e30.c2ln"}},
		{"without one", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			_, peer := serve(t, func(w http.ResponseWriter, r *http.Request) {
				got = r.Header.Values("DPoP")
				fileHandler([]byte("x"), nil)(w, r)
			})
			req := redeemReq(peer, 1<<20)
			req.Proof = tc.proof
			if _, _, err := redeem(t, peerhttp.RedeemOptions{}, req); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
				t.Fatalf("DPoP headers %q, want %q", got, tc.want)
			}
		})
	}
}
