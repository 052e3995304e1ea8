package blackbox_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// bbOperatorFiles is the export root's content for the listing and read tables (max_bytes 16).
var bbOperatorFiles = fixture.Layout{
	"out/.hidden":         "dot",
	"out/B.txt":           "upper",
	"out/a/x":             "in a",
	"out/a-b/x":           "in a-b",
	"out/a.txt":           "a dot txt",
	"out/a<b&c>.txt":      "html",
	"out/deep/er/f.txt":   "deep",
	"out/big.bin":         strings.Repeat("B", 17),
	"out/exact.bin":       strings.Repeat("E", 16),
	"out/empty":           "",
	"out/emptydir/.keep2": "k",
	"beside.txt":          "not under the root",
}

// TestListingIsRecursiveSortedBytewiseRegularFilesOnly pins docs/http-api.md, "The listing":
// the listing body's keys
// in order (root verbatim, mode, max_bytes, generation, containment_achieved, entries), entries
// sorted by the bytes of their path (a-b/x < a.txt < a/x < a<b&c>.txt, dotfiles and upper case
// first), recursive, regular files only (a FIFO, a socket and directories left out), a file
// above max_bytes listed with its real size, size/mtime/sha256 exact, JSON not HTML-escaped;
// the listing headers; the trace event (root, entry_count, total_bytes).
func TestListingIsRecursiveSortedBytewiseRegularFilesOnly(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", "16"), Files: bbOperatorFiles})
	s := bbSessionOf(t, p.Ready)
	fixture.Write(t, p.Workdir, fixture.Layout{"out/fifo|": "", "out/sock=": "", "out/emptier/": ""})
	out := filepath.Join(p.Workdir, "out")
	mtimes := map[string]int64{}
	base := int64(1787577327015)
	var wantPaths []string
	total := 0
	for rel, content := range bbOperatorFiles {
		path, ok := strings.CutPrefix(rel, "out/")
		if !ok {
			continue
		}
		wantPaths = append(wantPaths, path)
		total += len(content)
		mt := base + int64(len(wantPaths))*1111
		mtimes[path] = mt
		if err := os.Chtimes(filepath.Join(out, path), time.UnixMilli(mt), time.UnixMilli(mt)); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(wantPaths) // Go compares strings bytewise
	if !slices.Equal(wantPaths[:6], []string{".hidden", "B.txt", "a-b/x", "a.txt", "a/x", "a<b&c>.txt"}) {
		t.Fatalf("fixture order assumption broken: %v", wantPaths)
	}

	for _, target := range []string{"/resources/files", "/resources/files/", "/resources/files?path=a.txt"} {
		t.Run(target, func(t *testing.T) {
			mark := len(harness.TraceLines(t, s.trace))
			r := harness.Get(t, s.addr, target)
			l := bbDecodeListing(t, r, 0, "advisory", "out/")
			if l.MaxBytes != 16 {
				t.Errorf("max_bytes %d, want 16", l.MaxBytes)
			}
			if got := bbPaths(l); !slices.Equal(got, wantPaths) {
				t.Fatalf("entries\n got %q\nwant %q", got, wantPaths)
			}
			for _, e := range l.Entries {
				content := bbOperatorFiles["out/"+e.Path]
				if e.SizeBytes != int64(len(content)) || e.SHA256 != harness.SHA256Hex([]byte(content)) || e.MTimeMs != mtimes[e.Path] {
					t.Errorf("entry %+v, want size %d sha256 %s mtime %d", e, len(content), harness.SHA256Hex([]byte(content)), mtimes[e.Path])
				}
			}
			if !strings.Contains(string(r.Body), `"path":"a<b&c>.txt"`) {
				t.Errorf("listing escapes HTML characters: %s", r.Body)
			}
			lines := harness.TraceFrom(t, s.trace, mark, 1)
			bbCheckList(t, s, lines[0], bbListEvent{root: "out/", entries: len(wantPaths), totalBytes: total, bbOutcome: "ok"})
		})
	}
}

// TestReadServesTheBytesAndEveryValidatorHeader pins docs/http-api.md, "Reading a file": a read
// answers 200
// application/octet-stream with content-length, etag "sha256:<hex>" (quotes included),
// x-murmur-mtime-ms (the file's mtime), x-murmur-generation, x-murmur-containment and
// x-murmur-export-root (verbatim); a file of exactly max_bytes is served, one byte more is 413
// too_large naming the limit; the trace records bytes and sha256 only on ok.
func TestReadServesTheBytesAndEveryValidatorHeader(t *testing.T) {
	for _, class := range []string{"advisory", "scoped", "sealed"} {
		t.Run(class, func(t *testing.T) {
			p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest(`"  out  "`, "16"), Files: bbOperatorFiles,
				Args: []string{"--containment", class}})
			s := bbSessionOf(t, p.Ready)
			if p.Ready.Containment != class {
				t.Fatalf("ready containment %q", p.Ready.Containment)
			}
			mt := int64(1787577327015)
			if err := os.Chtimes(filepath.Join(p.Workdir, "out/a.txt"), time.UnixMilli(mt), time.UnixMilli(mt)); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name, path string
				tooLarge   bool
			}{
				{"small file", "a.txt", false},
				{"dotfile", ".hidden", false},
				{"nested file", "deep/er/f.txt", false},
				{"HTML characters in the name", "a%3Cb&c%3E.txt", false},
				{"empty file", "empty", false},
				{"exactly max_bytes", "exact.bin", false},
				{"one byte above max_bytes", "big.bin", true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					mark := len(harness.TraceLines(t, s.trace))
					r := harness.Get(t, s.addr, "/resources/files/"+tc.path)
					decoded := strings.NewReplacer("%3C", "<", "%3E", ">").Replace(tc.path)
					content := []byte(bbOperatorFiles["out/"+decoded])
					want := bbReadEvent{path: decoded, bbOutcome: "ok", body: content}
					if tc.tooLarge {
						msg := bbFilesRefusal(t, r, 413, "too_large", 0)
						if !strings.Contains(msg, "16") {
							t.Errorf("too_large message %q does not state the limit 16", msg)
						}
						want.bbOutcome, want.reason = "too_large", msg
					} else {
						bbServed(t, r, content, 0, class, "out")
					}
					if tc.path == "a.txt" && r.Get("x-murmur-mtime-ms") != strconv.FormatInt(mt, 10) {
						t.Errorf("x-murmur-mtime-ms %q, want %d", r.Get("x-murmur-mtime-ms"), mt)
					}
					bbCheckRead(t, s, harness.TraceFrom(t, s.trace, mark, 1)[0], want)
				})
			}
		})
	}
}

