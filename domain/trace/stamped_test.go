package trace

import (
	"reflect"
	"testing"
	"time"
)

func TestUnstampTakesTheRecordedMomentWhenThereIsOne(t *testing.T) {
	recorded := time.UnixMilli(1_800_000_000_000)
	now := recorded.Add(time.Hour)
	event := SessionEnd{Generation: 3, Reason: "signal"}
	for _, tc := range []struct {
		name   string
		in     Event
		wantAt time.Time
	}{
		{"a stamped event keeps the moment it was recorded", Stamped{Event: event, At: recorded}, recorded},
		{"a bare event is taken as recorded now", event, now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, at := Unstamp(tc.in, func() time.Time { return now })
			if !at.Equal(tc.wantAt) {
				t.Errorf("at %v, want %v", at, tc.wantAt)
			}
			if !reflect.DeepEqual(got, Event(event)) {
				t.Errorf("event %#v, want %#v", got, event)
			}
		})
	}
}

func TestAStampedEventReadsAsTheEventItCarries(t *testing.T) {
	event := SessionEnd{Generation: 3, Reason: "signal"}
	stamped := Stamped{Event: event, At: time.Now()}
	if stamped.Type() != event.Type() || !reflect.DeepEqual(stamped.Fields(), event.Fields()) {
		t.Fatalf("stamped reads as %s %v, want %s %v", stamped.Type(), stamped.Fields(), event.Type(), event.Fields())
	}
}
