#!/usr/bin/env bash
# Side by side, one core each: resplane against nginx serving the same files, against the
# least a Go net/http server can do for the same answer (bench/floor: open, fstat, read once,
# sha256, the brief's headers; no routing, trace or checks), and against the binary of another
# git ref (default main) built in the same run (docs/benchmarks.md, "The nginx comparison").
# Every request is a new connection ("Connection: close").
#
#   10 MiB read:  nginx, floor, this tree, BASE_REF
#   1 KiB read:   nginx, floor, this tree, BASE_REF
#   1 KiB redeem: this tree, BASE_REF (against their own 1 KiB read)
#
# Each server runs pinned to CPU 0 (resplane with GOMAXPROCS=1, nginx with one worker) and wrk
# to CPU 1; the targets take turns, ROUNDS times, so drift spreads over all of them. Only the
# ratios of figures from this one run are meaningful. Besides requests per second, the script
# reports each server's CPU time per request (from /proc/<pid>/stat around each turn): on a
# machine other work shares, that figure moves far less than the request rate does.
#
# Settings (environment):
#   DURATION     wrk's -d for each turn                (default 5s)
#   ROUNDS       turns of every target                 (default 3)
#   CONNECTIONS  wrk's -c                              (default 16)
#   BASE_REF     the git ref to compare with           (default main)
#   ONLY         an extended regexp: run only the targets whose name matches (default all)
#   OUT_DIR      where the report is saved             (default tmp/nginx-bench, gitignored)
#
# Needs nginx, wrk, taskset, pgrep and git besides Go; when one is missing the script names it,
# with the command that installs it, and exits 2 (it installs nothing itself).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

duration=${DURATION:-5s}
rounds=${ROUNDS:-3}
connections=${CONNECTIONS:-16}
base_ref=${BASE_REF:-main}
only=${ONLY:-.}
out_dir=${OUT_DIR:-tmp/nginx-bench}

SCRIPT=nginx-bench.sh
# shellcheck source=bench/pinned.sh
source bench/pinned.sh
pinned_setup nginx wrk pgrep

# Binaries: this tree, and BASE_REF from git's objects (nothing in any worktree is touched).
go build -trimpath -o "$work/resplane-new" ./cmd/resplane
go build -trimpath -o "$work/floor" ./bench/floor
build_ref "$base_ref" "$work/resplane-base"

# The capsule: out/ holds the two files, shared with itself on the peer plane.
mkdir -p "$work/wd/out"
head -c $((10 << 20)) /dev/urandom >"$work/wd/out/10m.bin"
head -c 1024 /dev/urandom >"$work/wd/out/1k.bin"
chmod -R a+rX "$work" # nginx's worker may run as another user
cat >"$work/murmur.yaml" <<'EOF'
name: bench
exports:
  files:
    root: out/
    mode: read-only
  peer_files:
    root: out/
capabilities:
  network:
    allow: ["localhost"]
EOF

# The ports are picked below the kernel's ephemeral range: every request of a turn is a new
# connection, so tens of thousands of wrk's own ports sit in TIME-WAIT there, where a listener
# could not bind.
ephemeral_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
free_port() {
	local port
	while :; do
		port=$((10000 + RANDOM % (ephemeral_low - 10000)))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
}

# start_resplane NAME BINARY: serves the capsule on CPU 0 and sets NAME_port, NAME_pid and
# NAME_handle (a handle for 1k.bin minted for the server itself).
start_resplane() {
	local name=$1 bin=$2 port
	port=$(free_port)
	serve_pinned "$name" "$bin" "127.0.0.1:$port" ""
	local pid=$serve_pid handle
	handle=$("$bin" tool share-file --control "$work/$name/control.sock" --path 1k.bin --peer "localhost:$port" |
		sed 's/.*"handle":"\([^"]*\)".*/\1/')
	printf -v "${name}_port" '%s' "$port"
	printf -v "${name}_pid" '%s' "$pid"
	printf -v "${name}_handle" '%s' "$handle"
}
start_resplane new "$work/resplane-new"
start_resplane base "$work/resplane-base"

