// Command resplane serves a capsule's resource plane: the operator plane (list and read files
// under exports.files.root) and the peer plane (hand one file to one named peer capsule through
// a signed handle). See README.md and docs/ for the whole interface.
//
// The command is one program object: a table of commands, each a config.Spec (its command
// line and help, parsed and printed one way for every command) and the function that runs it.
// A command reads its settings through adapters/config and reaches everything else through
// the root package's injectors and OpenLaunch; it never builds an adapter itself
// (docs/architecture.md, "cmd/resplane").
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/resplane/resplane/adapters/config"
	"github.com/resplane/resplane/domain/diag"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// Exit statuses (docs/operator-guide.md, "Exit statuses").
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2 // a usage error or a launch refusal
)

func main() {
	p := &program{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	os.Exit(p.run(os.Args[1:]))
}

// program is one run of resplane: where it reads and writes, and its environment.
type program struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// command is one subcommand: its command line, and what runs it once its words are matched.
// A command that groups others (tool, task, files) has subcommands instead. Whatever runs it
// returns an error that decides the exit status (program.exit).
type command struct {
	spec config.Spec
	// run runs the command with its command line parsed against spec (config.Parse).
	run func(p *program, ctx context.Context, v config.Values) error
	// load, instead of run, takes the words after the command's name as they are: serve and
	// check read them with config.Load, which types them into config.Settings.
	load func(p *program, ctx context.Context, args []string) error
	sub  []*command
}

// runs reports whether c runs, rather than grouping subcommands.
func (c *command) runs() bool { return c.run != nil || c.load != nil }

// start runs c with the words after its name.
func (c *command) start(p *program, ctx context.Context, args []string) error {
	if c.load != nil {
		return c.load(p, ctx, args)
	}
	v, err := config.Parse(c.spec, args, p.getenv)
	if err != nil {
		return err
	}
	return c.run(p, ctx, v)
}

// commands is every command, in the order the top-level help lists them.
func commands() []*command {
	return []*command{
		serveCommand(), checkCommand(), toolCommand(), taskCommand(), peerCommand(), statusCommand(),
		filesCommand(), mcpCommand(), versionCommand(),
	}
}

// run dispatches args to a command and returns the exit status.
func (p *program) run(args []string) int {
	top := &command{spec: config.Spec{Name: "", Summary: topSummary}, sub: commands()}
	switch {
	case len(args) > 0 && args[0] == "help":
		return p.help(top, args[1:])
	case len(args) > 0 && args[0] == "--version":
		args[0] = "version"
	}
	cmd, rest, err := top.find(args)
	if err != nil {
		return p.exit(cmd, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return p.exit(cmd, cmd.start(p, ctx, rest))
}

// find follows args down the command tree to a command that runs; the error is a group asked
// for help or given no known subcommand.
func (c *command) find(args []string) (*command, []string, error) {
	for !c.runs() {
		switch {
		case len(args) == 0:
			return c, nil, config.Usagef("give a command: %s", strings.Join(c.names(), ", "))
		case args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
			return c, nil, config.ErrHelp
		}
		next := c.child(args[0])
		if next == nil {
			return c, nil, config.Usagef("unknown command %q: use %s", args[0], strings.Join(c.names(), ", "))
		}
		c, args = next, args[1:]
	}
	return c, args, nil
}

// child is the subcommand named word, or nil.
func (c *command) child(word string) *command {
	for _, s := range c.sub {
		if s.word() == word {
			return s
		}
	}
	return nil
}

// word is the last word of the command's name: "pull" for "files pull".
func (c *command) word() string { return c.spec.Name[strings.LastIndexByte(c.spec.Name, ' ')+1:] }

func (c *command) names() []string {
	var names []string
	for _, s := range c.sub {
		names = append(names, s.word())
	}
	return names
}

// help answers `resplane help [command...]`: the help of the command its words name.
func (p *program) help(top *command, words []string) int {
	cmd := top
	for _, word := range words {
		next := cmd.child(word)
		if next == nil {
			return p.exit(cmd, config.Usagef("unknown command %q: use %s", word, strings.Join(cmd.names(), ", ")))
		}
		cmd = next
	}
	return p.exit(cmd, config.ErrHelp)
}

// exit reports err, which the command cmd returned, on stderr and returns the exit status: 0
// for none or for help (printed on stdout); 2 for a usage error (one line naming the command
// and --help) or a launch refusal (its two lines); the status a command that reported its
// own failure gives (exitError); 1 for anything else, as one line naming the command.
func (p *program) exit(cmd *command, err error) int {
	var usage *config.UsageError
	var refused *diag.Diagnostic
	var reported exitError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, config.ErrHelp):
		fmt.Fprint(p.stdout, cmd.helpText())
		return exitOK
	case errors.As(err, &usage):
		fmt.Fprint(p.stderr, config.UsageLine(cmd.title(), usage))
		return exitUsage
	case errors.As(err, &refused):
		fmt.Fprint(p.stderr, refused.Render())
		return exitUsage
	case errors.As(err, &reported):
		return int(reported)
	default:
		fmt.Fprintf(p.stderr, "%s: %v\n", cmd.title(), err)
		return exitFailure
	}
}

// exitError is the exit status of a command that has already said on stderr what went wrong.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// title is how messages name the command: "resplane files pull".
func (c *command) title() string { return strings.TrimSpace("resplane " + c.spec.Name) }

// helpText is the command's --help: its Spec's for a command that runs, the list of its
// subcommands for a group.
func (c *command) helpText() string {
	if c.runs() {
		return config.Help(c.spec)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  %s <command> [flags]\n\n%s\n\nCommands:\n", c.title(), strings.TrimSpace(c.spec.Summary))
	leaves := c.leaves()
	width := 0
	for _, s := range leaves {
		width = max(width, len(s.usage()))
	}
	for _, s := range leaves {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, s.usage(), s.oneLine())
	}
	fmt.Fprintf(&b, "\nRun '%s <command> --help' for a command's flags.\n", c.title())
	return b.String()
}

// leaves are the commands that run beneath c, in order.
func (c *command) leaves() []*command {
	var out []*command
	for _, s := range c.sub {
		if s.runs() {
			out = append(out, s)
		} else {
			out = append(out, s.leaves()...)
		}
	}
	return out
}

// usage is the command's words and positional arguments, for a list of commands.
func (c *command) usage() string {
	words := strings.TrimSpace(c.spec.Name)
	if len(c.spec.Args) > 0 {
		words += " " + strings.Join(c.spec.Args, " ")
	}
	return words
}

// oneLine is the first sentence of the command's summary.
func (c *command) oneLine() string {
	summary := strings.Join(strings.Fields(c.spec.Summary), " ")
	if i := strings.Index(summary, ". "); i >= 0 {
		return summary[:i+1]
	}
	return summary
}

const topSummary = `resplane serves a capsule's read-only resource plane: an operator lists and reads the
files an AI agent wrote under one export root, each with its sha256, and the agent hands one
file to another agent through a signed, expiring handle.`

func versionCommand() *command {
	return &command{
		spec: config.Spec{Name: "version", Summary: "Prints the version of resplane."},
		run: func(p *program, _ context.Context, _ config.Values) error {
			fmt.Fprintln(p.stdout, "resplane", version)
			return nil
		},
	}
}
