# shellcheck shell=bash
# What the one-core comparisons (bench/nginx-bench.sh, bench/observability-bench.sh) share:
# sourced, never run, from the repository's top. The caller sets SCRIPT (its name, for
# messages) before sourcing it.
#
#   pinned_setup COMMAND...  requires git, taskset and each COMMAND (bench/require.sh: a
#                            missing one is named, with the command that installs it, and the
#                            script exits 2), requires two CPUs (one for the servers, one for
#                            wrk; exit 2 otherwise), and makes $work, a temporary directory
#                            removed at exit, after every process in $pids is stopped
#   build_ref REF OUT        builds cmd/resplane of git ref REF from git's objects into OUT,
#                            touching no worktree
#   serve_pinned NAME BINARY LISTEN ENV [FLAG...]
#                            starts BINARY serve over $work/murmur.yaml and $work/wd on CPU 0
#                            with GOMAXPROCS=1 and the variables ENV ("A=1 B=2", or ""), its
#                            trace, socket, ready line and stderr in $work/NAME; waits for the
#                            ready line (exits, showing stderr, if none comes), adds the
#                            process to $pids and sets serve_pid
#   cpu_ticks PID            the process's user + system time so far, in clock ticks ($hz a
#                            second)

# shellcheck source=bench/require.sh
source bench/require.sh

pinned_setup() {
	require git taskset nproc getconf "$@"
	if (($(nproc) < 2)); then
		echo "$SCRIPT: needs two CPUs (one for the servers, one for wrk); this machine has $(nproc)" >&2
		exit 2
	fi
	# shellcheck disable=SC2034 # read by the scripts that source this file
	hz=$(getconf CLK_TCK)
	work=$(mktemp -d)
	pids=()
	trap pinned_cleanup EXIT
}

pinned_cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$work"
}

build_ref() {
	local src
	src=$(mktemp -d "$work/src.XXXXXX")
	git archive "$1" | tar -x -C "$src"
	(cd "$src" && go build -trimpath -o "$2" ./cmd/resplane)
}

serve_pinned() {
	local name=$1 binary=$2 listen=$3 env=$4
	shift 4
	mkdir -p "$work/$name"
	# shellcheck disable=SC2086 # ENV is words on purpose
	env GOMAXPROCS=1 $env taskset -c 0 "$binary" serve --manifest "$work/murmur.yaml" --workdir "$work/wd" \
		--listen "$listen" --trace "$work/$name/trace.jsonl" --control "$work/$name/control.sock" "$@" \
		>"$work/$name/ready" 2>"$work/$name/stderr" &
	serve_pid=$!
	pids+=("$serve_pid")
	for _ in $(seq 100); do
		[[ -s $work/$name/ready ]] && return
		sleep 0.1
	done
	echo "$SCRIPT: $name did not start:" >&2
	cat "$work/$name/stderr" >&2
	exit 1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
