package blackbox_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/resplane/resplane/adapters/landlock"
	"github.com/resplane/resplane/test/harness"
)

// absentEnv forces "this kernel has no Landlock" in the binary (docs/operator-guide.md,
// "Confinement": a hook for tests only).
const absentEnv = "RESPLANE_TEST_LANDLOCK_ABSENT=1"

// TestConfinementIsReportedInTheReadyLineAndStatus pins docs/operator-guide.md, "Confinement":
// the ready line and GET /v1/status report "landlock-v<ABI>" when the process confined itself
// and "none" otherwise. The harness runs every black-box test with --confine required where
// the kernel offers Landlock, so the first row also shows that the rest of the suites ran
// behind the wall.
func TestConfinementIsReportedInTheReadyLineAndStatus(t *testing.T) {
	offered := "none"
	if abi := landlock.ABI(); abi > 0 {
		offered = "landlock-v" + strconv.Itoa(abi)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"the harness's default run is confined where the kernel offers Landlock", nil, nil, offered},
		{"auto confines with what the kernel offers", []string{"--confine", "auto"}, nil, offered},
		{"required confines with what the kernel offers", []string{"--confine", "required"}, nil, offered},
		{"off is not confined", []string{"--confine", "off"}, nil, "none"},
		{"auto runs unconfined where Landlock is absent", []string{"--confine", "auto"}, []string{absentEnv}, "none"},
		{"RESPLANE_CONFINE chooses like the flag", nil, []string{"RESPLANE_CONFINE=off"}, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Args: tc.args, Env: tc.env})
			if p.Ready.Confinement != tc.want {
				t.Fatalf("ready line confinement %q, want %q", p.Ready.Confinement, tc.want)
			}
			status := harness.Object(t, harness.Control(t, p.Ready.Control, "GET", "/v1/status", nil).Raw)
			if status["confinement"] != tc.want {
				t.Fatalf("GET /v1/status confinement %v, want %q", status["confinement"], tc.want)
			}
		})
	}
}

// TestConfineRequiredWithoutLandlockExitsOneAndCreatesNothing pins docs/operator-guide.md,
// "Exit statuses": --confine required where Landlock is absent (forced through the test hook)
// refuses to start with exit 1 and one line naming the flag, before anything is bound or
// created.
func TestConfineRequiredWithoutLandlockExitsOneAndCreatesNothing(t *testing.T) {
	dir, manifest := bbLaunchDir(t, bbFilesManifest("out/", ""), nil)
	before := bbTree(t, dir)
	for _, tc := range []struct {
		name string
		args []string
		env  []string
	}{
		{"by the flag", []string{"--confine", "required"}, []string{absentEnv}},
		{"by the environment", nil, []string{absentEnv, "RESPLANE_CONFINE=required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--manifest", manifest, "--workdir", dir + "/wd", "--listen", "127.0.0.1:0"}, tc.args...)
			code, stdout, stderr := harness.RunCLI(t, tc.env, args...)
			if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 ||
				!strings.Contains(stderr, "--confine required") || !strings.Contains(stderr, "Landlock") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and one line naming --confine required and Landlock", code, stdout, stderr)
			}
			if after := bbTree(t, dir); !slices.Equal(before, after) {
				t.Errorf("created %v", after)
			}
		})
	}
}

// TestPeerInIsCreatedAtStartOnlyForFetchPeerFile pins docs/operator-guide.md, "Files resplane
// creates": peer-in/ (0700) exists once serve is ready when capabilities.peer_fetch is
// declared, so that confinement can grant writes beneath it, and is not created otherwise.
func TestPeerInIsCreatedAtStartOnlyForFetchPeerFile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		manifest string
		want     bool
	}{
		{"created when peer_fetch is declared", "name: fetcher\ncapabilities:\n  peer_fetch:\n    allow: [\"127.0.0.1\"]\n", true},
		{"not created otherwise", bbFilesManifest("out/", ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := harness.Start(t, harness.Capsule{Manifest: tc.manifest})
			info, err := os.Lstat(filepath.Join(p.Workdir, "peer-in"))
			switch {
			case tc.want && (err != nil || !info.IsDir() || info.Mode().Perm() != 0o700):
				t.Fatalf("peer-in = %v, %v; want a 0700 directory", info, err)
			case !tc.want && !os.IsNotExist(err):
				t.Fatalf("peer-in = %v, %v; want none", info, err)
			}
		})
	}
}
