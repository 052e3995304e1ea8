package keys

import (
	"bytes"
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
