package prometheus

import (
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
)

// BudgetReadings is what a byte budget reports; adapters/budget.Budget has these methods, and
// so must any other budget that is to be watched (the spool's).
type BudgetReadings interface {
	// LimitBytes is the whole budget.
	LimitBytes() int64
	// HeldBytes is what reservations hold now.
	HeldBytes() int64
	// WaitingBytes is what the reservations waiting for room now have asked for.
	WaitingBytes() int64
	// Waits counts the reservations that had to wait.
	Waits() uint64
	// WaitedTime is the time reservations have spent waiting, all together.
	WaitedTime() time.Duration
}

// WatchBudget exports b's readings, read at each scrape, under the label budget=name: "memory"
// for --read-buffer-budget, "spool" for --spool-budget. Watch each budget once.
func (m *Metrics) WatchBudget(name string, b BudgetReadings) {
	if m == nil {
		return
	}
	labels := prom.Labels{"budget": name}
	gauge := func(metric, help string, read func() int64) prom.Collector {
		return prom.NewGaugeFunc(prom.GaugeOpts{Name: metric, Help: help, ConstLabels: labels},
			func() float64 { return float64(read()) })
	}
	counter := func(metric, help string, read func() float64) prom.Collector {
		return prom.NewCounterFunc(prom.CounterOpts{Name: metric, Help: help, ConstLabels: labels}, read)
	}
	m.registry.MustRegister(
		gauge("resplane_budget_limit_bytes", "The whole budget, in bytes.", b.LimitBytes),
		gauge("resplane_budget_held_bytes", "Bytes of the budget that reads hold now.", b.HeldBytes),
		gauge("resplane_budget_waiting_bytes", "Bytes asked for by the reads waiting for room now.", b.WaitingBytes),
		counter("resplane_budget_waits_total", "Reads that found no room at once and waited.",
			func() float64 { return float64(b.Waits()) }),
		counter("resplane_budget_wait_seconds_total", "Time reads have spent waiting for room, all together.",
			func() float64 { return b.WaitedTime().Seconds() }),
	)
}

// LeaseReadings is what the listing's read leases report; adapters/osfs.Leases has it.
type LeaseReadings interface {
	// Count is how many leases are held now.
	Count() int
}

// WatchLeases exports how many read leases the listing hash cache holds, read at each scrape,
// and the most it holds at once (docs/operator-guide.md, "Listing cost"). leases is nil when
// the service takes none (--listing-cache max-age, or leases unavailable): both are then 0.
func (m *Metrics) WatchLeases(leases LeaseReadings, limit int) {
	if m == nil {
		return
	}
	m.registry.MustRegister(
		prom.NewGaugeFunc(prom.GaugeOpts{Name: "resplane_listing_leases", Help: "Read leases the listing hash cache holds now."},
			func() float64 {
				if leases == nil {
					return 0
				}
				return float64(leases.Count())
			}),
		prom.NewGaugeFunc(prom.GaugeOpts{Name: "resplane_listing_lease_limit", Help: "The most read leases the listing hash cache holds at once."},
			func() float64 { return float64(limit) }),
	)
}
