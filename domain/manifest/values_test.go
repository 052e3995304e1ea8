package manifest

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestByteCountAcceptsDigitsWithAnOptionalBinarySuffix(t *testing.T) {
	for in, want := range map[string]int64{
		"1":                   1,
		"10485760":            10485760,
		"1Ki":                 1024,
		"10Mi":                10 << 20,
		"1Gi":                 1 << 30,
		"  64Ki \t":           64 << 10,
		"007":                 7,
		"9223372036854775807": 1<<63 - 1,
		"8589934591Gi":        8589934591 << 30,
	} {
		got, err := ParseByteCount(in)
		if err != nil || got.Int64() != want {
			t.Errorf("ParseByteCount(%q) = %d, %v; want %d", in, got.Int64(), err, want)
		}
	}
}

func TestByteCountRefusals(t *testing.T) {
	const form, zero = byteCountForm, positiveForm
	for _, tc := range []struct{ in, want string }{
		{"", form},
		{"Mi", form},
		{"10MB", form},
		{"10mi", form},
		{"10 Mi", form},
		{"1 024", form},
		{"10Ki5", form},
		{"-1", form},
		{"+1", form},
		{"1.5Mi", form},
		{"0x10", form},
		{"0", zero},
		{"0Gi", zero},
		{"9223372036854775808", "at most 2^63-1 bytes"},
		{"8589934592Gi", "at most 2^63-1 bytes"},
		{"99999999999999999999999", "at most 2^63-1 bytes"},
	} {
		_, err := ParseByteCount(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseByteCount(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestDurationAcceptsSecondsOrOneLowercaseSuffix(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90":      90 * time.Second,
		"30s":     30 * time.Second,
		"15m":     15 * time.Minute,
		"1h":      time.Hour,
		"2d":      48 * time.Hour,
		" 900 ":   900 * time.Second,
		"106751d": 106751 * 24 * time.Hour,
	} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestDurationRefusals(t *testing.T) {
	const form, zero = durationForm, positiveForm
	for _, tc := range []struct{ in, want string }{
		{"", form},
		{"30S", form},
		{"30 m", form},
		{"5 minutes", form},
		{"1h30m", form},
		{"1.5h", form},
		{"-5", form},
		{"-5s", form},
		{"+5", form},
		{"1:30", form},
		{"500ms", form},
		{"s", form},
		{"0", zero},
		{"0m", zero},
		{"106752d", "at most about 292 years"},
		{"9223372037", "at most about 292 years"},
		{"99999999999999999999", "at most about 292 years"},
	} {
		_, err := ParseDuration(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseDuration(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestTTLAcceptsZeroButNotTheRestOfWhatDurationRefuses(t *testing.T) {
	if got, err := ParseTTL("0"); err != nil || got != 0 {
		t.Errorf(`ParseTTL("0") = %v, %v; want 0`, got, err)
	}
	if got, err := ParseTTL("10m"); err != nil || got != 10*time.Minute {
		t.Errorf(`ParseTTL("10m") = %v, %v; want 10m`, got, err)
	}
	for _, in := range []string{"-1", "10M", "", "1 h", "106752d"} {
		if _, err := ParseTTL(in); err == nil {
			t.Errorf("ParseTTL(%q) accepted", in)
		}
	}
}

func TestRootRule(t *testing.T) {
	for in, want := range map[string]string{
		"out/":           "out/",
		"  out/handoff ": "out/handoff",
		".":              ".",
		"./out":          "./out",
		"a..b/c":         "a..b/c",
		"my dir/x":       "my dir/x",
		`back\slash`:     `back\slash`,
	} {
		got, err := ParseRoot(in)
		if err != nil || got.String() != want {
			t.Errorf("ParseRoot(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"":          "empty",
		"   ":       "empty",
		"/srv/out":  "absolute",
		" /srv":     "absolute",
		"..":        `".."`,
		"out/../..": `".."`,
		"out/..":    `".."`,
		"../x":      `".."`,
		"out\x00":   "control character",
		"o\nut":     "control character",
		"out\x7f":   "control character",
	} {
		_, err := ParseRoot(in)
		if err == nil || !strings.Contains(err.Error(), rootForm) || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseRoot(%q) = %v, want the root form and %q", in, err, why)
		}
	}
}

func TestAfterTaskIsExitOrSleep(t *testing.T) {
	for _, in := range []string{"exit", "sleep"} {
		if got, err := ParseAfterTask(in); err != nil || string(got) != in {
			t.Errorf("ParseAfterTask(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "Exit", "sleep ", "stay"} {
		if _, err := ParseAfterTask(in); err == nil {
			t.Errorf("ParseAfterTask(%q) accepted", in)
		}
	}
}

func TestPlanesAndRootsFollowTheDeclarations(t *testing.T) {
	root := func(s string) Root {
		r, err := ParseRoot(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		rule   string
		m      Manifest
		planes []string
		roots  map[string]string
	}{
		{"neither plane: an empty list, not nil", Manifest{}, []string{}, map[string]string{}},
		{"files before peer_files", Manifest{PeerFiles: &PeerFilesExport{Root: root("h")}, Files: &FilesExport{Root: root("out/")}},
			[]string{"files", "peer_files"}, map[string]string{"exports.files.root": "out/", "exports.peer_files.root": "h"}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := tc.m.Planes(); !reflect.DeepEqual(got, tc.planes) {
				t.Errorf("Planes() = %#v, want %#v", got, tc.planes)
			}
			if got := tc.m.Roots(); !reflect.DeepEqual(got, tc.roots) {
				t.Errorf("Roots() = %v, want %v", got, tc.roots)
			}
		})
	}
}
