package operator_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/application/operator"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

func entry(path, content string) ports.RemoteEntry {
	return ports.RemoteEntry{Path: path, Size: int64(len(content)), MtimeMs: 1, SHA256: sum(content)}
}

func TestDiffListingsNamesWhatWasAddedChangedAndRemoved(t *testing.T) {
	a, b := entry("a.txt", "a"), entry("b.txt", "b")
	touched := a
	touched.MtimeMs = 99
	for _, tc := range []struct {
		name      string
		old, next []ports.RemoteEntry
		want      operator.ListingDiff
	}{
		{name: "nothing before: every path is added", next: []ports.RemoteEntry{b, a},
			want: operator.ListingDiff{Added: []string{"a.txt", "b.txt"}}},
		{name: "the same listing is no change", old: []ports.RemoteEntry{a, b}, next: []ports.RemoteEntry{b, a}},
		{name: "a new mtime alone is no change", old: []ports.RemoteEntry{a}, next: []ports.RemoteEntry{touched}},
		{name: "another sha256 is a change", old: []ports.RemoteEntry{a}, next: []ports.RemoteEntry{entry("a.txt", "A")},
			want: operator.ListingDiff{Changed: []string{"a.txt"}}},
		{name: "another size with the same sha256 is a change", old: []ports.RemoteEntry{a},
			next: []ports.RemoteEntry{{Path: "a.txt", Size: 7, SHA256: a.SHA256}}, want: operator.ListingDiff{Changed: []string{"a.txt"}}},
		{name: "a path gone is removed", old: []ports.RemoteEntry{a, b}, next: []ports.RemoteEntry{a},
			want: operator.ListingDiff{Removed: []string{"b.txt"}}},
		{name: "a rename is a removal and an addition", old: []ports.RemoteEntry{a}, next: []ports.RemoteEntry{entry("c.txt", "a")},
			want: operator.ListingDiff{Added: []string{"c.txt"}, Removed: []string{"a.txt"}}},
		{name: "a path listed twice counts by its last entry", old: []ports.RemoteEntry{a},
			next: []ports.RemoteEntry{a, entry("a.txt", "again")}, want: operator.ListingDiff{Changed: []string{"a.txt"}}},
		{name: "everything gone", old: []ports.RemoteEntry{b, a}, want: operator.ListingDiff{Removed: []string{"a.txt", "b.txt"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := operator.DiffListings(tc.old, tc.next)
			if !slices.Equal(got.Added, tc.want.Added) || !slices.Equal(got.Changed, tc.want.Changed) || !slices.Equal(got.Removed, tc.want.Removed) {
				t.Fatalf("diff = %+v, want %+v", got, tc.want)
			}
			if got.Empty() != tc.want.Empty() || got.SetChanged() != (len(tc.want.Added)+len(tc.want.Removed) > 0) {
				t.Fatalf("Empty %v SetChanged %v for %+v", got.Empty(), got.SetChanged(), got)
			}
		})
	}
}

// watchLog collects what a watch reports.
type watchLog struct {
	mu          sync.Mutex
	pulls       []operator.PullSummary
	lost, back  int
	lostCode    refusal.Code
	lostRetries []time.Duration
}

func (w *watchLog) hooks() operator.WatchHooks {
	return operator.WatchHooks{
		Pulled: func(s operator.PullSummary, _ time.Time) { w.mu.Lock(); w.pulls = append(w.pulls, s); w.mu.Unlock() },
		Lost: func(err *refusal.Refusal, retry time.Duration) {
			w.mu.Lock()
			w.lost++
			w.lostCode = err.Code
			w.lostRetries = append(w.lostRetries, retry)
			w.mu.Unlock()
		},
		Back: func() { w.mu.Lock(); w.back++; w.mu.Unlock() },
	}
}

// waitFor polls cond every few milliseconds for up to five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (w *watchLog) pulled() []operator.PullSummary {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.pulls)
}

// startWatch runs a watch of export into a new directory every interval until the test ends.
func startWatch(t *testing.T, export *fakeExport, interval time.Duration, opts operator.PullOptions) (*watchLog, string, func() error) {
	t.Helper()
	m, dir := mirrorInto(t, export, nil)
	log := &watchLog{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- m.Watch(ctx, operator.NewPoller(operator.NewRemoteFiles(export), clock.System{}), interval, opts, log.hooks())
	}()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { _ = stop() })
	return log, dir, stop
}

