// Package destination is the one parser and the one matcher behind both outbound allow-lists,
// capabilities.network.allow and capabilities.peer_fetch.allow (docs/manifest.md,
// "Destinations").
//
// A Destination is an allow-list entry; a Peer is the address an agent gives a tool. Both are
// parsed strictly and refused rather than repaired: whitespace anywhere, wildcards, userinfo,
// empty ports, non-ASCII hosts and unbracketed IPv6 addresses never parse. Hosts are compared
// literally after ASCII-lowercasing, with IPv6 brackets stripped; no name is resolved.
package destination

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
)

// form says what an allow-list entry pins besides the host.
type form int

const (
	// anyPort is a bare host: any scheme, any port.
	anyPort form = iota
	// onePort is host:port: any scheme on that port.
	onePort
	// schemeAndPort is a URL: its scheme, and its port (explicit or the scheme's default).
	schemeAndPort
)

// Destination is one parsed allow-list entry. The zero value matches nothing; the only way to
// obtain a useful one is Parse.
type Destination struct {
	text   string
	form   form
	scheme string
	host   string
	port   int
}

// Parse reads an allow-list entry: a URL "http(s)://host[:port]" with no path other than "/",
// no query and no fragment, or a token "host" or "host:port" with no "/". IPv6 hosts are
// bracketed; ports are 1..65535. The error says why the entry is not a destination, as a
// phrase that completes "the entry ...".
func Parse(s string) (Destination, error) {
	if err := checkText(s); err != nil {
		return Destination{}, err
	}
	if strings.Contains(s, "://") {
		a, tail, err := splitURL(s)
		if err != nil {
			return Destination{}, err
		}
		switch {
		case strings.Contains(tail, "?"):
			return Destination{}, errors.New("has a query; a destination URL has none, not even an empty one")
		case strings.Contains(tail, "#"):
			return Destination{}, errors.New("has a fragment; a destination URL has none")
		case tail != "" && tail != "/":
			return Destination{}, errors.New(`has a path; a destination URL has no path other than "/"`)
		}
		return Destination{text: s, form: schemeAndPort, scheme: a.scheme, host: a.host, port: a.port}, nil
	}
	if strings.Contains(s, "/") {
		return Destination{}, errors.New(`has a "/" but no scheme; write host, host:port or http(s)://host[:port]`)
	}
	host, port, hasPort, err := splitHostPort(s)
	if err != nil {
		return Destination{}, err
	}
	if hasPort {
		return Destination{text: s, form: onePort, host: host, port: port}, nil
	}
	return Destination{text: s, form: anyPort, host: host}, nil
}

// String returns the entry exactly as it was written.
func (d Destination) String() string { return d.text }

// Peer is the address of a peer capsule as an agent gave it to a tool, reduced to what a
// request is sent to: the path of a peer URL is ignored.
type Peer struct {
	// Scheme is "http" or "https".
	Scheme string
	// Host is ASCII-lowercased, IPv6 brackets stripped.
	Host string
	// Port is the explicit port, or 80/443 by scheme.
	Port int
}

// ParsePeer reads a peer string: a URL when it contains "://", else "http://" + s. The scheme
// must be http or https; the host follows the destination rules; a missing port is the scheme's
// default. Anything after the host and port (path, query, fragment) is ignored.
func ParsePeer(s string) (Peer, error) {
	if err := checkText(s); err != nil {
		return Peer{}, err
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	a, _, err := splitURL(s)
	if err != nil {
		return Peer{}, err
	}
	return Peer{Scheme: a.scheme, Host: a.host, Port: a.port}, nil
}

// BaseURL returns "scheme://host:port", with brackets around an IPv6 host.
func (p Peer) BaseURL() string {
	host := p.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return p.Scheme + "://" + host + ":" + strconv.Itoa(p.Port)
}

// Matches reports whether the allow-list entry d admits peer p: the hosts are equal, and
// a URL entry's scheme and port, or a host:port entry's port, are the peer's.
func Matches(d Destination, p Peer) bool {
	if d.host == "" || d.host != p.Host {
		return false
	}
	switch d.form {
	case schemeAndPort:
		return d.scheme == p.Scheme && d.port == p.Port
	case onePort:
		return d.port == p.Port
	default:
		return true
	}
}

// AnyMatches reports whether some entry of allow admits p. An empty list admits nothing.
func AnyMatches(allow []Destination, p Peer) bool {
	for _, d := range allow {
		if Matches(d, p) {
			return true
		}
	}
	return false
}

// checkText refuses what no destination or peer may contain anywhere.
func checkText(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case strings.IndexFunc(s, unicode.IsSpace) >= 0:
		return errors.New("contains whitespace")
	case strings.Contains(s, "*"):
		return errors.New("contains a wildcard; list each host explicitly")
	}
	return nil
}

