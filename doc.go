// Package resplane is the composition root: it wires the adapters to the application's use
// cases (wire.go, and wire_gen.go which `go tool wire` generates from it) and runs the
// resulting service until a signal arrives (service.go). It is the only package that knows
// every layer.
package resplane
