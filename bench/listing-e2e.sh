#!/usr/bin/env bash
# What a warm listing costs as its client sees it, against a cold one (docs/benchmarks.md,
# "Listing end to end"): a capsule of FILES unchanged files of 16 KiB, older than the racy
# window; per round a fresh server (an empty hash cache), its first GET /resources/files (cold)
# and then WARM more (warm), each timed by curl (time_total, the whole answer read), and the
# server's CPU (utime + stime from /proc, in clock ticks) over the cold request and over all
# the warm ones together, divided by their count. The server runs with --hash-cache-max-age 1h
# so that no cached hash expires within a round: every warm listing reuses every hash.
#
# Settings (environment):
#   FILES     files in the export                          (default 10000)
#   WARM      warm requests per round                      (default 20)
#   ROUNDS    rounds, each with its own server             (default 3)
#   OUT_DIR   where the report and the raw times are saved (default tmp/bench, gitignored)
#   RESPLANE  the binary                                   (default: ./cmd/resplane, built)
# Everything goes to 127.0.0.1 only. About 10 s per round on 2 cores, after a minute or so
# spent writing the capsule; the capsule is removed at the end, the report is kept.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

SCRIPT=listing-e2e.sh
# shellcheck source=bench/require.sh
source bench/require.sh
# shellcheck source=bench/capsule.sh
source bench/capsule.sh
require awk cmp curl getconf grep head split

files=${FILES:-10000}
warm=${WARM:-20}
rounds=${ROUNDS:-3}
out_dir=${OUT_DIR:-tmp/bench}
max_age=1h
mkdir -p "$out_dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
raw=$(cd "$out_dir" && pwd)/listing-e2e-$stamp.txt

work=$(mktemp -d)
server=
trap 'if [[ -n $server ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
bin=${RESPLANE:-$work/resplane}
[[ -n ${RESPLANE:-} ]] || go build -trimpath -o "$bin" ./cmd/resplane

old_files_capsule "$work" "$files" ListingE2E
# Every change time is now: wait out the 2 s racy window, with a margin, so that the first
# listing's hashes are reusable by the next one.
sleep 3

hz=$(getconf CLK_TCK)
# cpu PID: the process's utime + stime in clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# get URL FILE: one GET, its body to FILE; prints curl's time_total in seconds.
get() { curl -sS --fail -o "$2" -w '%{time_total}\n' "$1"; }

{
	echo "# bench/listing-e2e.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(nproc) CPUs, $(go version | cut -d' ' -f3)"
	if [[ -n ${RESPLANE:-} ]]; then echo "# binary $RESPLANE; load $(cut -d' ' -f1-3 /proc/loadavg)"; else
		echo "# head $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)'); load $(cut -d' ' -f1-3 /proc/loadavg)"
	fi
	echo "# $files files x 16 KiB, older than the racy window; per round a fresh server with --hash-cache-max-age $max_age"
	echo "# (no cached hash expires within a round), 1 cold GET /resources/files then $warm warm ones; CPU in ticks of 1/$hz s"
} | tee "$raw"
echo "# round kind wall_s cpu_ticks" >>"$raw"

for round in $(seq "$rounds"); do
	: >"$work/ready"
	"$bin" serve --manifest "$work/murmur.yaml" --workdir "$work/wd" --listen 127.0.0.1:0 \
		--hash-cache-max-age "$max_age" >"$work/ready" 2>"$work/serve.log" &
	server=$!
	for _ in $(seq 100); do [[ -s $work/ready ]] && break; sleep 0.1; done
	addr=$(sed -n 's/.*"listen":"\([^"]*\)".*/\1/p' "$work/ready")
	[[ -n $addr ]] || { echo "$SCRIPT: no ready line; the server's stderr:" >&2; cat "$work/serve.log" >&2; exit 1; }
	listing=http://$addr/resources/files

	c0=$(cpu "$server")
	wall=$(get "$listing" "$work/cold.json")
	c1=$(cpu "$server")
	echo "$round cold $wall $((c1 - c0))" >>"$raw"
	entries=$(grep -o '"path":' "$work/cold.json" | wc -l)
	((entries == files)) || { echo "$SCRIPT: the cold listing has $entries entries, want $files" >&2; exit 1; }

	w0=$(cpu "$server")
	for _ in $(seq "$warm"); do
		echo "$round warm $(get "$listing" /dev/null)" >>"$raw"
	done
	w1=$(cpu "$server")
	echo "$round warm-total - $((w1 - w0))" >>"$raw"

	# Not timed: a warm answer is byte for byte the cold one (nothing changed, not even the
	# generation).
	get "$listing" "$work/warm.json" >/dev/null
	cmp -s "$work/cold.json" "$work/warm.json" || { echo "$SCRIPT: round $round: a warm listing differs from the cold one" >&2; exit 1; }

	kill "$server"
	wait "$server" || true
	server=
done

table=$(
	awk -v hz="$hz" -v warm="$warm" '
		$1 !~ /^[0-9]+$/ { next }
		$2 == "cold" { cw[$1] = $3; cc[$1] = $4 / hz; if ($1 > n) n = $1 }
		$2 == "warm" { k = ++count[$1]; ww[$1, k] = $3 }
		$2 == "warm-total" { wc[$1] = $4 / hz / warm }
		END {
			printf "%-5s  %12s  %12s  %17s  %15s  %9s  %9s\n", "round", "cold wall", "cold CPU", "warm wall (med)", "warm CPU (mean)", "wall w/c", "CPU w/c"
			for (r = 1; r <= n; r++) {
				k = count[r]
				for (i = 1; i <= k; i++) v[i] = ww[r, i]
				for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
				med = k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
				printf "%-5d  %10.1f ms  %10.1f ms  %15.2f ms  %13.2f ms  %9.3f  %9.3f\n", r, 1000 * cw[r], 1000 * cc[r], 1000 * med, 1000 * wc[r], med / cw[r], (cc[r] > 0 ? wc[r] / cc[r] : 0)
			}
		}' "$raw"
)
{
	echo "listing end to end: $files files x 16 KiB, $warm warm requests per round, --hash-cache-max-age $max_age"
	echo "$table"
	echo "raw times: $raw"
} | tee -a "$raw"
