package containment

import "testing"

func TestOnlyAdvisoryAndSealedFollowSymlinks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		class Class
		want  bool
	}{
		{"advisory follows, staying beneath the root", Advisory, true},
		{"sealed follows, staying beneath the root", Sealed, true},
		{"scoped refuses every symlink", Scoped, false},
		{"the zero class fails closed", Class(""), false},
		{"an unknown class fails closed", Class("open"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.class.FollowsSymlinks(); got != tc.want {
				t.Errorf("Class(%q).FollowsSymlinks() = %v; want %v", tc.class, got, tc.want)
			}
		})
	}
}

func TestParseAcceptsExactlyTheThreeClassNames(t *testing.T) {
	for _, s := range []string{"advisory", "scoped", "sealed"} {
		if c, err := Parse(s); err != nil || c.String() != s {
			t.Errorf("Parse(%q) = %q, %v", s, c, err)
		}
	}
	for _, s := range []string{"", "Sealed", " scoped", "open"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted a value that is not a class", s)
		}
	}
}
