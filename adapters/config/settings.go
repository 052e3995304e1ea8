package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/manifest"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/sendrate"
)

// Settings is serve's or check's validated configuration. A field whose flag was not given
// holds its fixed default or, when the default is not fixed, its zero value; Load derives
// nothing. The defaults that are not fixed are derived after Load, where what they depend on
// is known: the root package's OpenLaunch derives SessionID, Workdir, Listen, AdvertiseURL,
// TracePath, ControlPath and SpoolDir from the manifest, the session id and the bound port;
// budget.Plan (adapters/budget) derives ReadBufferBudget and SpoolBudget from the manifest;
// the launch checks (application.LaunchChecks) take AfterTask from the manifest, for serve
// and check alike. TraceParent and PeerCA have no default. check leaves an empty Workdir
// empty: it then has no workdir to inspect.
type Settings struct {
	// Manifest is the path of the capsule's murmur.yaml. Always set.
	Manifest string
	// Workdir is the accessible workdir; "" means <manifest dir>/workdir/<session id>.
	Workdir string
	// Listen is the resource listener's HOST:PORT; "" means 127.0.0.1:<network.internal_port>.
	Listen string
	// AdvertiseURL is the url on our agent card; "" means http://localhost:<bound port>.
	AdvertiseURL string
	// Containment is the class the launching runtime achieved; default advisory.
	Containment containment.Class
	// AfterTask overrides lifecycle.after_task; "" when not given.
	AfterTask manifest.AfterTask
	// SessionID joins a session the runtime started; "" means a new ses_<uuidv7 hex>.
	SessionID string
	// TraceParent is the runtime's session_start event id; set only with SessionID.
	TraceParent string
	// TracePath is where trace events go; "" means <workdir>/.murmur/<session id>/trace.jsonl.
	TracePath string
	// ControlPath is the control socket; "" means <workdir>/.murmur/<session id>/control.sock.
	ControlPath string
	// FetchMaxBytes is fetch-peer-file's receive limit; default 1Gi.
	FetchMaxBytes manifest.ByteCount
	// PeerCA is a PEM bundle of extra roots for https peers; "" for none.
	PeerCA string
	// ReadBufferBudget bounds the bytes concurrent reads hold in memory; zero when not given,
	// which means 256Mi or, without a spool and if a declared max_bytes needs more, what one
	// such read needs.
	ReadBufferBudget manifest.ByteCount
	// ReadHeaderTimeout closes a connection whose header is not complete by then; default 10s.
	ReadHeaderTimeout time.Duration
	// SpoolDir is where unnamed snapshot files live; "" means <workdir>/.murmur/<session id>/.
	SpoolDir string
	// SpoolBudget bounds the bytes of snapshots held outside memory; zero when not given, which
	// means 2Gi or, if a declared max_bytes needs more, what one such read needs.
	SpoolBudget manifest.ByteCount
	// SendTimeout closes a connection whose response makes no progress for that long;
	// default 30s.
	SendTimeout time.Duration
	// MinSendRate closes a connection whose body, holding a reservation, is taken more slowly
	// than this after its grace; default sendrate.Default, the zero Rate when off.
	MinSendRate sendrate.Rate
	// HashCacheMaxAge bounds how long a listing may reuse a file's cached sha256; default 60s.
	HashCacheMaxAge time.Duration
	// ListingCache is auto or max-age: whether the listing hash cache takes read leases where
	// the service can (auto) or never (max-age); default auto.
	ListingCache string
	// MetricsListen is the metrics listener's HOST:PORT; "" means no metrics listener.
	MetricsListen string
	// OTelEndpoint is the OTLP/HTTP base URL trace events are exported to as spans; "" leaves
	// it to the standard OTEL_EXPORTER_OTLP_* variables (no export when they are unset too).
	OTelEndpoint string
	// Confine is auto, required or off: how serve confines itself with Landlock; default auto.
	Confine string
	// PeerProof is auto, required or off: proof of possession on the peer plane; default auto.
	PeerProof proof.Mode
	// TLSCert and TLSKey are the resource listener's certificate chain and private key, PEM
	// files; both "" (plain HTTP) or both set.
	TLSCert, TLSKey string
	// AllowedHosts are the Host names the resource listener answers besides IP literals,
	// localhost and the advertise URL's host; lowercased, none by default.
	AllowedHosts []string
	// LogLevel is debug, info, warn or error; default info.
	LogLevel string
	// LogFormat is json or console; default json.
	LogFormat string
}

