package config

import (
	"fmt"
	"strings"
)

// Help returns spec's --help text, in the one layout every command shares: the Usage line,
// what the command does, one row per flag (its name and value, then what it does and its
// default), then the notes.
func Help(spec Spec) string {
	var b strings.Builder
	usage := "resplane " + spec.Name
	if len(spec.Args) > 0 {
		usage += " " + strings.Join(spec.Args, " ")
	}
	if len(spec.Flags) > 0 {
		usage += " [flags]"
	}
	fmt.Fprintf(&b, "Usage:\n  %s\n\n%s\n\nFlags:\n", usage, strings.TrimSpace(spec.Summary))
	for _, f := range spec.Flags {
		b.WriteString("  " + flagRow(f) + "\n        " + f.Usage)
		switch {
		case f.Default != "" && f.Arg != "":
			fmt.Fprintf(&b, " (default %s)", f.Default)
		case f.DefaultHelp != "":
			fmt.Fprintf(&b, " (default: %s)", f.DefaultHelp)
		}
		b.WriteString("\n")
	}
	b.WriteString("  -h, --help\n        Print this help and exit\n")
	if notes := strings.TrimSpace(spec.Notes); notes != "" {
		b.WriteString("\n" + notes + "\n")
	}
	return b.String()
}

// flagRow is how help writes a flag: "--jobs N", "-o, --output FILE", "--json".
func flagRow(f Flag) string {
	row := "--" + f.Name
	if f.Short != "" {
		row = "-" + f.Short + ", " + row
	}
	if f.Arg != "" {
		row += " " + f.Arg
	}
	return row
}

// UsageLine returns the one line a usage error prints: the command as typed ("resplane files
// pull"), the problem, and where help is.
func UsageLine(command string, err error) string {
	return fmt.Sprintf("%s: %v (see '%s --help')\n", command, err, command)
}
