package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/resplane/resplane"
	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/config"
	"github.com/resplane/resplane/adapters/landlock"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/otel"
	"github.com/resplane/resplane/adapters/peerhttp"
	"github.com/resplane/resplane/domain/audience"
	"github.com/resplane/resplane/domain/diag"
)

// shutdownGrace is how long in-flight requests may take to finish after SIGINT or SIGTERM.
const shutdownGrace = 10 * time.Second

// loadSettings reads cmd's settings and turns help and usage errors into an exit status; ok is
// false when the caller must return that status.
func loadSettings(cmd config.Command, args []string, stdout, stderr io.Writer, getenv func(string) string) (config.Settings, int, bool) {
	settings, err := config.Load(cmd, args, getenv)
	switch {
	case errors.Is(err, config.ErrHelp):
		fmt.Fprint(stdout, config.Help(cmd))
		return settings, exitOK, false
	case err != nil:
		fmt.Fprintf(stderr, "resplane %s: %v\n", cmd, err)
		return settings, exitUsage, false
	}
	return settings, 0, true
}

// refuseLaunch prints a launch diagnostic's two lines and returns the launch-refusal status.
func refuseLaunch(stderr io.Writer, d *diag.Diagnostic) int {
	fmt.Fprint(stderr, d.Render())
	return exitUsage
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
func workdirFor(settings config.Settings, sessionID string) (string, error) {
	dir := settings.Workdir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(settings.Manifest), "workdir", sessionID)
	}
	return filepath.Abs(dir)
}

func checkCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	settings, status, ok := loadSettings(config.Check, args, stdout, stderr, getenv)
	if !ok {
		return status
	}
	m, _, d := config.LoadManifest(settings.Manifest)
	if d != nil {
		return refuseLaunch(stderr, d)
	}
	// Without --workdir there is no session yet, so no default workdir can exist: the
	// E-CAP-007 check then has nothing to inspect, exactly as on a first serve.
	workdir := ""
	if settings.Workdir != "" {
		var err error
		if workdir, err = filepath.Abs(settings.Workdir); err != nil {
			fmt.Fprintf(stderr, "resplane check: %v\n", err)
			return exitFailure
		}
	}
	grants, d := resplane.RunLaunchChecks(m, settings.AfterTask, workdir)
	if d != nil {
		return refuseLaunch(stderr, d)
	}
	line, err := config.MarshalGrants(grants)
	if err != nil {
		fmt.Fprintf(stderr, "resplane check: %v\n", err)
		return exitFailure
	}
	_, _ = stdout.Write(line)
	return exitOK
}

