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
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/control"
	"github.com/resplane/resplane/adapters/dpop"
	"github.com/resplane/resplane/adapters/fanout"
	"github.com/resplane/resplane/adapters/httpapi"
	"github.com/resplane/resplane/adapters/httpapi/limits"
	"github.com/resplane/resplane/adapters/jsonl"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/adapters/landlock"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/peerhttp"
	"github.com/resplane/resplane/adapters/prometheus"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/generation"
	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/hostpolicy"
	"github.com/resplane/resplane/domain/manifest"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/ports"
)

// The providers below turn the parts of a Launch into adapters and use cases; each takes only
// the parts it uses, and decides nothing an adapter or a use case can decide itself. Each one
// that acquires a resource returns its cleanup, which wire chains in reverse order of
// acquisition.

func provideSession(c containment.Class) application.Session {
	return application.Session{Generation: &generation.Counter{}, Containment: c}
}

// workdir is the workdir once it exists: everything the service opens in it takes this.
type workdir struct {
	path string
	// created says the launch created it: the service says so once it serves.
	created bool
}

// provideWorkdir creates the workdir when it is missing. An explicit --workdir is created
// alone (its parent must exist, so a mistyped path is an error rather than a new tree); the
// default one, <manifest dir>/workdir/<session id>, with its parents.
func provideWorkdir(p Paths) (workdir, error) {
	mkdir := os.MkdirAll
	if p.WorkdirGiven {
		mkdir = os.Mkdir
	}
	switch err := mkdir(p.Workdir, 0o755); {
	case err == nil:
		return workdir{path: p.Workdir, created: true}, nil
	case errors.Is(err, os.ErrExist):
		return workdir{path: p.Workdir}, nil
	case errors.Is(err, os.ErrNotExist):
		return workdir{}, fmt.Errorf("--workdir %s: its parent directory %s does not exist; create it, or fix the path",
			p.Workdir, filepath.Dir(p.Workdir))
	default:
		return workdir{}, fmt.Errorf("creating the workdir: %w", err)
	}
}

func provideWorkdirFS(w workdir) (*osfs.FS, func(), error) {
	fs, err := osfs.New(w.path)
	if err != nil {
		return nil, nil, err
	}
	return fs, func() { _ = fs.Close() }, nil
}

