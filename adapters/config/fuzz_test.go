package config

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/diag"
	"github.com/resplane/resplane/domain/manifest"
)

// FuzzManifest runs arbitrary bytes through what LoadManifest does after reading the file: the
// YAML conversion, then manifest.Decode (docs/manifest.md). Nothing may panic, and:
//
//   - a YAML error is one message without the library's prefix (it becomes an E-MAN-002);
//   - every refusal is a diagnostic with one of Decode's codes, a message and a hint that
//     render as exactly two lines, and comes without warnings;
//   - every warning is a W-SEC-019 naming its dotted key;
//   - an accepted manifest, written back as YAML, decodes to the same manifest without warnings:
//     every value Decode returns passes Decode's own rules unchanged.
func FuzzManifest(f *testing.F) {
	f.Add([]byte(fullManifest))
	f.Add([]byte("name: a\nexports:\n  files: {}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := parseYAML(data)
		if err != nil {
			if msg := err.Error(); msg == "" || msg != strings.TrimSpace(msg) || strings.HasPrefix(msg, "yaml:") {
				t.Fatalf("YAML error %q: want a message without the library's prefix", msg)
			}
			return
		}
		m, warnings, bad := manifest.Decode(doc)
		if bad != nil {
			checkRefusal(t, bad, warnings)
			return
		}
		for _, w := range warnings {
			if w.Code != diag.UnknownKey || w.Key == "" || !strings.Contains(w.Message, w.Key) {
				t.Fatalf("warning %+v: want a W-SEC-019 naming its key", w)
			}
		}
		again, warnings, bad := manifest.Decode(reparse(t, m))
		if bad != nil {
			t.Fatalf("the accepted manifest %+v, written back, is refused: %s", m, bad.Render())
		}
		if len(warnings) != 0 || !reflect.DeepEqual(again, m) {
			t.Fatalf("written back, %+v\ndecodes to %+v (warnings %v)", m, again, warnings)
		}
	})
}

func checkRefusal(t *testing.T, bad *diag.Diagnostic, warnings []diag.Warning) {
	t.Helper()
	switch bad.Code {
	case diag.ManifestNameMissing, diag.ManifestInvalidField, diag.NetworkAllowInvalid:
	default:
		t.Fatalf("refusal with code %q: %s", bad.Code, bad.Message)
	}
	if bad.Message == "" || bad.Hint == "" || strings.Count(bad.Render(), "\n") != 2 {
		t.Fatalf("diagnostic %q: want a message and a hint on exactly two lines", bad.Render())
	}
	if warnings != nil {
		t.Fatalf("refusal %s came with warnings %v", bad.Code, warnings)
	}
}

// reparse writes m as YAML, every string double-quoted and every number a plain integer, and
// parses it back with parseYAML.
func reparse(t *testing.T, m manifest.Manifest) manifest.Node {
	t.Helper()
	doc := block("name", text(m.Name), "version", text(m.Version),
		"network", block("internal_port", number(int64(m.InternalPort))))
	exports := block()
	if fe := m.Files; fe != nil {
		add(exports, "files", block(
			"root", text(fe.Root.String()), "mode", text(string(fe.Mode)), "max_bytes", number(fe.MaxBytes.Int64())))
	}
	if pe := m.PeerFiles; pe != nil {
		peer := block("root", text(pe.Root.String()), "max_bytes", number(pe.MaxBytes.Int64()))
		if pe.MaxTTLDeclared {
			add(peer, "max_ttl", number(int64(pe.MaxTTL/time.Second)))
		}
		add(exports, "peer_files", peer)
	}
	capabilities := block("network", block("allow", list(m.NetworkAllow)))
	if pf := m.PeerFetch; pf != nil {
		add(capabilities, "peer_fetch", block("allow", list(pf.Allow)))
	}
	add(doc, "exports", exports)
	add(doc, "capabilities", capabilities)
	add(doc, "lifecycle", block("after_task", text(string(m.AfterTask))))
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatalf("write back %+v: %v", m, err)
	}
	parsed, err := parseYAML(out)
	if err != nil {
		t.Fatalf("the written-back manifest does not parse: %v\n%s", err, out)
	}
	return parsed
}

// block is a YAML mapping of alternating keys and values.
func block(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i < len(kv); i += 2 {
		add(n, kv[i].(string), kv[i+1].(*yaml.Node))
	}
	return n
}

// add appends the entry key: value to the mapping n.
func add(n *yaml.Node, key string, value *yaml.Node) {
	n.Content = append(n.Content, text(key), value)
}

func text(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: s}
}

func number(n int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(n, 10)}
}

func list(allow []destination.Destination) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode}
	for _, d := range allow {
		n.Content = append(n.Content, text(d.String()))
	}
	return n
}
