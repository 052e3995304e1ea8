package control

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serveOn answers every request on ln with 204 until the test ends.
func serveOn(t *testing.T, ln net.Listener) {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

func TestListenBindsA0600SocketWhateverTheLengthOfItsPath(t *testing.T) {
	for name, dir := range map[string]string{
		"short": t.TempDir(),
		"long":  filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60)),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "control.sock")
			ln, err := Listen(path)
			if err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(path)
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
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the socket file outlived its listener: %v", err)
			}
		})
	}
}

func TestListenReplacesAStaleSocketButNotALiveOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.sock")
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = stale.Close() // the file stays, nobody answers on it
	live, err := Listen(path)
	if err != nil {
		t.Fatalf("a stale socket was not replaced: %v", err)
	}
	defer live.Close()
	serveOn(t, live)
	if _, err := Listen(path); !errors.Is(err, ErrAlreadyServing) {
		t.Fatalf("Listen over a live socket = %v; want ErrAlreadyServing", err)
	}
}
