//go:build wireinject

package resplane

import (
	"github.com/google/wire"

	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/httpapi"
	"github.com/resplane/resplane/adapters/inbox"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/peerhttp"
	tracefile "github.com/resplane/resplane/adapters/trace"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/ports"
)

// adapterSet provides the outbound adapters and binds each to the port it implements. This is
// the one place where a concrete adapter meets its port.
var adapterSet = wire.NewSet(
	wire.Struct(new(clock.System)),
	wire.Bind(new(ports.Clock), new(*clock.System)),
	provideWorkdirFS,
	wire.Bind(new(ports.ExportFS), new(*osfs.FS)),
	provideInbox,
	wire.Bind(new(ports.PeerInbox), new(*inbox.Inbox)),
	provideBudget,
	wire.Bind(new(ports.ReadBudget), new(*budget.Budget)),
	provideInstanceKey,
	wire.Struct(new(keys.RandomNonce)),
	wire.Bind(new(ports.NonceSource), new(keys.RandomNonce)),
	provideTrace,
	wire.Bind(new(ports.TraceSink), new(*tracefile.File)),
	providePeerRoots,
	provideCardFetcher,
	wire.Bind(new(ports.CardFetcher), new(*peerhttp.CardFetcher)),
	provideRedeemer,
	wire.Bind(new(ports.PeerRedeemer), new(*peerhttp.Redeemer)),
)

// applicationSet provides the use cases.
var applicationSet = wire.NewSet(
	provideSession,
	provideIssuer,
	application.NewReader,
	application.NewTasks,
	provideFiles,
	provideRedeem,
	provideShareFile,
	provideFetchPeerFile,
)

// edgeSet provides the inbound side: the resource listener and the control socket.
var edgeSet = wire.NewSet(
	provideTools,
	provideAgentCard,
	httpapi.NewResources,
	provideResourceListener,
	provideResourceServer,
	provideControlAPI,
	provideControlServer,
	provideControlListener,
	provideService,
)

// InitializeService assembles the service for one launch. The cleanup closes the listeners,
// removes the control socket, closes the trace and the workdir, and zeroes the instance key.
func InitializeService(l Launch) (*Service, func(), error) {
	wire.Build(adapterSet, applicationSet, edgeSet)
	return nil, nil, nil
}
