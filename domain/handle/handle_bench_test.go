package handle_test

// Benchmarks for the handle's per-request work: minting (share-file), verifying (every
// redeem) and redacting (every trace and log line). None of them runs without -bench.

import (
	"strings"
	"testing"

	"github.com/resplane/resplane/domain/handle"
)

var (
	benchKey     = []byte("0123456789abcdef0123456789abcdef")
	benchNonce   = [16]byte{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf}
	benchPayload = handle.NewPayload(benchSession, "reports/2026/summary.md", benchExp, benchNonce)
)

const (
	benchSession  = "ses_01a033ec2c1f7eb2a5922f84e012e89d"
	benchAudience = "reporter@localhost:41234"
	benchExp      = int64(1755950300000)
	benchNow      = benchExp - 60_000
)

// BenchmarkMint mints one token: payload JSON, base64url and HMAC-SHA256.
func BenchmarkMint(b *testing.B) {
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if handle.Mint(benchKey, benchPayload, benchAudience) == "" {
			b.Fatal("empty token")
		}
	}
}

// BenchmarkVerify runs a redeem's ordered checks on a valid token, and on a token whose
// tag was tampered with (the prober's case, which stops at the MAC before any JSON is read).
func BenchmarkVerify(b *testing.B) {
	token := handle.Mint(benchKey, benchPayload, benchAudience)
	b.Run("valid", func(b *testing.B) {
		b.SetBytes(int64(len(token)))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := handle.Verify(benchKey, token, benchAudience, benchSession, benchNow); err != nil {
				b.Fatal(err)
			}
		}
	})
	signer := handle.NewSigner(benchKey)
	b.Run("valid-signer", func(b *testing.B) {
		b.SetBytes(int64(len(token)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := signer.Verify(token, benchAudience, benchSession, benchNow); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Flip the tag's last character to another in the alphabet whose low bits are zero, so
	// the shape stays valid and only the MAC fails.
	last := token[len(token)-1]
	swap := byte('A')
	if last == 'A' {
		swap = 'Q'
	}
	tampered := token[:len(token)-1] + string(swap)
	b.Run("bad-mac", func(b *testing.B) {
		b.SetBytes(int64(len(tampered)))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := handle.Verify(benchKey, tampered, benchAudience, benchSession, benchNow); err == nil {
				b.Fatal("a tampered token verified")
			}
		}
	})
}

// BenchmarkRedact passes a trace-line-sized text through Redact: without a token (the
// common case, one substring search and no allocation) and with one token in the middle.
func BenchmarkRedact(b *testing.B) {
	token := handle.Mint(benchKey, benchPayload, benchAudience)
	plain := strings.Repeat(`{"event_type":"resource_read","path":"out/mh1-report.md","outcome":"ok"}`, 4)
	withToken := `{"event_type":"tool_call","args":{"handle":"` + token + `","peer":"localhost:41234"},"outcome":"ok"}`
	for _, c := range []struct{ name, text string }{{"no-token", plain}, {"one-token", withToken}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_ = handle.Redact(c.text)
			}
		})
	}
}

// BenchmarkVerifyMAC is step 6 of a redeem alone: without a proof (one tag), and with one (the
// bound and the unbound tag, both computed whatever matches), the bound handle's part of
// docs/benchmarks.md, "Proof of possession".
func BenchmarkVerifyMAC(b *testing.B) {
	const jkt = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
	signer := handle.NewSigner(benchKey)
	for _, c := range []struct{ name, jkt string }{{"unbound", ""}, {"bound", jkt}} {
		tok, err := handle.ParseShape(signer.MintBound(benchPayload, benchAudience, c.jkt))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := signer.VerifyMAC(tok, benchAudience, c.jkt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
