package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/resplane/resplane/adapters/control"
)

// clientFlags is the flag set of a client subcommand: --control (or RESPLANE_CONTROL) plus the
// subcommand's own flags.
type clientFlags struct {
	*flag.FlagSet
	control *string
}

func newClientFlags(name string, stderr io.Writer, getenv func(string) string) clientFlags {
	fs := flag.NewFlagSet("resplane "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return clientFlags{FlagSet: fs, control: fs.String("control", getenv("RESPLANE_CONTROL"),
		"the service's control socket (env RESPLANE_CONTROL)")}
}

// parse parses args; ok is false when the caller must return status.
func (f clientFlags) parse(args []string, stdout io.Writer) (status int, ok bool) {
	if status, ok := parseOrHelp(f.FlagSet, args, stdout, f.PrintDefaults); !ok {
		return status, false
	}
	if f.NArg() > 0 {
		fmt.Fprintf(f.Output(), "%s: unexpected argument %q\n", f.Name(), f.Arg(0))
		return exitUsage, false
	}
	if *f.control == "" {
		fmt.Fprintf(f.Output(), "%s: --control PATH (or RESPLANE_CONTROL) is required\n", f.Name())
		return exitUsage, false
	}
	return 0, true
}

// call sends one control request and prints its answer: on 200 the data object (whole=false)
// or the whole answer (whole=true) on stdout, exit 0; on a refusal the {"error","message"}
// object on stderr, exit 1.
func call(f clientFlags, method, route string, body any, whole bool, stdout, stderr io.Writer) int {
	status, answer, err := control.NewClient(*f.control).Call(context.Background(), method, route, body)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", f.Name(), err)
		return exitFailure
	}
	if status != http.StatusOK {
		fmt.Fprintln(stderr, strings.TrimSpace(string(answer)))
		return exitFailure
	}
	if !whole {
		var envelope struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(answer, &envelope); err != nil {
			fmt.Fprintf(stderr, "%s: the control API answered something that is not a tool result\n", f.Name())
			return exitFailure
		}
		answer = envelope.Data
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, answer); err != nil {
		compact.Reset()
		compact.Write(bytes.TrimSpace(answer))
	}
	fmt.Fprintln(stdout, compact.String())
	return exitOK
}

// toolUsage and taskUsage are the help of the commands that group subcommands.
const (
	toolUsage = `Usage:
  resplane tool share-file --path P --peer ADDR [--ttl D] [--control PATH]
  resplane tool fetch-peer-file --peer ADDR --handle - [--control PATH] < handle

Calls an agent tool on a running service through its control socket (--control or
RESPLANE_CONTROL). fetch-peer-file reads the handle from standard input (one line) when
--handle is -: a handle on the command line is visible to every user of the host.
Run 'resplane tool <name> --help' for a tool's flags.
`
	taskUsage = `Usage:
  resplane task end [--state completed|failed|cancelled] [--control PATH]

Tells a running service that a task reached a terminal state, advancing the generation.
`
)

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

func toolCommand(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if status, done := groupUsage(args, toolUsage, stdout, stderr); done {
		return status
	}
	name, rest := args[0], args[1:]
	f := newClientFlags("tool "+name, stderr, getenv)
	input := map[string]string{}
	var required []string
	switch name {
	case control.ShareFileTool:
		path := f.String("path", "", "path of the file, relative to exports.peer_files.root (required)")
		peer := f.String("peer", "", "the peer's address, host:port or an http(s) URL (required)")
		ttl := f.String("ttl", "", "the handle's lifetime, such as 15m; at most max_ttl (default max_ttl)")
		if status, ok := f.parse(rest, stdout); !ok {
			return status
		}
		input["path"], input["peer"] = *path, *peer
		if *ttl != "" {
			input["ttl"] = *ttl
		}
		required = []string{"path", "peer"}
	case control.FetchPeerFileTool:
		peer := f.String("peer", "", "the peer's address, host:port or an http(s) URL (required)")
		token := f.String("handle", "", "the handle the peer sent, or - to read it from standard input (required; "+
			"use -: a handle on the command line is visible to every user of the host)")
		if status, ok := f.parse(rest, stdout); !ok {
			return status
		}
		handle, status, ok := handleArgument(*token, stdin, stderr)
		if !ok {
			return status
		}
		input["peer"], input["handle"] = *peer, handle
		required = []string{"peer", "handle"}
	default:
		fmt.Fprintf(stderr, "resplane tool: unknown tool %q: use share-file or fetch-peer-file\n", name)
		return exitUsage
	}
	for _, key := range required {
		if input[key] == "" {
			fmt.Fprintf(stderr, "resplane tool %s: --%s is required\n", name, key)
			return exitUsage
		}
	}
	return call(f, http.MethodPost, "/v1/tools/"+name, input, false, stdout, stderr)
}

// maxHandleLine bounds the line --handle - reads: the control API takes no larger body.
const maxHandleLine = 64 << 10

// handleArgument returns the handle --handle gave: read from stdin when it is "-" (one line,
// without its line ending), else the argument itself, with a warning on stderr that never
// repeats it. ok is false when the caller must return status.
func handleArgument(arg string, stdin io.Reader, stderr io.Writer) (handle string, status int, ok bool) {
	const name = "resplane tool " + control.FetchPeerFileTool
	if arg != "-" {
		if arg != "" {
			fmt.Fprintf(stderr, "%s: warning: a handle on the command line can be read by every user of this host "+
				"(/proc/<pid>/cmdline); pass --handle - and write the handle to standard input\n", name)
		}
		return arg, 0, true
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, maxHandleLine+1)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "%s: reading the handle from standard input: %v\n", name, err)
		return "", exitFailure, false
	}
	if len(line) > maxHandleLine {
		fmt.Fprintf(stderr, "%s: --handle -: the line on standard input is longer than %d bytes\n", name, maxHandleLine)
		return "", exitUsage, false
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		fmt.Fprintf(stderr, "%s: --handle -: standard input held no handle (one line expected)\n", name)
		return "", exitUsage, false
	}
	return line, 0, true
}

func taskCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, taskUsage)
		return exitOK
	}
	if len(args) == 0 || args[0] != "end" {
		fmt.Fprint(stderr, "resplane task: the only subcommand is 'end'\n\n"+taskUsage)
		return exitUsage
	}
	f := newClientFlags("task end", stderr, getenv)
	state := f.String("state", "completed", "the terminal state: completed, failed or cancelled")
	if status, ok := f.parse(args[1:], stdout); !ok {
		return status
	}
	return call(f, http.MethodPost, "/v1/tasks/terminal", map[string]string{"state": *state}, true, stdout, stderr)
}

func statusCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	f := newClientFlags("status", stderr, getenv)
	if status, ok := f.parse(args, stdout); !ok {
		return status
	}
	return call(f, http.MethodGet, "/v1/status", nil, true, stdout, stderr)
}
