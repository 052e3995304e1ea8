package application

import (
	"github.com/resplane/resplane/domain/generation"
	"github.com/resplane/resplane/domain/refusal"
)

// Tasks is the task lifecycle seam with the agent loop: the runtime reports each task that
// reaches a terminal state, and the generation advances by one (docs/http-api.md,
// "The generation").
type Tasks struct {
	generation *generation.Counter
}

// NewTasks returns the lifecycle use case over the session's counter.
func NewTasks(session Session) *Tasks { return &Tasks{generation: session.Generation} }

// Terminal records that a task reached state and returns the new generation. A state that is
// not completed, failed or cancelled is refused invalid_input and changes nothing.
func (t *Tasks) Terminal(state string) (uint64, error) {
	if _, ok := generation.ParseTerminalState(state); !ok {
		return t.generation.Current(), refusal.WithMessage(refusal.InvalidInput,
			`"state" must be one of "completed", "failed" or "cancelled".`)
	}
	return t.generation.Advance(), nil
}

// Current returns the generation as of now.
func (t *Tasks) Current() uint64 { return t.generation.Current() }
