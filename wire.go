//go:build wireinject

package resplane

import (
	"github.com/google/wire"

	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/dpop"
	"github.com/resplane/resplane/adapters/fanout"
	"github.com/resplane/resplane/adapters/httpapi/limits"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/adapters/landlock"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/peerhttp"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/ports"
)

// launchSet hands out the parts of a Launch, each as its own value, so that a provider names
// the parts it uses rather than the whole Launch; the peer roots are handed out of the network
// part the same way.
var launchSet = wire.NewSet(
	wire.FieldsOf(new(Launch), "Manifest", "Identity", "Containment", "Paths", "Listener", "Network", "Limits", "Log",
		"Confine", "Observability"),
	wire.FieldsOf(new(Network), "PeerRoots"),
)

// adapterSet provides the outbound adapters and binds each to the port it implements. This is
// the one place where a concrete adapter meets its port.
var adapterSet = wire.NewSet(
	wire.Struct(new(clock.System)),
	wire.Bind(new(ports.Clock), new(*clock.System)),
	provideWorkdir,
	provideWorkdirFS,
	wire.Bind(new(ports.ExportFS), new(*osfs.FS)),
	provideInbox,
	wire.Bind(new(ports.PeerInbox), new(*osfs.Inbox)),
	provideSpool,
	provideBudgets,
	provideApplicationBudgets,
	provideInstanceKey,
	wire.Bind(new(ports.InstanceKey), new(*keys.Random)),
	wire.Struct(new(keys.RandomNonce)),
	wire.Bind(new(ports.NonceSource), new(keys.RandomNonce)),
	provideSessionDir,
	provideSessionFiles,
	provideTrace,
	provideMetrics,
	provideSpans,
	provideTraceFanout,
	wire.Bind(new(ports.TraceSink), new(*fanout.Sink)),
	provideCardFetcher,
	wire.Bind(new(ports.CardFetcher), new(*peerhttp.CardFetcher)),
	provideRedeemer,
	wire.Bind(new(ports.PeerRedeemer), new(*peerhttp.Redeemer)),
	provideProofKey,
	provideProver,
	provideListingLeases,
)

// proofSet provides the proof-of-possession checks a redeem runs; the JOSE verifier holds no
// state and opens nothing, so both injectors use the real one.
var proofSet = wire.NewSet(
	wire.Value(dpop.Verifier{}),
	wire.Bind(new(ports.ProofVerifier), new(dpop.Verifier)),
	provideProofs,
)

// applicationSet provides the use cases.
var applicationSet = wire.NewSet(
	proofSet,
	provideSession,
	provideIssuer,
	application.NewReader,
	application.NewTasks,
	provideFiles,
	provideRedeem,
	provideShareFile,
	provideFetchPeerFile,
	provideRotateKey,
)

// handlerSet provides the inbound handlers: the resource listener's routes and the control API.
var handlerSet = wire.NewSet(
	provideTools,
	provideAgentCard,
	provideHostPolicy,
	provideResources,
	provideControlAPI,
)

// edgeSet provides the inbound side: the handlers, the resource listener, the control socket
// and the metrics listener, and the service that runs them.
var edgeSet = wire.NewSet(
	handlerSet,
	limits.NewInflight,
	provideResourceListener,
	provideResourceServer,
	provideControlServer,
	wire.Struct(new(openAtStart), "*"),
	provideConfinement,
	newReadiness,
	provideMetricsServer,
	provideService,
)

// InitializeService assembles the service for one launch. The cleanup closes the listeners,
// removes the control socket, drains the trace's other sinks and flushes the spans, closes the
// trace and the workdir, and zeroes the instance key.
func InitializeService(l Launch) (*Service, func(), error) {
	wire.Build(launchSet, adapterSet, applicationSet, edgeSet)
	return nil, nil, nil
}

// InitializeHandlers assembles the use cases and both inbound handlers over the ports in p,
// which the caller supplies — the in-memory filesystem, a manual clock, a trace recorder, fake
// peers — so a component test can drive the whole application in process, without sockets or
// disk. Of l it uses the manifest, the identity, the containment class, the network part and
// the limits. Nothing is confined: the control API reports confinement "none".
func InitializeHandlers(l Launch, p HandlerPorts) (*Handlers, error) {
	wire.Build(
		launchSet,
		wire.FieldsOf(new(HandlerPorts), "FS", "Budgets", "Spool", "Clock", "Trace", "Key", "Nonces", "Cards", "Redeemer", "Inbox",
			"Prover", "Leases"),
		applicationSet, handlerSet, wire.Struct(new(Handlers), "*"), wire.Value(landlock.Result{}),
	)
	return nil, nil
}
