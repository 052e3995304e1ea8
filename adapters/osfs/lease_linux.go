package osfs

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/internal/eintr"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
)

// Leases is the ports.ReadLeases of the files an FS opens: read leases (fcntl F_SETLEASE
// F_RDLCK), each held by a duplicate of the descriptor the FS opened the file with, which
// shares its open file description and so its lease, and outlives the FS's close of the
// file (docs/decisions/0175-the-listing-hash-cache-holds-read-leases.md).
//
// The kernel breaks a read lease when anyone opens the file for writing or truncates it: it
// signals the lease's owner and makes the writer's open wait until the lease is given up, for
// at most /proc/sys/fs/lease-break-time (45 s by default). Each lease's owner is a thread of
// Leases' own (F_SETOWN_EX), and its signal a real-time one that carries the descriptor
// (F_SETSIG), which that thread, blocking it, reads through a signalfd: it gives up exactly
// the broken lease, whatever the number held, and the writer's open goes on (measured in
// docs/operator-guide.md, "Listing cost"). Should the signal reach the process another way
// (the kernel's signal queue full, when it sends SIGIO instead; a break in the instant before
// the owner is set), Leases asks every lease it holds whether it is still unbroken
// (F_GETLEASE).
//
// A lease does not stop what changes a file's attributes and not its bytes (utimensat,
// chmod, chown, a link or unlink of a name, a rename), so Leases also watches each leased
// inode with one inotify instance of its own (leasewatch_linux.go): the watch is added
// through the lease's descriptor (/proc/self/fd/N), so it is on exactly the leased inode,
// whatever names it has, and shared, counted, by every lease of that inode. Sync reads the
// queued events without waiting (the kernel queues an event before the system call that
// made it returns), and each moves its watch's count (Changes); an overflowed queue, or a
// change of the process's mount table (/proc/self/mountinfo, polled), moves every count.
//
// What it guarantees:
//
//   - A lease is taken on the descriptor the file's bytes are then read from, before they
//     are read, and only when no writable open or shared writable mapping of the inode
//     exists: the kernel refuses it otherwise (EAGAIN, reported as ports.ErrOpenForWriting).
//   - Held is true only while no open for writing of the file can have succeeded, and no
//     truncation been made, since the lease was taken. It asks the kernel (F_GETLEASE, which
//     answers F_UNLCK once a break has begun) unless the kernel said F_RDLCK less than half
//     of /proc/sys/fs/lease-break-time ago (Trust): a break begun since then still holds the
//     writer back, since only Leases giving the lease up, or lease-break-time passing from
//     the break's start, lets it through, and Leases gives a lease up under the lease's own
//     lock, which Held takes too. A lease Leases gave up, or that was released, reports
//     false: its descriptor is closed once, under that lock, and never asked again, so a
//     descriptor number the process reuses is never taken for this lease.
//   - At most Limit leases are held at once; beyond that Lease refuses, and the file is
//     treated as one that cannot be leased.
//   - Every SweepEvery, a lease whose file no longer has a name (fstat: no link left) is
//     given up.
//   - A watched lease's Changes moves, by the end of the next Sync, after any change to its
//     inode's times, mode, owner, link count or bytes and any rename of it, completed through
//     any name before that Sync began, and after any overflow or mount. A lease whose watch
//     could not be added (no /proc, ENOSPC past max_user_watches, the limit below), or whose
//     watch the kernel removed, reports itself unwatched, and proves nothing by its count.
//
// What it does not guarantee:
//
//   - A held descriptor pins its file's blocks: a leased file that is deleted keeps its
//     space until its lease is released (by the next listing, which no longer lists it) or
//     given up by the sweep, up to SweepEvery later; each lease also holds one of the
//     process's descriptors and a little kernel memory.
//   - A writer's open for writing of a leased file waits for Leases to handle the signal:
//     a fraction of a millisecond while the process runs, but up to lease-break-time when
//     the process is stopped (SIGSTOP, a frozen cgroup) or starved. An open for writing with
//     O_NONBLOCK fails with EWOULDBLOCK (EAGAIN) instead of waiting, and breaks the lease.
//   - A lease proves nothing about a file changed without an open through this kernel: a
//     network or FUSE filesystem changed by its server, or the block device written
//     beneath the filesystem. Such filesystems mostly refuse leases; where one grants them,
//     it is trusted.
//   - A lease needs the file to be the process's own (its owner is the effective uid) or
//     CAP_LEASE; any other file is refused.
//   - The trust is half of lease-break-time as it was when Leases was opened: lowering it
//     while the service runs, below twice the time Held trusts an answer, lets a writer
//     through a break before Held has asked again.
//   - SIGIO and signal 40 (leaseSignal) are the process's: nothing else in it may use them.
//   - Each watched inode costs an inotify watch of the service's user (up to about 1 KiB of
//     kernel memory, by the kernel's own reckoning, which counts the inode the lease pins
//     anyway) and counts against /proc/sys/fs/inotify/max_user_watches, which the
//     agent, running as the same user, shares: Leases watches at most half of it, and the
//     leases beyond are unwatched.
//   - A change the kernel reports to no inotify watch is not counted: the inode flags
//     (chattr, FS_IOC_SETFLAGS) move its change time and nothing a listing reports. A
//     network or FUSE filesystem changed by its server reports nothing either, as it breaks
//     no lease.
//
// Leases is safe for concurrent use.
type Leases struct {
	mu    sync.Mutex
	held  map[int]*lease // by descriptor
	limit int
	// trust is how long Held believes the kernel's F_RDLCK without asking again: half of
	// lease-break-time, or zero (always ask) when it cannot be read.
	trust time.Duration

	// watches watches each leased inode for the changes a lease does not stop (Changes).
	watches *watches

	// tid is the thread the leases signal; it reads breaks until stop is closed.
	tid     int
	signals chan os.Signal // SIGIO and leaseSignal sent to the process
	stop    chan struct{}
	done    sync.WaitGroup
	closing sync.Once
}

