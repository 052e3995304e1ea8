package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/knadh/koanf/v2"
)

// Spec declares one command line: the words that name it after "resplane" (such as
// "files pull"), its positional arguments and its flags. Every subcommand is declared as a
// Spec, so all of them parse one way and print one help layout (Help).
type Spec struct {
	// Name is the command as typed after "resplane": "serve", "files pull".
	Name string
	// Args names the positional arguments, in order, as help shows them: "URL", "DIR".
	Args []string
	// Summary says what the command does: one paragraph, wrapped by its author.
	Summary string
	// Flags are the command's flags, in help order.
	Flags []Flag
	// Notes follow the flags in help: exit statuses, the environment, examples.
	Notes string
}

// Flag is one flag of a Spec.
type Flag struct {
	// Name is the flag as written after "--" (and, for serve, its config file key).
	Name string
	// Short is a one-letter alias written after one "-" ("o" for -o), or "".
	Short string
	// Arg names the flag's value in help ("PATH"); "" for a switch, which takes no value
	// (--json; --json=false turns it off).
	Arg string
	// Default is shown in help and applied when no source gives a value; "" for none.
	Default string
	// DefaultHelp describes a default that is not a fixed value ("a new ses_<uuidv7 hex>").
	DefaultHelp string
	// Usage says what the flag does, in one sentence.
	Usage string
	// Env, when set, is the environment variable that gives the flag a value when the
	// command line does not (an empty variable counts as unset).
	Env string
	// Required makes a flag that no source gives a usage error.
	Required bool
}

// switchValues are the values a switch accepts after "=".
var switchValues = map[string]string{"true": "true", "false": "false", "1": "true", "0": "false"}

// Values is one parsed command line: the value of each flag that was given, with where it
// came from (for messages), and the positional arguments.
type Values struct {
	set  map[string]value
	Args []string
}

type value struct{ text, from string }

// Has reports whether the flag name was given.
func (v Values) Has(name string) bool { _, ok := v.set[name]; return ok }

// String returns the flag's value, or "" when it was not given.
func (v Values) String(name string) string { return v.set[name].text }

// Switch returns whether the switch name is on.
func (v Values) Switch(name string) bool { return v.set[name].text == "true" }

// From names where the flag's value came from: "--jobs", or "RESPLANE_CONTROL".
func (v Values) From(name string) string { return v.set[name].from }

// Parse reads args, the words after the command's name, against spec, then fills each flag
// the command line did not give from its environment variable (through getenv) and its
// default; koanf merges the three layers, the command line on top. The syntax is Go's flag
// syntax with GNU habits: a flag is written with one or two dashes (-json, --json), its value
// after "=" or as the next word (--jobs=8, --jobs 8), a switch takes no value; flags and
// positional arguments may come in any order, and "--" ends the flags. A repeated flag keeps
// its last value. -h, -help and --help ask for help (ErrHelp). Every other problem is a
// *UsageError whose text names the flag as --flag.
func Parse(spec Spec, args []string, getenv func(string) string) (Values, error) {
	return parse(spec, args, getenv, nil)
}

// fileReader returns the layer a config file adds under the environment, given the command
// line's and the environment's layers (which may name the file).
type fileReader func(flags, env layer) (layer, error)

// parse is Parse with, when file is not nil, a config file's layer between the environment
// and the defaults.
func parse(spec Spec, args []string, getenv func(string) string, file fileReader) (Values, error) {
	flags, positional, err := flagLayer(spec, args)
	if err != nil {
		return Values{}, err
	}
	if err := spec.checkArgs(positional); err != nil {
		return Values{}, err
	}
	env := envLayer(spec, getenv)
	layers := []layer{defaultLayer(spec)}
	if file != nil {
		l, err := file(flags, env)
		if err != nil {
			return Values{}, err
		}
		layers = append(layers, l)
	}
	k := koanf.New(".")
	for _, l := range append(layers, env, flags) {
		if err := k.Load(l, nil); err != nil {
			return Values{}, err
		}
	}
	v := Values{set: map[string]value{}, Args: positional}
	for _, f := range spec.Flags {
		switch {
		case k.Exists(f.Name + ".value"):
			v.set[f.Name] = value{text: k.String(f.Name + ".value"), from: k.String(f.Name + ".from")}
		case f.Required && f.Env != "":
			return Values{}, usagef("--%s is required (or %s in the environment)", f.Name, f.Env)
		case f.Required:
			return Values{}, usagef("--%s is required", f.Name)
		}
	}
	return v, nil
}

