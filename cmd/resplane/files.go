package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/resplane/resplane"
	"github.com/resplane/resplane/adapters/localfs"
	"github.com/resplane/resplane/application"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// filesUsage is the help of `resplane files` (docs/operator-guide.md, "Pulling outputs").
const filesUsage = `Usage:
  resplane files ls URL [--json]
  resplane files get URL PATH [-o FILE]
  resplane files pull URL DIR [--delete] [--jobs N] [--dry-run] [--json]

The operator's client of a service's operator plane. URL is the service's base URL as the
ready line prints it (http://127.0.0.1:8080); a URL ending in /resources/files is accepted too.

  ls    prints the listing: path, size, mtime and a short sha256 (--json: the service's JSON)
  get   downloads one file, verified against its etag, onto FILE atomically (default: the
        file's name in the current directory; -o - writes it to stdout once verified)
  pull  mirrors the export into DIR: fetches the files that are missing or differ, verifies
        and lands each atomically; --delete also removes local files the listing lacks

Exit status: 0 when everything succeeded, 1 when a file failed or the service refused,
2 for a usage error. Run 'resplane files <command> --help' for a command's flags.
`

// defaultJobs is how many files a pull fetches at once unless --jobs says otherwise
// (docs/decisions/0043-pull-fetches-four-files-at-a-time.md).
const defaultJobs = 4

// maxJobs bounds --jobs: each job holds a connection and a temp file.
const maxJobs = 64

// parseOrHelp parses args into fs. Asked for help, it writes help on stdout (exit 0); a bad
// flag is a usage error, which fs has already reported. ok is false when the caller must
// return status.
func parseOrHelp(fs *flag.FlagSet, args []string, stdout io.Writer, help func()) (status int, ok bool) {
	// The flag package prints the usage for -h as well as for a bad flag; help goes to stdout
	// alone, so the usage is printed here, after the package's error line, for a bad flag only.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		help()
		return exitOK, false
	case err != nil:
		usage()
		return exitUsage, false
	}
	return 0, true
}

// groupUsage answers a command that groups subcommands when it is given none (its usage on
// stderr, exit 2) or asked for help (its usage on stdout, exit 0); done is false otherwise.
func groupUsage(args []string, usage string, stdout, stderr io.Writer) (status int, done bool) {
	switch {
	case len(args) == 0:
		fmt.Fprint(stderr, usage)
		return exitUsage, true
	case isHelp(args[0]):
		fmt.Fprint(stdout, usage)
		return exitOK, true
	}
	return 0, false
}

func filesCommand(args []string, stdout, stderr io.Writer) int {
	if status, done := groupUsage(args, filesUsage, stdout, stderr); done {
		return status
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd, rest := args[0], args[1:]; cmd {
	case "ls":
		return filesLs(ctx, rest, stdout, stderr)
	case "get":
		return filesGet(ctx, rest, stdout, stderr)
	case "pull":
		return filesPull(ctx, rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "resplane files: unknown command %q\n\n%s", cmd, filesUsage)
		return exitUsage
	}
}

// filesFlags is the flag set of one files command, with its positional arguments.
type filesFlags struct {
	*flag.FlagSet
	positional []string
	want       []string // the names of the positional arguments, for messages
}

func newFilesFlags(name string, stderr io.Writer, positional ...string) *filesFlags {
	fs := flag.NewFlagSet("resplane files "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &filesFlags{FlagSet: fs, want: positional}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: resplane files %s %s [flags]\n", name, strings.Join(positional, " "))
		fs.PrintDefaults()
	}
	return f
}

// parse parses args, flags and positional arguments in any order (a lone "--" ends the
// flags); ok is false when the caller must return status.
func (f *filesFlags) parse(args []string, stdout io.Writer) (status int, ok bool) {
	for {
		if status, ok := parseOrHelp(f.FlagSet, args, stdout, f.Usage); !ok {
			return status, false
		}
		rest := f.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			f.positional = append(f.positional, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		f.positional, args = append(f.positional, rest[0]), rest[1:]
	}
	if len(f.positional) != len(f.want) {
		fmt.Fprintf(f.Output(), "%s: takes %s, got %d argument(s)\n", f.Name(), strings.Join(f.want, " and "), len(f.positional))
		return exitUsage, false
	}
	return 0, true
}

// report prints err on stderr: a refusal as "<code>: <message>", anything else as its text.
func report(stderr io.Writer, prefix string, err error) {
	if r, ok := refusal.As(err); ok {
		fmt.Fprintf(stderr, "%s: %s: %s\n", prefix, r.Code, r.Message)
		return
	}
	fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
}

// shown returns a path the service sent, fit to print: as it is when every character is a
// graphic one, else Go-quoted, so that no listed name can drive the operator's terminal.
func shown(path string) string {
	if path != "" && strings.IndexFunc(path, func(r rune) bool { return !unicode.IsGraphic(r) || r == '"' }) < 0 {
		return path
	}
	return strconv.Quote(path)
}

func filesLs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFilesFlags("ls", stderr, "URL")
	asJSON := f.Bool("json", false, "print the service's listing JSON verbatim")
	if status, ok := f.parse(args, stdout); !ok {
		return status
	}
	files, err := resplane.InitializeRemoteFiles(resplane.ServiceURL(f.positional[0]))
	if err != nil {
		fmt.Fprintf(stderr, "resplane files ls: %v\n", err)
		return exitUsage
	}
	listing, err := files.List(ctx)
	if err != nil {
		report(stderr, "resplane files ls", err)
		return exitFailure
	}
	if *asJSON {
		fmt.Fprintln(stdout, strings.TrimSpace(string(listing.Raw)))
		return exitOK
	}
	table := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(table, "SIZE\tMTIME (UTC)\tSHA256\t PATH")
	for _, e := range listing.Entries {
		short := e.SHA256
		if len(short) > 12 {
			short = short[:12]
		}
		fmt.Fprintf(table, "%d\t%s\t%s\t %s\n", e.Size, time.UnixMilli(e.MtimeMs).UTC().Format("2006-01-02 15:04:05"),
			shown(short), shown(e.Path))
	}
	table.Flush()
	return exitOK
}

func filesGet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFilesFlags("get", stderr, "URL", "PATH")
	out := f.String("o", "", "where to write the file (default: its name in the current directory; - for stdout)")
	if status, ok := f.parse(args, stdout); !ok {
		return status
	}
	rel, err := pathpolicy.Lower(f.positional[1])
	if err != nil {
		fmt.Fprintf(stderr, "resplane files get: PATH must be a path relative to the export root, as the listing shows it, "+
			"with no empty, \".\" or \"..\" component\n")
		return exitUsage
	}
	files, err := resplane.InitializeRemoteFiles(resplane.ServiceURL(f.positional[0]))
	if err != nil {
		fmt.Fprintf(stderr, "resplane files get: %v\n", err)
		return exitUsage
	}
	target := *out
	if target == "" {
		components := rel.Components()
		target = components[len(components)-1]
	}
	var landing ports.Landing
	if target == "-" {
		landing, err = localfs.Spool(stdout)
	} else {
		landing, err = localfs.CreateAt(target)
	}
	if err != nil {
		report(stderr, "resplane files get", err)
		return exitFailure
	}
	fetched, err := files.Fetch(ctx, rel, application.Unlimited, landing)
	if err != nil {
		report(stderr, "resplane files get: "+shown(rel.String()), err)
		return exitFailure
	}
	if target != "-" {
		fmt.Fprintf(stderr, "%s: %d bytes, sha256 %s\n", shown(target), fetched.Bytes, fetched.SHA256)
	}
	return exitOK
}

