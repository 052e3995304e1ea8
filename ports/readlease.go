package ports

import "errors"

// ReadLeases takes read leases on files an ExportFS opened, so that a listing can reuse a
// file's hash with proof that no writer has held the file since the hash was taken
// (docs/operator-guide.md, "Listing cost"). A file's times are no such proof: a write
// through a shared writable mapping whose page is already dirty moves neither.
//
// A read lease on a file cannot be taken while any writable open or shared writable mapping
// of it exists, and it is broken by any later open of the file for writing (a truncate
// included), which waits until the lease is given up. Held reports false from the moment
// such an open can have succeeded: an implementation may go on reporting true while the
// open still waits (no byte of the file can have changed), but lets the open go on promptly,
// and never lets a lease it gave up or released report true.
//
// An implementation is safe for concurrent use.
type ReadLeases interface {
	// Lease takes a read lease on the inode f is open on, before any byte of f is read. The
	// lease outlives f: it is held until Release, or until a writer breaks it. f is not
	// read, moved or closed. The error wraps ErrOpenForWriting when f is open for writing
	// or mapped writable elsewhere (then no lease can be proof of anything now); any other
	// error (the file belongs to another user, the filesystem or the limit of leases held
	// does not allow one) says only that this file cannot be leased.
	Lease(f File) (Lease, error)
	// Sync brings every lease's Changes up to date: a change to a leased file that completed
	// before Sync was called has moved that lease's Changes by the time Sync returns. A
	// listing calls it once, before it reads any lease's Changes.
	Sync()
}

// Lease is one read lease ReadLeases took. It is safe for concurrent use.
type Lease interface {
	// Held reports whether the lease still holds every writer back: no open for writing of
	// its file (and no truncation) can have succeeded since it was taken. It is false once
	// the lease was given up to a writer, or released.
	Held() bool
	// Changes reports a count of the changes made to the leased inode, and whether the lease
	// is watched at all. Two counts read while it is watched are equal only if no change to
	// the inode's bytes or attributes (its times, mode, owner or link count; a rename of it)
	// completed after the first was read and before a Sync that began before the second was
	// read. So a reader that read a count before a stat of the inode, and reads the same
	// count after a later Sync, knows that stat still holds without taking it again. The
	// inode a lease pins is still linked under the name it was stated by only as far as the
	// caller checks that name. An unwatched lease (watched false, its count meaningless)
	// proves nothing of the kind, nor does a lease that is not Held; a watched lease may
	// become unwatched, never the reverse.
	Changes() (count uint64, watched bool)
	// Release gives the lease up; it may be called more than once, and by any goroutine.
	Release()
}

// ErrOpenForWriting is why ReadLeases.Lease refuses a file that a writer holds open or
// mapped writable.
var ErrOpenForWriting = errors.New("the file is open for writing")