// checkArgs requires exactly the positional arguments spec names.
func (s Spec) checkArgs(got []string) error {
	want := len(s.Args)
	switch {
	case len(got) == want:
		return nil
	case want == 0 && len(s.Flags) == 0:
		return usagef("unexpected argument %q: resplane %s takes no arguments", got[0], s.Name)
	case want == 0:
		return usagef("unexpected argument %q: resplane %s takes flags only", got[0], s.Name)
	case len(got) < want:
		return usagef("missing %s: resplane %s takes %s", strings.Join(s.Args[len(got):], " and "), s.Name, strings.Join(s.Args, " "))
	default:
		return usagef("unexpected argument %q: resplane %s takes %s", got[want], s.Name, strings.Join(s.Args, " "))
	}
}

// layer is one source of values, handed to koanf as a provider of an already parsed map.
// Each flag it holds is a map of its value and where the value came from, so that a bad
// value can be reported against its source after koanf has merged the layers.
type layer map[string]any

func (l layer) put(name, value, from string) {
	l[name] = map[string]any{"value": value, "from": from}
}

// get returns name's value in l.
func (l layer) get(name string) (string, bool) {
	if e, ok := l[name].(map[string]any); ok {
		return e["value"].(string), true
	}
	return "", false
}

// Read implements koanf.Provider.
func (l layer) Read() (map[string]any, error) { return l, nil }

// ReadBytes implements koanf.Provider; a layer is always loaded as a map, without a parser.
func (l layer) ReadBytes() ([]byte, error) {
	return nil, errors.New("a settings layer is a parsed map, not bytes")
}

// defaultLayer holds every flag's fixed default.
func defaultLayer(spec Spec) layer {
	l := layer{}
	for _, f := range spec.Flags {
		if f.Default != "" {
			l.put(f.Name, f.Default, "the default")
		}
	}
	return l
}

// envLayer reads each flag's environment variable; empty means unset.
func envLayer(spec Spec, getenv func(string) string) layer {
	l := layer{}
	for _, f := range spec.Flags {
		if f.Env == "" {
			continue
		}
		if text := getenv(f.Env); text != "" {
			l.put(f.Name, text, f.Env)
		}
	}
	return l
}

// flagLayer reads the command line: the flags as a layer, and the positional arguments.
func flagLayer(spec Spec, args []string) (layer, []string, error) {
	l := layer{}
	var positional []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(arg) < 2 || arg[0] != '-' {
			positional = append(positional, arg)
			continue
		}
		written, text, hasText := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-"), "=")
		if written == "h" || written == "help" {
			return nil, nil, ErrHelp
		}
		f, ok := spec.lookup(written)
		if !ok {
			return nil, nil, usagef("unknown flag %s", dashed(written))
		}
		from := "--" + f.Name
		switch {
		case f.Arg == "" && !hasText:
			text = "true"
		case f.Arg == "":
			if text, ok = switchValues[text]; !ok {
				return nil, nil, usagef("%s is a switch: give it alone, or as %s=true or %s=false", from, from, from)
			}
		case !hasText:
			if i+1 == len(args) {
				return nil, nil, usagef("%s needs a value: %s %s", from, from, f.Arg)
			}
			i++
			text = args[i]
		}
		l.put(f.Name, text, from)
	}
	return l, positional, nil
}

// lookup finds the flag written as name (a Name or a Short).
func (s Spec) lookup(name string) (Flag, bool) {
	for _, f := range s.Flags {
		if name != "" && (f.Name == name || f.Short == name) {
			return f, true
		}
	}
	return Flag{}, false
}

// dashed writes a flag name as the user should have typed it.
func dashed(name string) string {
	if name == "" {
		return `"-"`
	}
	return "--" + name
}

// ErrHelp is returned when -h, -help or --help was asked for: print Help and exit 0.
var ErrHelp = errors.New("help requested")

// UsageError is a command line, environment or config file that cannot be used: an unknown
// subcommand, flag or config key, a bad value, or a missing required flag or argument. It
// means exit status 2.
type UsageError struct {
	msg string
}

func (e *UsageError) Error() string { return e.msg }

func usagef(format string, args ...any) *UsageError {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// Invalid returns the usage error for a value that was given but cannot be used: the value,
// where it came from and why.
func (v Values) Invalid(name string, why error) *UsageError {
	return usagef("invalid value %q for %s: %v", v.String(name), v.From(name), why)
}

// Usagef returns a *UsageError: a setting that the command line, the environment or a config
// file gave, which cannot be used.
func Usagef(format string, args ...any) *UsageError { return usagef(format, args...) }
