package ports

import "github.com/resplane/resplane/domain/trace"

// TraceSink appends events to the session's trace. Record never fails a request: a sink that
// cannot write reports the failure through its own logging and returns normally. Each event is
// written whole, never interleaved with another, and tokens are redacted before writing.
type TraceSink interface {
	Record(event trace.Event)
}
