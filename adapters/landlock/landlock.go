package landlock

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	golandlock "github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/internal/eintr"
)

// Mode is how serve confines itself (--confine).
type Mode string

// The modes of --confine.
const (
	// Auto confines the process with the newest ABI the kernel offers, and runs unconfined
	// where the kernel has no Landlock.
	Auto Mode = "auto"
	// Required is Auto, except that a kernel without Landlock is an error.
	Required Mode = "required"
	// Off does not confine the process.
	Off Mode = "off"
)

// ErrUnavailable is Confine's error under Required on a kernel without Landlock.
var ErrUnavailable = errors.New("this kernel offers no Landlock (it needs Linux 5.13 or later with landlock among the enabled LSMs)")

// Policy is what the confined process may still reach. Every path is absolute and is not
// resolved through symlinks by the caller.
type Policy struct {
	// Workdir may be read beneath.
	Workdir string
	// Writable are directories that may be read and written beneath. One beneath Workdir is
	// looked up from the workdir without following symlinks; one elsewhere is the operator's
	// and is looked up by its path. Each must be found so: one that is missing, or beneath
	// Workdir but not a real directory, is Confine's error, since the service would write
	// there unconfined or not at all.
	Writable []string
	// Optional are writable directories that get their rule only when found as Writable
	// ones are (peer-in/, which the agent may have removed or replaced: then every fetch
	// fails, and nothing else does).
	Optional []string
	// Readable are directories outside the workdir that may be read beneath, looked up by
	// their paths (the TLS pair's). A missing one gets no rule.
	Readable []string
	// ProcessStats lets the process read its own /proc entries and /proc/stat, which the
	// Prometheus process collector reads at every scrape (CPU, memory, descriptors, start
	// time). Off unless metrics are served.
	ProcessStats bool
}

// Service is what serve reaches once confined, as absolute paths not resolved through
// symlinks: the workdir it serves, the files and directories it writes, and whether it serves
// metrics. Policy turns it into the service's confinement (docs/operator-guide.md,
// "Confinement").
type Service struct {
	Workdir    string
	SessionDir string
	// TracePath and ControlPath are the trace file and the control socket; their directories
	// are written.
	TracePath, ControlPath string
	SpoolDir               string
	// Inbox is peer-in/ when fetch-peer-file is offered, "" otherwise.
	Inbox string
	// Metrics is whether the metrics listener is served.
	Metrics bool
	// Readable are the directories the TLS pair is read from (tlscert.Pair.Dirs), empty
	// without TLS: reloading the pair opens its files again behind the wall.
	Readable []string
}

// Policy is the service's confinement: reading beneath the workdir and the TLS pair's
// directories; reading and writing beneath the session directory, the directories of the trace
// and the control socket, the spool and, when fetch-peer-file is offered, peer-in; its own
// /proc entries when metrics are served.
func (s Service) Policy() Policy {
	writable := []string{s.SessionDir, filepath.Dir(s.TracePath), filepath.Dir(s.ControlPath), s.SpoolDir}
	var optional []string
	if s.Inbox != "" {
		optional = append(optional, s.Inbox)
	}
	return Policy{Workdir: s.Workdir, Writable: writable, Optional: optional, Readable: s.Readable, ProcessStats: s.Metrics}
}