// TestRootThatDoesNotExistListsEmptyAndReadsNotFound pins docs/http-api.md, "The listing", and
// docs/operator-guide.md, "Containment classes and symlinks": the root is
// resolved at every request, so a missing root lists 200 with entries [] (and the default
// max_bytes 10485760) and reads not_found; a root created after launch is listed and served;
// a root that is a regular file lists [] and reads not_found.
func TestRootThatDoesNotExistListsEmptyAndReadsNotFound(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("data/out", ""), Files: fixture.Layout{"other.txt": "x"}})
	s := bbSessionOf(t, p.Ready)
	root := filepath.Join(p.Workdir, "data/out")
	steps := []struct {
		name    string
		prepare func(t *testing.T)
		entries []string
		read    string // body of a.txt, "" = not_found
		listing string // a listing refusal's code, "" = 200
	}{
		{"missing root", func(*testing.T) {}, []string{}, "", ""},
		{"root created after launch", func(t *testing.T) {
			fixture.Write(t, p.Workdir, fixture.Layout{"data/out/a.txt": "created later"})
		}, []string{"a.txt"}, "created later", ""},
		{"root replaced by a regular file", func(t *testing.T) {
			fixture.Write(t, p.Workdir, fixture.Layout{"data/out": "a file"})
		}, []string{}, "", ""},
		{"root removed again", func(t *testing.T) {
			if err := os.Remove(root); err != nil {
				t.Fatal(err)
			}
		}, []string{}, "", ""},
		{"root's parent is a regular file (ENOTDIR)", func(t *testing.T) {
			fixture.Write(t, p.Workdir, fixture.Layout{"data": "a file"})
		}, []string{}, "", ""},
		{"root is a symlink loop", func(t *testing.T) {
			fixture.Write(t, p.Workdir, fixture.Layout{"data/": "", "data/out -> out": ""})
		}, nil, "", "symlink_refused"},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.prepare(t)
			mark := len(harness.TraceLines(t, s.trace))
			r := harness.Get(t, s.addr, "/resources/files")
			if step.listing != "" {
				msg := bbFilesRefusal(t, r, 403, step.listing, 0)
				bbCheckList(t, s, harness.TraceFrom(t, s.trace, mark, 1)[0], bbListEvent{bbOutcome: step.listing, reason: msg})
				if r := harness.Get(t, s.addr, "/resources/files/a.txt"); r.Status == 200 || r.Status == 500 {
					t.Errorf("read under a looping root: %d %s", r.Status, r.Body)
				}
				return
			}
			l := bbDecodeListing(t, r, 0, "advisory", "data/out")
			if l.MaxBytes != 10485760 {
				t.Errorf("default max_bytes %d, want 10485760", l.MaxBytes)
			}
			if got := bbPaths(l); !slices.Equal(got, step.entries) && !(len(got) == 0 && len(step.entries) == 0) {
				t.Errorf("entries %q, want %q", got, step.entries)
			}
			if len(step.entries) == 0 && !strings.HasSuffix(string(r.Body), `"entries":[]}`) {
				t.Errorf("empty listing is not entries: []: %s", r.Body)
			}
			bbCheckList(t, s, harness.TraceFrom(t, s.trace, mark, 1)[0], bbListEvent{root: "data/out", entries: len(step.entries),
				totalBytes: len(step.read), bbOutcome: "ok"})

			mark = len(harness.TraceLines(t, s.trace))
			r = harness.Get(t, s.addr, "/resources/files/a.txt")
			want := bbReadEvent{path: "a.txt", bbOutcome: "ok", body: []byte(step.read)}
			if step.read == "" {
				want.bbOutcome, want.reason = "not_found", bbFilesRefusal(t, r, 404, "not_found", 0)
			} else {
				bbServed(t, r, []byte(step.read), 0, "advisory", "data/out")
			}
			bbCheckRead(t, s, harness.TraceFrom(t, s.trace, mark, 1)[0], want)
		})
	}
}

