package httpapi

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
)

// file is one listed entry whose hash is made from its path and version, so that tests can
// change one value at a time.
func file(path string, size int64, version int) application.ListedFile {
	return application.ListedFile{
		Path: path, Size: size, MTimeMs: 1795947170187 + int64(version),
		SHA256: fmt.Sprintf("%064x", len(path)*1000+version),
	}
}

// listing is a listing of entries at generation gen under the default envelope.
func listing(gen uint64, entries ...application.ListedFile) *application.Listing {
	return &application.Listing{
		Root: "out/", Mode: application.ReadOnlyMode, MaxBytes: 10 << 20, Generation: gen,
		Containment: containment.Sealed, Entries: entries,
	}
}

var (
	fa = file("a.txt", 1, 0)
	fb = file("b/c.txt", 22, 0)
	fc = file("d.md", 333, 0)
	fe = file("e/f/g.bin", 4444, 0)
)

// hostile paths: everything encoding/json escapes, or might.
var hostile = []application.ListedFile{
	file(`q"uote.txt`, 1, 0),
	file(`back\slash.txt`, 2, 0),
	file("ctl\x00\x01\x1f\t\n\r.txt", 3, 0),
	file("line\u2028sep\u2029.txt", 4, 0),
	file("non-ascii/é日本.txt", 5, 0),
	file("html/<b>&amp;</b>.txt", 6, 0),
	file("invalid-utf8-\xff\xfe.txt", 7, 0),
	file("\u007f-del.txt", 8, 0),
}

// TestTheListingEncoderRendersExactlyTheReferenceBytes pins listingEncoder: through every
// sequence of listings, each answer is byte for byte encodeJSON(listingBodyOf(l)), whatever the
// previous listing held.
func TestTheListingEncoderRendersExactlyTheReferenceBytes(t *testing.T) {
	other := func(l *application.Listing, change func(*application.Listing)) *application.Listing {
		c := *l
		change(&c)
		return &c
	}
	sorted := func(entries ...application.ListedFile) []application.ListedFile {
		entries = slices.Clone(entries)
		slices.SortFunc(entries, func(a, b application.ListedFile) int { return strings.Compare(a.Path, b.Path) })
		return entries
	}
	base := listing(0, fa, fb, fc, fe)
	for _, tc := range []struct {
		name     string
		listings []*application.Listing
	}{
		{"a cold listing", []*application.Listing{base}},
		{"an empty listing, cold", []*application.Listing{listing(0)}},
		{"unchanged", []*application.Listing{base, listing(0, fa, fb, fc, fe), base}},
		{"only the generation moved", []*application.Listing{base, listing(1, fa, fb, fc, fe), listing(2, fa, fb, fc, fe)}},
		{"the generation moved back and forth", []*application.Listing{base, listing(7, fa, fb, fc, fe), base}},
		{"another envelope", []*application.Listing{base,
			other(base, func(l *application.Listing) { l.Root = `o"u<t>&\/` }),
			other(base, func(l *application.Listing) { l.Containment = containment.Advisory }),
			other(base, func(l *application.Listing) { l.MaxBytes = 1 }),
			other(base, func(l *application.Listing) { l.Mode = "read-only\u2028" }),
		}},
		{"one sha256 changed", []*application.Listing{base, listing(0, fa, fb, application.ListedFile{Path: fc.Path, Size: fc.Size, MTimeMs: fc.MTimeMs, SHA256: strings.Repeat("f", 64)}, fe)}},
		{"one size changed", []*application.Listing{base, listing(0, fa, application.ListedFile{Path: fb.Path, Size: fb.Size + 1, MTimeMs: fb.MTimeMs, SHA256: fb.SHA256}, fc, fe)}},
		{"one mtime changed", []*application.Listing{base, listing(0, fa, fb, fc, application.ListedFile{Path: fe.Path, Size: fe.Size, MTimeMs: fe.MTimeMs + 1, SHA256: fe.SHA256})}},
		{"every entry changed", []*application.Listing{base, listing(0, file(fa.Path, 1, 1), file(fb.Path, 22, 1), file(fc.Path, 333, 1), file(fe.Path, 4444, 1))}},
		{"one entry changed and the generation moved", []*application.Listing{base, listing(3, fa, file(fb.Path, 22, 9), fc, fe)}},
		{"an entry added at the start", []*application.Listing{base, listing(0, file("0.txt", 5, 0), fa, fb, fc, fe)}},
		{"an entry added in the middle", []*application.Listing{base, listing(0, fa, fb, file("c.txt", 5, 0), fc, fe)}},
		{"an entry added at the end", []*application.Listing{base, listing(0, fa, fb, fc, fe, file("z.txt", 5, 0))}},
		{"entries added everywhere", []*application.Listing{listing(0, fb, fe), base, listing(0, file("0", 0, 0), fa, file("aa", 0, 0), fb, fc, file("da", 0, 0), fe, file("zz", 0, 0))}},
		{"the first entry removed", []*application.Listing{base, listing(0, fb, fc, fe)}},
		{"an entry in the middle removed", []*application.Listing{base, listing(0, fa, fb, fe)}},
		{"the last entry removed", []*application.Listing{base, listing(0, fa, fb, fc)}},
		{"every entry removed", []*application.Listing{base, listing(0), listing(1), base}},
		{"a rename", []*application.Listing{base, listing(0, fa, file("b/d.txt", fb.Size, 0), fc, fe)}},
		{"added, removed and changed at once", []*application.Listing{base, listing(4, file("0", 0, 0), fb, file(fc.Path, 333, 2), file("e", 1, 1)), base}},
		{"hostile paths, cold, unchanged, then one changed", []*application.Listing{
			listing(0, sorted(hostile...)...),
			listing(0, sorted(hostile...)...),
			listing(1, sorted(append(slices.Clone(hostile[1:]), file(hostile[0].Path, 9, 9))...)...),
		}},
		{"hostile paths added to and removed from a plain listing", []*application.Listing{
			base, listing(0, sorted(append(slices.Clone(hostile), fa, fb, fc, fe)...)...), base,
		}},
		{"entries out of order are still exact", []*application.Listing{base, listing(0, fe, fc, fb, fa), base, listing(0, fb, fa, fe, fc)}},
		{"a path listed twice is exact", []*application.Listing{listing(0, fa, fa, fb), listing(0, fa, fb, fb), listing(0, fa, fa, fb)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var enc listingEncoder
			for i, l := range tc.listings {
				want := encodeJSON(listingBodyOf(l))
				if got := enc.encode(l); !bytes.Equal(got, want) {
					t.Fatalf("listing %d:\n got %s\nwant %s", i, got, want)
				}
			}
		})
	}
}

