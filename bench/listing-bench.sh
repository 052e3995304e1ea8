#!/usr/bin/env bash
# Measure BenchmarkListing (application/files_bench_test.go) of this tree side by side with the
# same benchmark of an earlier revision, built from a temporary copy, and print what each costs
# per file with the ratios docs/benchmarks.md quotes ("Listing hash cache"). The two are run in
# turn, round after round, so that whatever else the machine does weighs on both alike.
#
# Settings (environment):
#   BASE       the revision to compare with          (default: where HEAD left main)
#   ROUNDS     rounds of one run of each             (default 3)
#   BENCHTIME  -benchtime of each run                (default 20x)
#   OUT_DIR    where the raw output is saved         (default tmp/bench, gitignored)
#
# Needs git, tar and awk besides Go (a missing one is named, with the command that installs it,
# and the script exits 2). About a minute per round on 2 cores: each run writes its own 10,000
# files of 16 KiB and waits out the 2 s racy window before it measures.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

SCRIPT=listing-bench.sh
# shellcheck source=bench/require.sh
source bench/require.sh
require git tar awk

base=${BASE:-$(git merge-base HEAD main)}
rounds=${ROUNDS:-3}
benchtime=${BENCHTIME:-20x}
out_dir=${OUT_DIR:-tmp/bench}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out_dir" "$work/base"
raw=$out_dir/listing-$(date -u +%Y%m%dT%H%M%SZ).txt

git archive "$base" | tar -x -C "$work/base"
(cd "$work/base" && go test -c -o "$work/base.test" ./application)
go test -c -o "$work/head.test" ./application

{
	echo "# bench/listing-bench.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(nproc) CPUs, $(go version | cut -d' ' -f3)"
	echo "# base $(git rev-parse --short "$base"), head $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)'); load $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$raw"
for round in $(seq "$rounds"); do
	for side in base head; do
		"$work/$side.test" -test.run '^$' -test.bench '^BenchmarkListing$' -test.benchtime "$benchtime" -test.benchmem |
			awk -v side="$side" -v round="$round" '/^BenchmarkListing/ { print side, round, $0 }' | tee -a "$raw"
	done
done

echo
echo "Per file, CPU time (elapsed); ratios of CPU time (elapsed):"
awk '
	function metric(unit,   i) { for (i = 4; i < NF; i++) if ($(i + 1) == unit) return $i; return "" }
	/^(base|head) / {
		name = $3; sub(/^BenchmarkListing\//, "", name); sub(/-[0-9]+$/, "", name)
		key = $1 " " name
		cpu[$2, key] = metric("cpu-ns/file"); wall[$2, key] = metric("ns/file")
		if ($2 > rounds) rounds = $2
	}
	function us(r, k) { return sprintf("%.2f µs (%.2f)", cpu[r, k] / 1000, wall[r, k] / 1000) }
	function ratio(r, a, b) {
		if (cpu[r, a] == "" || cpu[r, b] == "") return "-"
		return sprintf("%.3f (%.3f)", cpu[r, a] / cpu[r, b], wall[r, a] / wall[r, b])
	}
	END {
		print "| Round | base cold | base warm | head cold | head warm | head racy | head warm / head cold | head cold / base cold | head racy / head cold |"
		print "|---|---|---|---|---|---|---|---|---|"
		for (r = 1; r <= rounds; r++)
			printf "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r,
				us(r, "base cold"), us(r, "base warm"), us(r, "head cold"), us(r, "head warm"), us(r, "head racy"),
				ratio(r, "head warm", "head cold"), ratio(r, "head cold", "base cold"), ratio(r, "head racy", "head cold")
	}
' "$raw"
echo
echo "Raw output: $raw"
