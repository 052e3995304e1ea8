package memfs

import (
	"fmt"
	"sync"

	"github.com/resplane/resplane/ports"
)

// Leases is the ports.ReadLeases of the files an FS opens, modelling the kernel's read
// leases: a lease is refused while an OpenForWriting holds the file, and broken by every
// later OpenForWriting and Rewrite of it. Its zero value is not usable; call FS.Leases.
type Leases struct{ fs *FS }

var _ ports.ReadLeases = Leases{}

// Leases returns the leases of m's files.
func (m *FS) Leases() Leases { return Leases{fs: m} }

// Lease implements ports.ReadLeases.
func (l Leases) Lease(f ports.File) (ports.Lease, error) {
	of, ok := f.(*file)
	if !ok || of.closed {
		return nil, fmt.Errorf("memfs: not an open file of this FS")
	}
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	if of.n.writers > 0 {
		return nil, ports.ErrOpenForWriting
	}
	if _, ok := l.fs.synced[of.n]; !ok {
		l.fs.synced[of.n] = of.n.changes // the watch starts now
	}
	return &lease{fs: l.fs, n: of.n, breaks: of.n.breaks}, nil
}

// Sync implements ports.ReadLeases: every leased file's changes and every overflow so far
// become what Changes reports.
func (l Leases) Sync() {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	for n := range l.fs.synced {
		l.fs.synced[n] = n.changes
	}
	l.fs.epoch += l.fs.overflows
	l.fs.overflows = 0
}

// Overflow models the kernel's event queue overflowing: from the next Sync on, every lease's
// Changes has moved.
func (l Leases) Overflow() {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	l.fs.overflows++
}

// lease is held while its file has not been broken since it was taken, until Release.
type lease struct {
	fs       *FS
	n        *node
	breaks   int // the file's breaks when the lease was taken
	mu       sync.Mutex
	released bool
}

func (x *lease) Held() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.fs.mu.RLock()
	defer x.fs.mu.RUnlock()
	return !x.released && x.n.breaks == x.breaks
}

// Changes implements ports.Lease: the file's changes and the overflows as of the latest
// Sync; a released lease is unwatched.
func (x *lease) Changes() (uint64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.fs.mu.RLock()
	defer x.fs.mu.RUnlock()
	if x.released {
		return 0, false
	}
	return x.fs.synced[x.n] + x.fs.epoch, true
}

func (x *lease) Release() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.released = true
}

// OpenForWriting opens the regular file at p for writing, as an agent's open(O_WRONLY)
// does: it breaks the file's leases, and no lease can be taken until the returned close is
// called.
func (m *FS) OpenForWriting(p string) (closeFile func(), err error) {
	var n *node
	err = m.update("open for writing", p, func(_ *node, _ string, found *node) error {
		if found.kind != kindFile {
			return fmt.Errorf("memfs: open for writing %s: not a regular file", p)
		}
		n = found
		n.writers++
		n.breaks++
		return nil
	})
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			n.writers--
			m.mu.Unlock()
		})
	}, nil
}

// WriteMapped changes the bytes of the regular file at p in place as a write through a
// shared writable mapping whose page is already dirty does: neither time moves, and no
// lease is broken (the mapping's writer broke them when it opened the file). The file must
// be held by an OpenForWriting, as a mapping needs a writable open.
func (m *FS) WriteMapped(p string, data []byte) error {
	return m.update("write mapped", p, func(_ *node, _ string, n *node) error {
		if n.kind != kindFile || n.writers == 0 {
			return fmt.Errorf("memfs: write mapped %s: not a regular file open for writing", p)
		}
		n.data = append([]byte(nil), data...)
		return nil
	})
}