// leaseSignal is the real-time signal a broken lease sends to Leases' thread; SIGRTMIN is 34
// under Go, which leaves every signal from there to 64 to os/signal and to the process.
const leaseSignal = unix.Signal(40)

var _ ports.ReadLeases = (*Leases)(nil)

// LeaseOptions configure OpenLeases.
type LeaseOptions struct {
	// Limit is the most leases held at once; zero means LeaseLimit().
	Limit int
	// SweepEvery is how often leases of files that lost their last name are given up; zero
	// means every minute.
	SweepEvery time.Duration
}

// LeaseLimit is how many leases a Leases holds at most by default: half the process's
// descriptor limit (RLIMIT_NOFILE, which the Go runtime raises to its hard limit at start),
// and never more than a listing lists (resolve.MaxEntries), so that the descriptors the
// leases hold leave the other half to connections, listings and the spool.
func LeaseLimit() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return int(min(rl.Cur/2, uint64(resolve.MaxEntries)))
}

// ErrLeasesUnavailable is why OpenLeases refuses: the service cannot take read leases on the
// export's files here.
var ErrLeasesUnavailable = errors.New("read leases are not available")

// OpenLeases starts Leases' thread and its handling of signals and returns the leases of fs's
// files, or an error wrapping ErrLeasesUnavailable that says why the service cannot take
// them: the kernel refuses a read lease on a file the service makes in session (leases
// disabled in /proc/sys/fs/leases-enable, or a filesystem without them), or the process
// neither owns the workdir nor has CAP_LEASE, so that it could not lease the files an agent
// writes there. The caller must Close it.
func OpenLeases(fs *FS, session *SessionDir, opts LeaseOptions) (*Leases, error) {
	if err := canLeaseIn(fs.wd.fd); err != nil {
		return nil, err
	}
	if err := probeLease(int(session.dir.Fd())); err != nil {
		return nil, err
	}
	if opts.Limit == 0 {
		opts.Limit = LeaseLimit()
	}
	if opts.SweepEvery <= 0 {
		opts.SweepEvery = time.Minute
	}
	l := &Leases{
		held: map[int]*lease{}, limit: opts.Limit, trust: breakTime() / 2,
		signals: make(chan os.Signal, 1), stop: make(chan struct{}),
	}
	tid := make(chan error, 1)
	l.done.Add(2)
	go l.catchBreaks(tid)
	if err := <-tid; err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLeasesUnavailable, err)
	}
	l.watches = openWatches()
	signal.Notify(l.signals, syscall.SIGIO, leaseSignal)
	go l.serve(opts.SweepEvery)
	return l, nil
}

// breakTime is /proc/sys/fs/lease-break-time: how long the kernel makes a writer wait for a
// lease to be given up before it removes the lease itself; zero when it cannot be read.
func breakTime() time.Duration {
	return time.Duration(procCount("/proc/sys/fs/lease-break-time")) * time.Second
}

// procCount is the count a /proc/sys file holds; zero when it cannot be read, or is negative.
func procCount(path string) int {
	text, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(text)))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// capLease is CAP_LEASE's bit in the first word of the capability sets.
