package config

import (
	"fmt"
	"strings"
)

// Help returns cmd's --help text: what it does, then every flag with its default.
func Help(cmd Command) string {
	c := commands[cmd]
	shown := commandSettings(cmd)
	if c.config {
		shown = append(shown, configSetting)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: resplane %s [flags]\n\n%s\n\nFlags:\n", cmd, c.summary)
	for _, st := range shown {
		fmt.Fprintf(&b, "  --%s %s\n        %s", st.name, st.arg, st.usage)
		switch {
		case st.def != "":
			fmt.Fprintf(&b, " (default %s)", st.def)
		case st.defHelp != "":
			fmt.Fprintf(&b, " (default: %s)", st.defHelp)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nEvery flag can also be set as RESPLANE_<FLAG> in the environment (upper case, - becomes _;\nan empty variable counts as unset)")
	if c.config {
		b.WriteString(" or as a key of the --config file")
	}
	b.WriteString(". Precedence: flag > environment")
	if c.config {
		b.WriteString(" > config file")
	}
	b.WriteString(" > default.\n")
	return b.String()
}
