// Package application holds resplane's use cases: list and read on the operator plane, redeem
// on the peer plane, the two agent tools, the end of a task and the launch checks.
//
// Use cases take everything from the outside world through ports: time from a Clock, files
// from an ExportFS, keys and nonces from their sources, and they report through a TraceSink.
// Nothing here calls time.Now, crypto/rand or os, and no transport, configuration or logging
// library type appears in a signature, so each use case can be driven by a test on the
// in-memory filesystem with a manual clock.
package application
