package ports

import "errors"

// ReadLeases takes read leases on files an ExportFS opened, so that a listing can reuse a
// file's hash with proof that no writer has held the file since the hash was taken
// (docs/operator-guide.md, "Listing cost"). A file's times are no such proof: a write
// through a shared writable mapping whose page is already dirty moves neither.
//
// A read lease on a file cannot be taken while any writable open or shared writable mapping
// of it exists, and it is broken by any later open of the file for writing (a truncate
// included): from the moment that open starts, Held reports false. An implementation lets
// such an open go on promptly once the lease is broken, and never lets a lease it released
// report true.
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
}

// Lease is one read lease ReadLeases took. It is safe for concurrent use.
type Lease interface {
	// Held reports whether the lease is still unbroken: no open for writing of its file has
	// started since it was taken. It is false once the lease was broken or released.
	Held() bool
	// Release gives the lease up; it may be called more than once, and by any goroutine.
	Release()
}

// ErrOpenForWriting is why ReadLeases.Lease refuses a file that a writer holds open or
// mapped writable.
var ErrOpenForWriting = errors.New("the file is open for writing")
