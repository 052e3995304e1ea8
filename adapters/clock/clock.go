// Package clock implements ports.Clock: System for the running service and Manual for tests
// that need to pin or move the instant (handle expiry, trace timestamps).
package clock

import (
	"sync"
	"time"

	"github.com/resplane/resplane/ports"
)

var (
	_ ports.Clock = System{}
	_ ports.Clock = (*Manual)(nil)
)

// System reads the operating system's clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Manual is a clock that only moves when told to. It is safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start}
}

// Now returns the clock's current reading.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock forward by d (backward if d is negative) and returns the new
// reading.
func (m *Manual) Advance(d time.Duration) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	return m.now
}
