package ports

// Archive is the one archive `resplane files tar` writes (docs/operator-guide.md, "One
// archive"): members appended in order, each whole or not at all.
//
// Errors are *refusal.Refusal: io_error, naming no host path, when the temp file or the
// archive's output fails. Once a write to the output has failed, the archive is cut short:
// every later Member and Close fails, and the archive is never ended cleanly.
type Archive interface {
	// Member returns a Landing for the member at path (relative, "/"-separated). Until its
	// Commit nothing of it reaches the archive; Commit appends the member's header (path, the
	// length written, the modification time, mode 0644) and its body; Discard drops it.
	Member(path string) (Landing, error)
	// Close ends the archive, when no write to it has failed.
	Close() error
}
