package blackbox_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resplane/resplane/ports/porttest/fixture"
	"github.com/resplane/resplane/test/harness"
)

const (
	bbInsideA      = "A-inside"
	bbInsideB      = "B-inside"
	bbWorkdirLeak  = "SECRET-in-workdir"
	bbOutsideLeak  = "SECRET-outside-workdir"
	bbFifoDeadline = 3 * time.Second
)

// bbSymlinkCapsule lays out out/ with every kind of symlink the class rule distinguishes, a
// FIFO and a socket. The absolute links out of the workdir name the directory beside it, whose
// path is known only once the capsule is written, so they are made after launch (the root is
// resolved at every request).
func bbSymlinkCapsule(t *testing.T, class string) (*harness.Process, bbSession) {
	t.Helper()
	p := harness.Start(t, harness.Capsule{
		Manifest: bbFilesManifest("out/", ""),
		Args:     []string{"--containment", class},
		Files: fixture.Layout{
			"out/a.txt":                             bbInsideA,
			"out/sub/b.txt":                         bbInsideB,
			"out/rel_in -> a.txt":                   "",
			"out/chain -> rel_in":                   "",
			"out/rel_out -> ../secret.txt":          "",
			"out/linkdir -> sub":                    "",
			"out/dangling -> nope.txt":              "",
			"out/loop -> loop":                      "",
			"out/loopa -> loopb":                    "",
			"out/loopb -> loopa":                    "",
			"out/self -> .":                         "",
			"out/x -> ../out/a.txt":                 "",
			"out/up -> ..":                          "",
			"out/dangling_out -> ../nonexist/zz":    "",
			"out/sub/uplink -> ../a.txt":            "",
			"out/sub/escape -> ../../secret.txt":    "",
			"out/linkfifo -> fifo":                  "",
			"out/dotlink -> ./a.txt":                "",
			"out/dotdotin -> sub/../a.txt":          "",
			"out/slash -> a.txt/":                   "",
			"out/sub/sibling -> ../sub/b.txt":       "",
			"out/updown -> ../out":                  "",
			"out/abs_in -> $WD/out/a.txt":           "",
			"out/abslinkdir -> $WD/out/sub":         "",
			"out/absself -> $WD/out":                "",
			"out/abs_wd -> $WD":                     "",
			"out/absdotdot -> $WD/out/sub/../a.txt": "",
			"out/fifo|":                             "",
			"out/sock=":                             "",
			"secret.txt":                            bbWorkdirLeak,
			"../outside/s.txt":                      bbOutsideLeak,
			"../outside/sub/b.txt":                  bbOutsideLeak,
		},
	})
	outside := filepath.Join(p.Dir, "outside")
	fixture.Write(t, p.Workdir, fixture.Layout{
		"out/abs_out -> " + filepath.Join(outside, "s.txt"): "",
		"out/abs_outdir -> " + outside:                      "",
	})
	return p, bbSessionOf(t, p.Ready)
}

// bbOutcome is an expected answer: a body on 200, else a status and code.
type bbOutcome struct {
	status int
	code   string
	body   string
}

var (
	bbServedAs       = func(body string) bbOutcome { return bbOutcome{200, "", body} }
	bbOutsideRoot    = bbOutcome{403, "outside_root", ""}
	bbSymlinkRefused = bbOutcome{403, "symlink_refused", ""}
	bbNotFound       = bbOutcome{404, "not_found", ""}
	bbNotRegular     = bbOutcome{403, "not_a_regular_file", ""}
	bbFollows        = map[string]bool{"advisory": true, "sealed": true}
)

