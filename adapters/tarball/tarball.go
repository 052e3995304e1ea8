package tarball

import (
	"archive/tar"
	"io"
	"os"
	"time"

	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// Writer is a ports.Archive writing to one output. It is used by one goroutine.
type Writer struct {
	tw *tar.Writer
	// broken is set once a write to the output failed.
	broken bool
}

var _ ports.Archive = (*Writer)(nil)

// New returns an archive written to out.
func New(out io.Writer) *Writer { return &Writer{tw: tar.NewWriter(out)} }

// cutShort is the refusal of every use of an archive whose output failed.
func cutShort() *refusal.Refusal {
	return refusal.WithMessage(refusal.IOError, "Writing the archive failed; it was cut short and not ended.")
}

// Member holds the member's body in a temp file removed at once.
func (w *Writer) Member(path string) (ports.Landing, error) {
	if w.broken {
		return nil, cutShort()
	}
	f, err := os.CreateTemp("", ".resplane-tar-*.part")
	if err != nil {
		return nil, refusal.WithMessage(refusal.IOError, "A temp file to hold the member could not be created.").Wrapping(err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, refusal.WithMessage(refusal.IOError, "A temp file to hold the member could not be created.").Wrapping(err)
	}
	return &member{w: w, path: path, file: f}, nil
}

// Close ends the archive with its closing blocks, unless it was cut short.
func (w *Writer) Close() error {
	if w.broken {
		return cutShort()
	}
	if err := w.tw.Close(); err != nil {
		w.broken = true
		return refusal.WithMessage(refusal.IOError, "Ending the archive failed.").Wrapping(err)
	}
	return nil
}

// member is one member on its way into the archive.
type member struct {
	w    *Writer
	path string
	file *os.File
	size int64
	done bool
}

func (m *member) Write(p []byte) (int, error) {
	n, err := m.file.Write(p)
	m.size += int64(n)
	if err != nil {
		return n, refusal.WithMessage(refusal.IOError, "Writing the member's temp file failed.").Wrapping(err)
	}
	return n, nil
}

// Commit writes the header and the held body to the archive.
func (m *member) Commit(modTime time.Time) error {
	defer m.Discard()
	if m.w.broken {
		return cutShort()
	}
	if _, err := m.file.Seek(0, io.SeekStart); err != nil {
		return refusal.WithMessage(refusal.IOError, "Reading the member's temp file failed.").Wrapping(err)
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: m.path, Size: m.size, Mode: 0o644, ModTime: modTime.Truncate(time.Second)}
	if err := m.w.tw.WriteHeader(hdr); err != nil {
		m.w.broken = true
		return refusal.WithMessage(refusal.IOError, "Writing the archive failed.").Wrapping(err)
	}
	if _, err := io.Copy(m.w.tw, m.file); err != nil {
		m.w.broken = true
		return refusal.WithMessage(refusal.IOError, "Writing the archive failed.").Wrapping(err)
	}
	return nil
}

// Discard drops the held body.
func (m *member) Discard() {
	if !m.done {
		m.done = true
		_ = m.file.Close()
	}
}
