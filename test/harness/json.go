package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// objectKeys returns the top-level keys of the JSON object raw, in document order.
func objectKeys(raw []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object: %q", raw)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// RequireKeys fails the test unless raw is a JSON object with exactly want as its keys, in
// that order.
func RequireKeys(t testing.TB, what string, raw []byte, want ...string) {
	t.Helper()
	got, err := objectKeys(raw)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s keys %q, want exactly %q in that order: %s", what, got, want, raw)
	}
}

// Object decodes raw as one JSON object and nothing after it, numbers as json.Number.
func Object(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%q is not a JSON object: %v", raw, err)
	}
	if dec.More() {
		t.Fatalf("%q has trailing data", raw)
	}
	return m
}

// Encode renders v as compact JSON without HTML escaping, the way docs/http-api.md requires every
// response body to be written.
func Encode(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(buf.String(), "\n")
}

// SHA256Hex is the lowercase hex sha256 of b.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ETag is the etag docs/http-api.md ("Reading a file") requires for body: "sha256:<hex>", quotes included.
func ETag(body []byte) string { return `"sha256:` + SHA256Hex(body) + `"` }
