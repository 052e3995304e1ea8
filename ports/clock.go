package ports

import "time"

// Clock tells the time. The application never calls time.Now itself, so a test can pin the
// instant a handle is minted or checked for expiry.
type Clock interface {
	Now() time.Time
}
