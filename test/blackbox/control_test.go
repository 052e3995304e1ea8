package blackbox_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// TestControlAPIAnswersByTheInterface pins docs/control-api.md: the socket is mode 0600
// at <workdir>/.murmur/<session id>/control.sock; GET /v1/status has exactly session_id,
// generation, containment, confinement (the ready line's), planes, tools, audience, url; GET /v1/tools lists no tool when none is
// declared; an unknown route is 404 not_found, a wrong method 405 method_not_allowed, a body that
// is not a JSON object 422 invalid_input, an undeclared tool 404 unknown_tool; none of it is
// reachable over TCP.
func TestControlAPIAnswersByTheInterface(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Args: []string{"--containment", "sealed"}})
	sock := p.Ready.Control
	t.Run("socket path and mode", func(t *testing.T) {
		if want := filepath.Join(p.Workdir, ".murmur", p.Ready.SessionID, "control.sock"); sock != want {
			t.Errorf("control %q, want %q", sock, want)
		}
		if want := filepath.Join(p.Workdir, ".murmur", p.Ready.SessionID, "trace.jsonl"); p.Ready.Trace != want {
			t.Errorf("trace %q, want %q", p.Ready.Trace, want)
		}
		fi, err := os.Stat(sock)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("control socket mode %v, want a socket with 0600", fi.Mode())
		}
	})
	t.Run("GET /v1/status", func(t *testing.T) {
		a := harness.Control(t, sock, "GET", "/v1/status", nil)
		if a.Status != 200 {
			t.Fatalf("status %d: %s", a.Status, a.Raw)
		}
		harness.RequireKeys(t, "status", a.Raw, "session_id", "generation", "containment", "confinement", "planes", "tools", "audience", "url",
			"peer_proof", "tls", "listing_cache")
		if c := p.Ready.ListingCache; c != "lease" && c != "max-age" {
			t.Errorf("the ready line's listing_cache is %q, want lease or max-age", c)
		}
		want := `{"session_id":"` + p.Ready.SessionID + `","generation":0,"containment":"sealed","confinement":"` + p.Ready.Confinement +
			`","planes":["files"],"tools":[],"audience":"` + p.Ready.Audience + `","url":"` + p.Ready.URL + `","peer_proof":"none","tls":false,"listing_cache":"` +
			p.Ready.ListingCache + `"}`
		if strings.TrimSpace(string(a.Raw)) != want {
			t.Errorf("status\n got %s\nwant %s", a.Raw, want)
		}
		if p.Ready.Audience != "reporter@"+strings.TrimPrefix(p.Ready.URL, "http://") {
			t.Errorf("audience %q for url %q", p.Ready.Audience, p.Ready.URL)
		}
	})
	t.Run("GET /v1/tools with nothing declared", func(t *testing.T) {
		a := harness.Control(t, sock, "GET", "/v1/tools", nil)
		if a.Status != 200 || strings.TrimSpace(string(a.Raw)) != `{"tools":[]}` {
			t.Errorf("tools %d %s, want 200 {\"tools\":[]}", a.Status, a.Raw)
		}
	})
	for _, tc := range []struct {
		name, method, route, body string
		status                    int
		code                      string
	}{
		{"unknown route", "GET", "/v1/nope", "", 404, "not_found"},
		{"unknown version", "GET", "/v2/status", "", 404, "not_found"},
		{"root", "GET", "/", "", 404, "not_found"},
		{"POST status", "POST", "/v1/status", "{}", 405, "method_not_allowed"},
		{"DELETE tools", "DELETE", "/v1/tools", "", 405, "method_not_allowed"},
		{"GET terminal", "GET", "/v1/tasks/terminal", "", 405, "method_not_allowed"},
		{"terminal with a list body", "POST", "/v1/tasks/terminal", `["completed"]`, 422, "invalid_input"},
		{"terminal with a string body", "POST", "/v1/tasks/terminal", `"completed"`, 422, "invalid_input"},
		{"terminal with a non-JSON body", "POST", "/v1/tasks/terminal", `state=completed`, 422, "invalid_input"},
		{"undeclared share-file", "POST", "/v1/tools/share-file", `{"path":"a","peer":"localhost:1"}`, 404, "unknown_tool"},
		{"undeclared fetch-peer-file", "POST", "/v1/tools/fetch-peer-file", `{"peer":"localhost:1","handle":"h"}`, 404, "unknown_tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			harness.RequireControlRefusal(t, harness.Control(t, sock, tc.method, tc.route, tc.body), tc.status, tc.code)
		})
	}
	t.Run("generation untouched by refused requests", func(t *testing.T) {
		if raw := harness.Control(t, sock, "GET", "/v1/status", nil).Raw; !strings.Contains(string(raw), `"generation":0`) {
			t.Errorf("status after refusals: %s", raw)
		}
	})
	t.Run("not reachable over TCP", func(t *testing.T) {
		for _, target := range []string{"/v1/status", "/v1/tools"} {
			bbBare404(t, harness.Get(t, p.Ready.Listen, target))
		}
		bbBare404(t, harness.RequestWithin(t, p.Ready.Listen, "POST", "/v1/tasks/terminal", 5*time.Second))
	})
}

