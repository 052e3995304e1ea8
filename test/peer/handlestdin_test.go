package peer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFetchPeerFileTakesTheHandleOnStandardInput pins docs/control-api.md, "Client
// subcommands": `resplane tool fetch-peer-file --handle -` reads the handle from standard
// input (one line; a "\n" or "\r\n" ending is dropped, nothing else), so the token never sits
// in the world-readable /proc/<pid>/cmdline; the fetch then works end to end between two live
// capsules, silently. A handle given on the command line still works but costs one warning
// line on stderr that does not repeat it; standard input without a handle is a usage error.
func TestFetchPeerFileTakesTheHandleOnStandardInput(t *testing.T) {
	t.Parallel()
	a := startMinter(t)
	b := startFetcher(t)
	m := mint(t, a, b.Ready.Listen, "report.md")
	fetchArgs := []string{"tool", "fetch-peer-file", "--control", b.Ready.Control, "--peer", a.Ready.Listen, "--handle"}
	want, err := os.ReadFile(filepath.Join(a.Ready.Workdir, "out/handoff/report.md"))
	if err != nil {
		t.Fatal(err)
	}

	for name, stdin := range map[string]string{
		"a line ending in LF":   m.Handle + "\n",
		"a line ending in CRLF": m.Handle + "\r\n",
		"no line ending":        m.Handle,
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := cliWithInput(t, stdin, append(fetchArgs, "-")...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q; want exit 0 and nothing on stderr", code, errOut)
			}
			var s stored
			if err := json.Unmarshal([]byte(out), &s); err != nil || s.Path != "peer-in/"+m.HandleID+"-report.md" {
				t.Fatalf("stdout %q (%v); want the stored file's result", out, err)
			}
			if got, err := os.ReadFile(filepath.Join(b.Ready.Workdir, s.Path)); err != nil || string(got) != string(want) {
				t.Fatalf("stored file %q, %v; want the shared bytes", got, err)
			}
		})
	}
	if n := len(eventsFor(t, a, "peer_handle_redeem", "handle_id", m.HandleID)); n != 3 {
		t.Errorf("%d redeems at the minter, want 3", n)
	}

	t.Run("a handle on the command line warns without repeating it", func(t *testing.T) {
		code, _, errOut := cli(t, append(fetchArgs, m.Handle)...)
		if code != 0 {
			t.Fatalf("exit %d; stderr %q", code, errOut)
		}
		if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "warning") || !strings.Contains(errOut, "--handle -") {
			t.Fatalf("stderr %q; want one warning line pointing at --handle -", errOut)
		}
		for _, part := range strings.Split(m.Handle, ".")[1:] {
			if strings.Contains(errOut, part) {
				t.Fatalf("the warning repeats part of the token: %q", errOut)
			}
		}
	})

	for name, stdin := range map[string]string{"empty": "", "an empty line": "\n", "a blank CRLF line": "\r\n"} {
		t.Run("standard input "+name+" is a usage error", func(t *testing.T) {
			code, out, errOut := cliWithInput(t, stdin, append(fetchArgs, "-")...)
			if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "standard input") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line about standard input", code, out, errOut)
			}
		})
	}
}
