package manifest

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/diag"
)

// Tree builders: a mapping is written as alternating keys and values.

func mapping(kv ...any) Node {
	n := Node{Kind: MappingNode}
	for i := 0; i < len(kv); i += 2 {
		n.Entries = append(n.Entries, Entry{Key: kv[i].(string), Value: kv[i+1].(Node)})
	}
	return n
}

func seq(items ...Node) Node       { return Node{Kind: SequenceNode, Items: items} }
func str(s string) Node            { return Node{Kind: ScalarNode, Tag: TagStr, Text: s} }
func integer(s string) Node        { return Node{Kind: ScalarNode, Tag: TagInt, Text: s} }
func float(s string) Node          { return Node{Kind: ScalarNode, Tag: TagFloat, Text: s} }
func boolean(s string) Node        { return Node{Kind: ScalarNode, Tag: TagBool, Text: s} }
func null() Node                   { return Node{Kind: NullNode} }
func onLine(n Node, line int) Node { n.Line = line; return n }

// named is a minimal valid manifest with extra top-level entries.
func named(kv ...any) Node { return mapping(append([]any{"name", str("reporter")}, kv...)...) }

func exportsFiles(kv ...any) Node { return named("exports", mapping("files", mapping(kv...))) }

func peerFiles(kv ...any) Node { return named("exports", mapping("peer_files", mapping(kv...))) }

func TestDecodeAcceptsAFullManifest(t *testing.T) {
	doc := mapping(
		"name", str("  reporter "),
		"version", float("1.0"),
		"artifacts", seq(str("ignored")),
		"network", mapping("internal_port", integer("41234")),
		"exports", mapping(
			"files", mapping("root", str(" out/ "), "mode", str("read-only"), "max_bytes", str("1Mi")),
			"peer_files", mapping("root", str("out/handoff/"), "max_ttl", str("15m"), "max_bytes", integer("0x400")),
		),
		"capabilities", mapping(
			"network", mapping("allow", seq(str("localhost:41234"), str("https://peer.example"))),
			"peer_fetch", mapping("allow", seq(str("localhost:41235"))),
		),
		"lifecycle", mapping("after_task", str("sleep")),
	)
	m, warnings, bad := Decode(doc)
	if bad != nil {
		t.Fatalf("Decode: %s", bad.Render())
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %v, want none", warnings)
	}
	if m.Name != "reporter" || m.Version != "1.0" || m.InternalPort != 41234 || m.AfterTask != AfterTaskSleep {
		t.Errorf("scalars = %q %q %d %q", m.Name, m.Version, m.InternalPort, m.AfterTask)
	}
	if got := *m.Files; got.Root.String() != "out/" || got.Mode != ReadOnly || got.MaxBytes.Int64() != 1<<20 {
		t.Errorf("Files = %+v", got)
	}
	if got := *m.PeerFiles; got.Root.String() != "out/handoff/" || got.MaxTTL != 15*time.Minute ||
		!got.MaxTTLDeclared || got.MaxBytes.Int64() != 1024 {
		t.Errorf("PeerFiles = %+v", got)
	}
	if texts(m.NetworkAllow) != "localhost:41234 https://peer.example" || texts(m.PeerFetch.Allow) != "localhost:41235" {
		t.Errorf("allow-lists = %q / %q", texts(m.NetworkAllow), texts(m.PeerFetch.Allow))
	}
}

func texts[T interface{ String() string }](list []T) string {
	var out []string
	for _, d := range list {
		out = append(out, d.String())
	}
	return strings.Join(out, " ")
}

func TestDecodeDefaults(t *testing.T) {
	m, _, bad := Decode(named(
		"version", null(),
		"network", null(),
		"exports", mapping(
			"files", mapping("root", str("out"), "mode", str("read-only"), "max_bytes", null()),
			"peer_files", mapping("root", str("p"), "max_ttl", null()),
		),
		"capabilities", mapping("network", mapping("allow", null()), "peer_fetch", null()),
		"lifecycle", mapping("after_task", null()),
	))
	if bad != nil {
		t.Fatalf("Decode: %s", bad.Render())
	}
	want := Manifest{
		Name: "reporter", Version: "0.0.0", AfterTask: AfterTaskExit,
		Files:        &FilesExport{Root: Root{"out"}, Mode: ReadOnly, MaxBytes: ByteCount{10485760}},
		PeerFiles:    &PeerFilesExport{Root: Root{"p"}, MaxTTL: time.Hour, MaxBytes: ByteCount{10485760}},
		NetworkAllow: []destination.Destination{},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("Decode = %+v\nwant     %+v", m, want)
	}
}

