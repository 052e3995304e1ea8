package harness

import (
	"crypto/rand"
	"encoding/base64"
)

// ForgeToken builds a token by hand around payload JSON and a random 32-byte tag. No key is
// involved, so it verifies nowhere: it redeems only at a fake peer that checks nothing, and to
// the service it is a token-shaped string that the redactor must still hide.
func ForgeToken(payload string) string {
	tag := make([]byte, 32)
	_, _ = rand.Read(tag)
	enc := base64.RawURLEncoding
	return "mh1." + enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(tag)
}
