package application_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/refusal"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func newFiles(w *world, plane *application.ExportPlane) *application.Files {
	return application.NewFiles(plane, w.session, w.fs, w.reader, w.clock, w.trace)
}

var outPlane = &application.ExportPlane{Root: "out/", MaxBytes: 16}

func TestReadServesTheBytesWithTheirHashAndProvenance(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/report.md", "# report\n")
	files := newFiles(w, outPlane)

	gen, served, err := files.Read(context.Background(), get, "report.md")
	if err != nil {
		t.Fatal(err)
	}
	defer served.Body.Release()
	if gen != 0 || contentOf(t, served.Body) != "# report\n" || served.Body.SHA256 != sha("# report\n") ||
		served.Body.ETag() != `"sha256:`+sha("# report\n")+`"` || served.ExportRoot != "out/" ||
		served.Containment != containment.Sealed || !served.Body.ModTime.Equal(epoch) {
		t.Fatalf("read answered gen %d, %+v", gen, served)
	}
	got, keys := fields(w.lastEvent(t, "resource_read"))
	wantKeys := []string{"path", "outcome", "bytes", "sha256", "generation", "containment_achieved", "reason"}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Fatalf("resource_read keys %v, want %v", keys, wantKeys)
	}
	if got["path"] != "report.md" || got["outcome"] != "ok" || got["bytes"] != int64(9) ||
		got["sha256"] != sha("# report\n") || got["reason"] != nil || got["containment_achieved"] != "sealed" {
		t.Fatalf("resource_read = %v", got)
	}
}

func TestReadRefusalsAreTracedWithTheirCode(t *testing.T) {
	cases := []struct {
		rule  string
		plane *application.ExportPlane
		req   application.Request
		raw   string
		want  refusal.Code
	}{
		{"a Host not allowed is refused first, before the method", nil, application.Request{Method: "POST", HasBody: true}, "report.md", refusal.HostNotAllowed},
		{"a method other than GET is refused before the declaration", nil, request("POST"), "report.md", refusal.MethodNotAllowed},
		{"a body is refused after the method", outPlane, application.Request{Method: "PUT", HostAllowed: true, HasBody: true}, "report.md", refusal.MethodNotAllowed},
		{"a GET with a body is refused before the declaration", nil, application.Request{Method: "GET", HostAllowed: true, HasBody: true}, "report.md", refusal.BodyNotAllowed},
		{"lowercase get is another method", outPlane, request("get"), "report.md", refusal.MethodNotAllowed},
		{"a path longer than any servable path is refused before the declaration", nil, get, strings.Repeat("a/", 2048) + "b", refusal.TargetTooLong},
		{"a path of the longest servable length is looked up", outPlane, get, strings.Repeat("a/", 2048), refusal.NotFound},
		{"the length is counted once decoded", outPlane, get, strings.Repeat("a%2F", 2048), refusal.NotFound},
		{"an undeclared plane refuses every read", nil, get, "report.md", refusal.NoResourcePlane},
		{"a traversal is refused before the filesystem", outPlane, get, "%2e%2e/secret", refusal.OutsideRoot},
		{"a missing file is not found", outPlane, get, "missing.md", refusal.NotFound},
		{"a directory is not a regular file", outPlane, get, "dir", refusal.NotARegularFile},
		{"a file above max_bytes is too large", outPlane, get, "big.bin", refusal.TooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			w := newWorld(t, containment.Advisory)
			w.write(t, "out/report.md", "# report\n")
			w.write(t, "out/big.bin", strings.Repeat("x", 17))
			if err := w.fs.Mkdir("out/dir"); err != nil {
				t.Fatal(err)
			}
			w.session.Generation.Advance()
			_, served, err := newFiles(w, tc.plane).Read(context.Background(), tc.req, tc.raw)
			if !refusal.Is(err, tc.want) || served != nil {
				t.Fatalf("Read = %v, %v; want %s", served, err, tc.want)
			}
			got, _ := fields(w.lastEvent(t, "resource_read"))
			if got["outcome"] != string(tc.want) || got["bytes"] != nil || got["sha256"] != nil ||
				got["reason"] == nil || got["generation"] != uint64(1) {
				t.Fatalf("resource_read = %v", got)
			}
		})
	}
}

func TestReadTracesThePathDecodedOnceWithItsTrailingSlash(t *testing.T) {
	w := newWorld(t, containment.Advisory)
	w.write(t, "out/dir/report.md", "r")
	files := newFiles(w, outPlane)
	if _, served, err := files.Read(context.Background(), get, "dir%2Freport.md/"); err != nil {
		t.Fatal(err)
	} else {
		served.Body.Release()
	}
	got, _ := fields(w.lastEvent(t, "resource_read"))
	if got["path"] != "dir/report.md/" {
		t.Fatalf("traced path %q", got["path"])
	}
}

