package handle

import (
	"encoding/base64"
	"testing"

	"github.com/resplane/resplane/domain/refusal"
)

// rfc8037X is the Ed25519 public key of RFC 8037, Appendix A.2, as its JWK's x.
const rfc8037X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"

// rfc8037JKT is that key's RFC 7638 thumbprint, as RFC 8037, Appendix A.3 gives it.
const rfc8037JKT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"

func rfc8037Key(t testing.TB) []byte {
	t.Helper()
	x, err := base64.RawURLEncoding.DecodeString(rfc8037X)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestThumbprintIsRFC8037sExample(t *testing.T) {
	if got := Thumbprint(rfc8037Key(t)); got != rfc8037JKT {
		t.Fatalf("Thumbprint = %s, want RFC 8037 A.3's %s", got, rfc8037JKT)
	}
}

func TestAKeyOfAnotherLengthHasNoThumbprint(t *testing.T) {
	for _, n := range []int{0, 31, 33, 64} {
		if got := Thumbprint(make([]byte, n)); got != "" {
			t.Errorf("Thumbprint of %d bytes = %q, want \"\"", n, got)
		}
	}
}

// TestABoundMintMatchesIndependentComputation pins the bound MAC input
// (docs/peer-plane.md, "Proof of possession"): the example token of
// TestMintMatchesIndependentComputation, bound to RFC 8037's key. Computed outside Go with
// python3 3.11 as there, with the tag over
//
//	b'murmur-peer-handle-v1\x1f' + seg + b'\x1f' + b'reporter@localhost:41234' +
//	b'\x1fjkt=' + b'kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k'
//
// The payload segment is the unbound token's: binding changes only the tag.
func TestABoundMintMatchesIndependentComputation(t *testing.T) {
	const want = "mh1.eyJ2IjoxLCJpc3MiOiJzZXNfMDFhMDMzZWMyYzFmN2ViMmE1OTIyZjg0ZTAxMmU4OWQiLCJwIjoicmVwb3J0Lm1kIiwiZXhwIjoxNzU1OTUwMzAwMDAwLCJuIjoiYTBhMWEyYTNhNGE1YTZhN2E4YTlhYWFiYWNhZGFlYWYifQ.f4lZZ9xvWJZaaTCtWkqKN2-RQIL_Yi3DkIrJbv7lVPQ"
	p := NewPayload(testSession, "report.md", testExp, testNonce)
	got := NewSigner(testKey).MintBound(p, testAudience, rfc8037JKT)
	if got != want {
		t.Fatalf("MintBound\n got %s\nwant %s", got, want)
	}
	if gotSeg, _ := segments(t, got); gotSeg != mustSegment(t, validToken) {
		t.Fatalf("binding changed the payload segment")
	}
	if unbound := NewSigner(testKey).MintBound(p, testAudience, ""); unbound != validToken {
		t.Fatalf("MintBound with no jkt = %s, want the unbound token %s", unbound, validToken)
	}
}

func mustSegment(t *testing.T, token string) string {
	t.Helper()
	seg, _ := segments(t, token)
	return seg
}

// TestTheMACAcceptsABoundTagOnlyWithItsKeysThumbprint pins step 6 of a redeem with a proof
// (docs/peer-plane.md, "Proof of possession"): a bound handle verifies only with its key's jkt;
// an unbound one verifies with or without a jkt; every failure is the one handle_not_valid.
func TestTheMACAcceptsABoundTagOnlyWithItsKeysThumbprint(t *testing.T) {
	s := NewSigner(testKey)
	p := NewPayload(testSession, "report.md", testExp, testNonce)
	other := Thumbprint(seqBytes(0x40, 32))
	bound, err := ParseShape(s.MintBound(p, testAudience, rfc8037JKT))
	if err != nil {
		t.Fatal(err)
	}
	unbound, err := ParseShape(s.Mint(p, testAudience))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		tok       Token
		audience  string
		jkt       string
		wantBound bool
		wantErr   bool
	}{
		{"a bound handle with its key's proof", bound, testAudience, rfc8037JKT, true, false},
		{"a bound handle without a proof", bound, testAudience, "", false, true},
		{"a bound handle with another key's proof", bound, testAudience, other, false, true},
		{"a bound handle with its key's proof and another audience", bound, "other@localhost:1", rfc8037JKT, false, true},
		{"an unbound handle without a proof", unbound, testAudience, "", false, false},
		{"an unbound handle with a proof", unbound, testAudience, rfc8037JKT, false, false},
		{"an unbound handle with a proof and another audience", unbound, "other@localhost:1", rfc8037JKT, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotBound, err := s.VerifyMAC(tc.tok, tc.audience, tc.jkt)
			if tc.wantErr {
				wantCode(t, err, refusal.HandleNotValid)
				return
			}
			if err != nil || gotBound != tc.wantBound {
				t.Fatalf("VerifyMAC = %v, %v; want bound %v, nil", gotBound, err, tc.wantBound)
			}
		})
	}
	t.Run("a zeroed key verifies nothing, bound or not", func(t *testing.T) {
		zero := NewSigner(make([]byte, 32))
		_, err := zero.VerifyMAC(bound, testAudience, rfc8037JKT)
		wantCode(t, err, refusal.HandleNotValid)
	})
}

func TestCheckRunsTheStepsBehindTheMACInOrder(t *testing.T) {
	tok, err := ParseShape(validToken)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := tok.Check(testSession, testExp-1); err != nil || p.P != "report.md" {
		t.Fatalf("Check = %+v, %v", p, err)
	}
	_, err = tok.Check("ses_other", testExp+1)
	wantCode(t, err, refusal.HandleNotValid)
	_, err = tok.Check(testSession, testExp)
	wantCode(t, err, refusal.HandleExpired)
	wantCode(t, RequireAudience(""), refusal.MissingAudience)
	if err := RequireAudience(testAudience); err != nil {
		t.Fatal(err)
	}
}
