package osfs

// An internal test: the owner rule is checked against openSessionDir's uid, so that it is
// pinned without root (only root can give a directory to another user).

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/ports/porttest/fixture"
)

const testSession = "ses_test"

// TestOpenSessionDirAcceptsOnlyADirectoryOfOurOwn pins the session directory's rules, one per
// row: reached without following a symlink, owned by the service's uid, writable by nobody
// else; a refusal is an UnsafeError naming the path and the problem, and creates nothing.
func TestOpenSessionDirAcceptsOnlyADirectoryOfOurOwn(t *testing.T) {
	euid := unix.Geteuid()
	tests := []struct {
		rule   string
		layout fixture.Layout // in a dir holding wd/ (the workdir) and outside/
		mode   os.FileMode    // when not 0, the session directory's mode
		uid    int            // the service's uid; euid when 0
		// refusedPath is the refused path relative to the dir and problem what is wrong with
		// it; "" when the directory is accepted.
		refusedPath, problem string
	}{
		{rule: "a missing .murmur and session directory are created",
			layout: fixture.Layout{"wd/": ""}},
		{rule: "an existing session directory of ours is reused",
			layout: fixture.Layout{"wd/.murmur/ses_test/trace.jsonl": "earlier\n"}},
		{rule: "a session directory readable by group and others is ours",
			layout: fixture.Layout{"wd/.murmur/ses_test/": ""}, mode: 0o755},
		{rule: ".murmur as a symlink out of the workdir is refused",
			layout:      fixture.Layout{"outside/": "", "wd/.murmur -> ../outside": ""},
			refusedPath: "wd/.murmur", problem: "is a symlink"},
		{rule: ".murmur as a symlink inside the workdir is refused too",
			layout:      fixture.Layout{"wd/real/": "", "wd/.murmur -> real": ""},
			refusedPath: "wd/.murmur", problem: "is a symlink"},
		{rule: ".murmur as a regular file is refused",
			layout:      fixture.Layout{"wd/.murmur": "x"},
			refusedPath: "wd/.murmur", problem: "is not a directory"},
		{rule: "the session directory as a symlink is refused",
			layout:      fixture.Layout{"outside/": "", "wd/.murmur/ses_test -> ../../outside": ""},
			refusedPath: "wd/.murmur/ses_test", problem: "is a symlink"},
		{rule: "the session directory as a dangling symlink is refused",
			layout:      fixture.Layout{"wd/.murmur/ses_test -> ../../outside/new": ""},
			refusedPath: "wd/.murmur/ses_test", problem: "is a symlink"},
		{rule: "the session directory as a FIFO is refused",
			layout:      fixture.Layout{"wd/.murmur/ses_test|": ""},
			refusedPath: "wd/.murmur/ses_test", problem: "is not a directory"},
		{rule: "a session directory owned by another uid is refused",
			layout: fixture.Layout{"wd/.murmur/ses_test/": ""}, uid: euid + 1,
			refusedPath: "wd/.murmur/ses_test", problem: "is owned by uid"},
		{rule: "a session directory its group can write is refused",
			layout: fixture.Layout{"wd/.murmur/ses_test/": ""}, mode: 0o770,
			refusedPath: "wd/.murmur/ses_test", problem: "is writable by group or others (mode 0770)"},
		{rule: "a session directory others can write is refused",
			layout: fixture.Layout{"wd/.murmur/ses_test/": ""}, mode: 0o703,
			refusedPath: "wd/.murmur/ses_test", problem: "is writable by group or others (mode 0703)"},
	}
	for _, tc := range tests {
		t.Run(tc.rule, func(t *testing.T) {
			dir := t.TempDir()
			fixture.Write(t, dir, tc.layout)
			if tc.mode != 0 {
				if err := os.Chmod(filepath.Join(dir, "wd/.murmur", testSession), tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			uid := tc.uid
			if uid == 0 {
				uid = euid
			}
			before := fixture.Snapshot(t, dir)
			sd, err := openSessionDir(filepath.Join(dir, "wd"), testSession, uid)
			if tc.refusedPath == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				defer sd.Close()
				for _, p := range []string{"wd/.murmur", "wd/.murmur/" + testSession} {
					if fi, err := os.Lstat(filepath.Join(dir, p)); err != nil || !fi.IsDir() {
						t.Fatalf("%s: %v, %v; want a directory", p, fi, err)
					}
				}
				if sd.Path() != filepath.Join(dir, "wd/.murmur", testSession) {
					t.Errorf("Path() = %q", sd.Path())
				}
				return
			}
			var unsafe *UnsafeError
			if !errors.As(err, &unsafe) {
				t.Fatalf("error %v (%T); want an *UnsafeError", err, err)
			}
			if unsafe.Path != filepath.Join(dir, tc.refusedPath) || !strings.Contains(unsafe.Problem, tc.problem) || unsafe.Fix == "" {
				t.Errorf("refusal %+v; want path %s and a problem saying %q, and a fix", unsafe, filepath.Join(dir, tc.refusedPath), tc.problem)
			}
			if !strings.Contains(err.Error(), unsafe.Path+" "+unsafe.Problem) {
				t.Errorf("message %q does not name the path and the problem", err)
			}
			if after := fixture.Snapshot(t, dir); !slices.Equal(before, after) {
				t.Errorf("the refusal changed the tree:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

func TestANewSessionDirectoryIsCreated0700(t *testing.T) {
	wd := t.TempDir()
	sd, err := OpenSessionDir(wd, testSession)
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	for _, p := range []string{filepath.Join(wd, ".murmur"), sd.Path()} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want mode 0700", p, fi, err)
		}
	}
}

func TestASessionIDThatIsNotOneFileNameIsRefused(t *testing.T) {
	for _, id := range []string{"", ".", "..", "a/b", "../x", "a\x00b"} {
		wd := t.TempDir()
		if sd, err := OpenSessionDir(wd, id); err == nil {
			sd.Close()
			t.Errorf("OpenSessionDir(%q) succeeded", id)
		}
		if entries, _ := os.ReadDir(wd); len(entries) != 0 {
			t.Errorf("OpenSessionDir(%q) created %v", id, entries)
		}
	}
}

// TestOpenTraceNeverFollowsTheFilesName pins OpenTrace: the trace is created 0600 and
// appended to; a symlink at its name is refused (its target untouched), whether the trace is
// in the session directory or given explicitly elsewhere.
func TestOpenTraceNeverFollowsTheFilesName(t *testing.T) {
	dir := t.TempDir()
	fixture.Write(t, dir, fixture.Layout{"wd/": "", "outside/precious": "root only\n"})
	sd, err := OpenSessionDir(filepath.Join(dir, "wd"), testSession)
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	trace := filepath.Join(sd.Path(), "trace.jsonl")
	for _, line := range []string{"one\n", "two\n"} {
		f, err := sd.OpenTrace(trace)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if data, err := os.ReadFile(trace); err != nil || string(data) != "one\ntwo\n" {
		t.Fatalf("trace %q, %v; want both lines appended", data, err)
	}
	if fi, _ := os.Stat(trace); fi.Mode().Perm() != 0o600 {
		t.Errorf("trace mode %v, want 0600", fi.Mode().Perm())
	}

	explicit := filepath.Join(dir, "logs", "deep", "t.jsonl")
	f, err := sd.OpenTrace(explicit)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, p := range []string{filepath.Join(dir, "logs"), filepath.Join(dir, "logs", "deep")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("an explicit trace's directory %s: %v, %v; want it created 0700", p, fi, err)
		}
	}
	for _, path := range []string{trace, explicit} {
		fixture.Write(t, filepath.Dir(path), fixture.Layout{filepath.Base(path) + " -> " + filepath.Join(dir, "outside/precious"): ""})
		var unsafe *UnsafeError
		if _, err := sd.OpenTrace(path); !errors.As(err, &unsafe) || unsafe.Path != path || unsafe.Problem != "is a symlink" {
			t.Errorf("OpenTrace through a symlink at %s = %v; want an UnsafeError saying it is a symlink", path, err)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "outside/precious")); string(data) != "root only\n" {
		t.Errorf("the symlink's target was written: %q", data)
	}
}

// TestTheHeldDirectoryIsNotRedirected pins that, once open, the session directory is used
// through its descriptor: replacing .murmur with a symlink afterwards sends neither the trace
// nor OpenDir's descriptor anywhere else.
func TestTheHeldDirectoryIsNotRedirected(t *testing.T) {
	dir := t.TempDir()
	fixture.Write(t, dir, fixture.Layout{"wd/": "", "outside/": ""})
	sd, err := OpenSessionDir(filepath.Join(dir, "wd"), testSession)
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	if err := os.Rename(filepath.Join(dir, "wd/.murmur"), filepath.Join(dir, "wd/moved")); err != nil {
		t.Fatal(err)
	}
	fixture.Write(t, dir, fixture.Layout{"outside/" + testSession + "/": "", "wd/.murmur -> ../outside": ""})

	f, err := sd.OpenTrace(filepath.Join(sd.Path(), "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	held, err := sd.OpenDir(sd.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkdirat(int(held.Fd()), "spool", 0o700); err != nil {
		t.Fatal(err)
	}
	held.Close()
	if _, err := os.Stat(filepath.Join(dir, "wd/moved", testSession, "trace.jsonl")); err != nil {
		t.Errorf("the trace is not in the held directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "wd/moved", testSession, "spool")); err != nil {
		t.Errorf("OpenDir's descriptor is not the held directory: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "outside", testSession)); len(entries) != 0 {
		t.Errorf("something was created through the planted symlink: %v", entries)
	}
	// The held descriptor outlives the duplicate OpenDir gave out.
	if _, err := sd.OpenTrace(filepath.Join(sd.Path(), "trace.jsonl")); err != nil {
		t.Errorf("OpenTrace after closing OpenDir's duplicate: %v", err)
	}
}

// TestOpenDirNeverFollowsTheDirectorysOwnName pins OpenDir for a directory elsewhere (an
// explicit --spool-dir): a symlink at its own name, even one swapped in after the launch's
// check, is an UnsafeError and nothing is created through it; its parents are created and
// followed (the operator's path).
func TestOpenDirNeverFollowsTheDirectorysOwnName(t *testing.T) {
	dir := t.TempDir()
	fixture.Write(t, dir, fixture.Layout{"wd/": "", "outside/": "", "elsewhere/spool -> ../outside": "", "via -> elsewhere": ""})
	sd, err := OpenSessionDir(filepath.Join(dir, "wd"), testSession)
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	var unsafe *UnsafeError
	if _, err := sd.OpenDir(filepath.Join(dir, "elsewhere/spool")); !errors.As(err, &unsafe) || unsafe.Problem != "is a symlink" {
		t.Fatalf("OpenDir of a symlink: error %v, want an UnsafeError saying it is a symlink", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "outside")); len(entries) != 0 {
		t.Errorf("something was created through the symlink: %v", entries)
	}
	made, err := sd.OpenDir(filepath.Join(dir, "via/new/spool"))
	if err != nil {
		t.Fatalf("OpenDir beneath a followed parent: %v", err)
	}
	made.Close()
	if st, err := os.Lstat(filepath.Join(dir, "elsewhere/new/spool")); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("the new directory: %v, %v; want a directory with mode 0700", st, err)
	}
}

// TestCheckUnfollowedRefusesAPlantedLink pins CheckUnfollowed, one row per rule: a symlink at
// the path's own name is refused wherever the path is; beneath the workdir, so is a symlink
// at any component on the way; outside it, parents are the operator's and are followed; a
// missing component ends the check.
func TestCheckUnfollowedRefusesAPlantedLink(t *testing.T) {
	dir := t.TempDir()
	fixture.Write(t, dir, fixture.Layout{
		"wd/real/": "", "wd/link -> real": "", "outside/": "", "outlink -> outside": "",
	})
	wd := filepath.Join(dir, "wd")
	for _, tc := range []struct {
		rule, path, problem string // problem "" for accepted
	}{
		{"a real directory beneath the workdir is accepted", "wd/real", ""},
		{"a missing path beneath the workdir is accepted", "wd/real/new/spool", ""},
		{"a symlink at the path's own name is refused", "wd/link", "is a symlink"},
		{"a symlink on the way beneath the workdir is refused", "wd/link/spool", "through the symlink " + filepath.Join(wd, "link")},
		{"a symlink at the own name outside the workdir is refused", "outlink", "is a symlink"},
		{"a symlink among the parents outside the workdir is followed", "outlink/spool", ""},
		{"the workdir itself is accepted", "wd", ""},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			err := CheckUnfollowed("the spool directory", filepath.Join(dir, tc.path), wd)
			if tc.problem == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var unsafe *UnsafeError
			if !errors.As(err, &unsafe) || !strings.Contains(unsafe.Problem, tc.problem) || unsafe.Path != filepath.Join(dir, tc.path) {
				t.Fatalf("error %v, want an UnsafeError for %s that %s", err, tc.path, tc.problem)
			}
		})
	}
}
