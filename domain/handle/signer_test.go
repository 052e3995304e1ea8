package handle

import (
	"sync"
	"testing"

	"github.com/resplane/resplane/domain/refusal"
)

func TestASignerMintsAndVerifiesExactlyAsTheFunctionsDo(t *testing.T) {
	s := NewSigner(testKey)
	payload := NewPayload(testSession, "out/report.md", testExp, testNonce)
	token := s.Mint(payload, testAudience)
	if want := Mint(testKey, payload, testAudience); token != want {
		t.Fatalf("Signer.Mint = %s, want Mint's %s", token, want)
	}
	for _, tc := range []struct {
		name     string
		audience string
		nowMs    int64
		want     refusal.Code // "" for a valid redeem
	}{
		{"valid", testAudience, testExp - 1, ""},
		{"valid again, on a reused HMAC state", testAudience, testExp - 1, ""},
		{"another audience", "other@localhost:1", testExp - 1, refusal.HandleNotValid},
		{"valid after a failure", testAudience, testExp - 1, ""},
		{"expired", testAudience, testExp, refusal.HandleExpired},
		{"no audience", "", testExp - 1, refusal.MissingAudience},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Verify(token, tc.audience, testSession, tc.nowMs)
			_, wantErr := Verify(testKey, token, tc.audience, testSession, tc.nowMs)
			if tc.want == "" {
				if err != nil || wantErr != nil || got != payload {
					t.Fatalf("Verify = %+v, %v (the function: %v), want %+v", got, err, wantErr, payload)
				}
				return
			}
			wantCode(t, err, tc.want)
			wantCode(t, wantErr, tc.want)
		})
	}
}

func TestASignerWhoseKeyIsZeroedInPlaceVerifiesNothing(t *testing.T) {
	key := append([]byte(nil), testKey...)
	s := NewSigner(key)
	token := s.Mint(NewPayload(testSession, "a.txt", testExp, testNonce), testAudience)
	if _, err := s.Verify(token, testAudience, testSession, testExp-1); err != nil {
		t.Fatalf("before zeroing: %v", err)
	}
	clear(key) // what the instance key's Zero does at shutdown
	_, err := s.Verify(token, testAudience, testSession, testExp-1)
	wantCode(t, err, refusal.HandleNotValid)
}

func TestASignerIsSafeForConcurrentUse(t *testing.T) {
	s := NewSigner(testKey)
	tokens := map[string]string{}
	for _, aud := range []string{"a@h:1", "b@h:2", "c@h:3", "d@h:4"} {
		tokens[aud] = Mint(testKey, NewPayload(testSession, aud+".txt", testExp, testNonce), aud)
	}
	var wg sync.WaitGroup
	for aud, token := range tokens {
		wg.Go(func() {
			for range 200 {
				p, err := s.Verify(token, aud, testSession, testExp-1)
				if err != nil || p.P != aud+".txt" {
					t.Errorf("Verify for %s = %+v, %v", aud, p, err)
					return
				}
				if _, err := s.Verify(token, "x"+aud, testSession, testExp-1); err == nil {
					t.Errorf("a token for %s verified for x%s", aud, aud)
					return
				}
			}
		})
	}
	wg.Wait()
}
