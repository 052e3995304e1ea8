// Package manifest reads the part of a capsule manifest (murmur.yaml) that resplane owns
// (docs/manifest.md) into values that can only exist valid.
//
// The package knows no YAML: an adapter parses the file into a Node tree that keeps each
// scalar's text as written, null apart from {}, and source lines, and Decode applies every
// rule to that tree, in the documented order, reporting the first failure as a launch
// diagnostic.
package manifest

import (
	"time"

	"github.com/resplane/resplane/domain/destination"
)

// Manifest is what resplane takes from a capsule manifest, every default applied.
type Manifest struct {
	// Name is the capsule's name, trimmed and non-empty.
	Name string
	// Version is the version as written (a number keeps its text: 1.0 is "1.0"); default 0.0.0.
	Version string
	// InternalPort is network.internal_port; 0 when undeclared, which listens the same way as a
	// declared 0: on any free port.
	InternalPort uint16
	// Files is exports.files, nil when undeclared.
	Files *FilesExport
	// PeerFiles is exports.peer_files, nil when undeclared.
	PeerFiles *PeerFilesExport
	// NetworkAllow is capabilities.network.allow, empty when undeclared.
	NetworkAllow []destination.Destination
	// PeerFetch is capabilities.peer_fetch, nil when undeclared.
	PeerFetch *PeerFetch
	// AfterTask is lifecycle.after_task as declared, default exit. A command-line override may
	// replace it; the resolved value is what the launch checks use.
	AfterTask AfterTask
}

// Planes lists the declared planes in their documented order (docs/http-api.md, "The agent
// card"): "files", then "peer_files"; empty, not nil, when neither is declared.
func (m Manifest) Planes() []string {
	planes := []string{}
	if m.Files != nil {
		planes = append(planes, "files")
	}
	if m.PeerFiles != nil {
		planes = append(planes, "peer_files")
	}
	return planes
}

// DeclaresPeerPlane says whether either peer-plane grant is declared: exports.peer_files
// (this capsule shares) or capabilities.peer_fetch (it fetches).
func (m Manifest) DeclaresPeerPlane() bool { return m.PeerFiles != nil || m.PeerFetch != nil }

// Roots maps each declared export root's field ("exports.files.root",
// "exports.peer_files.root") to the root.
func (m Manifest) Roots() map[string]string {
	roots := map[string]string{}
	if m.Files != nil {
		roots["exports.files.root"] = m.Files.Root.String()
	}
	if m.PeerFiles != nil {
		roots["exports.peer_files.root"] = m.PeerFiles.Root.String()
	}
	return roots
}

// FilesExport is the operator plane's grant.
type FilesExport struct {
	Root     Root
	Mode     Mode
	MaxBytes ByteCount
}

// PeerFilesExport is the peer plane's grant.
type PeerFilesExport struct {
	Root Root
	// MaxTTL is the longest lifetime a minted handle may have: max_ttl when declared, else
	// one hour.
	MaxTTL time.Duration
	// MaxTTLDeclared reports whether max_ttl was written, which a sleeping capsule requires.
	MaxTTLDeclared bool
	MaxBytes       ByteCount
}

// PeerFetch is the fetch-peer-file grant: the only list the tool's peer is checked against.
type PeerFetch struct {
	// Allow holds at least one destination.
	Allow []destination.Destination
}

// defaultMaxTTL is exports.peer_files.max_ttl when undeclared (allowed only with exit).
const defaultMaxTTL = time.Hour
