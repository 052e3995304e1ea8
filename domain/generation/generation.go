// Package generation holds the per-process count of tasks that reached a terminal state.
//
// The counter is provenance, never a selector: nothing is chosen or refused by it. It starts at
// zero in every process, so a process launched fresh over an existing workdir reports 0.
package generation

import "sync/atomic"

// Counter is safe for concurrent use. The zero value is a counter at 0.
type Counter struct {
	completed atomic.Uint64
}

// Current returns the count as of now. A request reads it once, at its start, and reports that
// one value everywhere.
func (c *Counter) Current() uint64 { return c.completed.Load() }

// Advance records one more terminal task and returns the new count.
func (c *Counter) Advance() uint64 { return c.completed.Add(1) }

// TerminalState is a state in which a task is finished.
type TerminalState string

// The terminal states a runtime may report.
const (
	Completed TerminalState = "completed"
	Failed    TerminalState = "failed"
	Cancelled TerminalState = "cancelled"
)

// ParseTerminalState accepts exactly "completed", "failed" or "cancelled".
func ParseTerminalState(s string) (TerminalState, bool) {
	switch t := TerminalState(s); t {
	case Completed, Failed, Cancelled:
		return t, true
	}
	return "", false
}
