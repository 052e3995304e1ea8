package landlock_test

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/landlock"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// helperEnv, when set in the environment of this test binary, makes it the helper process of
// TestConfinedProcessMeetsTheWall instead of a test run: its value is the box directory the
// parent laid out.
const helperEnv = "LANDLOCK_HELPER_BOX"

func TestMain(m *testing.M) {
	if box := os.Getenv(helperEnv); box != "" {
		os.Exit(runHelper(box))
	}
	os.Exit(m.Run())
}

// The box the parent lays out: the workdir wd/ with an export root out/, peer-in/, the session
// directory and a planted symlink; an outside/ directory beside it with a secret; and an
// operator's spool/ directory outside the workdir.
var boxLayout = fixture.Layout{
	"wd/out/a.txt": "inside the root",
	"wd/out/link-out.txt -> ../../outside/s.md": "",
	"wd/out/abs-out.txt -> $WD/outside/s.md":    "",
	"wd/peer-in/":                               "",
	"wd/.murmur/ses/trace.jsonl":                "",
	"wd/planted -> ../outside":                  "",
	"outside/s.md":                              "the secret",
	"spool/":                                    "",
	"tls/tls.crt":                               "the pair",
}

// policyOf is the policy the helper confines itself with: every writable directory serve
// would name, and as optional ones peer-in, the planted symlink and a missing directory.
func policyOf(box string) landlock.Policy {
	wd := filepath.Join(box, "wd")
	return landlock.Policy{Workdir: wd, Writable: []string{
		filepath.Join(wd, ".murmur/ses"), filepath.Join(box, "spool"),
	}, Optional: []string{
		filepath.Join(wd, "peer-in"), filepath.Join(wd, "planted"), filepath.Join(box, "missing"),
	}, Readable: []string{filepath.Join(box, "tls"), filepath.Join(box, "missing-too")}}
}

// world is what a probe acts on in the confined helper.
type world struct {
	box, wd string
	trace   *os.File    // opened before Confine, as serve's trace is
	inbox   *osfs.Inbox // opened before Confine, as serve's is
}

func (w world) at(rel string) string { return filepath.Join(w.box, rel) }

// probe is one thing the confined process tries, and the errno the wall must answer ("" for
// success). A row runs only on a kernel whose ABI restricts what it tries.
type probe struct {
	name   string
	want   string
	minABI int
	run    func(w world) error
}

func createFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

func readFile(path string) error { _, err := os.ReadFile(path); return err }

var probes = []probe{
	// The wall.
	{"reading outside the workdir by an absolute path is denied", "EACCES", 1,
		func(w world) error { return readFile(w.at("outside/s.md")) }},
	{"reading outside through a relative symlink in the export root is denied", "EACCES", 1,
		func(w world) error { return readFile(w.at("wd/out/link-out.txt")) }},
	{"reading outside through an absolute symlink in the export root is denied", "EACCES", 1,
		func(w world) error { return readFile(w.at("wd/out/abs-out.txt")) }},
	{"reading a system file is denied", "EACCES", 1,
		func(world) error { return readFile("/etc/passwd") }},
	{"listing outside the workdir is denied", "EACCES", 1,
		func(w world) error { _, err := os.ReadDir(w.at("outside")); return err }},
	{"creating a file in the export root is denied", "EACCES", 1,
		func(w world) error { return createFile(w.at("wd/out/new.txt")) }},
	{"opening a file in the export root for writing is denied", "EACCES", 1,
		func(w world) error {
			f, err := os.OpenFile(w.at("wd/out/a.txt"), os.O_WRONLY, 0)
			if err == nil {
				f.Close()
			}
			return err
		}},
	{"truncating a file in the export root is denied", "EACCES", 3,
		func(w world) error { return os.Truncate(w.at("wd/out/a.txt"), 0) }},
	{"removing a file in the export root is denied", "EACCES", 1,
		func(w world) error { return os.Remove(w.at("wd/out/a.txt")) }},
	{"renaming within the export root is denied", "EACCES", 1,
		func(w world) error { return os.Rename(w.at("wd/out/a.txt"), w.at("wd/out/b.txt")) }},
	{"making a directory in the export root is denied", "EACCES", 1,
		func(w world) error { return os.Mkdir(w.at("wd/out/d"), 0o700) }},
	{"creating a file in the workdir itself is denied", "EACCES", 1,
		func(w world) error { return createFile(w.at("wd/new.txt")) }},
	{"writing through a writable directory planted as a symlink is denied", "EACCES", 1,
		func(w world) error { return createFile(w.at("wd/planted/new.txt")) }},
	{"creating a symlink in peer-in is denied", "EACCES", 1,
		func(w world) error { return os.Symlink("/etc/passwd", w.at("wd/peer-in/link")) }},
	{"executing a program is denied", "EACCES", 1,
		func(world) error { return exec.Command("/bin/true").Run() }},
	// What the service still needs.
	{"reading beneath the export root works", "", 1,
		func(w world) error { return readFile(w.at("wd/out/a.txt")) }},
	{"listing the export root works", "", 1,
		func(w world) error { _, err := os.ReadDir(w.at("wd/out")); return err }},
	{"reading an export root created after start works", "", 1,
		func(w world) error { return readFile(w.at("wd/late/l.txt")) }},
	{"reading the TLS pair's directory works", "", 1,
		func(w world) error { return readFile(w.at("tls/tls.crt")) }},
	{"reading a pair swapped into its directory after start works", "", 1,
		func(w world) error { return readFile(w.at("tls/..v2/tls.crt")) }},
	{"writing in the TLS pair's directory is denied", "EACCES", 1,
		func(w world) error { return createFile(w.at("tls/new.crt")) }},
	{"landing a fetched file in peer-in works", "", 1, landThroughInbox},
	{"the .part scheme's create, rename and remove in peer-in work", "", 1,
		func(w world) error {
			part := w.at("wd/peer-in/.id-0123456789abcdef.part")
			if err := createFile(part); err != nil {
				return err
			}
			if err := os.Rename(part, w.at("wd/peer-in/renamed.txt")); err != nil {
				return err
			}
			return os.Remove(w.at("wd/peer-in/renamed.txt"))
		}},
	{"appending to the trace opened before confinement works", "", 1,
		func(w world) error { _, err := w.trace.WriteString("{\"after\":true}\n"); return err }},
	{"creating a file in the session directory works", "", 1,
		func(w world) error { return createFile(w.at("wd/.murmur/ses/new.txt")) }},
	{"creating a file in an operator's directory outside the workdir works", "", 1,
		func(w world) error { return createFile(w.at("spool/snapshot")) }},
	{"reading the resolver's hosts file works", "", 1,
		func(world) error { return readFile("/etc/hosts") }},
	// What Go loads lazily: loaded before the wall, or readable behind it.
	{"resolving a name through the resolver's files works", "", 1,
		func(world) error {
			_, err := net.DefaultResolver.LookupHost(context.Background(), "localhost")
			return err
		}},
	{"the system TLS roots are as the unconfined parent found them", "", 1,
		func(world) error { return expect(expectRootsEnv, hasSystemRoots()) }},
	{"the local time zone is as the unconfined parent found it", "", 1,
		func(world) error { return expect(expectZoneEnv, time.Now().Format("-0700 MST")) }},
}