const capLease = 1 << unix.CAP_LEASE

// canLeaseIn refuses unless the process could lease files like the directory wd: it owns it
// (an agent running as the service's user writes files the service owns), or it has
// CAP_LEASE.
func canLeaseIn(wd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(wd, &st); err != nil {
		return fmt.Errorf("%w: stating the workdir: %v", ErrLeasesUnavailable, err)
	}
	if int(st.Uid) == unix.Geteuid() {
		return nil
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err == nil && data[0].Effective&capLease != 0 {
		return nil
	}
	return fmt.Errorf("%w: the workdir belongs to uid %d, the service runs as uid %d without CAP_LEASE",
		ErrLeasesUnavailable, st.Uid, unix.Geteuid())
}

// probeLease takes and gives up a read lease on a file it makes in dir, the session's own
// directory, and removes; one an earlier process of the same pid left there is removed first.
func probeLease(dir int) error {
	name := ".lease-probe-" + strconv.Itoa(os.Getpid())
	unlinkAt(dir, name)
	fd, err := eintr.Retry(func() (int, error) {
		return unix.Openat(dir, name, unix.O_RDONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	})
	if err != nil {
		return fmt.Errorf("%w: making a file in the session directory: %v", ErrLeasesUnavailable, err)
	}
	defer unlinkAt(dir, name)
	defer unix.Close(fd)
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		return fmt.Errorf("%w: the kernel refused a read lease in the session directory "+
			"(/proc/sys/fs/leases-enable, or the filesystem): %v", ErrLeasesUnavailable, err)
	}
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
	return nil
}

// errNotOurs refuses a file another ExportFS opened.
var errNotOurs = errors.New("osfs: not a file an osfs.FS opened")

// errLeaseLimit refuses a lease beyond the limit.
var errLeaseLimit = errors.New("osfs: the most read leases the service holds are held")

// Lease implements ports.ReadLeases for a file f an FS opened.
func (l *Leases) Lease(f ports.File) (ports.Lease, error) {
	of, ok := f.(*file)
	if !ok || of.fd < 0 {
		return nil, errNotOurs
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.held) >= l.limit {
		return nil, errLeaseLimit
	}
	fd, err := unix.FcntlInt(uintptr(of.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("osfs: duplicating a descriptor to lease: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETSIG, int(leaseSignal)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("osfs: the signal of a read lease: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EAGAIN) {
			return nil, ports.ErrOpenForWriting
		}
		return nil, fmt.Errorf("osfs: a read lease: %w", err)
	}
	// F_SETLEASE made the process the owner; a break before this reaches the process, and
	// serve then checks every lease.
	if err := setOwnerThread(fd, l.tid); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("osfs: the owner of a read lease: %w", err)
	}
	x := &lease{owner: l, fd: fd, checked: time.Now(), watch: l.watches.add(fd)}
	l.held[fd] = x
	return x, nil
}

// Sync implements ports.ReadLeases: it reads every event the leased inodes' watches queued,
// without waiting for any, and polls the mount table.
func (l *Leases) Sync() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watches.sync()
}

// fOwnerEx is struct f_owner_ex; ownerTID is F_OWNER_TID.
type fOwnerEx struct{ typ, pid int32 }

const ownerTID = 0

// setOwnerThread makes thread tid the owner of the open file description of fd: the one
// its signals go to (F_SETOWN_EX, F_OWNER_TID).
func setOwnerThread(fd, tid int) error {
	owner := fOwnerEx{typ: ownerTID, pid: int32(tid)}
	if _, _, errno := unix.Syscall(unix.SYS_FCNTL, uintptr(fd), unix.F_SETOWN_EX, uintptr(unsafe.Pointer(&owner))); errno != 0 {
		return errno
	}
	return nil
}

// catchBreaks is the thread leases signal: locked to its goroutine and never unlocked, so
// that it ends with it, it blocks leaseSignal and reads each one from a signalfd, giving up
// the lease whose descriptor the signal names, until stop is closed (Close wakes it with a
// leaseSignal of its own). It reports on started whether it runs.
func (l *Leases) catchBreaks(started chan<- error) {
	defer l.done.Done()
	runtime.LockOSThread()
	var set unix.Sigset_t
	set.Val[(leaseSignal-1)/64] |= 1 << ((leaseSignal - 1) % 64)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
		started <- fmt.Errorf("blocking signal %d: %w", leaseSignal, err)
		return
	}
	sfd, err := unix.Signalfd(-1, &set, unix.SFD_CLOEXEC)
	if err != nil {
		started <- fmt.Errorf("a signalfd: %w", err)
		return
	}
	defer unix.Close(sfd)
	l.tid = unix.Gettid()
	started <- nil
	var infos [16]unix.SignalfdSiginfo
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&infos[0])), unsafe.Sizeof(infos))
	for {
		n, err := eintr.Retry(func() (int, error) { return unix.Read(sfd, buf) })
		if err != nil {
			return // a signalfd read fails only when the descriptor is bad
		}
		select {
		case <-l.stop:
			return
		default:
		}
		for _, info := range infos[:n/int(unsafe.Sizeof(infos[0]))] {
			l.giveUpFD(int(info.Fd))
		}
	}
}

