package trace

import (
	"reflect"
	"testing"
	"time"
)

func TestRecordedAtIsTheStampWhenThereIsOne(t *testing.T) {
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
			if at := RecordedAt(tc.in, func() time.Time { return now }); !at.Equal(tc.wantAt) {
				t.Errorf("at %v, want %v", at, tc.wantAt)
			}
		})
	}
}

func TestAStampedEventReadsAsTheEventItCarries(t *testing.T) {
	event := ResourceRead{Path: "out/a.txt", Bytes: 3, SHA256: "ab", Generation: 2, Containment: "sealed"}
	for _, tc := range []struct {
		name    string
		stamped Stamped
	}{
		{"stamped with its fields built once", Stamp(event, time.Now())},
		{"stamped without them", Stamped{Event: event, At: time.Now()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.stamped.Type() != event.Type() || !reflect.DeepEqual(tc.stamped.Fields(), event.Fields()) {
				t.Fatalf("stamped reads as %s %v, want %s %v", tc.stamped.Type(), tc.stamped.Fields(), event.Type(), event.Fields())
			}
		})
	}
}

func TestStampBuildsTheFieldsOnce(t *testing.T) {
	event := &countingEvent{}
	stamped := Stamp(event, time.Now())
	for range 3 {
		stamped.Fields()
	}
	if event.calls != 1 {
		t.Errorf("the event's Fields was called %d times, want once", event.calls)
	}
}

type countingEvent struct{ calls int }

func (*countingEvent) Type() string { return "counting" }

func (e *countingEvent) Fields() []Field {
	e.calls++
	return []Field{{"calls", int64(e.calls)}}
}
