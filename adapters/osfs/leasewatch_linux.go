package osfs

import (
	"errors"
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/internal/eintr"
)

// watches is what Leases watches its leased inodes with (docs/decisions/0183-a-warm-listing-
// trusts-an-inotify-watch-on-the-leased-inode.md): one inotify instance, with one watch per
// leased inode, added through the lease's own descriptor (/proc/self/fd/N resolves to the
// inode it is open on, whatever names it has), and the mount table, whose changes move every
// count. Events are read only by Sync, so nothing runs between listings.
type watches struct {
	fd     int // the inotify instance; -1 when there is none, and every lease is unwatched
	mounts int // /proc/self/mountinfo, polled for POLLPRI; -1 when fd is
	limit  int // the most inodes watched at once
	// byWD is every watch added and not removed, by descriptor; buf is what Sync reads
	// events into. Both are guarded by Leases.mu.
	byWD map[int32]*watch
	buf  []byte
	// epoch moves at every overflow of the event queue and every change of the mount table:
	// every watch then counts as changed.
	epoch atomic.Uint64
}

// watch is one inotify watch of a leased inode, shared by every lease held on it.
type watch struct {
	wd   int32
	refs int // leases on it, guarded by Leases.mu
	// changes counts the events read for wd; gone is set once the kernel removed the watch.
	changes atomic.Uint64
	gone    atomic.Bool
}

// watchMask is every change to a leased inode a listing's stat would see: its times, mode,
// owner and link count (IN_ATTRIB), its bytes (IN_MODIFY, IN_CLOSE_WRITE), a rename of it
// (IN_MOVE_SELF, which sets its change time) and its end (IN_DELETE_SELF).
const watchMask = unix.IN_ATTRIB | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF

// syncReads bounds the reads one Sync makes: a queue still not empty after that many is
// taken for an overflow, so that a writer making events as fast as Sync reads them cannot
// hold a listing up.
const syncReads = 16

// openWatches makes the inotify instance and opens the mount table; when either fails, every
// lease is unwatched, and the listing states each file as it does without watches.
func openWatches() *watches {
	ws := &watches{fd: -1, mounts: -1, byWD: map[int32]*watch{}}
	ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return ws
	}
	mounts, err := eintr.Retry(func() (int, error) {
		return unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		unix.Close(ifd)
		return ws
	}
	ws.fd, ws.mounts, ws.limit = ifd, mounts, watchLimit()
	ws.buf = make([]byte, 64<<10)
	return ws
}

// watchLimit is how many inodes Leases watches at most: half of the user's inotify watches
// (/proc/sys/fs/inotify/max_user_watches), which the agent, running as the same user,
// shares; none when it cannot be read.
func watchLimit() int { return procCount("/proc/sys/fs/inotify/max_user_watches") / 2 }

// add watches the inode fd is open on and returns its watch, or nil when it cannot be
// watched (no instance, the limit reached, the kernel refusing: ENOSPC past
// max_user_watches, no /proc). Leases.mu must be held.
func (ws *watches) add(fd int) *watch {
	if ws.fd < 0 || len(ws.byWD) >= ws.limit {
		return nil
	}
	wd, err := unix.InotifyAddWatch(ws.fd, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
	if err != nil {
		return nil
	}
	w := ws.byWD[int32(wd)]
	if w == nil {
		w = &watch{wd: int32(wd)}
		ws.byWD[w.wd] = w
	}
	w.refs++
	return w
}

// release lets one lease of w (nil for none) go, and removes the watch after the last.
// Leases.mu must be held.
func (ws *watches) release(w *watch) {
	if w == nil {
		return
	}
	if w.refs--; w.refs > 0 {
		return
	}
	if ws.byWD[w.wd] == w {
		delete(ws.byWD, w.wd)
	}
	if !w.gone.Load() {
		_, _ = unix.InotifyRmWatch(ws.fd, uint32(w.wd))
	}
}

// sync reads every event queued, until the queue is empty, and polls the mount table.
// Leases.mu must be held.
func (ws *watches) sync() {
	if ws.fd < 0 {
		return
	}
	drained := false
	for range syncReads {
		n, err := eintr.Retry(func() (int, error) { return unix.Read(ws.fd, ws.buf) })
		if errors.Is(err, unix.EAGAIN) {
			drained = true
			break
		}
		if err != nil || n <= 0 {
			break
		}
		ws.count(ws.buf[:n])
	}
	if !drained {
		ws.epoch.Add(1) // events may have been left unread
	}
	fds := []unix.PollFd{{Fd: int32(ws.mounts), Events: unix.POLLPRI}}
	if _, err := eintr.Retry(func() (int, error) { return unix.Poll(fds, 0) }); err != nil || fds[0].Revents != 0 {
		ws.epoch.Add(1) // a mount or unmount, or the table could not be asked
	}
}

// inotifyEvent is the size of struct inotify_event without its name.
const inotifyEvent = int(unsafe.Sizeof(unix.InotifyEvent{}))

// count moves the count of the watch each event in buf names, and the epoch at an overflow.
func (ws *watches) count(buf []byte) {
	for off := 0; off+inotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		off += inotifyEvent + int(ev.Len)
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			ws.epoch.Add(1)
			continue
		}
		w := ws.byWD[ev.Wd]
		if w == nil {
			continue // a watch removed since
		}
		w.changes.Add(1)
		if ev.Mask&unix.IN_IGNORED != 0 {
			w.gone.Store(true)
			delete(ws.byWD, ev.Wd)
		}
	}
}

// changes is w's count, moved by the epoch too; watched is false for no watch, or one the
// kernel removed.
func (ws *watches) changes(w *watch) (count uint64, watched bool) {
	if w == nil || w.gone.Load() {
		return 0, false
	}
	return w.changes.Load() + ws.epoch.Load(), true
}

// close closes the instance and the mount table.
func (ws *watches) close() {
	if ws.fd >= 0 {
		unix.Close(ws.fd)
		unix.Close(ws.mounts)
		ws.fd, ws.mounts = -1, -1
	}
}
