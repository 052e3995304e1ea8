package mcp_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

const (
	// minterManifest declares the peer plane; share-file's card fetch may reach 127.0.0.1.
	minterManifest = `name: Alpha
exports:
  peer_files:
    root: out/
    max_bytes: 1Ki
capabilities:
  network:
    allow: ["127.0.0.1"]
`
	// fetcherManifest declares only peer_fetch, for 127.0.0.1.
	fetcherManifest = `name: Bravo
capabilities:
  peer_fetch:
    allow: ["127.0.0.1"]
`
	bothManifest = `name: Charlie
exports:
  peer_files:
    root: out/
capabilities:
  network:
    allow: ["127.0.0.1"]
  peer_fetch:
    allow: ["127.0.0.1"]
`
	bareManifest = "name: Delta\n"
)

var minterFiles = fixture.Layout{"out/report.md": "# report\n", "out/dir/": "", "out/big.bin": strings.Repeat("x", 2048)}

func TestTheToolListMirrorsTheControlAPIForEachGrant(t *testing.T) {
	for _, tc := range []struct {
		grant, manifest string
		names           []string
	}{
		{"neither grant", bareManifest, nil},
		{"exports.peer_files", minterManifest, []string{"share-file"}},
		{"capabilities.peer_fetch", fetcherManifest, []string{"fetch-peer-file"}},
		{"both grants", bothManifest, []string{"share-file", "fetch-peer-file"}},
	} {
		t.Run(tc.grant, func(t *testing.T) {
			p := harness.Start(t, harness.Capsule{Manifest: tc.manifest})
			s := connect(t, "--control", p.Ready.Control)
			if info := s.InitializeResult().ServerInfo; info.Name != "resplane" || info.Version == "" {
				t.Fatalf("the server identifies itself as %+v; want resplane and its version", info)
			}
			listed, err := s.ListTools(ctx(t), &sdk.ListToolsParams{})
			if err != nil {
				t.Fatal(err)
			}
			var want struct {
				Tools []struct {
					Name        string          `json:"name"`
					Description string          `json:"description"`
					InputSchema json.RawMessage `json:"input_schema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(harness.Control(t, p.Ready.Control, http.MethodGet, "/v1/tools", nil).Raw, &want); err != nil {
				t.Fatal(err)
			}
			if len(listed.Tools) != len(want.Tools) || len(listed.Tools) != len(tc.names) {
				t.Fatalf("tools/list has %d tools, GET /v1/tools %d, want %v", len(listed.Tools), len(want.Tools), tc.names)
			}
			for i, tool := range listed.Tools {
				w := want.Tools[i]
				if tool.Name != tc.names[i] || tool.Name != w.Name || tool.Description != w.Description {
					t.Errorf("tool %d is %q (%q); GET /v1/tools says %q (%q)", i, tool.Name, tool.Description, w.Name, w.Description)
				}
				got, _ := json.Marshal(tool.InputSchema)
				if !sameJSON(t, got, w.InputSchema) {
					t.Errorf("%s's input schema is %s; GET /v1/tools says %s", tool.Name, got, w.InputSchema)
				}
			}
		})
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestAFileCrossesBetweenTwoCapsulesThroughMCPAlone: the minter's share-file and the
// fetcher's fetch-peer-file, each called through its own resplane mcp.
func TestAFileCrossesBetweenTwoCapsulesThroughMCPAlone(t *testing.T) {
	minter := harness.Start(t, harness.Capsule{Manifest: minterManifest, Files: minterFiles})
	fetcher := harness.Start(t, harness.Capsule{Manifest: fetcherManifest})
	alpha, bravo := connect(t, "--control", minter.Ready.Control), connect(t, "--control", fetcher.Ready.Control)

	shared := alpha.call(t, "share-file", map[string]any{"path": "report.md", "peer": fetcher.Ready.Listen})
	var handle struct {
		Handle, HandleID, Audience string
		ExpiresAtMs                int64 `json:"expires_at_ms"`
	}
	structured(t, shared, &handle)
	if shared.IsError || !strings.HasPrefix(handle.Handle, "mh1.") || handle.Audience != fetcher.Ready.Audience {
		t.Fatalf("share-file: isError=%v %+v (%q)", shared.IsError, handle, text(t, shared))
	}
	if summary := text(t, shared); !strings.Contains(summary, "Minted handle") || strings.Contains(summary, "mh1.") {
		t.Fatalf("the text content is %q; want the summary, without the token", summary)
	}

	fetched := bravo.call(t, "fetch-peer-file", map[string]any{"peer": minter.Ready.Listen, "handle": handle.Handle})
	var stored struct {
		Path   string `json:"path"`
		Bytes  int64  `json:"bytes"`
		SHA256 string `json:"sha256"`
	}
	structured(t, fetched, &stored)
	if fetched.IsError || stored.Bytes != int64(len("# report\n")) || stored.SHA256 != harness.SHA256Hex([]byte("# report\n")) {
		t.Fatalf("fetch-peer-file: isError=%v %+v (%q)", fetched.IsError, stored, text(t, fetched))
	}
	if data, err := os.ReadFile(filepath.Join(fetcher.Workdir, stored.Path)); err != nil || string(data) != "# report\n" {
		t.Fatalf("the fetched file %s holds %q (%v)", stored.Path, data, err)
	}
}

func TestEveryRefusalArrivesAsAToolErrorWithItsCode(t *testing.T) {
	minter := harness.Start(t, harness.Capsule{Manifest: minterManifest, Files: minterFiles})
	fetcher := harness.Start(t, harness.Capsule{Manifest: fetcherManifest})
	alpha, bravo := connect(t, "--control", minter.Ready.Control), connect(t, "--control", fetcher.Ready.Control)
	peer := fetcher.Ready.Listen
	mint := func(path, ttl string) string {
		args := map[string]any{"path": path, "peer": peer}
		if ttl != "" {
			args["ttl"] = ttl
		}
		var h struct{ Handle string }
		structured(t, alpha.call(t, "share-file", args), &h)
		return h.Handle
	}
	valid := mint("report.md", "")
	for _, tc := range []struct {
		code string
		s    *session
		tool string
		args map[string]any
	}{
		{"invalid_input", alpha, "share-file", map[string]any{"peer": peer}},
		{"invalid_input", bravo, "fetch-peer-file", map[string]any{"peer": minter.Ready.Listen, "handle": "not a handle!"}},
		{"outside_root", alpha, "share-file", map[string]any{"path": "../murmur.yaml", "peer": peer}},
		{"not_found", alpha, "share-file", map[string]any{"path": "missing.md", "peer": peer}},
		{"not_a_regular_file", alpha, "share-file", map[string]any{"path": "dir", "peer": peer}},
		{"peer_unreachable", alpha, "share-file", map[string]any{"path": "report.md", "peer": "localhost:1"}},
		{"peer_not_allowed", bravo, "fetch-peer-file", map[string]any{"peer": "localhost:1", "handle": valid}},
		{"malformed_handle", bravo, "fetch-peer-file", map[string]any{"peer": minter.Ready.Listen, "handle": "mh1.x"}},
		{"handle_not_valid", bravo, "fetch-peer-file", map[string]any{"peer": minter.Ready.Listen, "handle": valid[:len(valid)-2] + "AA"}},
		{"handle_expired", bravo, "fetch-peer-file", map[string]any{"peer": minter.Ready.Listen, "handle": mint("report.md", "0s")}},
		{"too_large", bravo, "fetch-peer-file", map[string]any{"peer": minter.Ready.Listen, "handle": mint("big.bin", "")}},
	} {
		t.Run(tc.code+" from "+tc.tool, func(t *testing.T) {
			requireToolError(t, tc.s.call(t, tc.tool, tc.args), tc.code)
		})
	}
	t.Run("a tool that is not offered is not a tool", func(t *testing.T) {
		if res, err := bravo.CallTool(ctx(t), &sdk.CallToolParams{Name: "share-file", Arguments: map[string]any{}}); err == nil {
			t.Fatalf("share-file on a capsule without exports.peer_files answered %+v; want a protocol error", res)
		}
	})
}

func TestAControlSocketThatGoesAwayGivesEachCallAToolError(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: minterManifest, Files: minterFiles})
	s := connect(t, "--control", p.Ready.Control)
	if code := p.Stop(t); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	for range 2 {
		res := s.call(t, "share-file", map[string]any{"path": "report.md", "peer": "127.0.0.1:1"})
		requireToolError(t, res, "service_unreachable")
		if !strings.Contains(text(t, res), "control socket") {
			t.Fatalf("the error %q does not say what went away", text(t, res))
		}
	}
	if _, err := s.ListTools(ctx(t), &sdk.ListToolsParams{}); err != nil {
		t.Fatalf("the server did not survive: %v", err)
	}
}

func TestStartingWithoutAServiceOrAFlagFails(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"mcp"}, 2},
		{[]string{"mcp", "--files", "ftp://x"}, 2},
		{[]string{"mcp", "--bogus"}, 2},
		{[]string{"mcp", "--control", filepath.Join(t.TempDir(), "none.sock")}, 1},
		{[]string{"mcp", "--help"}, 0},
	} {
		code, stdout, stderr := harness.RunCLI(t, nil, tc.args...)
		if code != tc.code {
			t.Errorf("resplane %q: exit %d, want %d (stdout %q, stderr %q)", tc.args, code, tc.code, stdout, stderr)
		}
		if tc.code == 0 && stderr != "" {
			t.Errorf("resplane %q: help asked for, yet stderr says %q", tc.args, stderr)
		}
	}
}