// provideInbox opens peer-in's workdir, which removes the temp files earlier processes left
// in peer-in, and creates peer-in when fetch-peer-file is offered, so that confinement can
// grant writes beneath it (docs/operator-guide.md, "Confinement").
func provideInbox(m manifest.Manifest, w workdir, logger zerolog.Logger) (*osfs.Inbox, func(), error) {
	in, err := osfs.OpenInbox(w.path)
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
	dir, err := osfs.OpenSpoolDirectory(opened)
	switch {
	case errors.Is(err, osfs.ErrNoUnnamedFiles):
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
	memory, buffered *budget.Budget
	spool            *budget.Shared // shared out per client address
}

// provideBudgets makes the memory, spool and send-buffer budgets as the launch sized them
// (budget.Plan), the memory one for whether there is a spool.
func provideBudgets(lim Limits, sp ports.Spool) (budgets, error) {
	memoryTotal := lim.Budgets.Memory
	if sp == nil {
		memoryTotal = lim.Budgets.Unspooled
	}
	memory, err := budget.New("--read-buffer-budget", memoryTotal)
	if err != nil {
		return budgets{}, err
	}
	spooled, err := budget.NewShared("--spool-budget", lim.Budgets.Spool)
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

// provideProofKey generates the fetcher's proof key when capabilities.peer_fetch is declared
// and --peer-proof is not off; the cleanup overwrites it with zeros. Otherwise there is none
// (nil): nothing is proven and our card advertises no key.
func provideProofKey(m manifest.Manifest, network Network) (*keys.ProofKey, func(), error) {
	if m.PeerFetch == nil || network.PeerProof == proof.Off {
		return nil, func() {}, nil
	}
	key, err := keys.NewProofKey()
	if err != nil {
		return nil, nil, err
	}
	return key, key.Zero, nil
}

// provideProver makes the proofs of possession fetch-peer-file sends with the proof key; nil
// when there is no key.
func provideProver(key *keys.ProofKey) (ports.Prover, error) {
	if key == nil {
		return nil, nil
	}
	return dpop.NewProver(key)
}

func provideIssuer(id Identity, key ports.InstanceKey) application.PeerIssuer {
	return application.PeerIssuer{SessionID: id.SessionID, Key: application.NewKeyring(key)}
}

// provideSessionDir creates (if missing) and holds the session's own directory,
// <workdir>/.murmur/<session id>/, refusing one the agent could have planted
// (docs/operator-guide.md, "Files resplane creates"); the control socket, the trace and the
// spool are created through it.
func provideSessionDir(id Identity, w workdir) (*osfs.SessionDir, func(), error) {
	dir, err := osfs.OpenSessionDir(w.path, id.SessionID)
	if err != nil {
		return nil, nil, err
	}
	return dir, func() { _ = dir.Close() }, nil
}

// sessionFiles are the control socket and the trace file, opened in that order, so that a
// launch refused on the socket's path leaves no trace file behind.
type sessionFiles struct {
	control net.Listener
	trace   *os.File
}

// provideSessionFiles binds the control socket through the session directory's descriptor
// (or, for an explicit --control elsewhere, through its own directory's), then opens the
// trace the same way. The cleanup closes the socket, which removes its file; the trace file
// is the trace sink's to close.
func provideSessionFiles(p Paths, dir *osfs.SessionDir) (sessionFiles, func(), error) {
	parent, err := dir.OpenParent(p.ControlPath)
	if err != nil {
		return sessionFiles{}, nil, err
	}
	ln, err := control.Listen(parent, filepath.Base(p.ControlPath))
	if err != nil {
		return sessionFiles{}, nil, err
	}
	trace, err := dir.OpenTrace(p.TracePath)
	if err != nil {
		_ = ln.Close()
		return sessionFiles{}, nil, err
	}
	return sessionFiles{control: ln, trace: trace}, func() { _ = ln.Close() }, nil
}

// provideTrace makes the trace sink over the opened trace file. A line that cannot be
// written is logged and counted (jsonl.Report).
func provideTrace(id Identity, logger zerolog.Logger, clk *clock.System, metrics *prometheus.Metrics,
	files sessionFiles) (*jsonl.File, func(), error) {
	sink, err := jsonl.Open(jsonl.Config{
		File: files.trace, SessionID: id.SessionID, Parent: id.TraceParent, Clock: clk,
		Redact: handle.Redact, OnError: jsonl.Report(logger, metrics.TraceWritesFailed),
	})
	if err != nil {
		_ = files.trace.Close()
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

// provideFiles is the operator plane; its listing hash cache takes read leases when leases is
// not nil (provideListingLeases).
func provideFiles(m manifest.Manifest, session application.Session, fs ports.ExportFS, reader *application.Reader,
	clk ports.Clock, sink ports.TraceSink, lim Limits, leases ports.ReadLeases) *application.Files {
	files := application.NewFiles(application.FilesPlane(m), session, fs, reader, clk, sink)
	files.BoundHashAge(lim.HashCacheMaxAge)
	if leases != nil {
		files.LeaseHashes(leases)
	}
	return files
}

// provideListingLeases is the read leases the listing hash cache takes under --listing-cache
// auto (docs/operator-guide.md, "Listing cost"): nil under max-age, and where the service
// cannot take leases on the workdir's files, which it logs once with the reason. Leases of
// files deleted since they were listed are given up every --hash-cache-max-age. The metrics,
// when on, watch how many are held.
func provideListingLeases(lim Limits, fs *osfs.FS, session *osfs.SessionDir, metrics *prometheus.Metrics,
	logger zerolog.Logger) (ports.ReadLeases, func(), error) {
	if lim.ListingCache == application.ListingCacheMaxAge {
		metrics.WatchLeases(nil, 0)
		return nil, func() {}, nil
	}
	limit := osfs.LeaseLimit()
	leases, err := osfs.OpenLeases(fs, session, osfs.LeaseOptions{Limit: limit, SweepEvery: lim.HashCacheMaxAge})
	if err != nil {
		metrics.WatchLeases(nil, 0)
		logger.Info().Err(err).Msg("the listing hash cache takes no read leases: a cached hash is reused at most --hash-cache-max-age after it was taken")
		return nil, func() {}, nil
	}
	metrics.WatchLeases(leases, limit)
	return leases, func() { _ = leases.Close() }, nil
}

// provideProofs is how the peer plane proves possession, as --peer-proof says.
func provideProofs(network Network, verifier ports.ProofVerifier) application.Proofs {
	return application.Proofs{Mode: network.PeerProof, Verifier: verifier}
}

func provideRedeem(m manifest.Manifest, issuer application.PeerIssuer, proofs application.Proofs, session application.Session,
	fs ports.ExportFS, reader *application.Reader, clk ports.Clock, sink ports.TraceSink) *application.Redeem {
	return application.NewRedeem(application.PeerPlane(m), issuer, proofs, session, fs, reader, clk, sink)
}

func provideRotateKey(m manifest.Manifest, issuer application.PeerIssuer, clk ports.Clock, sink ports.TraceSink) *application.RotateKey {
	return application.NewRotateKey(application.PeerPlane(m), issuer, clk, sink)
}

// provideShareFile returns nil when exports.peer_files is not declared: the tool does not exist.
func provideShareFile(m manifest.Manifest, issuer application.PeerIssuer, proofs application.Proofs, session application.Session,
	fs ports.ExportFS, cards ports.CardFetcher, nonces ports.NonceSource, clk ports.Clock, sink ports.TraceSink) *application.ShareFile {
	plane := application.PeerPlane(m)
	if plane == nil {
		return nil
	}
	share := application.SharePlane{ExportPlane: *plane, MaxTTL: m.PeerFiles.MaxTTL}
	return application.NewShareFile(share, m.NetworkAllow, issuer, proofs, session, fs, cards, nonces, clk, sink)
}

// provideFetchPeerFile returns nil when capabilities.peer_fetch is not declared.
func provideFetchPeerFile(m manifest.Manifest, network Network, lim Limits, prover ports.Prover, redeemer ports.PeerRedeemer,
	in ports.PeerInbox, clk ports.Clock, sink ports.TraceSink) *application.FetchPeerFile {
	if m.PeerFetch == nil {
		return nil
	}
	return application.NewFetchPeerFile(m.PeerFetch.Allow, network.Audience, lim.FetchMaxBytes, prover, redeemer, in, clk, sink)
}

// provideTools lists the tools the control API offers, for the ready line and session_start.
func provideTools(api *control.API) []string { return api.Tools() }

// provideAgentCard renders our card, with the key prover proves with and the
// exports.peer_files limits for its peer-plane extension (docs/peer-plane.md, "Proof of
// possession").
func provideAgentCard(m manifest.Manifest, id Identity, network Network, prover ports.Prover) httpapi.AgentCard {
	card := httpapi.Identity{
		Name: m.Name, Version: m.Version, URL: network.AdvertiseURL,
		SessionID: id.SessionID, Planes: m.Planes(), PeerProof: network.PeerProof,
	}
	if prover != nil {
		card.ProofKey = prover.PublicKey()
	}
	if p := m.PeerFiles; p != nil {
		card.PeerFiles = &httpapi.PeerFilesLimits{MaxBytes: p.MaxBytes.Int64(), MaxTTLMs: p.MaxTTL.Milliseconds()}
	}
	return httpapi.NewAgentCard(card)
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

// provideResourceListener caps the connections (limits.Caps defaults), serves TLS under
// --tls-cert, and logs, at most once a minute, that an address reached its share and its
// further connections are being closed.
func provideResourceListener(bound net.Listener, network Network, logger zerolog.Logger) resourceListener {
	refusals := rate.Sometimes{Interval: time.Minute}
	caps := limits.Caps{Refused: func(addr netip.Addr) {
		refusals.Do(func() {
			logger.Warn().Str("remote", addr.String()).
				Msg("a client address holds its share of the resource listener's connections; its further connections are closed at once")
		})
	}}
	if network.TLS != nil {
		return resourceListener{limits.ListenTLS(bound, caps, network.TLS.Config())}
	}
	return resourceListener{limits.Listen(bound, caps)}
}

func provideResources(files *application.Files, peer *application.Redeem, card httpapi.AgentCard, hosts hostpolicy.Policy,
	lim Limits) *httpapi.Resources {
	return httpapi.NewResources(files, peer, card, hosts, httpapi.Send{Timeout: lim.SendTimeout, MinRate: lim.MinSendRate})
}

// resourceServer serves the resource listener; a distinct type so wire can tell it from the
// control server.
type resourceServer struct{ *http.Server }

// newServer builds one of the service's HTTP servers, hardened by limits.Harden as opts
// says, its requests tracked for shutdown and net/http's own errors logged.
func newServer(h http.Handler, opts limits.Options, requests *limits.Inflight, logger zerolog.Logger) *http.Server {
	srv := &http.Server{Handler: requests.Track(h), BaseContext: requests.BaseContext, ErrorLog: log.New(logger, "", 0)}
	limits.Harden(srv, opts)
	return srv
}

// provideResourceServer builds the resource listener's server; with metrics on, it times each
// request on a plane and counts the connections.
func provideResourceServer(lim Limits, logger zerolog.Logger, resources *httpapi.Resources, requests *limits.Inflight,
	metrics *prometheus.Metrics) resourceServer {
	h := metrics.InstrumentRequests(httpapi.NewEcho(resources, logger), httpapi.PlaneOf)
	srv := newServer(h, limits.Options{ReadHeaderTimeout: lim.ReadHeaderTimeout, WriteTimeout: lim.SendTimeout}, requests, logger)
	srv.ConnState = metrics.TrackConnections(srv.ConnState)
	return resourceServer{srv}
}

func provideControlAPI(m manifest.Manifest, id Identity, c containment.Class, network Network, tasks *application.Tasks,
	share *application.ShareFile, fetch *application.FetchPeerFile, rotate *application.RotateKey, logger zerolog.Logger,
	confined landlock.Result, files *application.Files) *control.API {
	status := control.Status{
		SessionID: id.SessionID, Containment: c.String(), Planes: m.Planes(),
		Audience: network.Audience, URL: network.AdvertiseURL, Confinement: confined.String(),
		PeerProof: proof.State(network.PeerProof, m.DeclaresPeerPlane()), TLS: network.TLS != nil,
		ListingCache: files.ListingCache(),
	}
	return control.NewAPI(status, tasks, share, fetch, rotate, logger)
}

// openAtStart is everything the service opens at start. Confinement comes after all of it:
// a resource opened behind the wall would be refused. A new resource the service opens at
// start belongs here.
type openAtStart struct {
	Workdir *osfs.FS
	Inbox   *osfs.Inbox
	Session sessionFiles
	Trace   *jsonl.File
	Spool   ports.Spool
	Leases  ports.ReadLeases // its probe makes and removes a file in the session directory
}

// provideConfinement confines the process (docs/operator-guide.md, "Confinement") once
// everything it opens at start is open (the resource listener is bound before the Launch is
// made, and the peer CA bundle read). The control API and the service, which report the
// confinement, come after it.
func provideConfinement(mode landlock.Mode, m manifest.Manifest, p Paths, network Network, obs Observability, logger zerolog.Logger,
	_ openAtStart) (landlock.Result, error) {
	service := landlock.Service{
		Workdir: p.Workdir, SessionDir: p.SessionDir, TracePath: p.TracePath, ControlPath: p.ControlPath,
		SpoolDir: p.SpoolDir, Metrics: obs.MetricsListener != nil,
	}
	if network.TLS != nil {
		service.Readable = network.TLS.Dirs()
	}
	if m.PeerFetch != nil {
		service.Inbox = filepath.Join(p.Workdir, osfs.InboxDir)
	}
	policy := service.Policy()
	if mode != landlock.Off {
		for _, dir := range policy.Exposing() {
			logger.Warn().Str("dir", dir).Msg("this writable directory holds the workdir: confinement cannot keep the workdir read-only; " +
				"put --trace, --control and --spool-dir outside it")
		}
	}
	return landlock.Confine(mode, policy)
}

// controlServer serves the control API on the control socket.
type controlServer struct{ *http.Server }

func provideControlServer(lim Limits, logger zerolog.Logger, api *control.API, requests *limits.Inflight) controlServer {
	return controlServer{newServer(api.NewEcho(), limits.ControlOptions(lim.ReadHeaderTimeout), requests, logger)}
}

// provideService takes the whole Launch: the service reports it, in the ready line and in
// session_start.
func provideService(l Launch, w workdir, resource resourceServer, resourceLn resourceListener, ctl controlServer, files sessionFiles,
	requests *limits.Inflight, sink *fanout.Sink, session application.Session, tools []string, confined landlock.Result,
	metrics metricsServer, ready *readiness, plane *application.Files) *Service {
	return &Service{
		launch: l, workdirCreated: w.created, resource: resource.Server, resourceLn: resourceLn.Listener, control: ctl.Server, ctlLn: files.control,
		requests: requests, trace: sink, session: session, tools: tools, log: l.Log, confined: confined,
		metrics: metrics, ready: ready, listingCache: plane.ListingCache(),
	}
}
