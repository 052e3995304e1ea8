package refusal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestFromKeepsARefusalAndMakesAnythingElseAnInternalIOError(t *testing.T) {
	cause := errors.New("read /srv/capsule/out/x: input/output error")
	notFound := New(NotFound)
	for _, tc := range []struct {
		name      string
		err       error
		code      Code
		message   string
		wantCause error
	}{
		{"a refusal is kept as it is", notFound, NotFound, notFound.Message, nil},
		{"a wrapped refusal is unwrapped", fmt.Errorf("opening: %w", notFound), NotFound, notFound.Message, nil},
		{"any other error is io_error with the generic message", cause, IOError, fixedMessages[IOError], cause},
		{"a context error is an internal failure too", context.Canceled, IOError, fixedMessages[IOError], context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := From(tc.err)
			if r.Code != tc.code || r.Message != tc.message {
				t.Fatalf("From = %s %q; want %s %q", r.Code, r.Message, tc.code, tc.message)
			}
			if r.Cause() != tc.wantCause {
				t.Errorf("Cause() = %v; want %v", r.Cause(), tc.wantCause)
			}
		})
	}
	if From(nil) != nil {
		t.Error("From(nil) is not nil")
	}
}

func TestAnInternalRefusalNeverShowsItsCauseButUnwrapsToIt(t *testing.T) {
	cause := errors.New("open /etc/secret: permission denied")
	for name, r := range map[string]*Refusal{
		"Internal":    Internal(cause),
		"IO.Wrapping": IO("permission denied").Wrapping(cause),
	} {
		t.Run(name, func(t *testing.T) {
			if r.Code != IOError {
				t.Fatalf("code %s; want io_error", r.Code)
			}
			for _, shown := range []string{r.Message, r.Error()} {
				if strings.Contains(shown, "/etc/secret") {
					t.Errorf("%q shows the cause's path", shown)
				}
			}
			if !errors.Is(r, cause) || r.Cause() != cause {
				t.Errorf("the cause is lost: Is=%v Cause=%v", errors.Is(r, cause), r.Cause())
			}
		})
	}
}

func TestWrappingLeavesTheOriginalUntouched(t *testing.T) {
	shared := IO("the file was replaced while it was being opened")
	wrapped := shared.Wrapping(errors.New("cause"))
	if shared.Cause() != nil || wrapped == shared || wrapped.Message != shared.Message {
		t.Fatalf("Wrapping changed the shared refusal or its message: %v %v", shared.Cause(), wrapped)
	}
}

// TestTheEdgeRefusalsHaveFixedSentences pins docs/http-api.md, "Refusals": the refusals a
// request meets before any plane looks at it answer with their own fixed sentence, never the
// generic fallback, and the sentence names no limit as a number.
func TestTheEdgeRefusalsHaveFixedSentences(t *testing.T) {
	for _, code := range []Code{HostNotAllowed, BodyNotAllowed, TargetTooLong} {
		got := New(code).Message
		if got != fixedMessages[code] || got == "" || strings.Contains(got, string(code)) || strings.ContainsAny(got, "0123456789") {
			t.Errorf("New(%s).Message = %q; want its own fixed sentence without a number", code, got)
		}
	}
}
