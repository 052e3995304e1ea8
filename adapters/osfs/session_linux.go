package osfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/adapters/internal/eintr"
)

// sessionsDir is the directory, relative to the workdir, that holds each session's directory.
const sessionsDir = ".murmur"

// SessionDirPath returns where OpenSessionDir puts the directory of session sessionID:
// <workdir>/.murmur/<session id>.
func SessionDirPath(workdir, sessionID string) string {
	return filepath.Join(workdir, sessionsDir, sessionID)
}

// SessionDir is one session's own directory, <workdir>/.murmur/<session id>/, held open: the
// trace, the control socket and the spool are created through it. The agent owns the workdir
// and the session id is public, so the agent can plant a symlink or a directory of its own
// there before the service starts; a service that runs with more privilege than the agent
// must not then write, bind or remove anything through them.
//
// What it guarantees:
//
//   - OpenSessionDir reaches the directory from one descriptor of the workdir, one component
//     at a time: .murmur and then <session id> are each created with mkdirat (mode 0700) when
//     missing and opened with openat(O_NOFOLLOW|O_DIRECTORY). If either is a symlink (to
//     anywhere, inside the workdir included) or anything but a directory, it is refused and
//     nothing is created through it.
//   - The session directory must be owned by the process's effective uid and writable by
//     nobody else: no group or other write bit (under an ACL that bit is the ACL's mask, so
//     no named entry can write either). Otherwise it is refused. Another user, such as an
//     agent running as its own uid, can therefore neither have put anything in it nor add
//     anything later.
//   - After OpenSessionDir every use goes through the held descriptor: renaming or replacing
//     .murmur or the session directory afterwards redirects nothing.
//   - OpenTrace never follows a symlink at the file's own name (O_NOFOLLOW), wherever the
//     file is.
//   - A refusal is an *UnsafeError that names the path, what is wrong with it and what to
//     do. It is returned before anything is created through the refused path.
//
// What it does not guarantee:
//
//   - .murmur itself is not owner-checked. It lies in the agent's workdir, where the agent can
//     rename anything; what the service relies on is the session directory it holds.
//   - The checks stand between users, not within one: a process running as the service's own
//     user can do whatever the service can, a hard link in the session directory included.
//   - A directory given by path elsewhere (an explicit --spool-dir, or the directory of an
//     explicit --trace or --control) is the operator's choice: its parents are created (0700)
//     and resolved by name, following symlinks. What is protected there is the last
//     component: OpenDir (the spool) never follows a symlink at the directory's own name,
//     OpenTrace and the control socket never at the file's; CheckUnfollowed refuses, before
//     anything is created, a symlink at that name or one beneath the workdir on the way to it.
//   - The workdir itself is found by its path, as the operator gave it.
//
// A SessionDir is safe for concurrent use.
type SessionDir struct {
	dir *os.File // O_RDONLY|O_DIRECTORY|O_NOFOLLOW; its Name is the directory's path
}

// UnsafeError is a session path resplane refuses to use: a symlink, something other than
// what it should be, or a directory another user owns or can write.
type UnsafeError struct {
	What    string // "the session directory", "the trace file", …
	Path    string
	Problem string // "is a symlink", …
	Fix     string // what the operator should do
}

func (e *UnsafeError) Error() string {
	return e.What + " " + e.Path + " " + e.Problem + "; " + e.Fix
}

// OpenSessionDir creates (if missing) and opens the directory of session sessionID in
// workdir, which must exist. An error names the path; it is meant for the operator at
// startup. It is an *UnsafeError when the path is not the service's own.
func OpenSessionDir(workdir, sessionID string) (*SessionDir, error) {
	return openSessionDir(workdir, sessionID, unix.Geteuid())
}

// openSessionDir is OpenSessionDir for a service running as uid.
func openSessionDir(workdir, sessionID string, uid int) (*SessionDir, error) {
	if !oneName(sessionID) {
		return nil, fmt.Errorf("the session id %q cannot name a directory", sessionID)
	}
	wd, err := eintr.Retry(func() (int, error) { return unix.Open(workdir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return nil, fmt.Errorf("opening the workdir %s: %w", workdir, err)
	}
	defer unix.Close(wd)
	parentPath := filepath.Join(workdir, sessionsDir)
	parent, err := makeOpenDir(wd, sessionsDir, parentPath, "the directory of the session directories")
	if err != nil {
		return nil, err
	}
	defer unix.Close(parent)
	path := SessionDirPath(workdir, sessionID)
	fd, err := makeOpenDir(parent, sessionID, path, "the session directory")
	if err != nil {
		return nil, err
	}
	if err := checkOwn(fd, path, uid); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &SessionDir{dir: os.NewFile(uintptr(fd), path)}, nil
}

// removeIt is the advice for a planted entry.
const removeIt = "resplane creates its session files only in a real directory it owns, reached without " +
	"following a symlink: remove it (the agent may have planted it) and start again"

// makeOpenDir creates the directory name in dirfd (mode 0700) unless it exists, and opens
// it without following a symlink. what and path describe it in an error.
func makeOpenDir(dirfd int, name, path, what string) (int, error) {
	if err := eintr.RetryErr(func() error { return unix.Mkdirat(dirfd, name, 0o700) }); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("creating %s %s: %w", what, path, err)
	}
	fd, err := openDirAt(dirfd, name)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		// O_DIRECTORY reports a symlink as ENOTDIR; tell the two apart for the message.
		problem := "is not a directory"
		if st, err := lstatAt(dirfd, name); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			problem = "is a symlink"
		}
		return -1, &UnsafeError{What: what, Path: path, Problem: problem, Fix: removeIt}
	}
	if err != nil {
		return -1, fmt.Errorf("opening %s %s: %w", what, path, err)
	}
	return fd, nil
}

