package ports

import "io"

// PeerInbox stores fetched files under the workdir's peer-in/ directory, so that a fetched
// file appears whole and verified or not at all, even if the process is killed at any instant.
//
// Stage creates peer-in/ if needed and a new file in it that has no name until Commit (or,
// where the filesystem cannot make such a file, a temp file peer-in/.<handleID>-<random>.part).
// If peer-in exists as anything but a directory (a symlink included) Stage fails and nothing
// is written through it. Every error is an io_error refusal without a host path.
type PeerInbox interface {
	Stage(handleID string) (StagedFile, error)
}

// StagedFile is a file being filled. Exactly one of Commit or Discard must be called.
type StagedFile interface {
	io.Writer
	// Commit flushes the file to disk and gives it the name peer-in/<name> atomically,
	// replacing any earlier file of that name, and returns the path relative to the workdir
	// ("peer-in/<name>"). name must be a single safe path component. On failure the file is
	// removed.
	Commit(name string) (string, error)
	// Discard removes the file.
	Discard()
}
