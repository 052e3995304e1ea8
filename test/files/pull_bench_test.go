package files_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// BenchmarkPull mirrors 200 files of 64 KiB from a real service into a fresh directory, with
// 1, 4 and 8 jobs side by side, for the default of --jobs
// (docs/decisions/0043-pull-fetches-four-files-at-a-time.md). Each iteration is one whole
// `resplane files pull` run.
func BenchmarkPull(b *testing.B) {
	files := fixture.Layout{}
	for i := range 200 {
		files[fmt.Sprintf("out/f%03d.bin", i)] = strings.Repeat(strconv.Itoa(i%10), 64<<10)
	}
	p := harness.Start(b, harness.Capsule{Manifest: "name: Bench\nexports:\n  files:\n    root: out/\n    mode: read-only\n", Files: files})
	for _, jobs := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			b.SetBytes(200 * 64 << 10)
			for i := range b.N {
				dir := filepath.Join(b.TempDir(), strconv.Itoa(i))
				if code, _, stderr := harness.RunCLI(b, nil, "files", "pull", "--jobs", strconv.Itoa(jobs), p.Ready.URL, dir); code != 0 {
					b.Fatalf("pull failed (%d): %s", code, stderr)
				}
			}
		})
	}
}
