package handle

import (
	"fmt"
	"strings"
	"testing"

	"github.com/resplane/resplane/domain/refusal"
)

// validToken is the example token (see TestMintMatchesIndependentComputation).
var validToken = Mint(testKey, NewPayload(testSession, "report.md", testExp, testNonce), testAudience)

// segments splits a token into its payload and tag segments.
func segments(t *testing.T, token string) (payloadSeg, tagSeg string) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a three-part token: %q", token)
	}
	return parts[1], parts[2]
}

func wantCode(t *testing.T, err error, code refusal.Code) {
	t.Helper()
	r, ok := refusal.As(err)
	if !ok {
		t.Fatalf("error = %v, want refusal %s", err, code)
	}
	if r.Code != code {
		t.Fatalf("refusal = %s, want %s", r.Code, code)
	}
	if want := refusal.New(code); *r != *want {
		t.Fatalf("refusal = %+v, want the fixed refusal %+v", *r, *want)
	}
}

// flipLast replaces a segment's last character with another that decodes to the same
// length, changing the data bits (a tampered but well-formed segment).
func flipLast(seg string) string {
	last := seg[len(seg)-1]
	repl := byte('A')
	if last == 'A' {
		repl = 'Q'
	}
	return seg[:len(seg)-1] + string(repl)
}

func TestParseShapeRefusesMalformedShapes(t *testing.T) {
	payloadSeg, tagSeg := segments(t, validToken)
	tests := map[string]string{
		"empty":                               "",
		"missing prefix":                      payloadSeg + "." + tagSeg,
		"prefix without dot":                  "mh1" + payloadSeg + "." + tagSeg,
		"another version tag":                 "mh2." + payloadSeg + "." + tagSeg,
		"upper-case tag":                      "MH1." + payloadSeg + "." + tagSeg,
		"two parts":                           "mh1." + payloadSeg,
		"four parts":                          validToken + ".AAAA",
		"trailing dot":                        validToken + ".",
		"empty payload segment":               "mh1.." + tagSeg,
		"empty tag segment":                   "mh1." + payloadSeg + ".",
		"both segments empty":                 "mh1..",
		"padding":                             "mh1." + payloadSeg + "." + tagSeg + "=",
		"padding mid-segment":                 "mh1.eyJ2IjoxfQ==." + tagSeg,
		"standard alphabet plus":              "mh1." + payloadSeg + ".ab+d",
		"standard alphabet slash":             "mh1." + payloadSeg + ".ab/d",
		"CR inside a segment":                 "mh1." + payloadSeg[:8] + "\r" + payloadSeg[8:] + "." + tagSeg,
		"LF inside a segment":                 "mh1." + payloadSeg + "." + tagSeg[:8] + "\n" + tagSeg[8:],
		"CRLF at the end":                     validToken + "\r\n",
		"space":                               "mh1." + payloadSeg + ". " + tagSeg,
		"percent-encoded":                     "mh1." + payloadSeg + "%2E" + tagSeg,
		"non-zero trailing bits in the tag":   "mh1." + payloadSeg + "." + tagSeg[:len(tagSeg)-1] + "J",
		"non-zero trailing bits in a payload": "mh1.eyJ2IjoxfR." + tagSeg,
		"impossible length (4n+1)":            "mh1.AAAAA." + tagSeg,
		"non-ASCII":                           "mh1.é." + tagSeg,
	}
	for name, token := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseShape(token)
			wantCode(t, err, refusal.MalformedHandle)
			_, err = Verify(testKey, token, testAudience, testSession, 0)
			wantCode(t, err, refusal.MalformedHandle)
		})
	}
}

func TestParseShapeAcceptsAnyTagLength(t *testing.T) {
	payloadSeg, _ := segments(t, validToken)
	tok, err := ParseShape("mh1." + payloadSeg + ".AA")
	if err != nil {
		t.Fatalf("ParseShape = %v; a short tag is a MAC failure, not a shape failure", err)
	}
	wantCode(t, tok.VerifyMAC(testKey, testAudience), refusal.HandleNotValid)
}

