package operator

import (
	"slices"

	"github.com/resplane/resplane/ports"
)

// ListingDiff is what changed between two listings of one export, each list in bytewise
// order of the listed paths.
type ListingDiff struct {
	// Added are the paths the new listing has and the old one does not.
	Added []string
	// Changed are the paths both have, with another sha256 or size.
	Changed []string
	// Removed are the paths the old listing has and the new one does not.
	Removed []string
}

// Empty reports whether nothing changed.
func (d ListingDiff) Empty() bool { return len(d.Added)+len(d.Changed)+len(d.Removed) == 0 }

// SetChanged reports whether the set of listed paths changed (a file appeared or went away),
// rather than only the content of files both listings have.
func (d ListingDiff) SetChanged() bool { return len(d.Added)+len(d.Removed) > 0 }

// DiffListings compares two listings' entries by path: a path whose sha256 or size differs
// is changed; a path listed twice counts by its last entry, as a lookup by path would find
// it. A rename is a removal and an addition. An entry's mtime alone is not a change: the
// sha256 says whether the bytes are the same.
func DiffListings(old, next []ports.RemoteEntry) ListingDiff {
	before := make(map[string]ports.RemoteEntry, len(old))
	for _, e := range old {
		before[e.Path] = e
	}
	after := make(map[string]ports.RemoteEntry, len(next))
	for _, e := range next {
		after[e.Path] = e
	}
	var d ListingDiff
	for path, e := range after {
		was, found := before[path]
		switch {
		case !found:
			d.Added = append(d.Added, path)
		case was.SHA256 != e.SHA256 || was.Size != e.Size:
			d.Changed = append(d.Changed, path)
		}
	}
	for path := range before {
		if _, found := after[path]; !found {
			d.Removed = append(d.Removed, path)
		}
	}
	slices.Sort(d.Added)
	slices.Sort(d.Changed)
	slices.Sort(d.Removed)
	return d
}
