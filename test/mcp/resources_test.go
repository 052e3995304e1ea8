package mcp_test

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// filesManifest declares the operator plane with a max_bytes above resplane mcp's 256 KiB
// inline limit, so a file can be servable and still too large to inline.
const filesManifest = `name: Echo
exports:
  files:
    root: out/
    mode: read-only
    max_bytes: 300Ki
`

var (
	binary  = "\x00\x01\x02\xfe\xff binary"
	inlined = strings.Repeat("i", 256<<10)
	tooBig  = strings.Repeat("b", 256<<10+1)
)

func filesCapsule(t *testing.T) *harness.Process {
	t.Helper()
	return harness.Start(t, harness.Capsule{Manifest: filesManifest, Files: fixture.Layout{
		"out/notes/report.md": "# report\n",
		"out/data.bin":        binary,
		"out/data.json":       `{"ok":true}`,
		"out/inlined.txt":     inlined,
		"out/big.txt":         tooBig,
		"out/huge.txt":        strings.Repeat("h", 301<<10),
		"out/latin1.txt":      "caf\xe9",
	}})
}

func read(t *testing.T, s *session, uri string) (*sdk.ResourceContents, error) {
	t.Helper()
	res, err := s.ReadResource(ctx(t), &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, err
	}
	if len(res.Contents) != 1 {
		t.Fatalf("%d contents, want 1", len(res.Contents))
	}
	return res.Contents[0], nil
}

// rpcData returns the error's JSON-RPC code and its data object.
func rpcData(t *testing.T, err error) (int64, map[string]any) {
	t.Helper()
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) {
		t.Fatalf("error %v (%T) is not a JSON-RPC error", err, err)
	}
	var data map[string]any
	if err := json.Unmarshal(wire.Data, &data); err != nil {
		t.Fatalf("error data %s: %v", wire.Data, err)
	}
	return wire.Code, data
}

