package blackbox_test

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbLaunchDir writes manifest (unless manifest is "-") into a fresh dir with files laid out
// relative to it, and returns the dir and the manifest's path.
func bbLaunchDir(t *testing.T, manifest string, files fixture.Layout) (string, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "murmur.yaml")
	if manifest != "-" {
		if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fixture.Write(t, dir, files)
	return dir, path
}

const bbPeerBlock = "exports:\n  peer_files:\n    root: handoff/\n"

// TestLaunchRefusalsPrintTwoLinesExitTwoAndCreateNothing pins docs/operator-guide.md,
// "Launch checks": each launch
// check, in order (E-MAN-002, E-MAN-001, E-MAN-003, E-CAP-001, E-CAP-008, E-CAP-007), refuses
// serve and check with exit 2, stderr exactly "error[CODE]: …" and "  hint: …" (no warning
// line), the message naming the accepted form, and nothing created on disk: no
// default or explicit workdir, no trace file, no socket.
func TestLaunchRefusalsPrintTwoLinesExitTwoAndCreateNothing(t *testing.T) {
	tests := []struct {
		name     string
		manifest string         // "-" = no manifest file
		files    fixture.Layout // relative to the dir holding murmur.yaml; wd/ is the workdir
		args     []string
		code     string
		message  []string // substrings of the error line ("$MANIFEST", "$DIR" expanded)
		hint     []string
	}{
		// E-MAN-002
		{name: "invalid YAML names the file and the line", manifest: "name: x\nversion: 1\nfoo: bar: baz\n",
			code: "E-MAN-002", message: []string{"$MANIFEST", "line 3"}},
		{name: "duplicate key is invalid YAML", manifest: "name: x\nversion: 1\nname: y\n",
			code: "E-MAN-002", message: []string{"$MANIFEST", "line 3"}},
		// For these two syntax errors the YAML parser reports the line where the token that
		// cannot continue began (line 2), not the line of the offending character; the
		// diagnostic names the line the parser gives
		// (docs/decisions/0024-e-man-002-names-the-parsers-line.md).
		{name: "tab indentation names a line", manifest: "name: x\nversion: 1\n\tbad: 1\n",
			code: "E-MAN-002", message: []string{"$MANIFEST", "line 2:", "tab character"}},
		{name: "stray bracket names a line", manifest: "name: x\nversion: 1\nexports: ]\n",
			code: "E-MAN-002", message: []string{"$MANIFEST", "line 2:", "did not find expected node content"}},
		{name: "missing manifest names the path", manifest: "-",
			code: "E-MAN-002", message: []string{"$MANIFEST"}},
		{name: "invalid YAML wins over a missing name", manifest: "version: [1\n",
			code: "E-MAN-002", message: []string{"$MANIFEST"}},
		// E-MAN-001
		{name: "name missing", manifest: "version: 1\n", code: "E-MAN-001", message: []string{"name"}},
		{name: "name null", manifest: "name:\nversion: 1\n", code: "E-MAN-001", message: []string{"name"}},
		{name: "missing name wins over a bad root",
			manifest: "exports:\n  files:\n    root: /abs\n    mode: read-only\n", code: "E-MAN-001", message: []string{"name"}},
		// E-MAN-003
		{name: "name blank", manifest: "name: '  '\n", code: "E-MAN-003", message: []string{"name"}},
		{name: "name not a string", manifest: "name: [x]\n", code: "E-MAN-003", message: []string{"name"}},
		{name: "name with a line break", manifest: "name: \"report\\nforged\"\n", code: "E-MAN-003", message: []string{"control characters", `'\n' as character 7`}},
		{name: "top level not a mapping", manifest: "- name\n", code: "E-MAN-003"},
		{name: "files.root missing", manifest: "name: x\nexports:\n  files:\n    mode: read-only\n",
			code: "E-MAN-003", message: []string{"exports.files.root", "must be a relative path inside the workdir"}},
		{name: "files.root absolute", manifest: "name: x\nexports:\n  files:\n    root: /etc\n    mode: read-only\n",
			code: "E-MAN-003", message: []string{"exports.files.root", "must be a relative path inside the workdir"}},
		{name: "files.root with dot-dot", manifest: "name: x\nexports:\n  files:\n    root: a/../../b\n    mode: read-only\n",
			code: "E-MAN-003", message: []string{"exports.files.root", "must be a relative path inside the workdir"}},
		{name: "files.root blank", manifest: "name: x\nexports:\n  files:\n    root: '  '\n    mode: read-only\n",
			code: "E-MAN-003", message: []string{"exports.files.root", "must be a relative path inside the workdir"}},
		{name: "files.root with a control character", manifest: "name: x\nexports:\n  files:\n    root: \"out\\x01\"\n    mode: read-only\n",
			code: "E-MAN-003", message: []string{"exports.files.root"}},
		{name: "files.mode missing", manifest: "name: x\nexports:\n  files:\n    root: out/\n",
			code: "E-MAN-003", message: []string{"exports.files.mode", "must be 'read-only'"}},
		{name: "files.mode read-write", manifest: "name: x\nexports:\n  files:\n    root: out/\n    mode: read-write\n",
			code: "E-MAN-003", message: []string{"exports.files.mode", "must be 'read-only'"}},
		{name: "files.max_bytes 10MB", manifest: bbFilesManifest("out/", "10MB"),
			code: "E-MAN-003", message: []string{"exports.files.max_bytes", "must be a byte count, optionally suffixed Ki/Mi/Gi"}},
		{name: "files.max_bytes negative", manifest: bbFilesManifest("out/", "-1"),
			code: "E-MAN-003", message: []string{"exports.files.max_bytes", "must be a byte count"}},
		{name: "files.max_bytes zero", manifest: bbFilesManifest("out/", "0"),
			code: "E-MAN-003", message: []string{"exports.files.max_bytes", "must be greater than zero"}},
		{name: "root is checked before mode", manifest: "name: x\nexports:\n  files:\n    root: /abs\n    mode: rw\n",
			code: "E-MAN-003", message: []string{"exports.files.root"}},
		{name: "peer_files.root missing", manifest: "name: x\nexports:\n  peer_files:\n    max_ttl: 1h\n",
			code: "E-MAN-003", message: []string{"exports.peer_files.root", "must be a relative path inside the workdir"}},
		{name: "peer_files.max_ttl upper-case suffix", manifest: "name: x\n" + bbPeerBlock + "    max_ttl: 30S\n",
			code: "E-MAN-003", message: []string{"exports.peer_files.max_ttl", "must be a duration: an integer, optionally suffixed s/m/h/d"}},
		{name: "peer_files.max_ttl 1:30 is a string, not a duration", manifest: "name: x\n" + bbPeerBlock + "    max_ttl: 1:30\n",
			code: "E-MAN-003", message: []string{"exports.peer_files.max_ttl", "must be a duration"}},
		{name: "peer_files.max_ttl with an inner space", manifest: "name: x\n" + bbPeerBlock + "    max_ttl: 30 m\n",
			code: "E-MAN-003", message: []string{"exports.peer_files.max_ttl", "must be a duration"}},
		{name: "peer_files.max_ttl zero", manifest: "name: x\n" + bbPeerBlock + "    max_ttl: 0\n",
			code: "E-MAN-003", message: []string{"exports.peer_files.max_ttl", "must be greater than zero"}},
		{name: "peer_fetch.allow empty list", manifest: "name: x\ncapabilities:\n  peer_fetch:\n    allow: []\n",
			code: "E-MAN-003", message: []string{"capabilities.peer_fetch.allow", "must be a non-empty list of network destinations"}},
		{name: "peer_fetch empty mapping counts as declared", manifest: "name: x\ncapabilities:\n  peer_fetch: {}\n",
			code: "E-MAN-003", message: []string{"capabilities.peer_fetch.allow"}},
		{name: "network.allow entry not a string", manifest: "name: x\ncapabilities:\n  network:\n    allow: [[a]]\n",
			code: "E-MAN-003", message: []string{"capabilities.network.allow"}},
		{name: "after_task neither exit nor sleep", manifest: "name: x\nlifecycle:\n  after_task: maybe\n",
			code: "E-MAN-003", message: []string{"lifecycle.after_task"}},
		{name: "unknown export key does not warn on a refusal",
			manifest: "name: x\nexports:\n  colour: blue\n  files:\n    root: out/\n    mode: rw\n    shade: 1\n",
			code:     "E-MAN-003", message: []string{"exports.files.mode"}},
		{name: "E-MAN-003 wins over E-CAP-001",
			manifest: "name: x\nexports:\n  files:\n    root: out/\n    mode: rw\ncapabilities:\n  network:\n    allow: ['*']\n",
			code:     "E-MAN-003", message: []string{"exports.files.mode"}},
		// E-CAP-001
		{name: "destination with a path", manifest: "name: x\ncapabilities:\n  network:\n    allow: ['http://h/x']\n",
			code: "E-CAP-001", message: []string{"http://h/x", "path"}},
		{name: "destination wildcard", manifest: "name: x\ncapabilities:\n  network:\n    allow: [localhost, '*.example.com']\n",
			code: "E-CAP-001", message: []string{"*.example.com"}},
		{name: "destination port zero", manifest: "name: x\ncapabilities:\n  network:\n    allow: ['host:0']\n",
			code: "E-CAP-001", message: []string{"host:0"}},
		{name: "destination unbracketed IPv6", manifest: "name: x\ncapabilities:\n  network:\n    allow: ['::1']\n",
			code: "E-CAP-001", message: []string{"::1"}},
		{name: "destination with userinfo", manifest: "name: x\ncapabilities:\n  network:\n    allow: ['http://u@host']\n",
			code: "E-CAP-001", message: []string{"http://u@host"}},
		// E-CAP-008
		{name: "sleep without max_ttl", manifest: "name: x\n" + bbPeerBlock + "lifecycle:\n  after_task: sleep\n",
			code: "E-CAP-008", message: []string{"exports.peer_files.max_ttl", "lifecycle.after_task: sleep", "900s", "durability"},
			hint: []string{"15m", "relaunch", "same workdir"}},
		{name: "sleep with max_ttl above 15m", manifest: "name: x\n" + bbPeerBlock + "    max_ttl: 1h\nlifecycle:\n  after_task: sleep\n",
			code: "E-CAP-008", message: []string{"exports.peer_files.max_ttl", "lifecycle.after_task: sleep", "900s", "3600"},
			hint: []string{"15m", "relaunch"}},
		{name: "--after-task sleep overrides the manifest's exit",
			manifest: "name: x\n" + bbPeerBlock + "    max_ttl: 16m\nlifecycle:\n  after_task: exit\n", args: []string{"--after-task", "sleep"},
			code: "E-CAP-008", message: []string{"exports.peer_files.max_ttl", "lifecycle.after_task: sleep", "900s", "960"}},
		{name: "E-CAP-008 wins over E-CAP-007",
			manifest: "name: x\n" + bbPeerBlock + "lifecycle:\n  after_task: sleep\n",
			files:    fixture.Layout{"elsewhere/a": "x", "wd/handoff -> ../elsewhere": ""}, args: []string{"--workdir", "$DIR/wd"},
			code: "E-CAP-008"},
		// E-CAP-007
		{name: "files root symlinked out of the workdir", manifest: bbFilesManifest("out/", ""),
			files: fixture.Layout{"elsewhere/a": "x", "wd/out -> ../elsewhere": ""}, args: []string{"--workdir", "$DIR/wd"},
			code: "E-CAP-007", message: []string{"exports.files.root", `"out/"`, "$DIR/elsewhere", "$DIR/wd"},
			hint: []string{"inside the workdir", "never followed"}},
		{name: "files root under a symlinked directory", manifest: bbFilesManifest("data/out", ""),
			files: fixture.Layout{"elsewhere/out/a": "x", "wd/data -> ../elsewhere": ""}, args: []string{"--workdir", "$DIR/wd"},
			code: "E-CAP-007", message: []string{"exports.files.root", "data/out", "$DIR/wd"}},
		{name: "files root symlinked to an absolute path", manifest: bbFilesManifest("out", ""),
			files: fixture.Layout{"wd/out -> /etc": ""}, args: []string{"--workdir", "$DIR/wd"},
			code: "E-CAP-007", message: []string{"exports.files.root", "/etc", "$DIR/wd"}},
		{name: "peer_files root symlinked out of the workdir", manifest: "name: x\n" + bbPeerBlock,
			files: fixture.Layout{"elsewhere/a": "x", "wd/handoff -> ../elsewhere": ""}, args: []string{"--workdir", "$DIR/wd"},
			code: "E-CAP-007", message: []string{"exports.peer_files.root", "handoff/", "$DIR/elsewhere"}},
		{name: "files root is checked before peer_files root",
			manifest: "name: x\nexports:\n  files:\n    root: out\n    mode: read-only\n  peer_files:\n    root: handoff\n",
			files:    fixture.Layout{"elsewhere/a": "x", "wd/out -> ../elsewhere": "", "wd/handoff -> ../elsewhere": ""},
			args:     []string{"--workdir", "$DIR/wd"}, code: "E-CAP-007", message: []string{"exports.files.root"}},
	}
	twoLines := func(code string) *regexp.Regexp {
		return regexp.MustCompile(`^error\[` + regexp.QuoteMeta(code) + `\]: ([^\n]+)\n  hint: ([^\n]+)\n$`)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, manifest := bbLaunchDir(t, tc.manifest, tc.files)
			expand := func(s string) string {
				return strings.NewReplacer("$MANIFEST", manifest, "$DIR", dir).Replace(s)
			}
			var args []string
			for _, a := range tc.args {
				args = append(args, expand(a))
			}
			before := bbTree(t, dir)
			runs := map[string][]string{
				"serve with defaults": append([]string{"serve", "--manifest", manifest, "--listen", "127.0.0.1:0"}, args...),
				"serve with explicit paths": append([]string{"serve", "--manifest", manifest, "--listen", "127.0.0.1:0",
					"--workdir", dir + "/wd", "--trace", dir + "/tr/trace.jsonl", "--control", dir + "/ctl/c.sock"}, args...),
				"check": append([]string{"check", "--manifest", manifest}, args...),
			}
			for run, argv := range runs {
				code, stdout, stderr := harness.RunCLI(t, nil, argv...)
				if code != 2 {
					t.Fatalf("%s: exit %d, want 2; stdout %q stderr %q", run, code, stdout, stderr)
				}
				if stdout != "" {
					t.Errorf("%s: stdout %q, want nothing", run, stdout)
				}
				m := twoLines(tc.code).FindStringSubmatch(stderr)
				if m == nil {
					t.Fatalf("%s: stderr is not exactly the two %s lines:\n%s", run, tc.code, stderr)
				}
				for _, want := range tc.message {
					if !strings.Contains(m[1], expand(want)) {
						t.Errorf("%s: message %q does not contain %q", run, m[1], expand(want))
					}
				}
				for _, want := range tc.hint {
					if !strings.Contains(m[2], want) {
						t.Errorf("%s: hint %q does not contain %q", run, m[2], want)
					}
				}
				if after := bbTree(t, dir); !slices.Equal(before, after) {
					t.Fatalf("%s created files:\nbefore %v\nafter  %v", run, before, after)
				}
			}
		})
	}
}

