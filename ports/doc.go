// Package ports declares what the application needs from the outside world, one small
// interface per need. Each interface is owned by its consumer and documents the errors an
// implementation returns, so a fake and the real adapter can be held to one contract.
//
// # The service
//
// What the service's use cases (package application) need: ExportFS, File and Visitor
// (exportfs.go), ReadLeases and Lease (readlease.go), RootLocator, Clock, InstanceKey,
// NonceSource, ReadBudget, Spool and Snapshot, TraceSink, CardFetcher, PeerRedeemer and
// PeerInbox.
//
// # The operator's client
//
// What `resplane files` and `resplane mcp` need, in the files named operator_*.go: the
// operator plane of a running service seen from its client (RemoteExport), the directory a
// pull mirrors into (LocalMirror), the progress display (Progress), all three consumed by
// application/operator, and the agent tools behind a control socket (AgentTools), consumed by
// the MCP server in adapters/mcp.
//
// # Both
//
// Landing (landing.go) is a file that appears at its destination whole and verified, or not
// at all: the service lands fetched peer files in peer-in/ through it (PeerInbox), the
// operator's client its pulls and downloads (LocalMirror, and the landings of `files get`).
package ports
