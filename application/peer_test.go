package application_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/dpop"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

const (
	sessionID = "ses_01a033ec2c1f7eb2a5922f84e012e89d"
	peerAud   = "reporter@localhost:41234"
)

var (
	testKey   = keys.NewFixed([32]byte{1, 2, 3})
	otherKey  = keys.NewFixed([32]byte{9, 9, 9})
	handoff   = application.ExportPlane{Root: "out/handoff/", MaxBytes: 1 << 10}
	testNonce = keys.FixedNonce{0xaa}
)

// fakeCards answers every card fetch with card, or err, and counts the fetches.
type fakeCards struct {
	card    ports.PeerCard
	err     error
	fetches int
}

func (f *fakeCards) FetchCard(context.Context, destination.Peer) (ports.PeerCard, error) {
	f.fetches++
	return f.card, f.err
}

func mustDestinations(t *testing.T, entries ...string) []destination.Destination {
	t.Helper()
	var out []destination.Destination
	for _, e := range entries {
		d, err := destination.Parse(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func newShare(t *testing.T, w *world, cards ports.CardFetcher) *application.ShareFile {
	t.Helper()
	return newShareProving(t, w, cards, proof.Auto)
}

// newShareProving is share-file under --peer-proof mode.
func newShareProving(t *testing.T, w *world, cards ports.CardFetcher, mode proof.Mode) *application.ShareFile {
	t.Helper()
	plane := application.SharePlane{ExportPlane: handoff, MaxTTL: time.Hour}
	issuer := application.PeerIssuer{SessionID: sessionID, Key: application.NewKeyring(testKey)}
	return application.NewShareFile(plane, mustDestinations(t, "localhost"), issuer, application.Proofs{Mode: mode, Verifier: dpop.Verifier{}},
		w.session, w.fs, cards, testNonce, w.clock, w.trace)
}

func newRedeem(w *world, key ports.InstanceKey) *application.Redeem {
	return newRedeemProving(w, key, proof.Auto)
}

// newRedeemProving is a redeem whose proof checks run under mode, with the real JOSE verifier.
func newRedeemProving(w *world, key ports.InstanceKey, mode proof.Mode) *application.Redeem {
	plane := handoff
	return application.NewRedeem(&plane, application.PeerIssuer{SessionID: sessionID, Key: application.NewKeyring(key)},
		application.Proofs{Mode: mode, Verifier: dpop.Verifier{}}, w.session, w.fs, w.reader, w.clock, w.trace)
}

func TestShareMintsAHandleTheRedeemAccepts(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/handoff/report.md", "# report\n")
	cards := &fakeCards{card: ports.PeerCard{Name: "Reporter", URL: "http://LOCALHOST:41234/"}}
	result, err := newShare(t, w, cards).Share(context.Background(),
		application.ShareInput{Path: "report.md", Peer: "localhost:41234", TTL: "2h", HasTTL: true})
	if err != nil {
		t.Fatal(err)
	}
	if result.Audience != peerAud || result.HandleID != handle.ID(result.Handle) ||
		result.ExpiresAtMs != epoch.Add(time.Hour).UnixMilli() {
		t.Fatalf("share = %+v; want the audience %s and the ttl clamped to max_ttl", result, peerAud)
	}
	if strings.Contains(result.Summary(), "report.md") || strings.Contains(result.Summary(), "mh1.") {
		t.Fatalf("summary names a path or a token: %q", result.Summary())
	}
	mint, keysInOrder := fields(w.lastEvent(t, "peer_handle_mint"))
	wantKeys := []string{"handle_id", "path", "audience", "expires_at_ms", "outcome", "reason"}
	if !reflect.DeepEqual(keysInOrder, wantKeys) || mint["handle_id"] != result.HandleID || mint["path"] != "report.md" ||
		mint["audience"] != peerAud || mint["outcome"] != "ok" {
		t.Fatalf("peer_handle_mint = %v", mint)
	}

	answer, err := newRedeem(w, testKey).Do(context.Background(), application.RedeemRequest{
		Request: get, Rest: "/" + result.Handle, Audience: "  REPORTER@localhost:41234 ", AudienceSent: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer answer.Served.Body.Release()
	if got := contentOf(t, answer.Served.Body); got != "# report\n" || answer.HandleID != result.HandleID {
		t.Fatalf("redeem served %q as %s", got, answer.HandleID)
	}
	redeem, _ := fields(w.lastEvent(t, "peer_handle_redeem"))
	if redeem["path"] != "report.md" || redeem["audience_asserted"] != peerAud || redeem["bytes"] != int64(9) {
		t.Fatalf("peer_handle_redeem = %v", redeem)
	}
}

func TestRedeemRunsItsChecksInTheContractOrder(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/handoff/report.md", "r")
	mint := func(p string, exp time.Time, key *keys.Fixed, iss string) string {
		return handle.Mint(key.Key(), handle.NewPayload(iss, p, exp.UnixMilli(), [16]byte{7}), peerAud)
	}
	later := epoch.Add(time.Minute)
	good := mint("report.md", later, testKey, sessionID)
	cases := []struct {
		rule     string
		req      application.Request
		rest     string
		audience *string
		want     refusal.Code
		traced   bool
	}{
		{"a Host not allowed comes first, and a GET with a token is traced", application.Request{Method: "GET", HasBody: true}, "/" + good, nil, refusal.HostNotAllowed, true},
		{"a Host not allowed on another method is not traced", application.Request{Method: "HEAD"}, "/" + good, nil, refusal.HostNotAllowed, false},
		{"a Host not allowed without a token is not traced", application.Request{Method: "GET"}, "/", nil, refusal.HostNotAllowed, false},
		{"a method other than GET comes first", request("HEAD"), "/" + good, nil, refusal.MethodNotAllowed, false},
		{"a body comes after the method", application.Request{Method: "POST", HostAllowed: true, HasBody: true}, "/" + good, nil, refusal.MethodNotAllowed, false},
		{"a GET with a token and a body is refused and traced", application.Request{Method: "GET", HostAllowed: true, HasBody: true}, "/" + good, ptr(peerAud), refusal.BodyNotAllowed, true},
		{"a body comes before the missing token", application.Request{Method: "GET", HostAllowed: true, HasBody: true}, "/", nil, refusal.BodyNotAllowed, false},
		{"no token is not found", get, "/", nil, refusal.NotFound, false},
		{"a malformed token is refused before the audience is looked at", get, "/mh2.a.b", nil, refusal.MalformedHandle, true},
		{"a missing audience is refused before the MAC", get, "/" + good, nil, refusal.MissingAudience, true},
		{"a blank audience counts as missing", get, "/" + good, ptr("   "), refusal.MissingAudience, true},
		{"a wrong audience is not valid", get, "/" + good, ptr("intruder@localhost:1"), refusal.HandleNotValid, true},
		{"another instance's key is not valid", get, "/" + mint("report.md", later, otherKey, sessionID), ptr(peerAud), refusal.HandleNotValid, true},
		{"another session's handle is not valid", get, "/" + mint("report.md", later, testKey, "ses_other"), ptr(peerAud), refusal.HandleNotValid, true},
		{"a handle expiring now has expired", get, "/" + mint("report.md", epoch, testKey, sessionID), ptr(peerAud), refusal.HandleExpired, true},
		{"a path that no longer exists is not found", get, "/" + mint("gone.md", later, testKey, sessionID), ptr(peerAud), refusal.NotFound, true},
		{"p is lowered, never decoded again", get, "/" + mint("report%2emd", later, testKey, sessionID), ptr(peerAud), refusal.NotFound, true},
		{"a p that leaves the root is outside", get, "/" + mint("../secret", later, testKey, sessionID), ptr(peerAud), refusal.OutsideRoot, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			req := application.RedeemRequest{Request: tc.req, Rest: tc.rest}
			if tc.audience != nil {
				req.Audience, req.AudienceSent = *tc.audience, true
			}
			before := len(w.trace.Events())
			answer, err := newRedeem(w, testKey).Do(context.Background(), req)
			if !refusal.Is(err, tc.want) {
				t.Fatalf("Do = %v; want %s", err, tc.want)
			}
			if answer.Traced != tc.traced || (len(w.trace.Events()) > before) != tc.traced {
				t.Fatalf("traced = %v (%d events); want %v", answer.Traced, len(w.trace.Events())-before, tc.traced)
			}
		})
	}
}

func TestEveryHandleNotValidIsTheSameRefusal(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/handoff/report.md", "r")
	token := handle.Mint(testKey.Key(), handle.NewPayload(sessionID, "report.md", epoch.Add(time.Hour).UnixMilli(), [16]byte{}), peerAud)
	payload, tag, _ := strings.Cut(strings.TrimPrefix(token, "mh1."), ".")
	tampered := "mh1." + payload + "." + strings.Repeat("A", len(tag))
	var seen []string
	for _, tc := range []struct{ token, audience string }{
		{token, "intruder@localhost:1"}, {tampered, peerAud},
	} {
		_, err := newRedeem(w, testKey).Do(context.Background(), application.RedeemRequest{
			Request: get, Rest: "/" + tc.token, Audience: tc.audience, AudienceSent: true})
		seen = append(seen, err.Error())
	}
	if _, err := newRedeem(w, otherKey).Do(context.Background(), application.RedeemRequest{
		Request: get, Rest: "/" + token, Audience: peerAud, AudienceSent: true}); err != nil {
		seen = append(seen, err.Error())
	}
	for _, s := range seen[1:] {
		if s != seen[0] {
			t.Fatalf("handle_not_valid refusals differ: %q vs %q", s, seen[0])
		}
	}
}

func TestShareRefusals(t *testing.T) {
	cases := []struct {
		rule         string
		in           application.ShareInput
		cards        *fakeCards
		want         refusal.Code
		traced       bool
		fetched      bool
		wantAudience string
	}{
		{"a blank peer is invalid input", application.ShareInput{Path: "report.md", Peer: " "}, &fakeCards{}, refusal.InvalidInput, false, false, ""},
		{"an unusable ttl is invalid input", application.ShareInput{Path: "report.md", Peer: "localhost:1", TTL: "5 minutes", HasTTL: true}, &fakeCards{}, refusal.InvalidInput, false, false, ""},
		{"an empty ttl is unusable, not absent", application.ShareInput{Path: "report.md", Peer: "localhost:1", TTL: "", HasTTL: true}, &fakeCards{}, refusal.InvalidInput, false, false, ""},
		{"a path is never trimmed into another name", application.ShareInput{Path: " report.md", Peer: "localhost:1"}, &fakeCards{card: ports.PeerCard{Name: "b", URL: "http://localhost:1"}}, refusal.NotFound, true, true, "b@localhost:1"},
		{"a peer outside network.allow is never contacted", application.ShareInput{Path: "report.md", Peer: "evil.example:80"}, &fakeCards{}, refusal.PeerUnreachable, true, false, ""},
		{"a peer with another scheme does not parse", application.ShareInput{Path: "report.md", Peer: "ftp://localhost"}, &fakeCards{}, refusal.PeerUnreachable, true, false, ""},
		{"a card without a name is unreachable", application.ShareInput{Path: "report.md", Peer: "localhost:1"}, &fakeCards{card: ports.PeerCard{URL: "http://localhost:1"}}, refusal.PeerUnreachable, true, true, ""},
		{"a card fetch failure is unreachable", application.ShareInput{Path: "report.md", Peer: "localhost:1"}, &fakeCards{err: errors.New("refused")}, refusal.PeerUnreachable, true, true, ""},
		{"an encoded traversal is outside the root", application.ShareInput{Path: "%2e%2e%2fsecret.md", Peer: "localhost:1"}, &fakeCards{card: ports.PeerCard{Name: "b", URL: "http://localhost:1"}}, refusal.OutsideRoot, true, true, "b@localhost:1"},
		{"a directory cannot be shared", application.ShareInput{Path: "sub", Peer: "localhost:1"}, &fakeCards{card: ports.PeerCard{Name: "b", URL: "http://localhost:1"}}, refusal.NotARegularFile, true, true, "b@localhost:1"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			w := newWorld(t, containment.Sealed)
			w.write(t, "out/handoff/report.md", "r")
			w.write(t, "out/handoff/sub/x", "x")
			w.write(t, "out/secret.md", "s")
			_, err := newShare(t, w, tc.cards).Share(context.Background(), tc.in)
			r, ok := refusal.As(err)
			if !ok || r.Code != tc.want {
				t.Fatalf("Share = %v; want %s", err, tc.want)
			}
			if (tc.cards.fetches > 0) != tc.fetched {
				t.Fatalf("card fetched %d times; want fetched=%v", tc.cards.fetches, tc.fetched)
			}
			events := w.trace.OfType("peer_handle_mint")
			if (len(events) > 0) != tc.traced {
				t.Fatalf("%d mint events; want traced=%v", len(events), tc.traced)
			}
			if tc.traced {
				got, _ := fields(events[0])
				if got["audience"] != tc.wantAudience || got["handle_id"] != nil || got["expires_at_ms"] != nil || got["outcome"] != string(tc.want) {
					t.Fatalf("peer_handle_mint = %v", got)
				}
			}
			if strings.Contains(r.Message, "/srv/capsule") {
				t.Fatalf("message names a host path: %q", r.Message)
			}
		})
	}
}

func TestATTLOfZeroMintsAnExpiredHandle(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/handoff/report.md", "r")
	result, err := newShare(t, w, &fakeCards{card: ports.PeerCard{Name: "b", URL: "http://localhost:1"}}).Share(context.Background(),
		application.ShareInput{Path: "report.md", Peer: "localhost:1", TTL: "0", HasTTL: true})
	if err != nil || result.ExpiresAtMs != epoch.UnixMilli() {
		t.Fatalf("Share = %+v, %v", result, err)
	}
	_, err = newRedeem(w, testKey).Do(context.Background(), application.RedeemRequest{
		Request: get, Rest: "/" + result.Handle, Audience: "b@localhost:1", AudienceSent: true})
	if !refusal.Is(err, refusal.HandleExpired) {
		t.Fatalf("redeem = %v; want handle_expired", err)
	}
}

func TestASummarySaysWhenTheTTLWasShortened(t *testing.T) {
	for _, tc := range []struct {
		rule      string
		in        application.ShareInput
		expiresIn time.Duration
		says      bool
	}{
		{"no ttl: max_ttl, nothing to say", application.ShareInput{}, time.Hour, false},
		{"a ttl within max_ttl is kept, nothing to say", application.ShareInput{TTL: "15m", HasTTL: true}, 15 * time.Minute, false},
		{"a ttl of exactly max_ttl is not shortened", application.ShareInput{TTL: "1h", HasTTL: true}, time.Hour, false},
		{"a longer ttl is shortened to max_ttl, and the summary says so", application.ShareInput{TTL: "2d", HasTTL: true}, time.Hour, true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			w := newWorld(t, containment.Sealed)
			w.write(t, "out/handoff/report.md", "r")
			tc.in.Path, tc.in.Peer = "report.md", "localhost:1"
			result, err := newShare(t, w, &fakeCards{card: ports.PeerCard{Name: "b", URL: "http://localhost:1"}}).Share(context.Background(), tc.in)
			if err != nil || result.ExpiresAtMs != epoch.Add(tc.expiresIn).UnixMilli() {
				t.Fatalf("Share = %+v, %v; want it to expire in %v", result, err, tc.expiresIn)
			}
			if says := strings.Contains(result.Summary(), "longer than max_ttl, so the handle expires after 1h0m0s"); says != tc.says {
				t.Errorf("summary %q: says it was shortened = %v, want %v", result.Summary(), says, tc.says)
			}
		})
	}
}

// fakeRedeemer answers with resp and body, or err.
type fakeRedeemer struct {
	resp  ports.PeerRedeemResponse
	body  string
	err   error
	calls int
	last  ports.PeerRedeemRequest
}

func (f *fakeRedeemer) Redeem(_ context.Context, req ports.PeerRedeemRequest, sink io.Writer) (ports.PeerRedeemResponse, error) {
	f.calls++
	f.last = req
	if f.err != nil {
		return ports.PeerRedeemResponse{}, f.err
	}
	n, err := io.Copy(sink, strings.NewReader(f.body))
	f.resp.Bytes = n
	return f.resp, err
}

// memInbox keeps committed files in memory and remembers what was discarded.
type memInbox struct {
	stored    map[string][]byte
	discarded int
}

type memStaged struct {
	in   *memInbox
	name string
	buf  bytes.Buffer
}

func (in *memInbox) Stage(_, name string) (ports.Landing, string, error) {
	return &memStaged{in: in, name: name}, "peer-in/" + name, nil
}
func (s *memStaged) Write(p []byte) (int, error) { return s.buf.Write(p) }
func (s *memStaged) Discard()                    { s.in.discarded++ }
func (s *memStaged) Commit(time.Time) error {
	s.in.stored[s.name] = s.buf.Bytes()
	return nil
}

func TestFetchStoresOnlyAVerifiedWholeFile(t *testing.T) {
	token := handle.Mint(testKey.Key(), handle.NewPayload(sessionID, "dir/a b;rm -rf.md", 1, [16]byte{}), peerAud)
	id := handle.ID(token)
	body := "peer bytes"
	etag := `"sha256:` + sha(body) + `"`
	cases := []struct {
		rule     string
		peer     string
		handle   string
		redeemer *fakeRedeemer
		want     refusal.Code // "" means stored
	}{
		{"a verified body is stored under a sanitised name", "localhost:41234", token,
			&fakeRedeemer{resp: ports.PeerRedeemResponse{Status: 200, ETag: etag, HasETag: true, Generation: 3, HasGeneration: true}, body: body}, ""},
		{"a body without an etag is stored", "localhost:41234", token, &fakeRedeemer{resp: ports.PeerRedeemResponse{Status: 200}, body: body}, ""},
		{"a peer outside peer_fetch.allow is never contacted", "other:1", token, &fakeRedeemer{}, refusal.PeerNotAllowed},
		{"a handle with a space is invalid input", "localhost:41234", "mh1.a b", &fakeRedeemer{}, refusal.InvalidInput},
		{"a handle is never trimmed", "localhost:41234", " " + token + "\n", &fakeRedeemer{}, refusal.InvalidInput},
		{"a wrong etag stores nothing", "localhost:41234", token,
			&fakeRedeemer{resp: ports.PeerRedeemResponse{Status: 200, ETag: `"sha256:00"`, HasETag: true}, body: body}, refusal.EtagMismatch},
		{"the peer's error code becomes the outcome", "localhost:41234", token,
			&fakeRedeemer{resp: ports.PeerRedeemResponse{Status: 410, ErrorCode: "handle_expired"}}, "handle_expired"},
		{"a redirect is http_302", "localhost:41234", token,
			&fakeRedeemer{resp: ports.PeerRedeemResponse{Status: 302, ErrorCode: "moved"}}, "http_302"},
		{"an implausible peer code is replaced by the status", "localhost:41234", token,
			&fakeRedeemer{resp: ports.PeerRedeemResponse{Status: 500, ErrorCode: "<script>"}}, "http_500"},
		{"a transport failure passes its refusal through", "localhost:41234", token,
			&fakeRedeemer{err: refusal.WithMessage(refusal.PeerUnreachable, "gone")}, refusal.PeerUnreachable},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			w := newWorld(t, containment.Sealed)
			in := &memInbox{stored: map[string][]byte{}}
			fetch := application.NewFetchPeerFile(mustDestinations(t, "http://localhost:41234"), "me@localhost:1", 1<<20, nil, tc.redeemer, in,
				w.clock, w.trace)
			result, err := fetch.Fetch(context.Background(), application.FetchInput{Peer: tc.peer, Handle: tc.handle})
			if tc.want != "" {
				if !refusal.Is(err, tc.want) || len(in.stored) != 0 {
					t.Fatalf("Fetch = %+v, %v, stored %v; want %s and nothing stored", result, err, in.stored, tc.want)
				}
				if tc.want == refusal.PeerNotAllowed && tc.redeemer.calls != 0 {
					t.Fatal("a disallowed peer was contacted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			name := id + "-a_b_rm_-rf.md"
			if string(in.stored[name]) != body || result.Path != "peer-in/"+name || result.SHA256 != sha(body) || result.Bytes != int64(len(body)) {
				t.Fatalf("Fetch = %+v, stored %v", result, in.stored)
			}
			if summary := result.Summary(); strings.ContainsAny(summary, "/") || strings.Contains(summary, "peer-in") || strings.Contains(summary, name) {
				t.Fatalf("summary %q names a filesystem path; it must point at the result's path field instead", summary)
			}
			got, keysInOrder := fields(w.lastEvent(t, "peer_file_fetch"))
			wantKeys := []string{"peer", "handle_id", "stored_path", "bytes", "sha256", "outcome", "reason"}
			if !reflect.DeepEqual(keysInOrder, wantKeys) || got["handle_id"] != id || got["stored_path"] != result.Path {
				t.Fatalf("peer_file_fetch = %v", got)
			}
		})
	}
}

func ptr(s string) *string { return &s }
