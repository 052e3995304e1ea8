package resplane

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/control"
	"github.com/resplane/resplane/adapters/httpapi"
	"github.com/resplane/resplane/adapters/httpapi/limits"
	"github.com/resplane/resplane/adapters/jsonl"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/peerhttp"
	"github.com/resplane/resplane/adapters/spool"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/generation"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/manifest"
	"github.com/resplane/resplane/ports"
)

// The providers below turn the parts of a Launch into adapters and use cases; each takes only
// the parts it uses. Each one that acquires a resource returns its cleanup, which wire chains
// in reverse order of acquisition.

func provideSession(c containment.Class) application.Session {
	return application.Session{Generation: &generation.Counter{}, Containment: c}
}

func provideWorkdirFS(p Paths) (*osfs.FS, func(), error) {
	if err := os.MkdirAll(p.Workdir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("creating the workdir: %w", err)
	}
	fs, err := osfs.New(p.Workdir)
	if err != nil {
		return nil, nil, err
	}
	return fs, func() { _ = fs.Close() }, nil
}

// provideInbox opens peer-in's workdir; the unused *osfs.FS orders it after the workdir exists.
func provideInbox(p Paths, _ *osfs.FS) (*osfs.Inbox, func(), error) {
	in, err := osfs.OpenInbox(p.Workdir)
	if err != nil {
		return nil, nil, err
	}
	return in, func() { _ = in.Close() }, nil
}

// provideSpool opens the spool directory; the unused *jsonl.File orders it after the trace, which
// creates the session directory that is the default spool directory. On a filesystem without
// unnamed files it logs one warning and returns no spool: every read is then buffered in
// memory.
func provideSpool(p Paths, logger zerolog.Logger, _ *jsonl.File) (ports.Spool, func(), error) {
	dir, err := spool.Open(p.SpoolDir)
	switch {
	case errors.Is(err, spool.ErrNoUnnamedFiles):
		logger.Warn().Err(err).Msg("no spool: every read is buffered in memory, within --read-buffer-budget; " +
			"give --spool-dir a directory on a local filesystem such as ext4, XFS, btrfs or tmpfs")
		return nil, func() {}, nil
	case err != nil:
		return nil, nil, err
	}
	return dir, func() { _ = dir.Close() }, nil
}

// provideBudgets makes the memory, spool and send-buffer budgets. Without a spool every read is buffered in
// memory, so the memory budget's default grows to one read of the largest max_bytes; a budget
// given explicitly is kept as it is (a read larger than all of it then fails io_error).
func provideBudgets(m manifest.Manifest, lim Limits, sp ports.Spool) (application.Budgets, error) {
	total, err := budget.TotalFor(m, lim.ReadBufferBudget, sp != nil)
	if err != nil {
		total = lim.ReadBufferBudget
	}
	memory, err := budget.New("--read-buffer-budget", total)
	if err != nil {
		return application.Budgets{}, err
	}
	spooled, err := budget.New("--spool-budget", lim.SpoolBudget)
	if err != nil {
		return application.Budgets{}, err
	}
	buffered, err := budget.New("the send-buffer budget", application.BufferedTotal)
	if err != nil {
		return application.Budgets{}, err
	}
	return application.Budgets{Memory: memory, Spool: spooled, Buffered: buffered}, nil
}

// provideInstanceKey generates the minting key when exports.peer_files is declared; the
// cleanup overwrites it with zeros. Otherwise no key is generated: the key is the zero
// keys.Random, all zero bytes, under which no handle verifies.
func provideInstanceKey(m manifest.Manifest) (*keys.Random, func(), error) {
	key := &keys.Random{}
	if m.PeerFiles != nil {
		var err error
		if key, err = keys.NewRandom(); err != nil {
			return nil, nil, err
		}
	}
	return key, key.Zero, nil
}

func provideIssuer(id Identity, key ports.InstanceKey) application.PeerIssuer {
	return application.PeerIssuer{SessionID: id.SessionID, Key: key}
}

// provideTrace opens the trace; the unused *osfs.FS orders it after the workdir exists, since
// the default trace path lies inside it.
func provideTrace(id Identity, p Paths, logger zerolog.Logger, clk *clock.System, _ *osfs.FS) (*jsonl.File, func(), error) {
	sink, err := jsonl.Open(jsonl.Config{
		Path: p.TracePath, SessionID: id.SessionID, Parent: id.TraceParent, Clock: clk,
		Redact:  handle.Redact,
		OnError: func(err error) { logger.Error().Err(err).Msg("a trace line could not be written") },
	})
	if err != nil {
		return nil, nil, err
	}
	return sink, func() { _ = sink.Close() }, nil
}

func provideCardFetcher(roots *x509.CertPool) *peerhttp.CardFetcher {
	return peerhttp.NewCardFetcher(peerhttp.CardOptions{Roots: roots})
}

func provideRedeemer(roots *x509.CertPool) *peerhttp.Redeemer {
	return peerhttp.NewRedeemer(peerhttp.RedeemOptions{Roots: roots})
}

func filesPlane(m manifest.Manifest) *application.ExportPlane {
	if f := m.Files; f != nil {
		return &application.ExportPlane{Root: f.Root.String(), MaxBytes: f.MaxBytes.Int64()}
	}
	return nil
}

func peerPlane(m manifest.Manifest) *application.ExportPlane {
	if p := m.PeerFiles; p != nil {
		return &application.ExportPlane{Root: p.Root.String(), MaxBytes: p.MaxBytes.Int64()}
	}
	return nil
}

func provideFiles(m manifest.Manifest, session application.Session, fs ports.ExportFS, reader *application.Reader, sink ports.TraceSink) *application.Files {
	return application.NewFiles(filesPlane(m), session, fs, reader, sink)
}

