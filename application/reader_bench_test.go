package application_test

// Benchmarks for the use-case hot path Reader.Read (the body of every served file);
// files_bench_test.go has the listing's. Fixtures are built before the timed loop; none of
// these run without -bench.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/budget"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/ports"
)

// osFile is a ports.File over an *os.File, with size and mtime from its own descriptor, as
// osfs gives one: the Reader benchmark measures the Reader, not the resolution.
type osFile struct {
	*os.File
	size  int64
	mtime time.Time
}

func (f *osFile) Size() int64        { return f.size }
func (f *osFile) ModTime() time.Time { return f.mtime }
func (f *osFile) Path() string       { return f.Name() }

// Stat gives only what the Reader reads; no listing sees these files.
func (f *osFile) Stat() ports.FileStat { return ports.FileStat{Size: f.size, ModTime: f.mtime} }

func openOSFile(path string) (*osFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &osFile{File: f, size: st.Size(), mtime: st.ModTime()}, nil
}

func benchBudget(b *testing.B) *budget.Budget {
	b.Helper()
	bud, err := budget.New("--read-buffer-budget", 256<<20)
	if err != nil {
		b.Fatal(err)
	}
	return bud
}

var readSizes = []struct {
	name string
	size int
}{
	{"4KiB", 4 << 10},
	{"16KiB", 16 << 10},
	{"64KiB", 64 << 10},
	{"256KiB", 256 << 10},
	{"1MiB", 1 << 20},
	{"10MiB", 10 << 20},
}

// loopback is a TCP connection whose far end a goroutine drains, for a benchmark to send
// bodies through as a response would go.
func loopback(b *testing.B) *net.TCPConn {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, c)
		_ = c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(); _ = ln.Close() })
	return c.(*net.TCPConn)
}

// BenchmarkRead reads one file whole, hashes it and sends it over a loopback TCP connection,
// three ways on the same file:
//
//   - memory: open + fstat, Reader.Read into a pooled buffer (memory budget reservation,
//     sha256), the buffer written to the connection, Body.Release, close: what a read of at
//     most application.InMemoryUpTo bytes does;
//   - spool: the same with the snapshot in an unnamed spool file (spool budget reservation,
//     copy_file_range, sha256 read back through a 64 KiB buffer), sent with sendfile(2):
//     what a larger read does. The pair at each size is what InMemoryUpTo was chosen from;
//   - baseline: os.ReadFile (a fresh buffer per read) + sha256 + hex, written to the
//     connection.
//
// SetBytes is the file size, so MB/s is the read-hash-send throughput.
func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	spoolDir, err := osfs.OpenSpool(filepath.Join(dir, "spool"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = spoolDir.Close() })
	for _, s := range readSizes {
		path := filepath.Join(dir, s.name)
		data := make([]byte, s.size)
		for i := range data {
			data[i] = byte(i * 7)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		maxBytes := int64(16 << 20)
		readers := []struct {
			name   string
			reader *application.Reader
		}{
			{"memory", application.NewReader(application.Budgets{Memory: benchBudget(b)}, nil)},
			{"spool", application.NewReaderSpoolingAbove(
				application.Budgets{Memory: benchBudget(b), Spool: benchBudget(b)}, spoolDir, 0)},
		}
		for _, r := range readers {
			b.Run(s.name+"/"+r.name, func(b *testing.B) {
				conn := loopback(b)
				ctx := context.Background()
				b.SetBytes(int64(s.size))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					f, err := openOSFile(path)
					if err != nil {
						b.Fatal(err)
					}
					body, err := r.reader.Read(ctx, f, maxBytes)
					if err != nil {
						b.Fatal(err)
					}
					sent, err := io.Copy(conn, body.Content())
					if err != nil || sent != int64(s.size) || len(body.SHA256) != 64 {
						b.Fatalf("sent %d bytes: %v", sent, err)
					}
					body.Release()
					f.Close()
				}
			})
		}
		b.Run(s.name+"/baseline", func(b *testing.B) {
			conn := loopback(b)
			b.SetBytes(int64(s.size))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				data, err := os.ReadFile(path)
				if err != nil {
					b.Fatal(err)
				}
				sum := sha256.Sum256(data)
				if len(data) != s.size || len(hex.EncodeToString(sum[:])) != 64 {
					b.Fatalf("read %d bytes", len(data))
				}
				if _, err := conn.Write(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadParallel runs the pooled and baseline reads of a 1 MiB file from
// GOMAXPROCS goroutines at once, the shape of concurrent requests, where a fresh buffer per
// read is what drives the garbage collector.
func BenchmarkReadParallel(b *testing.B) {
	const size = 1 << 20
	path := filepath.Join(b.TempDir(), "1MiB")
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("1MiB/pooled", func(b *testing.B) {
		reader := application.NewReader(application.Budgets{Memory: benchBudget(b)}, nil)
		b.SetBytes(size)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				f, err := openOSFile(path)
				if err != nil {
					b.Error(err)
					return
				}
				body, err := reader.Read(ctx, f, 16<<20)
				if err != nil {
					b.Error(err)
					return
				}
				body.Release()
				f.Close()
			}
		})
	})
	b.Run("1MiB/baseline", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				data, err := os.ReadFile(path)
				if err != nil {
					b.Error(err)
					return
				}
				sum := sha256.Sum256(data)
				_ = hex.EncodeToString(sum[:])
			}
		})
	})
}
