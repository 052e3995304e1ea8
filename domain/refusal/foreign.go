package refusal

import (
	"regexp"
	"strconv"
)

// foreignCodeChars bounds what resplane accepts from another party (a peer, or the service
// the operator's client talks to) as an error code, so a hostile one cannot put arbitrary text
// into our trace, answers or output.
var foreignCodeChars = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Foreign is the outcome of another party's non-200 answer: the party's own error code when its
// body carried a plausible one, else http_<status>. A redirect is never followed and is always
// http_<status>, and so is a code "ok", the trace's outcome of a success, which would read as
// one (docs/decisions/0014-peer-error-codes-passed-on-only-if-they-match.md).
func Foreign(status int, code string) Code {
	if status/100 != 3 && foreignCodeChars.MatchString(code) && code != "ok" {
		return Code(code)
	}
	return Code("http_" + strconv.Itoa(status))
}
