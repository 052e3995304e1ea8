// Package osfstest holds what the tests of adapters/osfs and of the layers using it on the
// real filesystem share.
package osfstest

import (
	"os"
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
