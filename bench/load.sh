#!/usr/bin/env bash
# Load-test the real binary: start bin/resplane serve on a temporary capsule, drive it with
# bench/loadgen from a second process, side by side with a net/http.FileServer baseline
# over the same directory, then report resplane's peak RSS and stop it with SIGTERM (it must
# exit 0). `make load` builds bin/resplane first and runs this.
#
# The capsule's export root out/ holds small.bin (4 KiB), large.bin (1 MiB) and tree/, 1000
# files of 1 KiB in 10 directories. Targets, all in one loadgen run, one after another:
#   resplane-4k / baseline-4k   GET of small.bin (ratio printed)
#   resplane-1m / baseline-1m   GET of large.bin (ratio printed)
#   resplane-list               GET /resources/files (hashes all 1002 files per request)
#
# Settings (environment):
#   CONCURRENCY  workers, one connection each at a time   (default 64)
#   DURATION     measured time per target, Go duration     (default 5s)
#   ROUNDS       interleaved rounds per target             (default 2)
#   OUT_DIR      where the report is saved                 (default tmp/load, gitignored)
#   RESPLANE     the binary                                 (default bin/resplane)
# Everything goes to 127.0.0.1 only.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

SCRIPT=load.sh
# shellcheck source=bench/require.sh
source bench/require.sh
require awk

concurrency=${CONCURRENCY:-64}
duration=${DURATION:-5s}
rounds=${ROUNDS:-2}
out_dir=${OUT_DIR:-tmp/load}
bin=${RESPLANE:-bin/resplane}

if [[ ! -x $bin ]]; then
	echo "load.sh: $bin not found; building it" >&2
	go build -trimpath -o bin/resplane ./cmd/resplane
	bin=bin/resplane
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/resplane-load.XXXXXX")
server_pid=""
cleanup() {
	if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill -TERM "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# The capsule.
wd=$work/wd
mkdir -p "$wd/out/tree"
cat >"$work/murmur.yaml" <<'EOF'
name: loadtest
exports:
  files:
    root: out/
    mode: read-only
    max_bytes: 10Mi
EOF
head -c 4096 /dev/urandom >"$wd/out/small.bin"
head -c 1048576 /dev/urandom >"$wd/out/large.bin"
kib=$(printf '%1024s' '')
for d in $(seq -w 0 9); do
	mkdir -p "$wd/out/tree/d$d"
	for f in $(seq -w 0 99); do
		printf '%s' "$kib" >"$wd/out/tree/d$d/f0$f.txt"
	done
done

# Start the server and wait for its ready line (the first line on stdout).
"$bin" serve --manifest "$work/murmur.yaml" --workdir "$wd" --listen 127.0.0.1:0 \
	>"$work/stdout" 2>"$work/stderr" &
server_pid=$!
addr=""
for _ in $(seq 1 150); do
	if ! kill -0 "$server_pid" 2>/dev/null; then
		echo "load.sh: resplane exited before its ready line; stderr:" >&2
		cat "$work/stderr" >&2
		exit 1
	fi
	if ready=$(head -n 1 "$work/stdout" 2>/dev/null) && [[ $ready == *'"event":"ready"'* ]]; then
		addr=$(sed -n 's/.*"listen":"\([^"]*\)".*/\1/p' <<<"$ready")
		break
	fi
	sleep 0.1
done
if [[ -z $addr ]]; then
	echo "load.sh: no ready line within 15 s; stderr:" >&2
	cat "$work/stderr" >&2
	exit 1
fi

mkdir -p "$out_dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
report=$out_dir/load-$stamp.txt
{
	echo "# bench/load.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(nproc) CPUs, $(go version | cut -d' ' -f3)"
	echo "# resplane pid $server_pid on $addr; CONCURRENCY=$concurrency DURATION=$duration ROUNDS=$rounds"
} | tee "$report"

go run ./bench/loadgen -c "$concurrency" -d "$duration" -rounds "$rounds" \
	-baseline-dir "$wd/out" \
	-target "resplane-4k=$addr/resources/files/small.bin" \
	-target "baseline-4k=baseline/small.bin" \
	-target "resplane-1m=$addr/resources/files/large.bin" \
	-target "baseline-1m=baseline/large.bin" \
	-target "resplane-list=$addr/resources/files" \
	-compare resplane-4k,baseline-4k \
	-compare resplane-1m,baseline-1m | tee -a "$report"

# Peak and current resident set of the server after the run.
hwm=$(awk '/^VmHWM:/ {print $2, $3}' "/proc/$server_pid/status")
rss=$(awk '/^VmRSS:/ {print $2, $3}' "/proc/$server_pid/status")
echo | tee -a "$report"
echo "resplane (pid $server_pid) VmHWM $hwm, VmRSS $rss after $concurrency concurrent workers" | tee -a "$report"

# Stop it the way an operator would and insist on a clean exit.
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=""
if [[ $status -ne 0 ]]; then
	echo "load.sh: resplane exited $status after SIGTERM; stderr tail:" >&2
	tail -n 20 "$work/stderr" >&2
	exit 1
fi
echo "resplane exited 0 after SIGTERM" | tee -a "$report"
echo "report saved to $report"