// TestSymlinksAreDecidedByTheContainmentClass pins docs/operator-guide.md,
// "Containment classes and symlinks", for reads: under scoped
// any symlink on the path is symlink_refused (dangling and loops included); under sealed and
// advisory symlinks are followed only while every step stays the root or beneath it (relative
// and absolute links inside are served, a link that leaves, even to come back or to nothing,
// is outside_root, a final target that is the root is outside_root, a loop is symlink_refused,
// a dangling link not_found); directories, FIFOs (answered at once) and sockets are
// not_a_regular_file at every class, ENOTDIR is not_found. x-murmur-containment is the class.
func TestSymlinksAreDecidedByTheContainmentClass(t *testing.T) {
	tests := []struct {
		path     string
		followed bbOutcome // advisory and sealed
		scoped   bbOutcome
	}{
		{"a.txt", bbServedAs(bbInsideA), bbServedAs(bbInsideA)},
		{"sub/b.txt", bbServedAs(bbInsideB), bbServedAs(bbInsideB)},
		{"rel_in", bbServedAs(bbInsideA), bbSymlinkRefused},
		{"abs_in", bbServedAs(bbInsideA), bbSymlinkRefused},
		{"chain", bbServedAs(bbInsideA), bbSymlinkRefused},
		{"linkdir/b.txt", bbServedAs(bbInsideB), bbSymlinkRefused},
		{"abslinkdir/b.txt", bbServedAs(bbInsideB), bbSymlinkRefused},
		{"sub/uplink", bbServedAs(bbInsideA), bbSymlinkRefused},
		{"self/a.txt", bbServedAs(bbInsideA), bbSymlinkRefused},
		{"self/self/sub/b.txt", bbServedAs(bbInsideB), bbSymlinkRefused},
		{"absself/a.txt", bbServedAs(bbInsideA), bbSymlinkRefused},
		{"dotlink", bbServedAs(bbInsideA), bbSymlinkRefused},
		{"dotdotin", bbServedAs(bbInsideA), bbSymlinkRefused},
		{"absdotdot", bbServedAs(bbInsideA), bbSymlinkRefused},
		{"sub/sibling", bbServedAs(bbInsideB), bbSymlinkRefused},
		{"slash", bbNotFound, bbSymlinkRefused},
		{"updown/a.txt", bbOutsideRoot, bbSymlinkRefused},
		{"self", bbOutsideRoot, bbSymlinkRefused},
		{"absself", bbOutsideRoot, bbSymlinkRefused},
		{"rel_out", bbOutsideRoot, bbSymlinkRefused},
		{"abs_out", bbOutsideRoot, bbSymlinkRefused},
		{"abs_outdir/s.txt", bbOutsideRoot, bbSymlinkRefused},
		{"abs_wd/secret.txt", bbOutsideRoot, bbSymlinkRefused},
		{"abs_wd/out/a.txt", bbOutsideRoot, bbSymlinkRefused},
		{"sub/escape", bbOutsideRoot, bbSymlinkRefused},
		{"x", bbOutsideRoot, bbSymlinkRefused},
		{"up", bbOutsideRoot, bbSymlinkRefused},
		{"up/out/a.txt", bbOutsideRoot, bbSymlinkRefused},
		{"up/secret.txt", bbOutsideRoot, bbSymlinkRefused},
		{"dangling_out", bbOutsideRoot, bbSymlinkRefused},
		{"dangling", bbNotFound, bbSymlinkRefused},
		{"dangling/x", bbNotFound, bbSymlinkRefused},
		{"loop", bbSymlinkRefused, bbSymlinkRefused},
		{"loopa", bbSymlinkRefused, bbSymlinkRefused},
		{"loop/x", bbSymlinkRefused, bbSymlinkRefused},
		{"linkdir", bbNotRegular, bbSymlinkRefused},
		{"linkfifo", bbNotRegular, bbSymlinkRefused},
		{"rel_in/x", bbNotFound, bbSymlinkRefused},
		{"sub", bbNotRegular, bbNotRegular},
		{"fifo", bbNotRegular, bbNotRegular},
		{"sock", bbNotRegular, bbNotRegular},
		{"a.txt/x", bbNotFound, bbNotFound},
		{"sub/nope", bbNotFound, bbNotFound},
	}
	for _, class := range []string{"advisory", "scoped", "sealed"} {
		t.Run(class, func(t *testing.T) {
			p, s := bbSymlinkCapsule(t, class)
			for _, tc := range tests {
				t.Run(tc.path, func(t *testing.T) {
					want := tc.scoped
					if bbFollows[class] {
						want = tc.followed
					}
					mark := len(harness.TraceLines(t, s.trace))
					start := time.Now()
					r := harness.RequestWithin(t, s.addr, "GET", "/resources/files/"+tc.path, bbFifoDeadline)
					if d := time.Since(start); d > 2*time.Second {
						t.Errorf("answer took %v: a FIFO or a loop was waited on", d)
					}
					ev := bbReadEvent{path: tc.path, bbOutcome: "ok", body: []byte(want.body)}
					if want.status == 200 {
						bbServed(t, r, []byte(want.body), 0, class, "out/")
					} else {
						msg := bbFilesRefusal(t, r, want.status, want.code, 0)
						if want.code == "symlink_refused" && class != "scoped" && strings.Contains(msg, "scoped") {
							t.Errorf("symlink_refused message claims a class the session did not achieve: %q", msg)
						}
						ev.bbOutcome, ev.reason = want.code, msg
					}
					for _, leak := range []string{bbWorkdirLeak, bbOutsideLeak} {
						if strings.Contains(string(r.Raw), leak) {
							t.Fatalf("served a byte from outside the root:\n%s", r.Raw)
						}
					}
					bbCheckRead(t, s, harness.TraceFrom(t, s.trace, mark, 1)[0], ev)
				})
			}
			if _, err := os.Stat(filepath.Join(p.Workdir, "out/fifo")); err != nil {
				t.Errorf("the fifo is gone: %v", err)
			}
		})
	}
}