// Exposing returns the writable directories of p that are the workdir or contain it (by their
// cleaned texts): beneath them the workdir, export roots included, is writable too.
func (p Policy) Exposing() []string {
	var dirs []string
	for _, dir := range p.Writable {
		if _, ok := beneath(dir, p.Workdir); ok {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// Result is the confinement achieved: the Landlock ABI enforced, 0 for none.
type Result struct {
	ABI int
}

// String is the value of "confinement" in the ready line and GET /v1/status:
// "landlock-v<ABI>", or "none".
func (r Result) String() string {
	if r.ABI == 0 {
		return "none"
	}
	return "landlock-v" + strconv.Itoa(r.ABI)
}

// configs are the library's configurations by ABI: configs[n-1] restricts everything ABI n
// can restrict.
var configs = []golandlock.Config{
	golandlock.V1, golandlock.V2, golandlock.V3, golandlock.V4, golandlock.V5, golandlock.V6,
	golandlock.V7, golandlock.V8, golandlock.V9, golandlock.V10, golandlock.V11,
}

// absentEnv is the test hook that makes ABI report 0 (see the package documentation).
const absentEnv = "RESPLANE_TEST_LANDLOCK_ABSENT"

// ABI returns the Landlock ABI Confine would enforce: the kernel's, capped at the newest this
// package knows; 0 when the kernel has no Landlock.
func ABI() int {
	if os.Getenv(absentEnv) == "1" {
		return 0
	}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return 0
	}
	return min(abi, len(configs))
}

// The rights granted: reading beneath the workdir and the resolver's files; reading and
// writing files, and making and removing directories, beneath a writable directory. Nothing
// else of what the ABI handles is granted anywhere.
const (
	readDir   = ll.AccessFSReadFile | ll.AccessFSReadDir
	readFile  = ll.AccessFSReadFile
	readWrite = readDir | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSMakeReg |
		ll.AccessFSRemoveFile | ll.AccessFSMakeDir | ll.AccessFSRemoveDir
)

// resolverFiles are what Go's DNS resolver reads again whenever it finds them changed (at most
// every 5 s), so they must stay readable.
var resolverFiles = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf"}

// Confine applies p under mode and returns what was achieved. Off does nothing. Auto and
// Required confine the process when the kernel has Landlock; without it Auto achieves none
// and Required fails with ErrUnavailable, having changed nothing. Any other failure is an
// error naming what could not be done, also under Auto: an error means the process is not
// confined and must not serve.
func Confine(mode Mode, p Policy) (Result, error) {
	switch mode {
	case Off:
		return Result{}, nil
	case Auto, Required:
	default:
		return Result{}, fmt.Errorf("unknown confinement mode %q (auto, required or off)", mode)
	}
	abi := ABI()
	if abi == 0 {
		if mode == Required {
			return Result{}, ErrUnavailable
		}
		return Result{}, nil
	}
	anchors, err := anchor(p)
	if err != nil {
		return Result{}, err
	}
	defer anchors.close()
	preload()
	config := configs[abi-1]
	// TCP is not restricted: docs/decisions/0030-landlock-confines-files-and-ipc-not-tcp.md
	config.HandledAccessNet = 0
	handled := config.HandledAccessFS
	rules := []golandlock.Rule{
		golandlock.PathAccess(readDir&handled, anchors.workdir),
		golandlock.PathAccess(readFile&handled, resolverFiles...).IgnoreIfMissing(),
	}
	if len(anchors.writable) > 0 {
		rules = append(rules, golandlock.PathAccess(readWrite&handled, anchors.writable...))
	}
	if len(anchors.readable) > 0 {
		rules = append(rules, golandlock.PathAccess(readDir&handled, anchors.readable...))
	}
	if anchors.process != "" {
		rules = append(rules, golandlock.PathAccess(readDir&handled, anchors.process),
			golandlock.PathAccess(readFile&handled, procStat))
	}
	if err := config.Restrict(rules...); err != nil {
		return Result{}, fmt.Errorf("confining the process with Landlock v%d: %w", abi, err)
	}
	return Result{ABI: abi}, nil
}

// preload loads what Go would otherwise load lazily from files the rules do not name: the
// system TLS roots (read once, then kept) and the local time zone (read once, at the first
// local time formatted, such as a log line's). And it makes name lookups use Go's own
// resolver, which reads only resolverFiles; the cgo resolver would load NSS modules and read
// files no rule can name in advance.
func preload() {
	_, _ = x509.SystemCertPool()
	_ = time.Local.String()
	net.DefaultResolver.PreferGo = true
}

// procStat is the kernel's own statistics, where the process collector finds the boot time
// that dates the process's start.
const procStat = "/proc/stat"

// anchors are the descriptors the rules are anchored on, as /proc/self/fd/<n> paths.
type anchors struct {
	fds      []int
	workdir  string
	writable []string
	readable []string
	process  string // this process's /proc/<pid> directory, when Policy.ProcessStats
}

func (a *anchors) close() {
	for _, fd := range a.fds {
		_ = unix.Close(fd)
	}
}

// add keeps fd open until close and returns the path that names it.
func (a *anchors) add(fd int) string {
	a.fds = append(a.fds, fd)
	return "/proc/self/fd/" + strconv.Itoa(fd)
}

// anchor opens the workdir, each writable directory and each readable directory of p (see
// Policy for how each is looked up) and returns their descriptors. The error names the workdir
// or the writable directory that cannot be opened; an optional or readable directory that
// cannot be opened is left out.
func anchor(p Policy) (*anchors, error) {
	a := &anchors{}
	wd, err := openDir(unix.AT_FDCWD, p.Workdir, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the workdir %s for its Landlock rule: %w", p.Workdir, err)
	}
	a.workdir = a.add(wd)
	seen := map[string]bool{}
	for i, dir := range slices.Concat(p.Writable, p.Optional) {
		dir = filepath.Clean(dir)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		fd, err := openWritable(wd, p.Workdir, dir)
		if err != nil && i < len(p.Writable) {
			a.close()
			return nil, fmt.Errorf("the writable directory %s cannot anchor its Landlock rule "+
				"(it must be a directory, reached beneath the workdir without a symlink): %w", dir, err)
		}
		if err != nil {
			continue
		}
		a.writable = append(a.writable, a.add(fd))
	}
	for _, dir := range p.Readable {
		if fd, err := openDir(unix.AT_FDCWD, filepath.Clean(dir), 0); err == nil {
			a.readable = append(a.readable, a.add(fd))
		}
	}
	if p.ProcessStats {
		// /proc/self names this process's own directory, /proc/<pid>, which is what the rule
		// is anchored on: no other process's entries become readable.
		fd, err := openDir(unix.AT_FDCWD, "/proc/self", 0)
		if err != nil {
			a.close()
			return nil, fmt.Errorf("opening /proc/self for the metrics' Landlock rule: %w", err)
		}
		a.process = a.add(fd)
	}
	return a, nil
}

// openWritable opens dir: relative to the workdir's descriptor wd, one component at a time
// without following symlinks, when dir lies beneath workdir (by its text); by its own path
// otherwise.
func openWritable(wd int, workdir, dir string) (int, error) {
	rel, ok := beneath(workdir, dir)
	if !ok {
		return openDir(unix.AT_FDCWD, dir, 0)
	}
	cur := wd
	for _, name := range strings.Split(rel, "/") {
		next, err := openDir(cur, name, unix.O_NOFOLLOW)
		if cur != wd {
			_ = unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// openDir opens name relative to dirfd as an O_PATH directory descriptor.
func openDir(dirfd int, name string, flags int) (int, error) {
	return eintr.Retry(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|flags, 0)
	})
}

// beneath reports whether dir lies beneath workdir or is workdir itself, comparing the cleaned
// texts, and returns dir relative to workdir ("." for workdir itself).
func beneath(workdir, dir string) (string, bool) {
	rel, err := filepath.Rel(filepath.Clean(workdir), filepath.Clean(dir))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}
