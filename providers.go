package resplane

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/control"
	"github.com/resplane/resplane/adapters/fanout"
	"github.com/resplane/resplane/adapters/httpapi"
	"github.com/resplane/resplane/adapters/httpapi/limits"
	"github.com/resplane/resplane/adapters/jsonl"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/adapters/landlock"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/peerhttp"
	"github.com/resplane/resplane/adapters/prometheus"
	"github.com/resplane/resplane/adapters/spool"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/generation"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/hostpolicy"
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

// provideInbox opens peer-in's workdir, which removes the temp files earlier processes left
// in peer-in, and creates peer-in when fetch-peer-file is offered, so that confinement can
// grant writes beneath it (docs/operator-guide.md, "Confinement"). The unused *osfs.FS orders
// it after the workdir exists.
func provideInbox(m manifest.Manifest, p Paths, logger zerolog.Logger, _ *osfs.FS) (*osfs.Inbox, func(), error) {
	in, err := osfs.OpenInbox(p.Workdir)
	if err != nil {
		return nil, nil, err
	}
	if m.PeerFetch != nil {
		if err := in.Create(); err != nil {
			logger.Warn().Err(err).Msg("peer-in is not a real directory: every fetch-peer-file fails io_error")
		}
	}
	return in, func() { _ = in.Close() }, nil
}

