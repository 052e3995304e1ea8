package httpapi

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/memfs"
	"github.com/resplane/resplane/adapters/memtrace"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/generation"
	"github.com/resplane/resplane/domain/hostpolicy"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/ports"
)

// failingFS serves memfs's files, but every read of one fails as a disk error would, naming
// the host path in its text.
type failingFS struct{ *memfs.FS }

func (f failingFS) OpenFile(root string, rel pathpolicy.RelPath, class containment.Class) (ports.File, error) {
	file, err := f.FS.OpenFile(root, rel, class)
	if err != nil {
		return nil, err
	}
	return failingFile{file}, nil
}

type failingFile struct{ ports.File }

func (failingFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: "/srv/capsule/out/report.md", Err: syscall.EIO}
}

// serveFiles answers one GET of target from an operator plane over fsys (root out/), and
// returns the answer and what the edge logged.
func serveFiles(t *testing.T, fsys ports.ExportFS, target string) (*httptest.ResponseRecorder, *bytes.Buffer) {
	t.Helper()
	b, err := budget.New("--read-buffer-budget", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	session := application.Session{Generation: &generation.Counter{}, Containment: containment.Sealed}
	plane := &application.ExportPlane{Root: "out/", MaxBytes: 1 << 10}
	files := application.NewFiles(plane, session, fsys, application.NewReader(application.Budgets{Memory: b}, nil),
		clock.NewManual(time.UnixMilli(1)), &memtrace.Recorder{})
	var log bytes.Buffer
	rec := httptest.NewRecorder()
	NewEcho(NewResources(files, nil, AgentCard{}, hostpolicy.New("example.com"), Send{}), zerolog.New(&log)).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec, &log
}

func TestAnInternalErrorIsLoggedOnceWithItsCauseAndNeverAnswered(t *testing.T) {
	files := memfs.New("/srv/capsule")
	if err := files.WriteFile("out/report.md", []byte("# report\n"), time.UnixMilli(1)); err != nil {
		t.Fatal(err)
	}
	rec, log := serveFiles(t, failingFS{files}, "/resources/files/report.md")

	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), `"error":"io_error"`) {
		t.Fatalf("answered %d %s; want 500 io_error", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), "/srv/capsule") {
		t.Errorf("the response carries the cause's host path: %s", rec.Body)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("logged %d lines; want exactly one:\n%s", len(lines), log.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line["level"] != "error" || line["outcome"] != "io_error" || line["target"] != "/resources/files/report.md" {
		t.Errorf("log line %v; want level error, outcome io_error and the target", line)
	}
	if cause, _ := line["cause"].(string); !strings.Contains(cause, "input/output error") || !strings.Contains(cause, "/srv/capsule/out/report.md") {
		t.Errorf("the log line's cause is %q; want the whole read error", line["cause"])
	}
}

func TestARefusalIsLoggedAtInfoWithoutACause(t *testing.T) {
	_, log := serveFiles(t, memfs.New("/srv/capsule"), "/resources/files/missing.md")
	var line map[string]any
	if err := json.Unmarshal(log.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["level"] != "info" || line["cause"] != nil {
		t.Errorf("a not_found refusal was logged as %v; want one info line without a cause", line)
	}
}

// TestASpillFailureIsLoggedOncePerCause pins the access log's spill warning: a body the
// spool could not take is logged at warn level with its cause the first time that cause (the
// system error, whatever path is around it) is seen, and not again for the same cause.
func TestASpillFailureIsLoggedOncePerCause(t *testing.T) {
	var log bytes.Buffer
	e := echo.New()
	e.Use(accessLog(zerolog.New(&log)))
	failures := []error{
		&fs.PathError{Op: "write", Path: "/srv/spool/a", Err: syscall.ENOSPC},
		&fs.PathError{Op: "write", Path: "/srv/spool/b", Err: syscall.ENOSPC},
		&fs.PathError{Op: "write", Path: "/srv/spool/a", Err: syscall.EIO},
		nil,
		&fs.PathError{Op: "write", Path: "/srv/spool/c", Err: syscall.EIO},
	}
	e.GET("/", func(c echo.Context) error {
		if err := failures[0]; err != nil {
			c.Set(spillFailureKey, err)
		}
		failures = failures[1:]
		return c.NoContent(http.StatusOK)
	})
	for range len(failures) {
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	var warned []string
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if entry["level"] == "warn" {
			warned = append(warned, entry["error"].(string))
		}
	}
	if len(warned) != 2 || !strings.Contains(warned[0], "no space left") || !strings.Contains(warned[1], "input/output error") {
		t.Fatalf("warnings %q, want one for ENOSPC and one for EIO", warned)
	}
}