func serveCommand(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if err := makeUndumpable(); err != nil {
		fmt.Fprintf(stderr, "resplane serve: %v\n", err)
		return exitFailure
	}
	settings, status, ok := loadSettings(config.Serve, args, stdout, stderr, getenv)
	if !ok {
		return status
	}
	log, err := resplane.NewLogger(stderr, settings.LogLevel, settings.LogFormat)
	if err != nil {
		fmt.Fprintf(stderr, "resplane serve: %v\n", err)
		return exitUsage
	}
	peerRoots, err := peerhttp.LoadRoots(settings.PeerCA)
	if err != nil {
		fmt.Fprintf(stderr, "resplane serve: --peer-ca: %v\n", err)
		return exitUsage
	}
	otelEndpoint, err := otel.Endpoint(settings.OTelEndpoint, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "resplane serve: %v\n", err)
		return exitUsage
	}
	m, warnings, d := config.LoadManifest(settings.Manifest)
	if d != nil {
		return refuseLaunch(stderr, d)
	}
	sessionID := settings.SessionID
	if sessionID == "" {
		if sessionID, err = newSessionID(); err != nil {
			fmt.Fprintf(stderr, "resplane serve: %v\n", err)
			return exitFailure
		}
	}
	workdir, err := workdirFor(settings, sessionID)
	if err != nil {
		fmt.Fprintf(stderr, "resplane serve: %v\n", err)
		return exitFailure
	}
	if _, d := resplane.RunLaunchChecks(m, settings.AfterTask, workdir); d != nil {
		return refuseLaunch(stderr, d)
	}
	// The budgets are checked against the manifest before anything is bound or created. The
	// memory budget is checked as it is with a spool; whether there is one is known only once
	// the spool directory is open, and without one its default grows (budget.TotalFor).
	if _, err := budget.TotalFor(m, settings.ReadBufferBudget.Int64(), true); err != nil {
		fmt.Fprintf(stderr, "resplane serve: %v\n", err)
		return exitUsage
	}
	spoolBudget, err := budget.SpoolTotalFor(m, settings.SpoolBudget.Int64())
	if err != nil {
		fmt.Fprintf(stderr, "resplane serve: %v\n", err)
		return exitUsage
	}
	// Refused before anything is bound or created (docs/operator-guide.md, "Confinement").
	confine := landlock.Mode(settings.Confine)
	if confine == landlock.Required && landlock.ABI() == 0 {
		fmt.Fprintf(stderr, "resplane serve: --confine required: %v\n", landlock.ErrUnavailable)
		return exitFailure
	}

	// The listener is bound before anything is created on disk, so a port in use leaves
	// nothing behind.
	listen := settings.Listen
	if listen == "" {
		listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(m.InternalPort)))
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintf(stderr, "resplane serve: cannot listen on %s: %v\n", listen, err)
		return exitFailure
	}
	advertise := settings.AdvertiseURL
	if advertise == "" {
		advertise = "http://localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	ourAudience, err := audience.FromCard(m.Name, advertise)
	if err != nil {
		_ = ln.Close()
		fmt.Fprintf(stderr, "resplane serve: --advertise-url %q gives no audience: it needs a host\n", advertise)
		return exitUsage
	}
	sessionDir := osfs.SessionDirPath(workdir, sessionID)
	tracePath, err := absOr(settings.TracePath, filepath.Join(sessionDir, "trace.jsonl"))
	if err != nil {
		_ = ln.Close()
		fmt.Fprintf(stderr, "resplane serve: --trace: %v\n", err)
		return exitFailure
	}
	controlPath, err := absOr(settings.ControlPath, filepath.Join(sessionDir, "control.sock"))
	if err != nil {
		_ = ln.Close()
		fmt.Fprintf(stderr, "resplane serve: --control: %v\n", err)
		return exitFailure
	}
	spoolDir, err := absOr(settings.SpoolDir, sessionDir)
	if err != nil {
		_ = ln.Close()
		fmt.Fprintf(stderr, "resplane serve: --spool-dir: %v\n", err)
		return exitFailure
	}
	// The metrics listener too is bound before anything is created on disk.
	var metricsLn net.Listener
	if settings.MetricsListen != "" {
		if metricsLn, err = net.Listen("tcp", settings.MetricsListen); err != nil {
			_ = ln.Close()
			fmt.Fprintf(stderr, "resplane serve: cannot listen on %s (--metrics-listen): %v\n", settings.MetricsListen, err)
			return exitFailure
		}
	}
	launch := resplane.Launch{
		Manifest:    m,
		Identity:    resplane.Identity{SessionID: sessionID, TraceParent: settings.TraceParent},
		Containment: settings.Containment,
		Paths:       resplane.Paths{Workdir: workdir, TracePath: tracePath, ControlPath: controlPath, SessionDir: sessionDir, SpoolDir: spoolDir},
		Listener:    ln,
		Network: resplane.Network{
			AdvertiseURL: advertise, Audience: ourAudience, PeerRoots: peerRoots, AllowedHosts: settings.AllowedHosts,
		},
		Confine: confine,
		Limits: resplane.Limits{
			ReadBufferBudget: settings.ReadBufferBudget.Int64(), FetchMaxBytes: settings.FetchMaxBytes.Int64(),
			ReadHeaderTimeout: settings.ReadHeaderTimeout, ShutdownGrace: shutdownGrace,
			SpoolBudget: spoolBudget, SendTimeout: settings.SendTimeout,
		},
		Log:           log,
		Observability: resplane.Observability{MetricsListener: metricsLn, OTelEndpoint: otelEndpoint},
	}
	for _, w := range warnings {
		log.Warn().Str("code", string(w.Code)).Str("key", w.Key).Msg(w.Message)
	}

	svc, cleanup, err := resplane.InitializeService(launch)
	if err != nil {
		// One plain line, like every other launch failure: it names what is wrong and, for a
		// session path the service will not use, what to do (docs/operator-guide.md,
		// "Exit statuses").
		_ = ln.Close()
		if metricsLn != nil {
			_ = metricsLn.Close()
		}
		fmt.Fprintf(stderr, "resplane serve: %v\n", err)
		return exitFailure
	}
	defer cleanup()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := svc.Run(ctx, stdout); err != nil {
		log.Error().Err(err).Msg("the service stopped")
		return exitFailure
	}
	return exitOK
}

// makeUndumpable clears the process's dumpable flag, before anything else serve does: no core
// dump is written, and no other process of the same user may read the process's memory
// through /proc or ptrace, so neither can expose the instance key (docs/peer-plane.md, "The
// minting key").
func makeUndumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot make the process non-dumpable (prctl PR_SET_DUMPABLE): %w", err)
	}
	return nil
}

// absOr returns value, or fallback when value is "", as an absolute path (not resolved
// through symlinks): the ready line reports it, and scripts connect to it.
func absOr(value, fallback string) (string, error) {
	if value == "" {
		value = fallback
	}
	return filepath.Abs(value)
}
