package osfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// dirName is the inbox directory, relative to the workdir.
const dirName = "peer-in"

// Inbox is the peer-in/ directory of one workdir (ports.PeerInbox): it stores the files
// fetch-peer-file receives, so that a fetched file appears whole or not at all.
//
// What it guarantees:
//
//   - Every operation is relative to one descriptor of the workdir, opened once by OpenInbox,
//     and then to one descriptor of peer-in opened with O_NOFOLLOW|O_DIRECTORY per staged
//     file. If peer-in exists as anything but a real directory (a symlink to a directory
//     included) Stage fails and nothing is written through it; a peer-in swapped for a
//     symlink after Stage does not redirect the file either, because the rename goes through
//     the same directory descriptor the temp file was created in.
//   - A staged file is a new 0600 temp file peer-in/.<handle id>-<16 random hex>.part,
//     created with O_CREAT|O_EXCL|O_NOFOLLOW, so concurrent stages never share or follow a
//     file.
//   - Commit flushes the file, renames it over peer-in/<name> in one step (replacing a file
//     or a symlink of that name, never writing through it) and flushes the directory. A
//     reader sees the earlier file or the new one, never a mix.
//   - Every failure leaves no temp file behind and is an io_error refusal whose message
//     names no host path. A system call a signal interrupts is retried, as everywhere in
//     this package.
//
// What it does not guarantee: it does not guard against another process rewriting files
// inside peer-in/ after Commit, and it does not stop the workdir itself from being replaced
// after OpenInbox (the descriptor keeps pointing at the directory that was opened).
//
// An Inbox is safe for concurrent use.
type Inbox struct {
	workdir int
}

var _ ports.PeerInbox = (*Inbox)(nil)

// OpenInbox opens workdir (O_PATH|O_DIRECTORY) and returns its inbox. The error names the
// path; it is meant for the operator at startup.
func OpenInbox(workdir string) (*Inbox, error) {
	fd, err := retry(func() (int, error) { return unix.Open(workdir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return nil, fmt.Errorf("opening the workdir %s for peer-in: %w", workdir, err)
	}
	return &Inbox{workdir: fd}, nil
}

// Close releases the workdir descriptor. No Stage may be running or follow.
func (in *Inbox) Close() error {
	return unix.Close(in.workdir)
}

// Stage creates peer-in (0700) when it is missing and a new temp file in it for handleID. It
// fails with an io_error refusal, having written nothing, when peer-in is not a real directory
// or handleID could not be part of a file name.
func (in *Inbox) Stage(handleID string) (ports.StagedFile, error) {
	if strings.ContainsAny(handleID, "/\x00") {
		return nil, storeFailed("the handle id cannot be part of a file name", nil)
	}
	if err := retryErr(func() error { return unix.Mkdirat(in.workdir, dirName, 0o700) }); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, storeFailed("peer-in could not be created", err)
	}
	dir, err := retry(func() (int, error) {
		return unix.Openat(in.workdir, dirName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, storeFailed("peer-in is not a directory or cannot be opened", err)
	}
	var random [8]byte
	rand.Read(random[:])
	temp := "." + handleID + "-" + hex.EncodeToString(random[:]) + ".part"
	fd, err := retry(func() (int, error) {
		return unix.Openat(dir, temp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	})
	if err != nil {
		unix.Close(dir)
		return nil, storeFailed("the temp file could not be created", err)
	}
	return &stagedFile{dir: dir, temp: temp, file: os.NewFile(uintptr(fd), dirName+"/"+temp)}, nil
}

// stagedFile is one temp file in peer-in, with the peer-in descriptor it was created in. It is
// used by one goroutine.
type stagedFile struct {
	dir  int
	temp string
	file *os.File
	done bool
}

// Write appends to the temp file. A failure is an io_error refusal.
func (s *stagedFile) Write(p []byte) (int, error) {
	n, err := s.file.Write(p)
	if err != nil {
		return n, storeFailed("writing the temp file failed", err)
	}
	return n, nil
}

// Commit flushes the temp file and renames it over peer-in/<name>, then flushes peer-in, and
// returns "peer-in/<name>". name must be one path component: not empty, ".", "..", and without
// "/" or NUL. On any failure neither the temp file nor a new peer-in/<name> remains, and the
// error is an io_error refusal. A second Commit, or one after Discard, fails the same way.
func (s *stagedFile) Commit(name string) (string, error) {
	if s.done {
		return "", storeFailed("the temp file was already committed or discarded", nil)
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		s.Discard()
		return "", storeFailed("the stored name is not a single file name", nil)
	}
	if err := s.file.Sync(); err != nil {
		s.Discard()
		return "", storeFailed("flushing the temp file failed", err)
	}
	if err := s.file.Close(); err != nil {
		s.Discard()
		return "", storeFailed("closing the temp file failed", err)
	}
	if err := retryErr(func() error { return unix.Renameat(s.dir, s.temp, s.dir, name) }); err != nil {
		s.Discard()
		return "", storeFailed("moving the file into place failed", err)
	}
	s.done = true
	defer unix.Close(s.dir)
	if err := retryErr(func() error { return unix.Fsync(s.dir) }); err != nil {
		unix.Unlinkat(s.dir, name, 0)
		return "", storeFailed("flushing peer-in failed", err)
	}
	return dirName + "/" + name, nil
}

// Discard closes and removes the temp file. It does nothing after Commit or a first Discard.
func (s *stagedFile) Discard() {
	if s.done {
		return
	}
	s.done = true
	s.file.Close()
	unix.Unlinkat(s.dir, s.temp, 0)
	unix.Close(s.dir)
}

// storeFailed returns the io_error refusal for a failed store: what went wrong and, when the
// cause is an operating-system error, its description (never a path, never an errno number).
func storeFailed(what string, cause error) *refusal.Refusal {
	var errno unix.Errno
	if errors.As(cause, &errno) {
		what += ": " + errno.Error()
	}
	r := refusal.WithMessage(refusal.IOError, "The fetched file could not be stored: "+what+".")
	if cause != nil {
		r = r.Wrapping(cause)
	}
	return r
}