// Command names a subcommand whose settings Load reads.
type Command string

// The subcommands with launch settings.
const (
	// Serve runs the service; it reads every setting and accepts --config.
	Serve Command = "serve"
	// Check runs the launch checks only; it reads --manifest, --workdir and --after-task.
	Check Command = "check"
)

// commands lists, per subcommand, its settings (by name) and whether it reads a config file.
var commands = map[Command]struct {
	summary string
	names   []string
	config  bool
}{
	Serve: {
		summary: `Runs the resource service for one capsule session. It serves the HTTP listener (both
planes and the agent card) and the control socket, prints one JSON ready line on stdout, and
serves until SIGINT or SIGTERM.`,
		names: []string{"manifest", "workdir", "listen", "advertise-url", "containment", "after-task", "session-id",
			"trace-parent", "trace", "control", "fetch-max-bytes", "peer-ca", "read-buffer-budget",
			"read-header-timeout", "spool-dir", "spool-budget", "send-timeout", "min-send-rate", "hash-cache-max-age", "listing-cache", "metrics-listen", "otel-endpoint",
			"confine", "peer-proof", "tls-cert", "tls-key", "allowed-hosts", "log-level", "log-format"},
		config: true,
	},
	Check: {
		summary: `Runs the launch checks serve would run, and creates nothing. It prints on stderr the
warnings serve would log, and on stdout the effective grants as one JSON line.`,
		names: []string{"manifest", "workdir", "after-task"},
	},
}

// setting is one flag of serve or check (its name is also its config file key, and
// RESPLANE_<NAME> in the environment) and how a value is applied.
type setting struct {
	Flag
	set func(s *Settings, v string) error
}

// flag declares a setting: its name, how help shows its value, its default ("" for none),
// a description of a default that is not a fixed value, and what it does.
func flag(name, arg, def, defHelp, usage string, set func(s *Settings, v string) error) setting {
	return setting{Flag{Name: name, Arg: arg, Default: def, DefaultHelp: defHelp, Usage: usage, Env: envName(name)}, set}
}

