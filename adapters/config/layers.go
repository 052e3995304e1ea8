package config

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/resplane/resplane/domain/manifest"
)

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
	var file fileReader
	if c.config {
		file = func(flags, env layer) (layer, error) {
			p, ok := flags.get(configSetting.Name)
			if !ok {
				p, ok = env.get(configSetting.Name)
			}
			if !ok {
				return layer{}, nil
			}
			return fileLayer(p, cmd.Spec().Flags)
		}
	}
	v, err := parse(cmd.Spec(), args, getenv, file)
	if err != nil {
		return Settings{}, err
	}
	var s Settings
	for _, st := range commandSettings(cmd) {
		if !v.Has(st.Name) {
			continue
		}
		if err := st.set(&s, v.String(st.Name)); err != nil {
			return Settings{}, v.Invalid(st.Name, err)
		}
	}
	switch {
	case s.Manifest == "":
		return Settings{}, usagef("--manifest is required")
	case s.TraceParent != "" && s.SessionID == "":
		return Settings{}, usagef("--trace-parent requires --session-id")
	case s.TLSCert != "" && s.TLSKey == "":
		return Settings{}, usagef("--tls-cert requires --tls-key: give the certificate's private key too")
	case s.TLSKey != "" && s.TLSCert == "":
		return Settings{}, usagef("--tls-key requires --tls-cert: give the certificate the key belongs to")
	}
	return s, nil
}

// fileLayer reads the --config file: a YAML mapping whose keys are flag names and whose
// values are scalars (null counts as unset). An unknown key is a usage error, and so is
// "config" itself: a config file cannot name another.
func fileLayer(p string, flags []Flag) (layer, error) {
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
		known := e.Key != configSetting.Name && slices.ContainsFunc(flags, func(f Flag) bool { return f.Name == e.Key })
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

// envName is a serve or check setting's environment variable: RESPLANE_ and the flag's name
// in upper case, - becoming _.
func envName(flag string) string {
	return "RESPLANE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}