func TestVersionIsTakenAsWritten(t *testing.T) {
	for _, v := range []Node{str("2.1.0-rc1"), float("1.0"), integer("3"), str("")} {
		m, _, bad := Decode(named("version", v))
		if bad != nil || m.Version != v.Text {
			t.Errorf("version %q: got %q, %v", v.Text, m.Version, bad)
		}
	}
}

func TestAnEmptyBlockIsAbsentButAnEmptyMappingIsDeclared(t *testing.T) {
	m, _, bad := Decode(named("exports", mapping("files", null(), "peer_files", null()),
		"capabilities", mapping("peer_fetch", null())))
	if bad != nil || m.Files != nil || m.PeerFiles != nil || m.PeerFetch != nil {
		t.Errorf("null blocks: %+v, %v; want all absent", m, bad)
	}
	for _, tc := range []struct {
		doc   Node
		field string
	}{
		{named("exports", mapping("files", mapping())), "exports.files.root is missing"},
		{named("exports", mapping("peer_files", mapping())), "exports.peer_files.root is missing"},
		{named("capabilities", mapping("peer_fetch", mapping())), "capabilities.peer_fetch.allow is missing"},
	} {
		_, _, bad := Decode(tc.doc)
		if bad == nil || bad.Code != diag.ManifestInvalidField || !strings.Contains(bad.Message, tc.field) {
			t.Errorf("{}: got %v, want E-MAN-003 %q", bad, tc.field)
		}
	}
}

// ruleCase is one manifest that breaks one rule, and what the diagnostic must say.
type ruleCase struct {
	name string
	doc  Node
	code diag.Code
	want []string
}

