package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/resplane/resplane/application/operator"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// DefaultMaxInline is the largest file resources/read returns in its answer (docs/mcp.md,
// "Resources"): base64 makes a blob a third larger, and the SDK refuses a message over 1 MB.
const DefaultMaxInline = 256 << 10

// Config is what a Server serves.
type Config struct {
	// Name and Version identify the server to its clients.
	Name, Version string
	// Tools are the service's agent tools; nil offers none (no --control).
	Tools ports.AgentTools
	// Files is the operator plane's client; nil offers no resources (no --files).
	Files *operator.RemoteFiles
	// FilesURL is the --files URL as given, for the `resplane files get` command a refusal
	// suggests.
	FilesURL string
	// Poller lists the operator plane for resources/subscribe, once per Interval; nil (as
	// without Files) offers no subscriptions.
	Poller   *operator.Poller
	Interval time.Duration
	// MaxInline bounds what resources/read returns; 0 means DefaultMaxInline.
	MaxInline int64
	// Log receives one line per failure whose cause the client does not see; it must
	// already redact handles.
	Log zerolog.Logger
}

// Server is an MCP server over a running service.
type Server struct {
	cfg Config
	// tools are the tools as the control API listed them, in its order.
	tools []*sdk.Tool
	// sdk is the SDK server, once built.
	sdk *sdk.Server
	// watch serves the subscriptions; nil without a Poller.
	watch *watcher
}

// NewServer returns the server; nothing is contacted before Run.
func NewServer(cfg Config) *Server {
	if cfg.MaxInline <= 0 {
		cfg.MaxInline = DefaultMaxInline
	}
	return &Server{cfg: cfg}
}

// Run reads the tool list from the control API, then serves one MCP session on transport
// until the client goes away or ctx ends. It fails at once when the tool list cannot be read.
func (s *Server) Run(ctx context.Context, transport sdk.Transport) error {
	server, err := s.build(ctx)
	if err != nil {
		return err
	}
	if s.watch != nil {
		s.watch.base = ctx
	}
	return server.Run(ctx, transport)
}

// build assembles the SDK server: the tools as the control API lists them, and the files as
// resources answered live from the operator plane.
func (s *Server) build(ctx context.Context) (*sdk.Server, error) {
	caps := &sdk.ServerCapabilities{}
	opts := &sdk.ServerOptions{Capabilities: caps}
	if s.cfg.Tools != nil {
		caps.Tools = &sdk.ToolCapabilities{}
	}
	if s.cfg.Files != nil {
		caps.Resources = &sdk.ResourceCapabilities{}
	}
	if s.cfg.Files != nil && s.cfg.Poller != nil {
		s.watch = newWatcher(s, s.cfg.Poller, s.cfg.Interval)
		caps.Resources = &sdk.ResourceCapabilities{Subscribe: true, ListChanged: true}
		opts.SubscribeHandler, opts.UnsubscribeHandler = s.watch.subscribe, s.watch.unsubscribe
	}
	server := sdk.NewServer(&sdk.Implementation{Name: s.cfg.Name, Version: s.cfg.Version}, opts)
	s.sdk = server
	if s.cfg.Tools != nil {
		specs, err := s.cfg.Tools.ListTools(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the tool list: %s", startFailure(err))
		}
		s.tools = []*sdk.Tool{}
		for _, spec := range specs {
			tool := &sdk.Tool{Name: spec.Name, Description: spec.Description, InputSchema: json.RawMessage(spec.InputSchema)}
			server.AddTool(tool, s.callTool(spec.Name))
			s.tools = append(s.tools, tool)
		}
	}
	server.AddReceivingMiddleware(s.answer)
	if s.watch != nil {
		server.AddSendingMiddleware(s.watch.sendList)
	}
	return server, nil
}

// callTool returns the handler of one tool: the arguments go to the control API as they are.
func (s *Server) callTool(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		input := req.Params.Arguments
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		result, err := s.cfg.Tools.CallTool(ctx, name, input)
		if err != nil {
			r := s.logged("the tool call "+name+" failed", err)
			data, _ := json.Marshal(map[string]string{"error": string(r.Code), "message": r.Message})
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: r.Message}},
				StructuredContent: json.RawMessage(data)}, nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: result.Summary}},
			StructuredContent: json.RawMessage(result.Data)}, nil
	}
}

// startFailure is what stops mcp before it serves, for its one stderr line: the refusal's
// cause when it has one (for the control socket, the sentence naming the socket and why it
// failed), else the refusal's own code and sentence.
func startFailure(err error) string {
	r := refusal.From(err)
	if cause := r.Cause(); cause != nil {
		return cause.Error()
	}
	return string(r.Code) + ": " + r.Message
}

// logged returns err as a refusal, logging the cause the client will not see.
func (s *Server) logged(what string, err error) *refusal.Refusal {
	r := refusal.From(err)
	if cause := r.Cause(); cause != nil {
		s.cfg.Log.Error().Err(cause).Str("code", string(r.Code)).Msg(what)
	}
	return r
}

