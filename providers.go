package resplane

import (
	"crypto/x509"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"

	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/control"
	"github.com/resplane/resplane/adapters/httpapi"
	"github.com/resplane/resplane/adapters/httpapi/limits"
	"github.com/resplane/resplane/adapters/jsonl"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/peerhttp"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/generation"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/ports"
)

// The providers below turn a Launch into adapters and use cases. Each one that acquires a
// resource returns its cleanup, which wire chains in reverse order of acquisition.

func provideSession(l Launch) application.Session {
	return application.Session{Generation: &generation.Counter{}, Containment: l.Containment}
}

func provideWorkdirFS(l Launch) (*osfs.FS, func(), error) {
	if err := os.MkdirAll(l.Workdir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("creating the workdir: %w", err)
	}
	fs, err := osfs.New(l.Workdir)
	if err != nil {
		return nil, nil, err
	}
	return fs, func() { _ = fs.Close() }, nil
}

// provideInbox opens peer-in's workdir; the unused *osfs.FS orders it after the workdir exists.
func provideInbox(l Launch, _ *osfs.FS) (*osfs.Inbox, func(), error) {
	in, err := osfs.OpenInbox(l.Workdir)
	if err != nil {
		return nil, nil, err
	}
	return in, func() { _ = in.Close() }, nil
}

func provideBudget(l Launch) (*budget.Budget, error) { return budget.New(l.ReadBufferBudget) }

// provideInstanceKey generates the minting key, only when exports.peer_files is declared;
// cleanup overwrites it with zeros.
func provideInstanceKey(l Launch) (ports.InstanceKey, func(), error) {
	if l.Manifest.PeerFiles == nil {
		return nil, func() {}, nil
	}
	key, err := keys.NewRandom()
	if err != nil {
		return nil, nil, err
	}
	return key, key.Zero, nil
}

func provideIssuer(l Launch, key ports.InstanceKey) application.PeerIssuer {
	return application.PeerIssuer{SessionID: l.SessionID, Key: key}
}

// provideTrace opens the trace; the unused *osfs.FS orders it after the workdir exists, since
// the default trace path lies inside it.
func provideTrace(l Launch, clk *clock.System, _ *osfs.FS) (*jsonl.File, func(), error) {
	log := l.Log
	sink, err := jsonl.Open(jsonl.Config{
		Path: l.TracePath, SessionID: l.SessionID, Parent: l.TraceParent, Clock: clk,
		Redact:  handle.Redact,
		OnError: func(err error) { log.Error().Err(err).Msg("a trace line could not be written") },
	})
	if err != nil {
		return nil, nil, err
	}
	return sink, func() { _ = sink.Close() }, nil
}

func providePeerRoots(l Launch) *x509.CertPool { return l.PeerRoots }

func provideCardFetcher(roots *x509.CertPool) *peerhttp.CardFetcher {
	return peerhttp.NewCardFetcher(peerhttp.CardOptions{Roots: roots})
}

func provideRedeemer(roots *x509.CertPool) *peerhttp.Redeemer {
	return peerhttp.NewRedeemer(peerhttp.RedeemOptions{Roots: roots})
}

func filesPlane(l Launch) *application.ExportPlane {
	if f := l.Manifest.Files; f != nil {
		return &application.ExportPlane{Root: f.Root.String(), MaxBytes: f.MaxBytes.Int64()}
	}
	return nil
}

func peerPlane(l Launch) *application.ExportPlane {
	if p := l.Manifest.PeerFiles; p != nil {
		return &application.ExportPlane{Root: p.Root.String(), MaxBytes: p.MaxBytes.Int64()}
	}
	return nil
}

func provideFiles(l Launch, session application.Session, fs ports.ExportFS, reader *application.Reader, sink ports.TraceSink) *application.Files {
	return application.NewFiles(filesPlane(l), session, fs, reader, sink)
}

func provideRedeem(l Launch, issuer application.PeerIssuer, session application.Session, fs ports.ExportFS,
	reader *application.Reader, clk ports.Clock, sink ports.TraceSink) *application.Redeem {
	return application.NewRedeem(peerPlane(l), issuer, session, fs, reader, clk, sink)
}

