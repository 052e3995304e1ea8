package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/keys"
	"github.com/resplane/resplane/adapters/memfs"
	"github.com/resplane/resplane/adapters/memtrace"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/destination"
	"github.com/resplane/resplane/domain/generation"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/ports"
)

// brokenNonces is a randomness source that has failed, with a cause only the log may show.
type brokenNonces struct{}

func (brokenNonces) Nonce() ([16]byte, error) {
	return [16]byte{}, errors.New("getrandom: /dev/urandom: no entropy device")
}

type fixedCard struct{}

func (fixedCard) FetchCard(context.Context, destination.Peer) (ports.PeerCard, error) {
	return ports.PeerCard{Name: "collector", URL: "http://localhost:9"}, nil
}

func TestAToolCallThatFailsInternallyIsLoggedWithItsCause(t *testing.T) {
	files := memfs.New("/srv/capsule")
	if err := files.WriteFile("out/report.md", []byte("# report\n"), time.UnixMilli(1)); err != nil {
		t.Fatal(err)
	}
	allow, err := destination.Parse("localhost")
	if err != nil {
		t.Fatal(err)
	}
	session := application.Session{Generation: &generation.Counter{}, Containment: containment.Sealed}
	issuer := application.PeerIssuer{SessionID: "ses_test", Key: application.NewKeyring(keys.NewFixed([32]byte{1}))}
	share := application.NewShareFile(
		application.SharePlane{ExportPlane: application.ExportPlane{Root: "out/", MaxBytes: 1 << 10}, MaxTTL: time.Hour},
		[]destination.Destination{allow}, issuer, application.Proofs{Mode: proof.Auto}, session, files, fixedCard{}, brokenNonces{},
		clock.NewManual(time.UnixMilli(1)), &memtrace.Recorder{})
	var log bytes.Buffer
	e := NewAPI(Status{}, application.NewTasks(session), share, nil, nil, zerolog.New(&log)).NewEcho()

	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/tools/share-file", strings.NewReader(`{"path":"report.md","peer":"localhost:9"}`)))

	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), `"error":"io_error"`) {
		t.Fatalf("answered %d %s; want 422 io_error", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), "urandom") {
		t.Errorf("the answer carries the internal cause: %s", rec.Body)
	}
	var line map[string]any
	if err := json.Unmarshal(log.Bytes(), &line); err != nil {
		t.Fatalf("want exactly one JSON log line, got %q: %v", log.String(), err)
	}
	if line["level"] != "error" || line["route"] != "/v1/tools/share-file" || !strings.Contains(line["cause"].(string), "no entropy device") {
		t.Errorf("log line %v; want an error line naming the route and the cause", line)
	}
}