func provideRedeem(m manifest.Manifest, issuer application.PeerIssuer, session application.Session, fs ports.ExportFS,
	reader *application.Reader, clk ports.Clock, sink ports.TraceSink) *application.Redeem {
	return application.NewRedeem(peerPlane(m), issuer, session, fs, reader, clk, sink)
}

// provideShareFile returns nil when exports.peer_files is not declared: the tool does not exist.
func provideShareFile(m manifest.Manifest, issuer application.PeerIssuer, session application.Session, fs ports.ExportFS,
	cards ports.CardFetcher, nonces ports.NonceSource, clk ports.Clock, sink ports.TraceSink) *application.ShareFile {
	plane := peerPlane(m)
	if plane == nil {
		return nil
	}
	share := application.SharePlane{ExportPlane: *plane, MaxTTL: m.PeerFiles.MaxTTL}
	return application.NewShareFile(share, m.NetworkAllow, issuer, session, fs, cards, nonces, clk, sink)
}

// provideFetchPeerFile returns nil when capabilities.peer_fetch is not declared.
func provideFetchPeerFile(m manifest.Manifest, network Network, lim Limits, redeemer ports.PeerRedeemer, in ports.PeerInbox,
	sink ports.TraceSink) *application.FetchPeerFile {
	if m.PeerFetch == nil {
		return nil
	}
	return application.NewFetchPeerFile(m.PeerFetch.Allow, network.Audience, lim.FetchMaxBytes, redeemer, in, sink)
}

// provideTools lists the tools the control API offers, for the ready line and session_start.
func provideTools(api *control.API) []string { return api.Tools() }

func provideAgentCard(m manifest.Manifest, id Identity, network Network) httpapi.AgentCard {
	return httpapi.NewAgentCard(httpapi.Identity{
		Name: m.Name, Version: m.Version, URL: network.AdvertiseURL,
		SessionID: id.SessionID, Planes: declaredPlanes(m),
	})
}

// resourceListener is the bound TCP listener with the connection cap and the raw-target repair
// in front of it; a distinct type so wire can tell it from the bound listener and the control
// socket.
type resourceListener struct{ net.Listener }

// provideResourceListener caps the connections (limits.Caps defaults) and logs, at most once a
// minute, that an address reached its share and its further connections are being closed.
func provideResourceListener(bound net.Listener, logger zerolog.Logger) resourceListener {
	refusals := rate.Sometimes{Interval: time.Minute}
	return resourceListener{limits.Listen(bound, limits.Caps{Refused: func(addr netip.Addr) {
		refusals.Do(func() {
			logger.Warn().Str("remote", addr.String()).
				Msg("a client address holds its share of the resource listener's connections; its further connections are closed at once")
		})
	}})}
}

func provideResources(files *application.Files, peer *application.Redeem, card httpapi.AgentCard, lim Limits) *httpapi.Resources {
	return httpapi.NewResources(files, peer, card, lim.SendTimeout)
}

// resourceServer serves the resource listener; a distinct type so wire can tell it from the
// control server.
type resourceServer struct{ *http.Server }

// provideResourceServer builds the hardened resource listener's server.
func provideResourceServer(lim Limits, logger zerolog.Logger, resources *httpapi.Resources, requests *inflight) resourceServer {
	srv := &http.Server{
		Handler: requests.track(httpapi.NewEcho(resources, logger)), BaseContext: requests.baseContext,
		ErrorLog: log.New(logger, "", 0),
	}
	limits.Harden(srv, limits.Options{ReadHeaderTimeout: lim.ReadHeaderTimeout, WriteTimeout: lim.SendTimeout})
	return resourceServer{srv}
}

func provideControlAPI(m manifest.Manifest, id Identity, c containment.Class, network Network, tasks *application.Tasks,
	share *application.ShareFile, fetch *application.FetchPeerFile, logger zerolog.Logger) *control.API {
	status := control.Status{
		SessionID: id.SessionID, Containment: c.String(), Planes: declaredPlanes(m),
		Audience: network.Audience, URL: network.AdvertiseURL,
	}
	return control.NewAPI(status, tasks, share, fetch, logger)
}

// controlServer serves the control API on the control socket.
type controlServer struct{ *http.Server }

func provideControlServer(lim Limits, logger zerolog.Logger, api *control.API, requests *inflight) controlServer {
	return controlServer{&http.Server{
		Handler: requests.track(api.NewEcho()), BaseContext: requests.baseContext,
		ReadHeaderTimeout: lim.ReadHeaderTimeout, ErrorLog: log.New(logger, "", 0),
	}}
}

// controlListener is the bound control socket.
type controlListener struct{ net.Listener }

// provideControlListener binds the control socket after the trace is open, so that a launch
// failing on either leaves the other's cleanup to run.
func provideControlListener(p Paths, _ *jsonl.File) (controlListener, func(), error) {
	ln, err := control.Listen(p.ControlPath)
	if err != nil {
		return controlListener{}, nil, err
	}
	return controlListener{ln}, func() { _ = ln.Close() }, nil
}

// provideService takes the whole Launch: the service reports it, in the ready line and in
// session_start.
func provideService(l Launch, resource resourceServer, resourceLn resourceListener, ctl controlServer, ctlLn controlListener,
	requests *inflight, sink *jsonl.File, session application.Session, tools []string) *Service {
	return &Service{
		launch: l, resource: resource.Server, resourceLn: resourceLn.Listener, control: ctl.Server, ctlLn: ctlLn.Listener,
		requests: requests, trace: sink, session: session, tools: tools, log: l.Log,
	}
}
