package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/resplane/resplane/domain/manifest"
)

// parseYAML reads one YAML document into the manifest package's neutral tree, resolving
// plain scalars by the YAML 1.2 core schema rather than by yaml.v3's own resolver (which
// still reads 1_000 as an integer and dates as timestamps). An empty document is null. A
// duplicate key in any mapping, a second document, an alias cycle and an unsupported tag are
// errors, like invalid syntax; each error names the line when it is known.
func parseYAML(data []byte) (manifest.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return manifest.Node{Kind: manifest.NullNode}, nil
	} else if err != nil {
		return manifest.Node{}, yamlSyntax(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return manifest.Node{}, fmt.Errorf("line %d: a second YAML document starts here; expected exactly one", next.Line)
	case !errors.Is(err, io.EOF):
		return manifest.Node{}, yamlSyntax(err)
	}
	c := converter{anchored: map[*yaml.Node]manifest.Node{}, open: map[*yaml.Node]bool{}}
	return c.node(doc.Content[0])
}

// yamlSyntax drops the library's "yaml: " prefix; what is left starts with "line N:" when
// the parser knew the line.
func yamlSyntax(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

// converter turns yaml.v3 nodes into manifest nodes. An anchored node is converted once and
// shared by every alias to it, so aliases cost no more than the text that defines them;
// open holds the anchored nodes being converted, so an alias inside its own anchor is caught.
type converter struct {
	anchored map[*yaml.Node]manifest.Node
	open     map[*yaml.Node]bool
}

func (c *converter) node(n *yaml.Node) (manifest.Node, error) {
	if n.Kind == yaml.AliasNode {
		if c.open[n.Alias] {
			return manifest.Node{}, fmt.Errorf("line %d: alias *%s is used inside its own anchor", n.Line, n.Value)
		}
		return c.node(n.Alias)
	}
	if n.Anchor == "" {
		return c.build(n)
	}
	if out, ok := c.anchored[n]; ok {
		return out, nil
	}
	c.open[n] = true
	out, err := c.build(n)
	delete(c.open, n)
	c.anchored[n] = out
	return out, err
}

func (c *converter) build(n *yaml.Node) (manifest.Node, error) {
	switch n.Kind {
	case yaml.MappingNode:
		return c.mapping(n)
	case yaml.SequenceNode:
		out := manifest.Node{Kind: manifest.SequenceNode, Line: n.Line, Items: make([]manifest.Node, len(n.Content))}
		for i, item := range n.Content {
			var err error
			if out.Items[i], err = c.node(item); err != nil {
				return manifest.Node{}, err
			}
		}
		return out, nil
	}
	return scalar(n)
}

func (c *converter) mapping(n *yaml.Node) (manifest.Node, error) {
	out := manifest.Node{Kind: manifest.MappingNode, Line: n.Line}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return manifest.Node{}, fmt.Errorf("line %d: a mapping key must be a scalar", k.Line)
		}
		if first, dup := seen[k.Value]; dup {
			return manifest.Node{}, fmt.Errorf("line %d: duplicate key %q, already defined at line %d", k.Line, k.Value, first)
		}
		seen[k.Value] = k.Line
		value, err := c.node(v)
		if err != nil {
			return manifest.Node{}, err
		}
		out.Entries = append(out.Entries, manifest.Entry{Key: k.Value, Line: k.Line, Value: value})
	}
	return out, nil
}

// The YAML 1.2 core schema (§10.3.2): how a plain scalar's text decides its type. Only the
// true/false family is boolean, so yes, no, on and off are strings; 1:30 is a string.
var (
	coreNull  = regexp.MustCompile(`^(?:null|Null|NULL|~|)$`)
	coreBool  = regexp.MustCompile(`^(?:true|True|TRUE|false|False|FALSE)$`)
	coreInt   = regexp.MustCompile(`^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$`)
	coreFloat = regexp.MustCompile(`^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
)

// coreTag is the core-schema tag of plain text.
func coreTag(text string) string {
	switch {
	case coreNull.MatchString(text):
		return "!!null"
	case coreBool.MatchString(text):
		return "!!bool"
	case coreInt.MatchString(text):
		return "!!int"
	case coreFloat.MatchString(text):
		return "!!float"
	}
	return "!!str"
}

// scalar converts a scalar; a null becomes a NullNode.
func scalar(n *yaml.Node) (manifest.Node, error) {
	tag, err := scalarTag(n)
	if err != nil {
		return manifest.Node{}, err
	}
	if tag == "!!null" {
		return manifest.Node{Kind: manifest.NullNode, Line: n.Line}, nil
	}
	return manifest.Node{Kind: manifest.ScalarNode, Tag: scalarTags[tag], Text: n.Value, Line: n.Line}, nil
}

// scalarTag decides a scalar's core tag. Quoted and block scalars are strings; a plain one is
// typed by the core schema. An explicit core tag is honoured when the text fits it (!!str
// always does); any other explicit tag is refused.
func scalarTag(n *yaml.Node) (string, error) {
	explicit := n.Style&yaml.TaggedStyle != 0
	quoted := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	_, core := scalarTags[n.Tag]
	switch {
	case explicit && n.Tag == "!!str", !explicit && quoted:
		return "!!str", nil
	case !explicit:
		return coreTag(n.Value), nil
	case !core && n.Tag != "!!null":
		return "", fmt.Errorf("line %d: the tag %s is not supported", n.Line, n.Tag)
	case !fits(n.Value, n.Tag):
		return "", fmt.Errorf("line %d: %q is not a valid %s", n.Line, n.Value, n.Tag)
	}
	return n.Tag, nil
}

// fits reports whether text is a valid value of the core tag: its own type, or an integer
// written where a float is asked for.
func fits(text, tag string) bool {
	t := coreTag(text)
	return t == tag || (tag == "!!float" && t == "!!int")
}

// scalarTags maps the core tags of non-null scalars to the tree's tags.
var scalarTags = map[string]manifest.Tag{
	"!!str": manifest.TagStr, "!!int": manifest.TagInt, "!!float": manifest.TagFloat, "!!bool": manifest.TagBool,
}