// TestLaunchAcceptsWhatTheChecksAllow pins docs/operator-guide.md, "Launch checks": a symlinked
// root that stays inside the
// workdir, a root or workdir that does not exist yet (the workdir is created), a sleeping
// capsule with max_ttl 15m, and --after-task exit overriding a manifest's sleep all launch.
func TestLaunchAcceptsWhatTheChecksAllow(t *testing.T) {
	tests := []struct {
		name     string
		manifest string
		workdir  fixture.Layout
		args     []string
	}{
		{"symlinked root inside the workdir", bbFilesManifest("out/", ""),
			fixture.Layout{"real/a.txt": "A", "out -> real": ""}, nil},
		{"absolute symlinked root inside the workdir", bbFilesManifest("out", ""),
			fixture.Layout{"real/a.txt": "A", "out -> $WD/real": ""}, nil},
		{"root that does not exist yet", bbFilesManifest("later/out", ""), fixture.Layout{"x": "x"}, nil},
		{"workdir that does not exist yet", bbFilesManifest("out", ""), nil, nil},
		{"sleep with max_ttl 15m", "name: x\n" + bbPeerBlock + "    max_ttl: 15m\nlifecycle:\n  after_task: sleep\n", nil, nil},
		{"--after-task exit overrides the manifest's sleep", "name: x\n" + bbPeerBlock + "lifecycle:\n  after_task: sleep\n",
			nil, []string{"--after-task", "exit"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, manifest := bbLaunchDir(t, tc.manifest, nil)
			fixture.Write(t, dir+"/wd", tc.workdir)
			code, stdout, stderr := harness.RunCLI(t, nil, append([]string{"check", "--manifest", manifest, "--workdir", dir + "/wd"}, tc.args...)...)
			if code != 0 || strings.Count(stdout, "\n") != 1 {
				t.Fatalf("check: exit %d stdout %q stderr %q", code, stdout, stderr)
			}
			p := harness.Serve(t, nil, append([]string{"--manifest", manifest, "--workdir", dir + "/wd", "--listen", "127.0.0.1:0"}, tc.args...)...)
			if fi, err := os.Stat(dir + "/wd"); err != nil || !fi.IsDir() {
				t.Errorf("workdir not created: %v", err)
			}
			if p.Ready.Workdir != dir+"/wd" {
				t.Errorf("ready workdir %q, want %q (absolute, not resolved)", p.Ready.Workdir, dir+"/wd")
			}
			if code := p.Stop(t); code != 0 {
				t.Errorf("exit %d after SIGTERM; stderr:\n%s", code, p.Stderr())
			}
		})
	}
}

