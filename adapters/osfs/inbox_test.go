package osfs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

const handleID = "3f2a91c40b7e5d68"

// scheme is how an inbox stages a file: unnamed (O_TMPFILE), or as a .part file where the
// filesystem refuses unnamed files.
type scheme struct {
	name  string
	setup func(*osfs.Inbox)
}

var schemes = []scheme{{"unnamed", func(*osfs.Inbox) {}}, {".part", osfs.UsePartFiles}}

// forEachScheme runs test once per staging scheme.
func forEachScheme(t *testing.T, test func(t *testing.T, sc scheme)) {
	for _, sc := range schemes {
		t.Run(sc.name, func(t *testing.T) { test(t, sc) })
	}
}

// openInbox returns the inbox, staging by sc, of a new temp workdir and that workdir's path.
func openInbox(t *testing.T, sc scheme) (*osfs.Inbox, string) {
	t.Helper()
	workdir := t.TempDir()
	return openInboxAt(t, workdir, sc), workdir
}

// openInboxAt opens the inbox of workdir, staging by sc.
func openInboxAt(t *testing.T, workdir string, sc scheme) *osfs.Inbox {
	t.Helper()
	in, err := osfs.OpenInbox(workdir)
	if err != nil {
		t.Fatal(err)
	}
	sc.setup(in)
	t.Cleanup(func() { in.Close() })
	return in
}

// partName matches the name of a .part temp file for handleID.
var partName = regexp.MustCompile(`^\.` + handleID + `-[0-9a-f]{16}\.part$`)

// entries lists dir's names, sorted; a missing dir lists nothing.
func inboxEntries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name())
	}
	return names
}

// mustStage stages a file for handleID in in, to be stored as name.
func mustStage(t *testing.T, in *osfs.Inbox, name string) ports.Landing {
	t.Helper()
	f, stored, err := in.Stage(handleID, name)
	if err != nil {
		t.Fatal(err)
	}
	if stored != "peer-in/"+name {
		t.Fatalf("Stage says the file will be stored at %q, want peer-in/%s", stored, name)
	}
	return f
}

// wantStageRefused requires Stage(id, name) to fail with an io_error refusal that names no
// host path.
func wantStageRefused(t *testing.T, in *osfs.Inbox, id, name, workdir string) {
	t.Helper()
	f, _, err := in.Stage(id, name)
	if err == nil {
		f.Discard()
	}
	wantIOError(t, err, workdir)
}

func writeStaged(t *testing.T, f ports.Landing, s string) {
	t.Helper()
	if n, err := f.Write([]byte(s)); err != nil || n != len(s) {
		t.Fatalf("Write = %d, %v", n, err)
	}
}

// wantIOError fails unless err is an io_error refusal that names no host path.
func wantIOError(t *testing.T, err error, workdir string) {
	t.Helper()
	r, ok := refusal.As(err)
	if !ok || r.Code != refusal.IOError {
		t.Fatalf("error = %v, want an io_error refusal", err)
	}
	if strings.Contains(r.Message, workdir) || strings.Contains(r.Message, os.TempDir()) {
		t.Errorf("message %q names a host path", r.Message)
	}
}

func TestStageCreatesPeerInAndAPrivateFileNamedOnlyInThePartScheme(t *testing.T) {
	forEachScheme(t, func(t *testing.T, sc scheme) {
		in, workdir := openInbox(t, sc)
		f := mustStage(t, in, handleID+"-report.md")
		defer f.Discard()
		writeStaged(t, f, "partial")
		dir := filepath.Join(workdir, "peer-in")
		info, err := os.Lstat(dir)
		if err != nil || !info.IsDir() || info.Mode().Perm()&0o077 != 0 {
			t.Fatalf("peer-in = %v, %v; want a directory closed to group and others", info, err)
		}
		names := inboxEntries(t, dir)
		if sc.name == "unnamed" {
			if len(names) != 0 {
				t.Fatalf("peer-in holds %q while a file is staged, want nothing named", names)
			}
			return
		}
		if len(names) != 1 || !partName.MatchString(names[0]) {
			t.Fatalf("peer-in holds %q, want one .<handle id>-<16 hex>.part", names)
		}
		info, err = os.Lstat(filepath.Join(dir, names[0]))
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm() != 0o600 {
			t.Errorf("temp file = %v, %v; want a 0600 regular file", info, err)
		}
	})
}

