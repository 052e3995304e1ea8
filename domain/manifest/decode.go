package manifest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/diag"
)

// Decode applies the manifest rules to a parsed document and returns the manifest and one
// W-SEC-019 warning per unknown key inside exports, exports.files, exports.peer_files and
// capabilities.peer_fetch. The first failure is returned as a diagnostic, checked in the
// documented order: a top level that is not a mapping (E-MAN-003), a missing or null name
// (E-MAN-001), every other field in the order of docs/manifest.md, "Keys" (E-MAN-003), then
// each capabilities.network.allow entry (E-CAP-001). Warnings are returned only when the
// manifest is accepted. Other top-level keys are ignored.
//
// A block written with nothing under it (null) counts as absent; an empty mapping counts as
// declared and is checked, so a required key inside it is reported missing.
func Decode(doc Node) (Manifest, []diag.Warning, *diag.Diagnostic) {
	if doc.Kind != MappingNode {
		return Manifest{}, nil, &diag.Diagnostic{
			Code:    diag.ManifestInvalidField,
			Message: "the manifest's top level must be a mapping of keys to values; got " + doc.describe() + at(doc),
			Hint:    "start the manifest with its top-level keys, such as `name: reporter`",
		}
	}
	if _, ok := doc.get("name"); !ok {
		return Manifest{}, nil, &diag.Diagnostic{
			Code:    diag.ManifestNameMissing,
			Message: "the manifest has no top-level name",
			Hint:    "add `name: <capsule name>` at the top level; it becomes the agent card's name",
		}
	}
	var d decoder
	m, bad := d.decode(doc)
	if bad != nil {
		return Manifest{}, nil, bad
	}
	return m, d.warnings, nil
}

// The fields Decode checks, in the order of the table in docs/manifest.md, "Keys".
var (
	fieldName           = field{"name", "must be a non-empty string", "reporter"}
	fieldVersion        = field{"version", "must be a string or a number", "1.2.0"}
	fieldInternalPort   = field{"network.internal_port", "must be an integer from 0 to 65535 (0 picks a free port)", "41234"}
	fieldFilesRoot      = field{"exports.files.root", rootForm, "out/"}
	fieldFilesMode      = field{"exports.files.mode", "must be 'read-only'", "read-only"}
	fieldFilesMaxBytes  = field{"exports.files.max_bytes", byteCountForm, "10Mi"}
	fieldPeerRoot       = field{"exports.peer_files.root", rootForm, "out/handoff/"}
	fieldPeerMaxTTL     = field{"exports.peer_files.max_ttl", durationForm, "15m"}
	fieldPeerMaxBytes   = field{"exports.peer_files.max_bytes", byteCountForm, "10Mi"}
	fieldNetworkAllow   = field{"capabilities.network.allow", "must be a list of network destinations", "[localhost:41234]"}
	fieldPeerFetchAllow = field{"capabilities.peer_fetch.allow", "must be a non-empty list of network destinations", "[localhost:41235]"}
	fieldAfterTask      = field{"lifecycle.after_task", afterTaskForm, "exit"}
)

// decoder walks one document, collecting warnings as it goes.
type decoder struct {
	warnings []diag.Warning
}

func (d *decoder) decode(doc Node) (Manifest, *diag.Diagnostic) {
	m := Manifest{Version: "0.0.0", AfterTask: AfterTaskExit}
	var bad *diag.Diagnostic
	if m.Name, bad = readName(doc); bad != nil {
		return m, bad
	}
	if v, ok := doc.get("version"); ok {
		if v.Kind != ScalarNode || v.Tag == TagBool {
			return m, fieldVersion.invalid(v, fieldVersion.form)
		}
		m.Version = v.Text
	}
	network, _, bad := block(doc, "network")
	if bad != nil {
		return m, bad
	}
	if m.InternalPort, bad = readPort(network); bad != nil {
		return m, bad
	}
	exports, _, bad := block(doc, "exports")
	if bad != nil {
		return m, bad
	}
	d.warnUnknown(exports, "exports", "files", "peer_files")
	if m.Files, bad = d.readFiles(exports); bad != nil {
		return m, bad
	}
	if m.PeerFiles, bad = d.readPeerFiles(exports); bad != nil {
		return m, bad
	}
	capabilities, _, bad := block(doc, "capabilities")
	if bad != nil {
		return m, bad
	}
	capNetwork, _, bad := block(capabilities, "capabilities.network")
	if bad != nil {
		return m, bad
	}
	networkAllow, _, bad := fieldNetworkAllow.stringList(capNetwork)
	if bad != nil {
		return m, bad
	}
	if m.PeerFetch, bad = d.readPeerFetch(capabilities); bad != nil {
		return m, bad
	}
	lifecycle, _, bad := block(doc, "lifecycle")
	if bad != nil {
		return m, bad
	}
	if n, ok := lifecycle.get("after_task"); ok {
		if n.Kind != ScalarNode || n.Tag != TagStr {
			return m, fieldAfterTask.invalid(n, fieldAfterTask.form)
		}
		a, err := ParseAfterTask(n.Text)
		if err != nil {
			return m, fieldAfterTask.invalid(n, err.Error())
		}
		m.AfterTask = a
	}
	m.NetworkAllow, bad = networkDestinations(networkAllow.Items)
	return m, bad
}

