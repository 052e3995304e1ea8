package destination

import (
	"strings"
	"testing"
)

func TestParseAcceptsTheThreeForms(t *testing.T) {
	for _, s := range []string{
		"localhost",
		"LocalHost:41234",
		"127.0.0.1:8080",
		"peer_1.internal",
		"[::1]",
		"[::1]:8080",
		"[FE80::1]:443",
		"http://localhost",
		"http://localhost/",
		"https://example.com:8443",
		"HTTPS://example.com",
		"http://[::1]:8080/",
		"localhost:080",
	} {
		d, err := Parse(s)
		if err != nil {
			t.Errorf("Parse(%q): %v", s, err)
			continue
		}
		if d.String() != s {
			t.Errorf("Parse(%q).String() = %q, want the entry as written", s, d.String())
		}
	}
}

func TestParseRefusesWhatIsNotADestination(t *testing.T) {
	for _, tc := range []struct {
		name, in, reason string
	}{
		{"empty", "", "is empty"},
		{"whitespace inside", "local host", "whitespace"},
		{"leading whitespace", " localhost", "whitespace"},
		{"trailing newline", "localhost\n", "whitespace"},
		{"tab in URL", "http://localhost\t", "whitespace"},
		{"wildcard host", "*.example.com", "wildcard"},
		{"wildcard alone", "*", "wildcard"},
		{"URL with path", "http://localhost/api", "path"},
		{"URL with query", "http://localhost/?a=1", "query"},
		{"URL with empty query", "http://localhost?", "query"},
		{"URL with fragment", "http://localhost#x", "fragment"},
		{"URL with userinfo", "http://user@localhost", "userinfo"},
		{"URL with user and password", "https://u:p@localhost:8443", "userinfo"},
		{"URL with empty port", "http://localhost:", "empty port"},
		{"token with empty port", "localhost:", "empty port"},
		{"port zero", "localhost:0", "outside 1..65535"},
		{"port too large", "localhost:65536", "outside 1..65535"},
		{"port not a number", "localhost:http", "not a number"},
		{"signed port", "localhost:+80", "not a number"},
		{"other scheme", "ftp://localhost", "scheme other than http or https"},
		{"scheme without host", "http://", "no host"},
		{"port without host", ":8080", "no host"},
		{"token with slash", "localhost/x", `"/" but no scheme`},
		{"non-ASCII host", "bücher.example", "non-ASCII"},
		{"non-ASCII URL host", "http://bücher.example", "non-ASCII"},
		{"unbracketed IPv6", "::1", "without brackets"},
		{"unbracketed IPv6 with port", "fe80::1:8080", "without brackets"},
		{"unclosed bracket", "[::1", "unclosed"},
		{"IPv4 in brackets", "[127.0.0.1]", "not an IPv6 address"},
		{"zoned IPv6", "[fe80::1%eth0]", "not an IPv6 address"},
		{"text after bracket", "[::1]x", `after "]"`},
		{"percent in host", "local%41host", "character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse(%q) accepted a non-destination", tc.in)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Parse(%q) = %q, want the reason to mention %q", tc.in, err, tc.reason)
			}
		})
	}
}

func TestParsePeerReadsURLsAndBareAddresses(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Peer
		base string
	}{
		{"localhost:41234", Peer{"http", "localhost", 41234}, "http://localhost:41234"},
		{"localhost", Peer{"http", "localhost", 80}, "http://localhost:80"},
		{"https://Example.COM", Peer{"https", "example.com", 443}, "https://example.com:443"},
		{"http://peer:9000/some/path?q=1#f", Peer{"http", "peer", 9000}, "http://peer:9000"},
		{"localhost:41234/ignored", Peer{"http", "localhost", 41234}, "http://localhost:41234"},
		{"[::1]:8080", Peer{"http", "::1", 8080}, "http://[::1]:8080"},
		{"https://[FE80::A]", Peer{"https", "fe80::a", 443}, "https://[fe80::a]:443"},
	} {
		got, err := ParsePeer(tc.in)
		if err != nil {
			t.Errorf("ParsePeer(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParsePeer(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if got.BaseURL() != tc.base {
			t.Errorf("ParsePeer(%q).BaseURL() = %q, want %q", tc.in, got.BaseURL(), tc.base)
		}
	}
}

func TestParsePeerRefusesWhatCannotBeReached(t *testing.T) {
	for _, in := range []string{
		"", "ftp://peer", "unix:///tmp/sock", "peer:0", "peer:", "user@peer:80", "::1", "pe er",
		"*", "http://", "bücher:80",
	} {
		if p, err := ParsePeer(in); err == nil {
			t.Errorf("ParsePeer(%q) = %+v, want a refusal", in, p)
		}
	}
}

func TestMatchesPinsWhatEachFormPins(t *testing.T) {
	for _, tc := range []struct {
		entry, peer string
		want        bool
	}{
		// The example of docs/manifest.md, "Destinations": peer localhost:41234.
		{"localhost", "localhost:41234", true},
		{"localhost:41234", "localhost:41234", true},
		{"http://localhost:41234", "localhost:41234", true},
		{"https://localhost:41234", "localhost:41234", false},
		// A bare host matches any scheme and any port.
		{"localhost", "https://localhost:9", true},
		{"localhost", "otherhost:41234", false},
		// host:port matches any scheme on that port.
		{"localhost:443", "https://localhost", true},
		{"localhost:41234", "https://localhost:41234", true},
		{"localhost:41234", "localhost:41235", false},
		{"localhost:80", "localhost", true},
		// A URL entry pins its scheme and its port, explicit or default.
		{"http://localhost", "localhost", true},
		{"http://localhost", "localhost:8080", false},
		{"https://localhost/", "https://localhost:443", true},
		{"https://localhost", "http://localhost:443", false},
		// Hosts compare after ASCII-lowercasing, literally: no resolution, no IP canonicalisation.
		{"LOCALHOST", "localhost:1", true},
		{"localhost", "LocalHost:1", true},
		{"127.0.0.1", "localhost:1", false},
		{"[::1]", "[::1]:8080", true},
		{"[::1]:8080", "http://[::1]:8080/x", true},
		{"[FE80::A]", "[fe80::a]:1", true},
		{"[::1]", "[0:0:0:0:0:0:0:1]:1", false},
	} {
		d, err := Parse(tc.entry)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.entry, err)
		}
		p, err := ParsePeer(tc.peer)
		if err != nil {
			t.Fatalf("ParsePeer(%q): %v", tc.peer, err)
		}
		if got := Matches(d, p); got != tc.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", tc.entry, tc.peer, got, tc.want)
		}
	}
}

func TestZeroDestinationMatchesNothing(t *testing.T) {
	if Matches(Destination{}, Peer{Scheme: "http", Host: "", Port: 80}) {
		t.Fatal("the zero Destination matched a peer")
	}
}

func TestAnyMatchesChecksEveryEntry(t *testing.T) {
	var allow []Destination
	for _, s := range []string{"a.example", "b.example:9000"} {
		d, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		allow = append(allow, d)
	}
	for peer, want := range map[string]bool{
		"a.example:1":    true,
		"b.example:9000": true,
		"b.example:9001": false,
		"c.example":      false,
	} {
		p, err := ParsePeer(peer)
		if err != nil {
			t.Fatal(err)
		}
		if got := AnyMatches(allow, p); got != want {
			t.Errorf("AnyMatches(%q) = %v, want %v", peer, got, want)
		}
	}
	p, _ := ParsePeer("a.example")
	if AnyMatches(nil, p) {
		t.Error("an empty allow-list admitted a peer")
	}
}