// authority is the scheme, host and effective port of a URL.
type authority struct {
	scheme string
	host   string
	port   int
}

// splitURL reads "scheme://host[:port]" and returns what follows the authority (path, query,
// fragment) untouched.
func splitURL(s string) (authority, string, error) {
	scheme, rest, _ := strings.Cut(s, "://")
	scheme = strings.ToLower(scheme)
	var defaultPort int
	switch scheme {
	case "http":
		defaultPort = 80
	case "https":
		defaultPort = 443
	default:
		return authority{}, "", errors.New("has a scheme other than http or https")
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	hostport, tail := rest[:end], rest[end:]
	if strings.Contains(hostport, "@") {
		return authority{}, "", errors.New("has userinfo (user@); a destination carries no credentials")
	}
	host, port, hasPort, err := splitHostPort(hostport)
	if err != nil {
		return authority{}, "", err
	}
	if !hasPort {
		port = defaultPort
	}
	return authority{scheme: scheme, host: host, port: port}, tail, nil
}

// splitHostPort reads "host", "host:port", "[v6]" or "[v6]:port". The host comes back
// lowercased without brackets.
func splitHostPort(s string) (host string, port int, hasPort bool, err error) {
	var portText string
	if strings.HasPrefix(s, "[") {
		inner, rest, closed := strings.Cut(s[1:], "]")
		if !closed {
			return "", 0, false, errors.New(`has an unclosed "["`)
		}
		if addr, perr := netip.ParseAddr(inner); perr != nil || !addr.Is6() || addr.Zone() != "" {
			return "", 0, false, fmt.Errorf("has %q in brackets, which is not an IPv6 address", inner)
		}
		host = strings.ToLower(inner)
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return "", 0, false, errors.New(`has text after "]" that is not ":port"`)
			}
			portText, hasPort = rest[1:], true
		}
	} else {
		if strings.Count(s, ":") > 1 {
			return "", 0, false, errors.New("has an IPv6 address without brackets; write [addr] or [addr]:port")
		}
		host, portText, hasPort = strings.Cut(s, ":")
		if err := checkHostName(host); err != nil {
			return "", 0, false, err
		}
		host = strings.ToLower(host)
	}
	if !hasPort {
		return host, 0, false, nil
	}
	port, err = parsePort(portText)
	return host, port, true, err
}

// checkHostName accepts an ASCII host name or IPv4 address: letters, digits, '-', '.', '_'.
func checkHostName(h string) error {
	if h == "" {
		return errors.New("has no host")
	}
	for _, r := range h {
		switch {
		case r > unicode.MaxASCII:
			return errors.New("has a non-ASCII host; write its ASCII (xn--) form")
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
		default:
			return fmt.Errorf("has the character %q in its host", r)
		}
	}
	return nil
}

// parsePort accepts decimal digits naming a port from 1 to 65535.
func parsePort(s string) (int, error) {
	if s == "" {
		return 0, errors.New(`has an empty port after ":"`)
	}
	if strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("has the port %q, which is not a number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("has the port %s, outside 1..65535", s)
	}
	return n, nil
}