func TestAFileOfExactlyMaxBytesIsServed(t *testing.T) {
	w := newWorld(t, containment.Advisory)
	w.write(t, "out/edge.bin", strings.Repeat("y", 16))
	_, served, err := newFiles(w, outPlane).Read(context.Background(), get, "edge.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer served.Body.Release()
	if served.Body.Size != 16 {
		t.Fatalf("served %d bytes", served.Body.Size)
	}
}

func TestListingIsSortedHashedAndTraced(t *testing.T) {
	w := newWorld(t, containment.Sealed)
	w.write(t, "out/a/x", "x")
	w.write(t, "out/a.txt", "aa")
	w.write(t, "out/.env", "secret=1")
	w.write(t, "out/big.bin", strings.Repeat("z", 40))
	if err := w.fs.MakeFIFO("out/pipe"); err != nil {
		t.Fatal(err)
	}
	gen, listing, err := listOf(t, newFiles(w, outPlane), context.Background(), get)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var total int64
	for _, e := range listing.Entries {
		paths = append(paths, e.Path)
		total += e.Size
	}
	want := []string{".env", "a.txt", "a/x", "big.bin"}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("listed %v, want %v", paths, want)
	}
	big := listing.Entries[3]
	if big.Size != 40 || big.SHA256 != sha(strings.Repeat("z", 40)) || big.MTimeMs != epoch.UnixMilli() {
		t.Fatalf("big.bin listed as %+v", big)
	}
	if gen != 0 || listing.Root != "out/" || listing.Mode != "read-only" || listing.MaxBytes != 16 {
		t.Fatalf("listing header %+v", listing)
	}
	got, keys := fields(w.lastEvent(t, "resource_list"))
	wantKeys := []string{"root", "entry_count", "total_bytes", "generation", "containment_achieved", "outcome", "reason"}
	if !reflect.DeepEqual(keys, wantKeys) || got["entry_count"] != int64(4) || got["total_bytes"] != total || got["root"] != "out/" {
		t.Fatalf("resource_list = %v (%v)", got, keys)
	}
}

func TestListingOfAMissingRootIsEmpty(t *testing.T) {
	w := newWorld(t, containment.Scoped)
	_, listing, err := listOf(t, newFiles(w, outPlane), context.Background(), get)
	if err != nil || listing.Entries == nil || len(listing.Entries) != 0 {
		t.Fatalf("List = %+v, %v; want an empty, non-nil list", listing, err)
	}
}

func TestListingRefusalsRecordAnEmptyRoot(t *testing.T) {
	w := newWorld(t, containment.Scoped)
	for _, tc := range []struct {
		req   application.Request
		plane *application.ExportPlane
		want  refusal.Code
	}{
		{application.Request{Method: "GET"}, outPlane, refusal.HostNotAllowed},
		{request("DELETE"), outPlane, refusal.MethodNotAllowed},
		{application.Request{Method: "GET", HostAllowed: true, HasBody: true}, nil, refusal.BodyNotAllowed},
		{get, nil, refusal.NoResourcePlane},
	} {
		_, _, err := listOf(t, newFiles(w, tc.plane), context.Background(), tc.req)
		if !refusal.Is(err, tc.want) {
			t.Fatalf("List(%+v) = %v; want %s", tc.req, err, tc.want)
		}
		got, _ := fields(w.lastEvent(t, "resource_list"))
		if got["root"] != "" || got["entry_count"] != int64(0) || got["outcome"] != string(tc.want) {
			t.Fatalf("resource_list = %v", got)
		}
	}
}

func TestGenerationIsReadOnceAndReportedEverywhere(t *testing.T) {
	w := newWorld(t, containment.Advisory)
	w.write(t, "out/r.txt", "r")
	files := newFiles(w, outPlane)
	tasks := application.NewTasks(w.session)
	if _, err := tasks.Terminal("completed"); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Terminal("cancelled"); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Terminal("paused"); !refusal.Is(err, refusal.InvalidInput) {
		t.Fatalf("Terminal(paused) = %v", err)
	}
	gen, listing, err := listOf(t, files, context.Background(), get)
	if err != nil || gen != 2 || listing.Generation != 2 {
		t.Fatalf("List generation %d/%v, %v; want 2", gen, listing, err)
	}
	got, _ := fields(w.lastEvent(t, "resource_list"))
	if got["generation"] != uint64(2) {
		t.Fatalf("traced generation %v", got["generation"])
	}
}
