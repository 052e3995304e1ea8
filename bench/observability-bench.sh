#!/usr/bin/env bash
# What metrics and spans cost a 1 KiB read on a saturated core (docs/benchmarks.md,
# "Observability cost"): the same binary serving the same capsule with observability off, with
# metrics, with spans, with both, with spans sampled 1 in 10, and off again as a control for
# the measurement's own noise; with BASE_REF, also the binary of that git ref with both.
#
# It measures the way bench/nginx-bench.sh does: each server runs pinned to CPU 0 with
# GOMAXPROCS=1, wrk and the collector (bench/otlpsink) run on CPU 1, every request is a new
# connection ("Connection: close"), and the servers take turns, ROUNDS times, in a new random
# order each round, so drift spreads over all of them. Each server's CPU time per request comes
# from /proc/<pid>/stat around its turns; on a saturated core it is what decides throughput,
# and it moves far less than the request rate does on a machine other work shares. Only the
# ratios of figures from this one run are meaningful.
#
# At the end the collector's span counts are checked against the reads each server answered:
# one span per read (and one for session_start) with spans on, about one in ten sampled.
#
# Settings (environment):
#   DURATION     wrk's -d for each turn                (default 4s)
#   ROUNDS       turns of every server                 (default 8)
#   CONNECTIONS  wrk's -c                              (default 16)
#   BASE_REF     a git ref to run with both, as "both-base"       (default none)
#   ALSO_GOGC    a GOGC value to run off and both with too, as "off-gogcN" and "both-gogcN"
#                (default none: every server runs with Go's default, or the caller's GOGC)
#   OUT_DIR      where the report is saved             (default tmp/observability-bench, gitignored)
#
# Needs wrk, curl, taskset and git besides Go; when one is missing the script names it, with
# the command that installs it, and exits 2 (it installs nothing itself).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

duration=${DURATION:-4s}
rounds=${ROUNDS:-8}
connections=${CONNECTIONS:-16}
base_ref=${BASE_REF:-}
also_gogc=${ALSO_GOGC:-}
out_dir=${OUT_DIR:-tmp/observability-bench}

SCRIPT=observability-bench.sh
# shellcheck source=bench/pinned.sh
source bench/pinned.sh
pinned_setup wrk curl shuf

go build -trimpath -o "$work/resplane-new" ./cmd/resplane
go build -trimpath -o "$work/otlpsink" ./bench/otlpsink
[[ -z $base_ref ]] || build_ref "$base_ref" "$work/resplane-base"

mkdir -p "$work/wd/out"
head -c 1024 /dev/urandom >"$work/wd/out/1k.bin"
cat >"$work/murmur.yaml" <<'EOF'
name: bench
exports:
  files:
    root: out/
    mode: read-only
EOF

taskset -c 1 "$work/otlpsink" >"$work/otlpsink.url" &
pids+=("$!")
for _ in $(seq 50); do
	[[ -s $work/otlpsink.url ]] && break
	sleep 0.1
done
collector=$(head -1 "$work/otlpsink.url")

# Servers: name|binary|env|serve flags. Each sends its spans under its own name, so the
# collector counts them apart.
metrics=(--metrics-listen 127.0.0.1:0)
servers=(
	"off|new||"
	"metrics|new||${metrics[*]}"
	"spans|new||--otel-endpoint $collector/spans"
	"both|new||${metrics[*]} --otel-endpoint $collector/both"
	"spans-1in10|new|OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=0.1|--otel-endpoint $collector/spans-1in10"
	"off-again|new||"
)
[[ -n $base_ref ]] && servers+=("both-base|base||${metrics[*]} --otel-endpoint $collector/both-base")
[[ -n $also_gogc ]] && servers+=(
	"off-gogc$also_gogc|new|GOGC=$also_gogc|"
	"both-gogc$also_gogc|new|GOGC=$also_gogc|${metrics[*]} --otel-endpoint $collector/both-gogc$also_gogc"
)

declare -A port pid traced sampled
names=()
for spec in "${servers[@]}"; do
	IFS='|' read -r name binary env flags <<<"$spec"
	names+=("$name")
	[[ $flags == *--otel-endpoint* ]] && traced[$name]=1
	[[ $env == *OTEL_TRACES_SAMPLER* ]] && sampled[$name]=1
	# shellcheck disable=SC2086 # flags are words on purpose
	serve_pinned "$name" "$work/resplane-$binary" 127.0.0.1:0 "$env" $flags
	pid[$name]=$serve_pid
	port[$name]=$(sed 's/.*"listen":"127\.0\.0\.1:\([0-9]*\)".*/\1/' "$work/$name/ready")
done

declare -A rps_total ticks requests warmup
# turn NAME DURATION: one wrk run against NAME; prints "req/s requests CPU-ticks".
turn() {
	local before out
	before=$(cpu_ticks "${pid[$1]}")
	out=$(taskset -c 1 wrk -t1 "-c$connections" "-d$2" -H "Connection: close" "http://127.0.0.1:${port[$1]}/resources/files/1k.bin")
	if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
		echo "observability-bench.sh: $1 answered with errors:" >&2
		echo "$out" >&2
		exit 1
	fi
	echo "$(awk '/^Requests\/sec:/ {print $2}' <<<"$out") $(awk '/requests in/ {print $1}' <<<"$out") $(($(cpu_ticks "${pid[$1]}") - before))"
}

