package osfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/resplane/resplane/ports"
)

// Locator is the launch-time ports.RootLocator (the E-CAP-007 check). It canonicalises
// paths by name, once, before anything is served; it is a diagnostic, not the boundary:
// every call of FS re-resolves the root beneath its workdir descriptor.
type Locator struct{}

var _ ports.RootLocator = Locator{}

// Locate implements ports.RootLocator. It only reads: nothing is created.
func (Locator) Locate(workdir, root string) (ports.RootLocation, error) {
	var loc ports.RootLocation
	abs, err := filepath.Abs(workdir)
	if err != nil {
		return loc, err
	}
	wd, exists, err := canonical(abs)
	if err != nil || !exists {
		return loc, err
	}
	loc.Workdir = wd
	// Joined without cleaning, so a ".." would be taken after symlinks, as the kernel does.
	resolved, exists, err := canonical(abs + string(filepath.Separator) + root)
	if err != nil || !exists {
		return loc, err
	}
	loc.Exists, loc.Resolved = true, resolved
	loc.Inside = resolved == wd || strings.HasPrefix(resolved, strings.TrimSuffix(wd, "/")+"/")
	return loc, nil
}

// canonical resolves every symlink in the absolute path p. A path that does not exist, runs
// through something that is not a directory, or is a symlink loop reports exists false and no
// error: it resolves to no place at all, so not to one outside the workdir, and every request
// then refuses it (not_found, or symlink_refused for the loop).
func canonical(p string) (string, bool, error) {
	c, err := filepath.EvalSymlinks(p)
	switch {
	case err == nil:
		return c, true, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), isLoop(p):
		return "", false, nil
	}
	return "", false, err
}

// isLoop reports whether resolving p meets a symlink loop (filepath.EvalSymlinks says so only
// in words; the kernel says ELOOP).
func isLoop(p string) bool {
	_, err := os.Stat(p)
	return errors.Is(err, syscall.ELOOP)
}
