package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/resplane/resplane"
	"github.com/resplane/resplane/adapters/config"
	"github.com/resplane/resplane/application/operator"
	"github.com/resplane/resplane/domain/pathpolicy"
	"github.com/resplane/resplane/domain/refusal"
	"github.com/resplane/resplane/ports"
)

// defaultJobs is how many files a pull fetches at once unless --jobs says otherwise
// (docs/decisions/0043-pull-fetches-four-files-at-a-time.md).
const defaultJobs = 4

// maxJobs bounds --jobs: each job holds a connection and a temp file.
const maxJobs = 64

// urlNote says what URL is, for every files command.
const urlNote = `URL is the service's base URL as the ready line prints it (http://127.0.0.1:8080); a URL
ending in /resources/files is accepted too. Exit status: 0 when everything succeeded, 1 when
a file failed or the service refused, 2 for a usage error.`

func filesCommand() *command {
	return &command{
		spec: config.Spec{Name: "files", Summary: `Lists, downloads and mirrors a service's export. This is the operator's
client of the operator plane (docs/operator-guide.md, "Pulling outputs"); it verifies every
file against its etag.`},
		sub: []*command{filesLsCommand(), filesGetCommand(), filesPullCommand(), filesTarCommand()},
	}
}

func filesLsCommand() *command {
	return &command{spec: config.Spec{Name: "files ls", Args: []string{"URL"},
		Summary: `Prints the listing. Each row shows a file's size (in KiB, MiB… on a terminal, in bytes
otherwise), mtime, short sha256 and path, and marks a file above the service's max_bytes.`,
		Flags: []config.Flag{{Name: "json", Usage: "Print the service's listing JSON verbatim"}},
		Notes: urlNote,
	}, run: (*program).filesLs}
}

func filesGetCommand() *command {
	return &command{spec: config.Spec{Name: "files get", Args: []string{"URL", "PATH"},
		Summary: `Downloads one file, verified against its etag. It lands atomically; PATH is
relative to the export root, as the listing shows it.`,
		Flags: []config.Flag{{Name: "output", Short: "o", Arg: "FILE", DefaultHelp: "the file's name in the current directory",
			Usage: "Where to write the file; - writes it to stdout once verified"}},
		Notes: urlNote,
	}, run: (*program).filesGet}
}

func filesPullCommand() *command {
	return &command{spec: config.Spec{Name: "files pull", Args: []string{"URL", "DIR"},
		Summary: `Mirrors the export into DIR. It fetches the files that are missing or differ,
verifies and lands each atomically, and never writes outside DIR.`,
		Flags: []config.Flag{
			{Name: "delete", Usage: "Also remove local regular files the listing no longer has"},
			{Name: "jobs", Arg: "N", Default: strconv.Itoa(defaultJobs), Usage: "How many files to fetch at once, 1 to " + strconv.Itoa(maxJobs)},
			{Name: "dry-run", Usage: "Show what would be fetched and deleted, and change nothing"},
			{Name: "json", Usage: `Print {"fetched","unchanged","deleted","failed","skipped","bytes"} on stdout at the end ("dry_run":true on a dry run; with --watch, one such line per cycle that changed something, with "at_ms")`},
			{Name: "strict", Usage: "Exit 1 when a file is skipped for being above the service's max_bytes"},
			{Name: "watch", Usage: "Keep mirroring: list the export every --interval and fetch (with --delete, delete) what changed, until SIGINT or SIGTERM"},
			intervalFlag("With --watch, how often to list the export"),
		},
		Notes: urlNote + `

With --watch, a service that stops answering is retried with backoff (up to 30s) and said
once; SIGINT or SIGTERM drops the file in flight, never half-landed, and exits 0.`,
	}, run: (*program).filesPull}
}