// TestListingOmitsWhatTheClassRefuses pins docs/http-api.md, "The listing": under scoped every
// symlink is left out;
// under sealed and advisory a symlink to a regular file inside the root is listed under its own
// path with the target's size, mtime and hash, while dangling links, loops, links leaving the
// root, links to the root and to directories (never descended), FIFOs and sockets are left out.
func TestListingOmitsWhatTheClassRefuses(t *testing.T) {
	want := map[string][]string{
		"advisory": {"a.txt", "abs_in", "absdotdot", "chain", "dotdotin", "dotlink", "rel_in", "sub/b.txt", "sub/sibling", "sub/uplink"},
		"sealed":   {"a.txt", "abs_in", "absdotdot", "chain", "dotdotin", "dotlink", "rel_in", "sub/b.txt", "sub/sibling", "sub/uplink"},
		"scoped":   {"a.txt", "sub/b.txt"},
	}
	content := map[string]string{"a.txt": bbInsideA, "abs_in": bbInsideA, "chain": bbInsideA, "rel_in": bbInsideA,
		"absdotdot": bbInsideA, "dotdotin": bbInsideA, "dotlink": bbInsideA, "sub/b.txt": bbInsideB, "sub/sibling": bbInsideB,
		"sub/uplink": bbInsideA}
	for _, class := range []string{"advisory", "scoped", "sealed"} {
		t.Run(class, func(t *testing.T) {
			p, s := bbSymlinkCapsule(t, class)
			aInfo, err := os.Stat(filepath.Join(p.Workdir, "out/a.txt"))
			if err != nil {
				t.Fatal(err)
			}
			mark := len(harness.TraceLines(t, s.trace))
			start := time.Now()
			r := harness.RequestWithin(t, s.addr, "GET", "/resources/files", bbFifoDeadline)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("listing took %v: a FIFO was waited on", d)
			}
			l := bbDecodeListing(t, r, 0, class, "out/")
			if got := bbPaths(l); !slices.Equal(got, want[class]) {
				t.Fatalf("entries %q, want %q", got, want[class])
			}
			total := 0
			for _, e := range l.Entries {
				c := content[e.Path]
				total += len(c)
				if e.SizeBytes != int64(len(c)) || e.SHA256 != harness.SHA256Hex([]byte(c)) {
					t.Errorf("entry %+v, want size %d sha256 %s", e, len(c), harness.SHA256Hex([]byte(c)))
				}
				if (c == bbInsideA) && e.MTimeMs != aInfo.ModTime().UnixMilli() {
					t.Errorf("entry %s mtime %d, want the target's %d", e.Path, e.MTimeMs, aInfo.ModTime().UnixMilli())
				}
			}
			for _, leak := range []string{bbWorkdirLeak, bbOutsideLeak} {
				for _, e := range l.Entries {
					if e.SHA256 == harness.SHA256Hex([]byte(leak)) || e.SizeBytes == int64(len(leak)) {
						t.Errorf("listing reports an outside file: %+v", e)
					}
				}
			}
			bbCheckList(t, s, harness.TraceFrom(t, s.trace, mark, 1)[0], bbListEvent{root: "out/", entries: len(want[class]),
				totalBytes: total, bbOutcome: "ok"})
		})
	}
}

// TestSymlinkedRootIsFollowedAtEveryClass pins docs/operator-guide.md: E-CAP-007 accepts a
// symlinked root that stays in the workdir ("Launch checks"), and symlinks on the declared
// root's own path are followed at every class; the class rule governs only what lies beneath
// ("Containment classes and symlinks").
func TestSymlinkedRootIsFollowedAtEveryClass(t *testing.T) {
	for _, class := range []string{"advisory", "scoped", "sealed"} {
		t.Run(class, func(t *testing.T) {
			p := harness.Start(t, harness.Capsule{
				Manifest: bbFilesManifest("data/out", ""),
				Args:     []string{"--containment", class},
				Files: fixture.Layout{
					"real/out/a.txt": bbInsideA,
					"data -> real":   "",
				},
			})
			s := bbSessionOf(t, p.Ready)
			bbServed(t, harness.Get(t, s.addr, "/resources/files/a.txt"), []byte(bbInsideA), 0, class, "data/out")
			l := bbDecodeListing(t, harness.Get(t, s.addr, "/resources/files"), 0, class, "data/out")
			if got := bbPaths(l); !slices.Equal(got, []string{"a.txt"}) {
				t.Errorf("entries %q", got)
			}
		})
	}
}