func TestDecodeRefusals(t *testing.T) {
	const (
		man1, man3, cap1 = diag.ManifestNameMissing, diag.ManifestInvalidField, diag.NetworkAllowInvalid
		rootMsg          = "must be a relative path inside the workdir"
		bytesMsg         = "must be a byte count, optionally suffixed Ki/Mi/Gi"
		durMsg           = "must be a duration: an integer, optionally suffixed s/m/h/d"
		positive         = "must be greater than zero"
		destMsg          = "must be a non-empty list of network destinations"
	)
	okFiles := []any{"root", str("out"), "mode", str("read-only")}
	cases := []ruleCase{
		{"top level a list is E-MAN-003", seq(str("name")), man3, []string{"top level must be a mapping", "got a list"}},
		{"top level a scalar is E-MAN-003", str("reporter"), man3, []string{"top level must be a mapping", `"reporter"`}},
		{"empty document is E-MAN-003", null(), man3, []string{"top level must be a mapping", "got null"}},
		{"name missing is E-MAN-001", mapping("version", str("1")), man1, []string{"no top-level name"}},
		{"name null is E-MAN-001", mapping("name", null()), man1, []string{"no top-level name"}},
		{"name blank is E-MAN-003", mapping("name", str("  ")), man3, []string{"name must be a non-empty string"}},
		{"name with a line break is E-MAN-003", mapping("name", str("report\ner")), man3, []string{"name must not contain control characters", `got '\n' as character 7`}},
		{"name with a tab is E-MAN-003", mapping("name", str("a\tb")), man3, []string{"name must not contain control characters", `got '\t' as character 2`}},
		{"name not a string is E-MAN-003", mapping("name", integer("5")), man3, []string{"name must be a non-empty string", "got 5"}},
		{"name a boolean is E-MAN-003", mapping("name", boolean("true")), man3, []string{"name must be"}},
		{"version a mapping", named("version", mapping()), man3, []string{"version must be a string or a number"}},
		{"version a boolean", named("version", boolean("false")), man3, []string{"version must be a string or a number"}},
		{"network not a mapping", named("network", str("x")), man3, []string{"network must be a mapping"}},
		{"internal_port a string", named("network", mapping("internal_port", str("80"))), man3, []string{"network.internal_port must be an integer from 0 to 65535"}},
		{"internal_port above 65535", named("network", mapping("internal_port", integer("65536"))), man3, []string{"network.internal_port"}},
		{"internal_port negative", named("network", mapping("internal_port", integer("-1"))), man3, []string{"network.internal_port"}},
		{"internal_port a float", named("network", mapping("internal_port", float("80.0"))), man3, []string{"network.internal_port"}},
		{"exports not a mapping", named("exports", seq()), man3, []string{"exports must be a mapping", "got an empty list"}},
		{"exports.files a string", named("exports", mapping("files", str("out/"))), man3, []string{"exports.files must be a mapping"}},
		{"files.root missing", exportsFiles("mode", str("read-only")), man3, []string{"exports.files.root is missing", rootMsg}},
		{"files.root null", exportsFiles("root", null(), "mode", str("read-only")), man3, []string{"exports.files.root is missing"}},
		{"files.root absolute", exportsFiles("root", str("/srv"), "mode", str("read-only")), man3, []string{"exports.files.root " + rootMsg, "absolute", `"/srv"`}},
		{"files.root dot-dot", exportsFiles("root", str("out/../.."), "mode", str("read-only")), man3, []string{"exports.files.root " + rootMsg, `".."`}},
		{"files.root blank", exportsFiles("root", str(" "), "mode", str("read-only")), man3, []string{"exports.files.root " + rootMsg, "empty"}},
		{"files.root control character", exportsFiles("root", str("out\x01"), "mode", str("read-only")), man3, []string{"exports.files.root " + rootMsg, "control character"}},
		{"files.root a list", exportsFiles("root", seq(str("out")), "mode", str("read-only")), man3, []string{"exports.files.root " + rootMsg, "got a list"}},
		{"files.mode missing", exportsFiles("root", str("out")), man3, []string{"exports.files.mode is missing", "must be 'read-only'"}},
		{"files.mode read-write", exportsFiles("root", str("out"), "mode", str("read-write")), man3, []string{"exports.files.mode must be 'read-only'", `"read-write"`}},
		{"files.max_bytes 10MB", exportsFiles(append(okFiles, "max_bytes", str("10MB"))...), man3, []string{"exports.files.max_bytes " + bytesMsg, `"10MB"`}},
		{"files.max_bytes zero", exportsFiles(append(okFiles, "max_bytes", integer("0"))...), man3, []string{"exports.files.max_bytes " + positive, "got 0"}},
		{"files.max_bytes negative", exportsFiles(append(okFiles, "max_bytes", integer("-1"))...), man3, []string{"exports.files.max_bytes " + bytesMsg}},
		{"files.max_bytes overflow", exportsFiles(append(okFiles, "max_bytes", integer("9223372036854775808"))...), man3, []string{"exports.files.max_bytes " + bytesMsg, "at most 2^63-1"}},
		{"files.max_bytes a float", exportsFiles(append(okFiles, "max_bytes", float("1.5"))...), man3, []string{"exports.files.max_bytes " + bytesMsg}},
		{"files.max_bytes a mapping", exportsFiles(append(okFiles, "max_bytes", mapping())...), man3, []string{"exports.files.max_bytes " + bytesMsg, "got a mapping"}},
		{"peer_files.root missing", peerFiles("max_ttl", str("15m")), man3, []string{"exports.peer_files.root is missing", rootMsg}},
		{"peer_files.root absolute", peerFiles("root", str("/x")), man3, []string{"exports.peer_files.root " + rootMsg}},
		{"peer_files.max_ttl 30S", peerFiles("root", str("p"), "max_ttl", str("30S")), man3, []string{"exports.peer_files.max_ttl " + durMsg}},
		{"peer_files.max_ttl 5 minutes", peerFiles("root", str("p"), "max_ttl", str("5 minutes")), man3, []string{"exports.peer_files.max_ttl " + durMsg}},
		{"peer_files.max_ttl zero", peerFiles("root", str("p"), "max_ttl", integer("0")), man3, []string{"exports.peer_files.max_ttl " + positive}},
		{"peer_files.max_ttl quoted zero", peerFiles("root", str("p"), "max_ttl", str("0")), man3, []string{"exports.peer_files.max_ttl " + positive}},
		{"peer_files.max_ttl negative", peerFiles("root", str("p"), "max_ttl", integer("-60")), man3, []string{"exports.peer_files.max_ttl " + durMsg}},
		{"peer_files.max_ttl overflow", peerFiles("root", str("p"), "max_ttl", integer("9223372037")), man3, []string{"exports.peer_files.max_ttl " + durMsg, "292 years"}},
		{"peer_files.max_ttl a boolean", peerFiles("root", str("p"), "max_ttl", boolean("true")), man3, []string{"exports.peer_files.max_ttl " + durMsg}},
		{"peer_files.max_bytes 0Ki", peerFiles("root", str("p"), "max_bytes", str("0Ki")), man3, []string{"exports.peer_files.max_bytes " + positive}},
		{"capabilities not a mapping", named("capabilities", str("all")), man3, []string{"capabilities must be a mapping"}},
		{"capabilities.network not a mapping", named("capabilities", mapping("network", seq())), man3, []string{"capabilities.network must be a mapping"}},
		{"network.allow a string", named("capabilities", mapping("network", mapping("allow", str("localhost")))), man3, []string{"capabilities.network.allow must be a list of network destinations"}},
		{"network.allow non-string entry", named("capabilities", mapping("network", mapping("allow", seq(str("a"), integer("8080"))))), man3, []string{"capabilities.network.allow must be a list of network destinations", "capabilities.network.allow[1] is 8080"}},
		{"peer_fetch not a mapping", named("capabilities", mapping("peer_fetch", str("yes"))), man3, []string{"capabilities.peer_fetch must be a mapping"}},
		{"peer_fetch.allow missing", named("capabilities", mapping("peer_fetch", mapping("other", str("x")))), man3, []string{"capabilities.peer_fetch.allow is missing", destMsg}},
		{"peer_fetch.allow null", named("capabilities", mapping("peer_fetch", mapping("allow", null()))), man3, []string{"capabilities.peer_fetch.allow is missing"}},
		{"peer_fetch.allow empty", named("capabilities", mapping("peer_fetch", mapping("allow", seq()))), man3, []string{"capabilities.peer_fetch.allow " + destMsg, "got an empty list"}},
		{"peer_fetch.allow a scalar", named("capabilities", mapping("peer_fetch", mapping("allow", str("localhost")))), man3, []string{"capabilities.peer_fetch.allow " + destMsg}},
		{"peer_fetch.allow non-string entry", named("capabilities", mapping("peer_fetch", mapping("allow", seq(mapping())))), man3, []string{"capabilities.peer_fetch.allow[0] is a mapping"}},
		{"peer_fetch.allow bad destination is E-MAN-003", named("capabilities", mapping("peer_fetch", mapping("allow", seq(str("ok"), str("*.example"))))), man3, []string{"capabilities.peer_fetch.allow " + destMsg, `capabilities.peer_fetch.allow[1] "*.example" is not a network destination: it contains a wildcard`}},
		{"lifecycle not a mapping", named("lifecycle", str("sleep")), man3, []string{"lifecycle must be a mapping"}},
		{"after_task unknown", named("lifecycle", mapping("after_task", str("stay"))), man3, []string{"lifecycle.after_task must be 'exit' or 'sleep'", `"stay"`}},
		{"after_task a boolean", named("lifecycle", mapping("after_task", boolean("true"))), man3, []string{"lifecycle.after_task must be 'exit' or 'sleep'"}},
		{"network.allow bad destination is E-CAP-001", named("capabilities", mapping("network", mapping("allow", seq(str("localhost"), onLine(str("http://peer/path"), 9))))), cap1, []string{`capabilities.network.allow[1] "http://peer/path" is not a network destination: it has a path`, "(line 9)"}},
		{"network.allow whitespace is E-CAP-001", named("capabilities", mapping("network", mapping("allow", seq(str("local host"))))), cap1, []string{`capabilities.network.allow[0] "local host"`, "whitespace"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, warnings, bad := Decode(tc.doc)
			if bad == nil {
				t.Fatal("Decode accepted the manifest")
			}
			if bad.Code != tc.code {
				t.Errorf("code = %s, want %s (%s)", bad.Code, tc.code, bad.Message)
			}
			for _, w := range tc.want {
				if !strings.Contains(bad.Message, w) {
					t.Errorf("message %q lacks %q", bad.Message, w)
				}
			}
			if bad.Hint == "" || strings.Contains(bad.Message+bad.Hint, "\n") {
				t.Errorf("hint %q: want one non-empty line each", bad.Hint)
			}
			if warnings != nil {
				t.Errorf("warnings on a refusal: %v", warnings)
			}
		})
	}
}

