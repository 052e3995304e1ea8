package peer_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// TestNoHandleTokenReachesATraceOrLog pins docs/trace.md, "Redaction": a
// token pushed through every place it could surface — redeem targets (served, refused, 405, a
// query, the files route), share-file paths, fetch-peer-file peers, a shared file whose name
// looks like a token, a peer's error code — never appears in a trace line or a log line of
// either process once they have stopped: only <handle:<handle_id>> does, and the
// peer_file_fetch line records the peer and the handle_id only. (TestMain repeats the scan over
// every process of the whole suite.)
func TestNoHandleTokenReachesATraceOrLog(t *testing.T) {
	t.Parallel()
	a := startMinter(t)
	b := startFetcher(t)
	f := newFakePeer(t)
	fixture.Write(t, filepath.Join(a.Ready.Workdir, "out", "handoff"), fixture.Layout{"mh1.AAAA.BBBB": "lookalike\n"})

	m := mint(t, a, b.Ready.Listen, "report.md")
	token, id := m.Handle, m.HandleID
	tag := strings.Split(token, ".")[2]

	// The real exchange, through the control API and the CLI.
	fetch(t, b, a.Ready.Listen, token).Data(t)
	if code, _, errOut := cli(t, "tool", "fetch-peer-file", "--control", b.Ready.Control, "--peer", a.Ready.Listen, "--handle", token); code != 0 {
		t.Fatalf("CLI fetch: %d %s", code, errOut)
	}
	cli(t, "tool", "fetch-peer-file", "--control", b.Ready.Control, "--peer", "localhost:1", "--handle", token)

	// Raw redeems carrying the token in every position.
	for _, req := range []struct{ method, target, header string }{
		{"GET", "/resources/peer/" + token, aud(b.Ready.Audience)},
		{"GET", "/resources/peer/" + token, aud("charlie@localhost:1")},
		{"GET", "/resources/peer/" + token, ""},
		{"GET", "/resources/peer/" + token + ".extra", aud(b.Ready.Audience)},
		{"GET", "/resources/peer/x" + token, aud(b.Ready.Audience)},
		{"POST", "/resources/peer/" + token, aud(b.Ready.Audience)},
		{"GET", "/resources/peer/?h=" + token, aud(b.Ready.Audience)},
		{"GET", "/resources/files/" + token, ""},
		{"GET", "/resources/elsewhere/" + token, ""},
		{"GET", "/" + token, ""},
	} {
		var headers []string
		if req.header != "" {
			headers = append(headers, req.header)
		}
		harness.Request(t, a.Ready.Listen, req.method, req.target, headers...)
	}

	// share-file arguments that hold a token, and a file whose name looks like one.
	for _, path := range []string{token, "dir/" + token + "/x.md", "mh1.AAAA.BBBB"} {
		share(t, a, map[string]any{"path": path, "peer": b.Ready.Listen})
	}
	share(t, a, map[string]any{"path": "report.md", "peer": "localhost/" + token})

	// fetch-peer-file peers that hold a token, and a peer whose error code looks like one.
	fetch(t, b, "http://"+closedPort(t)+"/"+token, token)
	fetch(t, b, "localhost/"+token, token)
	echo := forgeFor("report.md")
	f.handle(echo, status(http.StatusForbidden, "application/json", `{"error":"mh1.a.b","message":"`+token+`"}`))
	fetch(t, b, f.Addr(), echo)

	for _, p := range []*harness.Process{a, b} {
		if code := p.Stop(t); code != 0 {
			t.Fatalf("session %s exited %d on SIGTERM", p.Ready.SessionID, code)
		}
	}

	for _, p := range []*harness.Process{a, b} {
		for _, text := range textsOf(t, p) {
			for _, leak := range tokensIn(text, tag) {
				t.Errorf("a token (or its MAC): %s", leak)
			}
		}
	}

	// The placeholder stands where the token was.
	var read harness.Event
	for _, e := range harness.Events(t, a.Ready.Trace) {
		if e.M["event_type"] == "resource_read" {
			read = e
		}
	}
	if read.M == nil || read.M["path"] != "<handle:"+id+">" {
		t.Errorf("the files-route read of a token should trace path <handle:%s>: %s", id, read.Raw)
	}
	fetches := eventsFor(t, b, "peer_file_fetch", "handle_id", id)
	if len(fetches) < 3 {
		t.Fatalf("%d peer_file_fetch events for the handle, want at least 3", len(fetches))
	}
	for _, e := range fetches {
		requireShape(t, b, e, fetchKeys, e.Str(t, "outcome"))
	}
	for _, e := range eventsFor(t, b, "peer_file_fetch", "", "") {
		if peer := e.Str(t, "peer"); strings.Contains(peer, "<handle:") && !strings.Contains(peer, "<handle:"+id+">") {
			t.Errorf("peer %q redacted with the wrong handle id", peer)
		}
	}
	mints := eventsFor(t, a, "peer_handle_mint", "path", "<handle:"+handleID("mh1.AAAA.BBBB")+">")
	if len(mints) != 1 || mints[0].M["outcome"] != "ok" {
		t.Errorf("sharing a file named like a token should trace its path as a placeholder: %s", rawLines(mints))
	}
}