// TestUnknownExportKeysWarnWSEC019 pins docs/manifest.md, "Unknown keys": an unknown key inside
// exports,
// exports.files, exports.peer_files or capabilities.peer_fetch is one W-SEC-019 warning line
// naming the dotted key when the launch goes ahead; an unknown top-level key (or one in another
// block) is silently ignored.
func TestUnknownExportKeysWarnWSEC019(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: `name: x
artifacts: [a, b]
inference: {model: m}
exports:
  colour: blue
  files:
    root: out/
    mode: read-only
    shade: 1
  peer_files:
    root: handoff/
    tint: 2
capabilities:
  network:
    allow: [localhost]
  peer_fetch:
    allow: [localhost]
    extra: 3
`})
	want := []string{"exports.colour", "exports.files.shade", "exports.peer_files.tint", "capabilities.peer_fetch.extra"}
	var got []string
	for _, line := range strings.Split(p.Stderr(), "\n") {
		if strings.Contains(line, "W-SEC-019") {
			obj := harness.Object(t, []byte(line))
			key, _ := obj["key"].(string)
			got = append(got, key)
			if !strings.Contains(line, key) || key == "" {
				t.Errorf("warning does not name the dotted key: %s", line)
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("W-SEC-019 keys %q, want exactly %q; stderr:\n%s", got, want, p.Stderr())
	}
	if strings.Contains(p.Stderr(), "artifacts") || strings.Contains(p.Stderr(), "inference") {
		t.Errorf("an unknown top-level key was warned about:\n%s", p.Stderr())
	}
}

// TestCheckShowsTheWarningsServeWouldLog pins docs/operator-guide.md, "resplane check": a
// pre-flight check that passes still prints, on stderr, one warning[W-SEC-019] line for every
// unknown key serve would warn about — so a mistyped block (exports.file for exports.files),
// which declares nothing, is visible before the launch — and keeps stdout the one grants line.
func TestCheckShowsTheWarningsServeWouldLog(t *testing.T) {
	_, manifest := bbLaunchDir(t, "name: x\nexports:\n  file:\n    root: out/\n    mode: read-only\n", nil)
	code, stdout, stderr := harness.RunCLI(t, nil, "check", "--manifest", manifest)
	if code != 0 || !strings.HasPrefix(stdout, `{"exports_files":null,`) || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "warning[W-SEC-019]: ") || !strings.Contains(lines[0], "exports.file") {
		t.Errorf("stderr %q: want exactly one warning[W-SEC-019] line naming exports.file", stderr)
	}
}

