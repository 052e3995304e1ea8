package proof

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/domain/refusal"
)

// x is the RFC 8037 (Appendix A.2) Ed25519 public key, as its JWK's x.
const x = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"

const jwk = `{"kty":"OKP","crv":"Ed25519","x":"` + x + `"}`

func wantInvalid(t *testing.T, err error, mentions string) {
	t.Helper()
	r, ok := refusal.As(err)
	if !ok || r.Code != refusal.InvalidProof {
		t.Fatalf("err = %v, want invalid_proof", err)
	}
	if !strings.Contains(r.Message, mentions) {
		t.Fatalf("message %q does not name %q", r.Message, mentions)
	}
}

func TestParseModeAcceptsTheThreeModesOnly(t *testing.T) {
	for _, s := range []string{"auto", "required", "off"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "Auto", "on", "none"} {
		if _, err := ParseMode(s); err == nil {
			t.Errorf("ParseMode(%q) accepted", s)
		}
	}
}

func TestParseHeaderAppliesEachHeaderRule(t *testing.T) {
	key := mustKey(t)
	for _, tc := range []struct {
		name, header, mentions string
	}{
		{"typ JWT", `{"typ":"JWT","alg":"EdDSA","jwk":` + jwk + `}`, "typ"},
		{"typ in another case", `{"typ":"DPoP+JWT","alg":"EdDSA","jwk":` + jwk + `}`, "typ"},
		{"no typ", `{"alg":"EdDSA","jwk":` + jwk + `}`, "typ"},
		{"alg none", `{"typ":"dpop+jwt","alg":"none","jwk":` + jwk + `}`, "alg"},
		{"alg HS256", `{"typ":"dpop+jwt","alg":"HS256","jwk":` + jwk + `}`, "alg"},
		{"alg ES256", `{"typ":"dpop+jwt","alg":"ES256","jwk":` + jwk + `}`, "alg"},
		{"alg eddsa", `{"typ":"dpop+jwt","alg":"eddsa","jwk":` + jwk + `}`, "alg"},
		{"alg not a string", `{"typ":"dpop+jwt","alg":["EdDSA"],"jwk":` + jwk + `}`, "alg"},
		{"no jwk", `{"typ":"dpop+jwt","alg":"EdDSA"}`, "jwk"},
		{"a jwk with d", `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"` + x + `","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}}`, "jwk"},
		{"a P-256 jwk", `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"EC","crv":"P-256","x":"` + x + `","y":"` + x + `"}}`, "jwk"},
		{"an X25519 jwk", `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"X25519","x":"` + x + `"}}`, "jwk"},
		{"a short x", `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"` + x[:40] + `"}}`, "jwk"},
		{"a padded x", `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"` + x + `="}}`, "jwk"},
		{"a jwk that is a string", `{"typ":"dpop+jwt","alg":"EdDSA","jwk":"` + x + `"}`, "jwk"},
		{"a jwk with a duplicate x", `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"` + x + `","x":"` + x + `"}}`, "jwk"},
		{"crit", `{"typ":"dpop+jwt","alg":"EdDSA","jwk":` + jwk + `,"crit":["b64"],"b64":false}`, "crit"},
		{"a duplicate alg", `{"typ":"dpop+jwt","alg":"none","alg":"EdDSA","jwk":` + jwk + `}`, "JSON object"},
		{"a duplicate alg spelled with an escape", `{"typ":"dpop+jwt","alg":"none","\u0061lg":"EdDSA","jwk":` + jwk + `}`, "JSON object"},
		{"a comma inside a string is not a member", `{"typ":"dpop+jwt","kid":"a,b\",c","alg":"none","jwk":` + jwk + `}`, "alg"},
		{"not an object", `["dpop+jwt"]`, "JSON object"},
		{"two objects", `{"typ":"dpop+jwt"}{}`, "JSON object"},
		{"invalid UTF-8", "{\"typ\":\"dpop+jwt\",\"alg\":\"EdDSA\",\"kid\":\"\xff\",\"jwk\":" + jwk + "}", "JSON object"},
		{"empty", ``, "JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHeader([]byte(tc.header))
			wantInvalid(t, err, tc.mentions)
		})
	}
	for _, alg := range []string{"EdDSA", "Ed25519"} {
		h, err := ParseHeader([]byte(`{"typ":"dpop+jwt","alg":"` + alg + `","jwk":{"kid":"k1","kty":"OKP","x":"` + x + `","crv":"Ed25519"}}`))
		if err != nil || h.Alg != alg || !bytes.Equal(h.Key, key) {
			t.Errorf("alg %s: ParseHeader = %+v, %v", alg, h, err)
		}
	}
}

