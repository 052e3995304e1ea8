package ports

import "github.com/resplane/resplane/domain/pathpolicy"

// LocalMirror is the directory a pull mirrors an export into (docs/operator-guide.md,
// "Pulling outputs"). Every path is relative to that directory and resolved beneath it one
// component at a time without following a symlink, so nothing can make an implementation
// read, write or delete outside it.
//
// Errors are *refusal.Refusal: unsafe_path when a component on the way is a symlink or not a
// directory, when the final name exists as anything but a regular file, or when the local
// filesystem refuses the name; io_error, naming no host path, for any other failure.
type LocalMirror interface {
	// Compare reports what is at rel: LocalMissing when nothing is (a missing directory on the
	// way included), LocalSame when it is a regular file of exactly size bytes whose sha256 is
	// sum (lowercase hex), LocalDifferent for any other regular file. It reads the file only
	// when its size is size.
	Compare(rel pathpolicy.RelPath, size int64, sum string) (LocalState, error)
	// Stage creates the missing directories on the way to rel and returns a Landing that
	// becomes rel on Commit: a new temp file beside it, in the same directory.
	Stage(rel pathpolicy.RelPath) (Landing, error)
	// Files lists every regular file beneath the directory, "/"-separated and relative to
	// it, in no particular order. Symlinks are neither listed nor descended.
	Files() ([]string, error)
	// Delete removes the regular file at rel. It refuses (unsafe_path) to remove anything
	// else, and a file already gone is not an error.
	Delete(rel pathpolicy.RelPath) error
}

// LocalState is what Compare found.
type LocalState int

// The states Compare reports.
const (
	LocalMissing LocalState = iota
	LocalSame
	LocalDifferent
)