func filesTarCommand() *command {
	return &command{spec: config.Spec{Name: "files tar", Args: []string{"URL"},
		Summary: `Writes the whole export as one tar archive. Every listed file is verified against
its etag before its member is written, in listing order, with the service's mtime and mode 0644.`,
		Flags: []config.Flag{{Name: "output", Short: "o", Arg: "FILE", DefaultHelp: "stdout, which must not be a terminal",
			Usage: "Where to write the archive; - is stdout. FILE appears only once the archive is whole"}},
		Notes: urlNote + `

A file that fails is left out with one line on stderr, and the exit status is 1; an archive
cut short (the output failed, or SIGINT) is never ended, and FILE is not created.`,
	}, run: (*program).filesTar}
}

func (p *program) filesTar(ctx context.Context, v config.Values) error {
	files, err := remoteFiles(v.Args[0])
	if err != nil {
		return err
	}
	target := v.String("output")
	var out io.Writer = p.stdout
	var landing ports.Landing
	switch {
	case target == "" || target == "-":
		if resplane.IsTerminal(p.stdout) {
			return config.Usagef("stdout is a terminal: redirect it or give -o FILE")
		}
	default:
		if landing, err = resplane.LandAt(target); err != nil {
			return err
		}
		defer landing.Discard()
		out = landing
	}
	summary, err := files.Archive(ctx, resplane.TarArchive(out))
	for _, failure := range summary.Failures {
		fmt.Fprintf(p.stderr, "%s: %s: %s\n", shown(failure.Path), failure.Err.Code, failure.Err.Message)
	}
	if err != nil {
		return refused(files.FilesURL(), err)
	}
	if landing != nil {
		if err := landing.Commit(time.Time{}); err != nil {
			return refused(shown(target), err)
		}
	}
	fmt.Fprintf(p.stderr, "archived %d files (%s), %d failed\n", summary.Members, humanBytes(summary.Bytes), len(summary.Failures))
	if len(summary.Failures) > 0 {
		return exitError(exitFailure)
	}
	return nil
}

// intervalFlag is --interval, for a command that watches the export (files pull --watch, mcp).
func intervalFlag(usage string) config.Flag {
	return config.Flag{Name: "interval", Arg: "D", Default: operator.DefaultInterval.String(),
		Usage: usage + "; at least " + operator.MinInterval.String() + ", in Go syntax (2s, 500ms)"}
}

// interval reads --interval.
func interval(v config.Values) (time.Duration, error) {
	d, err := time.ParseDuration(v.String("interval"))
	if err != nil || d < operator.MinInterval {
		return 0, v.Invalid("interval", fmt.Errorf("must be a duration of at least %s, in Go syntax (2s, 500ms)", operator.MinInterval))
	}
	return d, nil
}

// refused is a refusal the service or the client made, as the one line a files command
// prints for it: "<code>: <message>"; the command's name comes first (program.exit).
func refused(subject string, err error) error {
	if subject == "" {
		return err
	}
	return fmt.Errorf("%s: %w", subject, err)
}

// shown returns a path the service sent, fit to print: as it is when every character is a
// graphic one, else Go-quoted, so that no listed name can drive the operator's terminal.
func shown(path string) string {
	if path != "" && strings.IndexFunc(path, func(r rune) bool { return !unicode.IsGraphic(r) || r == '"' }) < 0 {
		return path
	}
	return strconv.Quote(path)
}

// remoteFiles assembles the client of the service at the URL argument; a URL it cannot use is
// a usage error.
func remoteFiles(u string) (*operator.RemoteFiles, error) {
	files, err := resplane.InitializeRemoteFiles(resplane.ServiceURL(u))
	if err != nil {
		return nil, config.Usagef("%v", err)
	}
	return files, nil
}

