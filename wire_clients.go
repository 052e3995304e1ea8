//go:build wireinject

package resplane

import (
	"github.com/google/wire"

	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/control"
	"github.com/resplane/resplane/adapters/mcp"
	"github.com/resplane/resplane/adapters/operatorhttp"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/application/operator"
	"github.com/resplane/resplane/ports"
)

// operatorSet provides the client of a service's operator plane.
var operatorSet = wire.NewSet(
	provideOperatorClient,
	wire.Bind(new(ports.RemoteExport), new(*operatorhttp.Client)),
	operator.NewRemoteFiles,
)

// InitializeRemoteFiles assembles `resplane files ls` and `get`: the operator-plane client of
// the service at u. The error is a URL the client cannot use.
func InitializeRemoteFiles(u ServiceURL) (*operator.RemoteFiles, error) {
	wire.Build(operatorSet)
	return nil, nil
}

// clockSet provides the clock a watch's poller reads.
var clockSet = wire.NewSet(
	wire.Struct(new(clock.System)),
	wire.Bind(new(ports.Clock), new(*clock.System)),
)

// InitializeMirror assembles `resplane files pull`, with its poller for --watch. The cleanup
// closes the target directory.
func InitializeMirror(l PullArgs) (*Puller, func(), error) {
	wire.Build(
		wire.FieldsOf(new(PullArgs), "URL", "Dir", "Stderr"),
		operatorSet,
		provideMirrorDir,
		wire.Bind(new(ports.LocalMirror), new(*osfs.Mirror)),
		provideProgress,
		operator.NewMirror,
		clockSet,
		operator.NewPoller,
		wire.Struct(new(Puller), "*"),
	)
	return nil, nil, nil
}

// InitializeMCP assembles `resplane mcp`. The error is a --files URL the client cannot use.
func InitializeMCP(l MCPArgs) (*mcp.Server, error) {
	wire.Build(
		wire.FieldsOf(new(MCPArgs), "Control", "Files"),
		provideAgentTools,
		provideMCPFiles,
		clockSet,
		provideMCPPoller,
		provideMCPServer,
	)
	return nil, nil
}

// InitializeControl assembles the client of the control socket at c, for `resplane tool`,
// `task` and `status`.
func InitializeControl(c ControlPath) *control.Client {
	wire.Build(provideControlClient)
	return nil
}
