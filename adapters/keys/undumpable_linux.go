package keys

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ProtectProcess clears the process's dumpable flag: no core dump is written, and no other
// process of the same user may read the process's memory through /proc or ptrace, so neither
// can expose a key held here (docs/peer-plane.md, "The minting key"). serve calls it before
// anything else it does, and does not start if it fails.
func ProtectProcess() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot make the process non-dumpable (prctl PR_SET_DUMPABLE): %w", err)
	}
	return nil
}
