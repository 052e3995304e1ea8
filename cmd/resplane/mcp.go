package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/resplane/resplane"
)

// mcpUsage is the help of `resplane mcp` (docs/mcp.md).
const mcpUsage = `Usage:
  resplane mcp [--control PATH] [--files URL]

Runs a Model Context Protocol server on stdin and stdout. At least one flag is required.

  --control PATH  offers the agent tools of the service behind this control socket
                  (env RESPLANE_CONTROL), exactly as GET /v1/tools lists them
  --files URL     offers the files of this operator plane as resources, each read
                  verified against its etag

Failures are logged on stderr as JSON lines; no handle token is ever written there.
`

func mcpCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("resplane mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), mcpUsage) }
	controlPath := fs.String("control", getenv("RESPLANE_CONTROL"), "the service's control socket")
	filesURL := fs.String("files", "", "the service's base URL")
	if status, ok := parseOrHelp(fs, args, stdout, func() { fmt.Fprint(stdout, mcpUsage) }); !ok {
		return status
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "resplane mcp: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	case *controlPath == "" && *filesURL == "":
		fmt.Fprint(stderr, "resplane mcp: give --control PATH, --files URL or both\n\n"+mcpUsage)
		return exitUsage
	}
	logger, err := resplane.NewLogger(stderr, "info", "json")
	if err != nil {
		fmt.Fprintf(stderr, "resplane mcp: %v\n", err)
		return exitFailure
	}
	server, err := resplane.InitializeMCP(resplane.MCPLaunch{
		Control: resplane.ControlPath(*controlPath), Files: resplane.ServiceURL(*filesURL), Version: version, Log: logger,
	})
	if err != nil {
		fmt.Fprintf(stderr, "resplane mcp: --files: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := server.RunStdio(ctx); err != nil && ctx.Err() == nil {
		logger.Error().Err(err).Msg("resplane mcp stopped")
		return exitFailure
	}
	return exitOK
}