func TestCommitStoresTheBytesUnderTheName(t *testing.T) {
	forEachScheme(t, func(t *testing.T, sc scheme) {
		in, workdir := openInbox(t, sc)
		f, stored, err := in.Stage(handleID, handleID+"-report.md")
		if err != nil {
			t.Fatal(err)
		}
		writeStaged(t, f, "hello, ")
		writeStaged(t, f, "peer")
		if err := f.Commit(time.Time{}); err != nil {
			t.Fatal(err)
		}
		if stored != "peer-in/"+handleID+"-report.md" {
			t.Errorf("stored path = %q", stored)
		}
		got, err := os.ReadFile(filepath.Join(workdir, stored))
		if err != nil || string(got) != "hello, peer" {
			t.Errorf("stored bytes = %q, %v", got, err)
		}
		if info, err := os.Lstat(filepath.Join(workdir, stored)); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("stored file = %v, %v; want mode 0600", info, err)
		}
		if names := inboxEntries(t, filepath.Join(workdir, "peer-in")); !slices.Equal(names, []string{handleID + "-report.md"}) {
			t.Errorf("peer-in holds %q, want only the stored file", names)
		}
		f.Discard() // after Commit: a no-op that must not remove the stored file
		if _, err := os.Stat(filepath.Join(workdir, stored)); err != nil {
			t.Errorf("Discard after Commit removed the file: %v", err)
		}
	})
}

func TestCommitGivesTheFileTheModificationTimeAsked(t *testing.T) {
	forEachScheme(t, func(t *testing.T, sc scheme) {
		in, workdir := openInbox(t, sc)
		mtime := time.UnixMilli(1_600_000_000_123)
		for _, tc := range []struct {
			rule  string
			name  string
			given time.Time
		}{
			{"a time given is the file's modification time", handleID + "-dated.txt", mtime},
			{"the zero time leaves the time of the landing", handleID + "-now.txt", time.Time{}},
		} {
			t.Run(tc.rule, func(t *testing.T) {
				before := time.Now().Add(-time.Second)
				f := mustStage(t, in, tc.name)
				writeStaged(t, f, "bytes")
				if err := f.Commit(tc.given); err != nil {
					t.Fatal(err)
				}
				info, err := os.Stat(filepath.Join(workdir, "peer-in", tc.name))
				switch {
				case err != nil:
					t.Fatal(err)
				case !tc.given.IsZero() && !info.ModTime().Equal(tc.given):
					t.Errorf("mtime = %v, want %v", info.ModTime(), tc.given)
				case tc.given.IsZero() && info.ModTime().Before(before):
					t.Errorf("mtime = %v, want the time of the landing (after %v)", info.ModTime(), before)
				}
			})
		}
	})
}

func TestCommitReplacesAnEarlierFileAndASymlinkWithoutWritingThroughIt(t *testing.T) {
	forEachScheme(t, func(t *testing.T, sc scheme) {
		in, workdir := openInbox(t, sc)
		outside := filepath.Join(t.TempDir(), "victim.txt")
		if err := os.WriteFile(outside, []byte("untouched"), 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(workdir, "peer-in")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "earlier.txt"), []byte("old version"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(dir, "link.txt")); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"earlier.txt", "link.txt"} {
			f := mustStage(t, in, name)
			writeStaged(t, f, "new")
			if err := f.Commit(time.Time{}); err != nil {
				t.Fatal(err)
			}
			info, err := os.Lstat(filepath.Join(dir, name))
			if err != nil || !info.Mode().IsRegular() {
				t.Fatalf("%s = %v, %v; want a regular file", name, info, err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, name)); string(got) != "new" {
				t.Errorf("%s holds %q, want the new bytes", name, got)
			}
		}
		if got, _ := os.ReadFile(outside); string(got) != "untouched" {
			t.Errorf("the symlink's target was written: %q", got)
		}
		if names := inboxEntries(t, dir); !slices.Equal(names, []string{"earlier.txt", "link.txt"}) {
			t.Errorf("peer-in holds %q, want only the two replaced names", names)
		}
	})
}

func TestStageRefusesAPeerInThatIsNotARealDirectory(t *testing.T) {
	forEachScheme(t, func(t *testing.T, sc scheme) {
		for _, tc := range []struct {
			name  string
			setup func(t *testing.T, peerIn, elsewhere string)
		}{
			{"symlink to a directory", func(t *testing.T, peerIn, elsewhere string) {
				if err := os.Symlink(elsewhere, peerIn); err != nil {
					t.Fatal(err)
				}
			}},
			{"dangling symlink", func(t *testing.T, peerIn, elsewhere string) {
				if err := os.Symlink(filepath.Join(elsewhere, "missing"), peerIn); err != nil {
					t.Fatal(err)
				}
			}},
			{"regular file", func(t *testing.T, peerIn, _ string) {
				if err := os.WriteFile(peerIn, []byte("not a dir"), 0o600); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in, workdir := openInbox(t, sc)
				elsewhere := t.TempDir()
				tc.setup(t, filepath.Join(workdir, "peer-in"), elsewhere)
				wantStageRefused(t, in, handleID, handleID+"-report.md", workdir)
				if names := inboxEntries(t, elsewhere); len(names) != 0 {
					t.Errorf("written through peer-in: %q", names)
				}
				if names := inboxEntries(t, workdir); !slices.Equal(names, []string{"peer-in"}) {
					t.Errorf("workdir holds %q, want only peer-in", names)
				}
			})
		}
	})
}

