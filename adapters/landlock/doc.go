// Package landlock confines the serve process with Linux's Landlock LSM, through
// github.com/landlock-lsm/go-landlock (docs/operator-guide.md, "Confinement"). Confine is
// called once, after everything the service opens at start is open and before it serves; from
// then on the kernel itself refuses the process any file access its Policy does not name.
//
// What a confined process can still do, and nothing else of what Landlock can restrict:
//
//   - Read files and list directories beneath the workdir, including export roots created
//     after start.
//   - Read, create, write, truncate, rename within and remove regular files, and create and
//     remove directories, beneath each writable directory of the Policy (peer-in/, the session
//     directory, the directories of the trace file, the control socket and the spool).
//   - Read the files Go's DNS resolver re-reads while the process runs (/etc/resolv.conf,
//     /etc/hosts, /etc/nsswitch.conf, each where it exists).
//   - With Policy.ProcessStats (metrics are served), read the process's own /proc/<pid>
//     entries and /proc/stat, which the Prometheus process collector reads at each scrape.
//   - Use descriptors it opened before Confine (listeners, the control socket, the trace file,
//     the workdir's descriptors) as before.
//
// What it guarantees:
//
//   - A rule is anchored on a descriptor, never on a name looked up later: each directory is
//     opened once and handed to the kernel as /proc/self/fd/<n>, which names that very
//     directory. A writable directory beneath the workdir is opened relative to the workdir's
//     descriptor one component at a time without following any symlink, so a symlink the
//     agent planted (peer-in -> /) grants nothing: such a directory, like a missing one, gets
//     no rule, and nothing can be written there.
//   - Confine uses the newest Landlock ABI the kernel offers (up to the newest this library
//     knows) and reports it; it restricts every filesystem right and IPC scope of that ABI.
//     Executing files, creating symlinks, FIFOs, sockets and device nodes, linking or renaming
//     across directories and device ioctls are granted nowhere.
//   - Before restricting, it loads what Go would otherwise load lazily from files the rules do
//     not name: the system TLS roots and the local time zone; and it makes the process resolve
//     names with Go's own resolver, whose files the rules do name (the cgo resolver would load
//     NSS modules from anywhere).
//   - Landlock applies to every thread of the process, for the rest of its life; nothing can
//     lift it.
//
// What it does not guarantee:
//
//   - TCP is not restricted: a Landlock network rule names a port, never a host, so it cannot
//     express the allow-lists (docs/decisions/0030-landlock-confines-files-and-ipc-not-tcp.md).
//   - Operations Landlock does not cover stay possible: stat, chmod, chown, utimes, xattrs and
//     flock on any path, and every operation on a descriptor opened before Confine.
//   - A hard link inside the workdir to a file stored elsewhere is read like any file beneath
//     the workdir: rules follow paths, not inodes.
//   - A resolver file replaced by rename after start (a new inode) is no longer readable: the
//     resolver then falls back to its defaults until the service restarts.
//   - A writable directory replaced after start (removed and created again) loses its rule:
//     the new directory is read-only, like the rest of the workdir.
//   - Where the flags put the trace, the control socket or the spool in the workdir itself or
//     in an export root, that directory is writable beneath.
//
// RESPLANE_TEST_LANDLOCK_ABSENT=1 in the environment makes ABI report 0, as on a kernel
// without Landlock. It exists for the tests of the "absent" path only; setting it can only
// weaken confinement, which RESPLANE_CONFINE=off does anyway.
package landlock
