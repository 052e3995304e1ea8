package manifest

import "strconv"

// Kind is what a Node holds.
type Kind int

// The four kinds of node. A YAML null (written "null", "~" or nothing at all) is a NullNode.
const (
	NullNode Kind = iota
	ScalarNode
	MappingNode
	SequenceNode
)

// Tag is the core-schema type of a scalar, decided by the adapter that parsed the text
// (YAML 1.2 core schema: only true/false are booleans; "yes" and "1:30" are strings).
type Tag int

// The scalar types the manifest rules distinguish.
const (
	TagStr Tag = iota
	TagInt
	TagFloat
	TagBool
)

// Node is a format-neutral manifest document: what Decode reads. It keeps what the rules
// need and a generic decoder would lose: a scalar's text exactly as written, null apart from
// an empty mapping, and the source line of every node.
type Node struct {
	Kind Kind
	// Tag is the scalar's type; meaningful for a ScalarNode only.
	Tag Tag
	// Text is the scalar's content as written (after unquoting); ScalarNode only.
	Text string
	// Line is the 1-based source line the node starts on, 0 when unknown.
	Line int
	// Entries are a MappingNode's entries in document order; keys are unique.
	Entries []Entry
	// Items are a SequenceNode's items in document order.
	Items []Node
}

// Entry is one key and its value in a mapping.
type Entry struct {
	Key string
	// Line is the 1-based source line of the key, 0 when unknown.
	Line  int
	Value Node
}

// get returns the value under key when n is a mapping that has it and the value is not null:
// a key written with nothing under it counts as absent.
func (n Node) get(key string) (Node, bool) {
	if n.Kind != MappingNode {
		return Node{}, false
	}
	for _, e := range n.Entries {
		if e.Key == key {
			return e.Value, e.Value.Kind != NullNode
		}
	}
	return Node{}, false
}

// describe says what a node is, for "got ..." in a diagnostic.
func (n Node) describe() string {
	switch n.Kind {
	case MappingNode:
		return "a mapping"
	case SequenceNode:
		if len(n.Items) == 0 {
			return "an empty list"
		}
		return "a list"
	case ScalarNode:
		if n.Tag == TagStr {
			return strconv.Quote(n.Text)
		}
		return n.Text
	}
	return "null"
}
