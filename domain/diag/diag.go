// Package diag holds the launch diagnostics: the refusals that stop resplane before anything is
// created (docs/operator-guide.md, "Launch checks") and the warnings a launch that goes ahead
// logs.
//
// A diagnostic is data, like a refusal: a stable code, one sentence saying what is wrong and one
// saying what to do. Both are single lines, so the rendering is always exactly two lines.
package diag

import "strings"

// Code is the stable name of a diagnostic, exactly as printed between the brackets.
type Code string

// The launch diagnostics, in the order the checks run, and the one warning.
const (
	// ManifestUnreadable: the manifest file is missing, unreadable or not valid YAML.
	ManifestUnreadable Code = "E-MAN-002"
	// ManifestNameMissing: the top-level name is missing or null.
	ManifestNameMissing Code = "E-MAN-001"
	// ManifestInvalidField: a key has the wrong type or a refused value, or a required key is
	// missing inside a declared block.
	ManifestInvalidField Code = "E-MAN-003"
	// NetworkAllowInvalid: a capabilities.network.allow entry is not a destination.
	NetworkAllowInvalid Code = "E-CAP-001"
	// PeerTTLTooLongForSleep: a sleeping capsule declares peer_files without a short max_ttl.
	PeerTTLTooLongForSleep Code = "E-CAP-008"
	// RootOutsideWorkdir: an existing export root resolves outside the workdir.
	RootOutsideWorkdir Code = "E-CAP-007"
	// UnknownKey: an unknown key inside a block whose keys resplane owns; never refuses.
	UnknownKey Code = "W-SEC-019"
)

// Diagnostic is a launch refusal. Message and Hint are one line each.
type Diagnostic struct {
	Code    Code
	Message string
	Hint    string
}

// Render returns exactly the two lines printed to stderr, each ending in a newline:
// "error[CODE]: message" and "  hint: hint". A line break inside the message or hint (from a
// path or value it quotes) is written as \n or \r, so the rendering is always two lines.
func (d *Diagnostic) Render() string {
	return d.Error() + "\n  hint: " + oneLine.Replace(d.Hint) + "\n"
}

// Error returns the first line of the rendering without its newline, so a Diagnostic can
// travel as an error.
func (d *Diagnostic) Error() string {
	return "error[" + string(d.Code) + "]: " + oneLine.Replace(d.Message)
}

var oneLine = strings.NewReplacer("\n", `\n`, "\r", `\r`)

// Warning is a finding that does not stop the launch. Key is the dotted manifest key it is
// about.
type Warning struct {
	Code    Code
	Message string
	Key     string
}

// Render returns the line `resplane check` prints on stderr for the warning, ending in a
// newline: "warning[CODE]: message", a line break inside the message written as \n or \r.
func (w Warning) Render() string {
	return "warning[" + string(w.Code) + "]: " + oneLine.Replace(w.Message) + "\n"
}
