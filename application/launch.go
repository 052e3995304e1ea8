package application

import (
	"fmt"
	"strconv"
	"time"

	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/diag"
	"github.com/resplane/resplane/domain/manifest"
	"github.com/resplane/resplane/ports"
)

// launchSleepMaxTTL is the longest exports.peer_files.max_ttl a capsule that sleeps after its
// task may declare (E-CAP-008).
const launchSleepMaxTTL = 15 * time.Minute

// LaunchChecks runs the launch checks that follow decoding the manifest (checks 5 and 6 of
// docs/operator-guide.md, "Launch checks") and computes the grants the launch goes ahead with.
// It only inspects: nothing is created, so `resplane check` and `serve` run the very same
// checks.
type LaunchChecks struct {
	roots ports.RootLocator
}

// NewLaunchChecks returns the launch checks, inspecting export roots through roots.
func NewLaunchChecks(roots ports.RootLocator) *LaunchChecks {
	return &LaunchChecks{roots: roots}
}

// LaunchInput is what the launch checks judge.
type LaunchInput struct {
	// Manifest is the decoded manifest.
	Manifest manifest.Manifest
	// AfterTaskOverride is the --after-task value, "" when none was given. It wins over the
	// manifest's lifecycle.after_task.
	AfterTaskOverride manifest.AfterTask
	// Workdir is the accessible workdir, which need not exist yet; "" when there is none yet
	// (resplane check without --workdir), so E-CAP-007 inspects nothing.
	Workdir string
}

// Run resolves after_task and checks, in order: E-CAP-008 (a sleeping capsule's peer_files
// needs a declared max_ttl of at most 15 minutes), then E-CAP-007 for exports.files.root and
// then exports.peer_files.root (a root that exists must resolve to the workdir or beneath it;
// a root or workdir that does not exist yet is accepted). The first failure is returned.
func (c *LaunchChecks) Run(in LaunchInput) (Grants, *diag.Diagnostic) {
	m := in.Manifest
	afterTask := m.AfterTask
	if in.AfterTaskOverride != "" {
		afterTask = in.AfterTaskOverride
	}
	if p := m.PeerFiles; p != nil && afterTask == manifest.AfterTaskSleep &&
		(!p.MaxTTLDeclared || p.MaxTTL > launchSleepMaxTTL) {
		return Grants{}, ttlTooLongForSleep(p)
	}
	if f := m.Files; f != nil {
		if bad := c.checkRoot("exports.files.root", f.Root, in.Workdir); bad != nil {
			return Grants{}, bad
		}
	}
	if p := m.PeerFiles; p != nil {
		if bad := c.checkRoot("exports.peer_files.root", p.Root, in.Workdir); bad != nil {
			return Grants{}, bad
		}
	}
	return launchGrants(m, afterTask), nil
}

func ttlTooLongForSleep(p *manifest.PeerFilesExport) *diag.Diagnostic {
	limit := seconds(launchSleepMaxTTL)
	declared := "is not declared, but it is required"
	if p.MaxTTLDeclared {
		declared = "is " + seconds(p.MaxTTL) + ", above the " + limit + " allowed"
	}
	return &diag.Diagnostic{
		Code: diag.PeerTTLTooLongForSleep,
		Message: "exports.peer_files.max_ttl " + declared + " with lifecycle.after_task: sleep (at most " + limit +
			"): a sleeping capsule keeps serving its handles after the task, and a handle's lifetime is not a durability mechanism",
		Hint: "declare exports.peer_files.max_ttl: 15m or less, or drop sleep (lifecycle.after_task, --after-task); " +
			"a consumer that needs the bytes later should have the operator relaunch against the same workdir and request again",
	}
}

// checkRoot is E-CAP-007 for one declared root. Without a workdir (check without --workdir,
// before any session exists) there is nothing on disk to inspect.
func (c *LaunchChecks) checkRoot(field string, root manifest.Root, workdir string) *diag.Diagnostic {
	if workdir == "" {
		return nil
	}
	loc, err := c.roots.Locate(workdir, root.String())
	var problem string
	switch {
	case err != nil:
		problem = fmt.Sprintf("%s %q could not be resolved in the workdir %s: %v", field, root, workdir, err)
	case loc.Exists && !loc.Inside:
		problem = fmt.Sprintf("%s %q resolves to %s, outside the workdir %s", field, root, loc.Resolved, loc.Workdir)
	default:
		return nil
	}
	return &diag.Diagnostic{
		Code:    diag.RootOutsideWorkdir,
		Message: problem,
		Hint: "point " + field + " at a directory inside the workdir; a symlinked root that leads out of it " +
			"is refused whole, never followed",
	}
}

func seconds(d time.Duration) string {
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}

// Grants is what a launch that passed its checks grants, as `resplane check` reports it.
type Grants struct {
	// Files is exports.files, nil when undeclared.
	Files *GrantsFiles
	// PeerFiles is exports.peer_files, nil when undeclared.
	PeerFiles *GrantsPeerFiles
	// PeerFetchAllow and NetworkAllow hold the destinations as written; empty, never nil,
	// when undeclared.
	PeerFetchAllow []string
	NetworkAllow   []string
	// AfterTask is the resolved after_task.
	AfterTask manifest.AfterTask
}

// GrantsFiles is the operator plane's effective grant.
type GrantsFiles struct {
	Root     string
	Mode     manifest.Mode
	MaxBytes int64
}

// GrantsPeerFiles is the peer plane's effective grant. MaxTTL is the declared max_ttl, or the
// one-hour default a capsule that exits may rely on.
type GrantsPeerFiles struct {
	Root     string
	MaxTTL   time.Duration
	MaxBytes int64
}

func launchGrants(m manifest.Manifest, afterTask manifest.AfterTask) Grants {
	g := Grants{NetworkAllow: destinationTexts(m.NetworkAllow), PeerFetchAllow: []string{}, AfterTask: afterTask}
	if f := m.Files; f != nil {
		g.Files = &GrantsFiles{Root: f.Root.String(), Mode: f.Mode, MaxBytes: f.MaxBytes.Int64()}
	}
	if p := m.PeerFiles; p != nil {
		g.PeerFiles = &GrantsPeerFiles{Root: p.Root.String(), MaxTTL: p.MaxTTL, MaxBytes: p.MaxBytes.Int64()}
	}
	if pf := m.PeerFetch; pf != nil {
		g.PeerFetchAllow = destinationTexts(pf.Allow)
	}
	return g
}

func destinationTexts(list []destination.Destination) []string {
	out := make([]string, len(list))
	for i, d := range list {
		out[i] = d.String()
	}
	return out
}