// TestAnUnchangedListingReusesTheEncodedEntries pins what the cache saves: the same listing
// again is the previous answer itself, and a listing whose generation alone moved carries the
// same entries array bytes.
func TestAnUnchangedListingReusesTheEncodedEntries(t *testing.T) {
	var enc listingEncoder
	first := enc.encode(listing(0, fa, fb, fc, fe))
	again := enc.encode(listing(0, fa, fb, fc, fe))
	if &again[0] != &first[0] {
		t.Fatal("an unchanged listing was encoded again instead of returning the previous answer")
	}
	moved := enc.encode(listing(1, fa, fb, fc, fe))
	if bytes.Equal(moved, first) || !bytes.Equal(moved, encodeJSON(listingBodyOf(listing(1, fa, fb, fc, fe)))) {
		t.Fatalf("a listing whose generation moved = %s", moved)
	}
	kept := enc.last.Load()
	if !slices.Equal(kept.entries, []application.ListedFile{fa, fb, fc, fe}) || !bytes.Equal(kept.body, moved) {
		t.Fatalf("after the generation moved the encoder keeps %+v, want the new answer", kept)
	}
}

// TestAnAnswerAboveBufferedUpToIsNotKept pins the encoder's memory bound: an answer larger
// than application.BufferedUpTo (held in the spool while it is sent) is not kept, and the
// listing after it is still exact.
func TestAnAnswerAboveBufferedUpToIsNotKept(t *testing.T) {
	long := strings.Repeat("p", 4000)
	entries := make([]application.ListedFile, 0, application.BufferedUpTo/4000+1)
	for i := 0; len(entries)*4000 <= application.BufferedUpTo; i++ {
		entries = append(entries, file(fmt.Sprintf("%s%08d", long, i), int64(i), 0))
	}
	var enc listingEncoder
	enc.encode(listing(0, fa))
	large := listing(0, entries...)
	if got := enc.encode(large); len(got) <= application.BufferedUpTo || !bytes.Equal(got, encodeJSON(listingBodyOf(large))) {
		t.Fatalf("the large listing's answer is %d bytes or not the reference's", len(got))
	}
	if kept := enc.last.Load(); kept != nil {
		t.Fatalf("an answer of %d bytes was kept", len(kept.body))
	}
	if got, want := enc.encode(listing(0, fa)), encodeJSON(listingBodyOf(listing(0, fa))); !bytes.Equal(got, want) {
		t.Fatalf("after a large listing:\n got %s\nwant %s", got, want)
	}
}

// TestListingsEncodedAtOnceAreEachExact pins the encoder under application.MaxListings
// listings at once: each answer is its own listing's reference rendering, never a mix of two.
func TestListingsEncodedAtOnceAreEachExact(t *testing.T) {
	shapes := []*application.Listing{
		listing(0, fa, fb, fc, fe),
		listing(1, fa, fb, fc, fe),
		listing(0, fb, file(fc.Path, 1, 1), fe, file("z", 2, 2)),
		listing(2),
		listing(0, hostile[:3]...),
	}
	var enc listingEncoder
	var wg sync.WaitGroup
	for g := range application.MaxListings * 2 {
		wg.Go(func() {
			for i := range 200 {
				l := shapes[(g+i)%len(shapes)]
				if got, want := enc.encode(l), encodeJSON(listingBodyOf(l)); !bytes.Equal(got, want) {
					t.Errorf("goroutine %d, listing %d:\n got %s\nwant %s", g, i, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