// provideSpool opens the spool directory through the held session directory (its default, a
// duplicate of the held descriptor, never re-resolved by name; an explicit --spool-dir
// elsewhere is the operator's and is found by name). On a filesystem without unnamed files it
// logs one warning and returns no spool: every read is then buffered in memory.
func provideSpool(p Paths, logger zerolog.Logger, session *osfs.SessionDir) (ports.Spool, func(), error) {
	opened, err := session.OpenDir(p.SpoolDir)
	if err != nil {
		return nil, nil, err
	}
	dir, err := spool.OpenDirectory(opened)
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

// budgets are the three byte budgets reads draw on, as the adapter that the metrics read too.
type budgets struct {
	memory, spool, buffered *budget.Budget
}

// provideBudgets makes the memory, spool and send-buffer budgets. Without a spool every read is
// buffered in memory, so the memory budget's default grows to one read of the largest max_bytes;
// a budget given explicitly is kept as it is (a read larger than all of it then fails
// io_error).
func provideBudgets(m manifest.Manifest, lim Limits, sp ports.Spool) (budgets, error) {
	total, err := budget.TotalFor(m, lim.ReadBufferBudget, sp != nil)
	if err != nil {
		total = lim.ReadBufferBudget
	}
	memory, err := budget.New("--read-buffer-budget", total)
	if err != nil {
		return budgets{}, err
	}
	spooled, err := budget.New("--spool-budget", lim.SpoolBudget)
	if err != nil {
		return budgets{}, err
	}
	buffered, err := budget.New("the send-buffer budget", application.BufferedTotal)
	if err != nil {
		return budgets{}, err
	}
	return budgets{memory: memory, spool: spooled, buffered: buffered}, nil
}

// provideApplicationBudgets hands the budgets to the reader as its ports.
func provideApplicationBudgets(b budgets) application.Budgets {
	return application.Budgets{Memory: b.memory, Spool: b.spool, Buffered: b.buffered}
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

// provideSessionDir creates (if missing) and holds the session's own directory,
// <workdir>/.murmur/<session id>/, refusing one the agent could have planted
// (docs/operator-guide.md, "Files resplane creates"); the trace, the control socket and the
// spool are created through it. The unused *osfs.FS orders it after the workdir exists.
func provideSessionDir(id Identity, p Paths, _ *osfs.FS) (*osfs.SessionDir, func(), error) {
	dir, err := osfs.OpenSessionDir(p.Workdir, id.SessionID)
	if err != nil {
		return nil, nil, err
	}
	return dir, func() { _ = dir.Close() }, nil
}

// provideTrace opens the trace through the session directory. The unused controlListener
// orders it after the control socket, so that a launch refused on the socket's path leaves no
// trace file behind. A line that cannot be written is logged and counted.
func provideTrace(id Identity, p Paths, logger zerolog.Logger, clk *clock.System, metrics *prometheus.Metrics,
	dir *osfs.SessionDir, _ controlListener) (*jsonl.File, func(), error) {
	f, err := dir.OpenTrace(p.TracePath)
	if err != nil {
		return nil, nil, err
	}
	sink, err := jsonl.Open(jsonl.Config{
		File: f, SessionID: id.SessionID, Parent: id.TraceParent, Clock: clk,
		Redact:  handle.Redact,
		OnError: traceFailure(logger, metrics),
	})
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return sink, func() { _ = sink.Close() }, nil
}

// traceFailure logs and counts what the trace reports. Lines that writes dropped arrive at
// most once a minute with their count (jsonl.DroppedLines): a full disk or quota is a
// warning, since requests are still answered; any other failure is an error.
func traceFailure(logger zerolog.Logger, metrics *prometheus.Metrics) func(error) {
	return func(err error) {
		var dropped *jsonl.DroppedLines
		if !errors.As(err, &dropped) {
			metrics.TraceWritesFailed(1)
			logger.Error().Err(err).Msg("a trace line could not be written")
			return
		}
		metrics.TraceWritesFailed(dropped.Count)
		line := logger.Error()
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			line = logger.Warn()
		}
		line.Int("dropped", dropped.Count).AnErr("cause", dropped.Err).Msg("trace lines could not be written and were dropped")
	}
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

func provideFiles(m manifest.Manifest, session application.Session, fs ports.ExportFS, reader *application.Reader,
	clk ports.Clock, sink ports.TraceSink) *application.Files {
	return application.NewFiles(filesPlane(m), session, fs, reader, clk, sink)
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

// provideHostPolicy accepts, besides IP literals and localhost, our advertise URL's host —
// peers and operators address us by the URL on our card — and the --allowed-hosts names.
func provideHostPolicy(network Network) hostpolicy.Policy {
	names := network.AllowedHosts
	if u, err := url.Parse(network.AdvertiseURL); err == nil {
		names = append([]string{u.Hostname()}, names...)
	}
	return hostpolicy.New(names...)
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

func provideResources(files *application.Files, peer *application.Redeem, card httpapi.AgentCard, hosts hostpolicy.Policy,
	lim Limits) *httpapi.Resources {
	return httpapi.NewResources(files, peer, card, hosts, lim.SendTimeout)
}

// resourceServer serves the resource listener; a distinct type so wire can tell it from the
// control server.
type resourceServer struct{ *http.Server }

// provideResourceServer builds the hardened resource listener's server; with metrics on, it
// times each request on a plane and counts the connections.
func provideResourceServer(lim Limits, logger zerolog.Logger, resources *httpapi.Resources, requests *inflight,
	metrics *prometheus.Metrics) resourceServer {
	srv := &http.Server{
		Handler:     requests.track(metrics.InstrumentRequests(httpapi.NewEcho(resources, logger), httpapi.PlaneOf)),
		BaseContext: requests.baseContext, ErrorLog: log.New(logger, "", 0),
	}
	limits.Harden(srv, limits.Options{ReadHeaderTimeout: lim.ReadHeaderTimeout, WriteTimeout: lim.SendTimeout})
	srv.ConnState = metrics.TrackConnections(srv.ConnState)
	return resourceServer{srv}
}

func provideControlAPI(m manifest.Manifest, id Identity, c containment.Class, network Network, tasks *application.Tasks,
	share *application.ShareFile, fetch *application.FetchPeerFile, logger zerolog.Logger, confined landlock.Result) *control.API {
	status := control.Status{
		SessionID: id.SessionID, Containment: c.String(), Planes: declaredPlanes(m),
		Audience: network.Audience, URL: network.AdvertiseURL, Confinement: confined.String(),
	}
	return control.NewAPI(status, tasks, share, fetch, logger)
}

// provideConfinement confines the process (docs/operator-guide.md, "Confinement") once
// everything it opens at start is open. Its unused arguments order it after them: the
// workdir, peer-in, the trace, the control socket and the spool (the resource listener is bound before
// the Launch is made, and the peer CA bundle read). A resource the service opens at start
// belongs in this list; the control API and the service, which report the confinement, come
// after it.
func provideConfinement(mode landlock.Mode, m manifest.Manifest, p Paths, obs Observability, logger zerolog.Logger,
	_ *osfs.FS, _ *osfs.Inbox, _ *jsonl.File, _ controlListener, _ ports.Spool) (landlock.Result, error) {
	policy := landlock.Policy{Workdir: p.Workdir, Writable: writableDirs(m, p), ProcessStats: obs.MetricsListener != nil}
	if mode != landlock.Off {
		for _, dir := range policy.Exposing() {
			logger.Warn().Str("dir", dir).Msg("this writable directory holds the workdir: confinement cannot keep the workdir read-only; " +
				"put --trace, --control and --spool-dir outside it")
		}
	}
	return landlock.Confine(mode, policy)
}

// writableDirs are the directories the service writes beneath once confined: the session
// directory, those of the trace and the control socket, the spool, and peer-in when
// fetch-peer-file is offered.
func writableDirs(m manifest.Manifest, p Paths) []string {
	dirs := []string{p.SessionDir, filepath.Dir(p.TracePath), filepath.Dir(p.ControlPath), p.SpoolDir}
	if m.PeerFetch != nil {
		dirs = append(dirs, filepath.Join(p.Workdir, osfs.InboxDir))
	}
	return dirs
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

// provideControlListener binds the control socket through the session directory's descriptor
// (or, for an explicit --control elsewhere, through its own directory's).
func provideControlListener(p Paths, dir *osfs.SessionDir) (controlListener, func(), error) {
	parent, err := dir.OpenDir(filepath.Dir(p.ControlPath))
	if err != nil {
		return controlListener{}, nil, err
	}
	ln, err := control.Listen(parent, filepath.Base(p.ControlPath))
	if err != nil {
		return controlListener{}, nil, err
	}
	return controlListener{ln}, func() { _ = ln.Close() }, nil
}

// provideService takes the whole Launch: the service reports it, in the ready line and in
// session_start.
func provideService(l Launch, resource resourceServer, resourceLn resourceListener, ctl controlServer, ctlLn controlListener,
	requests *inflight, sink *fanout.Sink, session application.Session, tools []string, confined landlock.Result,
	metrics metricsServer, ready *readiness) *Service {
	return &Service{
		launch: l, resource: resource.Server, resourceLn: resourceLn.Listener, control: ctl.Server, ctlLn: ctlLn.Listener,
		requests: requests, trace: sink, session: session, tools: tools, log: l.Log, confined: confined,
		metrics: metrics, ready: ready,
	}
}
