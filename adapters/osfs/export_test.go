package osfs

import "golang.org/x/sys/unix"

// UsePartFiles makes in stage .part files, as it does where the filesystem refuses unnamed
// files, so that the tests cover that scheme on any filesystem.
func UsePartFiles(in *Inbox) { in.named.Store(true) }

// OwnLeasesByTheProcess makes the process, rather than Leases' thread, the owner of every
// lease held, as F_SETLEASE leaves it in the instant before Leases sets the thread: a break
// then signals the process.
func OwnLeasesByTheProcess(l *Leases) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for fd := range l.held {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETOWN, unix.Getpid()); err != nil {
			panic(err)
		}
	}
}

// WatchFD is the inotify instance l watches its leased inodes with; -1 when there is none.
func WatchFD(l *Leases) int { return l.watches.fd }