mkdir -p "$out_dir"
report=$out_dir/observability-bench-$(date -u +%Y%m%dT%H%M%SZ).txt
{
	echo "# bench/observability-bench.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(nproc) CPUs, $(go version | cut -d' ' -f3)"
	echo "# this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'))${base_ref:+ and $base_ref ($(git rev-parse --short "$base_ref"))}, $(wrk -v 2>&1 | head -1)"
	echo "# wrk -t1 -c$connections -d$duration -H 'Connection: close' and the collector on CPU 1; servers on CPU 0 (GOMAXPROCS=1); $rounds rounds"
} | tee "$report"

for name in "${names[@]}"; do # warm up: the first turn of a fresh process is not measured
	result=$(turn "$name" 1s)
	read -r _ done_ _ <<<"$result"
	warmup[$name]=$done_
done
for round in $(seq "$rounds"); do
	for name in $(printf '%s\n' "${names[@]}" | shuf); do
		result=$(turn "$name" "$duration")
		read -r rps done_ used <<<"$result"
		printf 'round %d  %-16s %10s req/s %8.1f us CPU/req\n' "$round" "$name" "$rps" \
			"$(awk -v t="$used" -v n="$done_" -v hz="$hz" 'BEGIN {print (n > 0 ? t * 1e6 / hz / n : 0)}')" | tee -a "$report"
		rps_total[$name]=$(awk -v a="${rps_total[$name]:-0}" -v b="$rps" 'BEGIN {print a + b}')
		ticks[$name]=$((${ticks[$name]:-0} + used))
		requests[$name]=$((${requests[$name]:-0} + done_))
	done
done

sleep 7 # the last batch of spans waits out OTEL_BSP_SCHEDULE_DELAY (5 s) before it is sent
counts=$(curl -fsS "$collector/counts")
# spans_of NAME: the spans the collector received from NAME, 0 when none.
spans_of() {
	local got
	got=$(sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" <<<"$counts")
	echo "${got:-0}"
}

# served NAME: the reads NAME answered, its warm-up's included.
served() { echo $((${warmup[$1]} + ${requests[$1]})); }
# cpu_per_req NAME: the server's CPU time per request over all of NAME's turns, in µs.
cpu_per_req() { awk -v t="${ticks[$1]}" -v n="${requests[$1]}" -v hz="$hz" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}'; }
{
	echo
	echo "Over $rounds rounds: mean req/s, the server's CPU time per request, each as a ratio to off"
	echo "(CPU: this server's CPU per request over off's; req/s: this server's over off's), and the"
	echo "server's peak RSS (VmHWM):"
	printf '  %-16s %10s %12s %10s %10s %10s\n' server "req/s" "us CPU/req" "CPU/off" "req/s/off" "peak RSS"
	for name in "${names[@]}"; do
		awk -v n="$name" -v r="${rps_total[$name]}" -v rounds="$rounds" -v c="$(cpu_per_req "$name")" \
			-v c0="$(cpu_per_req off)" -v r0="${rps_total[off]}" -v rss="$(awk '/^VmHWM/ {print $2}' "/proc/${pid[$name]}/status")" \
			'BEGIN {printf "  %-16s %10.0f %12.1f %9.3fx %9.3fx %6.1f MiB\n", n, r / rounds, c, c / c0, r / r0, rss / 1024}'
	done
	if [[ -n $also_gogc ]]; then
		awk -v a="$(cpu_per_req "off-gogc$also_gogc")" -v b="$(cpu_per_req "both-gogc$also_gogc")" -v g="$also_gogc" \
			'BEGIN {printf "  both over off, both at GOGC=%s: CPU %.3fx\n", g, b / a}'
	fi
	echo
	echo "Spans the collector received per read answered (each server's session_start is one more span):"
	for name in "${names[@]}"; do
		[[ -n ${traced[$name]:-} ]] || continue
		got=$(spans_of "$name")
		awk -v n="$name" -v g="$got" -v s="$(served "$name")" 'BEGIN {printf "  %-16s %9d spans for %9d reads: %.3f\n", n, g, s, g / s}'
	done
	echo
	echo "report saved to $report"
} | tee -a "$report"

# A server that samples nothing out must have sent a span for every read: the figures above
# are worth nothing otherwise. (wrk does not count the reads still in flight when a turn ends,
# so a few more spans than reads is right.)
failed=0
for name in "${names[@]}"; do
	[[ -n ${traced[$name]:-} && -z ${sampled[$name]:-} ]] || continue
	got=$(spans_of "$name")
	if ! awk -v g="$got" -v s="$(served "$name")" 'BEGIN {exit !(g >= s && g <= s * 1.01)}'; then
		echo "observability-bench.sh: $name sent $got spans for $(served "$name") reads, not one per read" >&2
		failed=1
	fi
done
exit "$failed"