// checkOwn refuses the directory fd (at path) unless uid owns it and only uid can write it.
func checkOwn(fd int, path string, uid int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("inspecting the session directory %s: %w", path, err)
	}
	if int(st.Uid) != uid {
		return &UnsafeError{What: "the session directory", Path: path,
			Problem: fmt.Sprintf("is owned by uid %d, not by uid %d that resplane runs as", st.Uid, uid),
			Fix:     "another user could have put files in it: remove it, or start with another --session-id"}
	}
	if st.Mode&0o022 != 0 {
		return &UnsafeError{What: "the session directory", Path: path,
			Problem: fmt.Sprintf("is writable by group or others (mode %04o)", st.Mode&0o7777),
			Fix:     "another user could add files to it: remove it or make it writable by its owner only (chmod go-w)"}
	}
	return nil
}

// Path is the session directory's absolute path (not resolved through symlinks).
func (s *SessionDir) Path() string { return s.dir.Name() }

// OpenDir returns a new descriptor of the directory at path, which the caller closes: a
// duplicate of the held one when path is the session directory, else the directory at path,
// its parents created (mode 0700) and resolved by name, and the directory itself created
// (mode 0700) when missing and opened without following a symlink: a symlink at path, or
// anything there but a directory, is an *UnsafeError and nothing is created through it.
func (s *SessionDir) OpenDir(path string) (*os.File, error) {
	if filepath.Clean(path) == s.Path() {
		fd, err := unix.FcntlInt(s.dir.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("duplicating the session directory's descriptor: %w", err)
		}
		return os.NewFile(uintptr(fd), s.Path()), nil
	}
	parent, err := s.OpenParent(path)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	fd, err := makeOpenDir(int(parent.Fd()), filepath.Base(path), path, "the directory")
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// OpenParent returns a new descriptor of the directory that holds the file at path, which
// the caller closes: the held one's duplicate when that is the session directory, else that
// directory resolved by name (following symlinks: only the file's own name is protected), it
// and its parents created (mode 0700) when missing.
func (s *SessionDir) OpenParent(path string) (*os.File, error) {
	dir := filepath.Dir(filepath.Clean(path))
	if dir == s.Path() {
		return s.OpenDir(dir)
	}
	fd, err := createDir(dir, 0o700, 0, "the directory")
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// CheckUnfollowed refuses path, which what names in the message (the spool directory, the
// trace file, the control socket), when using it would follow a symlink someone could have
// planted: when its own last component is a symlink, or when it lies beneath workdir (by its
// text) and a component between workdir and it is one, which also leaves its Landlock rule
// nothing to be anchored on (the rule is looked up from the workdir without following
// symlinks). A component that is missing ends the check: nothing beyond it exists. It reads
// only, and a refusal is an *UnsafeError, so a launch can check its paths before it creates
// anything.
func CheckUnfollowed(what, path, workdir string) error {
	path = filepath.Clean(path)
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSymlink != 0 {
		return &UnsafeError{What: what, Path: path, Problem: "is a symlink",
			Fix: "resplane never follows a symlink there: remove it (the agent may have planted it) or name the real path"}
	}
	rel, err := filepath.Rel(filepath.Clean(workdir), path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil
	}
	cur := filepath.Clean(workdir)
	for _, name := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, name)
		st, err := os.Lstat(cur)
		if err != nil {
			return nil
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return &UnsafeError{What: what, Path: path,
				Problem: "lies beneath the workdir through the symlink " + cur,
				Fix: "resplane follows no symlink beneath the workdir (its Landlock rule could not be anchored there): " +
					"remove it (the agent may have planted it) or name a path without one"}
		}
	}
	return nil
}

// OpenTrace opens the trace file at path for appending, creating it with mode 0600: through
// the held descriptor when path lies directly in the session directory, else in its own
// directory as OpenParent finds it. The file's own name is never followed: a symlink there is an
// *UnsafeError.
func (s *SessionDir) OpenTrace(path string) (*os.File, error) {
	dir, err := s.OpenParent(path)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	name := filepath.Base(path)
	fd, err := eintr.Retry(func() (int, error) {
		return unix.Openat(int(dir.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	})
	if errors.Is(err, unix.ELOOP) {
		return nil, &UnsafeError{What: "the trace file", Path: path, Problem: "is a symlink",
			Fix: "resplane never writes its trace through a symlink: remove it (the agent may have planted it) and start again"}
	}
	if err != nil {
		return nil, fmt.Errorf("opening the trace file %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// Close releases the held descriptor.
func (s *SessionDir) Close() error { return s.dir.Close() }
