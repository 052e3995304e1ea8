package sendrate_test

import (
	"testing"
	"time"

	"github.com/resplane/resplane/domain/sendrate"
)

func TestParseAcceptsOffOrSizePerDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want sendrate.Rate
		text string
	}{
		{"off", sendrate.Rate{}, "off"},
		{" off ", sendrate.Rate{}, "off"},
		{"160Ki/10s", sendrate.Default, "160Ki/10s"},
		{"16Ki/s", sendrate.Rate{Bytes: 16 << 10, Per: time.Second}, "16Ki/1s"},
		{"1Mi/m", sendrate.Rate{Bytes: 1 << 20, Per: time.Minute}, "1Mi/1m0s"},
		{"64Ki/500ms", sendrate.Rate{Bytes: 64 << 10, Per: 500 * time.Millisecond}, "64Ki/500ms"},
		{"1000/1m30s", sendrate.Rate{Bytes: 1000, Per: 90 * time.Second}, "1000/1m30s"},
		{"2Gi/30", sendrate.Rate{Bytes: 2 << 30, Per: 30 * time.Second}, "2Gi/30s"},
	} {
		got, err := sendrate.Parse(tc.in)
		if err != nil || got != tc.want || got.String() != tc.text {
			t.Errorf("Parse(%q) = %+v (%s), %v; want %+v (%s)", tc.in, got, got, err, tc.want, tc.text)
		}
	}
}

func TestParseRefusesAnythingElseNamingTheForm(t *testing.T) {
	for _, in := range []string{"", "16Ki", "16KiB/s", "16Ki/", "/10s", "0/10s", "16Ki/0s", "16Ki/-1s",
		"-1/10s", "16Ki/10x", "16Ki/s/s", "on", "Off", "16 Ki/s"} {
		if got, err := sendrate.Parse(in); err == nil {
			t.Errorf("Parse(%q) = %+v; want a refusal", in, got)
		} else if want := `must be "off", or a size and a duration as SIZE/DURATION, such as 160Ki/10s`; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Errorf("Parse(%q): %q does not name the accepted form", in, err)
		}
	}
}

// TestASendIsJudgedOverEveryWindowAfterTheFirst pins the meter: nothing is slow within the
// first Per; after it, what counts is what the client took over the latest Per, so a burst at
// the start (the socket buffers filling) does not excuse a stall later.
func TestASendIsJudgedOverEveryWindowAfterTheFirst(t *testing.T) {
	start := time.Unix(1000, 0)
	rate := sendrate.Rate{Bytes: 10_000, Per: 10 * time.Second}
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	type check struct {
		at   float64
		sent int64
		slow bool
	}
	for _, tc := range []struct {
		name   string
		checks []check
	}{
		{"nothing is slow within the grace", []check{{1, 0, false}, {5, 0, false}, {9.9, 0, false}}},
		{"a send that took nothing is slow once the grace is over", []check{{1, 0, false}, {10, 0, true}}},
		{"exactly the rate is enough", []check{{1, 1000, false}, {10, 10_000, false}, {20, 20_000, false}}},
		{"a burst at the start does not excuse a stall", []check{{1, 5 << 20, false}, {10, 5 << 20, false}, {11, 5 << 20, true}}},
		{"the window slides check by check", []check{{1, 0, false}, {2, 20_000, false}, {11, 20_000, false}, {12, 20_000, true}}},
		{"a long gap between checks is judged over the gap", []check{{30, 29_000, true}}},
		{"a steady client is never slow", []check{{1, 2000, false}, {6, 12_000, false}, {11, 22_000, false}, {16, 32_000, false}, {21, 42_000, false}}},
	} {
		m := rate.Start(start)
		for i, c := range tc.checks {
			if got := m.Slow(at(c.at), c.sent); got != c.slow {
				t.Errorf("%s: check %d at %vs with %d bytes: slow %v, want %v", tc.name, i, c.at, c.sent, got, c.slow)
			}
		}
	}
}

func TestAnOffRateIsNeverSlow(t *testing.T) {
	m := sendrate.Rate{}.Start(time.Unix(0, 0))
	if m.Slow(time.Unix(3600, 0), 0) {
		t.Fatal("an off rate judged a send slow")
	}
}
