#!/usr/bin/env bash
# Run the Go benchmarks and print the side-by-side ratios the project quotes (docs/benchmarks.md).
# Every pair is measured in the same run, on the same fixture, so only their ratio is meaningful;
# absolute numbers depend on the machine.
#
# Settings (environment):
#   COUNT      runs of each benchmark (-count)                  (default 5)
#   BENCHTIME  -benchtime of each run                           (default 1s)
#   BENCH      -bench regexp                                    (default .)
#   PKGS       packages                                         (default ./...)
#   OUT_DIR    where the raw output is saved                    (default tmp/bench, gitignored)
#   CPU        -cpu list, empty for GOMAXPROCS                  (default empty)
#
# Ratios are computed here with awk from the mean ns/op, B/op and allocs/op of the COUNT runs.
# When benchstat is already installed, or resolvable from the local module cache without the
# network, its table is printed as well; nothing is downloaded.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

SCRIPT=bench.sh
# shellcheck source=bench/require.sh
source bench/require.sh
require awk

count=${COUNT:-5}
benchtime=${BENCHTIME:-1s}
bench=${BENCH:-.}
pkgs=${PKGS:-./...}
out_dir=${OUT_DIR:-tmp/bench}
cpu=${CPU:-}

mkdir -p "$out_dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
raw=$out_dir/bench-$stamp.txt

args=(test -run '^$' -bench "$bench" -benchmem -count "$count" -benchtime "$benchtime")
if [[ -n $cpu ]]; then
	args+=(-cpu "$cpu")
fi
# shellcheck disable=SC2086 # PKGS is a list of package patterns
args+=($pkgs)

{
	echo "# bench/bench.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(nproc) CPUs, $(go version | cut -d' ' -f3)"
	echo "# go ${args[*]}"
} | tee "$raw"
go "${args[@]}" 2>&1 | tee -a "$raw" | grep -E '^(Benchmark|ok|FAIL|---|panic)' || true
if grep -qE '^(FAIL|--- FAIL|panic:)' "$raw"; then
	echo "bench.sh: a benchmark failed; see $raw" >&2
	exit 1
fi

# label|benchmark a|benchmark b — a's figures are quoted relative to b's.
pairs=(
	"open depth=1: openat2 / naive os.Open+Stat|OpenFile/depth=1/openat2|OpenFile/depth=1/naive"
	"open depth=1: per-component / openat2|OpenFile/depth=1/per-component|OpenFile/depth=1/openat2"
	"open depth=5: openat2 / naive os.Open+Stat|OpenFile/depth=5/openat2|OpenFile/depth=5/naive"
	"open depth=5: per-component / openat2|OpenFile/depth=5/per-component|OpenFile/depth=5/openat2"
	"open via symlink: openat2 ELOOP+fallback / per-component|OpenFileThroughSymlink/openat2-then-fallback|OpenFileThroughSymlink/per-component"
	"walk 1000 files: osfs / naive WalkDir+Open|Walk/osfs|Walk/naive"
	"walk 1000 files: every file known by its stat / opened|Walk/osfs-known|Walk/osfs"
	"read+send 4KiB: memory / os.ReadFile+sha256|Read/4KiB/memory|Read/4KiB/baseline"
	"read+send 4KiB: spool / memory|Read/4KiB/spool|Read/4KiB/memory"
	"read+send 16KiB: spool / memory|Read/16KiB/spool|Read/16KiB/memory"
	"read+send 64KiB: spool / memory|Read/64KiB/spool|Read/64KiB/memory"
	"read+send 256KiB: spool / memory|Read/256KiB/spool|Read/256KiB/memory"
	"read+send 1MiB: spool / memory|Read/1MiB/spool|Read/1MiB/memory"
	"read+send 10MiB: spool / memory|Read/10MiB/spool|Read/10MiB/memory"
	"read+send 10MiB: memory / os.ReadFile+sha256|Read/10MiB/memory|Read/10MiB/baseline"
	"read 1MiB parallel: pooled / baseline|ReadParallel/1MiB/pooled|ReadParallel/1MiB/baseline"
	"list 10000 x 16KiB files: warm / cold hash cache|Listing/warm|Listing/cold"
	"list 10000 x 16KiB files: racy (stated, then hashed) / cold|Listing/racy|Listing/cold"
	"encode a 10000-entry listing, nothing kept / reference|ListingEncoder/cold|ListingEncoder/reference"
	"encode a 10000-entry listing, unchanged / reference|ListingEncoder/unchanged|ListingEncoder/reference"
	"encode a 10000-entry listing, generation moved / reference|ListingEncoder/generation|ListingEncoder/reference"
	"encode a 10000-entry listing, one entry changed / reference|ListingEncoder/one-changed|ListingEncoder/reference"
	"verify: valid token / bad MAC|Verify/valid|Verify/bad-mac"
	"serve 1KiB in process: redeem / read|Serve/redeem|Serve/read"
	"redact: one token / no token|Redact/one-token|Redact/no-token"
)

echo
echo "Ratios (mean of $count runs; time a/b < 1 means a is faster; ± is half the min-max spread of ns/op):"
printf '%s\n' "${pairs[@]}" | awk -F'|' -v raw="$raw" '
	function trim(name) { sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name); return name }
	BEGIN {
		while ((getline line < raw) > 0) {
			if (line !~ /^Benchmark/) continue
			n = split(line, f, /[ \t]+/)
			name = trim(f[1])
			runs[name]++
			for (i = 3; i < n; i += 2) {
				v = f[i] + 0; u = f[i + 1]
				if (u == "ns/op") {
					ns[name] += v
					if (!(name in lo) || v < lo[name]) lo[name] = v
					if (!(name in hi) || v > hi[name]) hi[name] = v
				} else if (u == "B/op") {
					bytes[name] += v
				} else if (u == "allocs/op") {
					allocs[name] += v
				}
			}
		}
		printf "  %-58s %9s %7s %7s %22s %16s\n", "pair (a / b)", "time a/b", "±a", "±b", "B/op a -> b", "allocs a -> b"
	}
	function spread(name) { return ns[name] > 0 ? sprintf("%.0f%%", 50 * (hi[name] - lo[name]) / (ns[name] / runs[name])) : "-" }
	{
		a = $2; b = $3
		if (!(a in runs) || !(b in runs)) { missing++; next }
		ma = ns[a] / runs[a]; mb = ns[b] / runs[b]
		printf "  %-58s %8.2fx %7s %7s %10.0f -> %-9.0f %6.1f -> %-7.1f\n", $1, ma / mb, spread(a), spread(b),
			bytes[a] / runs[a], bytes[b] / runs[b], allocs[a] / runs[a], allocs[b] / runs[b]
	}
	END { if (missing) printf "  (%d pair(s) not in this run: narrowed by BENCH or PKGS)\n", missing }
'

# benchstat, only if it is already here: installed, or in the module cache (no network).
benchstat=()
if command -v benchstat >/dev/null 2>&1; then
	benchstat=(benchstat)
else
	# The module cache as the only proxy: this resolves only what is already on disk.
	offline=(env GOPROXY="file://$(go env GOMODCACHE)/cache/download" GONOSUMDB=golang.org/x/perf GOFLAGS=)
	if "${offline[@]}" go run golang.org/x/perf/cmd/benchstat@latest -h >/dev/null 2>&1; then
		benchstat=("${offline[@]}" go run golang.org/x/perf/cmd/benchstat@latest)
	fi
fi
if ((${#benchstat[@]})); then
	echo
	echo "benchstat:"
	"${benchstat[@]}" "$raw"
fi
echo
echo "raw output saved to $raw"
