package resplane

import (
	"github.com/resplane/resplane/adapters/control"
	"github.com/resplane/resplane/adapters/httpapi"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/ports"
)

// HandlerPorts are the outbound ports InitializeHandlers builds the use cases over, one field
// per port. A port may be left nil when the manifest declares nothing that reaches it: Key,
// Nonces and Cards serve only exports.peer_files, Redeemer and Inbox only
// capabilities.peer_fetch. Spool may be nil (every read is then buffered in memory), and then
// Budgets.Spool too. Prover is nil for a capsule that proves nothing (no
// capabilities.peer_fetch, or --peer-proof off).
type HandlerPorts struct {
	FS       ports.ExportFS
	Budgets  application.Budgets
	Spool    ports.Spool
	Clock    ports.Clock
	Trace    ports.TraceSink
	Key      ports.InstanceKey
	Nonces   ports.NonceSource
	Cards    ports.CardFetcher
	Redeemer ports.PeerRedeemer
	Inbox    ports.PeerInbox
	Prover   ports.Prover
	// Leases, when set, is what the listing hash cache takes read leases through; nil leaves
	// it in max-age mode.
	Leases ports.ReadLeases
}

// Handlers are the two inbound edges of a service: the resource listener's routes and the
// control API.
type Handlers struct {
	Resources *httpapi.Resources
	Control   *control.API
}