var settings = []setting{
	flag("manifest", "PATH", "", "", "The capsule's murmur.yaml (required)",
		func(s *Settings, v string) error { return nonEmpty(&s.Manifest, v) }),
	flag("workdir", "DIR", "", "<manifest dir>/workdir/<session id>",
		"The accessible workdir; export roots and peer-in/ are relative to it (serve creates it if missing)",
		func(s *Settings, v string) error { return nonEmpty(&s.Workdir, v) }),
	flag("listen", "HOST:PORT", "", "127.0.0.1:<network.internal_port>, else 127.0.0.1:0",
		"The resource listener. Port 0 picks a free port",
		func(s *Settings, v string) error { return setListen(s, v) }),
	flag("advertise-url", "URL", "", "http://localhost:<bound port>",
		"The url on our agent card, and the source of our own audience",
		func(s *Settings, v string) error { return setAdvertiseURL(s, v) }),
	flag("containment", "CLASS", "advisory", "",
		"The containment class the launching runtime achieved: advisory, scoped or sealed",
		func(s *Settings, v string) (err error) { s.Containment, err = containment.Parse(v); return err }),
	flag("after-task", "exit|sleep", "", "the manifest's lifecycle.after_task",
		"Override lifecycle.after_task; the resolved value is what E-CAP-008 checks. serve never exits after a task: the runtime that launched it acts on after_task",
		func(s *Settings, v string) (err error) { s.AfterTask, err = manifest.ParseAfterTask(v); return err }),
	flag("session-id", "ID", "", "a new ses_<uuidv7 hex>",
		"Join a session the runtime already started ([A-Za-z0-9_.-]+)",
		func(s *Settings, v string) error { return setSessionID(s, v) }),
	flag("trace-parent", "EVENT_ID", "", "none",
		"With --session-id: the runtime's session_start event id; we then write no session_start/session_end of our own",
		func(s *Settings, v string) error { return nonEmpty(&s.TraceParent, v) }),
	flag("trace", "PATH", "", "<workdir>/.murmur/<session id>/trace.jsonl", "Where trace events are appended",
		func(s *Settings, v string) error { return nonEmpty(&s.TracePath, v) }),
	flag("control", "PATH", "", "<workdir>/.murmur/<session id>/control.sock", "The control socket (Unix domain, mode 0600)",
		func(s *Settings, v string) error { return nonEmpty(&s.ControlPath, v) }),
	flag("fetch-max-bytes", "SIZE", "1Gi", "", "Receive limit for fetch-peer-file (digits, optionally suffixed Ki/Mi/Gi)",
		func(s *Settings, v string) (err error) { s.FetchMaxBytes, err = manifest.ParseByteCount(v); return err }),
	flag("peer-ca", "PATH", "", "none", "PEM bundle of extra CA roots for https:// peers (system roots are always trusted)",
		func(s *Settings, v string) error { return nonEmpty(&s.PeerCA, v) }),
	flag("read-buffer-budget", "SIZE", "", "256Mi; without a spool, one read of the largest declared max_bytes if that is more",
		"Total bytes concurrent reads may hold in memory; further reads wait for room",
		func(s *Settings, v string) (err error) {
			s.ReadBufferBudget, err = manifest.ParseByteCount(v)
			return err
		}),
	flag("read-header-timeout", "DURATION", "10s", "",
		"Close a connection that has not sent its whole request header by then (Go syntax such as 1m30s or 500ms, or seconds optionally suffixed s/m/h/d)",
		func(s *Settings, v string) (err error) { s.ReadHeaderTimeout, err = parseTimeout(v); return err }),
	flag("spool-dir", "DIR", "", "<workdir>/.murmur/<session id>/",
		"Where the unnamed snapshot files of large or slowly drained reads live (the export root's filesystem allows reflinks)",
		func(s *Settings, v string) error { return nonEmpty(&s.SpoolDir, v) }),
	flag("spool-budget", "SIZE", "", "2Gi, or one read of the largest declared max_bytes if that is more",
		"Total bytes of snapshots held in the spool directory; further reads wait for room",
		func(s *Settings, v string) (err error) { s.SpoolBudget, err = manifest.ParseByteCount(v); return err }),
	flag("send-timeout", "DURATION", "30s", "",
		"Close a connection whose response makes no progress for this long (same syntax as --read-header-timeout)",
		func(s *Settings, v string) (err error) { s.SendTimeout, err = parseTimeout(v); return err }),
	flag("min-send-rate", "RATE", sendrate.Default.String(), "",
		"Close a connection whose client takes a body more slowly than RATE: SIZE/DURATION, at least SIZE bytes in every DURATION after the first (16Ki/s is 16 KiB every second), or off",
		func(s *Settings, v string) (err error) { s.MinSendRate, err = sendrate.Parse(v); return err }),
	flag("hash-cache-max-age", "DURATION", "60s", "",
		"Recompute a listed file's sha256 at least this often, even when its stat says it is unchanged (a write through a shared mapping moves no time); each file's bound is spread over the second half of it",
		func(s *Settings, v string) (err error) { s.HashCacheMaxAge, err = parseTimeout(v); return err }),
	flag("listing-cache", "MODE", "auto", "",
		"How a listing proves a file unchanged before reusing its sha256, auto or max-age: auto holds a read lease on each file where the service can take one (the ready line then says lease), max-age never does and bounds every cached hash's age by --hash-cache-max-age",
		func(s *Settings, v string) error { return oneOf(&s.ListingCache, v, "auto", "max-age") }),
	flag("metrics-listen", "HOST:PORT", "", "off",
		"Serve Prometheus metrics at GET /metrics, and /healthz and /readyz, on this separate listener",
		func(s *Settings, v string) error { return hostPort(&s.MetricsListen, v) }),
	flag("otel-endpoint", "URL", "", "off, unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set",
		"Export every trace event as an OpenTelemetry span over OTLP/HTTP to this base URL (such as http://127.0.0.1:4318)",
		func(s *Settings, v string) error { return httpURL(&s.OTelEndpoint, v) }),
	flag("confine", "auto|required|off", "auto", "",
		"Landlock self-confinement: auto applies what the kernel offers, required refuses to start without it, off skips it",
		func(s *Settings, v string) error { return oneOf(&s.Confine, v, "auto", "required", "off") }),
	flag("peer-proof", "auto|required|off", "auto", "",
		"Proof of possession on the peer plane: auto advertises a proof key, proves with it and binds handles to peers that advertise one; required also refuses to share with a peer that advertises none; off is the reference's behaviour",
		func(s *Settings, v string) (err error) { s.PeerProof, err = proof.ParseMode(v); return err }),
	flag("tls-cert", "PATH", "", "none",
		"PEM certificate chain: serve the resource listener over TLS (with --tls-key); the pair is reloaded when it changes",
		func(s *Settings, v string) error { return nonEmpty(&s.TLSCert, v) }),
	flag("tls-key", "PATH", "", "none", "PEM private key of --tls-cert",
		func(s *Settings, v string) error { return nonEmpty(&s.TLSKey, v) }),
	flag("allowed-hosts", "NAMES", "", "none",
		"Comma-separated Host names the resource listener answers besides IP literals, localhost and the advertise URL's host",
		func(s *Settings, v string) error { return setAllowedHosts(s, v) }),
	flag("log-level", "LEVEL", "info", "", "debug, info, warn or error; logs go to stderr",
		func(s *Settings, v string) error { return oneOf(&s.LogLevel, v, "debug", "info", "warn", "error") }),
	flag("log-format", "json|console", "json", "", "How log lines are written",
		func(s *Settings, v string) error { return oneOf(&s.LogFormat, v, "json", "console") }),
}

