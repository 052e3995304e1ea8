package resplane

import (
	"os"

	"github.com/resplane/resplane/adapters/localfs"
	"github.com/resplane/resplane/adapters/operatorhttp"
	"github.com/resplane/resplane/adapters/terminal"
	"github.com/resplane/resplane/ports"
)

// The operator's client commands (`resplane files`, `resplane mcp`) are assembled by wire as
// the service is: their launches below, their providers here, their injectors in
// wire_clients.go.

// ServiceURL is the base URL of a service's operator plane, as the ready line prints it.
type ServiceURL string

// PullLaunch is what `resplane files pull` runs with.
type PullLaunch struct {
	URL ServiceURL
	// Dir is the directory to mirror into; it is created when missing.
	Dir MirrorDir
	// Stderr is where the progress bar is drawn, when it is a terminal.
	Stderr *os.File
}

// MirrorDir is the local directory a pull mirrors into.
type MirrorDir string

func provideOperatorClient(u ServiceURL) (*operatorhttp.Client, error) {
	return operatorhttp.New(string(u), operatorhttp.Options{})
}

func provideMirrorDir(d MirrorDir) (*localfs.Dir, func(), error) {
	dir, err := localfs.Open(string(d))
	if err != nil {
		return nil, nil, err
	}
	return dir, func() { _ = dir.Close() }, nil
}

func provideProgress(stderr *os.File) ports.Progress { return terminal.NewProgress(stderr) }
