package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/resplane/resplane/domain/refusal"
)

// TestTheRefusalTableListsEveryCode pins docs/refusals.md: its table has exactly one row per
// code domain/refusal declares — the service's and the client-only ones — so a new code
// cannot ship without its row, and a removed one cannot linger.
func TestTheRefusalTableListsEveryCode(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root, "docs", "refusals.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(string(text), -1) {
		rows = append(rows, m[1])
	}
	var codes []string
	for _, c := range refusal.Codes() {
		codes = append(codes, string(c))
	}
	slices.Sort(codes)
	sorted := slices.Sorted(slices.Values(rows))
	if !slices.Equal(sorted, codes) {
		t.Errorf("docs/refusals.md rows %q\nwant one per declared code %q", sorted, codes)
	}
	if len(slices.Compact(sorted)) != len(rows) {
		t.Errorf("docs/refusals.md lists a code twice: %q", rows)
	}
}
