package resplane

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/config"
	"github.com/resplane/resplane/adapters/httpapi/limits"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/adapters/landlock"
	"github.com/resplane/resplane/adapters/logging"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/otel"
	"github.com/resplane/resplane/adapters/peerhttp"
	"github.com/resplane/resplane/adapters/tlscert"
	"github.com/resplane/resplane/domain/audience"
	"github.com/resplane/resplane/domain/manifest"
)

// shutdownGrace is how long in-flight requests may take to finish after SIGINT or SIGTERM.
const shutdownGrace = 10 * time.Second

// OpenLaunch turns serve's settings into a Launch, in the order the launch promises
// (docs/operator-guide.md, "Exit statuses"): it protects the process's memory, checks every
// setting and the manifest (the launch checks included), sizes the budgets, and only then
// binds the resource listener and the metrics listener — so that a port in use fails before
// anything is created on disk, and nothing else is created here. Close the Launch to release
// what it bound, whether or not the service was assembled over it.
//
// Its errors say what to do with them: a *config.UsageError (exit 2), a *diag.Diagnostic (a
// launch refusal: exit 2, its two lines), anything else a failure (exit 1), each one line
// that names the setting at fault.
func OpenLaunch(s config.Settings, getenv func(string) string, stderr io.Writer) (_ Launch, err error) {
	if err := keys.ProtectProcess(); err != nil {
		return Launch{}, err
	}
	log, batch, err := logging.NewService(stderr, s.LogLevel, s.LogFormat)
	if err != nil {
		return Launch{}, config.Usagef("%v", err)
	}
	defer func() {
		if err != nil {
			_ = batch.Close() // the lines logged before the refusal, ahead of it
		}
	}()
	peerRoots, err := peerhttp.LoadRoots(s.PeerCA)
	if err != nil {
		return Launch{}, config.Usagef("--peer-ca: %v", err)
	}
	var pair *tlscert.Pair
	if s.TLSCert != "" {
		if pair, err = tlscert.Load(s.TLSCert, s.TLSKey, tlscert.Options{Log: log}); err != nil {
			return Launch{}, config.Usagef("--tls-cert %s, --tls-key %s: %v", s.TLSCert, s.TLSKey, err)
		}
	}
	otelEndpoint, err := otel.Endpoint(s.OTelEndpoint, getenv)
	if err != nil {
		return Launch{}, config.Usagef("%v", err)
	}
	m, warnings, d := config.LoadManifest(s.Manifest)
	if d != nil {
		return Launch{}, d
	}
	sessionID := s.SessionID
	if sessionID == "" {
		if sessionID, err = newSessionID(); err != nil {
			return Launch{}, err
		}
	}
	workdir, err := workdirFor(s, sessionID)
	if err != nil {
		return Launch{}, err
	}
	if _, d := runLaunchChecks(m, s.AfterTask, workdir); d != nil {
		return Launch{}, d
	}
	sizes, err := budget.Plan(m, s.ReadBufferBudget.Int64(), s.SpoolBudget.Int64())
	if err != nil {
		return Launch{}, config.Usagef("%v", err)
	}
	confine := landlock.Mode(s.Confine)
	if confine == landlock.Required && landlock.ABI() == 0 {
		return Launch{}, fmt.Errorf("--confine required: %w", landlock.ErrUnavailable)
	}
	paths, err := pathsFor(s, workdir, sessionID)
	if err != nil {
		return Launch{}, err
	}

	l := Launch{
		Manifest:    m,
		Identity:    Identity{SessionID: sessionID, TraceParent: s.TraceParent},
		Containment: s.Containment,
		Paths:       paths,
		Network:     Network{PeerRoots: peerRoots, AllowedHosts: s.AllowedHosts, PeerProof: s.PeerProof, TLS: pair},
		Limits: Limits{
			Budgets: sizes, FetchMaxBytes: s.FetchMaxBytes.Int64(), ReadHeaderTimeout: s.ReadHeaderTimeout,
			ShutdownGrace: shutdownGrace, SendTimeout: s.SendTimeout, MinSendRate: s.MinSendRate, HashCacheMaxAge: s.HashCacheMaxAge,
			ListingCache: s.ListingCache,
		},
		Log: log, logBatch: batch, Confine: confine,
		Observability: Observability{OTelEndpoint: otelEndpoint},
	}
	if err := l.bind(s); err != nil {
		return Launch{}, errors.Join(err, l.Close())
	}
	for _, w := range warnings {
		log.Warn().Str("code", string(w.Code)).Str("key", w.Key).Msg(w.Message)
	}
	return l, nil
}

