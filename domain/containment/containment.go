// Package containment names the containment class a launching runtime achieved for a session
// and states the symlink rule each class implies (docs/operator-guide.md,
// "Containment classes and symlinks").
package containment

import "fmt"

// Class is the achieved containment class. It is reported on every successful response and
// decides how symlinks beneath an export root are treated.
type Class string

// The three classes, from weakest to strongest isolation of the agent's process.
const (
	Advisory Class = "advisory"
	Scoped   Class = "scoped"
	Sealed   Class = "sealed"
)

// Parse accepts exactly "advisory", "scoped" or "sealed".
func Parse(s string) (Class, error) {
	switch c := Class(s); c {
	case Advisory, Scoped, Sealed:
		return c, nil
	}
	return "", fmt.Errorf("containment class %q is not one of advisory, scoped, sealed", s)
}

// FollowsSymlinks reports whether symlinks beneath an export root are followed (sealed and
// advisory, always staying beneath the root) or refused wherever they appear (scoped). It
// fails closed: any other value, the zero Class included, refuses symlinks like scoped.
func (c Class) FollowsSymlinks() bool { return c == Advisory || c == Sealed }

// String returns the class name as it appears on the wire.
func (c Class) String() string { return string(c) }
