// Package hostpolicy decides which Host header values the resource listener answers
// (docs/http-api.md, "Host names"). A page in a browser that has rebound a name it controls
// to the listener's address sends that name as its Host; answering only names the operator
// chose keeps such a page from reading the exports.
//
// A Host is accepted when, after its port is set aside, it is:
//
//   - an IP literal: IPv4 dotted-quad, or IPv6 in brackets (an IP address cannot be rebound);
//   - localhost;
//   - one of the names the Policy was built with (the advertise URL's host, --allowed-hosts);
//   - missing or empty: HTTP/1.0 allows a request without a Host, and no browser sends one.
//
// Names compare ASCII-case-insensitively and exactly: no wildcard, no trailing-dot folding.
package hostpolicy

import (
	"net/netip"
	"strings"
)

// Policy is the set of names a Host may carry besides IP literals and localhost. The zero
// Policy accepts only those.
type Policy struct {
	names map[string]bool
}

// localhost is always accepted: it resolves to a loopback address without DNS.
const localhost = "localhost"

// New returns the policy accepting names (case-insensitively) besides IP literals and
// localhost.
func New(names ...string) Policy {
	p := Policy{names: map[string]bool{}}
	for _, n := range names {
		p.names[strings.ToLower(n)] = true
	}
	return p
}

// Allows reports whether a request whose Host header is host is answered.
func (p Policy) Allows(host string) bool {
	if host == "" {
		return true
	}
	name, ok := hostname(host)
	if !ok || name == "" {
		return false
	}
	// localhost first: it is what local clients send, and failing to parse it as an address
	// would cost an error value per request.
	if strings.EqualFold(name, localhost) {
		return true
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	return p.names[strings.ToLower(name)]
}

// hostname returns host without its port: the address inside brackets for "[v6]" or
// "[v6]:port", else the text before a single ":". ok is false for a bracketed host that is
// not an IPv6 literal, or brackets followed by anything but a port.
func hostname(host string) (string, bool) {
	if rest, ok := strings.CutPrefix(host, "["); ok {
		addr, after, closed := strings.Cut(rest, "]")
		if !closed || (after != "" && !strings.HasPrefix(after, ":")) {
			return "", false
		}
		ip, err := netip.ParseAddr(addr)
		return addr, err == nil && ip.Is6()
	}
	if strings.Count(host, ":") == 1 {
		host, _, _ = strings.Cut(host, ":")
	}
	return host, true
}
