// Package harness is the one helper kit of the black-box suites (test/blackbox, test/peer): it
// starts the real resplane binary over a capsule whose workdir is laid out in the fixture
// language (ports/porttest/fixture), speaks raw HTTP to it over TCP, calls its control API,
// reads its trace, and checks what every plane's answers and events share. A client library
// would clean the very request targets the service must refuse (dot segments, encoded
// slashes, invalid escapes), so requests are written byte for byte.
package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/landlock"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/resplane once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "resplane-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "resplane")
		_, file, _, _ := runtime.Caller(0)
		moduleRoot := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/resplane")
		cmd.Dir = moduleRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Capsule is a manifest and a workdir layout to launch the service over.
type Capsule struct {
	// Manifest is the murmur.yaml text.
	Manifest string
	// Files is the workdir's layout, in the fixture language: $WD in a symlink's target stands
	// for the workdir, and "../" entries land beside it.
	Files fixture.Layout
	// Args are extra serve flags.
	Args []string
	// Env is extra environment, "KEY=value".
	Env []string
	// Wrapper, when set, is a command (with its arguments) the binary is run through, such as
	// setpriv to drop capabilities.
	Wrapper []string
}

// Ready is the ready line serve prints on stdout, declared here from the documented interface
// (docs/operator-guide.md, "The ready line") rather than borrowed from the type that writes
// it: a black-box test that decoded the line with the producer's own type would check
// nothing. parseReady holds the line to exactly these keys.
type Ready struct {
	Event       string   `json:"event"`
	SessionID   string   `json:"session_id"`
	Listen      string   `json:"listen"`
	URL         string   `json:"url"`
	Audience    string   `json:"audience"`
	Control     string   `json:"control"`
	Trace       string   `json:"trace"`
	Workdir     string   `json:"workdir"`
	Containment string   `json:"containment"`
	Confinement string   `json:"confinement"`
	Planes      []string `json:"planes"`
	Tools       []string `json:"tools"`
	// Metrics is the metrics listener's address, nil (null) without --metrics-listen.
	Metrics *string `json:"metrics"`
	// PeerProof is "bound", "required" or "none".
	PeerProof string `json:"peer_proof"`
	// TLS is whether the resource listener serves TLS.
	TLS bool `json:"tls"`
	// ListingCache is the listing hash cache's mode: "lease" or "max-age".
	ListingCache string `json:"listing_cache"`
}

// parseReady decodes a ready line, refusing a line that is not one JSON object with exactly
// the documented keys, each of the documented type, and event "ready".
func parseReady(line string) (Ready, error) {
	var ready Ready
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &keys); err != nil {
		return ready, err
	}
	want := reflect.TypeFor[Ready]()
	for i := range want.NumField() {
		key := want.Field(i).Tag.Get("json")
		if _, ok := keys[key]; !ok {
			return ready, fmt.Errorf("the ready line has no %q", key)
		}
		delete(keys, key)
	}
	for key := range keys {
		return ready, fmt.Errorf("the ready line has an undocumented key %q", key)
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ready); err != nil {
		return ready, err
	}
	if ready.Event != "ready" {
		return ready, fmt.Errorf("the ready line's event is %q, not \"ready\"", ready.Event)
	}
	return ready, nil
}

// Process is one running resplane serve.
type Process struct {
	Ready   Ready
	Dir     string // holds murmur.yaml and, by default, the workdir
	Workdir string
	cmd     *exec.Cmd
	stderr  *syncBuffer
	done    chan struct{}
	exit    int
}

