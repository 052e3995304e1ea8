package ports

import (
	"io"
	"time"
)

// Landing is a file being filled, so that it appears at its destination whole and verified,
// or not at all, whenever the process stops: a file fetched from a peer into peer-in/
// (PeerInbox), a file a pull mirrors into the operator's directory (LocalMirror), a download
// of `resplane files get`. Its destination is fixed when it is made. It is used by one
// goroutine.
//
// Exactly one of Commit or Discard must be called, once; a Discard after a failed Commit
// does nothing. Every error is a *refusal.Refusal whose message names no host path: io_error for
// a failure of the local filesystem, or a code the maker of the landing documents (a
// LocalMirror's unsafe_path).
type Landing interface {
	// Write appends to the file; nothing of it is visible at the destination before Commit.
	io.Writer
	// Commit flushes the file, sets its modification time to modTime (unless it is zero,
	// which leaves the time of the landing) and gives it its destination's name in one step,
	// replacing an earlier file of that name without writing through it: a reader sees the
	// earlier file or the whole new one, never a mix. On failure the file is removed and the
	// destination is as it was.
	Commit(modTime time.Time) error
	// Discard removes the file. After Commit or a first Discard it does nothing.
	Discard()
}
