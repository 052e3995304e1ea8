package terminal

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

func TestAProgressBarIsDrawnOnlyOnATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, ok := NewProgress(w).(Silent); !ok {
		t.Fatalf("a pipe got a progress bar")
	}
	if _, ok := NewProgress(nil).(Silent); !ok {
		t.Fatalf("no file got a progress bar")
	}
}

func TestTheBarShowsTheFilesAndBytes(t *testing.T) {
	var out bytes.Buffer
	bar := &Bar{out: &out}
	bar.Start(3, 3<<20)
	time.Sleep(150 * time.Millisecond) // past the bar's throttle, so the Add is drawn
	bar.Add(1 << 20)
	bar.Finish()
	if text := out.String(); !strings.Contains(text, "pulling 3 files") || !strings.Contains(text, "1.0/3.0 MiB") {
		t.Fatalf("the bar drew %q; want the file count and the bytes", text)
	}
}

func TestNothingToDownloadDrawsNothing(t *testing.T) {
	var out bytes.Buffer
	bar := &Bar{out: &out}
	bar.Start(0, 0)
	bar.Add(0)
	bar.Finish()
	if out.Len() != 0 {
		t.Fatalf("an empty pull drew %q", out.String())
	}
}