// The expectations the parent passes to the helper: what it found, unconfined, for the TLS
// roots and for the time zone it sets with TZ.
const (
	expectRootsEnv = "LANDLOCK_HELPER_ROOTS"
	expectZoneEnv  = "LANDLOCK_HELPER_ZONE"
	helperZone     = "Europe/Paris"
)

// expect returns an error unless got is the value of the environment variable name.
func expect(name, got string) error {
	if want := os.Getenv(name); got != want {
		return fmt.Errorf("got %q, want %q", got, want)
	}
	return nil
}

// hasSystemRoots says whether this process can load a non-empty system root pool.
func hasSystemRoots() string {
	pool, err := x509.SystemCertPool()
	return strconv.FormatBool(err == nil && !pool.Equal(x509.NewCertPool()))
}

// helperEnvironment is the environment of the helper: the box, the expectations, and TZ set
// to helperZone when this system knows it (so that the zone loaded lazily is not UTC).
func helperEnvironment(box string) []string {
	env := append(os.Environ(), helperEnv+"="+box, expectRootsEnv+"="+hasSystemRoots())
	if zone, err := time.LoadLocation(helperZone); err == nil {
		return append(env, "TZ="+helperZone, expectZoneEnv+"="+time.Now().In(zone).Format("-0700 MST"))
	}
	return append(env, "TZ=UTC", expectZoneEnv+"="+time.Now().UTC().Format("-0700 MST"))
}

// landedName is the file landThroughInbox stores in peer-in.
const landedName = "0123456789abcdef-landed.txt"

// landThroughInbox stores a file in peer-in through the production inbox.
func landThroughInbox(w world) error {
	staged, _, err := w.inbox.Stage("0123456789abcdef", landedName)
	if err != nil {
		return err
	}
	if _, err := staged.Write([]byte("fetched")); err != nil {
		staged.Discard()
		return err
	}
	return staged.Commit(time.Time{})
}

// result is one probe's outcome as the helper reports it on stdout.
type result struct {
	Probe string `json:"probe"`
	Errno string `json:"errno"`
}

// runHelper confines this process with the production function and the policy of box, reports
// the confinement achieved, waits for the parent's go-ahead line on stdin, runs every probe and
// prints each outcome as a JSON line. Its exit status is 0 unless it could not
// run the probes at all.
func runHelper(box string) int {
	w := world{box: box, wd: filepath.Join(box, "wd")}
	var err error
	if w.trace, err = os.OpenFile(w.at("wd/.murmur/ses/trace.jsonl"), os.O_WRONLY|os.O_APPEND, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if w.inbox, err = osfs.OpenInbox(w.wd); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	got, err := landlock.Confine(landlock.Required, policyOf(box))
	if err != nil {
		fmt.Fprintln(os.Stderr, "Confine:", err)
		return 2
	}
	out := json.NewEncoder(os.Stdout)
	_ = out.Encode(result{Probe: "confinement", Errno: got.String()})
	// The parent now creates an export root, after confinement; it answers with a line.
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "waiting for the parent:", err)
		return 2
	}
	for _, p := range probes {
		_ = out.Encode(result{Probe: p.name, Errno: errnoName(p.run(w))})
	}
	return 0
}

