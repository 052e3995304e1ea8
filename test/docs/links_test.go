// Package docs checks the repository's Markdown: every relative link and #anchor resolves, and
// the decision index (docs/decisions/README.md) lists exactly the records in its directory,
// each with its number, title and status as the record states them. It reads files only: no
// network, no binary, well under a second.
package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's top, from this package's directory.
const root = "../.."

// skipped are the top-level directories that hold no documentation of the repository: build
// and benchmark output (gitignored) and the demo capsule's runtime files.
var skipped = []string{"bin", "tmp"}

// markdownFiles returns every *.md file of the repository, as slash paths relative to root,
// leaving out hidden directories (.git among them) and the skipped ones.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || slices.Contains(skipped, rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".md") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no Markdown file found under %s", root)
	}
	return files
}

// A document is one Markdown file as the checks see it.
type document struct {
	links   []link
	anchors map[string]bool // the anchor of every heading, as GitHub makes them
	lines   []string
}

// A link is one inline link or image, [text](target), outside code.
type link struct {
	line   int
	target string
}

var (
	fence      = regexp.MustCompile("^ {0,3}(```|~~~)")
	heading    = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$`)
	codeSpan   = regexp.MustCompile("(`+)[^`](?:.*?[^`])?(?:`+)")
	inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// notInAnchor is what GitHub drops from a heading's text to make its anchor: everything but
	// letters, marks, digits, connector punctuation (the underscore), hyphens and spaces.
	notInAnchor = regexp.MustCompile(`[^\p{L}\p{M}\p{N}\p{Pc}\- ]`)
)

// parse reads the links and the heading anchors of a Markdown text. Fenced code blocks are
// skipped; so are code spans, whose brackets are not links.
func parse(text string) document {
	doc := document{anchors: map[string]bool{}, lines: strings.Split(text, "\n")}
	seen := map[string]int{}
	inFence := ""
	for i, line := range doc.lines {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case inFence == "":
				inFence = m[1]
			case inFence == m[1]:
				inFence = ""
			}
			continue
		}
		if inFence != "" {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			a := anchor(m[1])
			if n := seen[a]; n > 0 {
				doc.anchors[fmt.Sprintf("%s-%d", a, n)] = true
			} else {
				doc.anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			doc.links = append(doc.links, link{line: i + 1, target: m[2]})
		}
	}
	return doc
}

// anchor is the anchor GitHub gives a heading: its text as rendered (a link's text, a code
// span's content, no emphasis marks), lower case, without punctuation, spaces as hyphens.
func anchor(text string) string {
	text = inlineLink.ReplaceAllString(text, "$1")
	text = strings.ToLower(text)
	text = notInAnchor.ReplaceAllString(text, "")
	return strings.ReplaceAll(text, " ", "-")
}

func readDocuments(t *testing.T) map[string]document {
	t.Helper()
	docs := map[string]document{}
	for _, rel := range markdownFiles(t) {
		raw, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		docs[rel] = parse(string(raw))
	}
	return docs
}

// external says whether a link target leaves the repository (a URL of any scheme).
var external = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

func TestEveryRelativeLinkAndAnchorResolves(t *testing.T) {
	docs := readDocuments(t)
	for rel, doc := range docs {
		for _, l := range doc.links {
			if external.MatchString(l.target) {
				continue
			}
			where := fmt.Sprintf("%s:%d: link %q", rel, l.line, l.target)
			file, frag, _ := strings.Cut(l.target, "#")
			target := rel
			if file != "" {
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(rel), file)))
				if strings.HasPrefix(target, "../") {
					t.Errorf("%s leaves the repository", where)
					continue
				}
				info, err := os.Stat(filepath.Join(root, target))
				if err != nil {
					t.Errorf("%s: no such file or directory (%s)", where, target)
					continue
				}
				if info.IsDir() {
					if frag != "" {
						t.Errorf("%s: an anchor on a directory resolves to nothing", where)
					}
					continue
				}
			}
			if frag == "" {
				continue
			}
			linked, ok := docs[target]
			if !ok {
				t.Errorf("%s: an anchor into %s, which is not a Markdown file of the repository", where, target)
				continue
			}
			if !linked.anchors[frag] {
				t.Errorf("%s: %s has no heading whose anchor is #%s", where, target, frag)
			}
		}
	}
}

const decisions = "docs/decisions"

var (
	recordName  = regexp.MustCompile(`^(\d{4})-[a-z0-9]+(?:-[a-z0-9]+)*\.md$`)
	recordTitle = regexp.MustCompile(`^# (\d{4})\. (.+)$`)
	status      = regexp.MustCompile(`^Status: (accepted|superseded by \[(\d{4})\]\((\d{4}-[^)]+\.md)\))$`)
	indexRow    = regexp.MustCompile(`^\| (\d{4}) \| \[(.+)\]\(([^)]+)\) \| ([^|]+) \| ([^|]+) \|$`)
)

// maxRecordLines is how long a decision record may be; a longer one is several decisions.
const maxRecordLines = 150

// A record is what a decision file says of itself.
type record struct {
	number, title, status string
}