// answer answers tools/list in the control API's order (the SDK would sort the tools by
// name), and resources/list and resources/read from the operator plane; every other method
// goes on to the SDK.
func (s *Server) answer(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch r := req.(type) {
		case *sdk.ListToolsRequest:
			if s.cfg.Tools != nil {
				return &sdk.ListToolsResult{Tools: s.tools}, nil
			}
		case *sdk.ListResourcesRequest:
			if s.cfg.Files != nil {
				return s.list(ctx)
			}
		case *sdk.ReadResourceRequest:
			if s.cfg.Files != nil {
				return s.read(ctx, r.Params.URI)
			}
		}
		return next(ctx, method, req)
	}
}

// list returns the listing's files as resources. A listed path the service itself could not
// serve (one that does not lower) is left out.
func (s *Server) list(ctx context.Context) (*sdk.ListResourcesResult, error) {
	listing, err := s.cfg.Files.List(ctx)
	if err != nil {
		return nil, s.rpcError(s.cfg.Files.FilesURL(), s.logged("the listing failed", err))
	}
	result := &sdk.ListResourcesResult{Resources: []*sdk.Resource{}}
	for _, e := range listing.Entries {
		rel, err := pathpolicy.Lower(e.Path)
		if err != nil {
			continue
		}
		result.Resources = append(result.Resources, &sdk.Resource{
			URI: s.cfg.Files.FileURL(rel), Name: e.Path, Size: e.Size, MIMEType: mimeType(e.Path),
			Meta: sdk.Meta{"sha256": e.SHA256, "mtime_ms": e.MtimeMs},
		})
	}
	return result, nil
}

// read fetches one file, verified against its etag, into the answer.
func (s *Server) read(ctx context.Context, uri string) (*sdk.ReadResourceResult, error) {
	rel, err := s.cfg.Files.PathOf(uri)
	if err != nil {
		return nil, s.rpcError(uri, refusal.From(err))
	}
	body := &memoryLanding{}
	fetched, err := s.cfg.Files.Fetch(ctx, rel, s.cfg.MaxInline, body)
	if err != nil && fetched.OverLimit {
		return nil, s.notInlined(uri, rel, fetched.Announced)
	}
	if err != nil {
		return nil, s.rpcError(uri, s.logged("reading "+uri+" failed", err))
	}
	contents := &sdk.ResourceContents{URI: uri, MIMEType: mimeType(rel.String()), Meta: sdk.Meta{"sha256": fetched.SHA256}}
	if textual(contents.MIMEType) && utf8.Valid(body.data) {
		contents.Text = string(body.data)
	} else {
		contents.Blob = body.data
		if contents.Blob == nil {
			contents.Blob = []byte{}
		}
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{contents}}, nil
}

// notInlinedCode is the error code of a file too large to return over MCP.
const notInlinedCode = "too_large_for_mcp"

// notInlined is the error for a file above MaxInline: its size, and how to fetch it verified.
func (s *Server) notInlined(uri string, rel pathpolicy.RelPath, size int64) error {
	command := "resplane files get " + shellQuote(s.cfg.FilesURL) + " " + shellQuote(rel.String()) + " -o FILE"
	what := "more than " + strconv.FormatInt(s.cfg.MaxInline, 10) + " bytes"
	if size >= 0 {
		what = strconv.FormatInt(size, 10) + " bytes"
	}
	message := fmt.Sprintf("%s is %s; resplane mcp returns files of at most %d bytes. Fetch it verified with: %s (or GET %s).",
		rel.String(), what, s.cfg.MaxInline, command, uri)
	data, _ := json.Marshal(map[string]any{"error": notInlinedCode, "message": message, "uri": uri, "size": size, "command": command})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: message, Data: data}
}

// rpcError is the JSON-RPC error for a refusal on uri: invalid params (the code MCP uses for
// a resource that cannot be read as asked) for the service's refusals, internal error for a
// service that could not be reached or answered what could not be verified.
func (s *Server) rpcError(uri string, r *refusal.Refusal) error {
	code := int64(jsonrpc.CodeInvalidParams)
	switch r.Code {
	case refusal.ServiceUnreachable, refusal.InvalidListing, refusal.EtagMismatch, refusal.IOError:
		code = jsonrpc.CodeInternalError
	}
	data, _ := json.Marshal(map[string]string{"error": string(r.Code), "message": r.Message, "uri": uri})
	return &jsonrpc.Error{Code: code, Message: string(r.Code) + ": " + r.Message, Data: data}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// memoryLanding holds a fetched body in memory; Fetch bounds it by MaxInline.
type memoryLanding struct{ data []byte }

func (m *memoryLanding) Write(p []byte) (int, error) {
	m.data = append(m.data, p...)
	return len(p), nil
}

// Commit keeps the body; it has no file to move.
func (m *memoryLanding) Commit(_ time.Time) error { return nil }

// Discard drops the body.
func (m *memoryLanding) Discard() { m.data = nil }

// RunStdio is Run on the process's stdin and stdout, one JSON-RPC message per line; a line
// that is not JSON is answered -32700 and the session goes on (stdioTransport).
func (s *Server) RunStdio(ctx context.Context) error {
	return s.Run(ctx, stdioTransport(os.Stdin, os.Stdout))
}
