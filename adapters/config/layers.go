package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/knadh/koanf/v2"

	"github.com/resplane/resplane/domain/manifest"
)

// UsageError is a command line, environment or config file that cannot be used: an unknown
// subcommand, flag or config key, a bad value, or a missing required flag. It means exit
// status 2.
type UsageError struct {
	msg string
}

func (e *UsageError) Error() string { return e.msg }

func usagef(format string, args ...any) *UsageError {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// ErrHelp is returned by Load when -h, -help or --help was asked for; print Help and exit 0.
var ErrHelp = flag.ErrHelp

// Load reads cmd's settings from args (the arguments after the subcommand name), the
// environment (through getenv, such as os.Getenv) and, for serve, the --config file.
// Precedence: flag > environment > config file > default; an empty environment variable
// counts as unset. Every problem is a *UsageError, except a request for help, which is
// ErrHelp.
func Load(cmd Command, args []string, getenv func(string) string) (Settings, error) {
	c, ok := commands[cmd]
	if !ok {
		return Settings{}, usagef("unknown subcommand %q", cmd)
	}
	own := commandSettings(cmd)
	accepted := own
	if c.config {
		accepted = append(slices.Clip(own), configSetting)
	}
	flags, err := flagLayer(cmd, accepted, args)
	if err != nil {
		return Settings{}, err
	}
	env := envLayer(accepted, getenv)
	file := layer{}
	if c.config {
		if p, ok := firstValue(configSetting.name, flags, env); ok {
			if file, err = fileLayer(p, own); err != nil {
				return Settings{}, err
			}
		}
	}
	defaults := layer{}
	for _, st := range own {
		if st.def != "" {
			defaults.put(st.name, st.def, "the default")
		}
	}
	k := koanf.New(".")
	for _, l := range []layer{defaults, file, env, flags} {
		if err := k.Load(l, nil); err != nil {
			return Settings{}, err
		}
	}
	var s Settings
	for _, st := range own {
		if !k.Exists(st.name + ".value") {
			continue
		}
		v, from := k.String(st.name+".value"), k.String(st.name+".from")
		if err := st.set(&s, v); err != nil {
			return Settings{}, usagef("invalid value %q for %s: %v", v, from, err)
		}
	}
	switch {
	case s.Manifest == "":
		return Settings{}, usagef("--manifest is required")
	case s.TraceParent != "" && s.SessionID == "":
		return Settings{}, usagef("--trace-parent requires --session-id")
	}
	return s, nil
}

// layer is one source of settings, handed to koanf as a provider of an already parsed map.
// Each setting it holds is a map of its value and where the value came from, so that a bad
// value can be reported against its source after koanf has merged the layers.
type layer map[string]any

func (l layer) put(name, value, from string) {
	l[name] = map[string]any{"value": value, "from": from}
}

// firstValue returns name's value from the first of layers that holds it.
func firstValue(name string, layers ...layer) (string, bool) {
	for _, l := range layers {
		if e, ok := l[name].(map[string]any); ok {
			return e["value"].(string), true
		}
	}
	return "", false
}

// Read implements koanf.Provider.
func (l layer) Read() (map[string]any, error) { return l, nil }

// ReadBytes implements koanf.Provider; a layer is always loaded as a map, without a parser.
func (l layer) ReadBytes() ([]byte, error) {
	return nil, errors.New("a settings layer is a parsed map, not bytes")
}

// flagLayer parses args with the accepted flags. Repeating a flag keeps the last value.
func flagLayer(cmd Command, accepted []setting, args []string) (layer, error) {
	fs := flag.NewFlagSet("resplane "+string(cmd), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := layer{}
	for _, st := range accepted {
		fs.Func(st.name, st.usage, func(v string) error {
			l.put(st.name, v, "--"+st.name)
			return nil
		})
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, ErrHelp
		}
		return nil, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q (resplane %s takes flags only)", fs.Arg(0), cmd)
	}
	return l, nil
}

// envLayer reads RESPLANE_<NAME> for each accepted setting; empty means unset.
func envLayer(accepted []setting, getenv func(string) string) layer {
	l := layer{}
	for _, st := range accepted {
		name := "RESPLANE_" + strings.ToUpper(strings.ReplaceAll(st.name, "-", "_"))
		if v := getenv(name); v != "" {
			l.put(st.name, v, name)
		}
	}
	return l
}

// fileLayer reads the --config file: a YAML mapping whose keys are flag names and whose
// values are scalars (null counts as unset). An unknown key is a usage error.
func fileLayer(p string, own []setting) (layer, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, usagef("cannot read the config file: %v", err)
	}
	doc, err := parseYAML(data)
	if err != nil {
		return nil, usagef("the config file %s is not valid YAML: %v", p, err)
	}
	l := layer{}
	if doc.Kind == manifest.NullNode {
		return l, nil
	}
	if doc.Kind != manifest.MappingNode {
		return nil, usagef("the config file %s must be a mapping of flag names to values", p)
	}
	for _, e := range doc.Entries {
		known := slices.ContainsFunc(own, func(st setting) bool { return st.name == e.Key })
		switch {
		case !known:
			return nil, usagef("unknown key %q in the config file %s (line %d): keys are flag names, such as read-buffer-budget",
				e.Key, p, e.Line)
		case e.Value.Kind == manifest.ScalarNode:
			l.put(e.Key, e.Value.Text, fmt.Sprintf("%s in the config file %s (line %d)", e.Key, p, e.Line))
		case e.Value.Kind != manifest.NullNode:
			return nil, usagef("%s in the config file %s (line %d) must be a single value", e.Key, p, e.Line)
		}
	}
	return l, nil
}
