package ports

// RootLocator inspects a declared export root at launch, for the E-CAP-007 check. It never
// creates anything.
type RootLocator interface {
	// Locate reports where root (relative to workdir) resolves. A workdir or root that resolves
	// to no place at all is reported as Exists false with a nil error: one that does not exist
	// yet, one whose path runs through something that is not a directory, and a symlink loop
	// (every request then refuses the loop). The error is reserved for other failures to
	// inspect a path, such as permission denied.
	Locate(workdir, root string) (RootLocation, error)
}

// RootLocation is what Locate found.
type RootLocation struct {
	// Exists reports whether the root exists (following symlinks).
	Exists bool
	// Inside reports whether the root's canonical path is the canonical workdir or beneath it.
	Inside bool
	// Resolved is the root's canonical absolute path, for the launch diagnostic only.
	Resolved string
	// Workdir is the workdir's canonical absolute path, for the launch diagnostic only.
	Workdir string
}
