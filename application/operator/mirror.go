package operator

import (
	"context"
	"regexp"
	"slices"
	"sync"

	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// Mirror is `resplane files pull` (docs/operator-guide.md, "Pulling outputs"): it makes a local
// directory hold what one service's export lists. It fetches every listed file whose local
// copy is missing or differs from the listing's sha256, verifies each against its answer's
// etag, lands each atomically, and with Delete removes local regular files the listing no
// longer has (without it, counts them). A file listed above the listing's max_bytes is
// skipped: the service would refuse it, so it is counted apart and not failed.
//
// The listing is not trusted. It is held to the service's own bounds before anything local is
// touched: a listing longer than any service lists is refused whole (RemoteFiles.List), and a
// listed path is lowered with the service's own rules and bounds (lowerListed), so an empty,
// absolute, "." or ".." path, or one longer or deeper than any service serves, never reaches
// the local directory; whatever the local directory then refuses (a symlink or a file on the
// way, a name the filesystem rejects) is refused too. Each such entry counts as failed and
// the pull goes on with the others.
type Mirror struct {
	files    *RemoteFiles
	local    ports.LocalMirror
	progress ports.Progress
}

// NewMirror returns the use case.
func NewMirror(files *RemoteFiles, local ports.LocalMirror, progress ports.Progress) *Mirror {
	return &Mirror{files: files, local: local, progress: progress}
}

// FilesURL is the URL of the listing the mirror follows.
func (m *Mirror) FilesURL() string { return m.files.FilesURL() }

// PullOptions are the flags of a pull.
type PullOptions struct {
	// Jobs is how many files are compared and fetched at once; below 1 means 1.
	Jobs int
	// Delete removes local regular files the listing does not have.
	Delete bool
	// DryRun decides everything and changes nothing.
	DryRun bool
}

// PullSummary is what a pull did or, with DryRun, would do.
type PullSummary struct {
	Fetched   int
	Unchanged int
	Deleted   int
	Failed    int
	// Skipped counts the listed files above the listing's max_bytes: the service would
	// refuse them, so they are neither fetched nor failed, and a local copy is kept.
	Skipped int
	// Bytes is the count of bytes landed; with DryRun, the listed sizes of the files that
	// would be fetched.
	Bytes int64
	// FetchedPaths and DeletedPaths name what was (or would be) fetched and deleted, in
	// listing order and bytewise order respectively.
	FetchedPaths []string
	DeletedPaths []string
	// Unlisted counts, without Delete, the local regular files the listing does not have
	// (what Delete would remove).
	Unlisted int
	// SkippedPaths name the skipped files with their listed sizes, in listing order.
	SkippedPaths []SkippedFile
	// Changed names the fetched files whose bytes were not the listing's: they changed
	// between the listing and the read, and the read's version, verified against its own
	// etag, was landed.
	Changed []string
	// Failures says why each failed file failed, in listing order, deletions last.
	Failures []PullFailure
}

// SkippedFile is a listed file above the listing's max_bytes.
type SkippedFile struct {
	// Path is the path as listed, not yet known to be safe to print.
	Path string
	Size int64
}

// PullFailure is one file that could not be mirrored.
type PullFailure struct {
	// Path is the path as listed (or as found locally, for a deletion), not yet known to be
	// safe to print.
	Path string
	Err  *refusal.Refusal
}

// sha256Hex is what a listed digest must look like.
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// pullItem is one listed entry on its way through a pull.
type pullItem struct {
	entry   ports.RemoteEntry
	rel     pathpolicy.RelPath
	fetch   bool // the local copy is missing or differs
	skip    bool // listed above max_bytes: the service would refuse it
	fetched Fetched
	err     *refusal.Refusal
	// compared and landed are set when the comparison and the fetch ran; an interrupted pull
	// leaves them unset.
	compared, landed bool
}

// Pull runs one pull. Its error is the listing's: when there is no listing nothing is
// changed. Every per-file failure is in the summary instead.
func (m *Mirror) Pull(ctx context.Context, opts PullOptions) (PullSummary, error) {
	listing, err := m.files.List(ctx)
	if err != nil {
		return PullSummary{}, err
	}
	return m.pullListing(ctx, listing, opts), nil
}

// pullListing runs one pull against listing, which RemoteFiles.List returned.
func (m *Mirror) pullListing(ctx context.Context, listing ports.RemoteListing, opts PullOptions) PullSummary {
	limit := Unlimited
	if listing.MaxBytes > 0 {
		limit = listing.MaxBytes
	}
	items, listed := m.plan(listing.Entries)
	for i := range items {
		items[i].skip = items[i].err == nil && items[i].entry.Size > limit
	}
	forEach(ctx, len(items), opts.Jobs, func(i int) { m.compare(&items[i]) })
	interrupted(items, func(it *pullItem) bool { return it.compared || it.skip })

	var summary PullSummary
	var toFetch []int
	var total int64
	for i := range items {
		switch it := &items[i]; {
		case it.err != nil:
		case it.skip:
			summary.Skipped++
			summary.SkippedPaths = append(summary.SkippedPaths, SkippedFile{Path: it.entry.Path, Size: it.entry.Size})
		case it.fetch:
			toFetch = append(toFetch, i)
			total += it.entry.Size
		default:
			summary.Unchanged++
		}
	}
	if opts.DryRun {
		for _, i := range toFetch {
			summary.FetchedPaths = append(summary.FetchedPaths, items[i].entry.Path)
		}
		summary.Fetched, summary.Bytes = len(toFetch), total
	} else {
		m.progress.Start(len(toFetch), total)
		forEach(ctx, len(toFetch), opts.Jobs, func(k int) { m.fetch(ctx, &items[toFetch[k]], limit) })
		m.progress.Finish()
		interrupted(items, func(it *pullItem) bool { return !it.fetch || it.landed })
	}
	for i := range items {
		it := &items[i]
		switch {
		case it.err != nil:
			summary.Failures = append(summary.Failures, PullFailure{Path: it.entry.Path, Err: it.err})
		case it.fetch && !opts.DryRun:
			summary.Fetched++
			summary.Bytes += it.fetched.Bytes
			summary.FetchedPaths = append(summary.FetchedPaths, it.entry.Path)
			if it.fetched.SHA256 != it.entry.SHA256 {
				summary.Changed = append(summary.Changed, it.entry.Path)
			}
		}
	}
	switch {
	case ctx.Err() != nil:
	case opts.Delete:
		m.deleteUnlisted(listed, opts.DryRun, &summary)
	default:
		var unlisted PullSummary
		m.deleteUnlisted(listed, true, &unlisted)
		summary.Unlisted = unlisted.Deleted
	}
	summary.Failed = len(summary.Failures)
	return summary
}

// plan lowers every listed path and refuses what cannot be mirrored: a path that is not a
// safe relative path, a second entry for a path, an entry without a valid size or digest. It
// returns one item per entry and the set of every listed path that lowered, which a deletion
// must spare.
func (m *Mirror) plan(entries []ports.RemoteEntry) ([]pullItem, map[string]bool) {
	items := make([]pullItem, len(entries))
	listed := make(map[string]bool, len(entries))
	for i, e := range entries {
		it := &items[i]
		it.entry = e
		rel, bad := lowerListed(e.Path)
		switch {
		case bad != nil:
			it.err = bad
		case listed[rel.String()]:
			it.err = refusal.WithMessage(refusal.InvalidListing, "The listing names this path more than once; it was not written.")
		case e.Size < 0 || !sha256Hex.MatchString(e.SHA256):
			it.err = refusal.WithMessage(refusal.InvalidListing,
				"The listing gives this file no valid size or sha256; it was not written.")
		}
		if bad == nil {
			it.rel = rel
			listed[rel.String()] = true
		}
	}
	return items, listed
}

// interrupted marks every item that has not failed and of which done is false as failed: the
// pull was interrupted before it was reached.
func interrupted(items []pullItem, done func(*pullItem) bool) {
	for i := range items {
		if it := &items[i]; it.err == nil && !done(it) {
			it.err = errInterrupted()
		}
	}
}

// errInterrupted is the failure of a file the pull did not finish because it was stopped.
func errInterrupted() *refusal.Refusal {
	return refusal.WithMessage(refusal.Interrupted, "The pull was interrupted before this file was mirrored.")
}

// compare decides whether it must be fetched.
func (m *Mirror) compare(it *pullItem) {
	if it.err != nil || it.skip {
		return
	}
	it.compared = true
	state, err := m.local.Compare(it.rel, it.entry.Size, it.entry.SHA256)
	if err != nil {
		it.err = refusal.From(err)
		return
	}
	it.fetch = state != ports.LocalSame
}

// fetch lands it, reporting each received chunk to the progress display.
func (m *Mirror) fetch(ctx context.Context, it *pullItem, limit int64) {
	landing, err := m.local.Stage(it.rel)
	if err != nil {
		it.err = refusal.From(err)
		return
	}
	fetched, err := m.files.Fetch(ctx, it.rel, limit, progressLanding{Landing: landing, progress: m.progress})
	switch {
	case err != nil && ctx.Err() != nil:
		it.err = errInterrupted()
		return
	case err != nil:
		it.err = refusal.From(err)
		return
	}
	it.fetched, it.landed = fetched, true
}

// progressLanding reports every write to the progress display.
type progressLanding struct {
	ports.Landing
	progress ports.Progress
}

func (p progressLanding) Write(b []byte) (int, error) {
	n, err := p.Landing.Write(b)
	p.progress.Add(int64(n))
	return n, err
}

// deleteUnlisted removes (or, on a dry run, counts) every local regular file whose path the
// listing does not have.
func (m *Mirror) deleteUnlisted(listed map[string]bool, dryRun bool, summary *PullSummary) {
	local, err := m.local.Files()
	if err != nil {
		summary.Failures = append(summary.Failures, PullFailure{Path: ".", Err: refusal.From(err)})
		return
	}
	slices.Sort(local)
	for _, p := range local {
		if listed[p] {
			continue
		}
		rel, err := pathpolicy.Lower(p)
		if err == nil && !dryRun {
			err = m.local.Delete(rel)
		}
		if err != nil {
			summary.Failures = append(summary.Failures, PullFailure{Path: p, Err: refusal.From(err)})
			continue
		}
		summary.Deleted++
		summary.DeletedPaths = append(summary.DeletedPaths, p)
	}
}

// forEach runs do(0) … do(n-1) on at most jobs goroutines and returns when all have returned.
// Once ctx is done no further call starts.
func forEach(ctx context.Context, n, jobs int, do func(i int)) {
	jobs = max(1, min(jobs, n))
	next := make(chan int)
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			for i := range next {
				do(i)
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
