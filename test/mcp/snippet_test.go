package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/resplane/resplane/test/harness"
)

// snippetServer is one entry of an mcpServers map.
type snippetServer struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// docSnippets returns every mcpServers entry of docs/mcp.md's JSON blocks, by name.
func docSnippets(t *testing.T) map[string]snippetServer {
	t.Helper()
	doc, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]snippetServer{}
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		var block struct {
			Servers map[string]snippetServer `json:"mcpServers"`
		}
		if json.Unmarshal([]byte(m[1]), &block) == nil {
			for name, s := range block.Servers {
				out[name] = s
			}
		}
	}
	return out
}

// TestTheDocumentedMCPSnippetsWork runs docs/mcp.md's two mcpServers entries as an MCP client
// would: the command and args as written, exactly the env map as the environment, through the
// SDK's CommandTransport. Only the binary's path, the pinned socket's path and the URL are
// replaced by this test's.
func TestTheDocumentedMCPSnippetsWork(t *testing.T) {
	snippets := docSnippets(t)
	tools, outputs := snippets["capsule-tools"], snippets["capsule-outputs"]
	if tools.Command == "" || outputs.Command == "" {
		t.Fatalf("docs/mcp.md lacks the capsule-tools and capsule-outputs snippets: %v", snippets)
	}
	const docSocket, docURL = "/srv/capsule/control.sock", "http://127.0.0.1:8080"
	if !slices.Contains(tools.Args, docSocket) || !slices.Contains(outputs.Args, docURL) {
		t.Fatalf("the snippets no longer show the pinned socket %s and the URL %s: %+v %+v", docSocket, docURL, tools, outputs)
	}
	socket := t.TempDir() + "/control.sock"
	p := harness.Start(t, harness.Capsule{Manifest: filesManifest,
		Args: []string{"--control", socket}})
	replace := strings.NewReplacer(docSocket, socket, docURL, p.Ready.URL)
	for name, snippet := range map[string]snippetServer{"capsule-tools": tools, "capsule-outputs": outputs} {
		t.Run(name, func(t *testing.T) {
			args := make([]string, len(snippet.Args))
			for i, a := range snippet.Args {
				args[i] = replace.Replace(a)
			}
			cmd := exec.Command(harness.Binary(t), args...)
			cmd.Env = []string{}
			for k, v := range snippet.Env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "snippet", Version: "0"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("the %s snippet does not start: %v", name, err)
			}
			defer cs.Close()
			if name == "capsule-tools" {
				if _, err := cs.ListTools(ctx, nil); err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				return
			}
			if _, err := cs.ListResources(ctx, nil); err != nil {
				t.Fatalf("resources/list: %v", err)
			}
		})
	}
}