func (p *program) filesLs(ctx context.Context, v config.Values) error {
	files, err := remoteFiles(v.Args[0])
	if err != nil {
		return err
	}
	listing, err := files.List(ctx)
	if err != nil {
		return refused(files.FilesURL(), err)
	}
	if v.Switch("json") {
		fmt.Fprintln(p.stdout, strings.TrimSpace(string(listing.Raw)))
		return nil
	}
	human := resplane.IsTerminal(p.stdout)
	table := tabwriter.NewWriter(p.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(table, "SIZE\tMTIME (UTC)\tSHA256\t PATH")
	for _, e := range listing.Entries {
		short := e.SHA256
		if len(short) > 12 {
			short = short[:12]
		}
		size := strconv.FormatInt(e.Size, 10)
		if human {
			size = humanBytes(e.Size)
		}
		mark := ""
		if listing.MaxBytes > 0 && e.Size > listing.MaxBytes {
			mark = "  (above max_bytes: the service refuses it; pull skips it)"
		}
		fmt.Fprintf(table, "%s\t%s\t%s\t %s%s\n", size, time.UnixMilli(e.MtimeMs).UTC().Format("2006-01-02 15:04:05"),
			shown(short), shown(e.Path), mark)
	}
	return table.Flush()
}

func (p *program) filesGet(ctx context.Context, v config.Values) error {
	rel, err := pathpolicy.Lower(v.Args[1])
	if err != nil {
		return config.Usagef("PATH must be a path relative to the export root, as the listing shows it, " +
			"with no empty, \".\" or \"..\" component")
	}
	files, err := remoteFiles(v.Args[0])
	if err != nil {
		return err
	}
	target := v.String("output")
	if target == "" {
		components := rel.Components()
		target = components[len(components)-1]
	}
	var landing ports.Landing
	if target == "-" {
		landing, err = resplane.LandOnCommit(p.stdout)
	} else {
		landing, err = resplane.LandAt(target)
	}
	if err != nil {
		return err
	}
	fetched, err := files.Fetch(ctx, rel, operator.Unlimited, landing)
	if err != nil {
		return refused(shown(rel.String()), err)
	}
	if target != "-" {
		fmt.Fprintf(p.stderr, "%s: %d bytes, sha256 %s\n", shown(target), fetched.Bytes, fetched.SHA256)
	}
	return nil
}

// pullJSON is the summary `pull --json` prints (docs/operator-guide.md, "Pulling outputs");
// a watch adds at_ms to each cycle's.
type pullJSON struct {
	Fetched   int    `json:"fetched"`
	Unchanged int    `json:"unchanged"`
	Deleted   int    `json:"deleted"`
	Failed    int    `json:"failed"`
	Skipped   int    `json:"skipped"`
	Bytes     int64  `json:"bytes"`
	DryRun    bool   `json:"dry_run,omitempty"`
	AtMs      *int64 `json:"at_ms,omitempty"`
}

func newPullJSON(s operator.PullSummary, dryRun bool) pullJSON {
	return pullJSON{Fetched: s.Fetched, Unchanged: s.Unchanged, Deleted: s.Deleted, Failed: s.Failed, Skipped: s.Skipped,
		Bytes: s.Bytes, DryRun: dryRun}
}

func (p *program) filesPull(ctx context.Context, v config.Values) error {
	jobs, err := strconv.Atoi(v.String("jobs"))
	if err != nil || jobs < 1 || jobs > maxJobs {
		return v.Invalid("jobs", fmt.Errorf("must be a whole number from 1 to %d", maxJobs))
	}
	watch, dryRun := v.Switch("watch"), v.Switch("dry-run")
	every, err := interval(v)
	switch {
	case err != nil:
		return err
	case watch && dryRun:
		return config.Usagef("--watch changes the directory as the export changes; it does not take --dry-run")
	case watch && v.Switch("strict"):
		return config.Usagef("--watch keeps mirroring when a file is skipped for its size, and says so; it does not take --strict")
	}
	stderrFile, _ := p.stderr.(*os.File)
	puller, cleanup, err := resplane.InitializeMirror(resplane.PullArgs{
		URL: resplane.ServiceURL(v.Args[0]), Dir: resplane.MirrorDir(v.Args[1]), Stderr: stderrFile,
	})
	if err != nil {
		return config.Usagef("%v", err)
	}
	defer cleanup()
	opts := operator.PullOptions{Jobs: jobs, Delete: v.Switch("delete"), DryRun: dryRun}
	if watch {
		return p.watch(ctx, puller, every, opts, v.Switch("json"))
	}
	summary, err := puller.Mirror.Pull(ctx, opts)
	if err != nil {
		return refused(puller.Mirror.FilesURL(), err)
	}
	printPull(p.stderr, summary, opts)
	if v.Switch("json") {
		line, _ := json.Marshal(newPullJSON(summary, dryRun))
		fmt.Fprintln(p.stdout, string(line))
	}
	if summary.Failed > 0 || (v.Switch("strict") && summary.Skipped > 0) {
		return exitError(exitFailure)
	}
	return nil
}

// watch runs `files pull --watch` until ctx ends: each cycle that changed something is said
// on stderr and, with asJSON, as one NDJSON line on stdout; a service that stops answering is
// said once, and its return once.
func (p *program) watch(ctx context.Context, puller *resplane.Puller, every time.Duration, opts operator.PullOptions, asJSON bool) error {
	url := puller.Mirror.FilesURL()
	hooks := operator.WatchHooks{
		Pulled: func(s operator.PullSummary, at time.Time) {
			if s.Fetched+s.Deleted+s.Failed == 0 {
				return
			}
			printPull(p.stderr, s, opts)
			if asJSON {
				out := newPullJSON(s, false)
				ms := at.UnixMilli()
				out.AtMs = &ms
				line, _ := json.Marshal(out)
				fmt.Fprintln(p.stdout, string(line))
			}
		},
		Lost: func(r *refusal.Refusal, retry time.Duration) {
			fmt.Fprintf(p.stderr, "%s: %s: %s; retrying with backoff (first in %s, then up to every %s)\n",
				url, r.Code, r.Message, retry, operator.MaxBackoff)
		},
		Back: func() { fmt.Fprintf(p.stderr, "%s answers again; watching\n", url) },
	}
	if err := puller.Mirror.Watch(ctx, puller.Poller, every, opts, hooks); err != nil {
		return refused(url, err)
	}
	return nil
}

// printPull writes what a pull did on stderr: a line per failure, per skipped file, per
// changed file and, on a dry run, per planned step, then the one-line summary: counts first,
// "deleted" only with --delete, "skipped" only when a file was, and a note on the local
// files the listing lacks when --delete is not given.
func printPull(w io.Writer, s operator.PullSummary, opts operator.PullOptions) {
	if opts.DryRun {
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
	for _, f := range s.SkippedPaths {
		fmt.Fprintf(w, "%s: skipped: %d bytes, above the service's max_bytes, which it would refuse\n", shown(f.Path), f.Size)
	}
	for _, failure := range s.Failures {
		fmt.Fprintf(w, "%s: %s: %s\n", shown(failure.Path), failure.Err.Code, failure.Err.Message)
	}
	line := fmt.Sprintf("%d fetched (%s), %d unchanged, %d failed", s.Fetched, humanBytes(s.Bytes), s.Unchanged, s.Failed)
	if opts.DryRun {
		line = fmt.Sprintf("dry run: %d would be fetched (%s), %d unchanged, %d failed", s.Fetched, humanBytes(s.Bytes), s.Unchanged, s.Failed)
	}
	switch {
	case opts.Delete && opts.DryRun:
		line += fmt.Sprintf(", %d would be deleted", s.Deleted)
	case opts.Delete:
		line += fmt.Sprintf(", %d deleted", s.Deleted)
	}
	if s.Skipped > 0 {
		line += fmt.Sprintf(", %d skipped", s.Skipped)
	}
	if s.Unlisted > 0 {
		line += fmt.Sprintf("; %d local files are not in the listing (--delete removes them)", s.Unlisted)
	}
	fmt.Fprintln(w, line)
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
