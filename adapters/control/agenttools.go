package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

var _ ports.AgentTools = (*Client)(nil)

// ListTools returns the tools GET /v1/tools offers.
func (c *Client) ListTools(ctx context.Context) ([]ports.ToolSpec, error) {
	status, answer, err := c.Call(ctx, http.MethodGet, "/v1/tools", nil)
	if err != nil {
		return nil, unreachableTools(err)
	}
	if status != http.StatusOK {
		return nil, c.refused(status, answer)
	}
	var listed struct {
		Tools *[]toolSpec `json:"tools"`
	}
	if err := json.Unmarshal(answer, &listed); err != nil || listed.Tools == nil {
		return nil, c.unreadable(err)
	}
	specs := make([]ports.ToolSpec, 0, len(*listed.Tools))
	for _, s := range *listed.Tools {
		specs = append(specs, ports.ToolSpec{Name: s.Name, Description: s.Description, InputSchema: s.InputSchema})
	}
	return specs, nil
}

// CallTool sends input to POST /v1/tools/<name> and returns the result of a 200.
func (c *Client) CallTool(ctx context.Context, name string, input []byte) (ports.ToolResult, error) {
	status, answer, err := c.Call(ctx, http.MethodPost, "/v1/tools/"+name, json.RawMessage(input))
	if err != nil {
		return ports.ToolResult{}, unreachableTools(err)
	}
	if status != http.StatusOK {
		return ports.ToolResult{}, c.refused(status, answer)
	}
	var result struct {
		Data    json.RawMessage `json:"data"`
		Summary string          `json:"summary"`
	}
	if err := json.Unmarshal(answer, &result); err != nil || len(bytes.TrimSpace(result.Data)) == 0 {
		return ports.ToolResult{}, c.unreadable(err)
	}
	return ports.ToolResult{Data: result.Data, Summary: result.Summary}, nil
}

// refused turns a non-200 answer into the service's refusal; an answer that is not a
// refusal body is unreadable.
func (c *Client) refused(status int, answer []byte) error {
	var body errorBody
	if err := json.Unmarshal(answer, &body); err != nil || body.Error == "" {
		return c.unreadable(err)
	}
	return refusal.WithMessage(refusal.Code(body.Error), body.Message)
}

// unreachableTools is the refusal an MCP client sees when the control socket cannot be
// reached; its cause (Client.unreachable's sentence, naming the socket and why) is for the
// operator's stderr only.
func unreachableTools(cause error) error {
	return refusal.WithMessage(refusal.ServiceUnreachable,
		"The service's control socket cannot be reached; is resplane serve still running?").Wrapping(cause)
}

// unreadable is the refusal for an answer that is not a tool answer; its cause names the
// socket that gave it and, when there is one, why it could not be read.
func (c *Client) unreadable(err error) error {
	cause := fmt.Errorf("the control socket %s answered something that is not a tool answer", c.path)
	if err != nil {
		cause = fmt.Errorf("the control socket %s answered something that is not a tool answer (%w)", c.path, err)
	}
	return refusal.WithMessage(refusal.ServiceUnreachable,
		"The control API answered something that is not a tool answer.").Wrapping(cause)
}