func mustKey(t *testing.T) []byte {
	t.Helper()
	key, ok := ParseJWK([]byte(jwk))
	if !ok || len(key) != KeySize {
		t.Fatalf("ParseJWK(%s) = %x, %v", jwk, key, ok)
	}
	return key
}

func TestJWKOfWritesExactlyKtyCrvAndX(t *testing.T) {
	got := JWKOf(mustKey(t))
	if got != (PublicJWK{Kty: "OKP", Crv: "Ed25519", X: x}) {
		t.Fatalf("JWKOf = %+v", got)
	}
}

func TestParseClaimsTypesEveryClaim(t *testing.T) {
	good := `{"jti":"0123456789abcdef","htm":"GET","htu":"http://a:1/p","iat":1700000000,"nonce":"ignored"}`
	c, err := ParseClaims([]byte(good))
	if err != nil || c != (Claims{JTI: "0123456789abcdef", HTM: "GET", HTU: "http://a:1/p", IAT: 1700000000}) {
		t.Fatalf("ParseClaims = %+v, %v", c, err)
	}
	for _, tc := range []struct{ name, claims, mentions string }{
		{"no jti", `{"htm":"GET","htu":"http://a:1/p","iat":1}`, "jti"},
		{"a numeric jti", `{"jti":12345678901234567,"htm":"GET","htu":"http://a:1/p","iat":1}`, "jti"},
		{"no htm", `{"jti":"0123456789abcdef","htu":"http://a:1/p","iat":1}`, "htm"},
		{"no htu", `{"jti":"0123456789abcdef","htm":"GET","iat":1}`, "htu"},
		{"no iat", `{"jti":"0123456789abcdef","htm":"GET","htu":"http://a:1/p"}`, "iat"},
		{"a fractional iat", `{"jti":"0123456789abcdef","htm":"GET","htu":"http://a:1/p","iat":1.5}`, "iat"},
		{"an iat with an exponent", `{"jti":"0123456789abcdef","htm":"GET","htu":"http://a:1/p","iat":1e9}`, "iat"},
		{"a string iat", `{"jti":"0123456789abcdef","htm":"GET","htu":"http://a:1/p","iat":"1"}`, "iat"},
		{"a duplicate htu", `{"jti":"0123456789abcdef","htm":"GET","htu":"http://a:1/p","htu":"http://b:1/p","iat":1}`, "JSON object"},
		{"an array", `[]`, "JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseClaims([]byte(tc.claims))
			wantInvalid(t, err, tc.mentions)
		})
	}
}