// TestRootRePointedOutsideTheWorkdirIsRefused pins docs/operator-guide.md,
// "Race-free resolution and its limits": the
// canonical root is re-checked at every request, so a root replaced after launch by a symlink
// out of the workdir refuses reads and listings with outside_root (traced, root ""), and a root
// pointed back inside is served again.
func TestRootRePointedOutsideTheWorkdirIsRefused(t *testing.T) {
	for _, class := range []string{"advisory", "scoped", "sealed"} {
		t.Run(class, func(t *testing.T) {
			p := harness.Start(t, harness.Capsule{
				Manifest: bbFilesManifest("out/", ""),
				Args:     []string{"--containment", class},
				Files:    fixture.Layout{"out/a.txt": bbInsideA},
			})
			s := bbSessionOf(t, p.Ready)
			outside := filepath.Join(p.Dir, "outside")
			fixture.Write(t, outside, fixture.Layout{"a.txt": bbOutsideLeak})
			out := filepath.Join(p.Workdir, "out")
			bbServed(t, harness.Get(t, s.addr, "/resources/files/a.txt"), []byte(bbInsideA), 0, class, "out/")

			if err := os.Rename(out, out+".orig"); err != nil {
				t.Fatal(err)
			}
			fixture.Write(t, p.Workdir, fixture.Layout{"out -> " + outside: ""})
			mark := len(harness.TraceLines(t, s.trace))
			r := harness.Get(t, s.addr, "/resources/files/a.txt")
			if strings.Contains(string(r.Raw), bbOutsideLeak) {
				t.Fatalf("served the outside file through a re-pointed root:\n%s", r.Raw)
			}
			msg := bbFilesRefusal(t, r, 403, "outside_root", 0)
			bbCheckRead(t, s, harness.TraceFrom(t, s.trace, mark, 1)[0], bbReadEvent{path: "a.txt", bbOutcome: "outside_root", reason: msg})

			mark = len(harness.TraceLines(t, s.trace))
			r = harness.Get(t, s.addr, "/resources/files")
			if strings.Contains(string(r.Raw), harness.SHA256Hex([]byte(bbOutsideLeak))) {
				t.Fatalf("listed the outside file through a re-pointed root:\n%s", r.Raw)
			}
			msg = bbFilesRefusal(t, r, 403, "outside_root", 0)
			bbCheckList(t, s, harness.TraceFrom(t, s.trace, mark, 1)[0], bbListEvent{bbOutcome: "outside_root", reason: msg})

			// Pointed back inside the workdir: followed again.
			fixture.Write(t, p.Workdir, fixture.Layout{"out -> out.orig": ""})
			bbServed(t, harness.Get(t, s.addr, "/resources/files/a.txt"), []byte(bbInsideA), 0, class, "out/")
		})
	}
}

// TestUnreadableFileIsIOError pins docs/operator-guide.md, "Containment classes and symlinks":
// permission denied on the open is 500
// io_error (the message carries no path), and the listing silently leaves the file out.
func TestUnreadableFileIsIOError(t *testing.T) {
	// Root reads through permission bits; run the server without the capabilities that let it.
	wrapper := bbAsRootWithout(t, "-dac_override,-dac_read_search", "permission denied cannot be provoked")
	p := harness.Start(t, harness.Capsule{Manifest: bbFilesManifest("out/", ""), Wrapper: wrapper,
		Files: fixture.Layout{"out/a.txt": bbInsideA, "out/locked.txt !": "locked"}})
	s := bbSessionOf(t, p.Ready)
	mark := len(harness.TraceLines(t, s.trace))
	r := harness.Get(t, s.addr, "/resources/files/locked.txt")
	msg := bbFilesRefusal(t, r, 500, "io_error", 0)
	if strings.Contains(msg, p.Workdir) || strings.Contains(msg, "locked.txt") {
		t.Errorf("io_error message names a path: %q", msg)
	}
	bbCheckRead(t, s, harness.TraceFrom(t, s.trace, mark, 1)[0], bbReadEvent{path: "locked.txt", bbOutcome: "io_error", reason: msg})
	l := bbDecodeListing(t, harness.Get(t, s.addr, "/resources/files"), 0, "advisory", "out/")
	if got := bbPaths(l); !slices.Equal(got, []string{"a.txt"}) {
		t.Errorf("entries %q, want only a.txt", got)
	}
}
