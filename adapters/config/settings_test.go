package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/manifest"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/sendrate"
)

// env is a fake environment.
type env map[string]string

func (e env) get(name string) string { return e[name] }

func TestServeDefaults(t *testing.T) {
	s, err := Load(Serve, []string{"--manifest", "m.yaml"}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if s.Manifest != "m.yaml" || s.Containment != containment.Advisory || s.FetchMaxBytes.Int64() != 1<<30 ||
		s.ReadBufferBudget.Int64() != 0 || s.ReadHeaderTimeout != 10*time.Second || s.LogLevel != "info" ||
		s.LogFormat != "json" || s.SpoolBudget.Int64() != 0 || s.SendTimeout != 30*time.Second || s.Confine != "auto" ||
		s.PeerProof != proof.Auto || s.MinSendRate != sendrate.Default ||
		s.HashCacheMaxAge != time.Minute || s.ListingCache != "auto" {
		t.Errorf("defaults = %+v", s)
	}
	if s.Workdir != "" || s.Listen != "" || s.AdvertiseURL != "" || s.AfterTask != "" || s.SessionID != "" ||
		s.TraceParent != "" || s.TracePath != "" || s.ControlPath != "" || s.PeerCA != "" || s.SpoolDir != "" ||
		s.MetricsListen != "" || s.OTelEndpoint != "" || s.AllowedHosts != nil || s.TLSCert != "" || s.TLSKey != "" {
		t.Errorf("settings without a fixed default should be empty: %+v", s)
	}
}

func TestEverySettingFromItsFlag(t *testing.T) {
	s, err := Load(Serve, []string{
		"--manifest=m.yaml", "--workdir", "/w", "--listen", "127.0.0.1:41234", "--advertise-url", "https://cap.example:8443",
		"--containment", "sealed", "--after-task", "sleep", "--session-id", "ses_01", "--trace-parent", "evt_1",
		"--trace", "/t.jsonl", "--control", "/c.sock", "--fetch-max-bytes", "2Gi", "--peer-ca", "/ca.pem",
		"--read-buffer-budget", "512Mi", "--read-header-timeout", "1m30s", "--spool-dir", "/spool", "--spool-budget", "8Gi",
		"--send-timeout", "45s", "--min-send-rate", "64Ki/500ms", "--hash-cache-max-age", "2m", "--listing-cache", "max-age", "--metrics-listen", "127.0.0.1:9090", "--otel-endpoint", "http://127.0.0.1:4318",
		"--confine", "required", "--allowed-hosts", "Capsule.Example,peer-1.internal", "--log-level", "debug", "--log-format", "console",
		"--peer-proof", "required", "--tls-cert", "/tls.crt", "--tls-key", "/tls.key",
	}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Manifest: "m.yaml", Workdir: "/w", Listen: "127.0.0.1:41234", AdvertiseURL: "https://cap.example:8443",
		Containment: containment.Sealed, AfterTask: manifest.AfterTaskSleep, SessionID: "ses_01", TraceParent: "evt_1",
		TracePath: "/t.jsonl", ControlPath: "/c.sock", FetchMaxBytes: bytesOf(t, "2Gi"), PeerCA: "/ca.pem",
		ReadBufferBudget: bytesOf(t, "512Mi"), ReadHeaderTimeout: 90 * time.Second, SpoolDir: "/spool",
		SpoolBudget: bytesOf(t, "8Gi"), SendTimeout: 45 * time.Second, HashCacheMaxAge: 2 * time.Minute, ListingCache: "max-age", MetricsListen: "127.0.0.1:9090",
		MinSendRate:  sendrate.Rate{Bytes: 64 << 10, Per: 500 * time.Millisecond},
		OTelEndpoint: "http://127.0.0.1:4318", Confine: "required", AllowedHosts: []string{"capsule.example", "peer-1.internal"},
		LogLevel: "debug", LogFormat: "console", PeerProof: proof.Required, TLSCert: "/tls.crt", TLSKey: "/tls.key",
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("settings = %+v\nwant       %+v", s, want)
	}
}

func bytesOf(t *testing.T, s string) manifest.ByteCount {
	t.Helper()
	b, err := manifest.ParseByteCount(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPrecedenceIsFlagThenEnvironmentThenConfigFileThenDefault(t *testing.T) {
	cfg := writeFile(t, "resplane.yaml", "containment: scoped\nlog-level: warn\nread-buffer-budget: 128Mi\n")
	for _, tc := range []struct {
		name string
		args []string
		env  env
		want containment.Class
	}{
		{"default", nil, env{}, containment.Advisory},
		{"config file over default", []string{"--config", cfg}, env{}, containment.Scoped},
		{"environment over config file", []string{"--config", cfg}, env{"RESPLANE_CONTAINMENT": "sealed"}, containment.Sealed},
		{"flag over environment", []string{"--config", cfg, "--containment", "advisory"}, env{"RESPLANE_CONTAINMENT": "sealed"}, containment.Advisory},
		{"empty environment variable is unset", []string{"--config", cfg}, env{"RESPLANE_CONTAINMENT": ""}, containment.Scoped},
		{"config file named in the environment", nil, env{"RESPLANE_CONFIG": cfg}, containment.Scoped},
		{"last repeated flag wins", []string{"--containment", "sealed", "--containment", "scoped"}, env{}, containment.Scoped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load(Serve, append([]string{"--manifest", "m.yaml"}, tc.args...), tc.env.get)
			if err != nil {
				t.Fatal(err)
			}
			if s.Containment != tc.want {
				t.Errorf("containment = %s, want %s", s.Containment, tc.want)
			}
		})
	}
	s, err := Load(Serve, []string{"--config", cfg}, env{"RESPLANE_MANIFEST": "from-env.yaml", "RESPLANE_LOG_LEVEL": "error"}.get)
	if err != nil {
		t.Fatal(err)
	}
	if s.Manifest != "from-env.yaml" || s.LogLevel != "error" || s.ReadBufferBudget.Int64() != 128<<20 {
		t.Errorf("mixed sources = %+v", s)
	}
}

func TestConfigFile(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"unknown key is a usage error", "containment: scoped\nworkers: 4\n", `unknown key "workers"`},
		{"a flag spelled with dashes is unknown", "--containment: scoped\n", `unknown key "--containment"`},
		{"underscores are not the flag name", "read_buffer_budget: 1Mi\n", `unknown key "read_buffer_budget"`},
		{"config cannot name another config", "config: other.yaml\n", `unknown key "config"`},
		{"not a mapping", "- containment\n", "must be a mapping of flag names to values"},
		{"a nested value", "containment: {class: scoped}\n", "containment in the config file"},
		{"a duplicate key", "log-level: info\nlog-level: warn\n", `duplicate key "log-level"`},
		{"a bad value names its key and line", "log-format: json\nlog-level: loud\n", `invalid value "loud" for log-level in the config file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeFile(t, "resplane.yaml", tc.content)
			_, err := Load(Serve, []string{"--manifest", "m.yaml", "--config", cfg}, env{}.get)
			assertUsage(t, err, tc.want)
		})
	}
	t.Run("a missing config file is a usage error", func(t *testing.T) {
		_, err := Load(Serve, []string{"--manifest", "m.yaml", "--config", "/nonexistent/resplane.yaml"}, env{}.get)
		assertUsage(t, err, "cannot read the config file")
	})
	t.Run("an empty file or a null value sets nothing", func(t *testing.T) {
		for _, content := range []string{"", "containment:\n"} {
			cfg := writeFile(t, "resplane.yaml", content)
			s, err := Load(Serve, []string{"--manifest", "m.yaml", "--config", cfg}, env{}.get)
			if err != nil || s.Containment != containment.Advisory {
				t.Errorf("%q: %+v, %v", content, s, err)
			}
		}
	})
	t.Run("the line of a bad value", func(t *testing.T) {
		cfg := writeFile(t, "resplane.yaml", "log-format: json\nlog-level: loud\n")
		_, err := Load(Serve, []string{"--manifest", "m.yaml", "--config", cfg}, env{}.get)
		assertUsage(t, err, "(line 2)")
	})
}

func TestBadValuesAreUsageErrorsNamingTheirSource(t *testing.T) {
	for _, tc := range []struct {
		flag, value, want string
	}{
		{"containment", "strict", `containment class "strict" is not one of advisory, scoped, sealed`},
		{"after-task", "stay", "must be 'exit' or 'sleep'"},
		{"session-id", ".", "must match [A-Za-z0-9_.-]+ and not be \".\" or \"..\""},
		{"session-id", "..", "must match [A-Za-z0-9_.-]+ and not be \".\" or \"..\""},
		{"session-id", "ses/1", "must match"},
		{"session-id", "ses 1", "must match"},
		{"fetch-max-bytes", "1GB", "must be a byte count, optionally suffixed Ki/Mi/Gi"},
		{"fetch-max-bytes", "0", "must be greater than zero"},
		{"read-buffer-budget", "-1", "must be a byte count"},
		{"read-header-timeout", "0", "must be a duration greater than zero"},
		{"read-header-timeout", "-5s", "must be a duration greater than zero"},
		{"read-header-timeout", "10 s", "must be a duration greater than zero"},
		{"read-header-timeout", "10S", "must be a duration greater than zero"},
		{"log-level", "verbose", "must be one of debug, info, warn, error"},
		{"log-format", "text", "must be one of json, console"},
		{"listen", "localhost", "must be HOST:PORT"},
		{"listen", "127.0.0.1:65536", "must be HOST:PORT"},
		{"listen", "127.0.0.1:http", "must be HOST:PORT"},
		{"advertise-url", "localhost:8080", "must be an http:// or https:// URL with a host"},
		{"advertise-url", "ftp://peer", "must be an http:// or https:// URL"},
		{"advertise-url", "http://", "must be an http:// or https:// URL with a host"},
		{"spool-budget", "1GB", "must be a byte count"},
		{"send-timeout", "0", "must be a duration greater than zero"},
		{"min-send-rate", "16KiB/s", `must be "off", or a size and a duration as SIZE/DURATION`},
		{"min-send-rate", "16Ki", `must be "off", or a size and a duration as SIZE/DURATION`},
		{"min-send-rate", "0/10s", `must be "off", or a size and a duration as SIZE/DURATION`},
		{"hash-cache-max-age", "0", "must be a duration greater than zero"},
		{"listing-cache", "lease", "must be one of auto, max-age"},
		{"metrics-listen", "9090", "must be HOST:PORT"},
		{"otel-endpoint", "127.0.0.1:4318", "must be an http:// or https:// URL with a host"},
		{"confine", "yes", "must be one of auto, required, off"},
		{"allowed-hosts", "capsule.example:8080", `"capsule.example:8080" is not a host name`},
		{"allowed-hosts", "a,,b", `"" is not a host name`},
		{"allowed-hosts", "*.example", `"*.example" is not a host name`},
		{"manifest", "", "must not be empty"},
		{"workdir", "", "must not be empty"},
	} {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			_, err := Load(Serve, []string{"--manifest", "m.yaml", "--" + tc.flag + "=" + tc.value}, env{}.get)
			assertUsage(t, err, "for --"+tc.flag+": "+tc.want)
			if tc.value == "" {
				return
			}
			name := "RESPLANE_" + strings.ToUpper(strings.ReplaceAll(tc.flag, "-", "_"))
			_, err = Load(Serve, []string{"--manifest", "m.yaml"}, env{name: tc.value}.get)
			assertUsage(t, err, "for "+name+": "+tc.want)
		})
	}
}

func TestGoodValues(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		check func(Settings) bool
	}{
		{[]string{"--read-header-timeout", "90"}, func(s Settings) bool { return s.ReadHeaderTimeout == 90*time.Second }},
		{[]string{"--read-header-timeout", "2d"}, func(s Settings) bool { return s.ReadHeaderTimeout == 48*time.Hour }},
		{[]string{"--read-header-timeout", "500ms"}, func(s Settings) bool { return s.ReadHeaderTimeout == 500*time.Millisecond }},
		{[]string{"--listen", "[::1]:0"}, func(s Settings) bool { return s.Listen == "[::1]:0" }},
		{[]string{"--listen", ":8080"}, func(s Settings) bool { return s.Listen == ":8080" }},
		{[]string{"--session-id", "ses_01a0.x-Y"}, func(s Settings) bool { return s.SessionID == "ses_01a0.x-Y" }},
		{[]string{"--session-id", "s", "--trace-parent", "evt_9"}, func(s Settings) bool { return s.TraceParent == "evt_9" }},
		{[]string{"--fetch-max-bytes", " 5Ki "}, func(s Settings) bool { return s.FetchMaxBytes.Int64() == 5<<10 }},
		{[]string{"-containment", "scoped"}, func(s Settings) bool { return s.Containment == containment.Scoped }},
	} {
		s, err := Load(Serve, append([]string{"--manifest", "m.yaml"}, tc.args...), env{}.get)
		if err != nil || !tc.check(s) {
			t.Errorf("%q: %+v, %v", tc.args, s, err)
		}
	}
}

func TestCommandLineUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  Command
		args []string
		env  env
		want string
	}{
		{"manifest is required", Serve, nil, env{}, "--manifest is required"},
		{"trace-parent requires session-id", Serve, []string{"--manifest", "m", "--trace-parent", "evt_1"}, env{}, "--trace-parent requires --session-id"},
		{"trace-parent from the environment too", Serve, []string{"--manifest", "m"}, env{"RESPLANE_TRACE_PARENT": "evt_1"}, "--trace-parent requires --session-id"},
		{"tls-cert requires tls-key", Serve, []string{"--manifest", "m", "--tls-cert", "c.pem"}, env{}, "--tls-cert requires --tls-key"},
		{"tls-key requires tls-cert", Serve, []string{"--manifest", "m"}, env{"RESPLANE_TLS_KEY": "k.pem"}, "--tls-key requires --tls-cert"},
		{"peer-proof is one of three", Serve, []string{"--manifest", "m", "--peer-proof", "on"}, env{}, "must be one of auto, required, off"},
		{"unknown flag", Serve, []string{"--manifest", "m", "--verbose"}, env{}, "unknown flag --verbose"},
		{"flag without its value", Serve, []string{"--manifest"}, env{}, "--manifest needs a value: --manifest PATH"},
		{"positional argument", Serve, []string{"--manifest", "m", "extra"}, env{}, `unexpected argument "extra"`},
		{"unknown subcommand", Command("serv"), nil, env{}, `unknown subcommand "serv"`},
		{"check has no --listen", Check, []string{"--manifest", "m", "--listen", ":1"}, env{}, "unknown flag --listen"},
		{"check has no --config", Check, []string{"--manifest", "m", "--config", "c.yaml"}, env{}, "unknown flag --config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.cmd, tc.args, tc.env.get)
			assertUsage(t, err, tc.want)
		})
	}
}

func TestHelpIsNotAnError(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "-help"} {
		if _, err := Load(Serve, []string{arg}, env{}.get); !errors.Is(err, ErrHelp) {
			t.Errorf("%s: %v, want ErrHelp", arg, err)
		}
	}
}

func TestCheckReadsItsThreeSettings(t *testing.T) {
	s, err := Load(Check, []string{"--manifest", "m.yaml", "--workdir", "/w"},
		env{"RESPLANE_AFTER_TASK": "sleep", "RESPLANE_CONTAINMENT": "bogus", "RESPLANE_CONFIG": "/nonexistent"}.get)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Manifest: "m.yaml", Workdir: "/w", AfterTask: manifest.AfterTaskSleep}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("check settings = %+v, want %+v", s, want)
	}
}

func TestHelpListsEveryFlagWithItsDefault(t *testing.T) {
	serve := Help(Serve.Spec())
	for _, want := range []string{
		"Usage:\n  resplane serve [flags]",
		"--manifest PATH", "(required)",
		"--workdir DIR", "(default: <manifest dir>/workdir/<session id>)",
		"--listen HOST:PORT", "(default: 127.0.0.1:<network.internal_port>, else 127.0.0.1:0)",
		"--advertise-url URL", "(default: http://localhost:<bound port>)",
		"--containment CLASS", "(default advisory)",
		"--after-task exit|sleep", "(default: the manifest's lifecycle.after_task)",
		"--session-id ID", "(default: a new ses_<uuidv7 hex>)",
		"--trace-parent EVENT_ID",
		"--trace PATH", "(default: <workdir>/.murmur/<session id>/trace.jsonl)",
		"--control PATH", "(default: <workdir>/.murmur/<session id>/control.sock)",
		"--fetch-max-bytes SIZE", "(default 1Gi)",
		"--peer-ca PATH",
		"--read-buffer-budget SIZE", "(default: 256Mi; without a spool, one read of the largest declared max_bytes if that is more)",
		"--read-header-timeout DURATION", "(default 10s)",
		"--spool-dir DIR", "(default: <workdir>/.murmur/<session id>/)",
		"--spool-budget SIZE", "(default: 2Gi, or one read of the largest declared max_bytes if that is more)",
		"--send-timeout DURATION", "(default 30s)",
		"--min-send-rate RATE", "(default 160Ki/10s)",
		"--hash-cache-max-age DURATION", "(default 60s)",
		"--listing-cache MODE", "(default auto)",
		"--metrics-listen HOST:PORT", "(default: off)",
		"--otel-endpoint URL", "(default: off, unless OTEL_EXPORTER_OTLP_ENDPOINT",
		"--confine auto|required|off", "(default auto)",
		"--allowed-hosts NAMES", "(default: none)",
		"--log-level LEVEL", "(default info)",
		"--log-format json|console", "(default json)",
		"--config PATH",
		"RESPLANE_<FLAG>", "Precedence: flag > environment > config file > default.",
	} {
		if !strings.Contains(serve, want) {
			t.Errorf("serve help lacks %q", want)
		}
	}
	check := Help(Check.Spec())
	for _, want := range []string{"Usage:\n  resplane check [flags]", "--manifest PATH", "--workdir DIR", "--after-task exit|sleep",
		"Precedence: flag > environment > default."} {
		if !strings.Contains(check, want) {
			t.Errorf("check help lacks %q", want)
		}
	}
	for _, absent := range []string{"--listen", "--config", "config file"} {
		if strings.Contains(check, absent) {
			t.Errorf("check help mentions %q", absent)
		}
	}
}

func assertUsage(t *testing.T, err error, want string) {
	t.Helper()
	var usage *UsageError
	if !errors.As(err, &usage) {
		t.Fatalf("got %v, want a *UsageError", err)
	}
	if !strings.Contains(usage.Error(), want) {
		t.Errorf("usage error %q lacks %q", usage, want)
	}
}