// bind binds the resource listener and the metrics listener, then derives what depends on the
// bound port: the advertise URL (https:// under TLS) and our audience.
func (l *Launch) bind(s config.Settings) error {
	listen := s.Listen
	if listen == "" {
		listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(l.Manifest.InternalPort)))
	}
	var err error
	if l.Listener, err = limits.Bind(listen); err != nil {
		return fmt.Errorf("cannot listen on %s (--listen): %w", listen, err)
	}
	if s.MetricsListen != "" {
		if l.Observability.MetricsListener, err = limits.Bind(s.MetricsListen); err != nil {
			return fmt.Errorf("cannot listen on %s (--metrics-listen): %w", s.MetricsListen, err)
		}
	}
	l.Network.AdvertiseURL = s.AdvertiseURL
	if l.Network.AdvertiseURL == "" {
		scheme := "http"
		if l.Network.TLS != nil {
			scheme = "https"
		}
		l.Network.AdvertiseURL = scheme + "://localhost:" + strconv.Itoa(l.Listener.Addr().(*net.TCPAddr).Port)
	}
	if l.Network.Audience, err = audience.FromCard(l.Manifest.Name, l.Network.AdvertiseURL); err != nil {
		return config.Usagef("--advertise-url %q gives no audience: it needs a host", l.Network.AdvertiseURL)
	}
	return nil
}

// Close releases what OpenLaunch bound: the resource listener and the metrics listener. The
// service closes them too when it shuts down; closing twice is harmless.
func (l Launch) Close() error {
	for _, ln := range []net.Listener{l.Listener, l.Observability.MetricsListener} {
		if ln != nil {
			_ = ln.Close()
		}
	}
	if l.logBatch != nil {
		return l.logBatch.Close()
	}
	return nil
}

// newSessionID returns a fresh session id: "ses_" and a UUIDv7 as 32 lowercase hex digits.
func newSessionID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	return "ses_" + hex.EncodeToString(id[:]), nil
}

// workdirFor returns the workdir to serve in: --workdir or, when it is not given,
// <manifest dir>/workdir/<session id>, made absolute without resolving symlinks.
func workdirFor(s config.Settings, sessionID string) (string, error) {
	dir := s.Workdir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(s.Manifest), "workdir", sessionID)
	}
	return filepath.Abs(dir)
}

// pathsFor returns the paths the service creates or opens: --trace, --control and
// --spool-dir, by default in the session directory, each absolute without resolving symlinks
// (the ready line reports them, and scripts connect to them). A path given explicitly is
// refused, before anything is created, when using it would follow a symlink at its own name
// or beneath the workdir (osfs.CheckUnfollowed); the session directory's own checks guard the
// defaults.
func pathsFor(s config.Settings, workdir, sessionID string) (Paths, error) {
	p := Paths{Workdir: workdir, WorkdirGiven: s.Workdir != "", SessionDir: osfs.SessionDirPath(workdir, sessionID)}
	for _, f := range []struct {
		flag, what, value, fallback string
		dst                         *string
	}{
		{"--trace", "the trace file", s.TracePath, filepath.Join(p.SessionDir, "trace.jsonl"), &p.TracePath},
		{"--control", "the control socket", s.ControlPath, filepath.Join(p.SessionDir, "control.sock"), &p.ControlPath},
		{"--spool-dir", "the spool directory", s.SpoolDir, p.SessionDir, &p.SpoolDir},
	} {
		value := f.value
		if value == "" {
			value = f.fallback
		}
		abs, err := filepath.Abs(value)
		if err != nil {
			return Paths{}, fmt.Errorf("%s: %w", f.flag, err)
		}
		if f.value != "" {
			if err := osfs.CheckUnfollowed(f.what+" ("+f.flag+")", abs, workdir); err != nil {
				return Paths{}, err
			}
		}
		*f.dst = abs
	}
	return p, nil
}

// Check is `resplane check`: it reads the manifest and runs the launch checks serve would run
// over workdir ("" for none yet), prints on stderr the warnings serve would log, one
// "warning[CODE]: …" line each, and returns the effective grants as the one JSON line check
// prints. A refusal is its *diag.Diagnostic. It creates nothing.
func Check(manifestPath string, afterTask manifest.AfterTask, workdir string, stderr io.Writer) ([]byte, error) {
	m, warnings, d := config.LoadManifest(manifestPath)
	if d != nil {
		return nil, d
	}
	grants, d := runLaunchChecks(m, afterTask, workdir)
	if d != nil {
		return nil, d
	}
	for _, w := range warnings {
		fmt.Fprint(stderr, w.Render())
	}
	return config.MarshalGrants(grants)
}
