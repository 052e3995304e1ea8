package operator_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/adapters/terminal"
	"github.com/resplane/resplane/application/operator"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/domain/resolve"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

// fakeExport is a service's operator plane in memory: files it lists and serves, and ways to
// make it lie, the way a hostile or racing service would.
type fakeExport struct {
	mu sync.Mutex
	// files are listed and served.
	files map[string]string
	// extra entries are appended to the listing as given, whether served or not.
	extra []ports.RemoteEntry
	// answers replace the answer to a read of a path.
	answers map[string]fakeAnswer
	// refuse makes the listing a refusal.
	refuse *ports.RemoteAnswer
	// maxBytes is the listing's max_bytes.
	maxBytes int64
	// opened counts reads per path.
	opened map[string]int
	// onOpen, when set, runs at the start of every read.
	onOpen func()
	// unreachable makes the listing fail as a service that does not answer does.
	unreachable bool
	// listed counts the listings.
	listed int
}

// fakeAnswer is one read's answer: a status with a refusal body, or a body with an etag.
type fakeAnswer struct {
	status        int
	code, message string
	body          string
	etag          *string // nil: the etag of body
	contentLength int64   // 0: len(body)
}

func newExport(files map[string]string) *fakeExport {
	return &fakeExport{files: files, answers: map[string]fakeAnswer{}, opened: map[string]int{}, maxBytes: 1 << 20}
}

