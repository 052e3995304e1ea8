package blackbox_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/resplane/resplane/test/harness"
)

// bbCommands returns every command that runs, as the words that name it ("files pull"), read
// from `resplane --help` so that a new command is walked by the tests below without being
// listed here.
func bbCommands(t *testing.T) [][]string {
	t.Helper()
	code, stdout, stderr := harness.RunCLI(t, nil, "--help")
	if code != 0 || stderr != "" {
		t.Fatalf("resplane --help: exit %d, stderr %q", code, stderr)
	}
	_, list, ok := strings.Cut(stdout, "\nCommands:\n")
	if !ok {
		t.Fatalf("resplane --help lists no commands:\n%s", stdout)
	}
	list, _, _ = strings.Cut(list, "\n\n")
	var commands [][]string
	for _, row := range strings.Split(list, "\n") {
		var words []string
		for _, w := range strings.Fields(row) {
			if !regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(w) {
				break // the positional arguments (URL, DIR) and the summary follow the words
			}
			words = append(words, w)
		}
		commands = append(commands, words)
	}
	if len(commands) < 10 {
		t.Fatalf("resplane --help lists %d commands: %q", len(commands), commands)
	}
	return commands
}

// TestEveryCommandHasOneHelpLayout pins docs/operator-guide.md, "Command line": every
// command's --help, and `resplane help <command>`, is the same layout on stdout, exit 0: a
// Usage line naming the command, what it does, one row per flag (--flag VALUE) with -h, --help
// last; the groups list their commands.
func TestEveryCommandHasOneHelpLayout(t *testing.T) {
	for _, words := range bbCommands(t) {
		name := strings.Join(words, " ")
		t.Run(name, func(t *testing.T) {
			code, help, stderr := harness.RunCLI(t, nil, append(words, "--help")...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			if !strings.HasPrefix(help, "Usage:\n  resplane "+name) || !strings.Contains(help, "\nFlags:\n") ||
				!strings.Contains(help, "  -h, --help\n        Print this help and exit\n") {
				t.Errorf("help is not in the one layout:\n%s", help)
			}
			for _, row := range regexp.MustCompile(`(?m)^  (-\S.*)$`).FindAllStringSubmatch(help, -1) {
				if !regexp.MustCompile(`^(-[a-z], )?--[a-z-]+( [A-Z:|a-z_]+)?$`).MatchString(row[1]) {
					t.Errorf("flag row %q is not --flag VALUE", row[1])
				}
			}
			if code, again, _ := harness.RunCLI(t, nil, append([]string{"help"}, words...)...); code != 0 || again != help {
				t.Errorf("resplane help %s: exit %d, and it differs from --help:\n%s", name, code, again)
			}
		})
	}
	for _, group := range []string{"tool", "task", "files"} {
		code, help, _ := harness.RunCLI(t, nil, group, "--help")
		if code != 0 || !strings.HasPrefix(help, "Usage:\n  resplane "+group+" <command>") || !strings.Contains(help, "\nCommands:\n") {
			t.Errorf("resplane %s --help: exit %d:\n%s", group, code, help)
		}
	}
}

// TestAWrongFlagIsOneLineNamingHelp pins docs/operator-guide.md, "Exit statuses": a usage
// error, on every command, is exactly one line on stderr that names the command, the problem
// and where help is, with nothing on stdout and exit 2.
func TestAWrongFlagIsOneLineNamingHelp(t *testing.T) {
	for _, words := range bbCommands(t) {
		name := strings.Join(words, " ")
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := harness.RunCLI(t, nil, append(words, "--bogus")...)
			want := "resplane " + name + ": unknown flag --bogus (see 'resplane " + name + " --help')\n"
			if code != 2 || stdout != "" || stderr != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and stderr %q", code, stdout, stderr, want)
			}
		})
	}
	for _, args := range [][]string{nil, {"frobnicate"}, {"files", "sync"}, {"help", "frobnicate"}} {
		code, stdout, stderr := harness.RunCLI(t, nil, args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--help'") {
			t.Errorf("resplane %q: exit %d, stdout %q, stderr %q; want one line naming --help, exit 2", args, code, stdout, stderr)
		}
	}
}
