// Package spool keeps the private snapshots of large reads in unnamed files (ports.Spool), so a
// response waiting for a slow client holds a file descriptor and disk-backed page cache instead
// of the process's memory. Linux only: the descriptor code is in spool_linux.go.
//
// A Dir holds one descriptor of the spool directory, opened by Open with
// O_DIRECTORY|O_NOFOLLOW, and makes every snapshot relative to it with
// openat(".", O_TMPFILE|O_EXCL|O_RDWR), mode 0600. Fill copies a source that has a descriptor
// with copy_file_range(2), which the kernel turns into a reflink (a copy-on-write clone of the
// extents, no data copied) where the filesystem supports it (XFS, btrfs) and into an in-kernel
// copy elsewhere; only a source without a descriptor, or a pair of files the kernel cannot copy
// between, passes through a 64 KiB buffer. Fill writes at explicit offsets, so a snapshot's
// own file offset stays on its first byte until it is read out.
//
// What this guarantees:
//
//   - A snapshot never has a name: O_TMPFILE creates it unlinked, and O_EXCL stops it from
//     ever being linked into a directory. Nothing can open it by a path, and a crash or
//     kill -9 at any instant leaves no file behind; the kernel frees its blocks when its last
//     descriptor is closed.
//   - Its bytes are written only by Fill, from the source the caller hands it: no other
//     writer shares the file, so the bytes read back (hashed, then sent) are the bytes
//     filled.
//   - A snapshot's file offset is moved only by reading Content, which therefore starts at
//     the first byte and stops at the last one filled; it is an *io.LimitedReader over the
//     *os.File, so net/http sends it with sendfile(2).
//   - Every snapshot is a new file, never one an earlier snapshot used: sendfile(2) leaves
//     references to the file's pages on the socket, not copies, and rewriting them for a
//     later snapshot would change a body already counted sent. Closing a snapshot frees its
//     file once the socket lets go of the pages, and the pages are never written again.
//   - Errors are io_error refusals carrying the operating system's text, never a host path.
//   - A directory whose filesystem cannot make unnamed files is found at Open, by making one
//     (ErrNoUnnamedFiles), not at the first large read.
//
// What it does not guarantee:
//
//   - A process of the same user that may ptrace this one can open a snapshot through
//     /proc/<pid>/fd and change it between hashing and sending, as it could change the
//     process's memory. Marking the process non-dumpable closes that to everyone but root.
//   - A snapshot's bytes may reach the spool directory's disk: the kernel writes dirty pages
//     back after about 30 s (vm.dirty_expire_centisecs) or under memory pressure, and frees
//     them only when the snapshot is closed. They are the export's bytes, on the filesystem
//     the operator chose with --spool-dir.
//   - A full spool filesystem fails the read (io_error: no space left on device); the spool
//     budget (--spool-budget) is what keeps the total below what the filesystem holds.
//   - The directory's descriptor keeps pointing at the directory that was opened; if it is
//     removed later, every Create fails.
//
// A Dir is safe for concurrent use.
package spool
