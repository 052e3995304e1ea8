package peer_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// The input schemas of docs/control-api.md, "GET /v1/tools".
const (
	shareSchema = `{"type":"object","properties":{"path":{"type":"string","description":"The file to share, relative to exports.peer_files.root, such as report.md or results/table.csv. Only regular files under that root can be shared."},"peer":{"type":"string","description":"The peer capsule's address: host:port (localhost:41234) or an http(s) URL. It must be in capabilities.network.allow."},"ttl":{"type":"string","description":"How long the handle stays valid: seconds (90) or a number suffixed s, m, h or d (90s, 15m, 2h). At most max_ttl: a longer one is shortened to it. Absent means max_ttl."}},"required":["path","peer"]}`
	fetchSchema = `{"type":"object","properties":{"peer":{"type":"string","description":"The address of the peer capsule that sent the handle: host:port (localhost:41234) or an http(s) URL. It must be in capabilities.peer_fetch.allow."},"handle":{"type":"string","description":"The handle the peer sent, exactly as received (it starts with mh1.)."}},"required":["peer","handle"]}`
)

const manifestBoth = `name: Delta
exports:
  peer_files:
    root: out/
capabilities:
  peer_fetch:
    allow: ["127.0.0.1"]
`

// TestShareFileRefusesInContractOrder pins docs/peer-plane.md, "share-file", through the
// control API: invalid
// input is invalid_input and untraced; a peer outside capabilities.network.allow is
// peer_unreachable with audience "" and receives no connection; an unreachable peer or an
// unusable card is peer_unreachable with audience ""; path refusals come after the card and are
// traced with the derived audience; ttl is clamped to max_ttl; and each tool exists only when
// its grant is declared, with the input schema of docs/control-api.md.
func TestShareFileRefusesInContractOrder(t *testing.T) {
	t.Parallel()
	a := startMinter(t)
	good := newFakePeer(t)
	good.setCard(cardJSON(`{"name":"Fake","url":"http://fake.example:1/a2a"}`))
	const goodAudience = "fake@fake.example:1"

	t.Run("invalid_input is not traced and contacts no peer", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			body any
		}{
			{"empty object", `{}`},
			{"missing path", map[string]any{"peer": good.Addr()}},
			{"missing peer", map[string]any{"path": "report.md"}},
			{"empty path", map[string]any{"path": "", "peer": good.Addr()}},
			{"blank path", map[string]any{"path": "  ", "peer": good.Addr()}},
			{"blank peer", map[string]any{"path": "report.md", "peer": " \t"}},
			{"non-string path", map[string]any{"path": 7, "peer": good.Addr()}},
			{"non-string peer", map[string]any{"path": "report.md", "peer": []string{good.Addr()}}},
			{"null path", map[string]any{"path": nil, "peer": good.Addr()}},
			{"ttl 5 minutes", map[string]any{"path": "report.md", "peer": good.Addr(), "ttl": "5 minutes"}},
			{"ttl 30S", map[string]any{"path": "report.md", "peer": good.Addr(), "ttl": "30S"}},
			{"ttl 30 m", map[string]any{"path": "report.md", "peer": good.Addr(), "ttl": "30 m"}},
			{"ttl -5", map[string]any{"path": "report.md", "peer": good.Addr(), "ttl": "-5"}},
			{"ttl 1.5h", map[string]any{"path": "report.md", "peer": good.Addr(), "ttl": "1.5h"}},
			{"body is an array", `[]`},
			{"body is null", `null`},
			{"body is not JSON", `path=report.md`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				mints, conns := countEvents(t, a, "peer_handle_mint"), good.conns.Load()
				got := harness.Control(t, a.Ready.Control, http.MethodPost, "/v1/tools/share-file", tc.body)
				harness.RequireControlRefusal(t, got, http.StatusUnprocessableEntity, "invalid_input")
				if n := countEvents(t, a, "peer_handle_mint"); n != mints {
					t.Fatalf("invalid input was traced (%d new mint events)", n-mints)
				}
				if good.conns.Load() != conns {
					t.Fatalf("invalid input made a connection to the peer")
				}
			})
		}
	})

	t.Run("peer_unreachable before any card, audience empty", func(t *testing.T) {
		listener := newFakePeer(t)
		listener.setCard(cardJSON(`{"name":"Fake","url":"http://fake.example:1"}`))
		cases := []struct {
			name  string
			peer  string
			probe *fakePeer // must see no connection
		}{
			{"host not in network.allow", "localhost:" + listener.Port(), listener},
			{"URL whose host is not in network.allow", "http://localhost:" + listener.Port(), listener},
			{"scheme other than http(s)", "ftp://127.0.0.1:" + listener.Port(), listener},
			{"peer that does not parse", "127.0.0.1:99999", nil},
			{"nobody listening", closedPort(t), nil},
		}
		for _, card := range []struct {
			name    string
			handler http.HandlerFunc
		}{
			{"card without name", cardJSON(`{"url":"http://fake.example:1"}`)},
			{"card with a blank name", cardJSON(`{"name":"  ","url":"http://fake.example:1"}`)},
			{"card with a non-string name", cardJSON(`{"name":5,"url":"http://fake.example:1"}`)},
			{"card without url", cardJSON(`{"name":"Fake"}`)},
			{"card url without host", cardJSON(`{"name":"Fake","url":"http://"}`)},
			{"card not JSON", cardJSON(`hello`)},
			{"card a JSON array", cardJSON(`[{"name":"Fake","url":"http://fake.example:1"}]`)},
			{"card over 64 KiB", cardJSON(`{"name":"Fake","url":"http://fake.example:1","description":"` + strings.Repeat("d", 70<<10) + `"}`)},
			{"card 404", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusNotFound) }},
			{"card redirect (not followed)", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "http://"+good.Addr()+"/.well-known/agent-card.json", http.StatusFound)
			}},
		} {
			f := newFakePeer(t)
			f.setCard(card.handler)
			cases = append(cases, struct {
				name  string
				peer  string
				probe *fakePeer
			}{card.name, f.Addr(), nil})
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				path := "report.md#" + tc.name // unique, so the trace line is found by path
				goodConns := good.conns.Load()
				got := share(t, a, map[string]any{"path": path, "peer": tc.peer})
				harness.RequireControlRefusal(t, got, http.StatusUnprocessableEntity, "peer_unreachable")
				requireNoHostPath(t, got.Message(), a)
				e := eventFor(t, a, "peer_handle_mint", "path", path)
				requireShape(t, a, e, mintKeys, "peer_unreachable")
				requireReason(t, e, got.Message())
				requireField(t, e, "audience", "")
				requireNull(t, e, "handle_id", "expires_at_ms")
				if tc.probe != nil && tc.probe.conns.Load() != 0 {
					t.Fatalf("the peer received %d connections; minting grants no outbound authority", tc.probe.conns.Load())
				}
				if good.conns.Load() != goodConns {
					t.Fatalf("a redirect from the card was followed")
				}
			})
		}
	})

	t.Run("path refusals after the card carry the derived audience", func(t *testing.T) {
		fixture.Write(t, a.Ready.Workdir, fixture.Layout{"out/handoff/pipe|": ""})
		for _, tc := range []struct {
			path string
			code string
		}{
			{"../secret.md", "outside_root"},
			{"%2e%2e%2fsecret.md", "outside_root"},
			{"%2E%2E/secret.md", "outside_root"},
			{"/etc/passwd", "outside_root"},
			{"link-out.md", "outside_root"},
			{"sub/../report.md", "outside_root"},
			{"./report.md", "outside_root"},
			{"sub//deep.txt", "outside_root"},
			{"report.md%00", "outside_root"},
			{"sub", "not_a_regular_file"},
			{"sub/", "not_a_regular_file"},
			{"pipe", "not_a_regular_file"},
			{"missing.md", "not_found"},
			{"%252e%252e%252fsecret.md", "not_found"},
			{"report.md/deeper", "not_found"},
		} {
			t.Run(tc.code+" "+tc.path, func(t *testing.T) {
				conns := good.conns.Load()
				got := share(t, a, map[string]any{"path": tc.path, "peer": good.Addr()})
				harness.RequireControlRefusal(t, got, http.StatusUnprocessableEntity, tc.code)
				requireNoHostPath(t, got.Message(), a)
				if !strings.Contains(got.Message(), "exports.peer_files.root") {
					t.Errorf("message %q does not tell the agent that only files under exports.peer_files.root may be shared", got.Message())
				}
				if good.conns.Load() == conns {
					t.Fatalf("the path was refused before the card was read")
				}
				e := lastEventFor(t, a, "peer_handle_mint", "path", tc.path)
				requireShape(t, a, e, mintKeys, tc.code)
				requireReason(t, e, got.Message())
				requireField(t, e, "audience", goodAudience)
				requireNull(t, e, "handle_id", "expires_at_ms")
			})
		}
	})

	t.Run("mints that resolve", func(t *testing.T) {
		for _, tc := range []struct {
			name, path, p string
		}{
			{"symlink inside the root records its target", "alias.md", "report.md"},
			{"percent-encoded slash is decoded once", "sub%2fdeep.txt", "sub/deep.txt"},
			{"one trailing slash is dropped", "report.md/", "report.md"},
			{"URL peer with a path still reads the card at the root", "report.md", "report.md"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				peer := good.Addr()
				if strings.HasPrefix(tc.name, "URL peer") {
					peer = "http://" + good.Addr() + "/some/path"
				}
				m := mint(t, a, peer, tc.path)
				var pl struct {
					P string `json:"p"`
				}
				_ = json.Unmarshal(payloadOf(t, m.Handle), &pl)
				if pl.P != tc.p {
					t.Fatalf("payload p %q, want %q", pl.P, tc.p)
				}
				e := eventFor(t, a, "peer_handle_mint", "handle_id", m.HandleID)
				requireShape(t, a, e, mintKeys, "ok")
				requireField(t, e, "path", tc.p)
				requireField(t, e, "audience", goodAudience)
			})
		}
	})

	t.Run("ttl only narrows max_ttl", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			ttl  any // nil: absent; json.RawMessage: sent as that raw JSON
			want time.Duration
		}{
			{"absent means max_ttl", nil, time.Hour},
			{"above max_ttl is clamped", "2h", time.Hour},
			{"a day is clamped", "1d", time.Hour},
			{"seconds as digits", "90", 90 * time.Second},
			{"minutes", "10m", 10 * time.Minute},
			{"a non-string ttl is ignored", 5, time.Hour},
			{"a null ttl is ignored", json.RawMessage("null"), time.Hour},
			{"zero is already expired", "0", 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				input := map[string]any{"path": "report.md", "peer": good.Addr()}
				if tc.ttl != nil {
					input["ttl"] = tc.ttl
				}
				before := time.Now().UnixMilli()
				got := share(t, a, input)
				after := time.Now().UnixMilli()
				var m minted
				_ = json.Unmarshal(got.Data(t), &m)
				lo, hi := before+tc.want.Milliseconds(), after+tc.want.Milliseconds()
				if m.ExpiresAtMs < lo || m.ExpiresAtMs > hi {
					t.Fatalf("expires_at_ms %d, want now + %s in [%d, %d]", m.ExpiresAtMs, tc.want, lo, hi)
				}
			})
		}
	})

	t.Run("scoped class refuses a symlink", func(t *testing.T) {
		scoped := startMinter(t, "--containment", "scoped")
		got := share(t, scoped, map[string]any{"path": "alias.md", "peer": good.Addr()})
		harness.RequireControlRefusal(t, got, http.StatusUnprocessableEntity, "symlink_refused")
		e := eventFor(t, scoped, "peer_handle_mint", "path", "alias.md")
		requireShape(t, scoped, e, mintKeys, "symlink_refused")
		requireField(t, e, "audience", goodAudience)
	})

	t.Run("tools exist only when declared", func(t *testing.T) {
		b := startFetcher(t)
		u := start(t, harness.Capsule{Manifest: manifestBare})
		d := start(t, harness.Capsule{Manifest: manifestBoth})
		for _, tc := range []struct {
			name  string
			p     *harness.Process
			tools []string
		}{
			{"share-file only", a, []string{"share-file"}},
			{"fetch-peer-file only", b, []string{"fetch-peer-file"}},
			{"neither", u, []string{}},
			{"both", d, []string{"share-file", "fetch-peer-file"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := harness.Control(t, tc.p.Ready.Control, http.MethodGet, "/v1/tools", nil)
				if got.Status != 200 {
					t.Fatalf("GET /v1/tools: %d %s", got.Status, got.Raw)
				}
				harness.RequireKeys(t, "GET /v1/tools", got.Raw, "tools")
				var list []json.RawMessage
				if err := json.Unmarshal(got.Body["tools"], &list); err != nil || len(list) != len(tc.tools) {
					t.Fatalf("tools %s, want %q", got.Body["tools"], tc.tools)
				}
				for i, raw := range list {
					harness.RequireKeys(t, "tool entry", raw, "name", "description", "input_schema")
					var spec struct {
						Name        string          `json:"name"`
						Description string          `json:"description"`
						InputSchema json.RawMessage `json:"input_schema"`
					}
					_ = json.Unmarshal(raw, &spec)
					schema := shareSchema
					if spec.Name == "fetch-peer-file" {
						schema = fetchSchema
					}
					if spec.Name != tc.tools[i] || strings.TrimSpace(spec.Description) == "" || !sameJSON(t, spec.InputSchema, schema) {
						t.Fatalf("tool %d: %s, want %s with schema %s", i, raw, tc.tools[i], schema)
					}
				}
				if !slices.Equal(tc.p.Ready.Tools, tc.tools) {
					t.Fatalf("ready line tools %q, want %q", tc.p.Ready.Tools, tc.tools)
				}
				for _, tool := range []string{"share-file", "fetch-peer-file", "no-such-tool"} {
					if slices.Contains(tc.tools, tool) {
						continue
					}
					before := countEvents(t, tc.p, "peer_handle_mint") + countEvents(t, tc.p, "peer_file_fetch")
					got := harness.Control(t, tc.p.Ready.Control, http.MethodPost, "/v1/tools/"+tool,
						map[string]any{"path": "report.md", "peer": good.Addr(), "handle": "mh1.a.b"})
					harness.RequireControlRefusal(t, got, http.StatusNotFound, "unknown_tool")
					got = harness.Control(t, tc.p.Ready.Control, http.MethodPost, "/v1/tools/"+tool, `not json`)
					harness.RequireControlRefusal(t, got, http.StatusNotFound, "unknown_tool")
					if after := countEvents(t, tc.p, "peer_handle_mint") + countEvents(t, tc.p, "peer_file_fetch"); after != before {
						t.Fatalf("an undeclared tool was traced")
					}
				}
			})
		}
	})
}

func sameJSON(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return false
	}
	return reflect.DeepEqual(g, w)
}
