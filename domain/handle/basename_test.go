package handle

import (
	"strings"
	"testing"
)

func TestSanitisedBasename(t *testing.T) {
	tests := []struct {
		name    string
		p       string
		hasHint bool
		want    string
	}{
		{"a plain name", "report.md", true, "report.md"},
		{"the text after the last slash", "sub/dir/report.md", true, "report.md"},
		{"traversal keeps only the last component", "../../etc/passwd", true, "passwd"},
		{"dot-dot alone", "..", true, "file"},
		{"dot alone", ".", true, "file"},
		{"dot-dot after a slash", "a/..", true, "file"},
		{"empty", "", true, "file"},
		{"a trailing slash leaves nothing", "dir/", true, "file"},
		{"no hint", "report.md", false, "file"},
		{"shell metacharacters and spaces", "a b;rm -rf.md", true, "a_b_rm_-rf.md"},
		{"backslashes are not separators", `..\..\win.ini`, true, ".._.._win.ini"},
		{"one underscore per code point", "résumé 文件.pdf", true, "r_sum____.pdf"},
		{"a decomposed accent is two code points", "e\u0301.txt", true, "e_.txt"},
		{"an emoji is one code point", "😀.md", true, "_.md"},
		{"control characters", "a\x00b\nc", true, "a_b_c"},
		{"each invalid byte is one character", "a\xff\xfeb", true, "a__b"},
		{"three dots stay", "...", true, "..."},
		{"dots that sanitise to dot-dot", "..", true, "file"},
		{"underscores from non-ASCII are kept", "é", true, "_"},
		{"hidden file", ".env", true, ".env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SanitisedBasename(tt.p, tt.hasHint); got != tt.want {
				t.Fatalf("SanitisedBasename(%q, %v) = %q, want %q", tt.p, tt.hasHint, got, tt.want)
			}
		})
	}
}

func TestSanitisedBasenameKeepsTheFirst120Characters(t *testing.T) {
	long := strings.Repeat("abcdefghij", 20) // 200 characters
	if got := SanitisedBasename("dir/"+long, true); got != long[:120] {
		t.Fatalf("got %d characters %q, want the first 120", len(got), got)
	}
	wide := strings.Repeat("文", 200) // 600 bytes, 200 code points
	if got := SanitisedBasename(wide, true); got != strings.Repeat("_", 120) {
		t.Fatalf("got %q, want 120 underscores", got)
	}
	exact := strings.Repeat("x", 120)
	if got := SanitisedBasename(exact, true); got != exact {
		t.Fatalf("a 120-character name was changed to %q", got)
	}
}