func readRecords(t *testing.T, docs map[string]document) map[string]record {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, decisions))
	if err != nil {
		t.Fatal(err)
	}
	records := map[string]record{}
	numbers := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if name == "README.md" {
			continue
		}
		m := recordName.FindStringSubmatch(name)
		if m == nil {
			t.Errorf("%s/%s: not a decision record's name (NNNN-short-title.md in lower case); only records and README.md belong here", decisions, name)
			continue
		}
		if other, dup := numbers[m[1]]; dup {
			t.Errorf("%s/%s: number %s is taken by %s too", decisions, name, m[1], other)
		}
		numbers[m[1]] = name
		lines := docs[decisions+"/"+name].lines
		if n := len(lines) - 1; n > maxRecordLines { // the text ends with a newline
			t.Errorf("%s/%s: %d lines, more than %d: split it into the decisions it holds", decisions, name, n, maxRecordLines)
		}
		r := record{number: m[1]}
		if tm := recordTitle.FindStringSubmatch(lines[0]); tm == nil || tm[1] != m[1] {
			t.Errorf("%s/%s: the first line must be \"# %s. Title\", got %q", decisions, name, m[1], lines[0])
		} else {
			r.title = tm[2]
		}
		for _, line := range lines {
			if sm := status.FindStringSubmatch(line); sm != nil {
				r.status = sm[1]
				if sm[2] != "" && !strings.HasPrefix(sm[3], sm[2]+"-") {
					t.Errorf("%s/%s: %q links %s under the number %s", decisions, name, line, sm[3], sm[2])
				}
				break
			}
		}
		if r.status == "" {
			t.Errorf("%s/%s: no status line (\"Status: accepted\" or \"Status: superseded by [NNNN](NNNN-….md)\")", decisions, name)
		}
		records[name] = r
	}
	return records
}

func TestTheDecisionIndexListsEveryRecordAndNothingElse(t *testing.T) {
	docs := readDocuments(t)
	records := readRecords(t, docs)
	index := decisions + "/README.md"
	listed := map[string]bool{}
	for i, line := range docs[index].lines {
		m := indexRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		number, title, file, state := m[1], m[2], m[3], strings.TrimSpace(m[4])
		where := fmt.Sprintf("%s:%d", index, i+1)
		if listed[file] {
			t.Errorf("%s: %s is listed twice", where, file)
		}
		listed[file] = true
		r, ok := records[file]
		switch {
		case !ok:
			t.Errorf("%s: lists %s, which is not a record in %s", where, file, decisions)
		case r.number != number || r.title != title:
			t.Errorf("%s: lists %s as %s %q; the record says %s %q", where, file, number, title, r.number, r.title)
		case r.status != state:
			t.Errorf("%s: lists %s as %q; the record's status is %q", where, file, state, r.status)
		}
	}
	for file := range records {
		if !listed[file] {
			t.Errorf("%s/%s is not in the index %s: add a row for it", decisions, file, index)
		}
	}
}

func TestAnchorsAreMadeAsGitHubMakesThem(t *testing.T) {
	for _, c := range []struct{ heading, anchor string }{
		{"Lowering a path", "lowering-a-path"},
		{"`Connection: close` on every response of the resource listener", "connection-close-on-every-response-of-the-resource-listener"},
		{"The resource listener's other bounds are constants, not flags", "the-resource-listeners-other-bounds-are-constants-not-flags"},
		{"Trace lines are appended by hand, byte for byte what `encoding/json` wrote", "trace-lines-are-appended-by-hand-byte-for-byte-what-encodingjson-wrote"},
		{"Observability cost, measured on 2026-12-01 (2-core VM, shared)", "observability-cost-measured-on-2026-12-01-2-core-vm-shared"},
		{"A peer's error code matches `^[A-Za-z0-9_.-]{1,64}$`", "a-peers-error-code-matches-a-za-z0-9_-164"},
		{"Where it goes — and why", "where-it-goes--and-why"},
		{"See [the spool](#the-spool) first", "see-the-spool-first"},
	} {
		if got := anchor(c.heading); got != c.anchor {
			t.Errorf("anchor(%q) = %q, want %q", c.heading, got, c.anchor)
		}
	}
}

func TestLinksAreReadOutsideCodeAndRepeatedHeadingsAreNumbered(t *testing.T) {
	doc := parse("# Top\n\nSee [a](a.md#x) and `[not](b.md)`.\n\n```\n[not](c.md)\n# Not a heading\n```\n\n## Top\n\n![img](d.png \"title\")\n")
	var targets []string
	for _, l := range doc.links {
		targets = append(targets, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	if want := []string{"3:a.md#x", "12:d.png"}; !slices.Equal(targets, want) {
		t.Errorf("links = %v, want %v", targets, want)
	}
	for _, a := range []string{"top", "top-1"} {
		if !doc.anchors[a] {
			t.Errorf("no anchor #%s in %v", a, doc.anchors)
		}
	}
	if doc.anchors["not-a-heading"] {
		t.Error("a line in a fenced code block was taken for a heading")
	}
}
