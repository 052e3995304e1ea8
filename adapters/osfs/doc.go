// Package osfs is the real filesystem (Linux only): every role resplane gives a local
// directory, each reached through descriptors held open, lives here, one file per role (the
// descriptor-based code is in the *_linux.go files):
//
//   - FS (export_linux.go, dir_linux.go) serves export roots: ports.ExportFS. This comment
//     says what it guarantees.
//   - Inbox (inbox_linux.go) is the workdir's peer-in/ directory: ports.PeerInbox.
//   - SessionDir (session_linux.go) is the session's own directory, .murmur/<session id>/.
//   - Spool (spool_linux.go) holds the snapshots of large reads in unnamed files:
//     ports.Spool.
//   - Leases (lease_linux.go) holds read leases on the files a listing hashes:
//     ports.ReadLeases.
//   - Locator (rootlocator.go) is the launch check's ports.RootLocator.
//   - Mirror (mirror_linux.go) is the directory `resplane files pull` mirrors into:
//     ports.LocalMirror. CreateAt and WriteOnCommit (landing_linux.go) are where
//     `resplane files get` lands one file.
//
// Inbox, SessionDir, Spool, Leases and Mirror each say in their own doc comment what they guarantee
// and what they do not. What the roles share is written once: the landing (landing_linux.go),
// a file filled unnamed or under a temp name and named into place through its directory's
// descriptor, behind both the inbox and the mirror (ports.Landing); the meaning of every errno
// in each role (refuse_linux.go); and the retry of a system call a signal interrupted
// (adapters/internal/eintr), around every call that looks a name up, opens, reads, writes,
// links, renames or removes one.
//
// An FS holds one descriptor of the workdir, opened by New, and resolves every name relative
// to a descriptor it holds, never by reading a path string again. At every call the declared
// export root is resolved beneath the workdir descriptor (following symlinks, refusing any
// step out of the workdir), and the requested path beneath the root by the class rule of
// docs/operator-guide.md, "Containment classes and symlinks". Both use domain/resolve, the
// algorithm adapters/memfs shares.
//
// A path without symlinks is opened by openat2 resolving root and path together with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS. An fstatat of the path first
// says whether it is a regular file; only then is the read descriptor opened, and it must be
// the inode the fstatat saw. The fstatat decides nothing else: when it fails or sees another
// type, an O_PATH descriptor's fstat decides the type (and the refusal) before any read
// open. When the kernel meets a symlink (ELOOP), or openat2 is
// unavailable (ENOSYS, or EPERM under a seccomp filter, after which the FS stops trying it),
// resolution walks one component at a time: openat(O_PATH|O_NOFOLLOW) relative to the
// directory descriptor above, fstat, readlinkat on the link's own descriptor. The final
// regular file is opened relative to its held parent descriptor with
// O_RDONLY|O_NOFOLLOW|O_NONBLOCK and must again be the inode that was looked up. Listing
// descends only through directories opened with O_RDONLY|O_DIRECTORY|O_NOFOLLOW relative to
// their parent's descriptor, so a directory swapped for a symlink fails closed. A listing
// states each file with fstatat(AT_SYMLINK_NOFOLLOW) relative to its held parent descriptor
// (a linked file: the inode its resolution looked up) and opens it, relative to the same
// descriptor, only when the caller does not know it by that stat (ports.Visitor).
//
// What this guarantees: no concurrent rename, symlink swap or directory exchange can make a
// call open a file by a route that leaves the root; a race turns into a refusal (possibly
// io_error), never into an outside file, for reads and listings alike. A FIFO, socket or
// device node is never opened: resolution learns the type from a stat (an fstatat, or an
// O_PATH descriptor's fstat), a listing from the directory entry, and every read open is
// O_NONBLOCK, so no call blocks on a FIFO. Size and modification time come from the
// descriptor the bytes are read from; the stat a listing takes instead of an open is of the
// inode linked at the name at that instant, as an fstat of a descriptor opened then would
// be. Refusals never carry a host path.
//
// What it does not guarantee:
//
//   - Hard links are invisible to any path check. A hard link inside the root to a file
//     stored elsewhere is the same file as the one elsewhere, and it is served.
//   - A directory moved out of the root while a call holds its descriptor (mid-resolution,
//     or mid-listing) is followed to its new place: the call may still open a file beneath
//     it. Arranging that takes write access both inside the root and at the destination.
//   - Mount points are crossed: a filesystem mounted beneath the root is part of it.
//   - A regular file swapped for a device node in the instant between the type check and
//     the read open may be opened (and is then closed unread); creating a device node
//     inside the root takes CAP_MKNOD.
//   - Absolute symlinks are judged against the workdir's canonical path as New recorded it.
//     If the workdir is later moved, absolute links inside it are refused (outside_root);
//     nothing outside becomes reachable.
//   - The FS reads with the process's own credentials; it does not stand between users.
//   - A file a listing knows by its stat is not opened, so the listing does not learn that it
//     could no longer be opened for a reason its inode does not record (a security module's
//     policy, say).
//
// An FS is safe for concurrent use.
package osfs
