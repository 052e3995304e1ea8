// Package tarball writes the archive of `resplane files tar` (docs/operator-guide.md, "One
// archive") with the standard library's archive/tar: ports.Archive over an io.Writer.
//
// A member is held in an unnamed temp file until the use case commits it, verified; only then
// are its header and body written. Headers are USTAR where the name and size fit, PAX where
// they do not (archive/tar's own choice), never GNU; the modification time is the service's,
// in whole seconds, and the mode 0644. Once a write to the output fails, the archive is cut
// short: nothing more is written and it is never ended with its closing blocks, so a reader
// cannot mistake it for a whole one.
package tarball
