package control

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/ports/porttest/fixture"
)

// serveOn answers every request on ln with 204 until the test ends.
func serveOn(t *testing.T, ln net.Listener) {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// listenIn binds control.sock in dir, which it opens (and Listen takes over).
func listenIn(t *testing.T, dir string) (net.Listener, error) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return Listen(d, "control.sock")
}

func TestListenBindsA0600SocketWhateverTheLengthOfItsPath(t *testing.T) {
	for name, dir := range map[string]string{
		"short": t.TempDir(),
		"long":  filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60)),
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "control.sock")
			ln, err := listenIn(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			info, err := os.Lstat(path)
			if err != nil || info.Mode()&os.ModeSocket == 0 || info.Mode().Perm() != 0o600 {
				t.Fatalf("socket %v, %v; want a socket with mode 0600", info, err)
			}
			serveOn(t, ln)
			status, _, err := NewClient(path).Call(context.Background(), http.MethodGet, "/", nil)
			if err != nil || status != http.StatusNoContent {
				t.Fatalf("Call = %d, %v", status, err)
			}
			if err := ln.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the socket file outlived its listener: %v", err)
			}
		})
	}
}

func TestListenReplacesAStaleSocketButNotALiveOne(t *testing.T) {
	dir := t.TempDir()
	fixture.Write(t, dir, fixture.Layout{"control.sock=": ""}) // the file stays, nobody answers on it
	live, err := listenIn(t, dir)
	if err != nil {
		t.Fatalf("a stale socket was not replaced: %v", err)
	}
	defer live.Close()
	serveOn(t, live)
	if _, err := listenIn(t, dir); !errors.Is(err, ErrAlreadyServing) {
		t.Fatalf("Listen over a live socket = %v; want ErrAlreadyServing", err)
	}
}

// TestListenRefusesAnythingButASocketAndLeavesItAlone pins that a symlink at the socket's name
// is never bound, dialled or removed through, wherever it points, and that anything else that
// is not a socket is refused too: the error names the path and the problem, and neither the
// entry nor what it points at changes.
func TestListenRefusesAnythingButASocketAndLeavesItAlone(t *testing.T) {
	tests := []struct {
		name   string
		layout fixture.Layout // in a dir holding sessions/ (where the socket goes) and outside/
		says   string
	}{
		{"a symlink to an outside file", fixture.Layout{"outside/precious": "x", "sessions/control.sock -> ../outside/precious": ""}, "is a symlink"},
		{"a dangling symlink", fixture.Layout{"outside/": "", "sessions/control.sock -> ../outside/new.sock": ""}, "is a symlink"},
		{"a symlink to a stale socket", fixture.Layout{"outside/stale.sock=": "", "sessions/control.sock -> ../outside/stale.sock": ""}, "is a symlink"},
		{"a regular file", fixture.Layout{"sessions/control.sock": "x"}, "is not a socket"},
		{"a directory", fixture.Layout{"sessions/control.sock/": ""}, "is not a socket"},
		{"a FIFO", fixture.Layout{"sessions/control.sock|": ""}, "is not a socket"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fixture.Write(t, dir, tc.layout)
			before := fixture.Snapshot(t, dir)
			_, err := listenIn(t, filepath.Join(dir, "sessions"))
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "sessions", "control.sock")) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Listen = %v; want an error naming the path that says %q", err, tc.says)
			}
			if after := fixture.Snapshot(t, dir); !slices.Equal(before, after) {
				t.Errorf("the refused Listen changed the tree:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// TestADefaultACLDoesNotOpenTheSocket pins that the socket stays 0600 even in a directory whose
// default ACL grants another user everything: the umask still applies to a socket, so the
// ACL's mask comes out empty and the named user gets nothing.
func TestADefaultACLDoesNotOpenTheSocket(t *testing.T) {
	dir := t.TempDir()
	// A default ACL (system.posix_acl_default, version 2): owner rwx, user 4242 rwx, group rwx,
	// mask rwx, other none.
	acl := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{0x01, 7, ^uint32(0)}, {0x02, 7, 4242}, {0x04, 7, ^uint32(0)}, {0x10, 7, ^uint32(0)}, {0x20, 0, ^uint32(0)}} {
		acl = binary.LittleEndian.AppendUint16(acl, e.tag)
		acl = binary.LittleEndian.AppendUint16(acl, e.perm)
		acl = binary.LittleEndian.AppendUint32(acl, e.id)
	}
	if err := unix.Setxattr(dir, "system.posix_acl_default", acl, 0); err != nil {
		t.Skipf("this filesystem takes no default ACL (%v): the umask alone decides the mode", err)
	}
	ln, err := listenIn(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	info, err := os.Lstat(filepath.Join(dir, "control.sock"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("socket under a default ACL: %v, %v; want mode 0600 (an empty ACL mask)", info, err)
	}
}

// TestCloseRemovesTheSocketThroughItsDirectory pins that Close removes the socket from the
// directory it was bound in even after that directory was renamed, and never touches what now
// has the old path.
func TestCloseRemovesTheSocketThroughItsDirectory(t *testing.T) {
	base := t.TempDir()
	fixture.Write(t, base, fixture.Layout{"a/": ""})
	ln, err := listenIn(t, filepath.Join(base, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(base, "a"), filepath.Join(base, "b")); err != nil {
		t.Fatal(err)
	}
	fixture.Write(t, base, fixture.Layout{"a/control.sock=": ""}) // another socket at the old path
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(base, "b", "control.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is still in its renamed directory: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(base, "a", "control.sock")); err != nil {
		t.Errorf("Close removed the socket now at the old path: %v", err)
	}
}

func TestListenRefusesANameThatCannotBeASocketAddress(t *testing.T) {
	for name, sock := range map[string]string{
		"empty":    "",
		"dot-dot":  "..",
		"a slash":  "a/b",
		"too long": strings.Repeat("s", 100),
	} {
		t.Run(name, func(t *testing.T) {
			d, err := os.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if ln, err := Listen(d, sock); err == nil {
				ln.Close()
				t.Fatalf("Listen(%q) succeeded", sock)
			}
		})
	}
}
