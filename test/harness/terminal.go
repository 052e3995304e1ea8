package harness

import (
	"errors"
	"io"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/creack/pty"
)

// RunCLIOnTerminal runs the binary as RunCLI does, but with its standard output a terminal
// (the follower side of a pseudo-terminal): it returns the exit status, what reached the
// terminal, and stderr. The terminal translates "\n" into "\r\n", as any would.
func RunCLIOnTerminal(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	leader, follower, err := pty.Open()
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	defer leader.Close()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = cleanEnv()
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = follower, &stderr
	if err := cmd.Start(); err != nil {
		follower.Close()
		t.Fatal(err)
	}
	follower.Close() // the child holds its own copy; the leader's reads end when it exits
	seen := make(chan []byte)
	go func() {
		out, err := io.ReadAll(leader)
		if err != nil && !errors.Is(err, syscall.EIO) { // EIO: every follower descriptor closed
			t.Errorf("reading the terminal: %v", err)
		}
		seen <- out
	}()
	code := awaitExit(t, cmd, func() string { return "stderr " + strconv.Quote(stderr.String()) })
	return code, string(<-seen), stderr.String()
}
