package resplane

import (
	"crypto/x509"
	"net"
	"time"

	"github.com/resplane/resplane/adapters/control"
	"github.com/resplane/resplane/adapters/httpapi"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/manifest"
)

// Launch is everything decided before the service is assembled: the validated manifest, the
// resolved settings and the TCP listener, which is bound before anything is created on disk
// so that a port in use leaves nothing behind.
type Launch struct {
	Manifest    manifest.Manifest
	SessionID   string
	TraceParent string // "" unless joining a session the runtime started
	Workdir     string // absolute, not resolved through symlinks; created if missing
	TracePath   string
	ControlPath string
	Containment containment.Class
	Listener    net.Listener
	// AdvertiseURL is the url on our agent card and the source of our own audience.
	AdvertiseURL string
	Audience     string

	FetchMaxBytes int64
	// PeerRoots verifies https peers: the system roots plus --peer-ca's, nil for the system
	// roots alone. cmd loads it before anything else, so a bad file is a usage error.
	PeerRoots         *x509.CertPool
	ReadBufferBudget  int64
	ReadHeaderTimeout time.Duration
	ShutdownGrace     time.Duration

	Log zerolog.Logger
}

// Planes lists the declared planes in the documented order (docs/http-api.md,
// "The agent card").
func (l Launch) Planes() []string {
	planes := []string{}
	if l.Manifest.Files != nil {
		planes = append(planes, "files")
	}
	if l.Manifest.PeerFiles != nil {
		planes = append(planes, "peer_files")
	}
	return planes
}

// Handlers are the two inbound edges of a service: the resource listener's routes and the
// control API.
type Handlers struct {
	Resources *httpapi.Resources
	Control   *control.API
}