// pullJSON is the summary `pull --json` prints (docs/operator-guide.md, "Pulling outputs").
type pullJSON struct {
	Fetched   int   `json:"fetched"`
	Unchanged int   `json:"unchanged"`
	Deleted   int   `json:"deleted"`
	Failed    int   `json:"failed"`
	Bytes     int64 `json:"bytes"`
}

func filesPull(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFilesFlags("pull", stderr, "URL", "DIR")
	del := f.Bool("delete", false, "remove local regular files the listing no longer has")
	jobs := f.Int("jobs", defaultJobs, "how many files to fetch at once (1 to "+strconv.Itoa(maxJobs)+")")
	dryRun := f.Bool("dry-run", false, "show what would be fetched and deleted, and change nothing")
	asJSON := f.Bool("json", false, `print {"fetched","unchanged","deleted","failed","bytes"} on stdout at the end`)
	if status, ok := f.parse(args, stdout); !ok {
		return status
	}
	if *jobs < 1 || *jobs > maxJobs {
		fmt.Fprintf(stderr, "resplane files pull: --jobs must be between 1 and %d, got %d\n", maxJobs, *jobs)
		return exitUsage
	}
	stderrFile, _ := stderr.(*os.File)
	mirror, cleanup, err := resplane.InitializeMirror(resplane.PullLaunch{
		URL: resplane.ServiceURL(f.positional[0]), Dir: resplane.MirrorDir(f.positional[1]), Stderr: stderrFile,
	})
	if err != nil {
		fmt.Fprintf(stderr, "resplane files pull: %v\n", err)
		return exitUsage
	}
	defer cleanup()
	summary, err := mirror.Pull(ctx, application.PullOptions{Jobs: *jobs, Delete: *del, DryRun: *dryRun})
	if err != nil {
		report(stderr, "resplane files pull: the listing", err)
		return exitFailure
	}
	printPull(stderr, summary, *dryRun)
	if *asJSON {
		line, _ := json.Marshal(pullJSON{summary.Fetched, summary.Unchanged, summary.Deleted, summary.Failed, summary.Bytes})
		fmt.Fprintln(stdout, string(line))
	}
	if summary.Failed > 0 {
		return exitFailure
	}
	return exitOK
}

// printPull writes what a pull did on stderr: a line per failure, per changed file and, on a
// dry run, per planned step, then the one-line summary.
func printPull(w io.Writer, s application.PullSummary, dryRun bool) {
	if dryRun {
		for _, p := range s.FetchedPaths {
			fmt.Fprintf(w, "would fetch %s\n", shown(p))
		}
		for _, p := range s.DeletedPaths {
			fmt.Fprintf(w, "would delete %s\n", shown(p))
		}
	}
	for _, p := range s.Changed {
		fmt.Fprintf(w, "%s: changed since the listing; the version read was verified against its etag and landed\n", shown(p))
	}
	for _, failure := range s.Failures {
		fmt.Fprintf(w, "%s: %s: %s\n", shown(failure.Path), failure.Err.Code, failure.Err.Message)
	}
	verb, deleted := "fetched", "deleted"
	if dryRun {
		verb, deleted = "dry run: would fetch", "would delete"
	}
	fmt.Fprintf(w, "%s %d files (%s), %d unchanged, %s %d, %d failed\n",
		verb, s.Fetched, humanBytes(s.Bytes), s.Unchanged, deleted, s.Deleted, s.Failed)
}

// humanBytes writes n in the largest binary unit that keeps it at least 1.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	value, exp := float64(n)/unit, 0
	for value >= unit && exp < 3 {
		value /= unit
		exp++
	}
	return strconv.FormatFloat(value, 'f', 1, 64) + " " + string("KMGT"[exp]) + "iB"
}
