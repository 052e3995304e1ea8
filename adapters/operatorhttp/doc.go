// Package operatorhttp is the operator's HTTP client of one service's operator plane
// (ports.RemoteExport): the listing and single-file reads that `resplane files` and
// `resplane mcp --files` make (docs/operator-guide.md, "Pulling outputs"). Its HTTP client is
// the hardened one adapters/internal/httpclient builds (peerhttp's too), with the bounds below.
//
// What it guarantees:
//
//   - Request targets are built, never cleaned: each component of a path is percent-encoded
//     on its own (url.PathEscape, so "/", "?", "#", "%" and spaces inside a name are escaped)
//     and the target is sent exactly as built, so the service decodes exactly the path asked
//     for. No "." or ".." is ever resolved on the client's side: a path with one cannot even
//     be formed (pathpolicy.RelPath).
//   - Redirects are never followed: a 3xx is an answer like any other non-200.
//   - Proxy variables are ignored, compression is never requested (a body is exactly the
//     bytes sent, and content-length means what it says), one connection serves one request,
//     and response heads are bounded to 64 KiB.
//   - Every read and write on the connection must make progress within the idle timeout,
//     and a connection must be made within the connect timeout; a body that stalls or ends
//     before its content-length is a service_unreachable refusal, never a short success.
//   - A listing body is read up to a bound (256 MiB by default) and must decode as the
//     documented listing; a refusal body is read up to 64 KiB.
//   - Error texts are sentences of ours: nothing of a net/http error (which holds the URL)
//     reaches a refusal message.
//
// What it does not guarantee: it does not check what the service says. Listed paths,
// digests, etags and refusal codes are reported as received; deciding what to trust is the
// caller's job (operator.RemoteFiles, operator.Mirror in application/operator). It does not authenticate the
// service beyond TLS for https URLs.
package operatorhttp
