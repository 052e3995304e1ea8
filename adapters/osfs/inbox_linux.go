package osfs

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/internal/eintr"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
)

// InboxDir is the inbox directory, relative to the workdir.
const InboxDir = "peer-in"

// tempName matches the name of a temp file: .<handle id>-<16 hex>.part.
var tempName = regexp.MustCompile(`^\..+-[0-9a-f]{16}\.part$`)

// processStart is when this process started (this package's initialisation): a temp file last
// modified before it was left by an earlier process.
var processStart = time.Now()

// Inbox is the peer-in/ directory of one workdir (ports.PeerInbox): it stores the files
// fetch-peer-file receives, so that a fetched file appears whole and verified, or not at all,
// whenever the process stops, kill -9 included.
//
// What it guarantees:
//
//   - Every operation is relative to one descriptor of the workdir, opened once by OpenInbox,
//     and then to one descriptor of peer-in opened with O_NOFOLLOW|O_DIRECTORY per staged
//     file. If peer-in exists as anything but a real directory (a symlink to a directory
//     included) Stage fails and nothing is written through it; a peer-in swapped for a
//     symlink after Stage does not redirect the file either, because the file is created,
//     linked and renamed through the same directory descriptor.
//   - A staged file has no name: it is created with O_TMPFILE in peer-in (mode 0600), so a
//     crash at any instant while it is filled leaves nothing behind. Commit gives it its name
//     in one step (linkat through /proc/self/fd) when nothing has that name yet; otherwise it
//     links it to a temp name and renames that over the name, so a reader sees the earlier
//     file or the new one, never a mix; only a crash between those two steps leaves the temp
//     name behind.
//   - Where the filesystem or kernel refuses O_TMPFILE (EOPNOTSUPP, EISDIR, EINVAL, as the
//     spool and the operator's client take them too), or /proc/self/fd is missing, a staged
//     file is instead a new temp file peer-in/.<handle id>-<16 random hex>.part created with
//     O_CREAT|O_EXCL|O_NOFOLLOW and renamed into place by Commit.
//   - Every temp name is locked (flock) by the process that uses it. OpenInbox removes the
//     temp files earlier processes left: regular files with a temp name, last modified before
//     this process started and locked by no live process, found and removed through peer-in's
//     descriptor without following any link.
//   - Stage refuses a stored name that is not one path component before anything is
//     created, so no name can place a file outside peer-in.
//   - Commit flushes the file before naming it and flushes peer-in after. Every failure leaves
//     no temp file and no new peer-in/<name> behind and is an io_error refusal whose message
//     names no host path. A system call a signal interrupts is retried, as everywhere in this
//     package.
//
// What it does not guarantee: it does not guard against another process rewriting files
// inside peer-in/ after Commit, and it does not stop the workdir itself from being replaced
// after OpenInbox (the descriptor keeps pointing at the directory that was opened). A file
// the agent names like a temp file, modified before the process started and unlocked, is
// removed at start like one.
//
// An Inbox is safe for concurrent use.
type Inbox struct {
	workdir int
	// named is set once unnamed files cannot be used; Stage then makes .part files.
	named atomic.Bool
}

var _ ports.PeerInbox = (*Inbox)(nil)

