package memtrace

import (
	"sync"
	"testing"

	"github.com/resplane/resplane/domain/trace"
)

func TestRecorder(t *testing.T) {
	var r Recorder
	if len(r.Events()) != 0 {
		t.Fatal("a new Recorder is not empty")
	}
	r.Record(trace.ResourceList{Root: "out/"})
	r.Record(trace.ResourceRead{Path: "a"})
	r.Record(trace.ResourceRead{Path: "b"})

	events := r.Events()
	if len(events) != 3 || events[0].Type() != "resource_list" {
		t.Fatalf("Events() = %v", events)
	}
	events[0] = nil
	if r.Events()[0] == nil {
		t.Error("Events() shares its slice with the recorder")
	}
	reads := r.OfType("resource_read")
	if len(reads) != 2 || reads[0].(trace.ResourceRead).Path != "a" || reads[1].(trace.ResourceRead).Path != "b" {
		t.Errorf("OfType(resource_read) = %v", reads)
	}
	if got := r.OfType("peer_file_fetch"); len(got) != 0 {
		t.Errorf("OfType(peer_file_fetch) = %v", got)
	}
}

func TestRecorderConcurrentUse(t *testing.T) {
	var r Recorder
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range 50 {
				r.Record(trace.ResourceRead{})
				r.Events()
				r.OfType("resource_read")
			}
		})
	}
	wg.Wait()
	if n := len(r.Events()); n != 1000 {
		t.Errorf("recorded %d events, want 1000", n)
	}
}
