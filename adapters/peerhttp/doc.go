// Package peerhttp is the outbound HTTP edge towards peer capsules: CardFetcher reads a peer's
// agent card for share-file (ports.CardFetcher) and Redeemer redeems a handle for
// fetch-peer-file (ports.PeerRedeemer). Both go through one client, built by
// adapters/internal/httpclient as the operator's client is too, so they share one set of
// guarantees (docs/peer-plane.md, "fetch-peer-file" and "Where we go beyond the reference"):
//
//   - Requests go to the peer's scheme, host and port only; a peer URL's path is never used.
//   - https peers get TLS verified against the system roots plus any roots loaded with
//     LoadRoots (--peer-ca); a certificate that does not verify fails the request.
//   - Redirects are never followed: a 3xx comes back as the answer.
//   - HTTP_PROXY, HTTPS_PROXY and NO_PROXY are ignored. A peer was admitted by an allow-list
//     check on its own host and port; sending the request (and, for a redeem, the handle on its
//     request line) to a proxy instead would leave that decision and hand the handle to a
//     third party.
//   - Compression is never requested, so a body is exactly the bytes the peer sent and
//     content-length means what it says.
//   - Only HTTP/1.1 is spoken, one connection per request (the peer plane answers with
//     connection: close), and response headers are bounded to 64 KiB.
//   - Every failure is a peer_unreachable refusal whose message is a sentence of ours. Errors
//     from net/http carry the request URL, which on a redeem holds the handle, so their text
//     never reaches a message.
package peerhttp