// TestCheckAppliesEachClaimRule pins the claim rules of docs/peer-plane.md, "Proof of
// possession": one row per rule, each refused with a message that names the claim.
func TestCheckAppliesEachClaimRule(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	target := Target{Method: "GET", Path: "/resources/peer/mh1.a.b", Host: "127.0.0.1:8080"}
	good := Claims{JTI: strings.Repeat("j", 16), HTM: "GET", HTU: "http://127.0.0.1:8080/resources/peer/mh1.a.b", IAT: now.Unix()}
	if err := good.Check(target, now); err != nil {
		t.Fatalf("a good proof: %v", err)
	}
	with := func(f func(*Claims)) Claims { c := good; f(&c); return c }
	for _, tc := range []struct {
		name     string
		claims   Claims
		target   Target
		mentions string
	}{
		{"htm POST", with(func(c *Claims) { c.HTM = "POST" }), target, "htm"},
		{"htm get", with(func(c *Claims) { c.HTM = "get" }), target, "htm"},
		{"a request that is not a GET", good, Target{Method: "HEAD", Path: target.Path, Host: target.Host}, "htm"},
		{"htu with another path", with(func(c *Claims) { c.HTU = "http://127.0.0.1:8080/resources/peer/mh1.a.c" }), target, "htu"},
		{"htu with another host", with(func(c *Claims) { c.HTU = "http://localhost:8080/resources/peer/mh1.a.b" }), target, "htu"},
		{"htu with another port", with(func(c *Claims) { c.HTU = "http://127.0.0.1:8081/resources/peer/mh1.a.b" }), target, "htu"},
		{"iat 120 s old", with(func(c *Claims) { c.IAT = now.Unix() - 120 }), target, "iat"},
		{"iat 61 s old", with(func(c *Claims) { c.IAT = now.Unix() - 61 }), target, "iat"},
		{"iat 60 s ahead", with(func(c *Claims) { c.IAT = now.Unix() + 60 }), target, "iat"},
		{"iat 6 s ahead", with(func(c *Claims) { c.IAT = now.Unix() + 6 }), target, "iat"},
		{"a short jti", with(func(c *Claims) { c.JTI = strings.Repeat("j", 15) }), target, "jti"},
		{"a long jti", with(func(c *Claims) { c.JTI = strings.Repeat("j", 129) }), target, "jti"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantInvalid(t, tc.claims.Check(tc.target, now), tc.mentions)
		})
	}
	for _, tc := range []struct {
		name   string
		claims Claims
	}{
		{"iat exactly 60 s old", with(func(c *Claims) { c.IAT = now.Unix() - 60 })},
		{"iat exactly 5 s ahead", with(func(c *Claims) { c.IAT = now.Unix() + 5 })},
		{"a jti of 128 characters", with(func(c *Claims) { c.JTI = strings.Repeat("é", 128) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.claims.Check(target, now); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMatchesComparesTheRawPathAndTheHostsAuthority(t *testing.T) {
	const path = "/resources/peer/mh1.a.b"
	for _, tc := range []struct {
		htu, host string
		want      bool
	}{
		{"http://127.0.0.1:8080/resources/peer/mh1.a.b", "127.0.0.1:8080", true},
		{"https://127.0.0.1:8080/resources/peer/mh1.a.b", "127.0.0.1:8080", true},
		{"HTTPS://Capsule.Example/resources/peer/mh1.a.b", "capsule.example:443", true},
		{"https://capsule.example:443/resources/peer/mh1.a.b", "capsule.example", true},
		{"http://capsule.example/resources/peer/mh1.a.b", "capsule.example:80", true},
		{"http://capsule.example/resources/peer/mh1.a.b?q=1#f", "capsule.example", true},
		{"http://[::1]:8080/resources/peer/mh1.a.b", "[::1]:8080", true},
		{"http://[::1]/resources/peer/mh1.a.b", "[::1]", true},
		{"https://capsule.example/resources/peer/mh1.a.b", "capsule.example:80", false},
		{"http://capsule.example:8080/resources/peer/mh1.a.b", "capsule.example", false},
		{"http://127.0.0.1:8080/resources/peer/mh1.a.b/", "127.0.0.1:8080", false},
		{"http://127.0.0.1:8080/resources/peer/mh1%2Ea.b", "127.0.0.1:8080", false},
		{"http://127.0.0.1:8080/resources/peer/mh1.a.b", "", false},
		{"http://user@127.0.0.1:8080/resources/peer/mh1.a.b", "127.0.0.1:8080", false},
		{"ftp://127.0.0.1:8080/resources/peer/mh1.a.b", "127.0.0.1:8080", false},
		{"127.0.0.1:8080/resources/peer/mh1.a.b", "127.0.0.1:8080", false},
		{"http://127.0.0.1:8080", "127.0.0.1:8080", false},
		{"http:///resources/peer/mh1.a.b", "", false},
		{"http://127.0.0.1:x/resources/peer/mh1.a.b", "127.0.0.1:x", false},
		{"http://[::1/resources/peer/mh1.a.b", "[::1", false},
		{"http://a:b:1/resources/peer/mh1.a.b", "a:b:1", false},
	} {
		got := Matches(tc.htu, Target{Method: "GET", Path: path, Host: tc.host})
		if got != tc.want {
			t.Errorf("Matches(%q, Host %q) = %v, want %v", tc.htu, tc.host, got, tc.want)
		}
	}
}
