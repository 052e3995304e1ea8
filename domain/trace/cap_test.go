package trace_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/trace"
)

// jsonText is s as the trace writes it: the JSON string without its quotes, HTML characters
// unescaped.
func jsonText(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(b.String(), "\n"), `"`), `"`)
}

func TestCapBoundsAFieldsJSONTextAndSaysHowLongItWas(t *testing.T) {
	cases := []struct {
		rule     string
		value    string
		kept     string // the prefix kept before the marker; "" with unchanged
		original int    // the length the marker states
		same     bool   // returned unchanged
	}{
		{"a short value is unchanged", "report.md", "", 0, true},
		{"an empty value is unchanged", "", "", 0, true},
		{"a value of exactly the cap is unchanged", strings.Repeat("a", 256), "", 0, true},
		{"one byte over the cap is cut", strings.Repeat("a", 257), strings.Repeat("a", 227), 257, false},
		{"a long value is cut to the cap with its length stated", strings.Repeat("a", 12000), strings.Repeat("a", 225), 12000, false},
		{"a control character counts as its six-byte escape", strings.Repeat("\x01", 43), strings.Repeat("\x01", 38), 43, false},
		{"quotes count as their two-byte escape", strings.Repeat(`"`, 129), strings.Repeat(`"`, 113), 129, false},
		{"a byte that is not UTF-8 counts as a six-byte escape", strings.Repeat("\xff", 43), strings.Repeat("\xff", 38), 43, false},
		{"U+2028 counts as its six-byte escape", strings.Repeat("\u2028", 43), strings.Repeat("\u2028", 37), 129, false},
		{"the cut never splits a character", "a" + strings.Repeat("é", 200), "a" + strings.Repeat("é", 113), 401, false},
		{"a value ending like a marker gets a marker of its own", "x…[truncated from 9 bytes]", "x…[truncated from 9 bytes]", 28, false},
		{"marker text inside a value is not a marker", "x…[truncated from 9 bytes]y", "", 0, true},
		{"a marker without digits is not a marker", "x…[truncated from  bytes]", "", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got := trace.Cap(tc.value)
			if tc.same {
				if got != tc.value {
					t.Fatalf("Cap changed %q to %q", tc.value, got)
				}
				return
			}
			want := tc.kept + "…[truncated from " + itoa(tc.original) + " bytes]"
			if got != want {
				t.Fatalf("Cap(%.40q…) = %q; want %q", tc.value, got, want)
			}
			if n := len(jsonText(t, got)); n > trace.MaxFieldBytes {
				t.Errorf("the capped value's JSON text is %d bytes; want at most %d", n, trace.MaxFieldBytes)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestCapNeverLetsAFieldsJSONTextExceedTheCap checks the bound over random text drawn from the
// characters that cost the most.
func TestCapNeverLetsAFieldsJSONTextExceedTheCap(t *testing.T) {
	alphabet := []string{"a", "é", "\x00", "\x1f", "\n", `"`, `\`, "\xff", "\u2028", "日", "\U0001F600", "<", "…"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(400) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		got := trace.Cap(s)
		if n := len(jsonText(t, got)); n > trace.MaxFieldBytes {
			t.Fatalf("Cap(%q) = %q, whose JSON text is %d bytes", s, got, n)
		}
		if got != s && !strings.HasSuffix(got, "…[truncated from "+itoa(len(s))+" bytes]") {
			t.Fatalf("Cap(%q) = %q does not end with the marker stating %d bytes", s, got, len(s))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Cap split a character: %q", got)
		}
	}
}

// TestEveryEventsStringFieldsAreRedactedAndCapped pins docs/trace.md, "Long fields" and
// "Redaction": whatever a request puts in an event, each string field a sink receives is
// within the cap and holds no token.
func TestEveryEventsStringFieldsAreRedactedAndCapped(t *testing.T) {
	long := strings.Repeat("\x01", 3000) + "mh1.eyJ2IjoxfQ.c2lnbmF0dXJl"
	token := "mh1.eyJ2IjoxfQ.c2lnbmF0dXJl/" + long
	failed := errors.New("failed")
	events := []trace.Event{
		trace.SessionStart{Capsule: long, Version: long, Containment: long, Workdir: long, Planes: []string{long}, Tools: []string{token}},
		trace.SessionEnd{Reason: long},
		trace.ResourceList{Root: long, Containment: long},
		trace.ResourceRead{Path: token, SHA256: long, Containment: long, Err: failed},
		trace.ResourceRead{Path: token, SHA256: long, Containment: long},
		trace.PeerHandleMint{HandleID: long, Path: token, Audience: long},
		trace.PeerHandleRedeem{HandleID: long, Path: token, Audience: long, AudienceSent: true, SHA256: long},
		trace.PeerFileFetch{Peer: long, HandleID: long, StoredPath: token, SHA256: long},
	}
	for _, e := range events {
		for _, f := range e.Fields() {
			var texts []string
			switch v := f.Value.(type) {
			case string:
				texts = []string{v}
			case []string:
				texts = v
			}
			for _, s := range texts {
				if n := len(jsonText(t, s)); n > trace.MaxFieldBytes {
					t.Errorf("%s.%s is %d bytes of JSON; want at most %d", e.Type(), f.Key, n, trace.MaxFieldBytes)
				}
				if strings.Contains(s, "mh1.") {
					t.Errorf("%s.%s holds a token: %.60q", e.Type(), f.Key, s)
				}
			}
		}
	}
}
