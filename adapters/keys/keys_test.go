package keys

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/resplane/resplane/domain/handle"
)

// secretKey has printable bytes, so a leak through %s, %x or %d would be easy to spot.
var secretKey = [handle.KeySize]byte([]byte("SECRET-KEY-0123456789abcdefghijk"))

func TestNewRandomIsThirtyTwoFreshBytes(t *testing.T) {
	a, err := NewRandom()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRandom()
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Key()) != handle.KeySize {
		t.Fatalf("key is %d bytes, want %d", len(a.Key()), handle.KeySize)
	}
	if bytes.Equal(a.Key(), make([]byte, handle.KeySize)) {
		t.Fatal("a fresh key is all zero")
	}
	if bytes.Equal(a.Key(), b.Key()) {
		t.Fatal("two processes' keys would be equal")
	}
}

func TestZeroOverwritesTheKey(t *testing.T) {
	r, err := NewRandom()
	if err != nil {
		t.Fatal(err)
	}
	held := r.Key() // a user's view of the key taken before shutdown
	r.Zero()
	zero := make([]byte, handle.KeySize)
	if !bytes.Equal(r.Key(), zero) {
		t.Fatalf("Key after Zero = %x", r.Key())
	}
	if !bytes.Equal(held, zero) {
		t.Fatalf("a slice from Key survives Zero: %x", held)
	}
	r.Zero() // idempotent
}

func TestCloseZeroesTheKey(t *testing.T) {
	r, err := NewRandom()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if !bytes.Equal(r.Key(), make([]byte, handle.KeySize)) {
		t.Fatalf("Key after Close = %x", r.Key())
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

func TestFixedReturnsItsKey(t *testing.T) {
	if got := NewFixed(secretKey).Key(); !bytes.Equal(got, secretKey[:]) {
		t.Fatalf("Key = %q", got)
	}
}

// leaks reports whether s contains the key in any rendering a printer might produce.
func leaks(s string, key []byte) bool {
	decimal := strings.Trim(fmt.Sprint([]byte(key)), "[]")
	return strings.Contains(s, string(key[:8])) ||
		strings.Contains(strings.ToLower(s), hex.EncodeToString(key[:8])) ||
		strings.Contains(s, decimal[:12])
}

func TestKeysFormatRedacted(t *testing.T) {
	random, err := NewRandom()
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]interface{ Key() []byte }{"Random": random, "Fixed": NewFixed(secretKey)}
	for name, k := range keys {
		t.Run(name, func(t *testing.T) {
			check := func(how, out string) {
				t.Helper()
				if !strings.Contains(out, redactedText) || leaks(out, k.Key()) {
					t.Errorf("%s printed %q", how, out)
				}
			}
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%o", "%b"} {
				check("Sprintf("+verb+", key)", fmt.Sprintf(verb, k))
				check("Sprintf("+verb+", *key)", fmt.Sprintf(verb, deref(k)))
			}
			check("Sprint of a struct holding the key", fmt.Sprintf("%+v", struct{ K any }{k}))
			check("GoString", k.(fmt.GoStringer).GoString())
			text, err := k.(encoding.TextMarshaler).MarshalText()
			if err != nil {
				t.Fatal(err)
			}
			check("MarshalText", string(text))

			js, err := json.Marshal(map[string]any{"key": k})
			if err != nil {
				t.Fatal(err)
			}
			check("json.Marshal", string(js))

			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, nil)).Info("launch", "key", k)
			check("slog", buf.String())

			buf.Reset()
			logger := zerolog.New(&buf)
			logger.Info().Interface("i", k).Stringer("s", k.(fmt.Stringer)).Any("a", k).Msg("launch")
			check("zerolog", buf.String())
		})
	}
}

func deref(k any) any {
	switch k := k.(type) {
	case *Random:
		return *k
	case *Fixed:
		return *k
	}
	panic("unknown key type")
}

func TestRandomNonceIsFresh(t *testing.T) {
	a, err := RandomNonce{}.Nonce()
	if err != nil {
		t.Fatal(err)
	}
	b, err := RandomNonce{}.Nonce()
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two nonces are equal")
	}
}

func TestFixedNonce(t *testing.T) {
	want := [16]byte{0xa0, 1, 2, 3}
	got, err := FixedNonce(want).Nonce()
	if err != nil || got != want {
		t.Fatalf("Nonce = %x, %v; want %x", got, err, want)
	}
}

func TestNewProofKeyIsAFreshEd25519Pair(t *testing.T) {
	a, err := NewProofKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewProofKey()
	if err != nil {
		t.Fatal(err)
	}
	if len(a.PublicKey()) != ed25519.PublicKeySize || bytes.Equal(a.PublicKey(), b.PublicKey()) {
		t.Fatalf("public keys %x and %x: want two distinct 32-byte keys", a.PublicKey(), b.PublicKey())
	}
	sig, err := a.Sign([]byte("message"))
	if err != nil || !ed25519.Verify(a.PublicKey(), []byte("message"), sig) {
		t.Fatalf("Sign = %x, %v; want a signature that verifies under PublicKey", sig, err)
	}
}

func TestAZeroedProofKeySignsNothing(t *testing.T) {
	k := NewFixedProofKey([32]byte{9})
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k.private, make([]byte, ed25519.PrivateKeySize)) {
		t.Fatalf("the key pair after Close = %x", []byte(k.private))
	}
	if sig, err := k.Sign([]byte("message")); err == nil {
		t.Fatalf("a zeroed key signed: %x", sig)
	}
	k.Zero() // idempotent
}

func TestTheProofKeyFormatsRedacted(t *testing.T) {
	k := NewFixedProofKey([32]byte([]byte("SECRET-SEED-0123456789abcdefghij")))
	seed := k.private.Seed()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d"} {
		for _, v := range []any{k, *k} {
			if out := fmt.Sprintf(verb, v); !strings.Contains(out, redactedText) || leaks(out, seed) {
				t.Errorf("Sprintf(%s) printed %q", verb, out)
			}
		}
	}
	js, err := json.Marshal(map[string]any{"key": k})
	if err != nil || leaks(string(js), seed) {
		t.Errorf("json.Marshal = %s, %v", js, err)
	}
	var buf bytes.Buffer
	logger := zerolog.New(&buf)
	logger.Info().Interface("i", k).Stringer("s", k).Msg("launch")
	if leaks(buf.String(), seed) || !strings.Contains(buf.String(), redactedText) {
		t.Errorf("zerolog printed %q", buf.String())
	}
}

func TestRotateReplacesTheKeyInPlace(t *testing.T) {
	r, err := NewRandom()
	if err != nil {
		t.Fatal(err)
	}
	held := r.Key()
	old := bytes.Clone(held)
	if err := r.Rotate(); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(r.Key(), old) || bytes.Equal(r.Key(), make([]byte, handle.KeySize)) {
		t.Fatalf("the key after Rotate is the old one or zero: %x", r.Key())
	}
	if !bytes.Equal(held, r.Key()) {
		t.Fatal("a slice from Key still holds the old key after Rotate")
	}
	f := NewFixed(secretKey)
	if err := f.Rotate(); err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(secretKey[:]); !bytes.Equal(f.Key(), want[:]) {
		t.Fatalf("Fixed after Rotate = %x, want sha256 of the old key", f.Key())
	}
}
