package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryPortIsInTheExtendingGuide pins docs/extending.md, "The ports": every interface
// declared in ports/ is named in that table, so a new port comes with its adapters and fakes.
func TestEveryPortIsInTheExtendingGuide(t *testing.T) {
	sources, err := filepath.Glob(filepath.Join(root, "ports", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, path := range sources {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^type ([A-Z][A-Za-z0-9]*) interface`).FindAllSubmatch(text, -1) {
			ports = append(ports, string(m[1]))
		}
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "extending.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "\n## The ports\n")
	table, _, _ = strings.Cut(table, "\n## ")
	var firstColumn []string
	for _, row := range regexp.MustCompile(`(?m)^\| ([^|]+) \|`).FindAllStringSubmatch(table, -1) {
		for _, m := range regexp.MustCompile("`([A-Za-z0-9]+)`").FindAllStringSubmatch(row[1], -1) {
			firstColumn = append(firstColumn, m[1])
		}
	}
	for _, port := range ports {
		if !slices.Contains(firstColumn, port) {
			t.Errorf("ports.%s is not in docs/extending.md's table of ports", port)
		}
	}
}
