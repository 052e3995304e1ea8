// Package sendrate is the least rate at which a client must take a body that holds a
// reservation (--min-send-rate; docs/operator-guide.md, "Memory and connection bounds"): at
// least Bytes in every Per of the send, once the first Per has passed. Per is both the grace a
// send starts with and the window its average is taken over, so a client that took the first
// megabytes into its socket buffers at once and then stopped is judged on what it took since.
package sendrate

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/resplane/resplane/domain/manifest"
)

// Rate is a minimum rate; the zero Rate is off.
type Rate struct {
	Bytes int64
	Per   time.Duration
}

// Default is the rate when --min-send-rate is not given: 16 KiB/s (128 kbit/s, which a slow
// WAN still meets) averaged over 10 s
// (docs/decisions/0141-min-send-rate-160ki-per-10s-sliding.md).
var Default = Rate{Bytes: 160 << 10, Per: 10 * time.Second}

// Off is the text that turns the rule off.
const Off = "off"

// errForm is the accepted form, ready to follow the flag's name.
var errForm = errors.New(`must be "off", or a size and a duration as SIZE/DURATION, such as 160Ki/10s ` +
	`(at least SIZE bytes in every DURATION of a send): SIZE as digits optionally suffixed Ki/Mi/Gi, ` +
	`DURATION in Go syntax (500ms) or as seconds optionally suffixed s/m/h, or just s, m or h for one of them`)

// Parse reads a rate: "off", or SIZE/DURATION, where SIZE is a byte count (manifest syntax)
// and DURATION a Go duration, manifest seconds, or a bare unit (16Ki/s is 16 KiB every second).
// Both must be above zero.
func Parse(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == Off {
		return Rate{}, nil
	}
	size, per, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, errForm
	}
	bytes, err := manifest.ParseByteCount(size)
	if err != nil {
		return Rate{}, errForm
	}
	if per == "s" || per == "m" || per == "h" {
		per = "1" + per
	}
	d, err := time.ParseDuration(per)
	if err != nil {
		d, err = manifest.ParseDuration(per)
	}
	if err != nil || d <= 0 {
		return Rate{}, errForm
	}
	return Rate{Bytes: bytes.Int64(), Per: d}, nil
}

// IsOff reports whether the rate asks for nothing.
func (r Rate) IsOff() bool { return r.Bytes <= 0 || r.Per <= 0 }

// String is the rate as Parse reads it.
func (r Rate) String() string {
	if r.IsOff() {
		return Off
	}
	size := strconv.FormatInt(r.Bytes, 10)
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
		if r.Bytes%(1<<u.shift) == 0 {
			size = strconv.FormatInt(r.Bytes>>u.shift, 10) + u.suffix
			break
		}
	}
	return size + "/" + r.Per.String()
}

// Meter judges one send against a rate. It keeps a sample per check, and drops those older
// than one Per before the latest check, so its memory follows Per over the checks' interval.
type Meter struct {
	rate    Rate
	samples []sample
}

type sample struct {
	at   time.Time
	sent int64
}

// Start begins judging a send that starts at start.
func (r Rate) Start(start time.Time) *Meter {
	return &Meter{rate: r, samples: []sample{{at: start}}}
}

// Slow reports whether the send, having taken sent bytes by now, falls below the rate: once
// one Per has passed since it started, the bytes taken since the latest check at least one Per
// before now must be at least Bytes for each Per since that check. Checks must come in time
// order.
func (m *Meter) Slow(now time.Time, sent int64) bool {
	if m.rate.IsOff() {
		return false
	}
	base := -1
	for i, s := range m.samples {
		if now.Sub(s.at) < m.rate.Per {
			break
		}
		base = i
	}
	m.samples = append(m.samples, sample{at: now, sent: sent})
	if base < 0 {
		return false // within the grace
	}
	from := m.samples[base]
	m.samples = m.samples[base:]
	need := float64(m.rate.Bytes) * float64(now.Sub(from.at)) / float64(m.rate.Per)
	return float64(sent-from.sent) < need
}
