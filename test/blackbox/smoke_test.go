package blackbox_test

import (
	"testing"

	"github.com/resplane/resplane/test/harness"
)

func TestServeAnswersAReadOverRawTCP(t *testing.T) {
	p := harness.Start(t, harness.Capsule{
		Manifest: "name: reporter\nexports:\n  files:\n    root: out/\n    mode: read-only\n",
		Files:    map[string]string{"out/report.md": "# report\n"},
	})
	r := harness.Get(t, p.Ready.Listen, "/resources/files/report.md")
	if r.Status != 200 || string(r.Body) != "# report\n" {
		t.Fatalf("got %d %q", r.Status, r.Body)
	}
	if code := p.Stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; stderr:\n%s", code, p.Stderr())
	}
}
