package budget

import (
	"strconv"
	"strings"
	"testing"

	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/manifest"
)

// manifestWith declares the planes whose max_bytes is positive.
func manifestWith(t *testing.T, files, peer int64) manifest.Manifest {
	t.Helper()
	var m manifest.Manifest
	if files > 0 {
		m.Files = &manifest.FilesExport{MaxBytes: byteCount(t, files)}
	}
	if peer > 0 {
		m.PeerFiles = &manifest.PeerFilesExport{MaxBytes: byteCount(t, peer)}
	}
	return m
}

func byteCount(t *testing.T, n int64) manifest.ByteCount {
	t.Helper()
	c, err := manifest.ParseByteCount(strconv.FormatInt(n, 10))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTotalFor(t *testing.T) {
	const gi, mi = int64(1 << 30), int64(1 << 20)
	for _, tc := range []struct {
		rule         string
		files, peer  int64
		given        int64
		spooled      bool
		want         int64
		refusedNames string // "" when accepted
	}{
		{"with a spool the default stays 256Mi whatever max_bytes", 2 * gi, gi, 0, true, DefaultTotal, ""},
		{"without a spool the default grows to one read of the largest max_bytes", gi, 2 * gi, 0, false, application.BufferFor(2 * gi), ""},
		{"without a spool a small max_bytes keeps the 256Mi default", 10 * mi, 0, 0, false, DefaultTotal, ""},
		{"a given budget is kept", 10 * mi, 0, 3 * mi, true, 3 * mi, ""},
		{"with a spool a given budget need only cover one in-memory read", 2 * gi, 0, application.BufferFor(application.InMemoryUpTo - 1), true, application.BufferFor(application.InMemoryUpTo - 1), ""},
		{"with a spool a given budget below one in-memory read is refused", 2 * gi, 0, 4096, true, 0, "--read-buffer-budget"},
		{"without a spool a given budget below one read of max_bytes is refused", 10 * mi, 0, 10 * mi, false, 0, "12582912 bytes"},
		{"no plane: the default", 0, 0, 0, true, DefaultTotal, ""},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := TotalFor(manifestWith(t, tc.files, tc.peer), tc.given, tc.spooled)
			if tc.refusedNames != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusedNames) {
					t.Fatalf("TotalFor = %d, %v; want a refusal naming %q", got, err, tc.refusedNames)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("TotalFor = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestSpoolTotalFor(t *testing.T) {
	const gi, mi = int64(1 << 30), int64(1 << 20)
	for _, tc := range []struct {
		rule        string
		files, peer int64
		given       int64
		want        int64
		refused     bool
	}{
		{"the default is 2Gi for the default max_bytes", 10 * mi, 10 * mi, 0, DefaultSpoolTotal, false},
		{"the default grows to one read of the largest max_bytes", gi, 3 * gi, 0, 3*gi + 1, false},
		{"a given budget that holds one read is kept", 10 * mi, 0, 10*mi + 1, 10*mi + 1, false},
		{"a given budget below one read of max_bytes is refused", 10 * mi, 0, 10 * mi, 0, true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := SpoolTotalFor(manifestWith(t, tc.files, tc.peer), tc.given)
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "--spool-budget") {
					t.Fatalf("SpoolTotalFor = %d, %v; want a refusal naming --spool-budget", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("SpoolTotalFor = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
