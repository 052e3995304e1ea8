package jsonl

import (
	"errors"
	"syscall"

	"github.com/rs/zerolog"
)

// Report returns a Config.OnError that logs what a File reports on logger and counts the lines
// lost with count (which may be a no-op). The rule: a line that could not be encoded is an
// error; lines that write failures dropped are a warning when the disk or the quota is full —
// requests are still answered, and the operator's fix is space — and an error otherwise.
func Report(logger zerolog.Logger, count func(lines int)) func(error) {
	return func(err error) {
		var dropped *DroppedLines
		if !errors.As(err, &dropped) {
			count(1)
			logger.Error().Err(err).Msg("a trace line could not be written")
			return
		}
		count(dropped.Count)
		line := logger.Error()
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			line = logger.Warn()
		}
		line.Int("dropped", dropped.Count).AnErr("cause", dropped.Err).Msg("trace lines could not be written and were dropped")
	}
}
