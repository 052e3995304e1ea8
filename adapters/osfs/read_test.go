package osfs_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/pathpolicy"
)

// TestReadEndsAtTheStatSize pins when a File's Read says io.EOF together with its bytes:
// only when it stops at the size the open's stat gave having been asked for more, so that a
// whole read needs no read(2) returning 0, while a file that changed size since the open is
// still read to its real end.
func TestReadEndsAtTheStatSize(t *testing.T) {
	for _, c := range []struct {
		name   string
		size   int // bytes in the file when it is opened
		change func(path string) error
		ask    int  // bytes asked of the first Read
		want   int  // bytes the first Read returns
		eof    bool // whether it returns io.EOF with them
	}{
		{name: "a read past the stat size ends there with EOF", size: 1024, ask: 1025, want: 1024, eof: true},
		{name: "a read of exactly the stat size is not yet EOF", size: 1024, ask: 1024, want: 1024},
		{name: "a read short of the stat size is not EOF", size: 1024, ask: 512, want: 512},
		{name: "an empty file is EOF at once", size: 0, ask: 1, want: 0, eof: true},
		{name: "a file that grew since the open reads on past the stat size", size: 1024, ask: 2048, want: 1500,
			change: func(p string) error { return appendBytes(p, 476) }},
		{name: "a file that shrank since the open is not EOF at its new end", size: 1024, ask: 2048, want: 100,
			change: func(p string) error { return os.Truncate(p, 100) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			wd := t.TempDir()
			path := filepath.Join(wd, "f.bin")
			if err := os.WriteFile(path, make([]byte, c.size), 0o644); err != nil {
				t.Fatal(err)
			}
			fs, err := osfs.New(wd)
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			rel, err := pathpolicy.Lower("f.bin")
			if err != nil {
				t.Fatal(err)
			}
			f, err := fs.OpenFile(".", rel, containment.Scoped)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if c.change != nil {
				if err := c.change(path); err != nil {
					t.Fatal(err)
				}
			}
			n, err := f.Read(make([]byte, c.ask))
			if n != c.want || errors.Is(err, io.EOF) != c.eof || (err != nil && !errors.Is(err, io.EOF)) {
				t.Fatalf("Read(%d) = %d, %v; want %d bytes, EOF %v", c.ask, n, err, c.want, c.eof)
			}
			if !c.eof {
				rest, err := io.ReadAll(f)
				if err != nil {
					t.Fatalf("reading on: %v", err)
				}
				if total := n + len(rest); c.change == nil && total != c.size {
					t.Fatalf("read %d bytes in all, want %d", total, c.size)
				}
			}
		})
	}
}

func appendBytes(path string, n int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, n))
	return errors.Join(err, f.Close())
}