// TestCheckPrintsTheGrantsLineAndCreatesNothing pins docs/operator-guide.md, "resplane check":
// one JSON line with the
// effective grants, exactly the documented shape and key order (undeclared blocks null, absent
// allow-lists [], max_ttl_secs 3600 by default), exit 0, nothing created (not even --workdir).
func TestCheckPrintsTheGrantsLineAndCreatesNothing(t *testing.T) {
	tests := []struct {
		name, manifest string
		args           []string
		want           string
	}{
		{"the documented manifest", `name: reporter
exports:
  files:
    root: out/
    mode: read-only
  peer_files:
    root: out/handoff/
capabilities:
  network:
    allow: ["localhost:41234"]
  peer_fetch:
    allow: ["localhost:41235"]
`, nil, `{"exports_files":{"root":"out/","mode":"read-only","max_bytes":10485760},"peer_files":{"root":"out/handoff/","max_ttl_secs":3600,"max_bytes":10485760},"peer_fetch_allow":["localhost:41235"],"network_allow":["localhost:41234"],"after_task":"exit"}`},
		{"nothing declared", "name: bare\n", nil,
			`{"exports_files":null,"peer_files":null,"peer_fetch_allow":[],"network_allow":[],"after_task":"exit"}`},
		{"suffixes, trimming and sleep", `name: reporter
exports:
  files:
    root: "  data/out  "
    mode: read-only
    max_bytes: " 1Ki "
  peer_files:
    root: handoff
    max_ttl: 10m
    max_bytes: 2Mi
lifecycle:
  after_task: sleep
`, nil, `{"exports_files":{"root":"data/out","mode":"read-only","max_bytes":1024},"peer_files":{"root":"handoff","max_ttl_secs":600,"max_bytes":2097152},"peer_fetch_allow":[],"network_allow":[],"after_task":"sleep"}`},
		{"quoted digits are seconds", "name: bare\nexports:\n  peer_files:\n    root: h\n    max_ttl: \"90\"\n", nil,
			`{"exports_files":null,"peer_files":{"root":"h","max_ttl_secs":90,"max_bytes":10485760},"peer_fetch_allow":[],"network_allow":[],"after_task":"exit"}`},
		{"empty block counts as absent", "name: bare\nexports:\n  files:\ncapabilities:\n  peer_fetch:\n", nil,
			`{"exports_files":null,"peer_files":null,"peer_fetch_allow":[],"network_allow":[],"after_task":"exit"}`},
		{"--after-task overrides", "name: bare\n", []string{"--after-task", "sleep"},
			`{"exports_files":null,"peer_files":null,"peer_fetch_allow":[],"network_allow":[],"after_task":"sleep"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, manifest := bbLaunchDir(t, tc.manifest, nil)
			before := bbTree(t, dir)
			code, stdout, stderr := harness.RunCLI(t, nil, append([]string{"check", "--manifest", manifest, "--workdir", dir + "/wd"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d; stderr %q", code, stderr)
			}
			if stdout != tc.want+"\n" {
				t.Errorf("stdout\n got %q\nwant %q", stdout, tc.want+"\n")
			}
			if after := bbTree(t, dir); !slices.Equal(before, after) {
				t.Errorf("check created files: %v -> %v", before, after)
			}
		})
	}
}

// TestUsageErrorsExitTwoBeforeAnyManifestCheck pins docs/operator-guide.md, "Exit statuses": an
// unknown
// subcommand or flag, a bad flag value (from a flag, the environment or --config), --trace-parent
// without --session-id and a bad --session-id exit 2 before any manifest check (no error[…]
// diagnostic) and create nothing; --help exits 0.
func TestUsageErrorsExitTwoBeforeAnyManifestCheck(t *testing.T) {
	dir, manifest := bbLaunchDir(t, "name: x\nversion: [\n", fixture.Layout{"unknown.yaml": "no-such-flag: 1\n"})
	tests := []struct {
		name string
		env  []string
		args []string
		exit int
	}{
		{"no subcommand", nil, nil, 2},
		{"unknown subcommand", nil, []string{"frobnicate"}, 2},
		{"unknown flag", nil, []string{"serve", "--manifest", manifest, "--bogus"}, 2},
		{"bad --containment", nil, []string{"serve", "--manifest", manifest, "--containment", "strict"}, 2},
		{"bad RESPLANE_CONTAINMENT", []string{"RESPLANE_CONTAINMENT=strict"}, []string{"serve", "--manifest", manifest}, 2},
		{"unknown --config key", nil, []string{"serve", "--manifest", manifest, "--config", dir + "/unknown.yaml"}, 2},
		{"--trace-parent without --session-id", nil, []string{"serve", "--manifest", manifest, "--trace-parent", "evt_x"}, 2},
		{"--session-id dot-dot", nil, []string{"serve", "--manifest", manifest, "--session-id", ".."}, 2},
		{"--session-id with a slash", nil, []string{"serve", "--manifest", manifest, "--session-id", "a/b"}, 2},
		{"bad --after-task", nil, []string{"serve", "--manifest", manifest, "--after-task", "nap"}, 2},
		{"bad --read-buffer-budget", nil, []string{"serve", "--manifest", manifest, "--read-buffer-budget", "10MB"}, 2},
		{"serve without --manifest", nil, []string{"serve"}, 2},
		{"check with a serve-only flag", nil, []string{"check", "--manifest", manifest, "--containment", "sealed"}, 2},
		{"--help", nil, []string{"--help"}, 0},
		{"serve --help", nil, []string{"serve", "--help"}, 0},
		{"check --help", nil, []string{"check", "--help"}, 0},
		{"status --help", nil, []string{"status", "--help"}, 0},
		{"task end --help", nil, []string{"task", "end", "--help"}, 0},
		{"task --help", nil, []string{"task", "--help"}, 0},
		{"tool --help", nil, []string{"tool", "--help"}, 0},
		{"tool share-file --help", nil, []string{"tool", "share-file", "--help"}, 0},
		{"version with an argument", nil, []string{"version", "--bogus"}, 2},
		{"a --peer-ca that does not exist", nil, []string{"serve", "--manifest", manifest, "--workdir", dir + "/wd", "--peer-ca", dir + "/missing.pem"}, 2},
		{"a --peer-ca that holds no certificate", nil, []string{"serve", "--manifest", manifest, "--workdir", dir + "/wd", "--peer-ca", dir + "/unknown.yaml"}, 2},
		{"bad --metrics-listen", nil, []string{"serve", "--manifest", manifest, "--metrics-listen", "9090"}, 2},
		{"bad --otel-endpoint", nil, []string{"serve", "--manifest", manifest, "--otel-endpoint", "collector:4318"}, 2},
		{"an OTEL_EXPORTER_OTLP_ENDPOINT that is not a URL", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=collector:4318"}, []string{"serve", "--manifest", manifest, "--workdir", dir + "/wd"}, 2},
		{"an OTLP endpoint with credentials", nil, []string{"serve", "--manifest", manifest, "--workdir", dir + "/wd", "--otel-endpoint", "http://u:p@c:4318"}, 2},
	}
	before := bbTree(t, dir)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := harness.RunCLI(t, tc.env, tc.args...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.exit, stdout, stderr)
			}
			if strings.Contains(stderr, "error[") {
				t.Errorf("a manifest check ran before the usage error:\n%s", stderr)
			}
			if tc.exit == 0 && stdout == "" {
				t.Errorf("--help printed nothing on stdout")
			}
			if tc.exit == 2 && stderr == "" {
				t.Errorf("usage error printed nothing on stderr")
			}
		})
	}
	if after := bbTree(t, dir); !slices.Equal(before, after) {
		t.Errorf("usage errors created files: %v -> %v", before, after)
	}
}

// TestPortInUseExitsOneAndCreatesNothing pins docs/operator-guide.md, "Exit statuses": the TCP
// listener is bound before
// anything is created on disk, so a port in use is exit 1 with no workdir, trace or socket.
// The metrics listener too.
func TestPortInUseExitsOneAndCreatesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir, manifest := bbLaunchDir(t, bbFilesManifest("out/", ""), nil)
	before := bbTree(t, dir)
	for name, args := range map[string][]string{
		"explicit paths": {"--workdir", dir + "/wd", "--trace", dir + "/tr/t.jsonl", "--control", dir + "/ctl/c.sock"},
		"default paths":  nil,
		// The last --listen wins: the resource port is free, the metrics port is the one in use.
		"metrics port": {"--listen", "127.0.0.1:0", "--metrics-listen", ln.Addr().String()},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := harness.RunCLI(t, nil, append([]string{"serve", "--manifest", manifest, "--listen", ln.Addr().String()}, args...)...)
			if code != 1 {
				t.Fatalf("exit %d, want 1; stdout %q stderr %q", code, stdout, stderr)
			}
			if stdout != "" || stderr == "" {
				t.Errorf("stdout %q (want none), stderr %q (want a reason)", stdout, stderr)
			}
			if slices.Contains(args, "--metrics-listen") != strings.Contains(stderr, "--metrics-listen") {
				t.Errorf("stderr %q does not name the listener that could not bind", stderr)
			}
			if after := bbTree(t, dir); !slices.Equal(before, after) {
				t.Errorf("created %v", after)
			}
		})
	}
}

// TestBudgetsTooSmallForMaxBytesExitTwoAndCreateNothing pins the launch refusal of a budget
// that could never grant one read (docs/operator-guide.md, "Launch checks"): a
// --read-buffer-budget below one read buffered in memory (max_bytes + 1 up to 64 KiB; larger
// reads are spooled), and a --spool-budget below one spooled read of max_bytes (max_bytes + 1).
// Each is one line on stderr naming the flag and the bytes needed, exit 2, nothing created; a
// budget just large enough is accepted.
func TestBudgetsTooSmallForMaxBytesExitTwoAndCreateNothing(t *testing.T) {
	for _, tc := range []struct {
		flag, small, enough, need string
	}{
		{"--read-buffer-budget", "32Ki", "64Ki", "65536 bytes"},
		{"--spool-budget", "10Mi", "11Mi", "10485761 bytes"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			dir, manifest := bbLaunchDir(t, bbFilesManifest("out/", "10Mi"), nil)
			before := bbTree(t, dir)
			code, stdout, stderr := harness.RunCLI(t, nil, "serve", "--manifest", manifest, "--workdir", dir+"/wd",
				"--listen", "127.0.0.1:0", tc.flag, tc.small)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 ||
				!strings.Contains(stderr, tc.flag) || !strings.Contains(stderr, tc.need) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line naming the %s needed", code, stdout, stderr, tc.need)
			}
			if after := bbTree(t, dir); !slices.Equal(before, after) {
				t.Errorf("created %v", after)
			}
			p := harness.Serve(t, nil, "--manifest", manifest, "--workdir", dir+"/wd", "--listen", "127.0.0.1:0", tc.flag, tc.enough)
			if r := harness.Get(t, p.Ready.Listen, "/resources/files"); r.Status != 200 {
				t.Fatalf("listing with %s %s answered %d", tc.flag, tc.enough, r.Status)
			}
		})
	}
}

// TestTheDefaultReadBudgetGrowsForALargeMaxBytes pins that a valid manifest always launches
// when the budgets are not given: the spool budget's default (2Gi) grows to one read of
// max_bytes, and the memory budget needs none.
func TestTheDefaultReadBudgetGrowsForALargeMaxBytes(t *testing.T) {
	dir, manifest := bbLaunchDir(t, bbFilesManifest("out/", "3Gi"), nil)
	p := harness.Serve(t, nil, "--manifest", manifest, "--workdir", dir+"/wd", "--listen", "127.0.0.1:0")
	if r := harness.Get(t, p.Ready.Listen, "/resources/files"); r.Status != 200 {
		t.Fatalf("listing answered %d", r.Status)
	}
	if code, _, stderr := harness.RunCLI(t, nil, "check", "--manifest", manifest); code != 0 {
		t.Fatalf("check exit %d: %s", code, stderr)
	}
}

// TestReadyLinePathsAreAbsolute pins docs/operator-guide.md, "The ready line": control and
// trace are absolute
// paths even when given relative, since scripts connect to them from anywhere.
func TestReadyLinePathsAreAbsolute(t *testing.T) {
	dir, manifest := bbLaunchDir(t, bbFilesManifest("out/", ""), nil)
	rel, err := filepath.Rel(mustGetwd(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	p := harness.Serve(t, nil, "--manifest", manifest, "--workdir", dir+"/wd", "--listen", "127.0.0.1:0",
		"--control", rel+"/c.sock", "--trace", rel+"/t/trace.jsonl")
	if p.Ready.Control != dir+"/c.sock" || p.Ready.Trace != dir+"/t/trace.jsonl" {
		t.Fatalf("ready line control %q trace %q; want %q and %q", p.Ready.Control, p.Ready.Trace, dir+"/c.sock", dir+"/t/trace.jsonl")
	}
	if code, _, stderr := harness.RunCLI(t, nil, "status", "--control", p.Ready.Control); code != 0 {
		t.Fatalf("status through the reported socket: exit %d %s", code, stderr)
	}
}

// TestARootSymlinkLoopLaunchesAndIsRefusedPerRequest pins docs/operator-guide.md,
// "Launch checks": E-CAP-007 refuses
// only a root that resolves outside the workdir; a looping root resolves nowhere, so the launch
// goes ahead and every request refuses it (a listing symlink_refused).
func TestARootSymlinkLoopLaunchesAndIsRefusedPerRequest(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: fixture.Layout{"out -> out": ""}})
	if r := harness.Get(t, p.Ready.Listen, "/resources/files"); r.Status != 403 || !strings.Contains(string(r.Body), `"symlink_refused"`) {
		t.Fatalf("listing a looping root: %d %s; want 403 symlink_refused", r.Status, r.Body)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestTheWorkdirIsCreatedAloneAndSaidSo pins docs/operator-guide.md, "Files resplane
// creates": a --workdir that does not exist is created (its parent must exist) and the
// service says so once it serves, with each declared export root that does not exist yet; a
// --workdir whose parent is missing — a mistyped path — is refused with one line, exit 1, and
// nothing is created.
func TestTheWorkdirIsCreatedAloneAndSaidSo(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "fresh")
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Args: []string{"--workdir", fresh}})
	if p.Ready.Workdir != fresh {
		t.Fatalf("served %s, want %s", p.Ready.Workdir, fresh)
	}
	p.WaitForStderr(t, "created the workdir")
	p.WaitForStderr(t, `"field":"exports.files.root","root":"out/"`)

	dir, manifest := bbLaunchDir(t, bbFilesManifest("out/", ""), nil)
	before := bbTree(t, dir)
	typo := filepath.Join(dir, "wokrdir", "session", "wd")
	code, stdout, stderr := harness.RunCLI(t, nil, "serve", "--manifest", manifest, "--workdir", typo, "--listen", "127.0.0.1:0")
	want := "resplane serve: --workdir " + typo + ": its parent directory " + filepath.Dir(typo) + " does not exist; create it, or fix the path\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, stdout, stderr, want)
	}
	if after := bbTree(t, dir); !slices.Equal(before, after) {
		t.Errorf("a refused workdir created %v", after)
	}
}