// OpenInbox opens workdir (O_PATH|O_DIRECTORY), removes the temp files earlier processes
// left in its peer-in/, and returns its inbox. The error names the path; it is meant for the
// operator at startup.
func OpenInbox(workdir string) (*Inbox, error) {
	fd, err := eintr.Retry(func() (int, error) { return unix.Open(workdir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return nil, fmt.Errorf("opening the workdir %s for peer-in: %w", workdir, err)
	}
	in := &Inbox{workdir: fd}
	if _, err := os.Stat(procFD); err != nil {
		in.named.Store(true)
	}
	in.sweep()
	return in, nil
}

// Close releases the workdir descriptor. No Stage may be running or follow.
func (in *Inbox) Close() error {
	return unix.Close(in.workdir)
}

// Create creates peer-in (0700) when it is missing, so that it exists before the process
// confines itself and can be granted writes (docs/operator-guide.md, "Confinement"). It
// fails with an io_error refusal when peer-in is not a real directory or cannot be created.
func (in *Inbox) Create() error {
	dir, err := in.openDir()
	if err != nil {
		return err
	}
	return unix.Close(dir)
}

// openDir creates peer-in (0700) when it is missing and opens it for staging.
func (in *Inbox) openDir() (int, error) {
	if err := eintr.RetryErr(func() error { return unix.Mkdirat(in.workdir, InboxDir, 0o700) }); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, failed(inInbox, "peer-in could not be created", err)
	}
	dir, err := openDirAt(in.workdir, InboxDir)
	if err != nil {
		return -1, failed(inInbox, "peer-in is not a directory or cannot be opened", err)
	}
	return dir, nil
}

// Stage creates peer-in (0700) when it is missing and a new unnamed file in it for handleID
// (a .part file where unnamed files cannot be used), to become peer-in/<name>. It fails with
// an io_error refusal, having written nothing, when peer-in is not a real directory, handleID
// could not be part of a file name or name is not one.
func (in *Inbox) Stage(handleID, name string) (ports.Landing, string, error) {
	if strings.ContainsAny(handleID, "/\x00") {
		return nil, "", failed(inInbox, "the handle id cannot be part of a file name", nil)
	}
	if !oneName(name) {
		return nil, "", failed(inInbox, "the stored name is not a single file name", nil)
	}
	dir, err := in.openDir()
	if err != nil {
		return nil, "", err
	}
	l := &landing{at: inInbox, dir: dir, name: name, prefix: "." + handleID + "-", syncDir: true}
	if err := in.create(l); err != nil {
		unix.Close(dir)
		return nil, "", err
	}
	return l, InboxDir + "/" + name, nil
}

// create makes l's file in l.dir: unnamed unless the inbox has learned that unnamed files
// are refused here, else a .part file. The file is locked, so that no other process's start
// takes its temp name, if it ever has one, for a leftover.
func (in *Inbox) create(l *landing) error {
	if !in.named.Load() {
		fd, err := eintr.Retry(func() (int, error) {
			return unix.Openat(l.dir, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		})
		switch {
		case err == nil:
			adopt(l, fd, InboxDir+"/(unnamed)")
			return nil
		case !noUnnamedFiles(err):
			return failed(inInbox, "the unnamed file could not be created", err)
		}
		in.named.Store(true)
	}
	temp := l.newTempName()
	fd, err := eintr.Retry(func() (int, error) {
		return unix.Openat(l.dir, temp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	})
	if err != nil {
		return failed(inInbox, "the temp file could not be created", err)
	}
	l.temp = temp
	adopt(l, fd, InboxDir+"/"+temp)
	return nil
}

// adopt makes fd l's file and locks it (best effort: where the filesystem has no locks, a
// leftover is simply never removed at start).
func adopt(l *landing, fd int, name string) {
	_ = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	l.setFile(fd, name)
}

// sweep removes the temp files earlier processes left in peer-in (see Inbox). Failures are
// ignored: a leftover it cannot remove is clutter, not a partial file under a stored name.
func (in *Inbox) sweep() {
	dir, err := openDirAt(in.workdir, InboxDir)
	if err != nil {
		return
	}
	defer unix.Close(dir)
	entries, err := (&dirFD{fd: dir}).Entries()
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Kind == resolve.Regular && tempName.MatchString(e.Name) {
			removeIfLeftOver(dir, e.Name)
		}
	}
}

// removeIfLeftOver removes dir's entry name if it is a regular file (opened without following
// a link), last modified before this process started, that it can lock: no live process
// uses it.
func removeIfLeftOver(dir int, name string) {
	fd, err := eintr.Retry(func() (int, error) {
		return unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || !time.Unix(st.Mtim.Unix()).Before(processStart) {
		return
	}
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return
	}
	unlinkAt(dir, name)
}
