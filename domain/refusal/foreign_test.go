package refusal_test

import (
	"strings"
	"testing"

	"github.com/resplane/resplane/domain/refusal"
)

func TestAForeignCodeIsKeptOnlyWhenPlausible(t *testing.T) {
	for _, tc := range []struct {
		rule   string
		status int
		code   string
		want   refusal.Code
	}{
		{"a plausible code is kept", 404, "not_found", "not_found"},
		{"a code of another party's own is kept", 409, "peer.busy-2", "peer.busy-2"},
		{"no code is http_<status>", 500, "", "http_500"},
		{"a code with other characters is http_<status>", 500, "bad code\x1b[31m", "http_500"},
		{"a code longer than 64 characters is http_<status>", 400, strings.Repeat("a", 65), "http_400"},
		{"a code of 64 characters is kept", 400, strings.Repeat("a", 64), refusal.Code(strings.Repeat("a", 64))},
		{"a redirect is http_<status> whatever its body says", 302, "moved", "http_302"},
		{"a refusal coded ok is http_<status>", 404, "ok", "http_404"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := refusal.Foreign(tc.status, tc.code); got != tc.want {
				t.Fatalf("Foreign(%d, %q) = %q, want %q", tc.status, tc.code, got, tc.want)
			}
		})
	}
}
