package application_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/resplane/resplane/adapters/clock"
	"github.com/resplane/resplane/adapters/osfs"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/containment"
	"github.com/resplane/resplane/domain/generation"
	"github.com/resplane/resplane/domain/trace"
	"github.com/resplane/resplane/ports"
)

// cpuTime is the CPU time, user and system, the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discardSink is a trace sink that keeps nothing, so a long benchmark does not grow a
// recorder.
type discardSink struct{}

func (discardSink) Record(trace.Event) {}

// The listing fixture: 100 directories of 100 files of 16 KiB each.
const (
	listDirs    = 100
	listPerDir  = 100
	listFiles   = listDirs * listPerDir
	listFileLen = 16 << 10
)

// BenchmarkListing answers GET /resources/files over 10,000 unchanged files of 16 KiB (100
// directories of 100) on the real filesystem, side by side on the same tree:
//
//   - cold: a listing with an empty hash cache, as the first listing of a process: a walk,
//     one open per file, sha256 of every byte, and the cache filled;
//   - warm: the next listing of the same process, once every file is older than the racy
//     window: a walk and one fstatat per file, every hash reused, no file opened;
//   - racy: a listing whose cache holds every file, but whose clock says every file changed
//     within the racy window before the cache's hashes were taken: each file is stated, then
//     opened and hashed again. It is what a listing of a tree that changed everywhere costs,
//     the most a stat before the open can add to a cold listing;
//   - cold-lease and warm-lease: cold and warm in lease mode (Files.LeaseHashes over
//     osfs.Leases): the cold listing also takes a read lease on each file (a dup and an
//     fcntl) and adds an inotify watch of it; the warm one, after the listing that proved
//     every hash by a stat, reads the watches' queue once and states no file: its lease
//     still trusted, its watch quiet and its directory entry naming the same inode.
//
// SetBytes is the bytes a cold listing hashes, so that all report the same MB/s basis;
// ns/file is reported too, and cpu-ns/file: the CPU time the process spent (user and system,
// the garbage collector's included) per file, which other work on a shared machine does not
// inflate the way it does the elapsed time.
func BenchmarkListing(b *testing.B) {
	begun := time.Now()
	wd := filepath.Join(b.TempDir(), "wd")
	content := make([]byte, listFileLen)
	for d := range listDirs {
		dir := filepath.Join(wd, "out", fmt.Sprintf("d%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range listPerDir {
			content[0], content[1] = byte(d), byte(i) // every file its own hash
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), content, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	disk, err := osfs.New(wd)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { disk.Close() })
	// A file's hash is reused only once its times are older than the racy window before the
	// listing that took it.
	time.Sleep(application.RacyWindow + 100*time.Millisecond)
	reader := application.NewReader(application.Budgets{Memory: benchBudget(b)}, nil)
	fresh := func(clk ports.Clock) *application.Files {
		return application.NewFiles(
			&application.ExportPlane{Root: "out/", MaxBytes: 10 << 20},
			application.Session{Generation: &generation.Counter{}, Containment: containment.Sealed},
			disk, reader, clk, discardSink{})
	}
	list := func(b *testing.B, files *application.Files) {
		_, listing, err := listOf(b, files, context.Background(), get)
		if err != nil {
			b.Fatal(err)
		}
		if len(listing.Entries) != listFiles {
			b.Fatalf("listed %d files, want %d", len(listing.Entries), listFiles)
		}
	}
	run := func(b *testing.B, files func() *application.Files) {
		b.SetBytes(listFiles * listFileLen)
		b.ReportAllocs()
		before := cpuTime(b)
		b.ResetTimer()
		for b.Loop() {
			list(b, files())
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*listFiles), "ns/file")
		b.ReportMetric(float64((cpuTime(b)-before).Nanoseconds())/float64(b.N*listFiles), "cpu-ns/file")
	}
	// warmed is a Files whose cache holds every file, listed once on clk.
	warmed := func(b *testing.B, clk ports.Clock) func() *application.Files {
		files := fresh(clk)
		list(b, files)
		return func() *application.Files { return files }
	}
	session, err := osfs.OpenSessionDir(wd, "ses_bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { session.Close() })
	// leasing gives files leases of their own, given up by the returned function.
	leasing := func(b *testing.B, files *application.Files) func() {
		leases, err := osfs.OpenLeases(disk, session, osfs.LeaseOptions{})
		if err != nil {
			b.Fatal(err)
		}
		files.LeaseHashes(leases)
		return func() { leases.Close() }
	}
	b.Run("cold", func(b *testing.B) { run(b, func() *application.Files { return fresh(&clock.System{}) }) })
	b.Run("warm", func(b *testing.B) { run(b, warmed(b, &clock.System{})) })
	b.Run("racy", func(b *testing.B) { run(b, warmed(b, clock.NewManual(begun))) })
	b.Run("cold-lease", func(b *testing.B) {
		release := func() {}
		defer func() { release() }()
		run(b, func() *application.Files {
			b.StopTimer()
			release() // gives up the leases of the previous listing
			files := fresh(&clock.System{})
			release = leasing(b, files)
			b.StartTimer()
			return files
		})
	})
	b.Run("warm-lease", func(b *testing.B) {
		files := fresh(&clock.System{})
		defer leasing(b, files)()
		list(b, files) // hashes every file
		list(b, files) // proves every hash by a stat
		run(b, func() *application.Files { return files })
	})
}
