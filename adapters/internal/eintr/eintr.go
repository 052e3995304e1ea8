// Package eintr repeats a system call that a signal interrupted, for the adapters that make
// system calls through golang.org/x/sys/unix rather than through the os package (which does
// the same). The Go runtime installs its signal handlers with SA_RESTART, but a call into a
// filesystem that waits interruptibly (FUSE, CIFS, NFS) still fails with EINTR when a signal,
// the runtime's own preemption signal included, arrives while it waits.
package eintr

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Retry calls call until it returns anything but EINTR, and returns what it returned then.
func Retry[T any](call func() (T, error)) (T, error) {
	for {
		v, err := call()
		if !errors.Is(err, unix.EINTR) {
			return v, err
		}
	}
}

// RetryErr is Retry for a system call that returns only an error.
func RetryErr(call func() error) error {
	_, err := Retry(func() (struct{}, error) { return struct{}{}, call() })
	return err
}
