package application

import (
	"sync"

	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/ports"
)

// Keyring is the instance key as the peer plane's use cases share it: the handle signer over
// it, which a rotation replaces (docs/peer-plane.md, "Revoking every handle"). Minting and
// verifying hold it for reading; a rotation holds it alone, so no MAC is ever computed over a
// key being overwritten, and none under the old key once the rotation returns. It is safe for
// concurrent use.
type Keyring struct {
	mu     sync.RWMutex
	key    ports.InstanceKey
	signer *handle.Signer // keeps keyed HMAC states: replaced, never reused, on rotation
}

// NewKeyring returns the keyring over key.
func NewKeyring(key ports.InstanceKey) *Keyring {
	return &Keyring{key: key, signer: handle.NewSigner(key.Key())}
}

// mint is handle.Signer.MintBound under the current key.
func (k *Keyring) mint(payload handle.Payload, audience, jkt string) string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.signer.MintBound(payload, audience, jkt)
}

// verifyMAC is handle.Signer.VerifyMAC under the current key.
func (k *Keyring) verifyMAC(t handle.Token, audience, jkt string) (bool, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.signer.VerifyMAC(t, audience, jkt)
}

// rotate replaces the key with fresh random bytes, overwriting the old ones, and the signer
// with one under the new key.
func (k *Keyring) rotate() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.key.Rotate(); err != nil {
		return err
	}
	k.signer = handle.NewSigner(k.key.Key())
	return nil
}

// RotateKey is the operator's revoke-all (docs/peer-plane.md, "Revoking every handle";
// POST /v1/peer/rotate-key): it replaces the instance key, so that every handle minted before
// stops verifying at once and every handle minted after redeems. It is not an agent tool.
type RotateKey struct {
	plane *ExportPlane // nil when exports.peer_files is not declared
	keys  *Keyring
	clock ports.Clock
	trace ports.TraceSink
}

// NewRotateKey returns the use case over issuer's keyring.
func NewRotateKey(plane *ExportPlane, issuer PeerIssuer, clock ports.Clock, sink ports.TraceSink) *RotateKey {
	return &RotateKey{plane: plane, keys: issuer.Key, clock: clock, trace: sink}
}

// Rotate rotates the key, traces peer_key_rotate and returns the instant of the rotation in
// Unix milliseconds. Without exports.peer_files there is no key: no_peer_plane. A key that
// cannot be replaced is an io_error, and then no handle verifies (the old key was overwritten
// first).
func (u *RotateKey) Rotate() (int64, error) {
	if u.plane == nil {
		return 0, refusal.New(refusal.NoPeerPlane)
	}
	if err := u.keys.rotate(); err != nil {
		return 0, refusal.WithMessage(refusal.IOError, "The instance key could not be replaced; no handle verifies until the service restarts.").Wrapping(err)
	}
	at := u.clock.Now().UnixMilli()
	u.trace.Record(trace.PeerKeyRotate{})
	return at, nil
}
