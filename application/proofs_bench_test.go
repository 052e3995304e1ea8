package application_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/resplane/resplane/application"
)

// BenchmarkReplaysRemember is the replay memory's part of a bound redeem (docs/benchmarks.md,
// "Proof of possession"), in its steady state: one proof every 650 µs, so that 100 000 are
// remembered at any time and each new one also forgets the oldest.
func BenchmarkReplaysRemember(b *testing.B) {
	r := application.NewReplays(0)
	const jkt = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
	const every = 650 * time.Microsecond
	at := epoch
	for i := range 100_000 {
		if err := r.Remember(jkt, "warm-"+strconv.Itoa(i)+"-0123456789", at); err != nil {
			b.Fatal(err)
		}
		at = at.Add(every)
	}
	jtis := make([]string, b.N)
	for i := range jtis {
		jtis[i] = "jti-" + strconv.Itoa(i) + "-0123456789abcdef"
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := r.Remember(jkt, jtis[i], at.Add(time.Duration(i)*every)); err != nil {
			b.Fatal(err)
		}
	}
}
