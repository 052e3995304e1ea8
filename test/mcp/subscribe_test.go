package mcp_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

// subscribeInterval is the --interval of the subscription tests: the shortest accepted.
const subscribeInterval = 200 * time.Millisecond

// listings counts the listings the service answered, from its trace.
func listings(t *testing.T, p *harness.Process) int {
	t.Helper()
	n := 0
	for _, e := range harness.Events(t, p.Ready.Trace) {
		if e.M["event_type"] == "resource_list" {
			n++
		}
	}
	return n
}

// notified waits up to five seconds for a notification on ch.
func notified(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case got := <-ch:
		return got
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within five seconds", what)
		return ""
	}
}

// quiet requires that nothing arrives on ch for three intervals.
func quiet(t *testing.T, ch <-chan string, what string) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("unexpected %s: %q", what, got)
	case <-time.After(3 * subscribeInterval):
	}
}

// TestASubscriptionIsToldOfItsFileAndOfTheSet drives resplane mcp --files with the SDK's
// client, under the SDK's newest protocol and under the legacy resources/subscribe one:
// nothing is polled before a subscription; a rewrite of the subscribed file is one updated
// for exactly its URI; a new file is one list_changed; after unsubscribe a rewrite is told
// nothing and the polling stops.
func TestASubscriptionIsToldOfItsFileAndOfTheSet(t *testing.T) {
	for _, protocol := range []string{"", "2025-11-25"} {
		t.Run("protocol "+protocol, func(t *testing.T) {
			p := harness.Start(t, harness.Capsule{Manifest: filesManifest, Files: fixture.Layout{
				"out/notes/report.md": "# report\n", "out/other.txt": "other\n"}})
			out := filepath.Join(p.Workdir, "out")
			updated, listChanged := make(chan string, 16), make(chan string, 16)
			s := connectWith(t, &sdk.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
					updated <- r.Params.URI
				},
				ResourceListChangedHandler: func(context.Context, *sdk.ResourceListChangedRequest) { listChanged <- "list_changed" },
			}, protocol, "--files", p.Ready.URL, "--interval", subscribeInterval.String())
			caps := s.InitializeResult().Capabilities
			if caps.Resources == nil || !caps.Resources.Subscribe || !caps.Resources.ListChanged {
				t.Fatalf("capabilities %+v; want resources {subscribe, listChanged}", caps.Resources)
			}
			time.Sleep(3 * subscribeInterval)
			if n := listings(t, p); n != 0 {
				t.Fatalf("%d listings without a subscriber, want none", n)
			}

			report, other := p.Ready.URL+"/resources/files/notes/report.md", p.Ready.URL+"/resources/files/other.txt"
			if err := s.Subscribe(ctx(t), &sdk.SubscribeParams{URI: report}); err != nil {
				t.Fatalf("subscribe: %v; stderr:\n%s", err, s.stderr.String())
			}
			for deadline := time.Now().Add(5 * time.Second); listings(t, p) == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no listing after the subscription")
				}
			}
			quiet(t, listChanged, "list_changed before the set changed")
			quiet(t, updated, "updated before the file changed")

			if err := os.WriteFile(filepath.Join(out, "other.txt"), []byte("not subscribed\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, "notes/report.md"), []byte("# report, rewritten\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := notified(t, updated, "updated"); got != report {
				t.Fatalf("updated for %q, want exactly %q (not %q)", got, report, other)
			}
			quiet(t, updated, "a second updated")

			fixture.Write(t, p.Workdir, fixture.Layout{"out/new.txt": "new\n"})
			notified(t, listChanged, "list_changed for a new file")
			quiet(t, listChanged, "a second list_changed")

			if err := s.Unsubscribe(ctx(t), &sdk.UnsubscribeParams{URI: report}); err != nil {
				t.Fatalf("unsubscribe: %v", err)
			}
			time.Sleep(2 * subscribeInterval)
			before := listings(t, p)
			if err := os.WriteFile(filepath.Join(out, "notes/report.md"), []byte("# again\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			quiet(t, updated, "updated after unsubscribe")
			if n := listings(t, p) - before; n != 0 {
				t.Fatalf("%d listings after the last unsubscribe, want none", n)
			}
		})
	}
}

// TestSubscribingToWhatIsNotAFileOfTheServiceIsRefused subscribes to a URI of another
// service: a JSON-RPC error with not_found, and no polling. It speaks resources/subscribe
// (protocol 2025-11-25): under the newest protocol the SDK's client subscribes through a
// subscriptions/listen stream and does not return the server's refusal to Subscribe.
func TestSubscribingToWhatIsNotAFileOfTheServiceIsRefused(t *testing.T) {
	p := harness.Start(t, harness.Capsule{Manifest: filesManifest, Files: fixture.Layout{"out/a.txt": "a"}})
	s := connectWith(t, nil, "2025-11-25", "--files", p.Ready.URL, "--interval", subscribeInterval.String())
	err := s.Subscribe(ctx(t), &sdk.SubscribeParams{URI: "http://elsewhere.invalid/resources/files/a.txt"})
	if _, data := rpcData(t, err); data["error"] != "not_found" {
		t.Fatalf("subscribe elsewhere: %v, data %v; want not_found", err, data)
	}
	time.Sleep(3 * subscribeInterval)
	if n := listings(t, p); n != 0 {
		t.Fatalf("%d listings for a refused subscription", n)
	}
}