nginx_port=$(free_port)
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 1024; }
http {
	access_log $work/nginx/access.log;
	sendfile on;
	tcp_nopush on;
	keepalive_timeout 0;
	server {
		listen 127.0.0.1:$nginx_port;
		root $work/wd/out;
	}
}
EOF
taskset -c 0 nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" -e "$work/nginx/error.log" &
nginx_master=$!
pids+=("$nginx_master")
for _ in $(seq 50); do
	(exec 3<>"/dev/tcp/127.0.0.1/$nginx_port") 2>/dev/null && break
	sleep 0.1
done
nginx_pid=$(pgrep -P "$nginx_master" | head -1)

# The floor: net/http at its least, on CPU 0 with one P like resplane.
floor_port=$(free_port)
GOMAXPROCS=1 taskset -c 0 "$work/floor" -listen "127.0.0.1:$floor_port" -root "$work/wd/out" 2>"$work/floor.stderr" &
floor_pid=$!
pids+=("$floor_pid")
for _ in $(seq 50); do
	(exec 3<>"/dev/tcp/127.0.0.1/$floor_port") 2>/dev/null && break
	sleep 0.1
done

# Targets: name|port|server pid|path|extra header
targets=(
	"nginx-10m|$nginx_port|$nginx_pid|/10m.bin|"
	"floor-10m|$floor_port|$floor_pid|/10m.bin|"
	"new-10m|$new_port|$new_pid|/resources/files/10m.bin|"
	"base-10m|$base_port|$base_pid|/resources/files/10m.bin|"
	"nginx-1k|$nginx_port|$nginx_pid|/1k.bin|"
	"floor-1k|$floor_port|$floor_pid|/1k.bin|"
	"new-1k|$new_port|$new_pid|/resources/files/1k.bin|"
	"base-1k|$base_port|$base_pid|/resources/files/1k.bin|"
	"new-redeem-1k|$new_port|$new_pid|/resources/peer/$new_handle|x-murmur-audience: bench@localhost:$new_port"
	"base-redeem-1k|$base_port|$base_pid|/resources/peer/$base_handle|x-murmur-audience: bench@localhost:$base_port"
)

mkdir -p "$out_dir"
report=$out_dir/nginx-bench-$(date -u +%Y%m%dT%H%M%SZ).txt
{
	echo "# bench/nginx-bench.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(nproc) CPUs, $(go version | cut -d' ' -f3)"
	echo "# this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')) vs $base_ref ($(git rev-parse --short "$base_ref")), $(nginx -v 2>&1), $(wrk -v 2>&1 | head -1)"
	echo "# wrk -t1 -c$connections -d$duration -H 'Connection: close' on CPU 1; servers on CPU 0; $rounds rounds"
} | tee "$report"

declare -A total ticks requests
for round in $(seq "$rounds"); do
	for spec in "${targets[@]}"; do
		IFS='|' read -r name port pid path header <<<"$spec"
		[[ $name =~ $only ]] || continue
		args=(-t1 "-c$connections" "-d$duration" -H "Connection: close")
		[[ -n $header ]] && args+=(-H "$header")
		before=$(cpu_ticks "$pid")
		out=$(taskset -c 1 wrk "${args[@]}" "http://127.0.0.1:$port$path")
		used=$(($(cpu_ticks "$pid") - before))
		rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
		done_=$(awk '/requests in/ {print $1}' <<<"$out")
		errors=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out" | tr '\n' ' ')
		printf 'round %d  %-16s %10s req/s %8.0f us CPU/req  %s\n' "$round" "$name" "$rps" \
			"$(awk -v t="$used" -v n="$done_" -v hz="$hz" 'BEGIN {print (n > 0 ? t * 1e6 / hz / n : 0)}')" "$errors" | tee -a "$report"
		total[$name]=$(awk -v a="${total[$name]:-0}" -v b="$rps" 'BEGIN {print a + b}')
		ticks[$name]=$((${ticks[$name]:-0} + used))
		requests[$name]=$((${requests[$name]:-0} + done_))
	done
