package landlock

import (
	"slices"
	"testing"
)

func TestBeneathComparesCleanedTexts(t *testing.T) {
	const wd = "/srv/wd"
	for _, tc := range []struct {
		name, dir string
		wantRel   string
		wantOK    bool
	}{
		{"a subdirectory is beneath", "/srv/wd/peer-in", "peer-in", true},
		{"a deeper directory is beneath", "/srv/wd/.murmur/ses_1", ".murmur/ses_1", true},
		{"the workdir itself counts as beneath", "/srv/wd", ".", true},
		{"a trailing slash is cleaned", "/srv/wd/peer-in/", "peer-in", true},
		{"a sibling sharing the prefix is not beneath", "/srv/wd2/x", "", false},
		{"the parent is not beneath", "/srv", "", false},
		{"dot-dot back out is not beneath", "/srv/wd/../spool", "", false},
		{"dot-dot that stays inside is beneath", "/srv/wd/a/../b", "b", true},
		{"a name starting with dots is beneath", "/srv/wd/..hidden", "..hidden", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel, ok := beneath(wd, tc.dir)
			if rel != tc.wantRel || ok != tc.wantOK {
				t.Fatalf("beneath(%q, %q) = %q, %v; want %q, %v", wd, tc.dir, rel, ok, tc.wantRel, tc.wantOK)
			}
		})
	}
}

func TestExposingNamesTheWritableDirectoriesHoldingTheWorkdir(t *testing.T) {
	p := Policy{Workdir: "/srv/box/wd", Writable: []string{
		"/srv/box/wd/peer-in", // beneath: fine
		"/srv/box",            // holds the workdir
		"/srv/box/wd",         // is the workdir
		"/srv/spool",          // elsewhere: fine
		"/srv/box/wd2",        // a sibling sharing the prefix: fine
	}}
	got := p.Exposing()
	if want := []string{"/srv/box", "/srv/box/wd"}; !slices.Equal(got, want) {
		t.Fatalf("Exposing() = %q, want %q", got, want)
	}
}
