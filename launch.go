package resplane

import (
	"crypto/x509"
	"io"
	"net"
	"time"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/landlock"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/tlscert"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/diag"
	"github.com/resplane/resplane/domain/manifest"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/sendrate"
)

// Launch is everything decided before the service is assembled: the validated manifest, the
// resolved settings and the TCP listener, which is bound before anything is created on disk
// so that a port in use leaves nothing behind. wire hands each field out on its own
// (wire.FieldsOf in wire.go), so a provider names the parts it uses; every field's type is
// therefore distinct.
type Launch struct {
	// Manifest is the validated manifest: the declared planes and capabilities.
	Manifest manifest.Manifest
	Identity Identity
	// Containment is the class the launching runtime achieved.
	Containment containment.Class
	Paths       Paths
	// Listener is the resource listener's bound TCP socket, without the connection cap.
	Listener net.Listener
	Network  Network
	Limits   Limits
	// Log is the service's logger (adapters/logging), which redacts handles. Its info lines
	// wait in logBatch, which Close writes out.
	Log      zerolog.Logger
	logBatch io.Closer
	// Confine is --confine: how the service confines itself once everything it opens at start
	// is open (docs/operator-guide.md, "Confinement").
	Confine landlock.Mode
	// Observability is where the service is watched from: the metrics listener and the OTLP
	// endpoint.
	Observability Observability
}

// Identity names the session this launch serves.
type Identity struct {
	// SessionID names the session on the trace, the agent card and the control status, and
	// is the iss of the handles this process mints.
	SessionID string
	// TraceParent is the runtime's session_start event id; "" unless joining a session the
	// runtime started.
	TraceParent string
}

// Paths are the absolute paths the service creates or opens; none is resolved through
// symlinks.
type Paths struct {
	// Workdir is created if missing: when WorkdirGiven (--workdir), only its last component
	// (a mistyped parent is an error, not a new tree); otherwise with its parents.
	Workdir      string
	WorkdirGiven bool
	TracePath    string
	ControlPath  string
	// SessionDir is <workdir>/.murmur/<session id>/.
	SessionDir string
	// SpoolDir holds the unnamed snapshot files of large reads: --spool-dir, else SessionDir
	// (created if missing). Nothing in it ever has a name, but the process writes there.
	SpoolDir string
}

// Network is how peers know this service and how it verifies them.
type Network struct {
	// AdvertiseURL is the url on our agent card and the source of our own audience.
	AdvertiseURL string
	// Audience is our own audience, <manifest name>@<host:port> of AdvertiseURL.
	Audience string
	// PeerRoots verifies https peers: the system roots plus --peer-ca's, nil for the system
	// roots alone. OpenLaunch loads it before anything is bound, so a bad file is a usage
	// error.
	PeerRoots *x509.CertPool
	// AllowedHosts are the --allowed-hosts names, lowercased: Host names the resource listener
	// answers besides IP literals, localhost and AdvertiseURL's host.
	AllowedHosts []string
	// PeerProof is --peer-proof: whether handles are bound and redeems proven
	// (docs/peer-plane.md, "Proof of possession").
	PeerProof proof.Mode
	// TLS is the resource listener's certificate pair (--tls-cert, --tls-key), nil for plain
	// HTTP. OpenLaunch loads it before anything is bound, so a bad pair is a usage error.
	TLS *tlscert.Pair
}

// Limits are the launch's bounds on memory, transfers and time.
type Limits struct {
	// Budgets are the bytes concurrent reads may hold in memory, with a spool and without
	// one, and in the spool (budget.Plan).
	Budgets budget.Sizes
	// SendTimeout closes a response that makes no progress for that long.
	SendTimeout time.Duration
	// MinSendRate closes a response whose client takes its body more slowly than this
	// (--min-send-rate); the zero Rate is off.
	MinSendRate sendrate.Rate
	// HashCacheMaxAge bounds the age of a listing's reused hash (--hash-cache-max-age).
	HashCacheMaxAge time.Duration
	// ListingCache is --listing-cache: "auto" takes read leases where the service can,
	// "max-age" never does.
	ListingCache string
	// FetchMaxBytes is the most fetch-peer-file receives.
	FetchMaxBytes int64
	// ReadHeaderTimeout closes a connection on either listener whose request header is not
	// complete by then.
	ReadHeaderTimeout time.Duration
	// ShutdownGrace is how long in-flight requests may take to finish once Run's context ends.
	ShutdownGrace time.Duration
}

// Observability is where the service is watched from (docs/operator-guide.md, "Metrics and
// tracing"). Each part is off when it is not configured: no listener, no goroutine.
type Observability struct {
	// MetricsListener is the metrics listener's bound TCP socket (--metrics-listen), nil when
	// off. OpenLaunch binds it, like Listener, before anything is created on disk.
	MetricsListener net.Listener
	// OTelEndpoint is the URL spans are posted to (otel.Endpoint: --otel-endpoint, else the
	// OTEL_EXPORTER_OTLP_* variables), "" when off: the one outbound connection the service
	// opens besides those to peers.
	OTelEndpoint string
}

// runLaunchChecks runs the launch checks that follow decoding the manifest (E-CAP-008, then
// E-CAP-007) against the real filesystem and returns the effective grants. It creates nothing,
// so check and serve share it.
func runLaunchChecks(m manifest.Manifest, afterTaskOverride manifest.AfterTask, workdir string) (application.Grants, *diag.Diagnostic) {
	return application.NewLaunchChecks(osfs.Locator{}).Run(application.LaunchInput{
		Manifest: m, AfterTaskOverride: afterTaskOverride, Workdir: workdir,
	})
}
