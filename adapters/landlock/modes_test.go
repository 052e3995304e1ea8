package landlock_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/resplane/resplane/adapters/landlock"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

func TestResultNamesTheABIOrNone(t *testing.T) {
	for _, tc := range []struct {
		name string
		abi  int
		want string
	}{
		{"no confinement is none", 0, "none"},
		{"ABI 1 is landlock-v1", 1, "landlock-v1"},
		{"a two-digit ABI is written whole", 11, "landlock-v11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (landlock.Result{ABI: tc.abi}).String(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestConfineWithoutRestricting pins the paths of Confine that never restrict this (the
// test) process: off, an unknown mode, and a kernel without Landlock (forced through the
// documented test hook). The ones that do restrict run in a helper process
// (TestConfinedProcessMeetsTheWall).
func TestConfineWithoutRestricting(t *testing.T) {
	policy := landlock.Policy{Workdir: t.TempDir()}
	for _, tc := range []struct {
		name    string
		mode    landlock.Mode
		absent  bool
		wantErr error // nil: no error; errAny: some error
	}{
		{"off applies nothing", landlock.Off, false, nil},
		{"off applies nothing where Landlock is absent", landlock.Off, true, nil},
		{"auto achieves none where Landlock is absent", landlock.Auto, true, nil},
		{"required fails where Landlock is absent", landlock.Required, true, landlock.ErrUnavailable},
		{"an unknown mode is an error", landlock.Mode("sometimes"), false, errAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.absent {
				t.Setenv("RESPLANE_TEST_LANDLOCK_ABSENT", "1")
				if abi := landlock.ABI(); abi != 0 {
					t.Fatalf("ABI() = %d under the test hook, want 0", abi)
				}
			}
			got, err := landlock.Confine(tc.mode, policy)
			switch {
			case tc.wantErr == nil:
				if err != nil {
					t.Fatalf("error %v", err)
				}
			case err == nil || tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if got.String() != "none" {
				t.Fatalf("achieved %q, want none", got)
			}
			// Nothing was restricted: this process still lists outside the workdir.
			if _, err := os.ReadDir(filepath.Dir(os.Args[0])); err != nil {
				t.Fatalf("reading outside the workdir after Confine: %v", err)
			}
		})
	}
}

var errAny = errors.New("any error")

// TestAWritableDirectoryWithoutAnAnchorRefusesConfinement pins Policy.Writable: a writable
// directory the rule cannot be anchored on (beneath the workdir through a symlink, or
// missing) fails Confine with an error naming it, before anything is restricted, instead of
// leaving the service to write there without a rule (every write then denied) or unconfined.
func TestAWritableDirectoryWithoutAnAnchorRefusesConfinement(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("this kernel offers no Landlock: Confine anchors nothing here")
	}
	box := t.TempDir()
	fixture.Write(t, box, fixture.Layout{"wd/": "", "outside/spool/": "", "wd/planted -> ../outside": ""})
	wd := filepath.Join(box, "wd")
	for _, tc := range []struct{ name, dir string }{
		{"a directory reached beneath the workdir through a planted symlink", filepath.Join(wd, "planted/spool")},
		{"a directory that is missing", filepath.Join(box, "missing")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := landlock.Confine(landlock.Auto, landlock.Policy{Workdir: wd, Writable: []string{tc.dir}})
			if err == nil || !strings.Contains(err.Error(), tc.dir) || !strings.Contains(err.Error(), "Landlock rule") {
				t.Fatalf("Confine: error %v, want one naming %s and its Landlock rule", err, tc.dir)
			}
			if got.String() != "none" {
				t.Fatalf("achieved %q, want none", got)
			}
			if _, err := os.ReadDir(filepath.Dir(os.Args[0])); err != nil {
				t.Fatalf("reading outside the workdir after the refusal: %v", err)
			}
		})
	}
}
