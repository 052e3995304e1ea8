package config

import (
	"strconv"
	"strings"
	"testing"

	"github.com/resplane/resplane/domain/manifest"
)

// only returns the value of the single top-level key of a parsed document.
func only(t *testing.T, src string) manifest.Node {
	t.Helper()
	doc, err := parseYAML([]byte(src))
	if err != nil {
		t.Fatalf("parseYAML(%q): %v", src, err)
	}
	if doc.Kind != manifest.MappingNode || len(doc.Entries) != 1 {
		t.Fatalf("parseYAML(%q) = %+v, want a one-key mapping", src, doc)
	}
	return doc.Entries[0].Value
}

func TestPlainScalarsFollowTheYAML12CoreSchema(t *testing.T) {
	const str, integer, float, boolean = manifest.TagStr, manifest.TagInt, manifest.TagFloat, manifest.TagBool
	for _, tc := range []struct {
		src  string
		tag  manifest.Tag
		text string
	}{
		{"v: yes", str, "yes"},
		{"v: no", str, "no"},
		{"v: on", str, "on"},
		{"v: off", str, "off"},
		{"v: y", str, "y"},
		{"v: 1:30", str, "1:30"},
		{"v: 1_000", str, "1_000"},
		{"v: 0b101", str, "0b101"},
		{"v: 2001-12-14", str, "2001-12-14"},
		{"v: 010", integer, "010"},
		{"v: 0o17", integer, "0o17"},
		{"v: 0x1F", integer, "0x1F"},
		{"v: -42", integer, "-42"},
		{"v: +42", integer, "+42"},
		{"v: 1.0", float, "1.0"},
		{"v: 1e3", float, "1e3"},
		{"v: .inf", float, ".inf"},
		{"v: -.Inf", float, "-.Inf"},
		{"v: .NaN", float, ".NaN"},
		{"v: true", boolean, "true"},
		{"v: False", boolean, "False"},
		{"v: TRUE", boolean, "TRUE"},
		{"v: tRUE", str, "tRUE"},
		{`v: "90"`, str, "90"},
		{"v: '15m'", str, "15m"},
		{`v: "true"`, str, "true"},
		{"v: |\n  10Mi\n", str, "10Mi\n"},
		{"v: !!str 12", str, "12"},
		{"v: !!int 12", integer, "12"},
		{`v: !!int "12"`, integer, "12"},
		{"v: !!float 1", float, "1"},
		{"v:  spaced  ", str, "spaced"},
	} {
		n := only(t, tc.src)
		if n.Kind != manifest.ScalarNode || n.Tag != tc.tag || n.Text != tc.text {
			t.Errorf("%q: got kind %d tag %d text %q; want tag %d text %q", tc.src, n.Kind, n.Tag, n.Text, tc.tag, tc.text)
		}
	}
}

func TestNullIsNotAnEmptyMapping(t *testing.T) {
	for _, src := range []string{"v:", "v: null", "v: ~", "v: NULL", "v: !!null ''"} {
		if n := only(t, src); n.Kind != manifest.NullNode {
			t.Errorf("%q: kind %d, want null", src, n.Kind)
		}
	}
	if n := only(t, "v: {}"); n.Kind != manifest.MappingNode || len(n.Entries) != 0 {
		t.Errorf("{}: got %+v, want an empty mapping", n)
	}
	if n := only(t, "v: []"); n.Kind != manifest.SequenceNode || len(n.Items) != 0 {
		t.Errorf("[]: got %+v, want an empty list", n)
	}
}

func TestEmptyDocumentIsNull(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "---\n", "---\n...\n"} {
		doc, err := parseYAML([]byte(src))
		if err != nil || doc.Kind != manifest.NullNode {
			t.Errorf("%q: got %+v, %v; want null", src, doc, err)
		}
	}
}

func TestLinesAreKept(t *testing.T) {
	doc, err := parseYAML([]byte("name: r\nexports:\n  files:\n    root: out\n"))
	if err != nil {
		t.Fatal(err)
	}
	exports := doc.Entries[1]
	files := exports.Value.Entries[0]
	root := files.Value.Entries[0]
	if exports.Line != 2 || files.Line != 3 || root.Line != 4 || root.Value.Line != 4 {
		t.Errorf("lines: exports %d, files %d, root key %d, root value %d", exports.Line, files.Line, root.Line, root.Value.Line)
	}
}

func TestAliasesAreSharedNotCopied(t *testing.T) {
	doc, err := parseYAML([]byte("a: &x [1, 2]\nb: *x\nc: *x\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range doc.Entries {
		if e.Value.Kind != manifest.SequenceNode || len(e.Value.Items) != 2 || e.Value.Items[1].Text != "2" {
			t.Errorf("%s = %+v", e.Key, e.Value)
		}
	}
}

func TestAliasBombStaysLinear(t *testing.T) {
	var b strings.Builder
	b.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 40; i++ {
		b.WriteString("l" + strconv.Itoa(i) + ": &l" + strconv.Itoa(i) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*l" + strconv.Itoa(i-1))
		}
		b.WriteString("]\n")
	}
	if _, err := parseYAML([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidYAML(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"duplicate top-level key", "name: a\nversion: 1\nname: b\n", `line 3: duplicate key "name", already defined at line 1`},
		{"duplicate nested key", "exports:\n  files:\n    root: a\n    root: b\n", `line 4: duplicate key "root", already defined at line 3`},
		{"duplicate key spelled differently", "name: a\n\"name\": b\n", `duplicate key "name"`},
		{"duplicate in a flow mapping", "v: {a: 1, a: 2}\n", `duplicate key "a"`},
		{"syntax error", "name: a\n  bad: indent\n", "line 2"},
		{"unclosed quote", "name: \"a\n", "line"},
		{"tab indentation", "exports:\n\tfiles: x\n", "line"},
		{"second document", "name: a\n---\nname: b\n", "line 2: a second YAML document"},
		{"syntax error in a second document", "name: a\n---\n: : :\n  - [\n", "line"},
		{"alias inside its own anchor", "a: &x [1, *x]\n", "alias *x is used inside its own anchor"},
		{"unknown anchor", "a: *nope\n", "unknown anchor"},
		{"non-scalar key", "? [a, b]\n: c\n", "line 1: a mapping key must be a scalar"},
		{"custom tag", "v: !secret x\n", "the tag !secret is not supported"},
		{"timestamp tag", "v: !!timestamp 2001-12-14\n", "the tag !!timestamp is not supported"},
		{"core tag that does not fit", "v: !!int ten\n", `"ten" is not a valid !!int`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseYAML([]byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if strings.HasPrefix(err.Error(), "yaml: ") {
				t.Errorf("error %q keeps the library prefix", err)
			}
		})
	}
}
