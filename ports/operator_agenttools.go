package ports

import "context"

// AgentTools is a running service's agent tools as its control API offers them
// (docs/control-api.md): what `resplane mcp` puts in front of an MCP client.
//
// Every error is a *refusal.Refusal: the service's own refusal with its code and message
// (invalid_input, unknown_tool, or the tool's outcome, such as peer_not_allowed), or
// service_unreachable when the control socket cannot be reached or its answer cannot be read.
type AgentTools interface {
	// ListTools returns the offered tools, in the service's order, exactly as it describes
	// them; none is an empty list.
	ListTools(ctx context.Context) ([]ToolSpec, error)
	// CallTool runs the tool name with input, a JSON object sent as it is, and returns its
	// result.
	CallTool(ctx context.Context, name string, input []byte) (ToolResult, error)
}

// ToolSpec is one offered tool.
type ToolSpec struct {
	Name        string
	Description string
	// InputSchema is the tool's JSON Schema, as the service sent it.
	InputSchema []byte
}

// ToolResult is a tool's successful result.
type ToolResult struct {
	// Data is the result object, as the service sent it.
	Data []byte
	// Summary is the one sentence for the model.
	Summary string
}