func readName(doc Node) (string, *diag.Diagnostic) {
	n, _ := doc.get("name")
	name := strings.TrimSpace(n.Text)
	if n.Kind != ScalarNode || n.Tag != TagStr || name == "" {
		return "", fieldName.invalid(n, fieldName.form)
	}
	for i, r := range []rune(name) {
		if unicode.IsControl(r) {
			// The name is in the agent card, the audience and log lines: a line break there
			// would forge lines in a reader of any of them. The detail names the character by
			// its code point, never by the raw character.
			return "", fieldName.refuse(n, "must not contain control characters such as a line break or a tab",
				"got "+strconv.QuoteRuneToASCII(r)+" as character "+strconv.Itoa(i+1))
		}
	}
	return name, nil
}

func readPort(network Node) (uint16, *diag.Diagnostic) {
	n, ok := network.get(fieldInternalPort.key())
	if !ok {
		return 0, nil
	}
	if n.Kind == ScalarNode && n.Tag == TagInt {
		if p, err := coreInt(n.Text); err == nil && p >= 0 && p <= 65535 {
			return uint16(p), nil
		}
	}
	return 0, fieldInternalPort.invalid(n, fieldInternalPort.form)
}

func (d *decoder) readFiles(exports Node) (*FilesExport, *diag.Diagnostic) {
	b, ok, bad := block(exports, "exports.files")
	if !ok || bad != nil {
		return nil, bad
	}
	d.warnUnknown(b, "exports.files", "root", "mode", "max_bytes")
	root, bad := fieldFilesRoot.root(b)
	if bad != nil {
		return nil, bad
	}
	mode, ok := b.get(fieldFilesMode.key())
	if !ok {
		return nil, fieldFilesMode.missing(b)
	}
	if mode.Kind != ScalarNode || mode.Tag != TagStr || Mode(mode.Text) != ReadOnly {
		return nil, fieldFilesMode.invalid(mode, fieldFilesMode.form)
	}
	maxBytes, bad := fieldFilesMaxBytes.byteCount(b)
	if bad != nil {
		return nil, bad
	}
	return &FilesExport{Root: root, Mode: ReadOnly, MaxBytes: maxBytes}, nil
}

func (d *decoder) readPeerFiles(exports Node) (*PeerFilesExport, *diag.Diagnostic) {
	b, ok, bad := block(exports, "exports.peer_files")
	if !ok || bad != nil {
		return nil, bad
	}
	d.warnUnknown(b, "exports.peer_files", "root", "max_ttl", "max_bytes")
	root, bad := fieldPeerRoot.root(b)
	if bad != nil {
		return nil, bad
	}
	p := &PeerFilesExport{Root: root, MaxTTL: defaultMaxTTL}
	if n, ok := b.get(fieldPeerMaxTTL.key()); ok {
		ttl, err := durations.node(n)
		if err != nil {
			return nil, fieldPeerMaxTTL.invalid(n, err.Error())
		}
		p.MaxTTL, p.MaxTTLDeclared = time.Duration(ttl), true
	}
	if p.MaxBytes, bad = fieldPeerMaxBytes.byteCount(b); bad != nil {
		return nil, bad
	}
	return p, nil
}

func (d *decoder) readPeerFetch(capabilities Node) (*PeerFetch, *diag.Diagnostic) {
	b, ok, bad := block(capabilities, "capabilities.peer_fetch")
	if !ok || bad != nil {
		return nil, bad
	}
	d.warnUnknown(b, "capabilities.peer_fetch", "allow")
	f := fieldPeerFetchAllow
	list, ok, bad := f.stringList(b)
	switch {
	case bad != nil:
		return nil, bad
	case !ok:
		return nil, f.missing(b)
	case len(list.Items) == 0:
		return nil, f.invalid(list, f.form)
	}
	allow := make([]destination.Destination, len(list.Items))
	for i, it := range list.Items {
		dest, err := destination.Parse(it.Text)
		if err != nil {
			return nil, f.refuse(it, f.form, notADestination(f, i, it, err))
		}
		allow[i] = dest
	}
	return &PeerFetch{Allow: allow}, nil
}

// networkDestinations parses the capabilities.network.allow entries, already known to be
// strings: the E-CAP-001 check.
func networkDestinations(items []Node) ([]destination.Destination, *diag.Diagnostic) {
	allow := make([]destination.Destination, len(items))
	for i, it := range items {
		dest, err := destination.Parse(it.Text)
		if err != nil {
			return nil, &diag.Diagnostic{
				Code:    diag.NetworkAllowInvalid,
				Message: notADestination(fieldNetworkAllow, i, it, err) + at(it),
				Hint:    "write each destination as host, host:port or http(s)://host[:port] (IPv6 in brackets); wildcards, paths, queries and userinfo are not allowed",
			}
		}
		allow[i] = dest
	}
	return allow, nil
}

