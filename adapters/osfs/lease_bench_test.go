package osfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// BenchmarkAnOpenForWritingOfALeasedFile measures what a lease costs an agent: how long its
// open(O_WRONLY) of a file waits, side by side on one tree:
//
//   - not-leased: a file the service holds no lease on, the floor;
//   - leased: a file the service holds the only lease on; the open waits for the kernel to
//     signal the service and for the service to give the lease up;
//   - leased-among-10000: the same with 10,000 other files leased, as after a listing of a
//     tree that size: the service finds the broken lease among those it holds.
//
// ns/op is the open alone (the lease is taken again, untimed, before each one).
func BenchmarkAnOpenForWritingOfALeasedFile(b *testing.B) {
	const others = 10_000
	layout := fixture.Layout{"f": "bytes"}
	for i := range others {
		layout[fmt.Sprintf("o/%05d", i)] = "other"
	}
	wd, fs, leases := leaseWorld(b, layout, osfs.LeaseOptions{Limit: others + 1})
	path := filepath.Join(wd, "f")
	open := func(b *testing.B, lease bool) {
		var held ports.Lease
		for b.Loop() {
			if lease {
				b.StopTimer()
				var err error
				if held, err = leaseOf(b, fs, leases, "f"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
			if lease && held.Held() {
				b.Fatal("the lease is held after an open for writing")
			}
		}
	}
	b.Run("not-leased", func(b *testing.B) { open(b, false) })
	b.Run("leased", func(b *testing.B) { open(b, true) })
	b.Run("leased-among-10000", func(b *testing.B) {
		for i := range others {
			l, err := leaseOf(b, fs, leases, fmt.Sprintf("o/%05d", i))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Release()
		}
		open(b, true)
	})
}