func TestDecodeReportsTheFirstFailureInContractOrder(t *testing.T) {
	badBytes := mapping("root", str("out"), "mode", str("read-only"), "max_bytes", str("10MB"))
	for _, tc := range []struct {
		name string
		doc  Node
		want string
	}{
		{"top level before name", seq(), "top level"},
		{"E-MAN-001 before any E-MAN-003", mapping("version", boolean("true"), "exports", str("x")), "no top-level name"},
		{"name before version", mapping("name", str(""), "version", mapping()), "name must be"},
		{"version before internal_port", named("network", mapping("internal_port", str("x")), "version", mapping()), "version must be"},
		{"internal_port before exports", named("exports", str("x"), "network", mapping("internal_port", str("x"))), "network.internal_port"},
		{"files.root before files.mode", named("exports", mapping("files", mapping("mode", str("rw")))), "exports.files.root"},
		{"files.mode before files.max_bytes", named("exports", mapping("files", mapping("root", str("out"), "max_bytes", str("x"), "mode", str("rw")))), "exports.files.mode"},
		{"files before peer_files even when written later", named("exports", mapping("peer_files", mapping(), "files", badBytes)), "exports.files.max_bytes"},
		{"peer_files.root before max_ttl", named("exports", mapping("peer_files", mapping("max_ttl", str("x"), "root", str("/")))), "exports.peer_files.root"},
		{"max_ttl before peer max_bytes", named("exports", mapping("peer_files", mapping("root", str("p"), "max_bytes", str("x"), "max_ttl", str("x")))), "exports.peer_files.max_ttl"},
		{"exports before capabilities", named("capabilities", str("x"), "exports", mapping("files", badBytes)), "exports.files.max_bytes"},
		{"network.allow type before peer_fetch", named("capabilities", mapping("peer_fetch", mapping(), "network", mapping("allow", str("x")))), "capabilities.network.allow must"},
		{"peer_fetch before lifecycle", named("lifecycle", str("x"), "capabilities", mapping("peer_fetch", mapping())), "capabilities.peer_fetch.allow"},
		{"every E-MAN-003 before E-CAP-001", named("capabilities", mapping("network", mapping("allow", seq(str("*")))), "lifecycle", mapping("after_task", str("x"))), "lifecycle.after_task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, bad := Decode(tc.doc)
			if bad == nil || !strings.Contains(bad.Message, tc.want) {
				t.Fatalf("got %v, want the failure of %q first", bad, tc.want)
			}
		})
	}
}

