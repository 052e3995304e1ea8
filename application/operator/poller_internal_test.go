package operator

import (
	"testing"
	"time"
)

func TestBackoffDoublesFromTheIntervalUpToThirtySeconds(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		failures int
		want     time.Duration
	}{
		{2 * time.Second, 0, 2 * time.Second},
		{2 * time.Second, 1, 4 * time.Second},
		{2 * time.Second, 3, 16 * time.Second},
		{2 * time.Second, 4, 30 * time.Second},
		{2 * time.Second, 1000, 30 * time.Second},
		{200 * time.Millisecond, 2, 800 * time.Millisecond},
		{time.Minute, 0, 30 * time.Second},
	} {
		if got := backoff(tc.interval, tc.failures); got != tc.want {
			t.Errorf("backoff(%v, %d) = %v, want %v", tc.interval, tc.failures, got, tc.want)
		}
	}
}
