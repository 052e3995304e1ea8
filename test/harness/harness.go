// Package harness starts the real resplane binary for black-box tests and speaks raw HTTP to
// it over TCP. A client library would clean the very request targets the service must refuse
// (dot segments, encoded slashes, invalid escapes), so requests are written byte for byte.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
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

	"github.com/resplane/resplane/adapters/control"
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
	Planes      []string `json:"planes"`
	Tools       []string `json:"tools"`
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

// WriteCapsule writes c's manifest and files into a new temp dir and returns the dir, the
// manifest path and the workdir.
func WriteCapsule(t testing.TB, c Capsule) (dir, manifestPath, workdir string) {
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
	dir, manifestPath, workdir := WriteCapsule(t, c)
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
	argv := append(append(append([]string(nil), wrapper...), Binary(t), "serve"), args...)
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

// cleanEnv is the test process's environment without RESPLANE_* variables, so a developer's
// shell cannot change what a test launches.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RESPLANE_") {
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

// Stderr returns everything the process wrote to stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// TraceLines returns the trace file's lines, each parsed as a JSON object.
func (p *Process) TraceLines(t testing.TB) []map[string]any {
	t.Helper()
	return ReadJSONLines(t, p.Ready.Trace)
}

// ReadJSONLines parses every line of the file at path as a JSON object.
func ReadJSONLines(t testing.TB, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("trace line %q: %v", line, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// Response is a raw HTTP response.
type Response struct {
	Status int
	// Header holds the headers with lower-cased names, values in order of appearance.
	Header map[string][]string
	Body   []byte
	Raw    []byte
	// Head is set on the answer to a HEAD request, whose content-length describes no body.
	Head bool
}

// Get returns the first value of the named header (any case), or "".
func (r Response) Get(name string) string {
	if v := r.Header[strings.ToLower(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Has reports whether the named header is present.
func (r Response) Has(name string) bool { _, ok := r.Header[strings.ToLower(name)]; return ok }

// JSON decodes the body as a JSON object.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.Body, err)
	}
	return m
}

// Raw sends request bytes exactly as given to addr and reads until the server closes, within
// 30 s.
func Raw(t testing.TB, addr, request string) Response {
	t.Helper()
	return RawWithin(t, addr, request, 30*time.Second)
}

// RawWithin is Raw with a deadline for the whole exchange: a response not complete by then
// fails the test. The answer to a HEAD request is parsed as a head without a body.
func RawWithin(t testing.TB, addr, request string, deadline time.Duration) Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(deadline))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("no complete response within %v: %v (got %q)", deadline, err, raw)
	}
	return parse(t, raw, strings.HasPrefix(request, "HEAD "))
}

// RequestText is "<method> <target> HTTP/1.1" with a Host header for addr, the given extra
// header lines ("Name: value") and the blank line that ends the head.
func RequestText(addr, method, target string, headers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, addr)
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	return b.String()
}

// Request sends RequestText(addr, method, target, headers...) and returns the response.
func Request(t testing.TB, addr, method, target string, headers ...string) Response {
	t.Helper()
	return Raw(t, addr, RequestText(addr, method, target, headers...))
}

// Get sends a raw GET for target.
func Get(t testing.TB, addr, target string, headers ...string) Response {
	t.Helper()
	return Request(t, addr, http.MethodGet, target, headers...)
}

// Parse splits a raw HTTP/1.1 response into status, headers and body, and checks that the
// body's length matches content-length when one was sent.
func Parse(t testing.TB, raw []byte) Response {
	t.Helper()
	return parse(t, raw, false)
}

// parse is Parse; for the answer to a HEAD request (head) content-length describes a body that
// is not sent, so it is not checked, and Head is set.
func parse(t testing.TB, raw []byte, head bool) Response {
	t.Helper()
	headPart, body, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("no header/body separator in %q", raw)
	}
	lines := strings.Split(string(headPart), "\r\n")
	fields := strings.SplitN(lines[0], " ", 3)
	if len(fields) < 2 {
		t.Fatalf("bad status line %q", lines[0])
	}
	status, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatalf("bad status line %q", lines[0])
	}
	r := Response{Status: status, Header: map[string][]string{}, Body: body, Raw: raw, Head: head}
	for _, line := range lines[1:] {
		name, value, _ := strings.Cut(line, ":")
		key := strings.ToLower(strings.TrimSpace(name))
		r.Header[key] = append(r.Header[key], strings.TrimSpace(value))
	}
	if cl := r.Get("content-length"); !head && cl != "" && cl != strconv.Itoa(len(body)) {
		t.Fatalf("content-length %s but %d body bytes", cl, len(body))
	}
	return r
}

// ControlClient returns an HTTP client for the control socket at path, whatever the length of
// the path.
func ControlClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return control.Dial(ctx, path) },
	}, Timeout: 60 * time.Second}
}

// ControlRaw sends one request to the control API over the Unix socket at path and returns
// the status and the raw body.
func ControlRaw(t testing.TB, path, method, route, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://control"+route, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ControlClient(path).Do(req)
	if err != nil {
		t.Fatalf("control %s %s: %v", method, route, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

// Control is ControlRaw with the body decoded as a JSON object.
func Control(t testing.TB, path, method, route, body string) (int, map[string]any) {
	t.Helper()
	status, raw := ControlRaw(t, path, method, route, body)
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("control %s %s answered a body that is not JSON: %v", method, route, err)
	}
	return status, m
}

// RunCLI runs the binary with args and env added to a clean environment, and returns its exit
// status, stdout and stderr. A command still running after a minute fails the test.
func RunCLI(t testing.TB, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("resplane %q still running after a minute; stdout %q stderr %q", args, stdout.String(), stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
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