// TestUndeclaredOperatorPlaneRefusesNoResourcePlane pins docs/http-api.md, "Refusals": without
// exports.files
// both files routes answer 404 no_resource_plane (whatever the path), after the method check (a
// non-GET is still 405), with x-murmur-generation and traced; the ready line and the agent card
// report no plane.
func TestUndeclaredOperatorPlaneRefusesNoResourcePlane(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: "name: bare\n", Files: fixture.Layout{"out/a.txt": "A"}})
	s := bbSessionOf(t, p.Ready)
	if len(p.Ready.Planes) != 0 || p.Ready.Planes == nil {
		t.Errorf("ready planes %v, want []", p.Ready.Planes)
	}
	card := harness.Get(t, s.addr, "/.well-known/agent-card.json")
	if !strings.Contains(string(card.Body), `"serves":{"planes":[]}`) {
		t.Errorf("agent card of an undeclared capsule: %s", card.Body)
	}
	for _, tc := range []struct {
		method, target string
		status         int
		code           string
		readPath       string // "" for the listing
	}{
		{"GET", "/resources/files", 404, "no_resource_plane", ""},
		{"GET", "/resources/files/", 404, "no_resource_plane", ""},
		{"GET", "/resources/files/a.txt", 404, "no_resource_plane", "a.txt"},
		{"GET", "/resources/files/%2e%2e/etc/passwd", 404, "no_resource_plane", "../etc/passwd"},
		{"GET", "/resources/files/%zz", 404, "no_resource_plane", "%zz"},
		{"POST", "/resources/files", 405, "method_not_allowed", ""},
		{"DELETE", "/resources/files/a.txt", 405, "method_not_allowed", "a.txt"},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			mark := len(harness.TraceLines(t, s.trace))
			msg := bbFilesRefusal(t, harness.Request(t, s.addr, tc.method, tc.target), tc.status, tc.code, 0)
			line := harness.TraceFrom(t, s.trace, mark, 1)[0]
			if tc.readPath == "" {
				bbCheckList(t, s, line, bbListEvent{bbOutcome: tc.code, reason: msg})
			} else {
				bbCheckRead(t, s, line, bbReadEvent{path: tc.readPath, bbOutcome: tc.code, reason: msg})
			}
		})
	}
}

// TestListingSortsByTheReportedUTF8Path pins docs/http-api.md, "The listing": a name that is
// not valid UTF-8 is
// reported with U+FFFD in place of its bad bytes, the body stays valid UTF-8, and entries are
// sorted by the bytes of the reported path (so "\xff.txt", reported as "\uFFFD.txt", sorts before
// "\uFFFF.txt", not after it as its raw bytes would); such a name cannot be read back (invalid
// UTF-8 is outside_root).
func TestListingSortsByTheReportedUTF8Path(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Files: fixture.Layout{
		"out/z.txt": "z", "out/\xff.txt": "bad", "out/\uffff.txt": "max", "out/é.txt": "e", "out/dir\xfe/x": "x",
	}})
	r := harness.Get(t, p.Ready.Listen, "/resources/files")
	if !utf8.Valid(r.Body) {
		t.Fatalf("listing is not valid UTF-8: %q", r.Body)
	}
	l := bbDecodeListing(t, r, 0, "advisory", "out/")
	want := []string{"dir\uFFFD/x", "z.txt", "é.txt", "\uFFFD.txt", "\uFFFF.txt"}
	if got := bbPaths(l); !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
	bbFilesRefusal(t, harness.Get(t, p.Ready.Listen, "/resources/files/%ff.txt"), 403, "outside_root", 0)
	bbServed(t, harness.Get(t, p.Ready.Listen, "/resources/files/%EF%BF%BF.txt"), []byte("max"), 0, "advisory", "out/")
}