// giveUpFD gives up the lease held by fd if it is broken. The signal that named fd may be
// older than the lease fd holds now; that lease is then unbroken, and kept.
func (l *Leases) giveUpFD(fd int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if x, ok := l.held[fd]; ok && x.broken() {
		delete(l.held, fd)
		x.close()
	}
}

// Count is how many leases are held now.
func (l *Leases) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// serve checks every lease at each SIGIO or leaseSignal that reaches the process rather than
// Leases' thread, and gives up those of nameless files every sweepEvery, until Close.
func (l *Leases) serve(sweepEvery time.Duration) {
	defer l.done.Done()
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-l.signals:
			l.giveUp((*lease).broken)
		case <-sweep.C:
			l.giveUp((*lease).nameless)
		case <-l.stop:
			return
		}
	}
}

// giveUp closes every held lease for which drop says true.
func (l *Leases) giveUp(drop func(*lease) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for fd, x := range l.held {
		if drop(x) {
			delete(l.held, fd)
			x.close()
		}
	}
}

// Close stops Leases' thread and its handling of signals, and gives up every lease; calls
// after the first do nothing.
func (l *Leases) Close() error {
	l.closing.Do(func() {
		signal.Stop(l.signals)
		close(l.stop)
		_ = unix.Tgkill(os.Getpid(), l.tid, leaseSignal) // wakes catchBreaks
		l.done.Wait()
		l.giveUp(func(*lease) bool { return true })
		l.mu.Lock()
		l.watches.close()
		l.mu.Unlock()
	})
	return nil
}

// lease is one held read lease: a descriptor of its own on the leased open file description.
type lease struct {
	owner   *Leases
	mu      sync.Mutex
	fd      int       // -1 once closed
	checked time.Time // when the kernel last said the lease is unbroken
	watch   *watch    // nil when the inode is not watched
}

// Held implements ports.Lease: the kernel's answer, or its last one within the owner's trust.
func (x *lease) Held() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.fd < 0 {
		return false
	}
	if time.Since(x.checked) < x.owner.trust {
		return true
	}
	if !x.unbroken() {
		return false
	}
	x.checked = time.Now()
	return true
}

// unbroken asks the kernel whether the lease is unbroken: F_GETLEASE says F_RDLCK, not
// F_UNLCK as it does from the moment a break begins. x.mu must be held.
func (x *lease) unbroken() bool {
	t, err := unix.FcntlInt(uintptr(x.fd), unix.F_GETLEASE, 0)
	return err == nil && t == unix.F_RDLCK
}

// Changes implements ports.Lease: the count of the inode's watch, moved by every overflow
// and mount; a lease given up or released is unwatched.
func (x *lease) Changes() (uint64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.fd < 0 {
		return 0, false
	}
	return x.owner.watches.changes(x.watch)
}

// Release implements ports.Lease.
func (x *lease) Release() {
	x.owner.mu.Lock()
	defer x.owner.mu.Unlock()
	x.mu.Lock()
	fd := x.fd
	x.mu.Unlock()
	if fd >= 0 && x.owner.held[fd] == x {
		delete(x.owner.held, fd)
	}
	x.close()
}

// broken reports whether a writer broke the lease, asking the kernel whatever Held trusts:
// it decides whether a break's writer is let through.
func (x *lease) broken() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.fd < 0 || !x.unbroken()
}

// nameless reports whether the leased file has no name left, or cannot be stated.
func (x *lease) nameless() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	var st unix.Stat_t
	return x.fd < 0 || unix.Fstat(x.fd, &st) != nil || st.Nlink == 0
}

// close closes the descriptor once, and lets its watch go. The owner's mu must be held.
func (x *lease) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.fd >= 0 {
		unix.Close(x.fd)
		x.fd = -1
		x.owner.watches.release(x.watch)
	}
}
