package limits

import "testing"

func TestClientKeyCountsLikeTheConnectionCapAndLeavesLoopbackOut(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7:5000":             "192.0.2.7/32",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:80":      "192.0.2.7/32",
		"127.0.0.1:5000":             "",
		"127.3.4.5:5000":             "",
		"[::1]:5000":                 "",
		"":                           "",
		"not an address":             "",
	} {
		if got := ClientKey(in); got != want {
			t.Errorf("ClientKey(%q) = %q, want %q", in, got, want)
		}
	}
}
