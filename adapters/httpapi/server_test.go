package httpapi

import (
	"strings"
	"testing"
)

func TestTheAccessLogNeverRecordsAPeerToken(t *testing.T) {
	cases := map[string]string{
		"/resources/peer/mh1%2EeyJ2IjoxfQ.AAAA":     "/resources/peer/<handle:",
		"/resources/peer/anything?x=1":              "/resources/peer/<handle:",
		"/resources/files/report.md":                "/resources/files/report.md",
		"/resources/peer/":                          "/resources/peer/",
		"/resources/peerless/mh1%2EeyJ2IjoxfQ.AAAA": "/resources/peerless/mh1%2EeyJ2IjoxfQ.AAAA",
	}
	for target, prefix := range cases {
		got := loggedTarget(target)
		if !strings.HasPrefix(got, prefix) || (strings.HasPrefix(target, "/resources/peer/") && len(target) > len("/resources/peer/") && strings.Contains(got, "eyJ2")) {
			t.Errorf("loggedTarget(%q) = %q; want it to start with %q and hold no token", target, got, prefix)
		}
	}
	if got := loggedTarget("/resources/peer/x?y=1"); !strings.HasSuffix(got, ">?y=1") {
		t.Errorf("the query was not kept: %q", got)
	}
}
