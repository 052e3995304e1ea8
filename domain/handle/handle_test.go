package handle

import (
	"strings"
	"testing"
)

// Fixed inputs shared by the tests: a 32-byte key 00 01 … 1f, the nonce a0 a1 … af, and the
// session, path, expiry and audience of one fixed example (reporter@localhost:41234).
var (
	testKey   = seqBytes(0x00, 32)
	testNonce = [16]byte(seqBytes(0xa0, 16))
)

const (
	testSession  = "ses_01a033ec2c1f7eb2a5922f84e012e89d"
	testAudience = "reporter@localhost:41234"
	testExp      = int64(1755950300000)
)

func seqBytes(first byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = first + byte(i)
	}
	return b
}

func TestMintMatchesIndependentComputation(t *testing.T) {
	// Both expected tokens were computed outside Go with python3 3.11:
	//
	//	js  = json.dumps(payload, ensure_ascii=False, separators=(',', ':')).encode()
	//	seg = base64.urlsafe_b64encode(js).rstrip(b'=')
	//	tag = hmac.new(bytes(range(32)), b'murmur-peer-handle-v1\x1f' + seg + b'\x1f' +
	//	               b'reporter@localhost:41234', hashlib.sha256).digest()
	//	token = 'mh1.' + seg + '.' + base64.urlsafe_b64encode(tag).rstrip(b'=')
	//
	// (python's json.dumps with those options escapes strings exactly as serde_json does), and
	// the first tag was cross-checked with `openssl dgst -sha256 -mac HMAC`. The handle ids are
	// sha256(token)[:16] from `sha256sum`.
	tests := []struct {
		name, path, wantJSON, wantToken, wantID string
	}{
		{
			name:      "the brief's example payload",
			path:      "report.md",
			wantJSON:  `{"v":1,"iss":"ses_01a033ec2c1f7eb2a5922f84e012e89d","p":"report.md","exp":1755950300000,"n":"a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"}`,
			wantToken: "mh1.eyJ2IjoxLCJpc3MiOiJzZXNfMDFhMDMzZWMyYzFmN2ViMmE1OTIyZjg0ZTAxMmU4OWQiLCJwIjoicmVwb3J0Lm1kIiwiZXhwIjoxNzU1OTUwMzAwMDAwLCJuIjoiYTBhMWEyYTNhNGE1YTZhN2E4YTlhYWFiYWNhZGFlYWYifQ.qnhdkeUBubwbiNdH7GctKLLdMwviLCbHi2lkKiRnSKI",
			wantID:    "55b7fa43aa4a7e0b",
		},
		{
			name:      "a path that needs every serde_json string rule",
			path:      "dir/a\"b\\c<>&\u2028\u2029é\x01\x1f\x7f\b\f\n\r\t😀.md",
			wantJSON:  `{"v":1,"iss":"ses_01a033ec2c1f7eb2a5922f84e012e89d","p":"dir/a\"b\\c<>&` + "\u2028\u2029é" + `\u0001\u001f` + "\x7f" + `\b\f\n\r\t` + "😀" + `.md","exp":1755950300000,"n":"a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"}`,
			wantToken: "mh1.eyJ2IjoxLCJpc3MiOiJzZXNfMDFhMDMzZWMyYzFmN2ViMmE1OTIyZjg0ZTAxMmU4OWQiLCJwIjoiZGlyL2FcImJcXGM8PibigKjigKnDqVx1MDAwMVx1MDAxZn9cYlxmXG5cclx08J-YgC5tZCIsImV4cCI6MTc1NTk1MDMwMDAwMCwibiI6ImEwYTFhMmEzYTRhNWE2YTdhOGE5YWFhYmFjYWRhZWFmIn0.OjUEe1g-BJpjyNUSYAQagXDnMI8DcOHX-N28_Q7kYi8",
			wantID:    "5a45fc8b7bd32e1e",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPayload(testSession, tt.path, testExp, testNonce)
			if got := string(encodePayload(p)); got != tt.wantJSON {
				t.Errorf("payload JSON\n got %s\nwant %s", got, tt.wantJSON)
			}
			token := Mint(testKey, p, testAudience)
			if token != tt.wantToken {
				t.Errorf("Mint\n got %s\nwant %s", token, tt.wantToken)
			}
			if got := ID(token); got != tt.wantID {
				t.Errorf("ID = %s, want %s", got, tt.wantID)
			}
		})
	}
}

func TestNewPayloadIsVersionOneWithHexNonce(t *testing.T) {
	p := NewPayload("ses_x", "a.txt", 5, testNonce)
	want := Payload{V: 1, Iss: "ses_x", P: "a.txt", Exp: 5, N: "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"}
	if p != want {
		t.Fatalf("NewPayload = %+v, want %+v", p, want)
	}
}

func TestMintRoundTrip(t *testing.T) {
	for _, path := range []string{"report.md", "sub/dir/ünïcödé 文件.txt", "a\"b\\c", "<>&\u2028", "\x00\x7f"} {
		want := NewPayload(testSession, path, testExp, testNonce)
		token := Mint(testKey, want, testAudience)
		got, err := Verify(testKey, token, testAudience, testSession, testExp-1)
		if err != nil {
			t.Fatalf("Verify(Mint(%q)) = %v", path, err)
		}
		if got != want {
			t.Fatalf("round trip of %q = %+v, want %+v", path, got, want)
		}
	}
}

func TestMintDistinctNoncesGiveDistinctTokens(t *testing.T) {
	other := testNonce
	other[15] ^= 1
	a := Mint(testKey, NewPayload(testSession, "report.md", testExp, testNonce), testAudience)
	b := Mint(testKey, NewPayload(testSession, "report.md", testExp, other), testAudience)
	if a == b || ID(a) == ID(b) {
		t.Fatal("two nonces gave the same token")
	}
}

func TestMintWritesInvalidUTF8AsReplacementCharacter(t *testing.T) {
	p := NewPayload(testSession, "a\xffb", testExp, testNonce)
	if got := string(encodePayload(p)); !strings.Contains(got, `"p":"a`+"\uFFFD"+`b"`) {
		t.Fatalf("payload JSON = %s", got)
	}
}
