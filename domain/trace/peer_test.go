package trace_test

import (
	"reflect"
	"testing"

	"github.com/resplane/resplane/domain/trace"
)

// TestPeerKeyRotateIsTheOutcomeAlone pins docs/trace.md, "peer_key_rotate": after the envelope,
// the body is {"outcome":"ok"} and nothing else.
func TestPeerKeyRotateIsTheOutcomeAlone(t *testing.T) {
	e := trace.PeerKeyRotate{}
	if e.Type() != "peer_key_rotate" {
		t.Fatalf("Type = %q", e.Type())
	}
	if got, want := e.Fields(), []trace.Field{{Key: "outcome", Value: "ok"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Fields = %#v, want %#v", got, want)
	}
}