// TestCLITalksToTheControlSocket pins docs/control-api.md, "Client subcommands": status and
// task end
// (default completed, --state failed/cancelled) print the whole answer as one JSON line and exit
// 0, the socket taken from --control or RESPLANE_CONTROL (flag first); a refused state leaves
// the generation unchanged; an unreachable socket is exit 1 with a clear message.
func TestCLITalksToTheControlSocket(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", "")})
	sock := p.Ready.Control
	missing := filepath.Join(t.TempDir(), "nobody.sock")
	tests := []struct {
		name   string
		env    []string
		args   []string
		exit   int
		stdout string // exact, "" = must be empty
		gen    int    // generation afterwards
	}{
		{"status with --control", nil, []string{"status", "--control", sock}, 0, "$STATUS0", 0},
		{"status with RESPLANE_CONTROL", []string{"RESPLANE_CONTROL=" + sock}, []string{"status"}, 0, "$STATUS0", 0},
		{"task end defaults to completed", nil, []string{"task", "end", "--control", sock}, 0, `{"generation":1}`, 1},
		{"task end --state failed via the environment", []string{"RESPLANE_CONTROL=" + sock}, []string{"task", "end", "--state", "failed"}, 0, `{"generation":2}`, 2},
		{"task end --state cancelled", nil, []string{"task", "end", "--state", "cancelled", "--control", sock}, 0, `{"generation":3}`, 3},
		{"--control wins over RESPLANE_CONTROL", []string{"RESPLANE_CONTROL=" + missing}, []string{"task", "end", "--control", sock}, 0, `{"generation":4}`, 4},
		{"status with an unreachable socket", nil, []string{"status", "--control", missing}, 1, "", 4},
		{"task end with an unreachable socket", []string{"RESPLANE_CONTROL=" + missing}, []string{"task", "end"}, 1, "", 4},
	}
	status0 := ""
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := harness.RunCLI(t, tc.env, tc.args...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.exit, stdout, stderr)
			}
			want := tc.stdout
			if want == "$STATUS0" {
				if status0 == "" {
					status0 = strings.TrimSpace(string(harness.Control(t, sock, "GET", "/v1/status", nil).Raw))
				}
				want = status0
			}
			if want == "" && stdout != "" || want != "" && stdout != want+"\n" {
				t.Errorf("stdout %q, want %q as one line", stdout, want)
			}
			if tc.exit == 1 && !strings.Contains(stderr, missing) && !strings.Contains(strings.ToLower(stderr), "control") {
				t.Errorf("unreachable socket message is not clear: %q", stderr)
			}
			if gen := harness.Object(t, harness.Control(t, sock, "GET", "/v1/status", nil).Raw)["generation"]; gen != bbInt(tc.gen) {
				t.Errorf("generation %v, want %d", gen, tc.gen)
			}
		})
	}
	t.Run("refused state leaves the generation", func(t *testing.T) {
		code, stdout, stderr := harness.RunCLI(t, nil, "task", "end", "--state", "bogus", "--control", sock)
		if code == 0 || stdout != "" || stderr == "" {
			t.Errorf("exit %d stdout %q stderr %q, want a failure with a message", code, stdout, stderr)
		}
		if gen := harness.Object(t, harness.Control(t, sock, "GET", "/v1/status", nil).Raw)["generation"]; gen != bbInt(4) {
			t.Errorf("generation %v after a refused state, want 4", gen)
		}
	})
}

