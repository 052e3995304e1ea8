package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/resplane/resplane/domain/trace"
)

// appendFields appends the fields as the members of a JSON object, in the given order and
// without the braces: "key":value pairs joined by commas.
//
// The output is byte for byte what encoding/json's Encoder writes with SetEscapeHTML(false),
// except that each byte that is not part of valid UTF-8 becomes a raw U+FFFD rather than the
// escape \ufffd (TestAppendFieldsMatchesEncodingJSON). The value types trace.Field names are
// appended directly, without reflection or an allocation per field; any other type goes
// through encoding/json.
func appendFields(b []byte, fields []trace.Field) ([]byte, error) {
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, f.Key)
		b = append(b, ':')
		var err error
		if b, err = appendValue(b, f.Value); err != nil {
			return b, fmt.Errorf("field %s: %w", f.Key, err)
		}
	}
	return b, nil
}

func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case []string:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		return append(b, ']'), nil
	}
	var encoded bytes.Buffer
	enc := json.NewEncoder(&encoded)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	return append(b, bytes.TrimSuffix(encoded.Bytes(), []byte("\n"))...), nil
}

// appendString appends s as a JSON string the way encoding/json does without HTML escaping:
// '"', '\\' and control characters escaped (\b \f \n \r \t by name, the rest as \u00XX),
// U+2028 and U+2029 escaped, every other character raw; each invalid byte is a raw U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0 // s[start:i] is still to be copied as it is
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = utf8.AppendRune(b, utf8.RuneError)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
