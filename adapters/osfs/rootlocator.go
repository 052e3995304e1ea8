package osfs

import (
	"errors"
	"io/fs"
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

// canonical resolves every symlink in the absolute path p. A path that does not exist, or
// runs through something that is not a directory, reports exists false and no error.
func canonical(p string) (string, bool, error) {
	c, err := filepath.EvalSymlinks(p)
	switch {
	case err == nil:
		return c, true, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return "", false, nil
	}
	return "", false, err
}
