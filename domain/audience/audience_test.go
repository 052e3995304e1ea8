package audience

import (
	"testing"

	"github.com/resplane/resplane/domain/refusal"
)

func TestFromCard(t *testing.T) {
	tests := []struct {
		name, cardName, url, want string
	}{
		{"the brief's example", "reporter", "http://localhost:41234", "reporter@localhost:41234"},
		{"a trailing slash is cut", "reporter", "http://localhost:41234/", "reporter@localhost:41234"},
		{"a path is cut", "reporter", "http://localhost:41234/a2a/v1?x=1", "reporter@localhost:41234"},
		{"https", "reporter", "https://peer.example.com:8443/", "reporter@peer.example.com:8443"},
		{"no port: none is added", "reporter", "https://peer.example.com", "reporter@peer.example.com"},
		{"no port, no default for http either", "reporter", "http://peer.example.com/x", "reporter@peer.example.com"},
		{"IPv6 brackets and port stay", "reporter", "http://[::1]:41234/", "reporter@[::1]:41234"},
		{"IPv6 without a port", "reporter", "http://[2001:DB8::1]", "reporter@[2001:db8::1]"},
		{"upper case is lowered", "Reporter-Bot", "http://LocalHost:41234", "reporter-bot@localhost:41234"},
		{"the name is trimmed", "  reporter \t", "http://localhost:1", "reporter@localhost:1"},
		{"no scheme: kept verbatim up to the first slash", "reporter", "localhost:41234/x", "reporter@localhost:41234"},
		{"only one scheme prefix is removed", "r", "http://http://h:1", "r@http:"},
		{"the scheme is matched case-sensitively", "r", "HTTP://h:1/", "r@http:"},
		{"another scheme is not removed", "r", "ftp://h:1/", "r@ftp:"},
		{"userinfo, query and fragment are kept verbatim", "r", "http://u@h:1?q#f", "r@u@h:1?q#f"},
		{"the url is not trimmed", "r", " http://h:1", "r@ http:"},
		{"non-ASCII is lowered as Rust's to_lowercase", "ÄRZTE", "http://h:1", "ärzte@h:1"},
		{"final sigma before the @", "ΟΔΥΣΣΕΥΣ", "http://h:1", "οδυσσευς@h:1"},
		{"sigma followed by a case-ignorable dot then a letter", "ΑΣ.Β", "http://h:1", "ασ.β@h:1"},
		{"sigma alone is not final", "Σ", "http://h:1", "σ@h:1"},
		{"dotted capital I", "İZMİR", "http://h:1", "i\u0307zmi\u0307r@h:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromCard(tt.cardName, tt.url)
			if err != nil || got != tt.want {
				t.Fatalf("FromCard(%q, %q) = %q, %v; want %q", tt.cardName, tt.url, got, err, tt.want)
			}
		})
	}
}

func TestFromCardRefuses(t *testing.T) {
	tests := []struct{ name, cardName, url string }{
		{"empty name", "", "http://localhost:1"},
		{"blank name", " \t\n", "http://localhost:1"},
		{"empty url", "reporter", ""},
		{"blank url", "reporter", "   "},
		{"scheme only", "reporter", "http://"},
		{"https scheme only", "reporter", "https://"},
		{"empty host before a path", "reporter", "https:///x"},
		{"a path only", "reporter", "/a2a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromCard(tt.cardName, tt.url)
			if !refusal.Is(err, refusal.PeerUnreachable) || got != "" {
				t.Fatalf("FromCard(%q, %q) = %q, %v; want a peer_unreachable refusal", tt.cardName, tt.url, got, err)
			}
		})
	}
}

// TestLowercaseMatchesRust pins lowercase against Rust's str::to_lowercase; the expected
// values were computed with python3 3.11's str.lower, which implements the same full Unicode
// mapping and Final_Sigma rule. (The property tables were also compared with python3 for
// every code point assigned in Unicode 14: they agree on all of them.)
func TestLowercaseMatchesRust(t *testing.T) {
	tests := map[string]string{
		"ΟΔΥΣΣΕΥΣ@HOST:1": "οδυσσευς@host:1",
		"ΑΣ.":             "ας.",
		"ΑΣ\u0301":        "ας\u0301",
		"ΑΣ\u0301Β":       "ασ\u0301β",
		"A\u0301Σ":        "a\u0301ς",
		"Α'Σ":             "α'ς",
		"1Σ":              "1σ",
		"ΑΣ:B":            "ασ:b",
		"İstanbul":        "i\u0307stanbul",
		"ǅ":               "ǆ",
		"ΑΣΑ":             "ασα",
		"ΣΑ":              "σα",
		"":                "",
	}
	for in, want := range tests {
		if got := lowercase(in); got != want {
			t.Errorf("lowercase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAssertedTrimsAndLowercasesASCIIOnly(t *testing.T) {
	cases := map[string]string{
		"  Reporter@LOCALHOST:41234 ": "reporter@localhost:41234",
		"\treporter@[::1]:8080\r":     "reporter@[::1]:8080",
		"ÉQUIPE@host:1":               "Équipe@host:1",
		"":                            "",
		"   ":                         "",
	}
	for in, want := range cases {
		if got := Asserted(in); got != want {
			t.Errorf("Asserted(%q) = %q; want %q", in, got, want)
		}
	}
}