// configSetting is --config: read from flags and the environment only, never from the file
// it names.
var configSetting = Flag{Name: "config", Arg: "PATH", DefaultHelp: "none", Env: envName("config"),
	Usage: "A YAML file whose keys are flag names, such as read-buffer-budget: 512Mi"}

// commandSettings returns cmd's settings in help order.
func commandSettings(cmd Command) []setting {
	var out []setting
	for _, st := range settings {
		if slices.Contains(commands[cmd].names, st.Name) {
			out = append(out, st)
		}
	}
	return out
}

// Spec returns cmd's command line, for Parse and Help.
func (cmd Command) Spec() Spec {
	c := commands[cmd]
	spec := Spec{Name: string(cmd), Summary: c.summary}
	for _, st := range commandSettings(cmd) {
		spec.Flags = append(spec.Flags, st.Flag)
	}
	sources := "flag > environment > default"
	if c.config {
		spec.Flags = append(spec.Flags, configSetting)
		sources = "flag > environment > config file > default"
	}
	spec.Notes = "Every flag can also be set as RESPLANE_<FLAG> in the environment (upper case, - becomes _;\n" +
		"an empty variable counts as unset)"
	if c.config {
		spec.Notes += " or as a key of the --config file"
	}
	spec.Notes += ". Precedence: " + sources + "."
	return spec
}

// nonEmpty stores a value that is not empty.
func nonEmpty(dst *string, v string) error {
	if v == "" {
		return errors.New("must not be empty")
	}
	*dst = v
	return nil
}

func oneOf(dst *string, v string, allowed ...string) error {
	if !slices.Contains(allowed, v) {
		return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
	}
	*dst = v
	return nil
}

func setListen(s *Settings, v string) error { return hostPort(&s.Listen, v) }

// hostPort stores a HOST:PORT listen address whose port is 0 to 65535.
func hostPort(dst *string, v string) error {
	_, port, err := net.SplitHostPort(v)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return errors.New("must be HOST:PORT with a port from 0 to 65535")
	}
	*dst = v
	return nil
}

func setAdvertiseURL(s *Settings, v string) error { return httpURL(&s.AdvertiseURL, v) }

// httpURL stores an http:// or https:// URL with a host.
func httpURL(dst *string, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an http:// or https:// URL with a host")
	}
	*dst = v
	return nil
}

// hostName is one name --allowed-hosts accepts: DNS labels of letters, digits and hyphens,
// joined by dots, without a port.
var hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)

func setAllowedHosts(s *Settings, v string) error {
	var names []string
	for _, name := range strings.Split(v, ",") {
		if !hostName.MatchString(name) || len(name) > 253 {
			return fmt.Errorf("%q is not a host name: give names such as capsule.example.internal, comma-separated, without ports or spaces", name)
		}
		names = append(names, strings.ToLower(name))
	}
	s.AllowedHosts = names
	return nil
}

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func setSessionID(s *Settings, v string) error {
	if !sessionIDPattern.MatchString(v) || v == "." || v == ".." {
		return errors.New(`must match [A-Za-z0-9_.-]+ and not be "." or ".."`)
	}
	s.SessionID = v
	return nil
}

// parseTimeout reads a positive duration in Go syntax (1m30s, 500ms) or in the manifest's
// syntax (seconds, optionally suffixed s/m/h/d: 90, 2d).
func parseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		d, err = manifest.ParseDuration(v)
	}
	if err != nil || d <= 0 {
		return 0, errors.New("must be a duration greater than zero, in Go syntax (1m30s, 500ms) or as seconds optionally suffixed s/m/h/d")
	}
	return d, nil
}
