package trace

// PeerHandleMint records one share-file call past input validation, on the minting side.
type PeerHandleMint struct {
	HandleID    string // recorded only on success
	Path        string // canonical on success, as given otherwise; never a host path
	Audience    string // "" when the peer was not allowed or its card could not be read
	ExpiresAtMs int64  // recorded only on success
	Err         error
}

// Type implements Event.
func (PeerHandleMint) Type() string { return "peer_handle_mint" }

// Fields implements Event.
func (e PeerHandleMint) Fields() []Field {
	outcome, reason := Outcome(e.Err)
	ok := e.Err == nil
	return fields([]Field{
		{"handle_id", OptionalString(e.HandleID, ok)}, {"path", e.Path}, {"audience", e.Audience},
		{"expires_at_ms", OptionalInt64(e.ExpiresAtMs, ok)}, {"outcome", outcome}, {"reason", reason},
	})
}

// PeerHandleRedeem records one redeem request from the declaration check on, on the minting
// side.
type PeerHandleRedeem struct {
	HandleID string
	Path     string // the handle's p, recorded only on success
	// Audience is the asserted audience, trimmed and lowercased; AudienceSent is false when the
	// header was absent (recorded as null), and a blank header is recorded as "".
	Audience     string
	AudienceSent bool
	Generation   uint64
	Bytes        int64  // recorded only on success
	SHA256       string // recorded only on success
	Err          error
}

// Type implements Event.
func (PeerHandleRedeem) Type() string { return "peer_handle_redeem" }

// Fields implements Event.
func (e PeerHandleRedeem) Fields() []Field {
	outcome, reason := Outcome(e.Err)
	ok := e.Err == nil
	return fields([]Field{
		{"handle_id", e.HandleID}, {"path", OptionalString(e.Path, ok)}, {"generation", e.Generation},
		{"audience_asserted", OptionalString(e.Audience, e.AudienceSent)},
		{"bytes", OptionalInt64(e.Bytes, ok)}, {"sha256", OptionalString(e.SHA256, ok)},
		{"outcome", outcome}, {"reason", reason},
	})
}

// PeerFileFetch records one fetch-peer-file call past input validation, on the fetching side.
type PeerFileFetch struct {
	Peer       string // as given
	HandleID   string
	StoredPath string // relative to the workdir; recorded only on success
	Bytes      int64  // recorded only on success
	SHA256     string // recorded only on success
	Err        error
}

// Type implements Event.
func (PeerFileFetch) Type() string { return "peer_file_fetch" }

// Fields implements Event.
func (e PeerFileFetch) Fields() []Field {
	outcome, reason := Outcome(e.Err)
	ok := e.Err == nil
	return fields([]Field{
		{"peer", e.Peer}, {"handle_id", e.HandleID}, {"stored_path", OptionalString(e.StoredPath, ok)},
		{"bytes", OptionalInt64(e.Bytes, ok)}, {"sha256", OptionalString(e.SHA256, ok)},
		{"outcome", outcome}, {"reason", reason},
	})
}

// PeerKeyRotate records one rotation of the instance key (POST /v1/peer/rotate-key): every
// handle minted before it stopped verifying. Its body is the outcome alone.
type PeerKeyRotate struct{}

// Type implements Event.
func (PeerKeyRotate) Type() string { return "peer_key_rotate" }

// Fields implements Event.
func (PeerKeyRotate) Fields() []Field {
	return fields([]Field{{"outcome", OutcomeOK}})
}
