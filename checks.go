package resplane

import (
	"encoding/hex"

	"github.com/google/uuid"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/diag"
	"github.com/resplane/resplane/domain/manifest"
)

// RunLaunchChecks runs the launch checks that follow decoding the manifest (E-CAP-008, then
// E-CAP-007) against the real filesystem and returns the effective grants. It creates nothing,
// so check and serve share it.
func RunLaunchChecks(m manifest.Manifest, afterTaskOverride manifest.AfterTask, workdir string) (application.Grants, *diag.Diagnostic) {
	return application.NewLaunchChecks(osfs.Locator{}).Run(application.LaunchInput{
		Manifest: m, AfterTaskOverride: afterTaskOverride, Workdir: workdir,
	})
}

// NewSessionID returns a fresh session id: "ses_" and a UUIDv7 as 32 lowercase hex digits.
func NewSessionID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	return "ses_" + hex.EncodeToString(id[:]), nil
}