func TestStageRefusesAHandleIDThatIsNotPartOfAName(t *testing.T) {
	forEachScheme(t, func(t *testing.T, sc scheme) {
		in, workdir := openInbox(t, sc)
		for _, id := range []string{"../escape", "a/b", "nul\x00"} {
			wantStageRefused(t, in, id, handleID+"-report.md", workdir)
		}
		if names := inboxEntries(t, workdir); len(names) != 0 {
			t.Errorf("workdir holds %q, want nothing", names)
		}
	})
}

func TestStageRefusesANameThatIsNotOneFileName(t *testing.T) {
	forEachScheme(t, func(t *testing.T, sc scheme) {
		for _, tc := range []struct{ name, store string }{
			{"empty name", ""},
			{"dot", "."},
			{"dot dot", ".."},
			{"two components", "sub/file.txt"},
			{"NUL", "a\x00b"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in, workdir := openInbox(t, sc)
				wantStageRefused(t, in, handleID, tc.store, workdir)
				if names := inboxEntries(t, workdir); len(names) != 0 {
					t.Errorf("workdir holds %q, want nothing: no peer-in, no temp file", names)
				}
			})
		}
	})
}

func TestAFailedCommitLeavesNoTempFile(t *testing.T) {
	forEachScheme(t, func(t *testing.T, sc scheme) {
		for _, tc := range []struct {
			name  string
			setup func(t *testing.T, peerIn string)
			store string
		}{
			{"name is a directory", func(t *testing.T, peerIn string) {
				if err := os.MkdirAll(filepath.Join(peerIn, "taken", "child"), 0o700); err != nil {
					t.Fatal(err)
				}
			}, "taken"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in, workdir := openInbox(t, sc)
				peerIn := filepath.Join(workdir, "peer-in")
				f := mustStage(t, in, tc.store)
				if tc.setup != nil {
					tc.setup(t, peerIn)
				}
				before := slices.DeleteFunc(inboxEntries(t, peerIn), partName.MatchString)
				writeStaged(t, f, "bytes")
				err := f.Commit(time.Time{})
				wantIOError(t, err, workdir)
				f.Discard() // what the application does after a failed Commit: must be harmless
				if after := inboxEntries(t, peerIn); !slices.Equal(after, before) {
					t.Errorf("peer-in holds %q, want %q: no temp file, nothing new", after, before)
				}
				if err := f.Commit(time.Time{}); err == nil {
					t.Error("a second Commit succeeded")
				}
			})
		}
	})
}

func TestDiscardLeavesNothing(t *testing.T) {
	forEachScheme(t, func(t *testing.T, sc scheme) {
		in, workdir := openInbox(t, sc)
		f := mustStage(t, in, handleID+"-report.md")
		writeStaged(t, f, "partial")
		f.Discard()
		f.Discard()
		if names := inboxEntries(t, filepath.Join(workdir, "peer-in")); len(names) != 0 {
			t.Errorf("peer-in holds %q after Discard", names)
		}
		if _, err := f.Write([]byte("late")); err == nil {
			t.Error("Write after Discard succeeded")
		}
	})
}

func TestConcurrentStagesOfOneHandleDoNotCollide(t *testing.T) {
	forEachScheme(t, func(t *testing.T, sc scheme) {
		in, workdir := openInbox(t, sc)
		const n = 32
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				// Every even stage commits its own name; half of them also race on one shared name.
				name := handleID + "-" + strconv.Itoa(i) + ".txt"
				if i%4 == 0 {
					name = handleID + "-shared.txt"
				}
				f, _, err := in.Stage(handleID, name)
				if err != nil {
					errs <- err
					return
				}
				body := strings.Repeat(strconv.Itoa(i), 1000)
				if _, err := f.Write([]byte(body)); err != nil {
					errs <- err
					f.Discard()
					return
				}
				if i%2 == 1 {
					f.Discard()
					return
				}
				if err := f.Commit(time.Time{}); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		dir := filepath.Join(workdir, "peer-in")
		names := inboxEntries(t, dir)
		if len(names) != n/4+1 {
			t.Errorf("peer-in holds %d files %q, want %d", len(names), names, n/4+1)
		}
		bodyOf := func(i int) string { return strings.Repeat(strconv.Itoa(i), 1000) }
		for i := 0; i < n; i += 2 {
			name, writers := handleID+"-"+strconv.Itoa(i)+".txt", []string{bodyOf(i)}
			if i%4 == 0 {
				name, writers = handleID+"-shared.txt", nil
				for j := 0; j < n; j += 4 {
					writers = append(writers, bodyOf(j))
				}
			}
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !slices.Contains(writers, string(got)) {
				t.Errorf("%s holds a torn, mixed or foreign body (%d bytes, %v)", name, len(got), err)
			}
		}
	})
}

