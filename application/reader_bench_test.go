package application_test

// Benchmarks for the use-case hot path Reader.Read (the body of every served file);
// files_bench_test.go has the listing's. Fixtures are built before the timed loop; none of
// these run without -bench.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/budget"
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
	bud, err := budget.New(256 << 20)
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
	{"1MiB", 1 << 20},
	{"10MiB", 10 << 20},
}

// BenchmarkRead reads one file whole and hashes it, two ways on the same file:
//
//   - pooled: open + fstat, Reader.Read (budget reservation, a pooled buffer, sha256),
//     Body.Release (the buffer back to the pool), close: what every served read does;
//   - baseline: os.ReadFile (open, fstat, a fresh buffer, close) + sha256 + hex, the
//     allocation-per-request alternative.
//
// SetBytes is the file size, so MB/s is the read-and-hash throughput; B/op shows what the
// pool saves.
func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
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
		b.Run(s.name+"/pooled", func(b *testing.B) {
			reader := application.NewReader(benchBudget(b))
			ctx := context.Background()
			b.SetBytes(int64(s.size))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				f, err := openOSFile(path)
				if err != nil {
					b.Fatal(err)
				}
				body, err := reader.Read(ctx, f, maxBytes)
				if err != nil {
					b.Fatal(err)
				}
				if len(body.Bytes) != s.size || len(body.SHA256) != 64 {
					b.Fatalf("read %d bytes", len(body.Bytes))
				}
				body.Release()
				f.Close()
			}
		})
		b.Run(s.name+"/baseline", func(b *testing.B) {
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
		reader := application.NewReader(benchBudget(b))
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
