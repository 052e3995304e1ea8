// Package keys provides the instance key, the handle nonces and the fetcher's proof key
// (ports.InstanceKey, ports.NonceSource and ports.ProofKey): from crypto/rand in production,
// fixed values in tests.
//
// What is guaranteed about a key held here: it is read from the OS CSPRNG and nowhere else; it
// is never written to a file, an environment variable or a log by this package; every way Go
// code commonly turns a value into text — fmt (any verb), encoding/json, encoding.TextMarshaler,
// log/slog, and zerolog's Stringer/Interface fields — prints "[redacted]" instead of the bytes;
// and Zero overwrites the one copy this package holds.
//
// What is not guaranteed: bytes a caller copies out of Key (crypto/hmac, for one, keeps its own
// padded copy for the life of each MAC) are beyond Zero's reach, and reflection-based printers
// that read unexported fields (go-cmp, spew) can still see them. Zeroing narrows the window in
// which the key is in memory; it does not make the process's memory secret.
package keys

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/ports"
)

// redactedText is what every textual rendering of a key prints.
const redactedText = "[redacted]"

// redacted is embedded in the key types so that every textual rendering of them prints
// redactedText: an accidental log line can then name the key but never contain it.
type redacted struct{}

// String returns "[redacted]"; zerolog's Stringer field uses it.
func (redacted) String() string { return redactedText }

// GoString returns "[redacted]" for %#v printers that bypass Format.
func (redacted) GoString() string { return redactedText }

// Format prints "[redacted]" for every fmt verb, %x and %d included.
func (redacted) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redactedText)) }

// MarshalJSON returns the JSON string "[redacted]"; zerolog's Interface field uses it.
func (redacted) MarshalJSON() ([]byte, error) { return []byte(`"` + redactedText + `"`), nil }

// MarshalText returns "[redacted]", for encoders (YAML, TOML, flag printers) that use it.
func (redacted) MarshalText() ([]byte, error) { return []byte(redactedText), nil }

// LogValue makes log/slog print "[redacted]".
func (redacted) LogValue() slog.Value { return slog.StringValue(redactedText) }

// Random is the production instance key: 32 bytes from the OS CSPRNG, generated once per
// process and held only in this value's memory. The zero Random holds no key, only 32 zero
// bytes, under which handle verification accepts nothing; it stands in for the key when none
// is generated.
type Random struct {
	redacted
	key [handle.KeySize]byte
}

var _ ports.InstanceKey = (*Random)(nil)

// NewRandom reads a fresh key from crypto/rand. Call it at launch only when exports.peer_files
// is declared, and arrange for Close to run at shutdown.
func NewRandom() (*Random, error) {
	r := &Random{}
	if _, err := rand.Read(r.key[:]); err != nil {
		return nil, fmt.Errorf("reading the instance key from the OS random source: %w", err)
	}
	return r, nil
}

// Key returns the key's bytes. The slice aliases the key's storage, so no copy outlives Zero
// through it; callers must not modify it. After Zero it holds 32 zero bytes, under which
// handle verification accepts nothing.
func (r *Random) Key() []byte { return r.key[:] }

// Rotate overwrites the key with zeros, then with 32 fresh bytes from crypto/rand, in place: a
// slice from Key sees the new key, and nothing of the old one is left in this value. It is not
// synchronised with concurrent Key readers. If the random source fails, the key stays zero,
// under which nothing verifies.
func (r *Random) Rotate() error {
	r.Zero()
	if _, err := rand.Read(r.key[:]); err != nil {
		r.Zero()
		return fmt.Errorf("reading a new instance key from the OS random source: %w", err)
	}
	return nil
}

// Zero overwrites the key with zeros. It is idempotent. Run it only after every user of the key
// has stopped (the HTTP listener drained, the agent loop ended): it is not synchronised with
// concurrent Key readers.
func (r *Random) Zero() { clear(r.key[:]) }

// Close zeroes the key, so the key can sit in a cleanup chain as an io.Closer. It never fails.
func (r *Random) Close() error {
	r.Zero()
	return nil
}

// Fixed is a caller-chosen key for tests, so a test can assert an exact token. Its formatting
// is redacted like Random's, so a test log looks like a production one.
type Fixed struct {
	redacted
	key [handle.KeySize]byte
}

var _ ports.InstanceKey = (*Fixed)(nil)

// NewFixed returns a Fixed holding key.
func NewFixed(key [handle.KeySize]byte) *Fixed { return &Fixed{key: key} }

// Key returns the fixed key's bytes; callers must not modify them.
func (f *Fixed) Key() []byte { return f.key[:] }

// Rotate replaces the key, in place, with the SHA-256 of itself, so a test can predict the
// key after a rotation.
func (f *Fixed) Rotate() error {
	f.key = sha256.Sum256(f.key[:])
	return nil
}

// RandomNonce draws each handle's nonce from crypto/rand.
type RandomNonce struct{}

var _ ports.NonceSource = RandomNonce{}

// Nonce returns 16 fresh random bytes.
func (RandomNonce) Nonce() ([16]byte, error) {
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return [16]byte{}, fmt.Errorf("reading a handle nonce from the OS random source: %w", err)
	}
	return n, nil
}

// FixedNonce returns the same nonce on every call, so a test can assert an exact token.
type FixedNonce [16]byte

var _ ports.NonceSource = FixedNonce{}

// Nonce returns the fixed bytes.
func (n FixedNonce) Nonce() ([16]byte, error) { return n, nil }

// ProofKey is the fetcher's proof-of-possession key (ports.ProofKey): an Ed25519 key pair
// whose private half is held only in this value's memory, formatted as "[redacted]" like the
// instance key, and overwritten with zeros by Zero.
type ProofKey struct {
	redacted
	private ed25519.PrivateKey
}

var _ ports.ProofKey = (*ProofKey)(nil)

// NewProofKey generates a key pair from crypto/rand. Call it at launch only when
// capabilities.peer_fetch is declared and --peer-proof is not off, and arrange for Close to run
// at shutdown.
func NewProofKey() (*ProofKey, error) {
	_, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the proof key from the OS random source: %w", err)
	}
	return &ProofKey{private: private}, nil
}

// NewFixedProofKey derives the key pair from seed, so a test can make a known key.
func NewFixedProofKey(seed [ed25519.SeedSize]byte) *ProofKey {
	return &ProofKey{private: ed25519.NewKeyFromSeed(seed[:])}
}

// PublicKey returns the 32-byte public key; callers must not modify it.
func (k *ProofKey) PublicKey() []byte { return k.private[ed25519.SeedSize:] }

// Sign returns the Ed25519 signature of message. After Zero it fails: a zeroed key signs
// nothing.
func (k *ProofKey) Sign(message []byte) ([]byte, error) {
	if usable := slices.ContainsFunc(k.private[:ed25519.SeedSize], func(b byte) bool { return b != 0 }); !usable {
		return nil, errZeroedProofKey
	}
	return ed25519.Sign(k.private, message), nil
}

var errZeroedProofKey = errors.New("the proof key was zeroed at shutdown")

// Zero overwrites the key pair with zeros. It is idempotent. Run it only after every user of
// the key has stopped: it is not synchronised with concurrent Sign calls.
func (k *ProofKey) Zero() { clear(k.private) }

// Close zeroes the key, so it can sit in a cleanup chain as an io.Closer. It never fails.
func (k *ProofKey) Close() error {
	k.Zero()
	return nil
}