func TestAWatchPullsWhatChangesAndNothingWhileNothingDoes(t *testing.T) {
	export := newExport(map[string]string{"a.txt": "a", "old.txt": "old"})
	log, dir, stop := startWatch(t, export, 10*time.Millisecond, operator.PullOptions{Jobs: 2, Delete: true})
	waitFor(t, "the first pull", func() bool { return len(log.pulled()) == 1 })
	export.mu.Lock()
	listedBefore := export.listed
	export.mu.Unlock()
	waitFor(t, "five more listings", func() bool { export.mu.Lock(); defer export.mu.Unlock(); return export.listed >= listedBefore+5 })
	if n := len(log.pulled()); n != 1 {
		t.Fatalf("%d pulls over an unchanged listing, want the first one only", n)
	}

	export.mu.Lock()
	export.files["a.txt"] = "rewritten"
	export.files["new/b.txt"] = "b"
	delete(export.files, "old.txt")
	export.mu.Unlock()
	waitFor(t, "a second pull", func() bool { return len(log.pulled()) == 2 })
	s := log.pulled()[1]
	if s.Fetched != 2 || s.Deleted != 1 || s.Unchanged != 0 || s.Failed != 0 {
		t.Fatalf("second cycle %+v; want 2 fetched, 1 deleted", s)
	}
	requireTree(t, dir, map[string]string{"a.txt": "rewritten", "new/b.txt": "b"})
	if err := stop(); err != nil {
		t.Fatalf("a watch ended by its context returned %v", err)
	}
	if export.opened["a.txt"] != 2 || export.opened["new/b.txt"] != 1 {
		t.Fatalf("reads %v; want a.txt twice, new/b.txt once", export.opened)
	}
}

func TestAWatchSaysALostServiceOnceAndItsReturnOnce(t *testing.T) {
	export := newExport(map[string]string{"a.txt": "a"})
	log, dir, _ := startWatch(t, export, 5*time.Millisecond, operator.PullOptions{Jobs: 1})
	waitFor(t, "the first pull", func() bool { return len(log.pulled()) == 1 })
	export.mu.Lock()
	export.unreachable = true
	listed := export.listed
	export.mu.Unlock()
	waitFor(t, "four failed listings", func() bool { export.mu.Lock(); defer export.mu.Unlock(); return export.listed >= listed+4 })
	export.mu.Lock()
	export.unreachable = false
	export.files["a.txt"] = "back"
	export.mu.Unlock()
	waitFor(t, "the pull after the return", func() bool { return len(log.pulled()) == 2 })
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.lost != 1 || log.back != 1 || log.lostCode != refusal.ServiceUnreachable {
		t.Fatalf("lost %d times (%s), back %d times; want once each", log.lost, log.lostCode, log.back)
	}
	if log.lostRetries[0] != 5*time.Millisecond {
		t.Fatalf("the first retry was announced after %v, want the interval", log.lostRetries[0])
	}
	requireTree(t, dir, map[string]string{"a.txt": "back"})
}

func TestAWatchRetriesAFailedFileOnAnUnchangedListing(t *testing.T) {
	export := newExport(map[string]string{"a.txt": "a"})
	export.answers["a.txt"] = fakeAnswer{status: 503, code: "busy", message: "Busy."}
	log, dir, _ := startWatch(t, export, 5*time.Millisecond, operator.PullOptions{Jobs: 1})
	waitFor(t, "the failed pull", func() bool { p := log.pulled(); return len(p) >= 1 && p[0].Failed == 1 })
	export.mu.Lock()
	delete(export.answers, "a.txt")
	export.mu.Unlock()
	waitFor(t, "the retry", func() bool { p := log.pulled(); return len(p) >= 2 && p[len(p)-1].Fetched == 1 })
	requireTree(t, dir, map[string]string{"a.txt": "a"})
}

func TestAWatchTheServiceRefusesAtOnceEnds(t *testing.T) {
	export := newExport(nil)
	export.refuse = &ports.RemoteAnswer{Status: 404, ErrorCode: "no_resource_plane", ErrorMessage: "No exports.files."}
	m, _ := mirrorInto(t, export, nil)
	err := m.Watch(context.Background(), operator.NewPoller(operator.NewRemoteFiles(export), clock.System{}), time.Millisecond,
		operator.PullOptions{}, (&watchLog{}).hooks())
	if r := refusal.From(err); err == nil || r.Code != "no_resource_plane" {
		t.Fatalf("Watch = %v, want the service's refusal", err)
	}
}
