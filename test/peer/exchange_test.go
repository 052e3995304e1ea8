package peer_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/test/harness"
)

var (
	wholeToken = regexp.MustCompile(`^mh1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`)
	hex32      = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// stored is fetch-peer-file's result.
type stored struct {
	Path       string  `json:"path"`
	Bytes      int64   `json:"bytes"`
	SHA256     string  `json:"sha256"`
	Generation *uint64 `json:"generation"`
	Peer       string  `json:"peer"`
}

// TestPeerHandoffMintFetchRedeemEndToEnd pins the whole hand-off between two real capsules
// (docs/peer-plane.md, docs/trace.md): A mints for B through its control API and
// through the CLI, B fetches through its own, and the file lands byte-identical under
// peer-in/<handle_id>-<basename> with no temp file left; the three trace events share one
// handle_id and have exactly the fields of docs/trace.md in order with the null rules.
func TestPeerHandoffMintFetchRedeemEndToEnd(t *testing.T) {
	t.Parallel()
	a := startMinter(t)
	b := startFetcher(t)

	if !slices.Equal(a.Ready.Planes, []string{"peer_files"}) || !slices.Equal(a.Ready.Tools, []string{"share-file"}) {
		t.Fatalf("minter ready line: planes %q tools %q", a.Ready.Planes, a.Ready.Tools)
	}
	if len(b.Ready.Planes) != 0 || !slices.Equal(b.Ready.Tools, []string{"fetch-peer-file"}) {
		t.Fatalf("fetcher ready line: planes %q tools %q", b.Ready.Planes, b.Ready.Tools)
	}
	if want := "bravo@" + strings.TrimPrefix(b.Ready.URL, "http://"); b.Ready.Audience != want {
		t.Fatalf("fetcher audience %q, want %q (lowercase name@host:port of its url)", b.Ready.Audience, want)
	}
	// Two completed tasks on A, so the generation B reports is visibly A's.
	for range 2 {
		if r := harness.Control(t, a.Ready.Control, http.MethodPost, "/v1/tasks/terminal", `{"state":"completed"}`); r.Status != 200 {
			t.Fatalf("task end: %d %s", r.Status, r.Raw)
		}
	}

	t.Run("control API", func(t *testing.T) {
		before := time.Now().UnixMilli()
		ans := share(t, a, map[string]any{"path": "report.md", "peer": b.Ready.Listen})
		after := time.Now().UnixMilli()
		harness.RequireKeys(t, "share-file answer", ans.Raw, "data", "summary")
		data := ans.Data(t)
		harness.RequireKeys(t, "share-file result", data, "handle", "handle_id", "expires_at_ms", "audience")
		var m minted
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		if !wholeToken.MatchString(m.Handle) {
			t.Fatalf("handle %q is not mh1.<b64>.<b64>", m.Handle)
		}
		if m.HandleID != handleID(m.Handle) {
			t.Fatalf("handle_id %q, want the first 16 hex of sha256(token) %q", m.HandleID, handleID(m.Handle))
		}
		if m.Audience != b.Ready.Audience {
			t.Fatalf("audience %q, want B's ready-line audience %q", m.Audience, b.Ready.Audience)
		}
		if m.ExpiresAtMs < before+3600_000 || m.ExpiresAtMs > after+3600_000 {
			t.Fatalf("expires_at_ms %d, want now + max_ttl (1h) in [%d, %d]", m.ExpiresAtMs, before+3600_000, after+3600_000)
		}
		var summary string
		_ = json.Unmarshal(ans.Body["summary"], &summary)
		if summary == "" || strings.Contains(summary, "report.md") || strings.Contains(summary, m.Handle) {
			t.Fatalf("summary %q must be one sentence naming no path and no token", summary)
		}

		payload := payloadOf(t, m.Handle)
		harness.RequireKeys(t, "handle payload", payload, "v", "iss", "p", "exp", "n")
		var pl struct {
			V   int    `json:"v"`
			Iss string `json:"iss"`
			P   string `json:"p"`
			Exp int64  `json:"exp"`
			N   string `json:"n"`
		}
		if err := json.Unmarshal(payload, &pl); err != nil {
			t.Fatal(err)
		}
		if pl.V != 1 || pl.Iss != a.Ready.SessionID || pl.P != "report.md" || pl.Exp != m.ExpiresAtMs || !hex32.MatchString(pl.N) {
			t.Fatalf("payload %s: want v 1, iss %s, p report.md, exp %d, n 32 lowercase hex", payload, a.Ready.SessionID, m.ExpiresAtMs)
		}

		got := fetch(t, b, a.Ready.Listen, m.Handle)
		harness.RequireKeys(t, "fetch-peer-file answer", got.Raw, "data", "summary")
		data = got.Data(t)
		harness.RequireKeys(t, "fetch-peer-file result", data, "path", "bytes", "sha256", "generation", "peer")
		var s stored
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		want := []byte(minterFiles()["out/handoff/report.md"])
		if s.Path != "peer-in/"+m.HandleID+"-report.md" || s.Bytes != int64(len(want)) || s.SHA256 != harness.SHA256Hex(want) ||
			s.Generation == nil || *s.Generation != 2 || s.Peer != a.Ready.Listen {
			t.Fatalf("fetch result %s: want path peer-in/%s-report.md, bytes %d, sha256 %s, generation 2, peer %s",
				data, m.HandleID, len(want), harness.SHA256Hex(want), a.Ready.Listen)
		}
		onDisk, err := os.ReadFile(filepath.Join(b.Ready.Workdir, s.Path))
		if err != nil {
			t.Fatal(err)
		}
		if string(onDisk) != string(want) {
			t.Fatalf("stored bytes %q, want %q", onDisk, want)
		}
		requireNoTemp(t, b)
		_ = json.Unmarshal(got.Body["summary"], &summary)
		if strings.Contains(summary, "# report") || strings.Contains(summary, m.Handle) {
			t.Fatalf("fetch summary %q carries content or the token", summary)
		}
		if strings.ContainsAny(summary, "/") || strings.Contains(summary, "peer-in") || !strings.Contains(summary, "path field") {
			t.Fatalf("fetch summary %q must name no filesystem path and point at the result's path field", summary)
		}

		e := eventFor(t, a, "peer_handle_mint", "handle_id", m.HandleID)
		requireShape(t, a, e, mintKeys, "ok")
		requireField(t, e, "path", "report.md")
		requireField(t, e, "audience", b.Ready.Audience)
		requireField(t, e, "expires_at_ms", m.ExpiresAtMs)

		e = eventFor(t, a, "peer_handle_redeem", "handle_id", m.HandleID)
		requireShape(t, a, e, redeemKeys, "ok")
		requireField(t, e, "path", "report.md")
		requireField(t, e, "generation", 2)
		requireField(t, e, "audience_asserted", b.Ready.Audience)
		requireField(t, e, "bytes", len(want))
		requireField(t, e, "sha256", harness.SHA256Hex(want))

		e = eventFor(t, b, "peer_file_fetch", "handle_id", m.HandleID)
		requireShape(t, b, e, fetchKeys, "ok")
		requireField(t, e, "peer", a.Ready.Listen)
		requireField(t, e, "stored_path", s.Path)
		requireField(t, e, "bytes", len(want))
		requireField(t, e, "sha256", harness.SHA256Hex(want))
	})

	t.Run("CLI", func(t *testing.T) {
		code, out, errOut := cli(t, "tool", "share-file", "--control", a.Ready.Control, "--path", "sub/deep.txt", "--peer", b.Ready.Listen)
		if code != 0 {
			t.Fatalf("tool share-file exit %d; stderr %s", code, errOut)
		}
		line := []byte(strings.TrimSuffix(out, "\n"))
		if strings.Count(out, "\n") != 1 {
			t.Fatalf("stdout must be one JSON line: %q", out)
		}
		harness.RequireKeys(t, "CLI share-file output", line, "handle", "handle_id", "expires_at_ms", "audience")
		var m minted
		_ = json.Unmarshal(line, &m)
		if m.Audience != b.Ready.Audience || m.HandleID != handleID(m.Handle) {
			t.Fatalf("CLI share-file output %s", line)
		}

		code, out, errOut = cliWithInput(t, m.Handle+"\n", "tool", "fetch-peer-file", "--control", b.Ready.Control, "--peer", a.Ready.Listen, "--handle", "-")
		if code != 0 {
			t.Fatalf("tool fetch-peer-file exit %d; stderr %s", code, errOut)
		}
		line = []byte(strings.TrimSuffix(out, "\n"))
		harness.RequireKeys(t, "CLI fetch-peer-file output", line, "path", "bytes", "sha256", "generation", "peer")
		var s stored
		_ = json.Unmarshal(line, &s)
		if s.Path != "peer-in/"+m.HandleID+"-deep.txt" {
			t.Fatalf("stored path %q", s.Path)
		}
		if onDisk, err := os.ReadFile(filepath.Join(b.Ready.Workdir, s.Path)); err != nil || string(onDisk) != "deep\n" {
			t.Fatalf("stored file %q, %v", onDisk, err)
		}
		requireNoTemp(t, b)
		eventFor(t, a, "peer_handle_mint", "handle_id", m.HandleID)
		eventFor(t, a, "peer_handle_redeem", "handle_id", m.HandleID)
		eventFor(t, b, "peer_file_fetch", "handle_id", m.HandleID)

		if code, out, errOut := cli(t, "tool", "share-file", "--control", filepath.Join(t.TempDir(), "none.sock"), "--path", "report.md", "--peer", b.Ready.Listen); code != 1 || out != "" || errOut == "" {
			t.Fatalf("unreachable control socket: exit %d, stdout %q, stderr %q; want exit 1 with a message on stderr", code, out, errOut)
		}
		for _, tc := range []struct {
			name string
			args []string
			code string
		}{
			{"share-file path escaping the root", []string{"tool", "share-file", "--control", a.Ready.Control, "--path", "../secret.md", "--peer", b.Ready.Listen}, "outside_root"},
			{"fetch-peer-file peer not allowed", []string{"tool", "fetch-peer-file", "--control", b.Ready.Control, "--peer", "localhost:1", "--handle", "-"}, "peer_not_allowed"},
			{"fetch-peer-file on the minter (undeclared)", []string{"tool", "fetch-peer-file", "--control", a.Ready.Control, "--peer", b.Ready.Listen, "--handle", "-"}, "unknown_tool"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, out, errOut := cliWithInput(t, m.Handle+"\n", tc.args...)
				if code != 1 || out != "" {
					t.Fatalf("exit %d stdout %q, want exit 1 and nothing on stdout; stderr %s", code, out, errOut)
				}
				line := []byte(strings.TrimSpace(errOut))
				harness.RequireKeys(t, "CLI refusal on stderr", line, "error", "message")
				var r map[string]string
				_ = json.Unmarshal(line, &r)
				if r["error"] != tc.code {
					t.Fatalf("stderr %s, want error %s", line, tc.code)
				}
			})
		}
	})
}