// TestHandleNotValidIsOneAnswer pins docs/peer-plane.md, "Redeem": every cause of
// handle_not_valid gives the same code and the same message, so nothing tells a prober which
// field to change next.
func TestHandleNotValidIsOneAnswer(t *testing.T) {
	payloadSeg, tagSeg := segments(t, validToken)
	foreignKey := seqBytes(0x40, 32)
	tamperedPayload := b64.EncodeToString([]byte(`{"v":1,"iss":"` + testSession + `","p":"secret.md","exp":1755950300000,"n":"a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"}`))
	tests := []struct {
		name, token, audience string
		key                   []byte
	}{
		{"tampered payload", "mh1." + tamperedPayload + "." + tagSeg, testAudience, testKey},
		{"payload segment with one character changed", "mh1." + flipLast(payloadSeg) + "." + tagSeg, testAudience, testKey},
		{"tampered MAC", "mh1." + payloadSeg + "." + flipLast(tagSeg), testAudience, testKey},
		{"truncated MAC", "mh1." + payloadSeg + "." + tagSeg[:20], testAudience, testKey},
		{"MAC of another payload", "mh1." + payloadSeg + "." + b64.EncodeToString(NewSigner(testKey).tag(tamperedPayload, testAudience, "")), testAudience, testKey},
		{"another instance's key", validToken, testAudience, foreignKey},
		{"wrong audience", validToken, "intruder@localhost:41234", testKey},
		{"audience differing only in case", validToken, "Reporter@localhost:41234", testKey},
		{"audience with a trailing space", validToken, testAudience + " ", testKey},
		{"foreign iss", Mint(testKey, NewPayload("ses_other", "report.md", testExp, testNonce), testAudience), testAudience, testKey},
		{"short key", validToken, testAudience, testKey[:16]},
		{"zeroed key, token forged under it", Mint(make([]byte, 32), NewPayload(testSession, "report.md", testExp, testNonce), testAudience), testAudience, make([]byte, 32)},
		{"nil key, token forged under an empty key", Mint(nil, NewPayload(testSession, "report.md", testExp, testNonce), testAudience), testAudience, nil},
	}
	var first string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Verify(tt.key, tt.token, tt.audience, testSession, testExp-1)
			wantCode(t, err, refusal.HandleNotValid)
			if first == "" {
				first = err.Error()
			} else if err.Error() != first {
				t.Fatalf("refusal text %q differs from %q", err.Error(), first)
			}
		})
	}
}

func TestVerifyChecksInContractOrder(t *testing.T) {
	payloadSeg, tagSeg := segments(t, validToken)
	expiredForeign := Mint(testKey, NewPayload("ses_other", "report.md", 10, testNonce), testAudience)
	garbageBehindBadMAC := "mh1." + b64.EncodeToString([]byte("not json")) + "." + tagSeg
	tests := []struct {
		name, token, audience string
		now                   int64
		want                  refusal.Code
	}{
		{"shape before audience", "mh2." + payloadSeg + "." + tagSeg, "", 0, refusal.MalformedHandle},
		{"audience before MAC", garbageBehindBadMAC, "", 0, refusal.MissingAudience},
		{"MAC before payload", garbageBehindBadMAC, testAudience, 0, refusal.HandleNotValid},
		{"MAC before expiry", validToken, "intruder@x:1", testExp + 1, refusal.HandleNotValid},
		{"iss before expiry", expiredForeign, testAudience, 1000, refusal.HandleNotValid},
		{"expiry last", validToken, testAudience, testExp, refusal.HandleExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Verify(testKey, tt.token, tt.audience, testSession, tt.now)
			wantCode(t, err, tt.want)
		})
	}
}

func TestExpiryIsExclusive(t *testing.T) {
	p, err := Verify(testKey, validToken, testAudience, testSession, testExp-1)
	if err != nil || p.Exp != testExp {
		t.Fatalf("one millisecond before exp: %+v, %v; want valid", p, err)
	}
	_, err = Verify(testKey, validToken, testAudience, testSession, testExp)
	wantCode(t, err, refusal.HandleExpired)
	wantCode(t, Payload{Exp: 0}.CheckExpiry(0), refusal.HandleExpired)
	if err := (Payload{Exp: 1}).CheckExpiry(0); err != nil {
		t.Fatalf("exp == now+1: %v, want valid", err)
	}
	wantCode(t, Payload{Iss: "ses_a"}.CheckIssuer("ses_b"), refusal.HandleNotValid)
	if err := (Payload{Iss: "ses_a"}).CheckIssuer("ses_a"); err != nil {
		t.Fatalf("own iss: %v", err)
	}
}

