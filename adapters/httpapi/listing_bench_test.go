package httpapi

import (
	"fmt"
	"testing"

	"github.com/resplane/resplane/application"
)

// BenchmarkListingEncoder renders a listing of 10,000 entries shaped like
// BenchmarkListing's (out/d000/f000 … out/d099/f099, 16 KiB each), about 1.47 MB of JSON:
// reference is encodeJSON(listingBodyOf(l)), what every listing cost before the encoder kept
// the previous answer; cold is the encoder with nothing kept; unchanged is the same listing
// again; generation is the same entries under a moved generation; one-changed is one entry's
// sha256 changed in the middle.
func BenchmarkListingEncoder(b *testing.B) {
	entries := make([]application.ListedFile, 0, 10000)
	for d := range 100 {
		for f := range 100 {
			entries = append(entries, file(fmt.Sprintf("d%03d/f%03d", d, f), 16<<10, d*100+f))
		}
	}
	base := listing(0, entries...)
	moved := listing(1, entries...)
	changed := listing(0, append([]application.ListedFile(nil), entries...)...)
	changed.Entries[5000].SHA256 = fmt.Sprintf("%064x", 1)
	run := func(name string, prime *application.Listing, l func(i int) *application.Listing) {
		b.Run(name, func(b *testing.B) {
			var enc listingEncoder
			if prime != nil {
				enc.encode(prime)
			}
			b.SetBytes(int64(len(encodeJSON(listingBodyOf(base)))))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if prime == nil {
					enc.last.Store(nil)
				}
				enc.encode(l(i))
				i++
			}
		})
	}
	b.Run("reference", func(b *testing.B) {
		b.SetBytes(int64(len(encodeJSON(listingBodyOf(base)))))
		b.ReportAllocs()
		for b.Loop() {
			encodeJSON(listingBodyOf(base))
		}
	})
	run("cold", nil, func(int) *application.Listing { return base })
	run("unchanged", base, func(int) *application.Listing { return base })
	run("generation", base, func(i int) *application.Listing { return []*application.Listing{moved, base}[i%2] })
	run("one-changed", base, func(i int) *application.Listing { return []*application.Listing{changed, base}[i%2] })
}
