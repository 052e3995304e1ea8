package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/domain/diag"
	"github.com/resplane/resplane/domain/manifest"
)

// writeFile writes content to name in a fresh directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, src string) (manifest.Manifest, []diag.Warning, *diag.Diagnostic) {
	t.Helper()
	return LoadManifest(writeFile(t, "murmur.yaml", src))
}

const fullManifest = `# a capsule manifest carries much more than resplane reads
name: reporter
version: 1.0
artifacts: {report: out/report.md}
network:
  internal_port: 41234
exports:
  files:
    root: out/
    mode: read-only
  peer_files:
    root: " out/handoff/ "
    max_ttl: "90"
    max_bytes: 1Mi
capabilities:
  network:
    allow: [localhost:41234, "https://peer.example"]
  peer_fetch:
    allow:
      - localhost:41235
lifecycle:
  after_task: sleep
`

func TestLoadManifestDecodesAFullManifest(t *testing.T) {
	m, warnings, bad := load(t, fullManifest)
	if bad != nil {
		t.Fatal(bad.Render())
	}
	if len(warnings) != 0 {
		t.Errorf("warnings: %v", warnings)
	}
	if m.Name != "reporter" || m.Version != "1.0" || m.InternalPort != 41234 || m.AfterTask != manifest.AfterTaskSleep {
		t.Errorf("manifest = %+v", m)
	}
	if m.Files.Root.String() != "out/" || m.Files.MaxBytes.Int64() != 10<<20 {
		t.Errorf("files = %+v", *m.Files)
	}
	if p := m.PeerFiles; p.Root.String() != "out/handoff/" || p.MaxTTL != 90*time.Second || !p.MaxTTLDeclared || p.MaxBytes.Int64() != 1<<20 {
		t.Errorf("peer_files = %+v", *p)
	}
	if len(m.NetworkAllow) != 2 || m.NetworkAllow[1].String() != "https://peer.example" || len(m.PeerFetch.Allow) != 1 {
		t.Errorf("allow-lists = %v / %v", m.NetworkAllow, m.PeerFetch)
	}
}

func TestE_MAN_002_NamesTheFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.yaml")
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"missing file", missing, []string{"cannot read the manifest " + missing, "no such file or directory"}},
		{"a directory", dir, []string{"cannot read the manifest " + dir, "is a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, bad := LoadManifest(tc.path)
			assertDiag(t, bad, diag.ManifestUnreadable, tc.want...)
			if strings.Count(bad.Message, tc.path) != 1 {
				t.Errorf("message %q should name the path once", bad.Message)
			}
		})
	}
}

func TestE_MAN_002_InvalidYAMLNamesFileAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"syntax", "name: a\nexports:\n  files: [\n", "line"},
		{"duplicate key", "name: a\nname: b\n", `line 2: duplicate key "name", already defined at line 1`},
		{"duplicate key inside a block", "name: a\nexports:\n  files:\n    root: x\n    mode: read-only\n    root: y\n", "line 6: duplicate key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, "murmur.yaml", tc.src)
			_, _, bad := LoadManifest(p)
			assertDiag(t, bad, diag.ManifestUnreadable, "the manifest "+p+" is not valid YAML", tc.want)
		})
	}
}

func TestE_MAN_002_ComesBeforeEveryOtherRule(t *testing.T) {
	_, _, bad := load(t, "version: 1\nversion: 2\n")
	assertDiag(t, bad, diag.ManifestUnreadable, "duplicate key")
}

func TestManifestYAMLEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		code diag.Code
		want []string
	}{
		{"top level a list", "- name: a\n", diag.ManifestInvalidField, []string{"top level must be a mapping", "got a list"}},
		{"top level a string", "reporter\n", diag.ManifestInvalidField, []string{"top level must be a mapping"}},
		{"empty file", "", diag.ManifestInvalidField, []string{"top level must be a mapping", "got null"}},
		{"name missing", "version: 1\n", diag.ManifestNameMissing, []string{"no top-level name"}},
		{"name written empty", "name:\n", diag.ManifestNameMissing, []string{"no top-level name"}},
		{"name ~", "name: ~\n", diag.ManifestNameMissing, nil},
		{"name true is not a string", "name: true\n", diag.ManifestInvalidField, []string{"name must be a non-empty string", "got true"}},
		{"name quoted blank", "name: '  '\n", diag.ManifestInvalidField, []string{"name must be a non-empty string"}},
		{"after_task yes is a string, and not exit or sleep", "name: a\nlifecycle:\n  after_task: yes\n", diag.ManifestInvalidField,
			[]string{"lifecycle.after_task must be 'exit' or 'sleep'", `got "yes"`, "(line 3)"}},
		{"max_ttl 1:30 is a string, not a duration", "name: a\nexports:\n  peer_files:\n    root: p\n    max_ttl: 1:30\n", diag.ManifestInvalidField,
			[]string{"exports.peer_files.max_ttl must be a duration: an integer, optionally suffixed s/m/h/d", `got "1:30"`, "(line 5)"}},
		{"max_bytes 1_000 is a string, not an integer", "name: a\nexports:\n  files:\n    root: o\n    mode: read-only\n    max_bytes: 1_000\n", diag.ManifestInvalidField,
			[]string{"exports.files.max_bytes must be a byte count, optionally suffixed Ki/Mi/Gi"}},
		{"peer_fetch {} is declared and checked", "name: a\ncapabilities:\n  peer_fetch: {}\n", diag.ManifestInvalidField,
			[]string{"capabilities.peer_fetch.allow is missing", "must be a non-empty list of network destinations", "(line 3)"}},
		{"peer_fetch.allow []", "name: a\ncapabilities:\n  peer_fetch:\n    allow: []\n", diag.ManifestInvalidField,
			[]string{"capabilities.peer_fetch.allow must be a non-empty list of network destinations", "got an empty list"}},
		{"files {} is declared and checked", "name: a\nexports:\n  files: {}\n", diag.ManifestInvalidField,
			[]string{"exports.files.root is missing", "must be a relative path inside the workdir"}},
		{"network.allow entry not a string", "name: a\ncapabilities:\n  network:\n    allow: [8080]\n", diag.ManifestInvalidField,
			[]string{"capabilities.network.allow[0] is 8080"}},
		{"network.allow entry not a destination", "name: a\ncapabilities:\n  network:\n    allow:\n      - localhost\n      - \"http://u@peer\"\n", diag.NetworkAllowInvalid,
			[]string{`capabilities.network.allow[1] "http://u@peer" is not a network destination: it has userinfo`, "(line 6)"}},
		{"internal_port quoted", "name: a\nnetwork:\n  internal_port: \"80\"\n", diag.ManifestInvalidField,
			[]string{"network.internal_port must be an integer from 0 to 65535"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, bad := load(t, tc.src)
			assertDiag(t, bad, tc.code, tc.want...)
		})
	}
}

func TestManifestYAMLAcceptances(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		check     func(manifest.Manifest) bool
	}{
		{"name yes is the string yes", "name: yes\n", func(m manifest.Manifest) bool { return m.Name == "yes" }},
		{"version 1.10 keeps its text", "name: a\nversion: 1.10\n", func(m manifest.Manifest) bool { return m.Version == "1.10" }},
		{"empty blocks are absent", "name: a\nexports:\n  files:\n  peer_files:\ncapabilities:\n  peer_fetch:\n",
			func(m manifest.Manifest) bool { return m.Files == nil && m.PeerFiles == nil && m.PeerFetch == nil }},
		{"max_ttl as an integer is seconds", "name: a\nexports:\n  peer_files:\n    root: p\n    max_ttl: 600\n",
			func(m manifest.Manifest) bool { return m.PeerFiles.MaxTTL == 10*time.Minute }},
		{"internal_port 0", "name: a\nnetwork:\n  internal_port: 0\n", func(m manifest.Manifest) bool { return m.InternalPort == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _, bad := load(t, tc.src)
			if bad != nil {
				t.Fatal(bad.Render())
			}
			if !tc.check(m) {
				t.Errorf("manifest = %+v", m)
			}
		})
	}
}

func TestW_SEC_019_UnknownKeysWarnOnlyInOwnedBlocks(t *testing.T) {
	_, warnings, bad := load(t, `name: a
inference: {model: x}
exports:
  files:
    root: out
    mode: read-only
    max_size: 1Mi
  extra: true
capabilities:
  tools: [x]
  peer_fetch:
    allow: [localhost:1]
    timeout: 5
`)
	if bad != nil {
		t.Fatal(bad.Render())
	}
	var got []string
	for _, w := range warnings {
		got = append(got, w.Key+" "+w.Message)
	}
	want := []string{
		"exports.extra unknown key exports.extra (line 8) is ignored",
		"exports.files.max_size unknown key exports.files.max_size (line 7) is ignored",
		"capabilities.peer_fetch.timeout unknown key capabilities.peer_fetch.timeout (line 13) is ignored",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAWarningIsNeverReturnedWithARefusal(t *testing.T) {
	_, warnings, bad := load(t, "name: a\nexports:\n  files:\n    root: /abs\n    mode: read-only\n    typo: 1\n")
	if bad == nil || warnings != nil {
		t.Errorf("got %v and %v; want a refusal and no warnings", bad, warnings)
	}
}

func assertDiag(t *testing.T, bad *diag.Diagnostic, code diag.Code, want ...string) {
	t.Helper()
	if bad == nil {
		t.Fatalf("accepted; want %s", code)
	}
	if bad.Code != code {
		t.Errorf("code %s (%s), want %s", bad.Code, bad.Message, code)
	}
	for _, w := range want {
		if !strings.Contains(bad.Message, w) {
			t.Errorf("message %q lacks %q", bad.Message, w)
		}
	}
	if lines := strings.Split(strings.TrimSuffix(bad.Render(), "\n"), "\n"); len(lines) != 2 {
		t.Errorf("rendering has %d lines, want 2: %q", len(lines), bad.Render())
	}
}
