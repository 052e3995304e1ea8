package rawtarget

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/resplane/resplane/domain/pathpolicy"
)

// FuzzRepair pins the three promises of the repair (docs/http-api.md, "The raw-target
// repair") against net/url, the parser net/http runs on the target:
//
//   - a target net/url accepts is never changed;
//   - a repaired origin-form target without control bytes is accepted by net/url, whose decoded
//     path is then exactly our own once-decoding of the path as sent, and whose query is the
//     query as sent;
//   - whatever the target, the repair changes no decoded byte of the path, leaves everything
//     from the first "?" on alone, and is idempotent.
func FuzzRepair(f *testing.F) {
	f.Add("/resources/files/%zz")
	f.Add("/resources/files/100%?q=%")
	f.Fuzz(func(t *testing.T, target string) {
		got := repair(target)
		if _, err := url.ParseRequestURI(target); err == nil && got != target {
			t.Fatalf("repair changed the valid target %q into %q", target, got)
		}
		if again := repair(got); again != got {
			t.Fatalf("repair is not idempotent: %q -> %q -> %q", target, got, again)
		}
		if !strings.HasPrefix(target, "/") {
			if got != target {
				t.Fatalf("repair changed %q, which is not origin-form, into %q", target, got)
			}
			return
		}
		path, query, hasQuery := strings.Cut(target, "?")
		gotPath, gotQuery, gotHasQuery := strings.Cut(got, "?")
		if gotQuery != query || gotHasQuery != hasQuery {
			t.Fatalf("repair(%q) = %q changed the query", target, got)
		}
		if pathpolicy.DecodeOnce(gotPath) != pathpolicy.DecodeOnce(path) {
			t.Fatalf("repair(%q) = %q changed the decoded path", target, got)
		}
		if hasControlByte(target) {
			return // documented as not repaired: net/http keeps its bare 400
		}
		u, err := url.ParseRequestURI(got)
		if err != nil {
			t.Fatalf("net/url refuses the repaired target %q (sent %q): %v", got, target, err)
		}
		if u.Path != pathpolicy.DecodeOnce(path) || u.RawQuery != query {
			t.Fatalf("net/url reads the repaired %q as path %q query %q; want %q and %q",
				got, u.Path, u.RawQuery, pathpolicy.DecodeOnce(path), query)
		}
	})
}

// FuzzConnRecordsTheSentTarget feeds arbitrary bytes, in chunks of arbitrary size, through a
// connection from NewListener and checks what net/http would read from it:
//
//   - the bytes handed on are the bytes sent, except that the target of the first line (split
//     the way net/http splits a request line) is replaced by its repair;
//   - the recorded target is exactly the target as sent, and nothing is recorded when the first
//     line is missing, too long or not three space-separated fields;
//   - a request net/http accepts as sent passes through byte for byte;
//   - for an origin-form target without control bytes net/http never fails on the target, and
//     when it reads the request, OriginalTarget returns the target as sent.
func FuzzConnRecordsTheSentTarget(f *testing.F) {
	f.Add([]byte("GET /resources/files/%zz HTTP/1.1\r\nHost: x\r\n\r\n"), uint8(1), false)
	f.Add([]byte("POST /a%4 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n%zz"), uint8(7), true)
	f.Fuzz(func(t *testing.T, sent []byte, chunk uint8, eofWithData bool) {
		c := &conn{Conn: &chunkedConn{rest: sent, chunk: max(int(chunk), 1), eofWithData: eofWithData}, scanning: true}
		out, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		target, want, ok := splitFirstLine(sent)
		if !ok {
			want = sent
		}
		if !bytes.Equal(out, want) {
			t.Fatalf("sent %q\nhanded on %q\nwant      %q", sent, out, want)
		}
		if c.recorded != ok || c.target != target {
			t.Fatalf("recorded %v %q; want %v %q", c.recorded, c.target, ok, target)
		}
		if asSent, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(sent))); err == nil {
			if !bytes.Equal(out, sent) {
				t.Fatalf("changed a request net/http accepts (target %q):\n%q", asSent.RequestURI, out)
			}
		}
		if !ok || !strings.HasPrefix(target, "/") || hasControlByte(target) {
			return
		}
		r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(out)))
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			t.Fatalf("net/http refuses the repaired target of %q: %v", sent, err)
		}
		if err != nil {
			return // refused for something that is not the target: method, version, headers
		}
		r = r.WithContext(ConnContext(context.Background(), c))
		if got := OriginalTarget(r); got != target {
			t.Fatalf("OriginalTarget = %q; want the target as sent, %q", got, target)
		}
	})
}

// splitFirstLine is the fuzz test's own reading of what the wrapper must do: it finds the first
// line within MaxRequestLine bytes, splits it into three fields at its first two spaces (as
// net/http does) and returns the target as sent and the bytes with only that target repaired.
func splitFirstLine(sent []byte) (target string, repaired []byte, ok bool) {
	end := bytes.IndexByte(sent, '\n')
	if end < 0 || end >= MaxRequestLine {
		return "", nil, false
	}
	line := string(sent[:end])
	ending := "\n"
	if strings.HasSuffix(line, "\r") {
		line, ending = line[:len(line)-1], "\r\n"
	}
	fields := strings.SplitN(line, " ", 3)
	if len(fields) != 3 {
		return "", nil, false
	}
	head := fields[0] + " " + repair(fields[1]) + " " + fields[2] + ending
	return fields[1], append([]byte(head), sent[end+1:]...), true
}

func hasControlByte(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}

// chunkedConn is a connection whose reads return at most chunk bytes of rest at a time, then
// io.EOF: together with the last bytes when eofWithData, else on the read after them.
type chunkedConn struct {
	net.Conn
	rest        []byte
	chunk       int
	eofWithData bool
}

func (c *chunkedConn) Read(p []byte) (int, error) {
	if len(c.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.rest[:min(c.chunk, len(c.rest))])
	c.rest = c.rest[n:]
	if c.eofWithData && len(c.rest) == 0 {
		return n, io.EOF
	}
	return n, nil
}
