#!/usr/bin/env bash
# What `resplane files pull --watch` at its default interval costs the service
# (docs/operator-guide.md, "Watching an export"): a capsule of FILES unchanged files of 16 KiB,
# older than the racy window, mirrored once, then watched for DURATION seconds; the server's CPU
# over that time (utime + stime from /proc) as a share of one core, next to the same server
# idle for the same time, and the watcher's own CPU.
#
# Settings (environment):
#   FILES     files in the export                          (default 10000)
#   DURATION  seconds measured, each side                  (default 60)
#   INTERVAL  the watch's --interval                       (default 2s, the default)
#   OUT_DIR   where the capsule and the report live        (default tmp/watch-poll-cost, gitignored)
#   RESPLANE  the binary                                   (default: built into OUT_DIR)
# Everything goes to 127.0.0.1 only.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

SCRIPT=watch-poll-cost.sh
# shellcheck source=bench/require.sh
source bench/require.sh
# shellcheck source=bench/capsule.sh
source bench/capsule.sh
require awk getconf head split

files=${FILES:-10000}
duration=${DURATION:-60}
interval=${INTERVAL:-2s}
out_dir=${OUT_DIR:-tmp/watch-poll-cost}
rm -rf "$out_dir"
mkdir -p "$out_dir/wd/out"
out_dir=$(cd "$out_dir" && pwd)
bin=${RESPLANE:-$out_dir/resplane}
[[ -n ${RESPLANE:-} ]] || go build -trimpath -o "$bin" ./cmd/resplane

old_files_capsule "$out_dir" "$files" WatchCost

hz=$(getconf CLK_TCK)
# cpu PID: the process's utime + stime in clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

"$bin" serve --manifest "$out_dir/murmur.yaml" --workdir "$out_dir/wd" --listen 127.0.0.1:0 >"$out_dir/ready" 2>"$out_dir/serve.log" &
server=$!
watcher=
trap 'kill $watcher $server 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -s $out_dir/ready ]] && break; sleep 0.1; done
url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$out_dir/ready")
[[ -n $url ]] || { echo "$SCRIPT: no ready line; see $out_dir/serve.log" >&2; exit 1; }

"$bin" files pull "$url" "$out_dir/mirror" >/dev/null 2>"$out_dir/pull.log"
sleep 2

idle0=$(cpu "$server")
sleep "$duration"
idle1=$(cpu "$server")

"$bin" files pull --watch --interval "$interval" --json "$url" "$out_dir/mirror" >"$out_dir/watch.ndjson" 2>"$out_dir/watch.log" &
watcher=$!
sleep 3 # the watch's own first pull compares every file; measure the steady state
s0=$(cpu "$server")
w0=$(cpu "$watcher")
sleep "$duration"
s1=$(cpu "$server")
w1=$(cpu "$watcher")
kill -INT "$watcher"
wait "$watcher" || { echo "$SCRIPT: the watch did not exit 0" >&2; exit 1; }
watcher=

{
	echo "watch-poll-cost: $files files x 16 KiB, --interval $interval, ${duration}s each side, $(nproc) CPUs"
	awk -v a="$idle0" -v b="$idle1" -v s0="$s0" -v s1="$s1" -v w0="$w0" -v w1="$w1" -v hz="$hz" -v d="$duration" 'BEGIN {
		printf "server idle:           %6.2f%% of one core\n", 100 * (b - a) / hz / d
		printf "server under --watch:  %6.2f%% of one core\n", 100 * (s1 - s0) / hz / d
		printf "the watcher itself:    %6.2f%% of one core\n", 100 * (w1 - w0) / hz / d
	}'
	echo "cycles that changed something: $(grep -c . "$out_dir/watch.ndjson" || true) (want 0)"
} | tee "$out_dir/report.txt"
