package mcp

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// fakeTools is a control API in memory: it answers each call with err, or echoes its input.
type fakeTools struct {
	specs  []ports.ToolSpec
	err    error
	inputs []string
}

func (f *fakeTools) ListTools(context.Context) ([]ports.ToolSpec, error) { return f.specs, nil }

func (f *fakeTools) CallTool(_ context.Context, _ string, input []byte) (ports.ToolResult, error) {
	f.inputs = append(f.inputs, string(input))
	if f.err != nil {
		return ports.ToolResult{}, f.err
	}
	return ports.ToolResult{Data: input, Summary: "done"}, nil
}

// session connects an SDK client to a Server over in-memory transports.
func session(t *testing.T, cfg Config) *sdk.ClientSession {
	t.Helper()
	serverT, clientT := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, err := NewServer(cfg).build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Run(ctx, serverT) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

var specs = []ports.ToolSpec{
	{Name: "zeta", Description: "Z", InputSchema: []byte(`{"type":"object"}`)},
	{Name: "alpha", Description: "A", InputSchema: []byte(`{"type":"object","properties":{"p":{"type":"string"}}}`)},
}

func TestToolsAreListedInTheServicesOrderAndNoneIsAnEmptyList(t *testing.T) {
	for _, tc := range []struct {
		rule  string
		specs []ports.ToolSpec
		names []string
	}{
		{"the control API's order is kept", specs, []string{"zeta", "alpha"}},
		{"no tool is an empty list", []ports.ToolSpec{}, []string{}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			cs := session(t, Config{Name: "resplane", Version: "1", Tools: &fakeTools{specs: tc.specs}})
			res, err := cs.ListTools(t.Context(), &sdk.ListToolsParams{})
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.names, ",") {
				t.Fatalf("tools %v, want %v", names, tc.names)
			}
		})
	}
}

func TestACallWithoutArgumentsSendsAnEmptyObject(t *testing.T) {
	tools := &fakeTools{specs: specs}
	cs := session(t, Config{Tools: tools})
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "alpha"})
	if err != nil || res.IsError || len(tools.inputs) != 1 || tools.inputs[0] != "{}" {
		t.Fatalf("result %+v, %v, inputs %q; want {} sent", res, err, tools.inputs)
	}
}

func TestAnInternalFailureShowsItsSentenceAndLogsItsCause(t *testing.T) {
	var log bytes.Buffer
	cause := errors.New("dial unix /secret/path/control.sock: connection refused")
	tools := &fakeTools{specs: specs, err: refusal.WithMessage(refusal.ServiceUnreachable, "The socket is gone.").Wrapping(cause)}
	cs := session(t, Config{Tools: tools, Log: zerolog.New(&log)})
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "zeta", Arguments: map[string]any{}})
	if err != nil || !res.IsError || res.Content[0].(*sdk.TextContent).Text != "The socket is gone." {
		t.Fatalf("result %+v, %v", res, err)
	}
	if !strings.Contains(log.String(), "/secret/path/control.sock") || !strings.Contains(log.String(), "service_unreachable") {
		t.Fatalf("the cause was not logged: %q", log.String())
	}
}

func TestATextTypeIsDecidedByTheExtensionAlone(t *testing.T) {
	for path, want := range map[string]bool{
		"a.md": true, "a.MD": true, "a.json": true, "a.yaml": true, "a.csv": true, "a.svg": true, "a.txt": true,
		"a.bin": false, "a.png": false, "noext": false, "a.pdf": false,
	} {
		if got := textual(mimeType(path)); got != want {
			t.Errorf("%s (%s): textual %v, want %v", path, mimeType(path), got, want)
		}
	}
}