// TestControlSocketLifecycle pins docs/operator-guide.md, "The control socket": a stale socket
// file nobody
// answers on is replaced at launch; a second server on a live socket exits 1 and leaves the
// first one answering; a socket path longer than sun_path works; SIGTERM exits 0 and removes
// the socket.
func TestControlSocketLifecycle(t *testing.T) {
	manifestFor := func(t *testing.T) (string, string) {
		dir, manifest := bbLaunchDir(t, bbFilesManifest("out/", ""), fixture.Layout{"wd/out/a.txt": "A"})
		return dir, manifest
	}
	t.Run("stale socket file is replaced", func(t *testing.T) {
		dir, manifest := manifestFor(t)
		stale := filepath.Join(dir, "c.sock")
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		_ = ln.Close()
		if _, err := os.Stat(stale); err != nil {
			t.Fatalf("no stale socket file: %v", err)
		}
		p := harness.Serve(t, nil, "--manifest", manifest, "--workdir", dir+"/wd", "--listen", "127.0.0.1:0", "--control", stale)
		if a := harness.Control(t, stale, "GET", "/v1/status", nil); a.Status != 200 || !strings.Contains(string(a.Raw), p.Ready.SessionID) {
			t.Errorf("status over the replaced socket: %d %s", a.Status, a.Raw)
		}
	})
	t.Run("second server on a live socket", func(t *testing.T) {
		dir, manifest := manifestFor(t)
		first := harness.Serve(t, nil, "--manifest", manifest, "--workdir", dir+"/wd", "--listen", "127.0.0.1:0")
		code, stdout, stderr := harness.RunCLI(t, nil, "serve", "--manifest", manifest, "--workdir", dir+"/wd2",
			"--listen", "127.0.0.1:0", "--control", first.Ready.Control)
		if code != 1 {
			t.Fatalf("second server exit %d, want 1; stdout %q stderr %q", code, stdout, stderr)
		}
		if strings.Contains(stdout, "ready") {
			t.Errorf("second server printed a ready line: %q", stdout)
		}
		if a := harness.Control(t, first.Ready.Control, "GET", "/v1/status", nil); a.Status != 200 || !strings.Contains(string(a.Raw), first.Ready.SessionID) {
			t.Errorf("first server's socket after the refused second: %d %s", a.Status, a.Raw)
		}
	})
	t.Run("socket path longer than sun_path", func(t *testing.T) {
		dir, manifest := manifestFor(t)
		long := filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("e", 60), "control.sock")
		p := harness.Serve(t, nil, "--manifest", manifest, "--workdir", dir+"/wd", "--listen", "127.0.0.1:0", "--control", long)
		if p.Ready.Control != long {
			t.Errorf("ready control %q, want %q", p.Ready.Control, long)
		}
		code, stdout, stderr := harness.RunCLI(t, nil, "task", "end", "--control", long)
		if code != 0 || stdout != "{\"generation\":1}\n" {
			t.Errorf("task end over a long path: exit %d stdout %q stderr %q", code, stdout, stderr)
		}
		if code := p.Stop(t); code != 0 {
			t.Errorf("exit %d", code)
		}
		if _, err := os.Lstat(long); !os.IsNotExist(err) {
			t.Errorf("long-path socket left behind: %v", err)
		}
	})
	t.Run("SIGTERM exits 0 and removes the socket", func(t *testing.T) {
		dir, manifest := manifestFor(t)
		p := harness.Serve(t, nil, "--manifest", manifest, "--workdir", dir+"/wd", "--listen", "127.0.0.1:0")
		if _, err := os.Stat(p.Ready.Control); err != nil {
			t.Fatal(err)
		}
		if code := p.Stop(t); code != 0 {
			t.Fatalf("exit %d after SIGTERM; stderr:\n%s", code, p.Stderr())
		}
		if _, err := os.Lstat(p.Ready.Control); !os.IsNotExist(err) {
			t.Errorf("control socket still there after SIGTERM: %v", err)
		}
		if conn, err := net.DialTimeout("tcp", p.Ready.Listen, time.Second); err == nil {
			conn.Close()
			t.Errorf("TCP listener still accepting after exit")
		}
	})
}

// TestAClientOfAControlSocketNobodyServesSaysWhichSocketAndWhy pins docs/control-api.md,
// "Client subcommands", and docs/mcp.md: every client of the control socket (status, task end, tool, mcp --control) that
// cannot reach it exits 1 with one line on stderr naming the command, the socket path the user
// gave and the cause, and never the internal http://control/… URL or a JSON log line.
func TestAClientOfAControlSocketNobodyServesSaysWhichSocketAndWhy(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nope.sock")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"status", []string{"status", "--control", sock}},
		{"task end", []string{"task", "end", "--control", sock}},
		{"tool share-file", []string{"tool", "share-file", "--control", sock, "--path", "a.txt", "--peer", "localhost:1"}},
		{"mcp", []string{"mcp", "--control", sock}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := harness.RunCLI(t, nil, tc.args...)
			if code != 1 || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want exit 1 and nothing on stdout (stderr %q)", code, stdout, stderr)
			}
			line := strings.TrimSuffix(stderr, "\n")
			if strings.Contains(line, "\n") {
				t.Fatalf("stderr is more than one line: %q", stderr)
			}
			for _, want := range []string{"resplane " + tc.name + ": ", sock, "no such file or directory", "resplane serve"} {
				if !strings.Contains(line, want) {
					t.Errorf("stderr %q does not name %q", line, want)
				}
			}
			for _, banned := range []string{"http://control", "{"} {
				if strings.Contains(line, banned) {
					t.Errorf("stderr %q holds %q", line, banned)
				}
			}
		})
	}
}