func sum(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func (f *fakeExport) List(context.Context) (ports.RemoteListing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listed++
	if f.unreachable {
		return ports.RemoteListing{}, refusal.WithMessage(refusal.ServiceUnreachable, "The connection was refused.")
	}
	if f.refuse != nil {
		return ports.RemoteListing{RemoteAnswer: *f.refuse}, nil
	}
	l := ports.RemoteListing{RemoteAnswer: ports.RemoteAnswer{Status: 200}, MaxBytes: f.maxBytes, Raw: []byte("{}")}
	for _, p := range slices.Sorted(mapKeys(f.files)) {
		l.Entries = append(l.Entries, ports.RemoteEntry{Path: p, Size: int64(len(f.files[p])), MtimeMs: 1_700_000_000_000, SHA256: sum(f.files[p])})
	}
	l.Entries = append(l.Entries, f.extra...)
	return l, nil
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (f *fakeExport) Open(ctx context.Context, rel pathpolicy.RelPath) (ports.RemoteRead, io.ReadCloser, error) {
	if f.onOpen != nil {
		f.onOpen()
	}
	if ctx.Err() != nil {
		return ports.RemoteRead{}, nil, refusal.WithMessage(refusal.ServiceUnreachable, "The request was cancelled before it completed.")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened[rel.String()]++
	a, ok := f.answers[rel.String()]
	if !ok {
		content, found := f.files[rel.String()]
		if !found {
			a = fakeAnswer{status: 404, code: "not_found", message: "The path names nothing under the export root."}
		} else {
			a = fakeAnswer{status: 200, body: content}
		}
	}
	if a.status != 200 {
		return ports.RemoteRead{RemoteAnswer: ports.RemoteAnswer{Status: a.status, ErrorCode: a.code, ErrorMessage: a.message}, ContentLength: -1},
			io.NopCloser(strings.NewReader("")), nil
	}
	etag := `"sha256:` + sum(a.body) + `"`
	if a.etag != nil {
		etag = *a.etag
	}
	cl := a.contentLength
	if cl == 0 {
		cl = int64(len(a.body))
	}
	return ports.RemoteRead{RemoteAnswer: ports.RemoteAnswer{Status: 200}, ContentLength: cl, ETag: etag, HasETag: a.etag == nil || *a.etag != "",
		MtimeMs: 1_700_000_000_000, HasMtime: true}, io.NopCloser(strings.NewReader(a.body)), nil
}

func (f *fakeExport) FilesURL() string { return "http://service/resources/files" }

func (f *fakeExport) FileURL(rel pathpolicy.RelPath) string { return f.FilesURL() + "/" + rel.String() }

// mirrorInto returns a Mirror of export into a new temp dir laid out as local.
func mirrorInto(t *testing.T, export *fakeExport, local fixture.Layout) (*operator.Mirror, string) {
	t.Helper()
	dir := t.TempDir()
	fixture.Write(t, dir, local)
	target := filepath.Join(dir, "mirror")
	d, err := osfs.OpenMirror(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return operator.NewMirror(operator.NewRemoteFiles(export), d, terminal.Silent{}), target
}

func pull(t *testing.T, m *operator.Mirror, opts operator.PullOptions) operator.PullSummary {
	t.Helper()
	s, err := m.Pull(context.Background(), opts)
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	return s
}

// readTree returns every regular file beneath dir with its content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		tree[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func requireTree(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := readTree(t, dir)
	for p, content := range want {
		if got[p] != content {
			t.Errorf("%s = %q, want %q", p, got[p], content)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected local file %s (%q)", p, got[p])
		}
	}
}

func failureCodes(s operator.PullSummary) map[string]refusal.Code {
	codes := map[string]refusal.Code{}
	for _, f := range s.Failures {
		codes[f.Path] = f.Err.Code
	}
	return codes
}

func TestPullFetchesWhatIsMissingOrDifferentAndKeepsWhatIsTheSame(t *testing.T) {
	export := newExport(map[string]string{"same.txt": "same\n", "changed.txt": "new\n", "missing/deep.txt": "deep\n"})
	m, dir := mirrorInto(t, export, fixture.Layout{"mirror/same.txt": "same\n", "mirror/changed.txt": "old!\n"})
	s := pull(t, m, operator.PullOptions{Jobs: 2})
	if s.Fetched != 2 || s.Unchanged != 1 || s.Failed != 0 || s.Bytes != int64(len("new\n")+len("deep\n")) {
		t.Fatalf("summary %+v; want 2 fetched, 1 unchanged, 9 bytes", s)
	}
	if export.opened["same.txt"] != 0 {
		t.Errorf("an unchanged file was read from the service")
	}
	requireTree(t, dir, map[string]string{"same.txt": "same\n", "changed.txt": "new\n", "missing/deep.txt": "deep\n"})
	if info, err := os.Stat(filepath.Join(dir, "changed.txt")); err != nil || info.ModTime().UnixMilli() != 1_700_000_000_000 {
		t.Errorf("a landed file takes the answer's x-murmur-mtime-ms: %v, %v", info.ModTime(), err)
	}
}

func TestPullRefusesListedPathsItCannotWriteSafely(t *testing.T) {
	cases := []struct {
		rule  string
		path  string
		local fixture.Layout
		code  refusal.Code
	}{
		{"an absolute path is refused", "/etc/passwd", nil, refusal.UnsafePath},
		{"a dot-dot component is refused", "../escape.txt", nil, refusal.UnsafePath},
		{"an inner dot-dot component is refused", "a/../../escape.txt", nil, refusal.UnsafePath},
		{"a dot component is refused", "./x.txt", nil, refusal.UnsafePath},
		{"an empty component is refused", "a//x.txt", nil, refusal.UnsafePath},
		{"an empty path is refused", "", nil, refusal.UnsafePath},
		{"a NUL byte is refused", "a\x00b", nil, refusal.UnsafePath},
		{"a symlinked directory on the way is refused", "link/x.txt", fixture.Layout{"mirror/link -> ../outside/": "", "outside/": ""}, refusal.UnsafePath},
		{"a symlink as the file is never replaced", "link.txt", fixture.Layout{"mirror/link.txt -> ../outside/target.txt": "", "outside/target.txt": "kept"}, refusal.UnsafePath},
		{"a file on the way is refused", "file.txt/x.txt", fixture.Layout{"mirror/file.txt": "a file"}, refusal.UnsafePath},
		{"a directory as the file is never replaced", "dir", fixture.Layout{"mirror/dir/": ""}, refusal.UnsafePath},
		{"a FIFO as the file is never replaced", "pipe", fixture.Layout{"mirror/pipe|": ""}, refusal.UnsafePath},
		{"a name the filesystem refuses is refused", strings.Repeat("n", 300), nil, refusal.UnsafePath},
		{"a path longer than a service serves is refused", strings.Repeat("d/", pathpolicy.MaxLen/2) + "x", nil, refusal.InvalidListing},
		{"a path deeper than a service lists is refused", strings.Repeat("d/", 257) + "x", nil, refusal.InvalidListing},
		{"the deepest path a service lists is written", strings.Repeat("d/", 256) + "x", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			export := newExport(map[string]string{"ok.txt": "ok"})
			export.extra = []ports.RemoteEntry{{Path: tc.path, Size: 6, SHA256: sum("hostil")}}
			export.answers[strings.TrimPrefix(tc.path, "/")] = fakeAnswer{status: 200, body: "hostil"}
			m, dir := mirrorInto(t, export, tc.local)
			s := pull(t, m, operator.PullOptions{Jobs: 1})
			if tc.code == "" {
				if s.Fetched != 2 || s.Failed != 0 {
					t.Fatalf("summary %+v (failures %v); want both entries fetched", s, failureCodes(s))
				}
				return
			}
			if s.Fetched != 1 || s.Failed != 1 || failureCodes(s)[tc.path] != tc.code {
				t.Fatalf("summary %+v (failures %v); want ok.txt fetched and %q failed %s", s, failureCodes(s), tc.path, tc.code)
			}
			for p, content := range readTree(t, filepath.Dir(dir)) {
				if content == "hostil" {
					t.Fatalf("the refused entry was written at %s", p)
				}
			}
		})
	}
}

func TestPullLandsOnlyBodiesThatMatchTheirEtag(t *testing.T) {
	empty, wrong := "", `"sha256:`+sum("something else")+`"`
	cases := []struct {
		rule   string
		answer fakeAnswer
		code   refusal.Code
	}{
		{"a body that does not match its etag is not landed", fakeAnswer{status: 200, body: "tampered", etag: &wrong}, refusal.EtagMismatch},
		{"a body without an etag is not landed", fakeAnswer{status: 200, body: "tampered", etag: &empty}, refusal.EtagMismatch},
		{"a content-length above max_bytes is refused before reading", fakeAnswer{status: 200, body: "tampered", contentLength: 1 << 30}, refusal.TooLarge},
		{"the service's refusal keeps its code", fakeAnswer{status: 403, code: "outside_root", message: "no"}, refusal.OutsideRoot},
		{"an implausible code becomes http_<status>", fakeAnswer{status: 500, code: "bad code\x1b[31m"}, "http_500"},
		{"a redirect is http_<status> whatever its body says", fakeAnswer{status: 302, code: "ok"}, "http_302"},
		{"a refusal coded ok is http_<status>", fakeAnswer{status: 404, code: "ok"}, "http_404"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			export := newExport(map[string]string{"a.txt": "the listed bytes"})
			export.answers["a.txt"] = tc.answer
			m, dir := mirrorInto(t, export, fixture.Layout{"mirror/a.txt": "the earlier copy"})
			s := pull(t, m, operator.PullOptions{Jobs: 1})
			if s.Failed != 1 || failureCodes(s)["a.txt"] != tc.code {
				t.Fatalf("failures %v; want a.txt %s", failureCodes(s), tc.code)
			}
			requireTree(t, dir, map[string]string{"a.txt": "the earlier copy"})
		})
	}
}

func TestAFileChangedBetweenListingAndReadIsLandedAsReadAndReported(t *testing.T) {
	export := newExport(map[string]string{"a.txt": "as listed"})
	export.answers["a.txt"] = fakeAnswer{status: 200, body: "rewritten since"}
	m, dir := mirrorInto(t, export, nil)
	s := pull(t, m, operator.PullOptions{})
	if s.Fetched != 1 || s.Failed != 0 || !slices.Equal(s.Changed, []string{"a.txt"}) {
		t.Fatalf("summary %+v; want a.txt fetched and reported changed", s)
	}
	requireTree(t, dir, map[string]string{"a.txt": "rewritten since"})
}

func TestAListingThatNamesAPathTwiceOrGivesNoDigestFailsThatEntry(t *testing.T) {
	export := newExport(map[string]string{"a.txt": "a"})
	export.extra = []ports.RemoteEntry{
		{Path: "a.txt/", Size: 1, SHA256: sum("b")},
		{Path: "b.txt", Size: 1, SHA256: "not a digest"},
		{Path: "c.txt", Size: -1, SHA256: sum("c")},
	}
	m, dir := mirrorInto(t, export, nil)
	s := pull(t, m, operator.PullOptions{})
	want := map[string]refusal.Code{"a.txt/": refusal.InvalidListing, "b.txt": refusal.InvalidListing, "c.txt": refusal.InvalidListing}
	if s.Fetched != 1 || !maps.Equal(failureCodes(s), want) {
		t.Fatalf("summary %+v, failures %v; want a.txt fetched and %v", s, failureCodes(s), want)
	}
	requireTree(t, dir, map[string]string{"a.txt": "a"})
}

func TestDeleteRemovesOnlyUnlistedRegularFiles(t *testing.T) {
	export := newExport(map[string]string{"kept.txt": "kept", "failing.txt": "listed"})
	export.answers["failing.txt"] = fakeAnswer{status: 500, code: "io_error", message: "The file could not be opened or read."}
	m, dir := mirrorInto(t, export, fixture.Layout{
		"mirror/kept.txt":          "kept",
		"mirror/failing.txt":       "earlier copy",
		"mirror/gone.txt":          "unlisted",
		"mirror/sub/gone.txt":      "unlisted",
		"mirror/link -> kept.txt":  "",
		"mirror/linkdir -> ../out": "",
		"out/victim.txt":           "outside",
		"mirror/empty/":            "",
	})
	s := pull(t, m, operator.PullOptions{Delete: true})
	if s.Deleted != 2 || !slices.Equal(s.DeletedPaths, []string{"gone.txt", "sub/gone.txt"}) || s.Failed != 1 {
		t.Fatalf("summary %+v; want gone.txt and sub/gone.txt deleted and failing.txt failed", s)
	}
	requireTree(t, dir, map[string]string{"kept.txt": "kept", "failing.txt": "earlier copy"})
	for _, p := range []string{"link", "linkdir", "empty", "sub"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s was removed: only regular files are deleted", p)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(filepath.Dir(dir), "out/victim.txt")); string(data) != "outside" {
		t.Errorf("a file behind a symlink was deleted")
	}
}

func TestADryRunChangesNothing(t *testing.T) {
	export := newExport(map[string]string{"new.txt": "new", "same.txt": "same"})
	m, dir := mirrorInto(t, export, fixture.Layout{"mirror/same.txt": "same", "mirror/unlisted.txt": "x"})
	s := pull(t, m, operator.PullOptions{Delete: true, DryRun: true})
	if s.Fetched != 1 || s.Unchanged != 1 || s.Deleted != 1 || s.Bytes != 3 ||
		!slices.Equal(s.FetchedPaths, []string{"new.txt"}) || !slices.Equal(s.DeletedPaths, []string{"unlisted.txt"}) {
		t.Fatalf("summary %+v; want the plan: fetch new.txt (3 bytes), delete unlisted.txt", s)
	}
	if len(export.opened) != 0 {
		t.Errorf("a dry run read files: %v", export.opened)
	}
	requireTree(t, dir, map[string]string{"same.txt": "same", "unlisted.txt": "x"})
}

func TestARefusedListingChangesNothing(t *testing.T) {
	export := newExport(nil)
	export.refuse = &ports.RemoteAnswer{Status: 404, ErrorCode: "no_resource_plane", ErrorMessage: "no plane\x1b]0;pwned\x07"}
	m, dir := mirrorInto(t, export, fixture.Layout{"mirror/a.txt": "a"})
	_, err := m.Pull(context.Background(), operator.PullOptions{Delete: true})
	r, ok := refusal.As(err)
	if !ok || r.Code != "no_resource_plane" || strings.ContainsAny(r.Message, "\x1b\x07") {
		t.Fatalf("err %v; want the service's no_resource_plane with its message made printable", err)
	}
	requireTree(t, dir, map[string]string{"a.txt": "a"})
}

func TestAListingLongerThanAnyServiceListsIsRefusedWhole(t *testing.T) {
	export := newExport(nil)
	for i := range resolve.MaxEntries + 1 {
		export.extra = append(export.extra, ports.RemoteEntry{Path: "f" + strconv.Itoa(i), Size: 1, SHA256: sum("x")})
	}
	m, dir := mirrorInto(t, export, fixture.Layout{"mirror/a.txt": "a"})
	_, err := m.Pull(context.Background(), operator.PullOptions{Delete: true})
	r, ok := refusal.As(err)
	if !ok || r.Code != refusal.InvalidListing || !strings.Contains(r.Message, "at most 100000") {
		t.Fatalf("err %v; want invalid_listing naming the bound", err)
	}
	requireTree(t, dir, map[string]string{"a.txt": "a"})
}

func TestAnInterruptedPullCountsWhatItDidNotReachAsFailed(t *testing.T) {
	export := newExport(map[string]string{"a.txt": "a", "b.txt": "b"})
	m, dir := mirrorInto(t, export, fixture.Layout{"mirror/unlisted.txt": "x"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err := m.Pull(ctx, operator.PullOptions{Delete: true})
	if err != nil || s.Failed != 2 || failureCodes(s)["a.txt"] != refusal.Interrupted || s.Deleted != 0 {
		t.Fatalf("summary %+v, %v; want both files interrupted and nothing deleted", s, err)
	}
	requireTree(t, dir, map[string]string{"unlisted.txt": "x"})
}

func TestAFetchCutShortByASignalIsInterrupted(t *testing.T) {
	export := newExport(map[string]string{"a.txt": "a"})
	ctx, cancel := context.WithCancel(context.Background())
	export.onOpen = cancel
	m, dir := mirrorInto(t, export, nil)
	s, err := m.Pull(ctx, operator.PullOptions{})
	if err != nil || failureCodes(s)["a.txt"] != refusal.Interrupted {
		t.Fatalf("summary %+v, %v; want a.txt interrupted", s, err)
	}
	requireTree(t, dir, map[string]string{})
}

// recordingLanding records what a fetch did with it.
type recordingLanding struct {
	strings.Builder
	committed time.Time
	discarded bool
}

func (l *recordingLanding) Commit(m time.Time) error { l.committed = m; return nil }
func (l *recordingLanding) Discard()                 { l.discarded = true }

func TestFetchCommitsOnlyAVerifiedBodyWithinItsLimit(t *testing.T) {
	export := newExport(map[string]string{"a.txt": "0123456789"})
	files := operator.NewRemoteFiles(export)
	rel, _ := pathpolicy.Lower("a.txt")
	for _, tc := range []struct {
		rule      string
		limit     int64
		committed bool
	}{
		{"a body of exactly the limit is landed", 10, true},
		{"a body one byte over the limit is not", 9, false},
		{"no limit lands any body", operator.Unlimited, true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			l := &recordingLanding{}
			fetched, err := files.Fetch(context.Background(), rel, tc.limit, l)
			if tc.committed != (err == nil) || l.discarded == tc.committed || l.committed.IsZero() == tc.committed {
				t.Fatalf("err %v, committed %v, discarded %v", err, l.committed, l.discarded)
			}
			if !tc.committed && (!refusal.Is(err, refusal.TooLarge) || !fetched.OverLimit || fetched.Announced != 10 || !strings.Contains(err.Error(), "10 bytes")) {
				t.Fatalf("err %v, announced %d; want too_large naming the 10 announced bytes", err, fetched.Announced)
			}
		})
	}
}
