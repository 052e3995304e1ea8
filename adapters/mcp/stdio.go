package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLine is the longest line the stdio transport takes: the SDK's own frame limit.
const maxLine = sdk.DefaultMaxLineLength

// The JSON-RPC 2.0 error answers for a line the SDK would otherwise end the session on.
var (
	parseError = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not JSON"}}` + "\n")
	tooLong    = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is longer than ` +
		strconv.Itoa(maxLine>>20) + ` MiB"}}` + "\n")
)

// stdioTransport is the SDK's IOTransport over in and out, with a line filter in front of it:
// the SDK decodes its input as one JSON stream and ends the session at the first byte that
// is not JSON, so a line that is not JSON is answered here with JSON-RPC's -32700 (id null,
// as JSON-RPC 2.0 says for a request whose id cannot be known) and skipped, and the session
// goes on. Every other line, valid JSON, reaches the SDK unchanged, which answers what it
// understands and refuses the rest as it does. The SDK writes each message with one Write;
// a lock shared with the filter's answers keeps every line whole.
func stdioTransport(in io.ReadCloser, out io.Writer) *sdk.IOTransport {
	w := &lockedWriter{w: out}
	return &sdk.IOTransport{Reader: &lineFilter{in: in, lines: bufio.NewReaderSize(in, 64<<10), answer: w}, Writer: w, MaxLineLength: maxLine}
}

// lineFilter passes on the lines of in that are JSON, and answers the others.
type lineFilter struct {
	in      io.Closer
	lines   *bufio.Reader
	answer  io.Writer
	pending []byte // the rest of the line being passed on
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		line, err := f.next()
		if len(line) > 0 {
			f.pending = line
			break
		}
		if err != nil {
			return 0, err
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// next returns the next line to pass on (with its newline), answering and dropping the lines
// that are not JSON; nil with the error that ended the input.
func (f *lineFilter) next() ([]byte, error) {
	var line []byte
	for {
		chunk, err := f.lines.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			line = nil
			if errors.Is(err, bufio.ErrBufferFull) {
				if err := f.skipLine(); err != nil {
					return nil, err
				}
			}
			_, werr := f.answer.Write(tooLong)
			return nil, werr
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			return nil, err // a blank line, or the end of the input
		}
		if json.Valid(line) {
			return line, nil // an error after it comes with the next call
		}
		if _, werr := f.answer.Write(parseError); werr != nil {
			return nil, werr
		}
		if err != nil {
			return nil, err
		}
		line = nil
	}
}

// skipLine drops the rest of a line too long to take.
func (f *lineFilter) skipLine() error {
	for {
		_, err := f.lines.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

func (f *lineFilter) Close() error { return f.in.Close() }

// lockedWriter serializes whole writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Close does nothing: stdout outlives the session.
func (l *lockedWriter) Close() error { return nil }
