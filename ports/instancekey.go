package ports

// InstanceKey holds the capsule instance's handle-minting key (docs/peer-plane.md,
// "The minting key"): 32 bytes from the OS CSPRNG, generated at launch only when
// exports.peer_files is declared, held in memory only — never written to disk, placed in an
// environment variable or logged — and overwritten with zeros at shutdown. A new process means
// a new key, so every handle of an earlier process stops verifying.
type InstanceKey interface {
	// Key returns the key's bytes. Callers use them for one HMAC and keep no copy; the slice
	// may alias the implementation's storage, so it must not be modified. After shutdown an
	// implementation may return all zeros, under which nothing verifies.
	Key() []byte
	// Rotate replaces the key with fresh random bytes in place, overwriting the old ones
	// (docs/peer-plane.md, "Revoking every handle"). It is not synchronised with Key's
	// users: the caller holds them off while it runs. An error leaves no usable key.
	Rotate() error
}
