package handle

import (
	"strings"
	"testing"
)

func TestID(t *testing.T) {
	tests := map[string]string{
		// sha256("") = e3b0c44298fc1c149afbf4c8996fb924…
		"": "e3b0c44298fc1c14",
		// computed with python3 (see TestMintMatchesIndependentComputation) and sha256sum.
		validToken: "55b7fa43aa4a7e0b",
	}
	for token, want := range tests {
		if got := ID(token); got != want {
			t.Errorf("ID(%q) = %s, want %s", token, got, want)
		}
	}
	if got := Placeholder(validToken); got != "<handle:55b7fa43aa4a7e0b>" {
		t.Errorf("Placeholder = %s", got)
	}
}

func TestRedact(t *testing.T) {
	ph := Placeholder
	tests := []struct{ name, in, want string }{
		{"no token", "nothing to see", "nothing to see"},
		{"empty", "", ""},
		{"the token alone", validToken, ph(validToken)},
		{"a token in a sentence keeps its full stop", "send " + validToken + ". done", "send " + ph(validToken) + ". done"},
		{"a token inside JSON", `{"handle":"` + validToken + `"}`, `{"handle":"` + ph(validToken) + `"}`},
		{"two tokens", "mh1.a.b and mh1.c-d.e_f", ph("mh1.a.b") + " and " + ph("mh1.c-d.e_f")},
		{"adjacent tokens", "mh1.a.b,mh1.c.d", ph("mh1.a.b") + "," + ph("mh1.c.d")},
		{"a file name that merely looks like a token", "wrote mh1.report.md", "wrote " + ph("mh1.report.md")},
		{"a path ending in a token-like name", "out/mh1.x.y/z", "out/" + ph("mh1.x.y") + "/z"},
		{"glued to a preceding word", "xmh1.a.b", "x" + ph("mh1.a.b")},
		{"a third segment is part of the run", "mh1.a.b.c", ph("mh1.a.b.c")},
		{"a nested tag is part of the run", "mh1.mh1.a.b", ph("mh1.mh1.a.b")},
		{"a token wrapped in mh1.x. leaves none of its segments", "mh1.x." + validToken, ph("mh1.x." + validToken)},
		{"a token after mh1.x. in a path", "/resources/files/mh1.x." + validToken + "?q", "/resources/files/" + ph("mh1.x."+validToken) + "?q"},
		{"padding stops a segment", "mh1.ab.cd==", ph("mh1.ab.cd") + "=="},
		{"one segment is a run too", "mh1.abc", ph("mh1.abc")},
		{"full stops that end the run are kept", "mh1.abc..", ph("mh1.abc") + ".."},
		{"an empty first segment is part of the run", "mh1..abc", ph("mh1..abc")},
		{"a character no token holds ends the run", "mh1.a=.b", ph("mh1.a") + "=.b"},
		{"the prefix alone", "mh1.", "mh1."},
		{"the prefix and full stops only", "mh1...", "mh1..."},
		{"another version tag", "mh2.a.b", "mh2.a.b"},
		{"upper-case tag", "MH1.a.b", "MH1.a.b"},
		{"a one-word run then a token", "mh1.x mh1.a.b", ph("mh1.x") + " " + ph("mh1.a.b")},
		{"non-ASCII around a token", "é" + validToken + "文", "é" + ph(validToken) + "文"},
		{"invalid UTF-8 kept", "\xff mh1.a.b \xfe", "\xff " + ph("mh1.a.b") + " \xfe"},
		{"a newline ends a segment", "mh1.a.b\nmh1.c.d", ph("mh1.a.b") + "\n" + ph("mh1.c.d")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Redact(tt.in); got != tt.want {
				t.Fatalf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactWithoutTokenDoesNotAllocate(t *testing.T) {
	line := strings.Repeat(`{"event_type":"resource_read","path":"out/mh1-report.md","outcome":"ok"}`, 10)
	allocs := testing.AllocsPerRun(100, func() {
		if Redact(line) != line {
			t.Fatal("changed a line without a token")
		}
	})
	if allocs != 0 {
		t.Fatalf("Redact allocated %v times on a line without a token", allocs)
	}
}

func BenchmarkRedactNoToken(b *testing.B) {
	line := strings.Repeat(`{"event_type":"resource_read","path":"out/report.md","outcome":"ok"}`, 4)
	for b.Loop() {
		Redact(line)
	}
}

func BenchmarkRedactOneToken(b *testing.B) {
	line := `{"event_type":"tool_call","args":{"handle":"` + validToken + `","peer":"localhost:41234"}}`
	for b.Loop() {
		Redact(line)
	}
}
