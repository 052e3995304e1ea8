// Package application holds the service's use cases: list and read on the operator plane
// (Files, Reader), redeem on the peer plane (Redeem), the two agent tools (ShareFile,
// FetchPeerFile), the end of a task (Tasks) and the launch checks (LaunchChecks). The use cases
// of the operator's client, which talks to a running service from outside, are in
// application/operator.
//
// Use cases take everything from the outside world through ports: time from a Clock, files
// from an ExportFS, keys and nonces from their sources, and they report through a TraceSink.
// Nothing here calls time.Now, crypto/rand or os, and no transport, configuration or logging
// library type appears in a signature, so each use case can be driven by a test on the
// in-memory filesystem with a manual clock.
package application
