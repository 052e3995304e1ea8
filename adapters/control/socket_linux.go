package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxSocketPath is the longest path a Unix socket address holds on Linux (sun_path is 108
// bytes including the terminating NUL).
const maxSocketPath = 107

// ErrAlreadyServing reports a live control socket: another server answers on it.
var ErrAlreadyServing = errors.New("another resplane server is already answering on the control socket")

// Listen binds the control socket name in the directory dir, with mode 0600, and takes dir
// over: the listener closes it. Everything goes through dir's descriptor, never through a
// path that could be re-resolved: the socket is bound at /proc/self/fd/<dir>/<name> (so the
// socket works whatever the length of its path, and /proc must be mounted), and an existing
// entry of that name is inspected with fstatat(AT_SYMLINK_NOFOLLOW). A stale socket that
// nobody answers on is removed with unlinkat and replaced; a live one is ErrAlreadyServing; a
// symlink or anything else that is not a socket is refused and left alone. Closing the
// listener removes the socket file the same way, once, however often Close is called.
func Listen(dir *os.File, name string) (net.Listener, error) {
	l := &listener{dir: dir, name: name}
	ln, err := l.bind()
	if err != nil {
		_ = dir.Close()
		return nil, err
	}
	l.UnixListener = ln
	return l, nil
}

// listener is the bound control socket with the directory it was bound in.
type listener struct {
	*net.UnixListener
	dir   *os.File
	name  string
	close sync.Once
}

// path is the socket's path, for messages.
func (l *listener) path() string { return filepath.Join(l.dir.Name(), l.name) }

// bind removes a stale socket and binds a new one.
func (l *listener) bind() (*net.UnixListener, error) {
	addr := beneathFD(l.dir, l.name)
	if l.name == "" || l.name == "." || l.name == ".." || filepath.Base(l.name) != l.name {
		return nil, fmt.Errorf("the control socket %s: %q is not a file name", l.path(), l.name)
	}
	if len(addr) > maxSocketPath {
		return nil, fmt.Errorf("the control socket %s: its name %q is too long for a socket address; choose a shorter --control",
			l.path(), l.name)
	}
	if err := l.removeStale(addr); err != nil {
		return nil, err
	}
	// The socket is created 0600 (umask 0177 during the bind; the kernel applies the umask to
	// a socket even under a default ACL, whose mask then grants nothing), so it is never
	// reachable by anyone else, not even for an instant. Listen runs once, at launch, before
	// anything else in the process creates files.
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("binding the control socket %s: %w", l.path(), err)
	}
	// The kernel would unlink the address at Close, a /proc/self/fd path that may name another
	// directory by then; Close removes the socket through dir instead.
	ln.SetUnlinkOnClose(false)
	return ln, nil
}

// stat describes the entry name in dir without following a symlink.
func (l *listener) stat() (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(l.dir.Fd()), l.name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// removeStale removes a socket that no server answers on at name, and reports
// ErrAlreadyServing when one does. Anything at name that is not a socket is refused.
func (l *listener) removeStale(addr string) error {
	st, err := l.stat()
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("inspecting the control socket %s: %w", l.path(), err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("the control socket %s is a symlink; resplane never binds or removes a socket through one: "+
			"remove it (the agent may have planted it) and start again", l.path())
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		return fmt.Errorf("the control socket %s exists and is not a socket; remove it and start again", l.path())
	}
	conn, err := net.DialTimeout("unix", addr, time.Second)
	if err == nil {
		_ = conn.Close()
		return ErrAlreadyServing
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		l.unlinkSocket()
	}
	return nil
}

// unlinkSocket removes name from dir if it is a socket.
func (l *listener) unlinkSocket() {
	if st, err := l.stat(); err == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		_ = unix.Unlinkat(int(l.dir.Fd()), l.name, 0)
	}
}

// Close stops listening, removes the socket file and closes the directory. net/http's Serve
// closes its listener too, so only the first call does anything.
func (l *listener) Close() error {
	var err error
	l.close.Do(func() {
		err = l.UnixListener.Close()
		l.unlinkSocket()
		err = errors.Join(err, l.dir.Close())
	})
	return err
}

// Dial connects to the control socket at path, however long the path is.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	var conn net.Conn
	err := withAddress(path, func(addr string) error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "unix", addr)
		return err
	})
	return conn, err
}

// withAddress calls use with an address for path that fits a socket address: path itself
// when it is short enough, else the name beneath /proc/self/fd/<n> of its directory, held open
// for the duration of the call.
func withAddress(path string, use func(addr string) error) error {
	if len(path) <= maxSocketPath {
		return use(path)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return use(beneathFD(dir, filepath.Base(path)))
}

// beneathFD is the path of name in the open directory dir, through /proc/self/fd: short
// whatever dir's own path, and never re-resolved through it.
func beneathFD(dir *os.File, name string) string {
	return "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + name
}
