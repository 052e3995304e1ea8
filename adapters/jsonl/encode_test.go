package jsonl

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/trace"
)

// encodingJSON is the reference appendFields must match: each value through encoding/json's
// Encoder without HTML escaping, strings made valid UTF-8 first (each invalid byte a U+FFFD,
// which encoding/json would otherwise write as the escape \ufffd).
func encodingJSON(t testing.TB, fields []trace.Field) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		v := f.Value
		switch s := v.(type) {
		case string:
			v = valid(s)
		case []string:
			if s != nil {
				valids := make([]string, len(s))
				for j := range s {
					valids[j] = valid(s[j])
				}
				v = valids
			}
		}
		for j, part := range []any{valid(f.Key), v} {
			if err := enc.Encode(part); err != nil {
				t.Fatal(err)
			}
			b.Truncate(b.Len() - 1) // Encode's newline
			if j == 0 {
				b.WriteByte(':')
			}
		}
	}
	return b.String()
}

func valid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s)) // every invalid byte becomes U+FFFD
}

// everyByte holds each byte value once, so every ASCII escape rule and every lone invalid
// byte is exercised.
var everyByte = func() string {
	var b strings.Builder
	for c := range 256 {
		b.WriteByte(byte(c))
	}
	return b.String()
}()

func TestAppendFieldsMatchesEncodingJSON(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields []trace.Field
	}{
		{"no fields", nil},
		{"every value type", []trace.Field{
			{Key: "null", Value: nil}, {Key: "text", Value: "out/report.txt"}, {Key: "int", Value: int64(-42)},
			{Key: "uint", Value: uint64(18446744073709551615)}, {Key: "true", Value: true}, {Key: "false", Value: false},
			{Key: "list", Value: []string{"a", "b"}}, {Key: "empty list", Value: []string{}}, {Key: "nil list", Value: []string(nil)},
		}},
		{"every byte value", []trace.Field{{Key: "bytes", Value: everyByte}}},
		{"escapes named and numbered", []trace.Field{{Key: "s", Value: "\"\\\b\f\n\r\t\x00\x1f\x7f"}}},
		{"HTML characters raw", []trace.Field{{Key: "s", Value: "<a href='x'>&amp;</a>"}}},
		{"line and paragraph separators escaped", []trace.Field{{Key: "s", Value: "a\u2028b\u2029c\u2027d\u202a"}}},
		{"multi-byte and invalid mixed", []trace.Field{{Key: "s", Value: "é\xffñ\xe2\x82日本\xc0\xaf\xed\xa0\x80😀"}}},
		{"invalid bytes in a list", []trace.Field{{Key: "l", Value: []string{"ok", "bad\xfe", "\u2028"}}}},
		{"a key that needs escaping", []trace.Field{{Key: "k\"\n\xff", Value: int64(1)}}},
		{"another type through encoding/json", []trace.Field{{Key: "float", Value: 1.5}, {Key: "map", Value: map[string]string{"<a>": "b&c"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := appendFields(nil, tc.fields)
			if err != nil {
				t.Fatal(err)
			}
			if want := encodingJSON(t, tc.fields); string(got) != want {
				t.Errorf("appendFields = %q\nencoding/json = %q", got, want)
			}
		})
	}
}

func TestAppendFieldsNamesTheFieldItCannotEncode(t *testing.T) {
	_, err := appendFields(nil, []trace.Field{{Key: "ok", Value: "x"}, {Key: "channel", Value: make(chan int)}})
	if err == nil || !strings.Contains(err.Error(), "field channel") {
		t.Errorf("err = %v, want an error naming the field", err)
	}
}

// FuzzAppendString checks appendString against encoding/json on any string (make fuzz).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", everyByte, "\u2028\u2029", "é\xff\xc0\xaf", "<>&", `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fields := []trace.Field{{Key: "s", Value: s}}
		got, err := appendFields(nil, fields)
		if err != nil {
			t.Fatal(err)
		}
		if want := encodingJSON(t, fields); string(got) != want {
			t.Fatalf("appendFields = %q\nencoding/json = %q", got, want)
		}
		if !json.Valid(got[len(`"s":`):]) {
			t.Fatalf("not valid JSON: %q", got)
		}
	})
}

// BenchmarkAppendFields encodes a served read's fields with appendFields and with the
// encoding/json reference it replaced (docs/benchmarks.md, "What the Go benchmarks measure").
func BenchmarkAppendFields(b *testing.B) {
	fields := trace.ResourceRead{
		Path: "out/report.txt", Bytes: 1024, Generation: 3, Containment: "sealed",
		SHA256: "868db1c52a946cae0278871d41b60fcdef206b933946bf8668a42ac1ea443412",
	}.Fields()
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = appendFields(buf[:0], fields); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = encodingJSON(b, fields)
		}
	})
}
