package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// maxSocketPath is the longest path a Unix socket address holds on Linux (sun_path is 108
// bytes including the terminating NUL).
const maxSocketPath = 107

// ErrAlreadyServing reports a live control socket: another server answers on it.
var ErrAlreadyServing = errors.New("another resplane server is already answering on the control socket")

// Listen binds the control socket at path with mode 0600, creating its directory (mode 0700)
// if needed. A stale socket file that nobody answers on is replaced; a live one is
// ErrAlreadyServing. A path too long for a socket address is bound through the directory's
// descriptor, so the socket works whatever the length of its path. Closing the listener
// removes the socket file.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the control socket's directory: %w", err)
	}
	var ln *net.UnixListener
	err := withAddress(path, func(addr string) error {
		if err := removeStale(addr); err != nil {
			return err
		}
		// The socket is created 0600 (umask 0177 during the bind), so it is never reachable
		// by anyone else, not even for an instant in a shared directory. Listen runs once, at
		// launch, before anything else in the process creates files.
		old := syscall.Umask(0o177)
		var err error
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
		syscall.Umask(old)
		if err != nil {
			return err
		}
		return os.Chmod(addr, 0o600)
	})
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return nil, fmt.Errorf("binding the control socket: %w", err)
	}
	return &longPathListener{UnixListener: ln, path: path}, nil
}

// longPathListener removes the socket by its real path on Close, since the address it was
// bound with may have gone through a descriptor that is closed by then.
type longPathListener struct {
	*net.UnixListener
	path string
}

func (l *longPathListener) Close() error {
	l.SetUnlinkOnClose(false)
	err := l.UnixListener.Close()
	if rmErr := os.Remove(l.path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
		err = rmErr
	}
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
	return use("/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + filepath.Base(path))
}

// removeStale removes a socket file at addr that no server answers on, and reports
// ErrAlreadyServing when one does. A path that exists but is not a socket is left alone (the
// bind then fails and says why).
func removeStale(addr string) error {
	info, err := os.Lstat(addr)
	if err != nil || info.Mode()&os.ModeSocket == 0 {
		return nil
	}
	conn, err := net.DialTimeout("unix", addr, time.Second)
	if err == nil {
		_ = conn.Close()
		return ErrAlreadyServing
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return os.Remove(addr)
	}
	return nil
}
