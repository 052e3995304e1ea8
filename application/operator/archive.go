package operator

import (
	"context"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// ArchiveSummary is what `resplane files tar` wrote.
type ArchiveSummary struct {
	// Members is how many files the archive holds; Bytes their bodies' length.
	Members int
	Bytes   int64
	// Failures says why each listed file left out was left out, in listing order.
	Failures []PullFailure
}

// Archive is `resplane files tar` (docs/operator-guide.md, "One archive"): every regular file
// of the listing, in listing order, fetched and verified against its etag before its member
// is appended to archive, then the archive ended. A listed path that a pull would refuse
// (unsafe_path, invalid_listing: lowerListed and the same checks as Mirror's plan) is left
// out without a request, and so is a file whose fetch fails; each is in the summary.
//
// The error is the listing's, or the archive's own: an output that failed, or ctx ended. In
// either case the archive is not ended (archive.Close is not called), so it is never taken
// for a whole one.
func (u *RemoteFiles) Archive(ctx context.Context, archive ports.Archive) (ArchiveSummary, error) {
	listing, err := u.List(ctx)
	if err != nil {
		return ArchiveSummary{}, err
	}
	limit := Unlimited
	if listing.MaxBytes > 0 {
		limit = listing.MaxBytes
	}
	var summary ArchiveSummary
	fail := func(path string, r *refusal.Refusal) {
		summary.Failures = append(summary.Failures, PullFailure{Path: path, Err: r})
	}
	seen := make(map[string]bool, len(listing.Entries))
	for _, e := range listing.Entries {
		rel, bad := lowerListed(e.Path)
		switch {
		case bad != nil:
			fail(e.Path, bad)
			continue
		case seen[rel.String()]:
			fail(e.Path, refusal.WithMessage(refusal.InvalidListing, "The listing names this path more than once; it was not archived."))
			continue
		}
		seen[rel.String()] = true
		member, err := archive.Member(rel.String())
		if err != nil {
			return summary, err
		}
		fetched, err := u.Fetch(ctx, rel, limit, member)
		switch {
		case ctx.Err() != nil:
			return summary, refusal.WithMessage(refusal.Interrupted, "The archive was interrupted; it was not ended.")
		case err != nil:
			fail(e.Path, refusal.From(err))
		default:
			summary.Members++
			summary.Bytes += fetched.Bytes
		}
	}
	return summary, archive.Close()
}
