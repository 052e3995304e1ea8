package mcp

import (
	"mime"
	"path"
	"strings"
)

// The types of the files agents commonly write, registered over the system's table so that a
// resource's type does not depend on the machine resplane mcp runs on.
func init() {
	for ext, typ := range map[string]string{
		".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain", ".log": "text/plain",
		".csv": "text/csv", ".tsv": "text/tab-separated-values", ".html": "text/html", ".css": "text/css",
		".json": "application/json", ".jsonl": "application/jsonl", ".ndjson": "application/x-ndjson",
		".yaml": "application/yaml", ".yml": "application/yaml", ".toml": "application/toml",
		".xml": "application/xml", ".svg": "image/svg+xml", ".js": "text/javascript",
		".py": "text/x-python", ".go": "text/x-go", ".rs": "text/x-rust", ".sh": "application/x-sh",
		".diff": "text/x-diff", ".patch": "text/x-diff",
	} {
		_ = mime.AddExtensionType(ext, typ)
	}
}

// mimeType is the media type for p's extension (without parameters), or
// application/octet-stream when none is known.
func mimeType(p string) string {
	if t, _, err := mime.ParseMediaType(mime.TypeByExtension(strings.ToLower(path.Ext(p)))); err == nil {
		return t
	}
	return "application/octet-stream"
}

// textualTypes are the media types outside text/ whose content is text.
var textualTypes = map[string]bool{
	"application/json": true, "application/jsonl": true, "application/x-ndjson": true, "application/yaml": true,
	"application/toml": true, "application/xml": true, "application/javascript": true, "application/x-sh": true,
}

// textual reports whether content of type t is text, to be returned as such when it is
// valid UTF-8.
func textual(t string) bool {
	return strings.HasPrefix(t, "text/") || textualTypes[t] || strings.HasSuffix(t, "+json") || strings.HasSuffix(t, "+xml")
}
