package application_test

import (
	"io"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/memfs"
	"github.com/resplane/resplane/adapters/memtrace"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/generation"
	"github.com/resplane/resplane/domain/trace"
)

// world is the application wired on the in-memory filesystem, a manual clock and a trace
// recorder: everything a use case touches, under the test's control.
type world struct {
	fs      *memfs.FS
	clock   *clock.Manual
	trace   *memtrace.Recorder
	session application.Session
	reader  *application.Reader
}

var epoch = time.UnixMilli(1_755_950_000_000)

func newWorld(t *testing.T, class containment.Class) *world {
	t.Helper()
	b, err := budget.New("--read-buffer-budget", 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	return &world{
		fs:      memfs.New("/srv/capsule"),
		clock:   clock.NewManual(epoch),
		trace:   &memtrace.Recorder{},
		session: application.Session{Generation: &generation.Counter{}, Containment: class},
		reader:  application.NewReader(application.Budgets{Memory: b}, nil),
	}
}

// contentOf reads a served body's bytes.
func contentOf(t *testing.T, b *application.Body) string {
	t.Helper()
	data, err := io.ReadAll(b.Content())
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != b.Size {
		t.Fatalf("the body's content has %d bytes, its Size says %d", len(data), b.Size)
	}
	return string(data)
}

// write puts a file in the workdir, creating its directories.
func (w *world) write(t *testing.T, path, content string) {
	t.Helper()
	if err := w.fs.WriteFile(path, []byte(content), epoch); err != nil {
		t.Fatal(err)
	}
}

// lastEvent returns the only event recorded so far of the given type.
func (w *world) lastEvent(t *testing.T, eventType string) trace.Event {
	t.Helper()
	events := w.trace.OfType(eventType)
	if len(events) == 0 {
		t.Fatalf("no %s event recorded", eventType)
	}
	return events[len(events)-1]
}

// fields returns an event's fields as a map, and its keys in order.
func fields(e trace.Event) (map[string]any, []string) {
	m := map[string]any{}
	var keys []string
	for _, f := range e.Fields() {
		m[f.Key] = f.Value
		keys = append(keys, f.Key)
	}
	return m, keys
}

// request is a request under /resources/ with method, an acceptable Host and no body.
func request(method string) application.Request {
	return application.Request{Method: method, HostAllowed: true}
}

// get is a plain GET: an acceptable Host and no body.
var get = request("GET")
