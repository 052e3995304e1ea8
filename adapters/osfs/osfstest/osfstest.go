// Package osfstest holds what the tests of adapters/osfs and of the layers using it on the
// real filesystem share.
package osfstest

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// OverflowInotify makes more inotify events than an instance's queue holds
// (/proc/sys/fs/inotify/max_queued_events) for watches of the files at a and b, by changing
// their modes in turn: the kernel merges an event only into an identical one queued last.
// A test that reads no event in between has every watch's queue overflowed.
func OverflowInotify(t testing.TB, a, b string) {
	t.Helper()
	text, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Fatal(err)
	}
	queued, err := strconv.Atoi(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatal(err)
	}
	ChangeModes(t, queued+1, a, b)
}

// ChangeModes changes the modes of the files at a and b in turn, n times in all: n inotify
// events, none merged into the one before it.
func ChangeModes(t testing.TB, n int, a, b string) {
	t.Helper()
	for i := range n {
		if err := os.Chmod([]string{a, b}[i%2], os.FileMode(0o600+i%2)); err != nil {
			t.Fatal(err)
		}
	}
}

// insideEnv names, in the environment of a test binary InPrivateMountNamespace runs again, the
// test it runs it for.
const insideEnv = "RESPLANE_OSFSTEST_MOUNT_NAMESPACE"

// InPrivateMountNamespace reports whether the test runs in a mount namespace of its own, where
// it may mount and unmount without touching the machine's. Called from a top-level test
// outside one, it runs the test binary again with that test alone (unshare --mount
// --propagation private, which needs root, as CI runs the tests), fails t unless that run
// passed, and returns false: the test then has nothing more to do.
func InPrivateMountNamespace(t *testing.T) bool {
	t.Helper()
	if os.Getenv(insideEnv) == t.Name() {
		return true
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts in a mount namespace of its own: it needs root, as CI runs it")
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private",
		os.Args[0], "-test.run", "^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), insideEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s in a mount namespace of its own: %v\n%s", t.Name(), err, out)
	}
	return false
}
