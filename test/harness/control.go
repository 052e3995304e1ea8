package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/control"
)

// Answer is one control API answer, kept raw so key order can be checked.
type Answer struct {
	Status int
	Raw    []byte
	Body   map[string]json.RawMessage
}

// Data returns the tool result object of a 200 answer.
func (a Answer) Data(t testing.TB) []byte {
	t.Helper()
	if a.Status != http.StatusOK {
		t.Fatalf("tool answered %d %s, want 200", a.Status, a.Raw)
	}
	return a.Body["data"]
}

// Code returns the error code of a refusal.
func (a Answer) Code() string {
	var s string
	_ = json.Unmarshal(a.Body["error"], &s)
	return s
}

// Message returns the message of a refusal.
func (a Answer) Message() string {
	var s string
	_ = json.Unmarshal(a.Body["message"], &s)
	return s
}

// Control sends one request to the control API over the Unix socket at sock. body is sent
// verbatim when it is a string, else marshalled (nil sends none). The answer must be a JSON
// object.
func Control(t testing.TB, sock, method, route string, body any) Answer {
	t.Helper()
	a, err := ControlE(sock, method, route, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// ControlE is Control without a testing.TB, for use off the test goroutine.
func ControlE(sock, method, route string, body any) (Answer, error) {
	var payload []byte
	switch b := body.(type) {
	case nil:
	case string:
		payload = []byte(b)
	default:
		var err error
		if payload, err = json.Marshal(b); err != nil {
			return Answer{}, err
		}
	}
	client := controlClient(sock)
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://control"+route, bytes.NewReader(payload))
	if err != nil {
		return Answer{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("control %s %s: %v", method, route, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return Answer{}, err
	}
	a := Answer{Status: resp.StatusCode, Raw: buf.Bytes()}
	if err := json.Unmarshal(a.Raw, &a.Body); err != nil {
		return a, fmt.Errorf("control %s %s answered %d with a body that is not a JSON object: %q", method, route, a.Status, a.Raw)
	}
	return a, nil
}

// controlClient returns an HTTP client for the control socket at path, whatever the length of
// the path.
func controlClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return control.Dial(ctx, path) },
	}, Timeout: 60 * time.Second}
}

// RequireControlRefusal fails the test unless a is a refusal with status and code whose body
// is exactly {"error","message"}, with a message.
func RequireControlRefusal(t testing.TB, a Answer, status int, code string) {
	t.Helper()
	if a.Status != status {
		t.Fatalf("status %d (%s), want %d %s", a.Status, a.Raw, status, code)
	}
	RequireKeys(t, "refusal", a.Raw, "error", "message")
	if a.Code() != code {
		t.Fatalf("error %q (%s), want %q", a.Code(), a.Raw, code)
	}
	if strings.TrimSpace(a.Message()) == "" {
		t.Fatalf("refusal without a message: %s", a.Raw)
	}
}
