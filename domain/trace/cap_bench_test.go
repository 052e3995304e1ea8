package trace_test

import (
	"strings"
	"testing"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/trace"
)

// BenchmarkResourceReadFields is what building one event's fields costs, redaction and cap
// included: for the path of an ordinary request, and for a 12 KB path of control escapes
// decoded, the worst a request can send.
func BenchmarkResourceReadFields(b *testing.B) {
	for _, bc := range []struct{ name, path string }{
		{"ordinary path", "reports/2026/summary.md"},
		{"12 KB of control bytes", strings.Repeat("\x01", 12000)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := trace.ResourceRead{Path: bc.path, Containment: "sealed", Err: refusal.New(refusal.NotFound)}
			b.ReportAllocs()
			for b.Loop() {
				_ = e.Fields()
			}
		})
	}
}
