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

func TestTotals(t *testing.T) {
	const gi, mi = int64(1 << 30), int64(1 << 20)
	memory := func(spooled bool) func(manifest.Manifest, int64) (int64, error) {
		return func(m manifest.Manifest, given int64) (int64, error) { return TotalFor(m, given, spooled) }
	}
	spoolInMemory := application.BufferFor(application.InMemoryUpTo - 1)
	for _, tc := range []struct {
		rule        string
		total       func(manifest.Manifest, int64) (int64, error)
		files, peer int64
		given       int64
		want        int64
		refusal     string // "" when accepted
	}{
		{"with a spool the memory default stays 256Mi whatever max_bytes", memory(true), 2 * gi, gi, 0, DefaultTotal, ""},
		{"without a spool the memory default grows to one read of the largest max_bytes", memory(false), gi, 2 * gi, 0, application.BufferFor(2 * gi), ""},
		{"without a spool a small max_bytes keeps the 256Mi default", memory(false), 10 * mi, 0, 0, DefaultTotal, ""},
		{"a given memory budget is kept", memory(true), 10 * mi, 0, 3 * mi, 3 * mi, ""},
		{"with a spool a memory budget need only cover one in-memory read", memory(true), 2 * gi, 0, spoolInMemory, spoolInMemory, ""},
		{"with a spool a memory budget below one in-memory read is refused", memory(true), 2 * gi, 0, 4096, 0, "--read-buffer-budget"},
		{"without a spool a memory budget below one read of max_bytes is refused", memory(false), 10 * mi, 0, 10 * mi, 0, "12582912 bytes"},
		{"no plane: the memory default", memory(true), 0, 0, 0, DefaultTotal, ""},
		{"the spool default is 2Gi for the default max_bytes", SpoolTotalFor, 10 * mi, 10 * mi, 0, DefaultSpoolTotal, ""},
		{"the spool default grows to one read of the largest max_bytes", SpoolTotalFor, gi, 3 * gi, 0, 3*gi + 1, ""},
		{"a given spool budget that holds one read is kept", SpoolTotalFor, 10 * mi, 0, 10*mi + 1, 10*mi + 1, ""},
		{"a spool budget below one read of max_bytes is refused", SpoolTotalFor, 10 * mi, 0, 10 * mi, 0, "--spool-budget (10485760 bytes) must be at least 10485761 bytes"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := tc.total(manifestWith(t, tc.files, tc.peer), tc.given)
			if tc.refusal != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("total = %d, %v; want a refusal naming %q", got, err, tc.refusal)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("total = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestPlanDecidesEveryBudgetOnce(t *testing.T) {
	const gi, mi = int64(1 << 30), int64(1 << 20)
	for _, tc := range []struct {
		rule               string
		files, read, spool int64
		want               Sizes
		refusal            string
	}{
		{"defaults: the unspooled memory budget grows to one read of max_bytes", 2 * gi, 0, 0,
			Sizes{Memory: DefaultTotal, Unspooled: application.BufferFor(2 * gi), Spool: 2*gi + 1}, ""},
		{"a given memory budget is kept for both, even too small to buffer max_bytes unspooled", 10 * mi, 3 * mi, 0,
			Sizes{Memory: 3 * mi, Unspooled: 3 * mi, Spool: DefaultSpoolTotal}, ""},
		{"a memory budget below one in-memory read is refused", 10 * mi, 4096, 0, Sizes{}, "--read-buffer-budget"},
		{"a spool budget below one read is refused", 10 * mi, 0, mi, Sizes{}, "--spool-budget"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := Plan(manifestWith(t, tc.files, 0), tc.read, tc.spool)
			if tc.refusal != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("Plan = %+v, %v; want a refusal naming %s", got, err, tc.refusal)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Plan = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
