// Command resplane serves a capsule's resource plane: the operator plane (list and read files
// under exports.files.root) and the peer plane (hand one file to one named peer capsule through
// a signed handle). See README.md and docs/ for the whole interface.
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// Exit statuses (docs/operator-guide.md, "Exit statuses").
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2 // a usage error or a launch refusal
)

const usage = `resplane — a capsule's read-only resource plane.

Usage:
  resplane serve --manifest PATH [flags]      run the service for one capsule session
  resplane check --manifest PATH [flags]      run the launch checks and print the grants
  resplane tool share-file --path P --peer ADDR [--ttl D] [--control PATH]
  resplane tool fetch-peer-file --peer ADDR --handle - [--control PATH] < handle
  resplane task end [--state completed|failed|cancelled] [--control PATH]
  resplane status [--control PATH]
  resplane files ls URL [--json]
  resplane files get URL PATH [-o FILE]
  resplane files pull URL DIR [--delete] [--jobs N] [--dry-run] [--json]
  resplane mcp [--control PATH] [--files URL]
  resplane version

Run 'resplane <command> --help' for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run dispatches to a subcommand and returns the exit status.
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "serve":
		return serveCommand(rest, stdout, stderr, getenv)
	case "check":
		return checkCommand(rest, stdout, stderr, getenv)
	case "tool":
		return toolCommand(rest, os.Stdin, stdout, stderr, getenv)
	case "task":
		return taskCommand(rest, stdout, stderr, getenv)
	case "status":
		return statusCommand(rest, stdout, stderr, getenv)
	case "files":
		return filesCommand(rest, stdout, stderr)
	case "mcp":
		return mcpCommand(rest, stdout, stderr, getenv)
	case "version", "--version":
		if len(rest) > 0 && !isHelp(rest[0]) {
			fmt.Fprintf(stderr, "resplane version: takes no arguments, got %q\n", rest[0])
			return exitUsage
		}
		fmt.Fprintln(stdout, "resplane", version)
		return exitOK
	default:
		fmt.Fprintf(stderr, "resplane: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}
