package ports

// PeerInbox stores fetched files under the workdir's peer-in/ directory, so that a fetched
// file appears whole and verified or not at all, even if the process is killed at any instant.
type PeerInbox interface {
	// Stage creates peer-in/ if needed and returns a Landing that becomes peer-in/<name> on
	// Commit, with that path relative to the workdir ("peer-in/<name>"). name must be one
	// path component: not empty, "." or "..", and without "/" or NUL. Until Commit the file
	// has no name (or, where the filesystem cannot make such a file, a temp name
	// peer-in/.<handleID>-<random>.part). If peer-in exists as anything but a directory (a
	// symlink included) Stage fails and nothing is written through it. Every error, the
	// Landing's included, is an io_error refusal without a host path.
	Stage(handleID, name string) (landing Landing, stored string, err error)
}
