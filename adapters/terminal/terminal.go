// Package terminal is what `resplane files pull` shows a person at a terminal: a progress bar
// of the downloads (ports.Progress) drawn with github.com/schollz/progressbar on stderr, and
// only when stderr is a terminal (golang.org/x/term), so that a script or a log file never
// receives escape sequences.
package terminal

import (
	"io"
	"os"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/resplane/resplane/ports"
)

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// NewProgress returns a progress bar drawn on f when f is a terminal, and a display that
// shows nothing otherwise.
func NewProgress(f *os.File) ports.Progress {
	if !IsTerminal(f) {
		return Silent{}
	}
	return &Bar{out: f}
}

// Silent shows nothing.
type Silent struct{}

// Start does nothing.
func (Silent) Start(int, int64) {}

// Add does nothing.
func (Silent) Add(int64) {}

// Finish does nothing.
func (Silent) Finish() {}

// Bar draws the downloads as one bar of bytes with the count of files in its description. It
// is safe for concurrent use once started.
type Bar struct {
	out io.Writer
	bar *progressbar.ProgressBar
}

// Start draws the bar; with nothing to download it draws nothing.
func (b *Bar) Start(files int, bytes int64) {
	if files == 0 {
		return
	}
	b.bar = progressbar.NewOptions64(bytes,
		progressbar.OptionSetWriter(b.out),
		progressbar.OptionSetDescription("pulling "+strconv.Itoa(files)+" files"),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionSetWidth(20),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true),
	)
}

// Add advances the bar.
func (b *Bar) Add(n int64) {
	if b.bar != nil {
		_ = b.bar.Add64(n)
	}
}

// Finish clears the bar, leaving the line free for the summary.
func (b *Bar) Finish() {
	if b.bar != nil {
		_ = b.bar.Finish()
	}
}
