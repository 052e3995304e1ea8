package ports

// NonceSource supplies the 16 random bytes each minted handle carries as n, so that two handles
// for the same file and audience are distinct and separately traceable. The nonce is not a
// secret: it travels in the clear in the payload.
type NonceSource interface {
	// Nonce returns 16 fresh bytes. An error means no randomness was available; the mint then
	// fails rather than reusing a nonce.
	Nonce() ([16]byte, error)
}
