package pathpolicy_test

import (
	"reflect"
	"testing"

	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
)

func TestParseLowersARequestPath(t *testing.T) {
	cases := []struct {
		rule string
		raw  string
		want []string // nil: refused outside_root
	}{
		{"a plain name is one component", "report.md", []string{"report.md"}},
		{"slashes separate components", "dir/sub/report.md", []string{"dir", "sub", "report.md"}},
		{"one trailing slash is dropped", "dir/report.md/", []string{"dir", "report.md"}},
		{"two trailing slashes leave an empty component", "x//", nil},
		{"an empty path is refused", "", nil},
		{"a lone slash is absolute", "/", nil},
		{"an absolute path is refused", "/etc/passwd", nil},
		{"an encoded leading slash is absolute", "%2Fetc%2Fpasswd", nil},
		{"an empty component is refused", "a//b", nil},
		{"a dot component is refused", "./x", nil},
		{"an inner dot component is refused", "a/./b", nil},
		{"a dot-dot component is refused", "a/../b", nil},
		{"a bare dot-dot is refused", "..", nil},
		{"an encoded dot-dot is refused", "%2e%2e/secret.md", nil},
		{"an upper-case encoded dot-dot is refused", "%2E%2E%2Fsecret.md", nil},
		{"%2F decodes to a separator", "dir%2Freport.md", []string{"dir", "report.md"}},
		{"%2f decodes to a separator too", "dir%2freport.md", []string{"dir", "report.md"}},
		{"%2F can build a traversal and is refused", "a%2F..%2Fb", nil},
		{"decoding happens once: %252e stays literal", "%252e%252e", []string{"%2e%2e"}},
		{"an invalid escape is kept literally", "%zz", []string{"%zz"}},
		{"a trailing lone percent is kept", "100%", []string{"100%"}},
		{"a percent with one hex digit is kept", "a%4", []string{"a%4"}},
		{"an escape in the middle decodes", "a%41b", []string{"aAb"}},
		{"a NUL byte is refused", "a%00b", nil},
		{"a raw NUL byte is refused", "a\x00b", nil},
		{"invalid UTF-8 is refused", "a%ffb", nil},
		{"valid encoded UTF-8 is accepted", "caf%C3%A9.txt", []string{"café.txt"}},
		{"a backslash is an ordinary character", `a\..\b`, []string{`a\..\b`}},
		{"an encoded backslash is an ordinary character", "..%5c..%5cetc", []string{`..\..\etc`}},
		{"three dots is an ordinary name", "...", []string{"..."}},
		{"a dotfile is an ordinary name", ".env", []string{".env"}},
		{"spaces are ordinary", "my%20file.txt", []string{"my file.txt"}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := pathpolicy.Parse(tc.raw)
			if tc.want == nil {
				if !refusal.Is(err, refusal.OutsideRoot) {
					t.Fatalf("Parse(%q) = %v, %v; want outside_root", tc.raw, got.Components(), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q) refused: %v", tc.raw, err)
			}
			if !reflect.DeepEqual(got.Components(), tc.want) {
				t.Fatalf("Parse(%q) = %q; want %q", tc.raw, got.Components(), tc.want)
			}
		})
	}
}

func TestLowerNeverDecodes(t *testing.T) {
	got, err := pathpolicy.Lower("a%41.txt")
	if err != nil || got.String() != "a%41.txt" {
		t.Fatalf("Lower(a%%41.txt) = %q, %v; want the literal a%%41.txt", got.String(), err)
	}
	if _, err := pathpolicy.Lower("a/../b"); !refusal.Is(err, refusal.OutsideRoot) {
		t.Fatalf("Lower(a/../b) = %v; want outside_root", err)
	}
}

func TestDecodeOnceKeepsWhatIsNotAnEscape(t *testing.T) {
	cases := map[string]string{
		"":          "",
		"plain":     "plain",
		"%":         "%",
		"%%":        "%%",
		"%%41":      "%A",
		"%4":        "%4",
		"%41%42":    "AB",
		"%g1":       "%g1",
		"dir%2F":    "dir/",
		"%25":       "%",
		"%2525":     "%25",
		"%c3%a9":    "é",
		"trailing%": "trailing%",
	}
	for raw, want := range cases {
		if got := pathpolicy.DecodeOnce(raw); got != want {
			t.Errorf("DecodeOnce(%q) = %q; want %q", raw, got, want)
		}
	}
}

func TestStringJoinsCanonicalComponents(t *testing.T) {
	p, err := pathpolicy.Parse("dir%2Fsub/file.txt/")
	if err != nil {
		t.Fatal(err)
	}
	if p.String() != "dir/sub/file.txt" {
		t.Fatalf("String() = %q", p.String())
	}
}

func FuzzParseNeverYieldsATraversal(f *testing.F) {
	for _, seed := range []string{"a/b", "%2e%2e", "a%2F..%2Fb", "%zz", "x//", "/etc", "a\x00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := pathpolicy.Parse(raw)
		if err != nil {
			return
		}
		for _, c := range p.Components() {
			if c == "" || c == "." || c == ".." {
				t.Fatalf("Parse(%q) yielded component %q", raw, c)
			}
			for i := 0; i < len(c); i++ {
				if c[i] == '/' || c[i] == 0 {
					t.Fatalf("Parse(%q) yielded component %q with a separator or NUL", raw, c)
				}
			}
		}
	})
}
