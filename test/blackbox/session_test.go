package blackbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbSessionID is the session id the session-directory tests launch with: like a real one, it
// is public (it is on the agent card), so the agent can plant links under it beforehand.
const bbSessionID = "ses_planted"

// TestSessionPathsTheAgentPlantedRefuseTheLaunch pins docs/operator-guide.md, "Files resplane
// creates" and "Threat model": the session directory <workdir>/.murmur/<session id>/ is
// reached without following a symlink and must be a directory the service's user owns and
// nobody else can write; its trace and control socket are never created or removed through a
// symlink. When the agent (who owns the workdir and knows the session id) planted a link or a
// directory of its own there, serve exits 1 with one line on stderr naming the path, what is
// wrong and what to do, and writes nothing anywhere: no trace line, no socket, no byte in the
// link's target.
func TestSessionPathsTheAgentPlantedRefuseTheLaunch(t *testing.T) {
	sessionDir := "wd/.murmur/" + bbSessionID
	tests := []struct {
		name  string
		files fixture.Layout // relative to the dir holding murmur.yaml; wd/ is the workdir
		// What the layout cannot say: the session directory's mode and owner, when not 0.
		mode  os.FileMode
		owner int
		path  string   // the refused path, relative to the dir
		says  []string // what the line must also say
	}{
		{name: ".murmur is a symlink out of the workdir",
			files: fixture.Layout{"outside/": "", "wd/.murmur -> ../outside": ""},
			path:  "wd/.murmur", says: []string{"symlink", "remove"}},
		{name: ".murmur is a symlink to a directory inside the workdir",
			files: fixture.Layout{"wd/elsewhere/": "", "wd/.murmur -> elsewhere": ""},
			path:  "wd/.murmur", says: []string{"symlink", "remove"}},
		{name: ".murmur is a regular file",
			files: fixture.Layout{"wd/.murmur": "not a directory"},
			path:  "wd/.murmur", says: []string{"not a directory", "remove"}},
		{name: "the session directory is a symlink out of the workdir",
			files: fixture.Layout{"outside/": "", sessionDir + " -> ../../outside": ""},
			path:  sessionDir, says: []string{"symlink", "remove"}},
		{name: "trace.jsonl is a symlink to an outside file",
			files: fixture.Layout{"outside/precious.txt": "root only\n", sessionDir + "/trace.jsonl -> ../../../outside/precious.txt": ""},
			path:  sessionDir + "/trace.jsonl", says: []string{"symlink", "remove"}},
		{name: "trace.jsonl is a dangling symlink out of the workdir",
			files: fixture.Layout{"outside/": "", sessionDir + "/trace.jsonl -> ../../../outside/new.txt": ""},
			path:  sessionDir + "/trace.jsonl", says: []string{"symlink", "remove"}},
		{name: "control.sock is a symlink out of the workdir",
			files: fixture.Layout{"outside/": "", sessionDir + "/control.sock -> ../../../outside/control.sock": ""},
			path:  sessionDir + "/control.sock", says: []string{"symlink", "remove"}},
		{name: "control.sock is a symlink to an outside file",
			files: fixture.Layout{"outside/precious.txt": "root only\n", sessionDir + "/control.sock -> ../../../outside/precious.txt": ""},
			path:  sessionDir + "/control.sock", says: []string{"symlink", "remove"}},
		{name: "control.sock is a regular file",
			files: fixture.Layout{sessionDir + "/control.sock": "not a socket"},
			path:  sessionDir + "/control.sock", says: []string{"not a socket", "remove"}},
		{name: "the session directory belongs to another user",
			files: fixture.Layout{sessionDir + "/": ""}, owner: 4242,
			path: sessionDir, says: []string{"owned by uid 4242", "uid " + strconv.Itoa(os.Geteuid()), "remove"}},
		{name: "the session directory is writable by others",
			files: fixture.Layout{sessionDir + "/": ""}, mode: 0o777,
			path: sessionDir, says: []string{"writable by group or others", "0777"}},
		{name: "the session directory is writable by its group",
			files: fixture.Layout{sessionDir + "/": ""}, mode: 0o770,
			path: sessionDir, says: []string{"writable by group or others", "0770"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, manifest := bbLaunchDir(t, bbFilesManifest("out/", ""), tc.files)
			if tc.mode != 0 {
				if err := os.Chmod(filepath.Join(dir, sessionDir), tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			if tc.owner != 0 {
				if os.Geteuid() != 0 {
					t.Skip("only root can give a directory to another user; adapters/osfs's unit tests pin the owner rule without root")
				}
				if err := os.Chown(filepath.Join(dir, sessionDir), tc.owner, tc.owner); err != nil {
					t.Fatal(err)
				}
			}
			before := fixture.Snapshot(t, dir)
			code, stdout, stderr := harness.RunCLI(t, nil, "serve", "--manifest", manifest, "--workdir", dir+"/wd",
				"--listen", "127.0.0.1:0", "--session-id", bbSessionID)
			if code != 1 || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want exit 1 and no ready line; stderr %q", code, stdout, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
				t.Fatalf("stderr is not exactly one line: %q", stderr)
			}
			for _, want := range append([]string{filepath.Join(dir, tc.path)}, tc.says...) {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not say %q", stderr, want)
				}
			}
			if after := fixture.Snapshot(t, dir); !slices.Equal(before, after) {
				t.Errorf("the refused launch changed the tree:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// TestPlantedSpoolTraceAndControlPathsRefuseTheLaunch pins docs/operator-guide.md, "Files
// resplane creates" and "Threat model": an explicit --spool-dir, --trace or --control is never
// used through a symlink at its own name, nor through one beneath the workdir on the way to it
// (where the Landlock rule for it could not be anchored either). The agent owns the workdir and
// can plant such a link before the operator starts the service; serve then exits 1 with one
// line naming the flag's path and the symlink, and creates nothing: no session directory, no
// byte where the link points, under --confine off as well.
func TestPlantedSpoolTraceAndControlPathsRefuseTheLaunch(t *testing.T) {
	tests := []struct {
		name  string
		files fixture.Layout // relative to the dir holding murmur.yaml; wd/ is the workdir
		flag  string
		path  string   // the flag's value, relative to the dir
		says  []string // what the line must also say
	}{
		{name: "the spool directory is a symlink out of the workdir",
			files: fixture.Layout{"outside/": "", "wd/spool -> ../outside": ""},
			flag:  "--spool-dir", path: "wd/spool", says: []string{"spool directory", "is a symlink", "remove"}},
		{name: "the spool directory is a symlink to a directory inside the workdir",
			files: fixture.Layout{"wd/elsewhere/": "", "wd/spool -> elsewhere": ""},
			flag:  "--spool-dir", path: "wd/spool", says: []string{"spool directory", "is a symlink", "remove"}},
		{name: "the spool directory outside the workdir is a symlink",
			files: fixture.Layout{"wd/": "", "outside/": "", "spool -> outside": ""},
			flag:  "--spool-dir", path: "spool", says: []string{"spool directory", "is a symlink", "remove"}},
		{name: "the spool directory is a dangling symlink",
			files: fixture.Layout{"outside/": "", "wd/spool -> ../outside/new": ""},
			flag:  "--spool-dir", path: "wd/spool", says: []string{"spool directory", "is a symlink", "remove"}},
		{name: "the spool directory lies beneath a planted symlink in the workdir",
			files: fixture.Layout{"outside/": "", "wd/scratch -> ../outside": ""},
			flag:  "--spool-dir", path: "wd/scratch/spool", says: []string{"spool directory", "through the symlink", "Landlock"}},
		{name: "the trace's directory lies beneath a planted symlink in the workdir",
			files: fixture.Layout{"outside/": "", "wd/logs -> ../outside": ""},
			flag:  "--trace", path: "wd/logs/trace.jsonl", says: []string{"trace file", "through the symlink", "Landlock"}},
		{name: "the control socket's directory lies beneath a planted symlink in the workdir",
			files: fixture.Layout{"outside/": "", "wd/run -> ../outside": ""},
			flag:  "--control", path: "wd/run/control.sock", says: []string{"control socket", "through the symlink", "Landlock"}},
		{name: "the trace file outside the workdir is a symlink",
			files: fixture.Layout{"wd/": "", "outside/precious.txt": "root only\n", "trace.jsonl -> outside/precious.txt": ""},
			flag:  "--trace", path: "trace.jsonl", says: []string{"trace file", "is a symlink", "remove"}},
	}
	for i, tc := range tests {
		confines := []string{"auto"}
		if i == 0 {
			confines = append(confines, "off") // the check does not hang on the confinement
		}
		for _, confine := range confines {
			t.Run(tc.name+", --confine "+confine, func(t *testing.T) {
				dir, manifest := bbLaunchDir(t, bbFilesManifest("out/", ""), tc.files)
				before := fixture.Snapshot(t, dir)
				code, stdout, stderr := harness.RunCLI(t, nil, "serve", "--manifest", manifest, "--workdir", dir+"/wd",
					"--listen", "127.0.0.1:0", "--session-id", bbSessionID, "--confine", confine, tc.flag, filepath.Join(dir, tc.path))
				if code != 1 || stdout != "" {
					t.Fatalf("exit %d, stdout %q; want exit 1 and no ready line; stderr %q", code, stdout, stderr)
				}
				if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
					t.Fatalf("stderr is not exactly one line: %q", stderr)
				}
				for _, want := range append([]string{filepath.Join(dir, tc.path), tc.flag}, tc.says...) {
					if !strings.Contains(stderr, want) {
						t.Errorf("stderr %q does not say %q", stderr, want)
					}
				}
				if after := fixture.Snapshot(t, dir); !slices.Equal(before, after) {
					t.Errorf("the refused launch changed the tree:\nbefore %q\nafter  %q", before, after)
				}
			})
		}
	}
}

// TestTheSessionDirectoryIsOursAndARelaunchReusesIt pins docs/operator-guide.md, "Files
// resplane creates": a launch creates .murmur/<session id>/ (0700, owned by the service's
// user) with the trace (0600) and the control socket (0600) in it; a relaunch over that same
// session directory appends to its trace, and one after a crash (a stale socket left behind)
// replaces the socket.
func TestTheSessionDirectoryIsOursAndARelaunchReusesIt(t *testing.T) {
	dir, manifest := bbLaunchDir(t, bbFilesManifest("out/", ""), fixture.Layout{"wd/out/a.txt": "A"})
	args := []string{"--manifest", manifest, "--workdir", dir + "/wd", "--listen", "127.0.0.1:0", "--session-id", bbSessionID}
	sessionDir := filepath.Join(dir, "wd", ".murmur", bbSessionID)

	p := harness.Serve(t, nil, args...)
	if p.Ready.Trace != sessionDir+"/trace.jsonl" || p.Ready.Control != sessionDir+"/control.sock" {
		t.Fatalf("ready line trace %q control %q; want both in %s", p.Ready.Trace, p.Ready.Control, sessionDir)
	}
	for _, want := range []struct {
		path string
		kind os.FileMode
		perm os.FileMode
	}{
		{filepath.Join(dir, "wd", ".murmur"), os.ModeDir, 0o700},
		{sessionDir, os.ModeDir, 0o700},
		{p.Ready.Trace, 0, 0o600},
		{p.Ready.Control, os.ModeSocket, 0o600},
	} {
		fi, err := os.Lstat(want.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Type() != want.kind || fi.Mode().Perm() != want.perm {
			t.Errorf("%s has mode %v, want type %v and permissions %v", want.path, fi.Mode(), want.kind, want.perm)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Geteuid() {
			t.Errorf("%s is owned by uid %d, want the service's uid %d", want.path, uid, os.Geteuid())
		}
	}
	if code := p.Stop(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.Stderr())
	}

	p = harness.Serve(t, nil, args...)
	if code := p.Stop(t); code != 0 {
		t.Fatalf("relaunch: exit %d; stderr:\n%s", code, p.Stderr())
	}

	fixture.Write(t, sessionDir, fixture.Layout{"control.sock=": ""}) // a crashed server's socket
	p = harness.Serve(t, nil, args...)
	if a := harness.Control(t, p.Ready.Control, "GET", "/v1/status", nil); a.Status != 200 {
		t.Fatalf("status after a relaunch over a stale socket: %d %s", a.Status, a.Raw)
	}
	starts := 0
	for _, line := range harness.TraceLines(t, p.Ready.Trace) {
		if strings.Contains(line, `"event_type":"session_start"`) {
			starts++
		}
	}
	if starts != 3 {
		t.Errorf("%d session_start lines in the reused trace, want 3 (one per launch)", starts)
	}
}

// TestTheServeProcessIsNotDumpable pins docs/peer-plane.md, "The minting key": serve makes
// itself non-dumpable at start, so another process of the same user can neither read its
// memory through /proc or ptrace nor get a core dump holding the instance key. The probe is
// readlink /proc/<pid>/exe, which the kernel answers for a same-user process without
// CAP_SYS_PTRACE exactly when the target is dumpable (the same ptrace access check that guards
// /proc/<pid>/mem, in its read mode, which Yama leaves alone); the control is an ordinary
// process, probed the same way. As root, the server, the control and the probe all run
// without CAP_SYS_PTRACE, the one capability that overrides the rule.
func TestTheServeProcessIsNotDumpable(t *testing.T) {
	wrapper := bbAsRootWithout(t, "-sys_ptrace", "every process may read every other's memory")
	command := func(args ...string) *exec.Cmd {
		argv := append(append([]string(nil), wrapper...), args...)
		return exec.Command(argv[0], argv[1:]...)
	}
	probe := func(pid int) error {
		out, err := command("readlink", "/proc/"+strconv.Itoa(pid)+"/exe").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}

	control := command("sleep", "60")
	if err := control.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = control.Process.Kill(); _ = control.Wait() }()
	// Until the wrapper has executed sleep, the pid is the wrapper's, with all its privilege.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(control.Process.Pid) + "/exe"); filepath.Base(exe) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the control process did not start sleep within 10 s")
		}
	}
	if err := probe(control.Process.Pid); err != nil {
		t.Fatalf("the probe fails on an ordinary process too (%v): it would prove nothing", err)
	}

	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Wrapper: wrapper})
	if err := probe(p.PID()); err == nil {
		t.Fatalf("a process of the same user passed the ptrace access check on serve (pid %d): serve is dumpable", p.PID())
	}
}
