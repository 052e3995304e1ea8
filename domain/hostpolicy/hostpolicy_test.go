package hostpolicy_test

import (
	"testing"

	"github.com/resplane/resplane/domain/hostpolicy"
)

func TestAllowsOnlyIPLiteralsLocalhostAndTheGivenNames(t *testing.T) {
	policy := hostpolicy.New("Capsule.Example", "peer-1.internal")
	cases := []struct {
		rule string
		host string
		want bool
	}{
		{"an IPv4 literal is accepted", "127.0.0.1", true},
		{"an IPv4 literal with a port is accepted", "127.0.0.1:8080", true},
		{"any IPv4 literal is accepted, not only loopback", "192.0.2.7:80", true},
		{"a bracketed IPv6 literal is accepted", "[::1]", true},
		{"a bracketed IPv6 literal with a port is accepted", "[::1]:8080", true},
		{"an unbracketed IPv6 literal is still an IP literal", "::1", true},
		{"localhost is accepted", "localhost", true},
		{"localhost with a port is accepted", "localhost:41234", true},
		{"localhost compares case-insensitively", "LocalHost:1", true},
		{"a given name is accepted", "capsule.example", true},
		{"a given name compares case-insensitively", "CAPSULE.EXAMPLE:443", true},
		{"a second given name is accepted", "peer-1.internal:9", true},
		{"a missing Host (HTTP/1.0) is accepted", "", true},
		{"any other name is refused", "attacker.example", false},
		{"any other name with a port is refused", "attacker.example:8080", false},
		{"a subdomain of a given name is refused", "x.capsule.example", false},
		{"a given name with a trailing dot is refused", "capsule.example.", false},
		{"localhost with a trailing dot is refused", "localhost.", false},
		{"a subdomain of localhost is refused", "evil.localhost", false},
		{"a shortened IPv4 form is a name, and refused", "127.1", false},
		{"a hex IPv4 form is a name, and refused", "0x7f000001", false},
		{"an IPv4 literal in brackets is refused", "[127.0.0.1]", false},
		{"a name in brackets is refused", "[localhost]", false},
		{"unclosed brackets are refused", "[::1", false},
		{"brackets followed by anything but a port are refused", "[::1]x", false},
		{"a port without a name is refused", ":80", false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			if got := policy.Allows(tc.host); got != tc.want {
				t.Fatalf("Allows(%q) = %v; want %v", tc.host, got, tc.want)
			}
		})
	}
}

func TestTheZeroPolicyAcceptsOnlyIPLiteralsAndLocalhost(t *testing.T) {
	var zero hostpolicy.Policy
	for host, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "capsule.example": false} {
		if got := zero.Allows(host); got != want {
			t.Errorf("zero Policy: Allows(%q) = %v; want %v", host, got, want)
		}
	}
}
