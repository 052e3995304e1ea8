package blackbox_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// TestGenerationCountsTerminalTasksAndSelectsNothing pins docs/http-api.md, "The generation",
// and docs/control-api.md: the generation
// starts at 0, advances by one per POST /v1/tasks/terminal with any terminal state (answered
// {"generation":N}), and is reported on reads, listings, refusals, traces and /v1/status; the
// etag of an unchanged file stays the same across tasks; a missing, null, mistyped or unknown
// state is 422 invalid_input and leaves the counter; a relaunch over the same workdir reports 0
// with the same etag.
func TestGenerationCountsTerminalTasksAndSelectsNothing(t *testing.T) {
	const content = "stable content\n"
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: fixture.Layout{"out/a.txt": content}})
	s := bbSessionOf(t, p.Ready)
	sock := p.Ready.Control

	observe := func(t *testing.T, gen int) {
		t.Helper()
		mark := len(harness.TraceLines(t, s.trace))
		bbServed(t, harness.Get(t, s.addr, "/resources/files/a.txt"), []byte(content), gen, "advisory", "out/")
		bbDecodeListing(t, harness.Get(t, s.addr, "/resources/files"), gen, "advisory", "out/")
		msg := bbFilesRefusal(t, harness.Get(t, s.addr, "/resources/files/none"), 404, "not_found", gen)
		bbFilesRefusal(t, harness.RequestWithin(t, s.addr, "PUT", "/resources/files/a.txt", bbFifoDeadline), 405, "method_not_allowed", gen)
		harness.Get(t, s.addr, "/resources/files/a.txt?generation=0") // no parameter selects an earlier generation
		lines := harness.TraceFrom(t, s.trace, mark, 5)
		bbCheckRead(t, s, lines[0], bbReadEvent{path: "a.txt", bbOutcome: "ok", body: []byte(content), gen: gen})
		bbCheckList(t, s, lines[1], bbListEvent{root: "out/", entries: 1, totalBytes: len(content), gen: gen, bbOutcome: "ok"})
		bbCheckRead(t, s, lines[2], bbReadEvent{path: "none", bbOutcome: "not_found", gen: gen, reason: msg})
		bbCheckRead(t, s, lines[4], bbReadEvent{path: "a.txt", bbOutcome: "ok", body: []byte(content), gen: gen})
		if got := harness.Object(t, harness.Control(t, sock, "GET", "/v1/status", nil).Raw)["generation"]; got != bbInt(gen) {
			t.Errorf("status generation %v, want %d", got, gen)
		}
	}
	t.Run("starts at 0", func(t *testing.T) { observe(t, 0) })

	gen := 0
	for _, tc := range []struct {
		name, body string
		advances   bool
	}{
		{"completed", `{"state":"completed"}`, true},
		{"failed", `{"state":"failed"}`, true},
		{"unknown state", `{"state":"bogus"}`, false},
		{"missing state", `{}`, false},
		{"null state", `{"state":null}`, false},
		{"state not a string", `{"state":1}`, false},
		{"state in the wrong case", `{"state":"Completed"}`, false},
		{"empty body", ``, false},
		{"body not an object", `[{"state":"completed"}]`, false},
		{"cancelled", `{"state":"cancelled"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := harness.Control(t, sock, "POST", "/v1/tasks/terminal", tc.body)
			if tc.advances {
				gen++
				if a.Status != 200 || strings.TrimSpace(string(a.Raw)) != `{"generation":`+bbInt(gen).String()+`}` {
					t.Fatalf("terminal %s: %d %s, want 200 {\"generation\":%d}", tc.body, a.Status, a.Raw, gen)
				}
			} else {
				harness.RequireControlRefusal(t, a, 422, "invalid_input")
			}
			observe(t, gen)
		})
	}

	t.Run("a relaunch over the same workdir reports 0", func(t *testing.T) {
		if code := p.Stop(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
		q := harness.Serve(t, nil, "--manifest", filepath.Join(p.Dir, "murmur.yaml"), "--workdir", p.Workdir, "--listen", "127.0.0.1:0")
		if q.Ready.SessionID == p.Ready.SessionID {
			t.Errorf("relaunch reused the session id %s", q.Ready.SessionID)
		}
		bbServed(t, harness.Get(t, q.Ready.Listen, "/resources/files/a.txt"), []byte(content), 0, "advisory", "out/")
		bbDecodeListing(t, harness.Get(t, q.Ready.Listen, "/resources/files"), 0, "advisory", "out/")
		if got := harness.Object(t, harness.Control(t, q.Ready.Control, "GET", "/v1/status", nil).Raw)["generation"]; got != bbInt(0) {
			t.Errorf("relaunched status generation %v, want 0", got)
		}
	})
}

// TestGenerationIsReadOncePerRequest pins docs/http-api.md, "The generation": a request reads
// the generation once, at
// its start, and reports that one value everywhere, so while tasks complete concurrently every
// listing's x-murmur-generation equals its body's generation, and the values seen never go
// backwards for a single client.
func TestGenerationIsReadOncePerRequest(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: fixture.Layout{"out/a.txt": "A"}})
	sock := p.Ready.Control
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := harness.ControlE(sock, "POST", "/v1/tasks/terminal", `{"state":"completed"}`); err != nil {
				done <- err
				return
			}
		}
	}()
	last := -1
	for i := range 300 {
		r, err := harness.Fetch(p.Ready.Listen, "/resources/files", 10*time.Second)
		if err != nil || r.Status != 200 {
			t.Fatalf("listing %d: %d %v", i, r.Status, err)
		}
		var l bbListing
		if err := json.Unmarshal(r.Body, &l); err != nil {
			t.Fatal(err)
		}
		if r.Get("x-murmur-generation") != strconv.Itoa(l.Generation) {
			t.Fatalf("header generation %s, body generation %d: read more than once", r.Get("x-murmur-generation"), l.Generation)
		}
		if l.Generation < last {
			t.Fatalf("generation went backwards: %d after %d", l.Generation, last)
		}
		last = l.Generation
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if last < 1 {
		t.Errorf("no task completed during the run (last generation %d)", last)
	}
}
