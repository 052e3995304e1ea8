package application_test

import (
	"context"
	"io"
	"strconv"
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

// listOf runs files.List with an encoder that keeps the walk's result, checks that the served
// body holds exactly what the encoder rendered, releases it, and returns the result.
func listOf(t testing.TB, files *application.Files, ctx context.Context, req application.Request) (uint64, *application.Listing, error) {
	t.Helper()
	var listing *application.Listing
	gen, served, err := files.List(ctx, req, func(l *application.Listing) []byte {
		listing = l
		return []byte(strconv.Itoa(len(l.Entries)) + " entries")
	})
	if err != nil {
		return gen, nil, err
	}
	defer served.Body.Release()
	data, rerr := io.ReadAll(served.Body.Content())
	if want := strconv.Itoa(len(listing.Entries)) + " entries"; rerr != nil || string(data) != want || served.Body.Size != int64(len(want)) {
		t.Fatalf("the served listing holds %q (%d bytes), %v; want the encoder's %q", data, served.Body.Size, rerr, want)
	}
	if served.ExportRoot != listing.Root || served.Containment != listing.Containment {
		t.Fatalf("served provenance %q/%v, listing %q/%v", served.ExportRoot, served.Containment, listing.Root, listing.Containment)
	}
	return gen, listing, nil
}
