package application

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/resplane/resplane/domain/handle"
	"github.com/resplane/resplane/domain/proof"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// Proofs is how the peer plane proves possession (docs/peer-plane.md, "Proof of possession"):
// the --peer-proof mode and the JOSE verifier a redeem checks a proof with. Under proof.Off a
// redeem ignores a DPoP header, share-file never binds and fetch-peer-file never proves.
type Proofs struct {
	Mode     proof.Mode
	Verifier ports.ProofVerifier // unused under proof.Off
}

// checks reports whether a redeem checks the proofs it carries.
func (p Proofs) checks() bool { return p.Mode != proof.Off && p.Verifier != nil }

var errTwoProofs = refusal.WithMessage(refusal.InvalidProof, "A redeem may carry at most one DPoP header.")

// check is step 5b of a redeem (docs/peer-plane.md, "Proof of possession"): with no DPoP
// header, or when proofs are off, there is nothing to check and jkt is ""; otherwise the
// request must carry exactly one valid proof for target at now, and check returns the
// thumbprint of its key and its jti.
func (p Proofs) check(values []string, target proof.Target, now time.Time) (jkt, jti string, err error) {
	if len(values) == 0 || !p.checks() {
		return "", "", nil
	}
	if len(values) > 1 {
		return "", "", errTwoProofs
	}
	verified, err := p.Verifier.Verify(values[0])
	if err != nil {
		return "", "", err
	}
	if err := verified.Claims.Check(target, now); err != nil {
		return "", "", err
	}
	return handle.Thumbprint(verified.Key), verified.Claims.JTI, nil
}

// DefaultReplayCapacity is how many proofs Replays remembers at most: a bound redeem of 1 KiB
// costs a core well over 100 µs, so one process serves fewer than this many in
// proof.ReplayWindow. Each costs about 50 bytes.
const DefaultReplayCapacity = 1 << 19

var (
	errReplayed = refusal.WithMessage(refusal.InvalidProof,
		"The DPoP proof was already used; make a new proof, with a fresh jti, for every request.")
	errTooManyProofs = refusal.WithMessage(refusal.InvalidProof,
		"More proofs were used in the last 65 s than this service remembers; retry once older ones have aged out.")
)

// Replays remembers the proof of every bound redeem for proof.ReplayWindow, so that a proof is
// accepted once (docs/peer-plane.md, "Proof of possession"). Only a proof whose key a handle
// is bound to, and whose handle's MAC verified, reaches it: a flood of proofs from other keys
// never does, so what it holds is bounded by what the holders of bound handles send, and at
// most by its capacity. Once full it refuses new proofs rather than forget unexpired ones.
// It is safe for concurrent use.
type Replays struct {
	mu       sync.Mutex
	capacity int
	seen     map[replayKey]struct{}
	// order holds the remembered proofs oldest first (every one is kept for the same window),
	// from head on; the entries before head are forgotten.
	order []replayEntry
	head  int
}

// replayKey is the first 16 bytes of SHA-256 over the key's thumbprint and the jti: a jti is
// remembered per key, and every entry has one size whatever the jti's.
type replayKey [16]byte

type replayEntry struct {
	key     replayKey
	expires int64 // Unix nanoseconds
}

// NewReplays returns an empty memory holding at most capacity proofs (DefaultReplayCapacity
// when capacity is not positive).
func NewReplays(capacity int) *Replays {
	if capacity <= 0 {
		capacity = DefaultReplayCapacity
	}
	return &Replays{capacity: capacity, seen: map[replayKey]struct{}{}}
}

// Remember records the proof jti of the key whose thumbprint is jkt, seen at now. It fails
// invalid_proof when that proof was already seen within proof.ReplayWindow, or when the memory
// is full of proofs younger than that.
func (r *Replays) Remember(jkt, jti string, now time.Time) error {
	sum := sha256.Sum256([]byte(jkt + "\x1f" + jti))
	key := replayKey(sum[:16])
	at := now.UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(at)
	if _, seen := r.seen[key]; seen {
		return errReplayed
	}
	if len(r.seen) >= r.capacity {
		return errTooManyProofs
	}
	r.seen[key] = struct{}{}
	r.order = append(r.order, replayEntry{key: key, expires: at + int64(proof.ReplayWindow)})
	return nil
}

// forget drops the proofs whose window has passed at at, and compacts order once most of it
// is forgotten.
func (r *Replays) forget(at int64) {
	for r.head < len(r.order) && r.order[r.head].expires <= at {
		delete(r.seen, r.order[r.head].key)
		r.head++
	}
	if r.head > 0 && r.head >= len(r.order)/2 {
		r.order = append(r.order[:0], r.order[r.head:]...)
		r.head = 0
	}
}
