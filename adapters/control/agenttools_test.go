package control_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/resplane/resplane/adapters/control"
	"github.com/resplane/resplane/domain/refusal"
)

// fakeControl serves canned answers on a Unix socket and records each request body.
func fakeControl(t *testing.T, status int, answer string, bodies *[]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "control.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bodies != nil {
			*bodies = append(*bodies, r.Method+" "+r.URL.Path+" "+string(body))
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return path
}

func TestListToolsKeepsTheServicesOrderAndSchemas(t *testing.T) {
	sock := fakeControl(t, 200, `{"tools":[{"name":"b","description":"B","input_schema":{"type":"object","x":1}},{"name":"a","description":"A","input_schema":{"type":"object"}}]}`, nil)
	specs, err := control.NewClient(sock).ListTools(t.Context())
	if err != nil || len(specs) != 2 || specs[0].Name != "b" || specs[1].Name != "a" || string(specs[0].InputSchema) != `{"type":"object","x":1}` {
		t.Fatalf("ListTools = %+v, %v", specs, err)
	}
	specs, err = control.NewClient(fakeControl(t, 200, `{"tools":[]}`, nil)).ListTools(t.Context())
	if err != nil || specs == nil || len(specs) != 0 {
		t.Fatalf("no tools: %#v, %v; want an empty list", specs, err)
	}
}

func TestCallToolSendsTheInputAsItIsAndReturnsTheResult(t *testing.T) {
	var bodies []string
	sock := fakeControl(t, 200, `{"data":{"handle":"h"},"summary":"Minted."}`, &bodies)
	result, err := control.NewClient(sock).CallTool(t.Context(), "share-file", []byte(`{"path":"a","extra":[1]}`))
	if err != nil || string(result.Data) != `{"handle":"h"}` || result.Summary != "Minted." {
		t.Fatalf("CallTool = %+v, %v", result, err)
	}
	if len(bodies) != 1 || bodies[0] != `POST /v1/tools/share-file {"path":"a","extra":[1]}` {
		t.Fatalf("sent %q", bodies)
	}
}

func TestAToolFailureIsARefusal(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone.sock")
	for _, tc := range []struct {
		rule string
		sock string
		code refusal.Code
	}{
		{"a refusal keeps its code", fakeControl(t, 422, `{"error":"peer_not_allowed","message":"no"}`, nil), refusal.PeerNotAllowed},
		{"an ungranted tool is unknown_tool", fakeControl(t, 404, `{"error":"unknown_tool","message":"no"}`, nil), refusal.UnknownTool},
		{"an answer that is not a refusal is service_unreachable", fakeControl(t, 500, `oops`, nil), refusal.ServiceUnreachable},
		{"a result without data is service_unreachable", fakeControl(t, 200, `{"summary":"x"}`, nil), refusal.ServiceUnreachable},
		{"a socket nobody answers on is service_unreachable", gone, refusal.ServiceUnreachable},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := control.NewClient(tc.sock).CallTool(t.Context(), "share-file", []byte(`{}`))
			if !refusal.Is(err, tc.code) {
				t.Fatalf("CallTool = %v; want %s", err, tc.code)
			}
			if tc.code == refusal.ServiceUnreachable && tc.sock == gone && errors.Unwrap(err) == nil {
				t.Fatalf("the cause is not kept for the log")
			}
		})
	}
}

func TestAnUnreachableSocketIsNamedWithItsCause(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.sock")
	_, _, err := control.NewClient(path).Call(context.Background(), "GET", "/v1/status", nil)
	if err == nil {
		t.Fatal("a call to a missing socket succeeded")
	}
	msg := err.Error()
	for _, want := range []string{path, "no such file or directory", "is resplane serve running"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "http://control") {
		t.Errorf("error %q shows the internal request URL", msg)
	}
}

// TestAToolsFailureKeepsACauseNamingTheSocket pins what resplane mcp prints when it cannot
// start (docs/mcp.md, "Tools"): the refusal's message is the fixed sentence an agent sees, and
// its cause, for the operator's stderr only, names the socket and why it failed.
func TestAToolsFailureKeepsACauseNamingTheSocket(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone.sock")
	for _, tc := range []struct {
		rule    string
		sock    string
		message string
		says    string
	}{
		{"a socket nobody answers on names the dial error", gone,
			"The service's control socket cannot be reached; is resplane serve still running?", "no such file or directory"},
		{"an answer that is not JSON names the decode error", fakeControl(t, 200, `oops`, nil),
			"The control API answered something that is not a tool answer.", "invalid character"},
		{"an answer without a tool list says so", fakeControl(t, 200, `{}`, nil),
			"The control API answered something that is not a tool answer.", "is not a tool answer"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := control.NewClient(tc.sock).ListTools(t.Context())
			r, ok := refusal.As(err)
			if !ok || r.Code != refusal.ServiceUnreachable || r.Message != tc.message {
				t.Fatalf("ListTools = %v; want service_unreachable with %q", err, tc.message)
			}
			if strings.Contains(r.Message, tc.sock) {
				t.Errorf("the agent's sentence %q names the socket", r.Message)
			}
			cause := r.Cause()
			if cause == nil || !strings.Contains(cause.Error(), tc.sock) || !strings.Contains(cause.Error(), tc.says) {
				t.Errorf("cause %v; want it to name %s and %q", cause, tc.sock, tc.says)
			}
		})
	}
}