func TestResourcesAreTheListedFiles(t *testing.T) {
	p := filesCapsule(t)
	s := connect(t, "--files", p.Ready.URL)
	listed, err := s.ListResources(ctx(t), &sdk.ListResourcesParams{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		size int
		mime string
	}{
		"big.txt": {len(tooBig), "text/plain"}, "data.bin": {len(binary), "application/octet-stream"},
		"data.json": {11, "application/json"}, "huge.txt": {301 << 10, "text/plain"},
		"inlined.txt": {len(inlined), "text/plain"}, "latin1.txt": {4, "text/plain"},
		"notes/report.md": {9, "text/markdown"},
	}
	if len(listed.Resources) != len(want) {
		t.Fatalf("%d resources, want %d", len(listed.Resources), len(want))
	}
	for _, r := range listed.Resources {
		w, ok := want[r.Name]
		if !ok || r.Size != int64(w.size) || r.MIMEType != w.mime || r.URI != p.Ready.URL+"/resources/files/"+r.Name {
			t.Errorf("resource %+v; want name, size %d, %s and the file's URL", r, w.size, w.mime)
		}
	}
}

func TestAReadReturnsTextOrABlobVerified(t *testing.T) {
	p := filesCapsule(t)
	s := connect(t, "--files", p.Ready.URL)
	base := p.Ready.URL + "/resources/files/"
	for _, tc := range []struct {
		rule, path, text, blob string
	}{
		{"a text type in UTF-8 is text", "notes/report.md", "# report\n", ""},
		{"JSON is text", "data.json", `{"ok":true}`, ""},
		{"a file of exactly the inline limit is returned", "inlined.txt", inlined, ""},
		{"an unknown type is a blob", "data.bin", "", binary},
		{"a text type that is not UTF-8 is a blob", "latin1.txt", "", "caf\xe9"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			c, err := read(t, s, base+tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if c.Text != tc.text || string(c.Blob) != tc.blob || c.URI != base+tc.path {
				t.Fatalf("contents %q / %q at %s; want %q / %q", truncate(c.Text), truncate(string(c.Blob)), c.URI, truncate(tc.text), truncate(tc.blob))
			}
			if c.Meta["sha256"] != harness.SHA256Hex([]byte(tc.text+tc.blob)) {
				t.Fatalf("meta %v; want the verified sha256", c.Meta)
			}
		})
	}
}

func truncate(s string) string { return s[:min(len(s), 40)] }

func TestAFileRewrittenBetweenListAndReadIsReadAsItIsNow(t *testing.T) {
	p := filesCapsule(t)
	s := connect(t, "--files", p.Ready.URL)
	if _, err := s.ListResources(ctx(t), &sdk.ListResourcesParams{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.Workdir, "out/notes/report.md"), []byte("# rewritten\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := read(t, s, p.Ready.URL+"/resources/files/notes/report.md")
	if err != nil || c.Text != "# rewritten\n" || c.Meta["sha256"] != harness.SHA256Hex([]byte("# rewritten\n")) {
		t.Fatalf("read %+v, %v; want the rewritten bytes, verified", c, err)
	}
}

func TestAReadThatCannotBeAnsweredIsAnErrorWithTheServicesCode(t *testing.T) {
	p := filesCapsule(t)
	s := connect(t, "--files", p.Ready.URL)
	base := p.Ready.URL + "/resources/files/"
	t.Run("a file above the inline limit names its size and the command that fetches it", func(t *testing.T) {
		_, err := read(t, s, base+"big.txt")
		_, data := rpcData(t, err)
		command := "resplane files get '" + p.Ready.URL + "' 'big.txt' -o FILE"
		msg, _ := data["message"].(string)
		if data["error"] != "too_large_for_mcp" || data["size"] != float64(len(tooBig)) || data["command"] != command ||
			!strings.Contains(msg, strconv.Itoa(len(tooBig))+" bytes") || !strings.Contains(msg, command) || !strings.Contains(msg, base+"big.txt") {
			t.Fatalf("error data %v", data)
		}
	})
	for _, tc := range []struct{ rule, path, code string }{
		{"a file above max_bytes is the service's too_large", "huge.txt", "too_large"},
		{"a missing file is the service's not_found", "nope.txt", "not_found"},
		{"a directory is the service's not_a_regular_file", "notes", "not_a_regular_file"},
		{"an escape is outside_root by the service's own rules", "notes%2F..%2F..%2Fmurmur.yaml", "outside_root"},
		{"an invalid escape is kept literally, as the service keeps it", "100%zz", "not_found"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := read(t, s, base+tc.path)
			code, data := rpcData(t, err)
			if data["error"] != tc.code || data["message"] == "" || data["uri"] != base+tc.path || code != -32602 {
				t.Fatalf("error %d %v; want %s with the service's message", code, data, tc.code)
			}
		})
	}
	t.Run("a URI that is not a file of this service is not_found", func(t *testing.T) {
		_, err := read(t, s, "file:///etc/passwd")
		if _, data := rpcData(t, err); data["error"] != "not_found" {
			t.Fatalf("error data %v; want not_found", data)
		}
	})
}

func TestBothFlagsOfferToolsAndResourcesAtOnce(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: filesManifest + "  peer_files:\n    root: out/\n", Files: fixture.Layout{"out/a.md": "a"}})
	s := connect(t, "--control", p.Ready.Control, "--files", p.Ready.URL)
	tools, err := s.ListTools(ctx(t), &sdk.ListToolsParams{})
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "share-file" {
		t.Fatalf("tools %+v, %v", tools, err)
	}
	resources, err := s.ListResources(ctx(t), &sdk.ListResourcesParams{})
	if err != nil || len(resources.Resources) != 1 || resources.Resources[0].Name != "a.md" {
		t.Fatalf("resources %+v, %v", resources, err)
	}
}

// TestAFailureIsLoggedWithoutAToken gives resplane mcp a --files URL whose path holds a
// token-shaped segment and nothing listening: the failure's cause, logged on stderr, holds the
// URL, and the log must show <handle:…> in its place.
func TestAFailureIsLoggedWithoutAToken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := connect(t, "--files", "http://"+addr+"/mh1.eyJ2IjoxfQ.c2lnbmF0dXJl")
	if _, err := s.ListResources(ctx(t), &sdk.ListResourcesParams{}); err == nil {
		t.Fatalf("listing an unreachable service succeeded")
	}
	_, data := rpcData(t, func() error { _, err := s.ListResources(ctx(t), &sdk.ListResourcesParams{}); return err }())
	if data["error"] != "service_unreachable" {
		t.Fatalf("error data %v; want service_unreachable", data)
	}
	if log := s.stderr.String(); !strings.Contains(log, "<handle:") || tokenPattern.MatchString(log) {
		t.Fatalf("stderr %q; want the failure logged with the token redacted", log)
	}
}
