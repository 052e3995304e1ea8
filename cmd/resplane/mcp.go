package main

import (
	"context"

	"github.com/resplane/resplane"
	"github.com/resplane/resplane/adapters/config"
)

func mcpCommand() *command {
	return &command{spec: config.Spec{Name: "mcp", Summary: `Runs a Model Context Protocol server on stdin and stdout. It offers a service's
agent tools, its files as resources, or both (docs/mcp.md).`,
		Flags: []config.Flag{
			{Name: "control", Arg: "PATH", Env: "RESPLANE_CONTROL",
				Usage: "Offer the agent tools of the service behind this control socket, exactly as GET /v1/tools lists them (env RESPLANE_CONTROL)"},
			{Name: "files", Arg: "URL", Usage: "Offer the files of this operator plane as resources, each read verified against its etag"},
			intervalFlag("While a resource is subscribed, how often to list the files"),
		},
		Notes: "Failures are logged on stderr as JSON lines; no handle token is ever written there.",
	}, run: (*program).mcp}
}

func (p *program) mcp(ctx context.Context, v config.Values) error {
	if !v.Has("control") && !v.Has("files") {
		return config.Usagef("give --control PATH, --files URL or both")
	}
	every, err := interval(v)
	if err != nil {
		return err
	}
	server, err := resplane.InitializeMCP(resplane.MCPArgs{
		Control: resplane.ControlPath(v.String("control")), Files: resplane.ServiceURL(v.String("files")), Version: version,
		Interval: every, Stderr: p.stderr,
	})
	if err != nil {
		return config.Usagef("--files: %v", err)
	}
	if err := server.RunStdio(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
