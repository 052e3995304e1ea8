package manifest

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The accepted forms, stated the way a diagnostic states them after the field's name.
const (
	byteCountForm = "must be a byte count, optionally suffixed Ki/Mi/Gi"
	durationForm  = "must be a duration: an integer, optionally suffixed s/m/h/d"
	positiveForm  = "must be greater than zero"
	rootForm      = "must be a relative path inside the workdir"
	afterTaskForm = "must be 'exit' or 'sleep'"
)

// ByteCount is a positive number of bytes that fits in an int64. The only ways to obtain one
// are ParseByteCount and Decode; the zero value is not a valid count.
type ByteCount struct{ n int64 }

// Int64 returns the count of bytes.
func (b ByteCount) Int64() int64 { return b.n }

// defaultMaxBytes is max_bytes when a plane does not declare it: 10Mi.
var defaultMaxBytes = ByteCount{10 << 20}

// ParseByteCount reads the text form of a byte count: decimal digits with an optional suffix
// Ki, Mi or Gi (case-sensitive, powers of 1024), surrounding whitespace trimmed. Inner spaces,
// signs, other suffixes (10MB), zero and values above 2^63−1 are refused; the error's text is
// the accepted form, ready to follow a field name.
func ParseByteCount(s string) (ByteCount, error) {
	n, err := byteCounts.parse(s, false)
	return ByteCount{n}, err
}

// ParseDuration reads the text form of a duration: decimal digits (seconds) with an optional
// lowercase suffix s, m, h or d, surrounding whitespace trimmed. "90" is 90 seconds. Zero,
// signs, inner spaces, upper-case suffixes and durations beyond time.Duration's range are
// refused; the error's text is the accepted form, ready to follow a field name.
func ParseDuration(s string) (time.Duration, error) {
	n, err := durations.parse(s, false)
	return time.Duration(n), err
}

// ParseTTL reads a duration in the same syntax as ParseDuration but accepts zero, for the ttl
// an agent gives share-file (a ttl of 0 mints a handle that has already expired).
func ParseTTL(s string) (time.Duration, error) {
	n, err := durations.parse(s, true)
	return time.Duration(n), err
}

// quantity is a text syntax of digits and a unit suffix.
type quantity struct {
	form  string           // the accepted form: the error for text that does not parse
	units map[string]int64 // suffix → size of one unit; "" is the bare number's unit
	max   string           // what the form adds when a value is out of range
}

var (
	byteCounts = quantity{
		form:  byteCountForm,
		units: map[string]int64{"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30},
		max:   "at most 2^63-1 bytes",
	}
	durations = quantity{
		form: durationForm,
		units: map[string]int64{
			"": int64(time.Second), "s": int64(time.Second), "m": int64(time.Minute),
			"h": int64(time.Hour), "d": 24 * int64(time.Hour),
		},
		max: "at most about 292 years",
	}
)

// parse returns digits × unit, refusing the form, zero (unless allowZero) and overflow.
func (q quantity) parse(s string, allowZero bool) (int64, error) {
	s = strings.TrimSpace(s)
	suffix := strings.TrimLeft(s, "0123456789")
	digits := s[:len(s)-len(suffix)]
	unit, ok := q.units[suffix]
	if digits == "" || !ok {
		return 0, q.formError()
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, q.outOfRange()
	}
	if n == 0 && !allowZero {
		return 0, errors.New(positiveForm)
	}
	return n * unit, nil
}

// parseInt applies the quantity to a YAML integer: a count of its bare unit. A negative
// integer gets the form message, like any other text that is not the form.
func (q quantity) parseInt(text string) (int64, error) {
	v, err := coreInt(text)
	switch {
	case err == nil && v >= 0:
		return q.parse(strconv.FormatInt(v, 10), false)
	case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(text, "-"):
		return 0, q.outOfRange()
	}
	return 0, q.formError()
}

func (q quantity) formError() error { return errors.New(q.form) }

func (q quantity) outOfRange() error {
	return errors.New(q.form + ", " + q.max)
}

// coreInt reads a YAML 1.2 core-schema integer: [-+]?[0-9]+, 0o[0-7]+ or 0x[0-9a-fA-F]+.
func coreInt(text string) (int64, error) {
	switch {
	case strings.HasPrefix(text, "0o"):
		return strconv.ParseInt(text[2:], 8, 64)
	case strings.HasPrefix(text, "0x"):
		return strconv.ParseInt(text[2:], 16, 64)
	}
	return strconv.ParseInt(text, 10, 64)
}

// Root is a declared export root: trimmed, non-empty, relative, with no ".." component and no
// control character. It need not exist. The only ways to obtain one are ParseRoot and Decode.
type Root struct{ path string }

// ParseRoot applies the export root rule to a declared value. The error's text starts with the
// accepted form and says what broke it.
func ParseRoot(s string) (Root, error) {
	s = strings.TrimSpace(s)
	var why string
	switch {
	case s == "":
		why = "it is empty"
	case strings.HasPrefix(s, "/"):
		why = "it is absolute"
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		why = "it contains a control character"
	default:
		for _, c := range strings.Split(s, "/") {
			if c == ".." {
				why = `it has a ".." component`
			}
		}
	}
	if why != "" {
		return Root{}, errors.New(rootForm + ", but " + why)
	}
	return Root{s}, nil
}

// String returns the root as declared, trimmed: the text reported as "verbatim" on the wire.
func (r Root) String() string { return r.path }

// AfterTask is what the capsule does once its task ends: exit, or sleep and stay reachable.
type AfterTask string

// The two lifecycle.after_task values.
const (
	AfterTaskExit  AfterTask = "exit"
	AfterTaskSleep AfterTask = "sleep"
)

// ParseAfterTask accepts exactly "exit" or "sleep".
func ParseAfterTask(s string) (AfterTask, error) {
	switch a := AfterTask(s); a {
	case AfterTaskExit, AfterTaskSleep:
		return a, nil
	}
	return "", errors.New(afterTaskForm)
}

// Mode is the access an operator-plane export grants. Only read-only exists.
type Mode string

// ReadOnly is the one mode exports.files accepts.
const ReadOnly Mode = "read-only"
