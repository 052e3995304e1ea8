package pathpolicy_test

import (
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
)

// FuzzParseDecodesOnceAndNeverRepairs pins docs/http-api.md, "Lowering a path", beyond the
// traversal check of FuzzParseNeverYieldsATraversal:
//
//   - DecodeOnce agrees with net/url's PathUnescape wherever that accepts the text (every
//     escape valid), never grows the text, and leaves text without "%" alone;
//   - Parse is Lower after DecodeOnce, and refuses only with outside_root;
//   - an accepted path is the decoded text itself, at most one trailing "/" dropped: nothing is
//     ever repaired into something servable;
//   - its canonical spelling lowers again to the same path.
func FuzzParseDecodesOnceAndNeverRepairs(f *testing.F) {
	f.Add("dir%2Freport.md/")
	f.Add("%252e%252e/100%")
	f.Fuzz(func(t *testing.T, raw string) {
		decoded := pathpolicy.DecodeOnce(raw)
		if want, err := url.PathUnescape(raw); err == nil && decoded != want {
			t.Fatalf("DecodeOnce(%q) = %q; net/url decodes %q", raw, decoded, want)
		}
		if len(decoded) > len(raw) || !strings.Contains(raw, "%") && decoded != raw {
			t.Fatalf("DecodeOnce(%q) = %q", raw, decoded)
		}
		p, err := pathpolicy.Parse(raw)
		q, lowerErr := pathpolicy.Lower(decoded)
		if !reflect.DeepEqual(p, q) || (err == nil) != (lowerErr == nil) {
			t.Fatalf("Parse(%q) = %q, %v; Lower(DecodeOnce) = %q, %v", raw, p, err, q, lowerErr)
		}
		if err != nil {
			if !refusal.Is(err, refusal.OutsideRoot) {
				t.Fatalf("Parse(%q) refused with %v; want outside_root", raw, err)
			}
			return
		}
		if decoded != p.String() && decoded != p.String()+"/" {
			t.Fatalf("Parse(%q) = %q from the decoded %q: more than one trailing slash dropped", raw, p, decoded)
		}
		again, err := pathpolicy.Lower(p.String())
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("Lower(%q), the canonical spelling of Parse(%q), = %q, %v", p.String(), raw, again, err)
		}
	})
}
