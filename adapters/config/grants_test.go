package config

import (
	"testing"
	"time"

	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/manifest"
)

func TestGrantsJSONIsTheCheckLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    application.Grants
		want string
	}{
		{"docs/operator-guide.md example", application.Grants{
			Files:          &application.GrantsFiles{Root: "out/", Mode: manifest.ReadOnly, MaxBytes: 10485760},
			PeerFiles:      &application.GrantsPeerFiles{Root: "out/handoff/", MaxTTL: time.Hour, MaxBytes: 10485760},
			PeerFetchAllow: []string{"localhost:41235"},
			NetworkAllow:   []string{"localhost:41234"},
			AfterTask:      manifest.AfterTaskExit,
		}, `{"exports_files":{"root":"out/","mode":"read-only","max_bytes":10485760},"peer_files":{"root":"out/handoff/","max_ttl_secs":3600,"max_bytes":10485760},"peer_fetch_allow":["localhost:41235"],"network_allow":["localhost:41234"],"after_task":"exit"}` + "\n"},
		{"nothing declared", application.Grants{PeerFetchAllow: []string{}, NetworkAllow: []string{}, AfterTask: manifest.AfterTaskSleep},
			`{"exports_files":null,"peer_files":null,"peer_fetch_allow":[],"network_allow":[],"after_task":"sleep"}` + "\n"},
		{"no HTML escaping", application.Grants{Files: &application.GrantsFiles{Root: "a<b>&c", Mode: manifest.ReadOnly, MaxBytes: 1},
			PeerFetchAllow: []string{}, NetworkAllow: []string{}, AfterTask: manifest.AfterTaskExit},
			`{"exports_files":{"root":"a<b>&c","mode":"read-only","max_bytes":1},"peer_files":null,"peer_fetch_allow":[],"network_allow":[],"after_task":"exit"}` + "\n"},
	} {
		got, err := MarshalGrants(tc.g)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", tc.name, got, err, tc.want)
		}
	}
}
