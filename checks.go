package resplane

import (
	"crypto/x509"
	"encoding/hex"
	"fmt"

	"github.com/google/uuid"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/peerhttp"
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

// DefaultReadBudget is the read buffer budget when --read-buffer-budget is not given.
const DefaultReadBudget = 256 << 20

// ReadBudget returns the budget to serve with: the given one (0 when the flag was not given)
// or the default, which grows to what one read of the largest declared max_bytes reserves
// (application.BufferFor), so a valid manifest always launches. A given budget smaller than
// that could never grant such a read and is refused.
func ReadBudget(m manifest.Manifest, given int64) (int64, error) {
	need := int64(0)
	if m.Files != nil {
		need = application.BufferFor(m.Files.MaxBytes.Int64())
	}
	if m.PeerFiles != nil {
		need = max(need, application.BufferFor(m.PeerFiles.MaxBytes.Int64()))
	}
	if given == 0 {
		return max(DefaultReadBudget, need), nil
	}
	if given < need {
		return 0, fmt.Errorf("--read-buffer-budget (%d bytes) must be at least %d bytes: one read of a file of max_bytes needs that much", given, need)
	}
	return given, nil
}

// LoadPeerRoots reads --peer-ca: the system roots plus the PEM bundle at path, or nil (the
// system roots alone) when path is "".
func LoadPeerRoots(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	return peerhttp.LoadRoots(path)
}
