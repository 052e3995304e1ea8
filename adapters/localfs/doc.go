// Package localfs is the operator's local side of `resplane files` (Linux only): Dir is the
// directory a pull mirrors into (ports.LocalMirror), and CreateAt and Spool are where
// `resplane files get` lands one file (ports.Landing). See docs/operator-guide.md,
// "Pulling outputs".
//
// What it guarantees:
//
//   - A Dir holds one descriptor of its directory, and every path beneath it is resolved one
//     component at a time relative to a descriptor, each directory opened with
//     O_NOFOLLOW|O_DIRECTORY, never by a path string. A symlink (or a file) on the way is
//     refused, unsafe_path, so a symlink planted in the directory can never redirect a read,
//     a write or a deletion outside it.
//   - A download is written into a new temp file (.resplane-<16 random hex>.part, created
//     O_CREAT|O_EXCL|O_NOFOLLOW) in the directory of its destination, flushed, and renamed
//     over the destination in one step through the same directory descriptor: a reader of
//     the destination sees the earlier file or the whole new one, never a mix, and a discarded
//     or failed download leaves no temp file.
//   - A destination that exists as anything but a regular file (a symlink, a directory, a
//     FIFO) is never replaced or written through: unsafe_path. A name the filesystem refuses
//     (too long, invalid) is unsafe_path too.
//   - Files lists and Delete removes regular files only; symlinks are neither followed nor
//     removed, and directories are left in place.
//   - Refusals name no host path; an io_error carries the operating system's description of
//     the failure.
//
// What it does not guarantee:
//
//   - The directory given to Open, and the path to it, are trusted: symlinks there are
//     followed, as for any path the operator types. So is the destination of CreateAt.
//   - Another process changing the directory while a pull runs can make a comparison stale
//     or a step fail; it cannot make a write land outside the directory.
//   - The temp file is flushed before the rename, the directory is not: after a power loss
//     the destination holds its earlier or its new version, whole.
//   - A temp file survives a crash (kill -9) of the pull that made it; a later pull with
//     --delete removes it, as it removes every file the listing does not have.
//
// A Dir is safe for concurrent use.
package localfs