done

ratio() { awk -v a="${total[$1]:-0}" -v b="${total[$2]:-0}" 'BEGIN {if (b > 0) printf "%.2fx", a / b; else printf "-"}'; }
# cpu_per_req NAME: the server's CPU time per request over all of NAME's turns, in µs.
cpu_per_req() { awk -v t="${ticks[$1]:-0}" -v n="${requests[$1]:-0}" -v hz="$hz" 'BEGIN {if (n > 0) printf "%.0f", t * 1e6 / hz / n; else printf "0"}'; }
# cpu_ratio A B: B's CPU per request over A's, which is A's throughput relative to B's on a
# saturated core.
cpu_ratio() { awk -v a="$(cpu_per_req "$1")" -v b="$(cpu_per_req "$2")" 'BEGIN {if (a > 0 && b > 0) printf "%.2fx", b / a; else printf "-"}'; }
{
	echo
	echo "Mean req/s over $rounds rounds, and the server's CPU time per request:"
	for spec in "${targets[@]}"; do
		name=${spec%%|*}
		[[ $name =~ $only ]] || continue
		awk -v n="$name" -v t="${total[$name]}" -v r="$rounds" -v c="$(cpu_per_req "$name")" \
			'BEGIN {printf "  %-16s %10.0f req/s %8d us CPU/req\n", n, t / r, c}'
	done
	echo
	echo "Ratios, a / b: of the req/s, and of the CPU per request turned into throughput (b's CPU/req over a's):"
	printf '  %-36s %8s %8s\n' "10 MiB read, this tree / nginx" "$(ratio new-10m nginx-10m)" "$(cpu_ratio new-10m nginx-10m)"
	printf '  %-36s %8s %8s\n' "10 MiB read, $base_ref / nginx" "$(ratio base-10m nginx-10m)" "$(cpu_ratio base-10m nginx-10m)"
	printf '  %-36s %8s %8s\n' "10 MiB read, this tree / $base_ref" "$(ratio new-10m base-10m)" "$(cpu_ratio new-10m base-10m)"
	printf '  %-36s %8s %8s\n' "1 KiB read, this tree / $base_ref" "$(ratio new-1k base-1k)" "$(cpu_ratio new-1k base-1k)"
	printf '  %-36s %8s %8s\n' "1 KiB read, this tree / nginx" "$(ratio new-1k nginx-1k)" "$(cpu_ratio new-1k nginx-1k)"
	printf '  %-36s %8s %8s\n' "1 KiB read, this tree / floor" "$(ratio new-1k floor-1k)" "$(cpu_ratio new-1k floor-1k)"
	printf '  %-36s %8s %8s\n' "1 KiB read, floor / nginx" "$(ratio floor-1k nginx-1k)" "$(cpu_ratio floor-1k nginx-1k)"
	printf '  %-36s %8s %8s\n' "10 MiB read, this tree / floor" "$(ratio new-10m floor-10m)" "$(cpu_ratio new-10m floor-10m)"
	printf '  %-36s %8s %8s\n' "1 KiB redeem / read, this tree" "$(ratio new-redeem-1k new-1k)" "$(cpu_ratio new-redeem-1k new-1k)"
	printf '  %-36s %8s %8s\n' "1 KiB redeem / read, $base_ref" "$(ratio base-redeem-1k base-1k)" "$(cpu_ratio base-redeem-1k base-1k)"
	echo
	for name in new base; do
		pid_var=${name}_pid
		echo "  resplane $name peak RSS (VmHWM): $(awk '/VmHWM/ {print $2, $3}' "/proc/${!pid_var}/status")"
	done
	echo "  this tree's responses that spilled to the spool (slower than 30 ms): $(grep -c '"spilled":true' "$work/new/stderr" || true) of $(grep -c '"message":"request"' "$work/new/stderr" || true)"
	echo
	echo "report saved to $report"
} | tee -a "$report"
