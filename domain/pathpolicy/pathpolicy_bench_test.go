package pathpolicy_test

// Benchmarks for lowering a request path, run on every operator-plane read. None of them
// runs without -bench.

import (
	"testing"

	"github.com/resplane/resplane/domain/pathpolicy"
)

// BenchmarkParse lowers a depth-1 name, a depth-5 path, a path with percent escapes (the
// decoding pass allocates) and a refused traversal.
func BenchmarkParse(b *testing.B) {
	cases := []struct {
		name, raw string
		ok        bool
	}{
		{"depth=1", "report.md", true},
		{"depth=5", "a/b/c/d/report.md", true},
		{"escaped", "reports%202026/q%C3%A9/summary%2Bfinal.md", true},
		{"refused", "a/%2e%2e/%2e%2e/etc/passwd", false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.raw)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_, err := pathpolicy.Parse(c.raw)
				if (err == nil) != c.ok {
					b.Fatalf("Parse(%q) = %v", c.raw, err)
				}
			}
		})
	}
}