// provideShareFile returns nil when exports.peer_files is not declared: the tool does not exist.
func provideShareFile(l Launch, issuer application.PeerIssuer, session application.Session, fs ports.ExportFS,
	cards ports.CardFetcher, nonces ports.NonceSource, clk ports.Clock, sink ports.TraceSink) *application.ShareFile {
	plane := peerPlane(l)
	if plane == nil {
		return nil
	}
	share := application.SharePlane{ExportPlane: *plane, MaxTTL: l.Manifest.PeerFiles.MaxTTL}
	return application.NewShareFile(share, l.Manifest.NetworkAllow, issuer, session, fs, cards, nonces, clk, sink)
}

// provideFetchPeerFile returns nil when capabilities.peer_fetch is not declared.
func provideFetchPeerFile(l Launch, redeemer ports.PeerRedeemer, in ports.PeerInbox, sink ports.TraceSink) *application.FetchPeerFile {
	if l.Manifest.PeerFetch == nil {
		return nil
	}
	return application.NewFetchPeerFile(l.Manifest.PeerFetch.Allow, l.Audience, l.FetchMaxBytes, redeemer, in, sink)
}

// provideTools lists the tools the control API offers, for the ready line and session_start.
func provideTools(api *control.API) []string { return api.Tools() }

func provideAgentCard(l Launch) httpapi.AgentCard {
	return httpapi.NewAgentCard(httpapi.Identity{
		Name: l.Manifest.Name, Version: l.Manifest.Version, URL: l.AdvertiseURL,
		SessionID: l.SessionID, Planes: l.Planes(),
	})
}

// resourceListener is the bound TCP listener with the connection cap and the raw-target repair
// in front of it; a distinct type so wire can tell it from the control socket.
type resourceListener struct{ net.Listener }

func provideResourceListener(l Launch) resourceListener {
	return resourceListener{limits.Listen(l.Listener, limits.DefaultMaxConns)}
}

// provideResourceServer builds the hardened resource listener's server.
func provideResourceServer(l Launch, resources *httpapi.Resources, requests *inflight) resourceServer {
	srv := &http.Server{
		Handler: requests.track(httpapi.NewEcho(resources, l.Log)), BaseContext: requests.baseContext,
		ErrorLog: stdlog.New(l.Log, "", 0),
	}
	limits.Harden(srv, limits.Options{ReadHeaderTimeout: l.ReadHeaderTimeout})
	return resourceServer{srv}
}

type resourceServer struct{ *http.Server }

func provideControlAPI(l Launch, tasks *application.Tasks, share *application.ShareFile, fetch *application.FetchPeerFile) *control.API {
	status := control.Status{
		SessionID: l.SessionID, Containment: l.Containment.String(), Planes: l.Planes(),
		Audience: l.Audience, URL: l.AdvertiseURL,
	}
	return control.NewAPI(status, tasks, share, fetch, l.Log)
}

// controlServer serves the control API on the control socket.
type controlServer struct{ *http.Server }

func provideControlServer(l Launch, api *control.API, requests *inflight) controlServer {
	return controlServer{&http.Server{
		Handler: requests.track(api.NewEcho()), BaseContext: requests.baseContext,
		ReadHeaderTimeout: l.ReadHeaderTimeout, ErrorLog: stdlog.New(l.Log, "", 0),
	}}
}

// controlListener is the bound control socket.
type controlListener struct{ net.Listener }

// provideControlListener binds the control socket after the trace is open, so that a launch
// failing on either leaves the other's cleanup to run.
func provideControlListener(l Launch, _ *jsonl.File) (controlListener, func(), error) {
	ln, err := control.Listen(l.ControlPath)
	if err != nil {
		return controlListener{}, nil, err
	}
	return controlListener{ln}, func() { _ = ln.Close() }, nil
}

func provideService(l Launch, resource resourceServer, resourceLn resourceListener, ctl controlServer, ctlLn controlListener,
	requests *inflight, sink *jsonl.File, session application.Session, tools []string) *Service {
	return &Service{
		launch: l, resource: resource.Server, resourceLn: resourceLn.Listener, control: ctl.Server, ctlLn: ctlLn.Listener,
		requests: requests, trace: sink, session: session, tools: tools, log: l.Log,
	}
}