func TestOpenFailsForAMissingWorkdir(t *testing.T) {
	if in, err := osfs.OpenInbox(filepath.Join(t.TempDir(), "missing")); err == nil {
		in.Close()
		t.Fatal("Open of a missing workdir succeeded")
	}
}

func TestCreateMakesPeerInOnlyAsARealDirectory(t *testing.T) {
	t.Run("a missing peer-in is created 0700", func(t *testing.T) {
		in, workdir := openInbox(t, schemes[0])
		if err := in.Create(); err != nil {
			t.Fatal(err)
		}
		info, err := os.Lstat(filepath.Join(workdir, "peer-in"))
		if err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
			t.Fatalf("peer-in = %v, %v; want a 0700 directory", info, err)
		}
		if err := in.Create(); err != nil {
			t.Fatalf("Create over an existing peer-in: %v", err)
		}
	})
	t.Run("a peer-in that is a symlink is refused and not followed", func(t *testing.T) {
		in, workdir := openInbox(t, schemes[0])
		elsewhere := t.TempDir()
		if err := os.Symlink(elsewhere, filepath.Join(workdir, "peer-in")); err != nil {
			t.Fatal(err)
		}
		wantIOError(t, in.Create(), workdir)
		if names := inboxEntries(t, elsewhere); len(names) != 0 {
			t.Errorf("created through the symlink: %q", names)
		}
	})
}

// TestOpenInboxRemovesOnlyTheTempFilesEarlierProcessesLeft pins the start-up sweep
// (docs/peer-plane.md, "Landing"): a regular file with a temp name, modified before this
// process started and locked by nobody, is removed; anything else in peer-in stays, and
// nothing is followed through a link.
func TestOpenInboxRemovesOnlyTheTempFilesEarlierProcessesLeft(t *testing.T) {
	const (
		stale = "." + handleID + "-00112233aabbccdd.part"
		other = "." + handleID + "-ffeeddccbbaa9988.part"
	)
	past := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name string
		// lay puts the case's entries in workdir's peer-in, or elsewhere (outside the workdir).
		lay      func(t *testing.T, workdir, elsewhere string)
		wantGone bool
	}{
		{"a temp file an earlier process left is removed", func(t *testing.T, workdir, _ string) {
			writeAged(t, filepath.Join(workdir, "peer-in", stale), past)
		}, true},
		{"a temp file modified after this process started is kept", func(t *testing.T, workdir, _ string) {
			writeAged(t, filepath.Join(workdir, "peer-in", stale), time.Now().Add(time.Minute))
		}, false},
		{"a temp file a live process holds locked is kept", func(t *testing.T, workdir, _ string) {
			path := filepath.Join(workdir, "peer-in", stale)
			writeAged(t, path, past)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a stored file is kept however old", func(t *testing.T, workdir, _ string) {
			writeAged(t, filepath.Join(workdir, "peer-in", handleID+"-report.part"), past)
		}, false},
		{"a symlink with a temp name is kept and its target untouched", func(t *testing.T, workdir, elsewhere string) {
			target := filepath.Join(elsewhere, "target")
			writeAged(t, target, past)
			mkdir(t, filepath.Join(workdir, "peer-in"))
			if err := os.Symlink(target, filepath.Join(workdir, "peer-in", stale)); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a directory with a temp name is kept", func(t *testing.T, workdir, _ string) {
			mkdir(t, filepath.Join(workdir, "peer-in", stale))
		}, false},
		{"temp files behind a peer-in symlink are not touched", func(t *testing.T, workdir, elsewhere string) {
			writeAged(t, filepath.Join(elsewhere, stale), past)
			if err := os.Symlink(elsewhere, filepath.Join(workdir, "peer-in")); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			workdir, elsewhere := t.TempDir(), t.TempDir()
			tc.lay(t, workdir, elsewhere)
			writeAged(t, filepath.Join(elsewhere, other), past) // outside the workdir: never swept
			listing := func() []string {
				return append(inboxEntries(t, filepath.Join(workdir, "peer-in")), inboxEntries(t, elsewhere)...)
			}
			want := listing()
			if tc.wantGone {
				want = slices.DeleteFunc(want, func(n string) bool { return n == stale })
			}
			openInboxAt(t, workdir, schemes[0])
			if got := listing(); !slices.Equal(got, want) {
				t.Fatalf("after the sweep: %q, want %q", got, want)
			}
		})
	}
}

// writeAged writes a small file at path, creating its directory, and sets its modification
// time to mtime.
func writeAged(t *testing.T, path string, mtime time.Time) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte("leftover"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}
