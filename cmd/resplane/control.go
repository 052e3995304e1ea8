package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/resplane/resplane"
	"github.com/resplane/resplane/adapters/config"
)

// The commands that talk to a running service through its control socket (docs/control-api.md):
// the agent tools, the task lifecycle and the status.

// controlFlag is --control, which every control command takes.
var controlFlag = config.Flag{Name: "control", Arg: "PATH", Env: "RESPLANE_CONTROL", Required: true,
	Usage: "The service's control socket, as the ready line's control field shows it (env RESPLANE_CONTROL)"}

const controlNotes = `On success the answer is printed as one JSON line on stdout (exit 0); a refusal prints the
service's {"error","message"} object on stderr (exit 1).`

func toolCommand() *command {
	return &command{
		spec: config.Spec{Name: "tool", Summary: `Calls an agent tool on a running service through its control socket. The
tools exist only when the manifest grants them: share-file with exports.peer_files,
fetch-peer-file with capabilities.peer_fetch.`},
		sub: []*command{{
			spec: config.Spec{Name: "tool share-file", Summary: `Mints a handle that lets one peer fetch one file. The file is under
exports.peer_files.root; the peer's agent card is fetched (the peer must be in
capabilities.network.allow) and the handle is bound to the peer's identity. The handle
expires after --ttl, or max_ttl.`,
				Flags: []config.Flag{
					{Name: "path", Arg: "P", Required: true, Usage: "The file, relative to exports.peer_files.root"},
					{Name: "peer", Arg: "ADDR", Required: true, Usage: "The peer's address: host:port or an http(s) URL"},
					{Name: "ttl", Arg: "D", DefaultHelp: "max_ttl", Usage: "The handle's lifetime: seconds (90) or suffixed s/m/h/d (90s, 15m); a longer one is shortened to max_ttl"},
					controlFlag,
				}, Notes: controlNotes},
			run: (*program).shareFile,
		}, {
			spec: config.Spec{Name: "tool fetch-peer-file", Summary: `Redeems a handle a peer sent: the peer's file is fetched, verified
against its etag and lands whole, or not at all, as peer-in/<handle id>-<file name> in the
workdir (a later fetch of the same handle replaces it). Prints the result, whose "path"
names the file relative to the workdir. The peer must be in capabilities.peer_fetch.allow.`,
				Flags: []config.Flag{
					{Name: "peer", Arg: "ADDR", Required: true, Usage: "The peer's address: host:port or an http(s) URL"},
					{Name: "handle", Arg: "H", Required: true, Usage: "The handle, or - to read it from standard input (use -: a handle on the command line is visible to every user of the host)"},
					controlFlag,
				}, Notes: controlNotes},
			run: (*program).fetchPeerFile,
		}},
	}
}

func taskCommand() *command {
	return &command{
		spec: config.Spec{Name: "task", Summary: "Tells a running service about the agent's tasks."},
		sub: []*command{{
			spec: config.Spec{Name: "task end", Summary: `Tells a running service that a task ended. This advances the generation
that every later answer reports.`,
				Flags: []config.Flag{
					{Name: "state", Arg: "STATE", Default: "completed", Usage: "The terminal state: completed, failed or cancelled"},
					controlFlag,
				}, Notes: controlNotes},
			run: func(p *program, ctx context.Context, v config.Values) error {
				return p.control(ctx, v, http.MethodPost, "/v1/tasks/terminal", map[string]string{"state": v.String("state")}, true)
			},
		}},
	}
}

func peerCommand() *command {
	return &command{
		spec: config.Spec{Name: "peer", Summary: "Operator actions on a running service's peer plane."},
		sub: []*command{{
			spec: config.Spec{Name: "peer rotate-key", Summary: `Revokes every handle the service has minted. It replaces the instance key:
every handle minted before stops verifying at once, and handles minted after it redeem. Prints
{"rotated_at_ms":N}. The service must declare exports.peer_files.`,
				Flags: []config.Flag{controlFlag}, Notes: controlNotes},
			run: func(p *program, ctx context.Context, v config.Values) error {
				return p.control(ctx, v, http.MethodPost, "/v1/peer/rotate-key", nil, true)
			},
		}},
	}
}

func statusCommand() *command {
	spec := config.Spec{Name: "status", Summary: `Prints a running service's status. It shows the session, generation,
containment, planes, tools, audience and URL.`, Flags: []config.Flag{controlFlag}, Notes: controlNotes}
	return &command{spec: spec, run: func(p *program, ctx context.Context, v config.Values) error {
		return p.control(ctx, v, http.MethodGet, "/v1/status", nil, true)
	}}
}

func (p *program) shareFile(ctx context.Context, v config.Values) error {
	input := map[string]string{"path": v.String("path"), "peer": v.String("peer")}
	if v.Has("ttl") {
		input["ttl"] = v.String("ttl")
	}
	return p.control(ctx, v, http.MethodPost, "/v1/tools/share-file", input, false)
}

func (p *program) fetchPeerFile(ctx context.Context, v config.Values) error {
	handle, err := p.handleArgument(v.String("handle"))
	if err != nil {
		return err
	}
	return p.control(ctx, v, http.MethodPost, "/v1/tools/fetch-peer-file", map[string]string{"peer": v.String("peer"), "handle": handle}, false)
}

// control sends one control request to the socket --control names and prints its answer: on
// 200 the data object (whole=false) or the whole answer (whole=true) on stdout; on a refusal
// the {"error","message"} object on stderr, exit 1.
func (p *program) control(ctx context.Context, v config.Values, method, route string, body any, whole bool) error {
	status, answer, err := resplane.InitializeControl(resplane.ControlPath(v.String("control"))).Call(ctx, method, route, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		fmt.Fprintln(p.stderr, strings.TrimSpace(string(answer)))
		return exitError(exitFailure)
	}
	if !whole {
		var envelope struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(answer, &envelope); err != nil {
			return errors.New("the control API answered something that is not a tool result")
		}
		answer = envelope.Data
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, answer); err != nil {
		compact.Reset()
		compact.Write(bytes.TrimSpace(answer))
	}
	fmt.Fprintln(p.stdout, compact.String())
	return nil
}

// maxHandleLine bounds the line --handle - reads: the control API takes no larger body.
const maxHandleLine = 64 << 10

// handleArgument returns the handle --handle gave: read from stdin when it is "-" (one line,
// without its line ending), else the argument itself, with a warning on stderr that never
// repeats it.
func (p *program) handleArgument(arg string) (string, error) {
	if arg != "-" {
		if arg != "" {
			fmt.Fprintln(p.stderr, "resplane tool fetch-peer-file: warning: a handle on the command line can be read by every user of this host "+
				"(/proc/<pid>/cmdline); pass --handle - and write the handle to standard input")
		}
		return arg, nil
	}
	line, err := bufio.NewReader(io.LimitReader(p.stdin, maxHandleLine+1)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the handle from standard input: %w", err)
	}
	if len(line) > maxHandleLine {
		return "", config.Usagef("--handle -: the line on standard input is longer than %d bytes", maxHandleLine)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", config.Usagef("--handle -: standard input held no handle (one line expected)")
	}
	return line, nil
}
