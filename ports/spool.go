package ports

import "io"

// Spool holds private snapshots of files outside the process's memory, so that the bytes of a
// large response wait for a slow client in a file rather than in a buffer (docs/operator-guide.md,
// "Memory and connection bounds").
//
// A snapshot has no name in any directory from the moment it exists: nobody can open it by a
// path, and a crash or kill -9 at any instant leaves nothing behind. Its bytes are only ever
// written by Fill, so nothing else can change them between hashing and sending.
//
// Every error a Spool or a Snapshot returns is a *refusal.Refusal with code io_error whose
// message names no host path.
type Spool interface {
	// Create returns a new, empty snapshot. The caller must Close it.
	Create() (Snapshot, error)
}

// Snapshot is one private snapshot: bytes appended by Fill, then read back. It is used by one
// goroutine at a time.
type Snapshot interface {
	// Fill appends up to n bytes read from src, from src's current offset on, and returns how
	// many it appended: fewer than n only when src reached its end. Where src is a File that
	// also implements syscall.Conn (its bytes are in a kernel file), Fill copies them in the
	// kernel, without passing them through the process's memory. An error reading src is
	// returned as src returned it.
	Fill(src io.Reader, n int64) (int64, error)
	// ReadAt reads the bytes filled so far, as io.ReaderAt does: nothing past them.
	io.ReaderAt
	// Content returns the bytes filled, from the first to the last and nothing past them, to
	// be read once, after the last Fill. Where the snapshot is a kernel file, the reader is
	// an *io.LimitedReader over a reader that implements syscall.Conn: the shape net/http
	// sends with sendfile(2).
	Content() io.Reader
	// Close releases the snapshot; its bytes are gone for the caller.
	io.Closer
}
