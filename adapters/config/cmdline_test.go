package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// pullSpec is a command line shaped like `files pull`: two arguments, switches, a valued flag
// with a default, a short alias and one from the environment.
var pullSpec = Spec{Name: "files pull", Args: []string{"URL", "DIR"}, Flags: []Flag{
	{Name: "delete"},
	{Name: "jobs", Arg: "N", Default: "4"},
	{Name: "output", Short: "o", Arg: "FILE"},
	{Name: "control", Arg: "PATH", Env: "RESPLANE_CONTROL"},
}}

func TestParseAcceptsGoAndGNUSpellings(t *testing.T) {
	for _, tc := range []struct {
		rule string
		args []string
		env  env
		want map[string]string // flag -> value
		pos  []string
	}{
		{"two dashes, the value as the next word", []string{"--jobs", "8", "u", "d"}, env{}, map[string]string{"jobs": "8"}, []string{"u", "d"}},
		{"one dash, the value after =", []string{"-jobs=8", "u", "d"}, env{}, map[string]string{"jobs": "8"}, []string{"u", "d"}},
		{"flags and arguments in any order", []string{"u", "--delete", "d", "--jobs=2"}, env{}, map[string]string{"delete": "true", "jobs": "2"}, []string{"u", "d"}},
		{"-- ends the flags", []string{"u", "--", "--delete"}, env{}, map[string]string{"jobs": "4"}, []string{"u", "--delete"}},
		{"a switch turned off with =false", []string{"--delete=false", "u", "d"}, env{}, map[string]string{"delete": "false"}, []string{"u", "d"}},
		{"a repeated flag keeps its last value", []string{"--jobs", "2", "--jobs", "3", "u", "d"}, env{}, map[string]string{"jobs": "3"}, []string{"u", "d"}},
		{"a short alias", []string{"-o", "f", "u", "d"}, env{}, map[string]string{"output": "f"}, []string{"u", "d"}},
		{"the environment under the command line", []string{"u", "d"}, env{"RESPLANE_CONTROL": "/c.sock"}, map[string]string{"control": "/c.sock"}, []string{"u", "d"}},
		{"the command line over the environment", []string{"--control", "/x", "u", "d"}, env{"RESPLANE_CONTROL": "/c.sock"}, map[string]string{"control": "/x"}, []string{"u", "d"}},
		{"an empty variable counts as unset", []string{"u", "d"}, env{"RESPLANE_CONTROL": ""}, map[string]string{"control": ""}, []string{"u", "d"}},
		{"a lone dash is an argument", []string{"u", "-"}, env{}, map[string]string{}, []string{"u", "-"}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			v, err := Parse(pullSpec, tc.args, tc.env.get)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := v.String(name); got != want {
					t.Errorf("--%s = %q, want %q", name, got, want)
				}
			}
			if !reflect.DeepEqual(v.Args, tc.pos) {
				t.Errorf("arguments %q, want %q", v.Args, tc.pos)
			}
		})
	}
}

func TestParseRefusalsNameTheFlagAndWhatIsAccepted(t *testing.T) {
	required := Spec{Name: "status", Flags: []Flag{{Name: "control", Arg: "PATH", Env: "RESPLANE_CONTROL", Required: true}}}
	for _, tc := range []struct {
		rule string
		spec Spec
		args []string
		want string
	}{
		{"an unknown flag is named with two dashes", pullSpec, []string{"u", "d", "-bogus"}, "unknown flag --bogus"},
		{"a flag without its value", pullSpec, []string{"u", "d", "--jobs"}, "--jobs needs a value: --jobs N"},
		{"a switch given a value", pullSpec, []string{"u", "d", "--delete=yes"}, "--delete is a switch: give it alone, or as --delete=true or --delete=false"},
		{"a missing argument", pullSpec, []string{"u"}, "missing DIR: resplane files pull takes URL DIR"},
		{"an extra argument", pullSpec, []string{"u", "d", "e"}, `unexpected argument "e": resplane files pull takes URL DIR`},
		{"a command without arguments", required, []string{"--control", "c", "x"}, `unexpected argument "x": resplane status takes flags only`},
		{"a command without flags or arguments", Spec{Name: "version"}, []string{"x"}, `unexpected argument "x": resplane version takes no arguments`},
		{"a required flag names its variable", required, nil, "--control is required (or RESPLANE_CONTROL in the environment)"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := Parse(tc.spec, tc.args, env{}.get)
			assertUsage(t, err, tc.want)
		})
	}
}

func TestParseAnswersHelpInEverySpelling(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help", "--h"} {
		if _, err := Parse(pullSpec, []string{"u", arg}, env{}.get); !errors.Is(err, ErrHelp) {
			t.Errorf("%s: %v, want ErrHelp", arg, err)
		}
	}
}

func TestHelpHasOneLayout(t *testing.T) {
	help := Help(Spec{Name: "files get", Args: []string{"URL", "PATH"}, Summary: "Downloads one file.", Notes: "Exit status: 0.",
		Flags: []Flag{{Name: "output", Short: "o", Arg: "FILE", DefaultHelp: "its name", Usage: "Where to write it"}}})
	want := "Usage:\n  resplane files get URL PATH [flags]\n\nDownloads one file.\n\nFlags:\n" +
		"  -o, --output FILE\n        Where to write it (default: its name)\n" +
		"  -h, --help\n        Print this help and exit\n\nExit status: 0.\n"
	if help != want {
		t.Errorf("help\n%s\nwant\n%s", help, want)
	}
	if line := UsageLine("resplane files get", usagef("unknown flag --bogus")); line != "resplane files get: unknown flag --bogus (see 'resplane files get --help')\n" ||
		strings.Count(line, "\n") != 1 {
		t.Errorf("usage line %q", line)
	}
}
