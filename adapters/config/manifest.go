// Package config loads what resplane is told at launch: the capsule manifest (YAML, decoded by
// the manifest package's rules) and the settings of a subcommand (flags, RESPLANE_*
// environment variables and an optional YAML config file, merged with koanf).
//
// Nothing here creates a file. A manifest problem is a launch diagnostic (exit 2 with its two
// stderr lines); a settings problem is a *UsageError (exit 2), found before the manifest is
// read.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/resplane/resplane/domain/diag"
	"github.com/resplane/resplane/domain/manifest"
)

// LoadManifest reads and decodes the manifest at path. A file that is missing, unreadable or
// not valid YAML is E-MAN-002 naming the file (and the line, for YAML); every later rule is
// manifest.Decode's. Warnings are returned only when the manifest is accepted.
func LoadManifest(path string) (manifest.Manifest, []diag.Warning, *diag.Diagnostic) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return manifest.Manifest{}, nil, &diag.Diagnostic{
			Code:    diag.ManifestUnreadable,
			Message: fmt.Sprintf("cannot read the manifest %s: %v", path, err),
			Hint:    "check the --manifest path and that the file is readable",
		}
	}
	doc, err := parseYAML(data)
	if err != nil {
		return manifest.Manifest{}, nil, &diag.Diagnostic{
			Code:    diag.ManifestUnreadable,
			Message: fmt.Sprintf("the manifest %s is not valid YAML: %v", path, err),
			Hint:    "fix the YAML at that line; keys within one mapping must be unique",
		}
	}
	return manifest.Decode(doc)
}