func TestUnknownKeysInOwnedBlocksWarnWithDottedNames(t *testing.T) {
	doc := named(
		"artifacts", mapping("anything", str("x")),
		"exports", mapping(
			"files", mapping("root", str("out"), "mode", str("read-only"), "max_byte", str("1Mi")),
			"peer_files", mapping("root", str("p"), "ttl", str("1m")),
			"logs", mapping(),
		),
		"capabilities", mapping(
			"network", mapping("allow", seq(), "deny", seq()),
			"peer_fetch", mapping("allow", seq(str("a")), "deny", null()),
			"tools", seq(),
		),
		"lifecycle", mapping("after_task", str("exit"), "restart", str("always")),
	)
	_, warnings, bad := Decode(doc)
	if bad != nil {
		t.Fatalf("Decode: %s", bad.Render())
	}
	var keys []string
	for _, w := range warnings {
		if w.Code != diag.UnknownKey || !strings.Contains(w.Message, w.Key) {
			t.Errorf("warning %+v: want W-SEC-019 naming its key", w)
		}
		keys = append(keys, w.Key)
	}
	want := []string{"exports.logs", "exports.files.max_byte", "exports.peer_files.ttl", "capabilities.peer_fetch.deny"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("warned keys = %q, want %q", keys, want)
	}
}

func TestWarningsNameTheLineOfTheKey(t *testing.T) {
	doc := named("exports", mapping("files", null()))
	doc.Entries[1].Value.Entries = append(doc.Entries[1].Value.Entries, Entry{Key: "extra", Line: 7, Value: null()})
	_, warnings, _ := Decode(doc)
	if len(warnings) != 1 || !strings.HasSuffix(warnings[0].Message, "(line 7) is ignored") {
		t.Errorf("warnings = %+v", warnings)
	}
}

func TestYAMLIntegersCountBareUnits(t *testing.T) {
	m, _, bad := Decode(peerFiles("root", str("p"), "max_ttl", integer("0x3c"), "max_bytes", integer("0o2000")))
	if bad != nil {
		t.Fatalf("Decode: %s", bad.Render())
	}
	if m.PeerFiles.MaxTTL != time.Minute || m.PeerFiles.MaxBytes.Int64() != 1024 {
		t.Errorf("max_ttl 0x3c = %v, max_bytes 0o2000 = %d", m.PeerFiles.MaxTTL, m.PeerFiles.MaxBytes.Int64())
	}
	m, _, bad = Decode(peerFiles("root", str("p"), "max_ttl", integer("+90")))
	if bad != nil || m.PeerFiles.MaxTTL != 90*time.Second {
		t.Errorf("max_ttl +90 = %v, %v", m.PeerFiles.MaxTTL, bad)
	}
}
