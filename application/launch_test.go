package application

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/diag"
	"github.com/resplane/resplane/domain/manifest"
	"github.com/resplane/resplane/ports"
)

// fakeRoots answers Locate from a table keyed by root and records what was asked.
type fakeRoots struct {
	found map[string]ports.RootLocation
	fail  map[string]error
	asked []string
}

func (f *fakeRoots) Locate(workdir, root string) (ports.RootLocation, error) {
	f.asked = append(f.asked, workdir+"|"+root)
	return f.found[root], f.fail[root]
}

func mustRoot(t *testing.T, s string) manifest.Root {
	t.Helper()
	r, err := manifest.ParseRoot(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustBytes(t *testing.T, s string) manifest.ByteCount {
	t.Helper()
	b, err := manifest.ParseByteCount(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustDestinations(t *testing.T, list ...string) []destination.Destination {
	t.Helper()
	out := []destination.Destination{}
	for _, s := range list {
		d, err := destination.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// withPeerFiles is a manifest declaring both planes, after_task as given.
func withPeerFiles(t *testing.T, afterTask manifest.AfterTask, maxTTL time.Duration, declared bool) manifest.Manifest {
	return manifest.Manifest{
		Name: "reporter", Version: "0.0.0", AfterTask: afterTask,
		Files: &manifest.FilesExport{Root: mustRoot(t, "out/"), Mode: manifest.ReadOnly, MaxBytes: mustBytes(t, "10Mi")},
		PeerFiles: &manifest.PeerFilesExport{Root: mustRoot(t, "out/handoff/"), MaxTTL: maxTTL, MaxTTLDeclared: declared,
			MaxBytes: mustBytes(t, "1Ki")},
		NetworkAllow: mustDestinations(t, "localhost:41234"),
		PeerFetch:    &manifest.PeerFetch{Allow: mustDestinations(t, "localhost:41235", "https://peer.example")},
	}
}

func TestLaunchResolvesAfterTaskWithTheOverrideWinning(t *testing.T) {
	exiting := withPeerFiles(t, manifest.AfterTaskExit, time.Hour, false)
	sleeping := withPeerFiles(t, manifest.AfterTaskSleep, 10*time.Minute, true)
	for _, tc := range []struct {
		name     string
		m        manifest.Manifest
		override manifest.AfterTask
		want     manifest.AfterTask
	}{
		{"manifest exit, no override", exiting, "", manifest.AfterTaskExit},
		{"manifest sleep, no override", sleeping, "", manifest.AfterTaskSleep},
		{"override sleep wins over exit", withPeerFiles(t, manifest.AfterTaskExit, time.Minute, true), manifest.AfterTaskSleep, manifest.AfterTaskSleep},
		{"override exit wins over sleep", sleeping, manifest.AfterTaskExit, manifest.AfterTaskExit},
	} {
		g, bad := NewLaunchChecks(&fakeRoots{}).Run(LaunchInput{Manifest: tc.m, AfterTaskOverride: tc.override, Workdir: "/w"})
		if bad != nil || g.AfterTask != tc.want {
			t.Errorf("%s: after_task %q, %v; want %q", tc.name, g.AfterTask, bad, tc.want)
		}
	}
}

func TestE_CAP_008_SleepNeedsAShortDeclaredMaxTTL(t *testing.T) {
	for _, tc := range []struct {
		name     string
		m        manifest.Manifest
		override manifest.AfterTask
		refused  bool
		declared string
	}{
		{"sleep without max_ttl", withPeerFiles(t, manifest.AfterTaskSleep, time.Hour, false), "", true, ""},
		{"sleep with 3600s", withPeerFiles(t, manifest.AfterTaskSleep, time.Hour, true), "", true, "is 3600s"},
		{"sleep with 901s", withPeerFiles(t, manifest.AfterTaskSleep, 901*time.Second, true), "", true, "is 901s"},
		{"sleep from the override", withPeerFiles(t, manifest.AfterTaskExit, time.Hour, false), manifest.AfterTaskSleep, true, ""},
		{"sleep with exactly 900s", withPeerFiles(t, manifest.AfterTaskSleep, 900*time.Second, true), "", false, ""},
		{"sleep with 1s", withPeerFiles(t, manifest.AfterTaskSleep, time.Second, true), "", false, ""},
		{"exit without max_ttl", withPeerFiles(t, manifest.AfterTaskExit, time.Hour, false), "", false, ""},
		{"exit with a long max_ttl", withPeerFiles(t, manifest.AfterTaskExit, 48*time.Hour, true), "", false, ""},
		{"override exit rescues sleep", withPeerFiles(t, manifest.AfterTaskSleep, time.Hour, false), manifest.AfterTaskExit, false, ""},
		{"sleep without peer_files", manifest.Manifest{Name: "r", AfterTask: manifest.AfterTaskSleep}, "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, bad := NewLaunchChecks(&fakeRoots{}).Run(LaunchInput{Manifest: tc.m, AfterTaskOverride: tc.override, Workdir: "/w"})
			if !tc.refused {
				if bad != nil {
					t.Fatalf("refused: %s", bad.Render())
				}
				return
			}
			if bad == nil || bad.Code != diag.PeerTTLTooLongForSleep {
				t.Fatalf("got %v, want E-CAP-008", bad)
			}
			for _, w := range []string{"exports.peer_files.max_ttl", "lifecycle.after_task: sleep", "900s",
				"a handle's lifetime is not a durability mechanism", tc.declared} {
				if !strings.Contains(bad.Message, w) {
					t.Errorf("message %q lacks %q", bad.Message, w)
				}
			}
			for _, w := range []string{"15m or less", "drop sleep", "relaunch against the same workdir and request again"} {
				if !strings.Contains(bad.Hint, w) {
					t.Errorf("hint %q lacks %q", bad.Hint, w)
				}
			}
		})
	}
}

func TestE_CAP_007_AnExistingRootMustResolveInsideTheWorkdir(t *testing.T) {
	outside := ports.RootLocation{Exists: true, Inside: false, Resolved: "/etc", Workdir: "/real/w"}
	inside := ports.RootLocation{Exists: true, Inside: true, Resolved: "/real/w/out", Workdir: "/real/w"}
	for _, tc := range []struct {
		name  string
		roots fakeRoots
		field string
		want  []string
	}{
		{"files root symlinked out", fakeRoots{found: map[string]ports.RootLocation{"out/": outside}},
			"exports.files.root", []string{`exports.files.root "out/" resolves to /etc, outside the workdir /real/w`}},
		{"peer_files root symlinked out", fakeRoots{found: map[string]ports.RootLocation{"out/": inside, "out/handoff/": outside}},
			"exports.peer_files.root", []string{`exports.peer_files.root "out/handoff/" resolves to /etc`, "/real/w"}},
		{"files checked before peer_files", fakeRoots{found: map[string]ports.RootLocation{"out/": outside, "out/handoff/": outside}},
			"exports.files.root", []string{"exports.files.root"}},
		{"a root that cannot be inspected is refused", fakeRoots{fail: map[string]error{"out/": errors.New("too many levels of symbolic links")}},
			"exports.files.root", []string{`exports.files.root "out/" could not be resolved in the workdir /w: too many levels of symbolic links`}},
		{"missing roots are accepted", fakeRoots{}, "", nil},
		{"roots inside are accepted", fakeRoots{found: map[string]ports.RootLocation{"out/": inside, "out/handoff/": inside}}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := withPeerFiles(t, manifest.AfterTaskExit, time.Hour, false)
			_, bad := NewLaunchChecks(&tc.roots).Run(LaunchInput{Manifest: m, Workdir: "/w"})
			if tc.field == "" {
				if bad != nil {
					t.Fatalf("refused: %s", bad.Render())
				}
				return
			}
			if bad == nil || bad.Code != diag.RootOutsideWorkdir {
				t.Fatalf("got %v, want E-CAP-007", bad)
			}
			for _, w := range tc.want {
				if !strings.Contains(bad.Message, w) {
					t.Errorf("message %q lacks %q", bad.Message, w)
				}
			}
			for _, w := range []string{"point " + tc.field + " at a directory inside the workdir", "refused whole, never followed"} {
				if !strings.Contains(bad.Hint, w) {
					t.Errorf("hint %q lacks %q", bad.Hint, w)
				}
			}
		})
	}
}

func TestE_CAP_008_RunsBeforeE_CAP_007(t *testing.T) {
	roots := &fakeRoots{found: map[string]ports.RootLocation{"out/": {Exists: true}}}
	_, bad := NewLaunchChecks(roots).Run(LaunchInput{Manifest: withPeerFiles(t, manifest.AfterTaskSleep, time.Hour, false), Workdir: "/w"})
	if bad == nil || bad.Code != diag.PeerTTLTooLongForSleep || len(roots.asked) != 0 {
		t.Fatalf("got %v after asking %v; want E-CAP-008 before any root is inspected", bad, roots.asked)
	}
}

func TestLaunchAsksAboutEachDeclaredRootInTheWorkdir(t *testing.T) {
	roots := &fakeRoots{}
	if _, bad := NewLaunchChecks(roots).Run(LaunchInput{Manifest: withPeerFiles(t, manifest.AfterTaskExit, time.Hour, false), Workdir: "/w"}); bad != nil {
		t.Fatal(bad.Render())
	}
	if want := []string{"/w|out/", "/w|out/handoff/"}; !reflect.DeepEqual(roots.asked, want) {
		t.Errorf("asked %q, want %q", roots.asked, want)
	}
	roots.asked = nil
	if _, bad := NewLaunchChecks(roots).Run(LaunchInput{Manifest: manifest.Manifest{Name: "r"}, Workdir: "/w"}); bad != nil || roots.asked != nil {
		t.Errorf("undeclared planes: asked %q, %v", roots.asked, bad)
	}
}

func TestGrantsAreTheEffectiveValues(t *testing.T) {
	g, bad := NewLaunchChecks(&fakeRoots{}).Run(LaunchInput{Manifest: withPeerFiles(t, manifest.AfterTaskExit, time.Hour, false), Workdir: "/w"})
	if bad != nil {
		t.Fatal(bad.Render())
	}
	want := Grants{
		Files:          &GrantsFiles{Root: "out/", Mode: manifest.ReadOnly, MaxBytes: 10 << 20},
		PeerFiles:      &GrantsPeerFiles{Root: "out/handoff/", MaxTTL: time.Hour, MaxBytes: 1024},
		PeerFetchAllow: []string{"localhost:41235", "https://peer.example"},
		NetworkAllow:   []string{"localhost:41234"},
		AfterTask:      manifest.AfterTaskExit,
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("grants = %+v\nwant     %+v", g, want)
	}
	g, _ = NewLaunchChecks(&fakeRoots{}).Run(LaunchInput{Manifest: manifest.Manifest{Name: "r", AfterTask: manifest.AfterTaskExit}})
	if g.Files != nil || g.PeerFiles != nil || g.PeerFetchAllow == nil || len(g.PeerFetchAllow) != 0 ||
		g.NetworkAllow == nil || len(g.NetworkAllow) != 0 {
		t.Errorf("undeclared grants = %+v; want nil planes and empty, non-nil lists", g)
	}
}

func TestWithoutAWorkdirNoRootIsInspected(t *testing.T) {
	roots := &fakeRoots{found: map[string]ports.RootLocation{"out/": {Exists: true, Inside: false}}}
	if _, bad := NewLaunchChecks(roots).Run(LaunchInput{Manifest: withPeerFiles(t, manifest.AfterTaskExit, time.Hour, false)}); bad != nil || roots.asked != nil {
		t.Fatalf("got %v after asking %q; want nothing inspected without a workdir", bad, roots.asked)
	}
}
