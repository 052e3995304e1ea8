package config

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/resplane/resplane/application"
)

// grantsJSON is the line `resplane check` prints (docs/operator-guide.md, "resplane check"),
// keys in this order.
type grantsJSON struct {
	ExportsFiles   *filesJSON     `json:"exports_files"`
	PeerFiles      *peerFilesJSON `json:"peer_files"`
	PeerFetchAllow []string       `json:"peer_fetch_allow"`
	NetworkAllow   []string       `json:"network_allow"`
	AfterTask      string         `json:"after_task"`
}

type filesJSON struct {
	Root     string `json:"root"`
	Mode     string `json:"mode"`
	MaxBytes int64  `json:"max_bytes"`
}

type peerFilesJSON struct {
	Root       string `json:"root"`
	MaxTTLSecs int64  `json:"max_ttl_secs"`
	MaxBytes   int64  `json:"max_bytes"`
}

// MarshalGrants renders the effective grants as `resplane check` prints them: one JSON line
// ending in a newline, an undeclared block as null, an undeclared allow-list as [] (Grants
// holds it empty, not nil), and no HTML escaping.
func MarshalGrants(g application.Grants) ([]byte, error) {
	out := grantsJSON{
		PeerFetchAllow: g.PeerFetchAllow,
		NetworkAllow:   g.NetworkAllow,
		AfterTask:      string(g.AfterTask),
	}
	if f := g.Files; f != nil {
		out.ExportsFiles = &filesJSON{Root: f.Root, Mode: string(f.Mode), MaxBytes: f.MaxBytes}
	}
	if p := g.PeerFiles; p != nil {
		out.PeerFiles = &peerFilesJSON{Root: p.Root, MaxTTLSecs: int64(p.MaxTTL / time.Second), MaxBytes: p.MaxBytes}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
