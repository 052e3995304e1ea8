package mcp_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/test/harness"
)

// TestALineThatIsNotJSONIsAnsweredParseErrorAndTheSessionGoesOn pins docs/mcp.md, "Transport":
// over stdio, a line that is not JSON gets the JSON-RPC 2.0 parse error (-32700, id null) and
// the server keeps serving: the initialize and ping after it are answered, and the process is
// still running until its stdin closes, when it exits 0.
func TestALineThatIsNotJSONIsAnsweredParseErrorAndTheSessionGoesOn(t *testing.T) {
	p := filesCapsule(t)
	cmd := exec.Command(harness.Binary(t), "mcp", "--files", p.Ready.URL)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() map[string]any {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("resplane mcp closed its stdout")
			}
			var msg map[string]any
			if err := json.Unmarshal([]byte(line), &msg); err != nil {
				t.Fatalf("stdout line %q is not JSON: %v", line, err)
			}
			return msg
		case <-time.After(10 * time.Second):
			t.Fatal("no answer within 10 s")
		}
		return nil
	}
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	requireParseError := func() {
		t.Helper()
		msg := next()
		e, _ := msg["error"].(map[string]any)
		if msg["jsonrpc"] != "2.0" || msg["id"] != nil || e == nil || e["code"] != float64(-32700) {
			t.Fatalf("answer %v, want a JSON-RPC error -32700 with id null", msg)
		}
	}

	send("this is not json")
	requireParseError()
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if msg := next(); msg["id"] != float64(1) || msg["result"] == nil {
		t.Fatalf("initialize after a bad line answered %v", msg)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"ping"` + strings.Repeat(" ", 3)) // cut short: not JSON
	requireParseError()
	send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if msg := next(); msg["id"] != float64(3) || msg["result"] == nil {
		t.Fatalf("ping after a second bad line answered %v", msg)
	}
	_ = stdin.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("resplane mcp exited with %v once its stdin closed, want 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("resplane mcp did not exit within 10 s of its stdin closing")
	}
}
