package osfs

import (
	"errors"
	"io/fs"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/resplane/resplane/domain/refusal"
)

func TestAnErrnoIsADecisionOnlyWhereItMeansOne(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		at      place
		what    string
		err     error
		code    refusal.Code
		message string
	}{
		{"a missing name in an export is not_found", inExport, "", unix.ENOENT, refusal.NotFound, ""},
		{"a symlink met in an export is symlink_refused", inExport, "", unix.ELOOP, refusal.SymlinkRefused, ""},
		{"a device in an export is not_a_regular_file", inExport, "", unix.ENXIO, refusal.NotARegularFile, ""},
		{"a step out of an export is outside_root", inExport, "", unix.EXDEV, refusal.OutsideRoot, ""},
		{"any other errno in an export is io_error with its description", inExport, "", unix.EIO, refusal.IOError,
			"The file could not be opened or read: input/output error."},
		{"a failure without an errno in an export is the generic io_error", inExport, "", errors.New("/srv/secret"), refusal.IOError,
			"The file could not be opened or read."},
		{"a symlink on the way in the target directory is unsafe_path", inTarget, "", unix.ELOOP, refusal.UnsafePath,
			"A symlink is on the way to this path in the target directory; nothing is written through a symlink."},
		{"a name the target's filesystem refuses is unsafe_path", inTarget, "", unix.ENAMETOOLONG, refusal.UnsafePath,
			"The local filesystem refuses this name: file name too long."},
		{"any other errno in the target directory is io_error", inTarget, "", unix.ENOSPC, refusal.IOError,
			"The local file could not be used: no space left on device."},
		{"a symlink in peer-in is no decision: io_error naming the step", inInbox, "peer-in could not be opened", unix.ELOOP, refusal.IOError,
			"The fetched file could not be stored: peer-in could not be opened: too many levels of symbolic links."},
		{"a step without a cause in peer-in is io_error naming the step", inInbox, "the name is not one file name", nil, refusal.IOError,
			"The fetched file could not be stored: the name is not one file name."},
		{"a missing spool file is no decision: io_error naming the step", inSpool, "no snapshot file could be made", &fs.PathError{Op: "open", Path: "/srv/spool", Err: unix.ENOENT}, refusal.IOError,
			"The file could not be opened or read: no snapshot file could be made: no such file or directory."},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			r := failed(tc.at, tc.what, tc.err)
			if r.Code != tc.code || (tc.message != "" && r.Message != tc.message) {
				t.Fatalf("failed = %q %q; want %q %q", r.Code, r.Message, tc.code, tc.message)
			}
			if tc.err != nil && !errors.Is(r, tc.err) {
				t.Errorf("the refusal does not keep %v as its cause", tc.err)
			}
		})
	}
}