// TestPayloadBehindValidMAC pins step 7 of docs/peer-plane.md, "Redeem": with a MAC that
// verifies, a payload that is not the v1 object is malformed_handle, and unknown keys are
// ignored.
func TestPayloadBehindValidMAC(t *testing.T) {
	const rest = `"iss":"` + testSession + `","p":"report.md","exp":1755950300000,"n":"a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"`
	malformed := map[string]string{
		"not JSON":               `not json`,
		"JSON array":             `[1]`,
		"JSON string":            `"x"`,
		"JSON null":              `null`,
		"truncated object":       `{"v":1,` + rest,
		"trailing data":          `{"v":1,` + rest + `}x`,
		"two objects":            `{"v":1,` + rest + `}{}`,
		"v = 2":                  `{"v":2,` + rest + `}`,
		"v = 0":                  `{"v":0,` + rest + `}`,
		`v = "1"`:                `{"v":"1",` + rest + `}`,
		"v = 1.0":                `{"v":1.0,` + rest + `}`,
		"v = 1e0":                `{"v":1e0,` + rest + `}`,
		"v = true":               `{"v":true,` + rest + `}`,
		"v missing":              `{` + rest + `}`,
		"v twice":                `{"v":1,"v":1,` + rest + `}`,
		"iss missing":            `{"v":1,"p":"a","exp":1,"n":"b"}`,
		"p missing":              `{"v":1,"iss":"a","exp":1,"n":"b"}`,
		"exp missing":            `{"v":1,"iss":"a","p":"a","n":"b"}`,
		"n missing":              `{"v":1,"iss":"a","p":"a","exp":1}`,
		"iss a number":           `{"v":1,"iss":1,"p":"a","exp":1,"n":"b"}`,
		"p null":                 `{"v":1,"iss":"a","p":null,"exp":1,"n":"b"}`,
		"p an array":             `{"v":1,"iss":"a","p":["a"],"exp":1,"n":"b"}`,
		"n a number":             `{"v":1,"iss":"a","p":"a","exp":1,"n":7}`,
		"exp negative":           `{"v":1,"iss":"a","p":"a","exp":-1,"n":"b"}`,
		"exp minus zero":         `{"v":1,"iss":"a","p":"a","exp":-0,"n":"b"}`,
		"exp a fraction":         `{"v":1,"iss":"a","p":"a","exp":1.5,"n":"b"}`,
		"exp with an exponent":   `{"v":1,"iss":"a","p":"a","exp":1e3,"n":"b"}`,
		"exp a string":           `{"v":1,"iss":"a","p":"a","exp":"1","n":"b"}`,
		"exp beyond int64":       `{"v":1,"iss":"a","p":"a","exp":9223372036854775808,"n":"b"}`,
		"p twice":                `{"v":1,"iss":"a","p":"a","p":"b","exp":1,"n":"b"}`,
		"invalid UTF-8 in p":     `{"v":1,"iss":"a","p":"a` + "\xff" + `","exp":1,"n":"b"}`,
		"keys differing in case": `{"V":1,"ISS":"a","P":"a","EXP":1,"N":"b"}`,
	}
	for name, js := range malformed {
		t.Run(name, func(t *testing.T) {
			token := mintRaw(testKey, []byte(js), testAudience)
			tok, err := ParseShape(token)
			if err != nil {
				t.Fatalf("ParseShape = %v", err)
			}
			if err := tok.VerifyMAC(testKey, testAudience); err != nil {
				t.Fatalf("VerifyMAC = %v", err)
			}
			_, err = tok.Payload()
			wantCode(t, err, refusal.MalformedHandle)
			requireAgreement(t, []byte(js))
			_, err = Verify(testKey, token, testAudience, "a", 0)
			wantCode(t, err, refusal.MalformedHandle)
		})
	}

	accepted := map[string]struct {
		js   string
		want Payload
	}{
		"unknown keys ignored": {`{"x":{"y":[1,2]},"v":1,"z":null,"iss":"a","p":"d/e","exp":7,"n":"b","v2":"?"}`, Payload{1, "a", "d/e", 7, "b"}},
		"any key order":        {`{"n":"b","exp":7,"p":"d/e","iss":"a","v":1}`, Payload{1, "a", "d/e", 7, "b"}},
		"whitespace":           {" { \"v\" : 1 ,\n\"iss\":\"a\",\t\"p\":\"d/e\",\"exp\": 0 ,\"n\":\"\" } \n", Payload{1, "a", "d/e", 0, ""}},
		"escaped strings":      {`{"v":1,"iss":"a","p":"\u00e9\/\"","exp":9223372036854775807,"n":"b"}`, Payload{1, "a", "é/\"", 9223372036854775807, "b"}},
		"unknown key twice":    {`{"v":1,"iss":"a","p":"d","exp":7,"n":"b","x":1,"x":2}`, Payload{1, "a", "d", 7, "b"}},
	}
	for name, tt := range accepted {
		t.Run(name, func(t *testing.T) {
			tok, err := ParseShape(mintRaw(testKey, []byte(tt.js), testAudience))
			if err != nil {
				t.Fatalf("ParseShape = %v", err)
			}
			requireAgreement(t, []byte(tt.js))
			got, err := tok.Payload()
			if err != nil || got != tt.want {
				t.Fatalf("Payload = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestVerifyRefusesAnEmptyAudience(t *testing.T) {
	_, err := Verify(testKey, validToken, "", testSession, 0)
	wantCode(t, err, refusal.MissingAudience)
}

func TestPeekPath(t *testing.T) {
	tests := []struct {
		name, token string
		want        string
		ok          bool
	}{
		{"a minted token", validToken, "report.md", true},
		{"a foreign token, MAC never checked", Mint(seqBytes(0x40, 32), NewPayload("ses_y", "../x/y.md", 1, testNonce), "a@b"), "../x/y.md", true},
		{"an object with only p", mintRaw(nil, []byte(`{"p":"only.txt"}`), ""), "only.txt", true},
		{"v and exp are not required to be valid", mintRaw(nil, []byte(`{"v":"x","exp":-1,"p":"a"}`), ""), "a", true},
		{"p twice: the last counts", mintRaw(nil, []byte(`{"p":"first","p":"last"}`), ""), "last", true},
		{"p not a string", mintRaw(nil, []byte(`{"p":7}`), ""), "", false},
		{"no p", mintRaw(nil, []byte(`{"q":"x"}`), ""), "", false},
		{"not an object", mintRaw(nil, []byte(`["p"]`), ""), "", false},
		{"null", mintRaw(nil, []byte(`null`), ""), "", false},
		{"not JSON", mintRaw(nil, []byte(`p=x`), ""), "", false},
		{"invalid UTF-8", mintRaw(nil, []byte("{\"p\":\"\xff\"}"), ""), "", false},
		{"a malformed shape", "mh1.eyJwIjoiYSJ9", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := PeekPath(tt.token)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("PeekPath = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestTokenNeverFormatsItself(t *testing.T) {
	tok, err := ParseShape(validToken)
	if err != nil {
		t.Fatal(err)
	}
	want := Placeholder(validToken)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		got := fmt.Sprintf(verb, tok)
		if strings.Contains(got, "mh1.") || !strings.Contains(got, want) {
			t.Errorf("Sprintf(%q) = %q, want the placeholder %s", verb, got, want)
		}
	}
	if got := fmt.Sprint([]Token{tok}); strings.Contains(got, "mh1.") {
		t.Errorf("Sprint of a slice leaks the token: %q", got)
	}
}

// TestAPayloadInMintedFormIsReadDirectly pins that a payload as Mint writes it is read by
// payloadAsMinted, and that whatever payloadAsMinted accepts, the general parser reads to the
// same fields: every payload of TestPayloadBehindValidMAC and these near misses.
func TestAPayloadInMintedFormIsReadDirectly(t *testing.T) {
	minted := []Payload{
		NewPayload(testSession, "report.md", 1755950300000, [16]byte{1, 2, 3}),
		NewPayload("ses_x", "deep/dir/é ü.txt", 0, [16]byte{}),
		NewPayload("", "", 9223372036854775807, [16]byte{0xff}),
	}
	for _, p := range minted {
		got, ok := payloadAsMinted(encodePayload(p))
		if !ok || got != p {
			t.Errorf("payloadAsMinted(%s) = %+v, %v; want %+v", encodePayload(p), got, ok, p)
		}
	}
	const rest = `"iss":"a","p":"d","exp":7,"n":"b"}`
	for _, js := range []string{
		`{"v":1,` + rest, `{"v":1,"iss":"a","p":"d","exp":07,"n":"b"}`, `{"v":1,"iss":"a","p":"d","exp":7,"n":"b"} `,
		`{"v":1,"iss":"a","p":"x\"y","exp":7,"n":"b"}`, `{"v":1,"iss":"a","p":"\u00e9","exp":7,"n":"b"}`,
		`{"v":1,"iss":"a","p":"` + "\x01" + `","exp":7,"n":"b"}`, `{"v":1,"iss":"a","p":"` + "\xff" + `","exp":7,"n":"b"}`,
		`{"v":1,"iss":"a","p":"d","exp":7,"n":"b","x":1}`, `{"v":1,"iss":"a","p":"d","exp":-7,"n":"b"}`,
		`{"v":1,"iss":"a","p":"d","exp":,"n":"b"}`, `{"v":1,"iss":"a","p":"d","exp":7,"n":"b"`, `{"v":1,"iss":"a","p":"d}`,
	} {
		requireAgreement(t, []byte(js))
	}
}

// requireAgreement fails the test when payloadAsMinted accepts payload but the general parser
// does not read it to the same fields.
func requireAgreement(t *testing.T, payload []byte) {
	t.Helper()
	fast, ok := payloadAsMinted(payload)
	if !ok {
		return
	}
	if general, err := parsePayload(payload); err != nil || general != fast {
		t.Errorf("payloadAsMinted(%q) = %+v, but the general parser gives %+v, %v", payload, fast, general, err)
	}
}
