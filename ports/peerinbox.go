package ports

import "io"

// PeerInbox stores fetched files under the workdir's peer-in/ directory, so that a fetched
// file appears whole and verified or not at all.
//
// Stage creates peer-in/ if needed and a new temp file peer-in/.<handleID>-<random>.part in
// it. If peer-in exists as anything but a directory (a symlink included) Stage fails and
// nothing is written through it. Every error is an io_error refusal without a host path.
type PeerInbox interface {
	Stage(handleID string) (StagedFile, error)
}

// StagedFile is a temp file being filled. Exactly one of Commit or Discard must be called.
type StagedFile interface {
	io.Writer
	// Commit flushes the file to disk and renames it atomically to peer-in/<name>, replacing
	// any earlier file of that name, and returns the path relative to the workdir
	// ("peer-in/<name>"). name must be a single safe path component. On failure the temp file
	// is removed.
	Commit(name string) (string, error)
	// Discard removes the temp file.
	Discard()
}
