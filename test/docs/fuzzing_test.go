package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryFuzzTargetIsDocumented pins docs/fuzzing.md: its table of targets ("The targets")
// has one row for
// every `func FuzzX(f *testing.F)` in the repository's tests, and none for a target that is
// gone.
func TestEveryFuzzTargetIsDocumented(t *testing.T) {
	var targets []string
	target := regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || slices.Contains(skipped, d.Name())) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		text, err := os.ReadFile(path)
		for _, m := range target.FindAllSubmatch(text, -1) {
			targets = append(targets, string(m[1]))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "fuzzing.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "\n## The targets\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(Fuzz[A-Za-z0-9_]+)` \\|").FindAllStringSubmatch(section, -1) {
		rows = append(rows, m[1])
	}
	slices.Sort(targets)
	slices.Sort(rows)
	if !slices.Equal(targets, rows) {
		t.Errorf("docs/fuzzing.md documents %q\nthe tests declare %q", rows, targets)
	}
}