// errnoName names the errno inside err, "" for nil, or the error's text when it holds none.
func errnoName(err error) string {
	if err == nil {
		return ""
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EACCES:
			return "EACCES"
		case syscall.EPERM:
			return "EPERM"
		}
		return "errno " + strconv.Itoa(int(errno))
	}
	return err.Error()
}

// TestConfinedProcessMeetsTheWall proves the wall, not the code path: a helper process
// confines itself with Confine, as serve does, and the kernel then denies it every read
// outside the workdir (by an absolute path, through either kind of symlink), every write
// into the export root or the workdir, a write through a planted symlink, a symlink and an
// exec; while reads beneath the root (one created after start included), landing a fetched
// file in peer-in (through the production inbox, and by the .part scheme), trace appends,
// writes in the session and operator directories, name resolution, the TLS roots and the local
// time zone still work.
func TestConfinedProcessMeetsTheWall(t *testing.T) {
	abi := landlock.ABI()
	if abi == 0 {
		t.Skip("this kernel offers no Landlock (Linux 5.13+ with landlock among the enabled LSMs): the wall cannot be shown here")
	}
	box := t.TempDir()
	fixture.Write(t, box, boxLayout)
	cmd := exec.Command(os.Args[0])
	cmd.Env = helperEnvironment(box)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		var r result
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			t.Fatalf("helper line %q: %v", scanner.Text(), err)
		}
		got[r.Probe] = r.Errno
		if r.Probe == "confinement" {
			// An export root created after the helper confined itself.
			fixture.Write(t, box, fixture.Layout{"wd/late/l.txt": "late", "tls/..v2/tls.crt": "the new pair"})
			if _, err := io.WriteString(stdin, "go\n"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr.String())
	}
	if want := "landlock-v" + strconv.Itoa(abi); got["confinement"] != want {
		t.Fatalf("the helper reports confinement %q, want %q", got["confinement"], want)
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			if abi < p.minABI {
				t.Skipf("Landlock v%d does not restrict this (v%d does)", abi, p.minABI)
			}
			errno, ran := got[p.name]
			if !ran {
				t.Fatal("the helper did not report this probe")
			}
			if errno != p.want {
				t.Fatalf("got %q, want %q", errno, p.want)
			}
		})
	}
	// Seen from outside: nothing escaped the wall, and what was allowed happened.
	if b, _ := os.ReadFile(filepath.Join(box, "wd/out/a.txt")); string(b) != "inside the root" {
		t.Errorf("the export root's file now holds %q", b)
	}
	if entries, _ := os.ReadDir(filepath.Join(box, "outside")); len(entries) != 1 {
		t.Errorf("outside/ holds %d entries, want only the secret", len(entries))
	}
	if b, _ := os.ReadFile(filepath.Join(box, "wd/peer-in", landedName)); string(b) != "fetched" {
		t.Errorf("peer-in/%s holds %q, want the landed bytes", landedName, b)
	}
	if b, _ := os.ReadFile(filepath.Join(box, "wd/.murmur/ses/trace.jsonl")); string(b) != "{\"after\":true}\n" {
		t.Errorf("the trace holds %q, want the line appended after confinement", b)
	}
}

func TestServicePolicyWritesOnlyWhatTheServiceWrites(t *testing.T) {
	base := landlock.Service{
		Workdir: "/w", SessionDir: "/w/.murmur/ses_1", TracePath: "/logs/t.jsonl", ControlPath: "/run/c/control.sock",
		SpoolDir: "/spool",
	}
	for _, tc := range []struct {
		rule    string
		service func(landlock.Service) landlock.Service
		want    landlock.Policy
	}{
		{"the session directory, the trace's and the socket's directories and the spool", func(s landlock.Service) landlock.Service { return s },
			landlock.Policy{Workdir: "/w", Writable: []string{"/w/.murmur/ses_1", "/logs", "/run/c", "/spool"}}},
		{"peer-in only when fetch-peer-file is offered", func(s landlock.Service) landlock.Service { s.Inbox = "/w/peer-in"; return s },
			landlock.Policy{Workdir: "/w", Writable: []string{"/w/.murmur/ses_1", "/logs", "/run/c", "/spool"}, Optional: []string{"/w/peer-in"}}},
		{"its own /proc entries only when metrics are served", func(s landlock.Service) landlock.Service { s.Metrics = true; return s },
			landlock.Policy{Workdir: "/w", Writable: []string{"/w/.murmur/ses_1", "/logs", "/run/c", "/spool"}, ProcessStats: true}},
		{"the TLS pair's directories are read only", func(s landlock.Service) landlock.Service { s.Readable = []string{"/etc/tls"}; return s },
			landlock.Policy{Workdir: "/w", Writable: []string{"/w/.murmur/ses_1", "/logs", "/run/c", "/spool"}, Readable: []string{"/etc/tls"}}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := tc.service(base).Policy(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Policy() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
