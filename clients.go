package resplane

import (
	"io"
	"os"
	"time"

	"github.com/resplane/resplane/adapters/control"
	"github.com/resplane/resplane/adapters/logging"
	"github.com/resplane/resplane/adapters/mcp"
	"github.com/resplane/resplane/adapters/operatorhttp"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/tarball"
	"github.com/resplane/resplane/adapters/terminal"
	"github.com/resplane/resplane/application/operator"
	"github.com/resplane/resplane/ports"
)

// The operator's client commands (`resplane files`, `resplane mcp`) are assembled by wire as
// the service is: their launches below, their providers here, their injectors in
// wire_clients.go.

// ServiceURL is the base URL of a service's operator plane, as the ready line prints it.
type ServiceURL string

// PullArgs is what `resplane files pull` runs with.
type PullArgs struct {
	URL ServiceURL
	// Dir is the directory to mirror into; it is created when missing.
	Dir MirrorDir
	// Stderr is where the progress bar is drawn, when it is a terminal.
	Stderr *os.File
}

// Puller is what `resplane files pull` runs: the mirror and, for --watch, the poller that
// lists the same service.
type Puller struct {
	Mirror *operator.Mirror
	Poller *operator.Poller
}

// TarArchive returns the archive `resplane files tar` writes to out.
func TarArchive(out io.Writer) ports.Archive { return tarball.New(out) }

// LandAt returns where `resplane files get -o FILE` and `files tar -o FILE` write: FILE,
// replaced whole once what was written is committed (osfs.CreateAt). The error names the path.
func LandAt(path string) (ports.Landing, error) { return osfs.CreateAt(path) }

// LandOnCommit returns where `resplane files get -o -` writes: w, written only once the
// download is verified and committed (osfs.WriteOnCommit).
func LandOnCommit(w io.Writer) (ports.Landing, error) { return osfs.WriteOnCommit(w) }

// IsTerminal reports whether w is a terminal, as `files ls` and `files tar` ask of their
// standard output.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && terminal.IsTerminal(f)
}

// MirrorDir is the local directory a pull mirrors into.
type MirrorDir string

func provideOperatorClient(u ServiceURL) (*operatorhttp.Client, error) {
	return operatorhttp.New(string(u), operatorhttp.Options{})
}

func provideMirrorDir(d MirrorDir) (*osfs.Mirror, func(), error) {
	dir, err := osfs.OpenMirror(string(d))
	if err != nil {
		return nil, nil, err
	}
	return dir, func() { _ = dir.Close() }, nil
}

func provideProgress(stderr *os.File) ports.Progress { return terminal.NewProgress(stderr) }

// ControlPath is a service's control socket.
type ControlPath string

// MCPArgs is what `resplane mcp` runs with.
type MCPArgs struct {
	// Control is the control socket whose tools it offers; "" offers none.
	Control ControlPath
	// Files is the operator plane whose files it offers as resources; "" offers none.
	Files ServiceURL
	// Interval is how often the files are listed while a resource is subscribed.
	Interval time.Duration
	// Version is resplane's version, which the server reports to its clients.
	Version string
	// Stderr is where failures are logged, as JSON lines that never hold a token.
	Stderr io.Writer
}

// provideAgentTools returns the control API's client, or no tools without a socket.
func provideAgentTools(c ControlPath) ports.AgentTools {
	if c == "" {
		return nil
	}
	return control.NewClient(string(c))
}

// provideMCPFiles returns the operator plane's client, or none without a URL.
func provideMCPFiles(u ServiceURL) (*operator.RemoteFiles, error) {
	if u == "" {
		return nil, nil
	}
	client, err := provideOperatorClient(u)
	if err != nil {
		return nil, err
	}
	return operator.NewRemoteFiles(client), nil
}

// provideMCPPoller returns the poller of the subscriptions, or none without a URL.
func provideMCPPoller(files *operator.RemoteFiles, clk ports.Clock) *operator.Poller {
	if files == nil {
		return nil
	}
	return operator.NewPoller(files, clk)
}

func provideMCPServer(l MCPArgs, tools ports.AgentTools, files *operator.RemoteFiles, poller *operator.Poller) (*mcp.Server, error) {
	log, err := logging.New(l.Stderr, "info", "json")
	if err != nil {
		return nil, err
	}
	return mcp.NewServer(mcp.Config{Name: "resplane", Version: l.Version, Tools: tools, Files: files, FilesURL: string(l.Files),
		Poller: poller, Interval: l.Interval, Log: log}), nil
}

func provideControlClient(c ControlPath) *control.Client { return control.NewClient(string(c)) }
