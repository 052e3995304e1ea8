package clock

import (
	"sync"
	"testing"
	"time"
)

func TestSystemFollowsTheOperatingSystem(t *testing.T) {
	before := time.Now()
	got := System{}.Now()
	if got.Before(before) || got.After(time.Now()) {
		t.Errorf("System.Now() = %v, outside [%v, now]", got, before)
	}
}

func TestManual(t *testing.T) {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	m := NewManual(start)
	if !m.Now().Equal(start) {
		t.Fatalf("Now() = %v, want %v", m.Now(), start)
	}
	if got := m.Advance(90 * time.Second); !got.Equal(start.Add(90*time.Second)) || !m.Now().Equal(got) {
		t.Errorf("Advance returned %v, Now() %v", got, m.Now())
	}
	m.Advance(-30 * time.Second)
	if want := start.Add(time.Minute); !m.Now().Equal(want) {
		t.Errorf("after a negative Advance, Now() = %v, want %v", m.Now(), want)
	}
}

func TestManualConcurrentUse(t *testing.T) {
	start := time.Unix(0, 0)
	m := NewManual(start)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 100 {
				m.Advance(time.Millisecond)
				m.Now()
			}
		})
	}
	wg.Wait()
	if want := start.Add(time.Second); !m.Now().Equal(want) {
		t.Errorf("Now() = %v after 1000 concurrent 1ms advances, want %v", m.Now(), want)
	}
}
