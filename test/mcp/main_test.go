// Package mcp_test is the black-box suite of `resplane mcp` (docs/mcp.md): the official Go
// SDK's client drives the real binary over stdio (mcp.CommandTransport), in front of real
// `resplane serve` processes.
//
// Every resplane mcp process the suite starts registers its stderr; once every test has
// finished, TestMain scans all of it for a handle token.
package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/resplane/resplane/test/harness"
)

// tokenPattern is what a handle token looks like anywhere it could leak (docs/trace.md,
// "Redaction").
var tokenPattern = regexp.MustCompile(`mh1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+`)

// stderrs holds the stderr of every resplane mcp the suite ran.
var stderrs struct {
	sync.Mutex
	all []*lockedBuffer
}

func TestMain(m *testing.M) {
	code := m.Run()
	stderrs.Lock()
	defer stderrs.Unlock()
	leaks := 0
	for _, b := range stderrs.all {
		for _, line := range strings.Split(b.String(), "\n") {
			if tokenPattern.MatchString(line) {
				fmt.Fprintf(os.Stderr, "FAIL: resplane mcp wrote a handle token to stderr: %s\n", line)
				leaks++
			}
		}
	}
	if leaks > 0 {
		code = 1
	} else if code == 0 {
		fmt.Fprintf(os.Stderr, "token leak scan: %d resplane mcp stderr streams, no token\n", len(stderrs.all))
	}
	os.Exit(code)
}

// lockedBuffer is a bytes.Buffer the process's stderr copier and the test may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// session is one resplane mcp process and the SDK client session over its stdio.
type session struct {
	*sdk.ClientSession
	stderr *lockedBuffer
}

// connect starts `resplane mcp <args>` and initializes an MCP session with it; both end with
// the test.
func connect(t *testing.T, args ...string) *session {
	t.Helper()
	return connectWith(t, nil, "", args...)
}

// connectWith is connect with the client's options, speaking protocol ("": the SDK's newest).
func connectWith(t *testing.T, opts *sdk.ClientOptions, protocol string, args ...string) *session {
	t.Helper()
	stderr := &lockedBuffer{}
	stderrs.Lock()
	stderrs.all = append(stderrs.all, stderr)
	stderrs.Unlock()
	cmd := exec.Command(harness.Binary(t), append([]string{"mcp"}, args...)...)
	cmd.Stderr = stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "resplane-test", Version: "0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatalf("connecting to resplane mcp %q: %v; stderr:\n%s", args, err, stderr.String())
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &session{ClientSession: cs, stderr: stderr}
}

// ctx is a context for one MCP call.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// call runs a tool and returns its result, which must arrive (a refusal is a result).
func (s *session) call(t *testing.T, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := s.CallTool(ctx(t), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v; stderr:\n%s", name, err, s.stderr.String())
	}
	return res
}

// text returns the one text content of a result.
func text(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("%d contents, want one text: %+v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", res.Content[0])
	}
	return tc.Text
}

// structured decodes a result's structuredContent into v.
func structured(t *testing.T, res *sdk.CallToolResult, v any) {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("structuredContent %s: %v", raw, err)
	}
}

// requireToolError requires res to be a tool error whose structured content is exactly
// {"error": code, "message": <its text>}.
func requireToolError(t *testing.T, res *sdk.CallToolResult, code string) {
	t.Helper()
	var body map[string]string
	structured(t, res, &body)
	if !res.IsError || body["error"] != code || len(body) != 2 || body["message"] == "" || body["message"] != text(t, res) {
		t.Fatalf("result isError=%v %v (text %q); want isError with {error: %s, message: the text}", res.IsError, body, text(t, res), code)
	}
}
