package osfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/ports"
	"github.com/resplane/resplane/ports/porttest/fixture"
)

func TestLocatorForTheLaunchCheck(t *testing.T) {
	cases := []struct {
		rule    string
		layout  fixture.Layout
		workdir string // relative to the temporary directory
		root    string
		want    ports.RootLocation // paths relative to the temporary directory
	}{
		{"a missing workdir is accepted: nothing exists yet", nil, "wd", "out", ports.RootLocation{}},
		{"a missing root is accepted", fixture.Layout{"wd/": ""}, "wd", "out",
			ports.RootLocation{Workdir: "wd"}},
		{"a root beneath a file does not exist", fixture.Layout{"wd/data": "D"}, "wd", "data/out",
			ports.RootLocation{Workdir: "wd"}},
		{"a dangling root symlink does not exist", fixture.Layout{"wd/out -> nowhere": ""}, "wd", "out",
			ports.RootLocation{Workdir: "wd"}},
		{"a root directory is inside", fixture.Layout{"wd/out/": ""}, "wd", "out/",
			ports.RootLocation{Exists: true, Inside: true, Resolved: "wd/out", Workdir: "wd"}},
		{"a root symlinked inside the workdir is inside", fixture.Layout{"wd/real/": "", "wd/out -> real": ""}, "wd", "out",
			ports.RootLocation{Exists: true, Inside: true, Resolved: "wd/real", Workdir: "wd"}},
		{"a root symlinked to the workdir itself is inside", fixture.Layout{"wd/out -> .": ""}, "wd", "out",
			ports.RootLocation{Exists: true, Inside: true, Resolved: "wd", Workdir: "wd"}},
		{"a root symlinked out of the workdir is not inside", fixture.Layout{"wd/": "", "elsewhere/": "", "wd/out -> ../elsewhere": ""}, "wd", "out",
			ports.RootLocation{Exists: true, Resolved: "elsewhere", Workdir: "wd"}},
		{"a sibling sharing the workdir's name as a prefix is not inside", fixture.Layout{"wd/": "", "wd2/": "", "wd/out -> ../wd2": ""}, "wd", "out",
			ports.RootLocation{Exists: true, Resolved: "wd2", Workdir: "wd"}},
		{"a symlinked workdir is canonicalised", fixture.Layout{"real/out/": "", "wd -> real": ""}, "wd", "out",
			ports.RootLocation{Exists: true, Inside: true, Resolved: "real/out", Workdir: "real"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			base, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			fixture.Write(t, base, c.layout)
			got, err := osfs.Locator{}.Locate(filepath.Join(base, c.workdir), c.root)
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			for _, p := range []*string{&want.Resolved, &want.Workdir} {
				if *p != "" {
					*p = filepath.Join(base, *p)
				}
			}
			if got != want {
				t.Errorf("Locate = %+v\nwant     %+v", got, want)
			}
			if _, err := os.Lstat(filepath.Join(base, c.workdir)); c.layout == nil && !os.IsNotExist(err) {
				t.Error("Locate created the workdir")
			}
		})
	}
}

func TestLocatorAcceptsARootLoopThatResolvesNowhere(t *testing.T) {
	base := t.TempDir()
	fixture.Write(t, base, fixture.Layout{"wd/out -> out": ""})
	got, err := (osfs.Locator{}).Locate(filepath.Join(base, "wd"), "out")
	if err != nil || got.Exists {
		t.Errorf("Locate = %+v, %v; want a loop reported as resolving nowhere (every request refuses it)", got, err)
	}
}
