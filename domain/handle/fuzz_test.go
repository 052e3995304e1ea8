package handle

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/refusal"
)

// FuzzVerify feeds arbitrary tokens through every entry point a peer can reach. None may
// panic; every error is one of the handle refusals; a shape that parses is canonical (its
// segments re-encode to the same text); and nothing but the one real token verifies.
func FuzzVerify(f *testing.F) {
	f.Add(validToken)
	f.Add("mh1.eyJ2IjoxfQ.AA")
	f.Add("mh1..")
	f.Add("mh1.a.b.c")
	f.Add(mintRaw(testKey, []byte(`{"v":1,"iss":"a","p":"b","exp":1,"n":"c"}`), testAudience))
	f.Add(mintRaw(testKey, []byte(`{"v":1e0}`), testAudience))
	f.Fuzz(func(t *testing.T, token string) {
		tok, err := ParseShape(token)
		if err == nil {
			if got := prefix + b64.EncodeToString(tok.payload) + "." + b64.EncodeToString(tok.tag); got != token {
				t.Fatalf("accepted a non-canonical token %q (canonical %q)", token, got)
			}
			_, _ = tok.Payload()
		}
		_, _ = PeekPath(token)
		_ = SanitisedBasename(PeekPath(token))
		_, err = Verify(testKey, token, testAudience, testSession, 0)
		if err == nil {
			if token != validToken {
				t.Fatalf("verified %q", token)
			}
			return
		}
		r, ok := refusal.As(err)
		if !ok {
			t.Fatalf("error %v is not a refusal", err)
		}
		switch r.Code {
		case refusal.MalformedHandle, refusal.HandleNotValid, refusal.HandleExpired:
		default:
			t.Fatalf("unexpected refusal %s", r.Code)
		}
	})
}

// FuzzMintRoundTrip checks that whatever Mint writes, Verify reads back unchanged: the
// hand-written JSON encoder and the decoder agree on every valid UTF-8 string.
func FuzzMintRoundTrip(f *testing.F) {
	f.Add(testSession, "report.md", "a0a1", int64(5), testAudience)
	f.Add("s", "a\"b\\c\u2028<>&\x00\x1f\x7f", "", int64(0), "x@y")
	f.Fuzz(func(t *testing.T, iss, path, nonce string, exp int64, audience string) {
		if !utf8.ValidString(iss) || !utf8.ValidString(path) || !utf8.ValidString(nonce) || exp < 1 || audience == "" {
			return
		}
		want := Payload{V: 1, Iss: iss, P: path, Exp: exp, N: nonce}
		token := Mint(testKey, want, audience)
		got, err := Verify(testKey, token, audience, iss, exp-1)
		if err != nil || got != want {
			t.Fatalf("round trip = %+v, %v; want %+v", got, err, want)
		}
		if got, ok := PeekPath(token); !ok || got != path {
			t.Fatalf("PeekPath = %q, %v; want %q", got, ok, path)
		}
		if Redact("x "+token+" y") != "x "+Placeholder(token)+" y" {
			t.Fatalf("a minted token was not redacted whole")
		}
	})
}

// handlePattern is the redaction pattern of docs/trace.md, used as an independent oracle for
// the hand-written scanner.
var handlePattern = regexp.MustCompile(`mh1\.[A-Za-z0-9_.-]*[A-Za-z0-9_-]`)

// FuzzRedact checks Redact against the documented pattern applied with package regexp, and that
// its output holds no token-shaped run.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"", "mh1.a.b", "mh1.a.b.c", "xmh1.mh1.a.b.", "mh1.abc", "é" + validToken, "mh1.\xff.a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := Redact(text)
		want := handlePattern.ReplaceAllStringFunc(text, Placeholder)
		if got != want {
			t.Fatalf("Redact(%q)\n got %q\nwant %q", text, got, want)
		}
		if handlePattern.MatchString(got) {
			t.Fatalf("Redact(%q) = %q still holds a token", text, got)
		}
		if !strings.Contains(text, prefix) && got != text {
			t.Fatalf("changed text without %q", prefix)
		}
	})
}

// FuzzPayloadAsMinted checks that whatever payloadAsMinted accepts, the general parser reads to
// the same fields.
func FuzzPayloadAsMinted(f *testing.F) {
	f.Add([]byte(`{"v":1,"iss":"a","p":"d","exp":7,"n":"b"}`))
	f.Add(encodePayload(NewPayload("ses_x", "dir/é.txt", 1755950300000, [16]byte{9})))
	f.Fuzz(func(t *testing.T, payload []byte) { requireAgreement(t, payload) })
}