func notADestination(f field, i int, it Node, err error) string {
	return fmt.Sprintf("%s[%d] %q is not a network destination: it %v", f.path, i, it.Text, err)
}

// warnUnknown records a W-SEC-019 warning for every key of the block b (at path) not in known.
func (d *decoder) warnUnknown(b Node, path string, known ...string) {
	for _, e := range b.Entries {
		if !slices.Contains(known, e.Key) {
			d.warnings = append(d.warnings, diag.Warning{
				Code:    diag.UnknownKey,
				Key:     path + "." + e.Key,
				Message: fmt.Sprintf("unknown key %s.%s%s is ignored", path, e.Key, lineSuffix(e.Line)),
			})
		}
	}
}

// block returns the mapping at path (dotted) beneath parent. ok is false when it is absent
// or null; anything else that is not a mapping is an E-MAN-003.
func block(parent Node, path string) (b Node, ok bool, bad *diag.Diagnostic) {
	n, ok := parent.get(path[strings.LastIndex(path, ".")+1:])
	if !ok {
		return Node{}, false, nil
	}
	if n.Kind != MappingNode {
		return Node{}, false, &diag.Diagnostic{
			Code:    diag.ManifestInvalidField,
			Message: path + " must be a mapping; got " + n.describe() + at(n),
			Hint:    "write the keys of " + path + " indented beneath it, or remove it",
		}
	}
	return n, true, nil
}

// field is one manifest key the rules check: its dotted path, the form it accepts (as it
// follows the name in a diagnostic) and a value of that form for the hint.
type field struct {
	path    string
	form    string
	example string
}

// key is the field's own name inside its block.
func (f field) key() string { return f.path[strings.LastIndex(f.path, ".")+1:] }

// invalid reports that the value n breaks the rule why.
func (f field) invalid(n Node, why string) *diag.Diagnostic {
	return f.refuse(n, why, "got "+n.describe())
}

// refuse reports that the field breaks the rule why, with detail saying what was found.
func (f field) refuse(n Node, why, detail string) *diag.Diagnostic {
	return &diag.Diagnostic{
		Code:    diag.ManifestInvalidField,
		Message: f.path + " " + why + "; " + detail + at(n),
		Hint:    "set " + f.path + " to a value such as " + f.example,
	}
}

// missing reports that the field is absent from its declared block b.
func (f field) missing(b Node) *diag.Diagnostic {
	block := f.path[:strings.LastIndex(f.path, ".")]
	return &diag.Diagnostic{
		Code:    diag.ManifestInvalidField,
		Message: f.path + " is missing: it is required when " + block + " is declared, and " + f.form + at(b),
		Hint:    "add " + f.path + ", such as " + f.example + ", or remove " + block,
	}
}

// root reads the field as a required export root.
func (f field) root(b Node) (Root, *diag.Diagnostic) {
	n, ok := b.get(f.key())
	if !ok {
		return Root{}, f.missing(b)
	}
	if n.Kind != ScalarNode || n.Tag != TagStr {
		return Root{}, f.invalid(n, f.form)
	}
	r, err := ParseRoot(n.Text)
	if err != nil {
		return Root{}, f.invalid(n, err.Error())
	}
	return r, nil
}

// byteCount reads the field as an optional byte count, 10Mi when absent.
func (f field) byteCount(b Node) (ByteCount, *diag.Diagnostic) {
	n, ok := b.get(f.key())
	if !ok {
		return defaultMaxBytes, nil
	}
	v, err := byteCounts.node(n)
	if err != nil {
		return ByteCount{}, f.invalid(n, err.Error())
	}
	return ByteCount{v}, nil
}

// stringList reads the field as an optional list whose items are all strings. ok is false
// when the field is absent or null.
func (f field) stringList(b Node) (list Node, ok bool, bad *diag.Diagnostic) {
	n, ok := b.get(f.key())
	if !ok {
		return Node{}, false, nil
	}
	if n.Kind != SequenceNode {
		return Node{}, false, f.invalid(n, f.form)
	}
	for i, it := range n.Items {
		if it.Kind != ScalarNode || it.Tag != TagStr {
			return Node{}, false, f.refuse(it, f.form, fmt.Sprintf("%s[%d] is %s", f.path, i, it.describe()))
		}
	}
	return n, true, nil
}

// node reads a quantity from a scalar: a YAML integer counts bare units, a string is parsed
// as text, anything else is not the form.
func (q quantity) node(n Node) (int64, error) {
	switch {
	case n.Kind == ScalarNode && n.Tag == TagStr:
		return q.parse(n.Text, false)
	case n.Kind == ScalarNode && n.Tag == TagInt:
		return q.parseInt(n.Text)
	}
	return 0, q.formError()
}

// at is " (line N)" for a node whose line is known.
func at(n Node) string { return lineSuffix(n.Line) }

// lineSuffix is " (line N)", or nothing when the line is unknown (0).
func lineSuffix(line int) string {
	if line == 0 {
		return ""
	}
	return fmt.Sprintf(" (line %d)", line)
}