// writeCapsule writes c's manifest and files into a new temp dir and returns the dir, the
// manifest path and the workdir.
func writeCapsule(t testing.TB, c Capsule) (dir, manifestPath, workdir string) {
	t.Helper()
	dir = t.TempDir()
	manifestPath = filepath.Join(dir, "murmur.yaml")
	workdir = filepath.Join(dir, "wd")
	if err := os.WriteFile(manifestPath, []byte(c.Manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(workdir, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.Write(t, workdir, c.Files)
	return dir, manifestPath, workdir
}

// Start launches serve over c (workdir <dir>/wd, listening on 127.0.0.1:0) and waits for the
// ready line. The process is stopped with SIGTERM when the test ends.
func Start(t testing.TB, c Capsule) *Process {
	t.Helper()
	dir, manifestPath, workdir := writeCapsule(t, c)
	args := append([]string{"--manifest", manifestPath, "--workdir", workdir, "--listen", "127.0.0.1:0"}, c.Args...)
	p := serve(t, c.Wrapper, c.Env, args...)
	p.Dir, p.Workdir = dir, workdir
	return p
}

// Serve runs `resplane serve <args>` with env added to a clean environment and waits for the
// ready line. The process is stopped with SIGTERM when the test ends.
func Serve(t testing.TB, env []string, args ...string) *Process {
	t.Helper()
	return serve(t, nil, env, args...)
}

func serve(t testing.TB, wrapper, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{stderr: &syncBuffer{}, done: make(chan struct{})}
	argv := append(append(append(append([]string(nil), wrapper...), Binary(t), "serve"), confinedWherePossible(args, env)...), args...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(cleanEnv(), env...)
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exit = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() { p.Stop(t) })
	lines := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		if scanner.Scan() {
			lines <- scanner.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			<-p.done
			t.Fatalf("serve exited (%d) without a ready line; stderr:\n%s", p.exit, p.stderr.String())
		}
		ready, err := parseReady(line)
		if err != nil {
			t.Fatalf("ready line %q: %v", line, err)
		}
		p.Ready = ready
	case <-time.After(15 * time.Second):
		t.Fatalf("no ready line within 15 s; stderr:\n%s", p.stderr.String())
	}
	return p
}

// confinedWherePossible is "--confine required" where the kernel offers Landlock, unless args
// or env choose a confinement themselves: so every black-box test runs behind the wall
// (docs/operator-guide.md, "Confinement"), and passes unchanged there.
func confinedWherePossible(args, env []string) []string {
	for _, a := range args {
		if a == "--confine" || strings.HasPrefix(a, "--confine=") {
			return nil
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "RESPLANE_CONFINE=") || strings.HasPrefix(kv, "RESPLANE_TEST_LANDLOCK_ABSENT=") {
			return nil
		}
	}
	if landlock.ABI() == 0 {
		return nil
	}
	return []string{"--confine", "required"}
}

// cleanEnv is the test process's environment without RESPLANE_* and OTEL_* variables, so a
// developer's shell cannot change what a test launches (nor send its spans anywhere).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RESPLANE_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// Stop sends SIGTERM (once) and waits for the exit status.
func (p *Process) Stop(t testing.TB) int {
	t.Helper()
	select {
	case <-p.done:
		return p.exit
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("serve did not exit within 20 s of SIGTERM")
	}
	return p.exit
}

// Kill sends SIGKILL and waits for the process to end, as a crash or the OOM killer would end
// it: nothing of its shutdown runs.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not end within 20 s of SIGKILL")
	}
}

// PID is the process id of the running serve (the wrapper's, which execs the binary, when the
// capsule has one).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// WaitForStderr waits up to 5 s for the service's stderr to contain want, and fails the test
// naming what it holds otherwise: lines logged right after the ready line may follow it.
func (p *Process) WaitForStderr(t testing.TB, want string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(p.Stderr(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never held %q:\n%s", want, p.Stderr())
		}
	}
}

// Stderr returns everything the process wrote to stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// RunCLI runs the binary with args and env added to a clean environment, and returns its exit
// status, stdout and stderr. A command still running after a minute fails the test.
func RunCLI(t testing.TB, env []string, args ...string) (int, string, string) {
	t.Helper()
	return RunCLIWithInput(t, env, "", args...)
}

// RunCLIWithInput is RunCLI with stdin as the command's standard input.
func RunCLIWithInput(t testing.TB, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	code := awaitExit(t, cmd, func() string {
		return "stdout " + strconv.Quote(stdout.String()) + " stderr " + strconv.Quote(stderr.String())
	})
	return code, stdout.String(), stderr.String()
}

// awaitExit waits up to a minute for the started cmd to exit and returns its exit status;
// past that it kills cmd and fails the test, saying what output said of it.
func awaitExit(t testing.TB, cmd *exec.Cmd, output func() string) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("resplane %q still running after a minute; %s", cmd.Args[1:], output())
	}
	return cmd.ProcessState.ExitCode()
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reading test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// CLI is one client command running in the background (such as `files pull --watch`).
type CLI struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
}

// StartCLI starts the binary with args and env added to a clean environment, and returns at
// once. The command is killed when the test ends, if it is still running.
func StartCLI(t testing.TB, env []string, args ...string) *CLI {
	t.Helper()
	c := &CLI{cmd: exec.Command(Binary(t), args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	c.cmd.Env = append(cleanEnv(), env...)
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// Stdout and Stderr return what the command wrote so far.
func (c *CLI) Stdout() string { return c.stdout.String() }

// Stderr returns what the command wrote to stderr so far.
func (c *CLI) Stderr() string { return c.stderr.String() }

// Interrupt sends SIGINT and returns the exit status; a command still running ten seconds
// later fails the test.
func (c *CLI) Interrupt(t testing.TB) int {
	t.Helper()
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("still running ten seconds after SIGINT; stderr:\n%s", c.Stderr())
	}
	return c.cmd.ProcessState.ExitCode()
}
