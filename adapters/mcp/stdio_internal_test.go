package mcp

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestTheLineFilterPassesJSONAndAnswersTheRest pins stdioTransport's filter, one row per
// kind of line: JSON passes unchanged (an object, a batch, with CRLF), a blank line passes
// nothing, and a line that is not JSON, or is cut short at the end of the input, is answered
// -32700 and dropped.
func TestTheLineFilterPassesJSONAndAnswersTheRest(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		"not json",
		"",
		`[{"jsonrpc":"2.0","id":2,"method":"ping"}]` + "\r",
		`{"jsonrpc":"2.0","id":3,"method":"ping"`, // cut short
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
		`{"half":`, // the last line, without its newline
	}, "\n")
	var answers bytes.Buffer
	f := &lineFilter{in: io.NopCloser(nil), lines: bufio.NewReader(strings.NewReader(in)), answer: &answers}
	passed, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `[{"jsonrpc":"2.0","id":2,"method":"ping"}]` + "\r\n" +
		`{"jsonrpc":"2.0","id":4,"method":"ping"}` + "\n"
	if string(passed) != want {
		t.Errorf("passed %q, want %q", passed, want)
	}
	if got := answers.String(); got != strings.Repeat(string(parseError), 3) {
		t.Errorf("answered %q, want three parse errors", got)
	}
}
