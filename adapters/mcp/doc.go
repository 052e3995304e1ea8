// Package mcp is resplane's Model Context Protocol server (`resplane mcp`, docs/mcp.md),
// built on the official Go SDK (github.com/modelcontextprotocol/go-sdk). It is an inbound
// adapter over two outbound ones it never names: the agent tools of a running service
// (ports.AgentTools, the control API's client) and the operator plane's files
// (operator.RemoteFiles, in application/operator, over the operator plane's HTTP client).
//
// What it guarantees:
//
//   - tools/list is what GET /v1/tools listed when the server started: the same names,
//     descriptions and input schemas, in the same order, and an empty list when no tool is
//     granted. tools/call sends the arguments to the control API as they are; a result
//     carries the tool's data as structuredContent and its summary as the text, and a refusal
//     is a result with isError, the refusal's message as the text and {"error","message"} as
//     structuredContent. A control socket that has gone away gives every later call such a
//     result with service_unreachable; the server keeps running.
//   - resources/list is the service's listing at the moment of the request; each resource's
//     URI is the file's URL on the operator plane, its name the listed path, with its size
//     and a MIME type from its extension. resources/read fetches the file through the
//     operator plane and returns it only once its body matched its etag: as text for a
//     textual MIME type and valid UTF-8, else as a base64 blob. A file longer than MaxInline
//     is not read into the answer: the error names its size and the `resplane files get`
//     command that fetches it verified.
//   - resources/subscribe and unsubscribe are served with the SDK's own support: while a URI
//     is subscribed, the shared poller (operator.Poller) lists the files once per interval,
//     and a listing's diff becomes notifications/resources/updated for each subscribed URI
//     that changed, appeared or disappeared, and notifications/resources/list_changed when
//     the set of files changed. With no subscription nothing is polled.
//   - A refusal on a resource is a JSON-RPC error whose data is {"error","message","uri"}
//     with the service's code and message.
//   - What it writes to stderr goes through a logger that redacts handle tokens.
//
// What it does not guarantee: the tool list is read once, at start; a service relaunched
// with other grants behind the same socket is not noticed until resplane mcp is restarted.
// It adds no authentication: whoever can run it can do what the control socket and the
// operator plane allow (docs/mcp.md, "Security").
package mcp
