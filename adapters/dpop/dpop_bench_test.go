package dpop_test

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/dpop"
	"github.com/resplane/resplane/domain/proof"
)

// The cost of checking one proof, in parts (docs/benchmarks.md, "Proof of possession"):
// BenchmarkVerifyProof is the whole JOSE layer a redeem runs, BenchmarkEd25519Verify the
// signature check inside it; the difference is the parse. BenchmarkCheckClaims is the claim
// rules the redeem applies after it. None runs without -bench.

func benchProof(b *testing.B) string {
	b.Helper()
	return sign(priv, header("EdDSA", jwkOf(priv)), claims(time.Now().Unix()))
}

func BenchmarkVerifyProof(b *testing.B) {
	p := benchProof(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (dpop.Verifier{}).Verify(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEd25519Verify(b *testing.B) {
	p := benchProof(b)
	i := strings.LastIndexByte(p, '.')
	sig, err := b64.DecodeString(p[i+1:])
	if err != nil {
		b.Fatal(err)
	}
	pub, input := priv.Public().(ed25519.PublicKey), []byte(p[:i])
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, input, sig) {
			b.Fatal("does not verify")
		}
	}
}

func BenchmarkCheckClaims(b *testing.B) {
	got, err := dpop.Verifier{}.Verify(benchProof(b))
	if err != nil {
		b.Fatal(err)
	}
	target := proof.Target{Method: "GET", Path: htu[strings.Index(htu, "/resources"):], Host: "127.0.0.1:8080"}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if err := got.Claims.Check(target, now); err != nil {
			b.Fatal(err)
		}
	}
}
