#!/usr/bin/env bash
# Side by side, on one core: a redeem of a handle bound to a proof key, each with a fresh DPoP
# proof, against a redeem of an unbound handle without one, 1 KiB each, from the same server
# (docs/benchmarks.md, "Proof of possession"). Every request is a new connection
# ("Connection: close"), as the peer plane answers.
#
# The server runs pinned to CPU 0 with GOMAXPROCS=1; wrk and bench/proofgen, which plays the
# fetcher (its card advertises the key; it writes the proofs before each bound turn), run on
# CPU 1. The two targets take turns, ROUNDS times. Besides requests per second, the script
# reports the server's CPU time per request (from /proc/<pid>/stat around each turn), and the
# difference broken down by the Go benchmarks of its parts, run on CPU 0 at the end: the
# signature check (BenchmarkEd25519Verify), the rest of the proof's parse and checks
# (BenchmarkVerifyProof less that, plus BenchmarkCheckClaims), the second MAC
# (BenchmarkVerifyMAC) and the replay memory (BenchmarkReplaysRemember).
#
# Settings (environment):
#   DURATION     wrk's -d for each turn                       (default 5s)
#   ROUNDS       turns of each target                         (default 3)
#   CONNECTIONS  wrk's -c                                     (default 16)
#   PROOFS       proofs made for each bound turn              (default 100000; a turn that runs
#                out is reported, and its figures are not to be used)
#   OUT_DIR      where the report is saved                    (default tmp/proof-bench, gitignored)
#
# Needs wrk, taskset and git besides Go; when one is missing the script names it, with the
# command that installs it, and exits 2 (it installs nothing itself).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

duration=${DURATION:-5s}
rounds=${ROUNDS:-3}
connections=${CONNECTIONS:-16}
proofs=${PROOFS:-100000}
out_dir=${OUT_DIR:-tmp/proof-bench}

SCRIPT=proof-bench.sh
# shellcheck source=bench/pinned.sh
source bench/pinned.sh
pinned_setup wrk awk

go build -trimpath -o "$work/resplane" ./cmd/resplane
go build -trimpath -o "$work/proofgen" ./bench/proofgen
seed=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')

taskset -c 1 "$work/proofgen" card -seed "$seed" >"$work/card-url" &
pids+=("$!")
for _ in $(seq 50); do
	[[ -s $work/card-url ]] && break
	sleep 0.1
done
fetcher=$(sed 's|http://||' "$work/card-url")

mkdir -p "$work/wd/out"
head -c 1024 /dev/urandom >"$work/wd/out/1k.bin"
cat >"$work/murmur.yaml" <<'YAML'
name: bench
exports:
  peer_files:
    root: out/
capabilities:
  network:
    allow: ["localhost"]
YAML
port=$((20000 + RANDOM % 10000))
serve_pinned server "$work/resplane" "127.0.0.1:$port" ""
server_pid=$serve_pid

# share_for PEER: a handle for 1k.bin minted for PEER, and the mint's log line says if bound.
share_for() {
	"$work/resplane" tool share-file --control "$work/server/control.sock" --path 1k.bin --peer "$1" |
		sed 's/.*"handle":"\([^"]*\)".*/\1/'
}
bound=$(share_for "$fetcher")
unbound=$(share_for "localhost:$port") # the server's own card advertises no key
if ! grep -q '"bound":true' "$work/server/stderr"; then
	echo "$SCRIPT: the handle for the fetcher was not bound:" >&2
	cat "$work/server/stderr" >&2
	exit 1
fi

mkdir -p "$out_dir"
report=$out_dir/proof-bench-$(date -u +%Y%m%dT%H%M%SZ).txt
{
	echo "# bench/proof-bench.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(nproc) CPUs, $(go version | cut -d' ' -f3)"
	echo "# this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')), $(wrk -v 2>&1 | head -1)"
	echo "# wrk -t1 -c$connections -d$duration -H 'Connection: close' on CPU 1; the server on CPU 0; $rounds rounds; $proofs proofs a bound turn"
} | tee "$report"

declare -A total ticks requests
for round in $(seq "$rounds"); do
	for name in unbound bound; do
		args=(-t1 "-c$connections" "-d$duration" -H "Connection: close")
		if [[ $name == bound ]]; then
			taskset -c 1 "$work/proofgen" proofs -seed "$seed" -n "$proofs" \
				-url "http://127.0.0.1:$port/resources/peer/$bound" >"$work/proofs"
			args+=(-H "x-murmur-audience: bench-fetcher@$fetcher" -s bench/proof.lua)
			target=$bound
		else
			args+=(-H "x-murmur-audience: bench@localhost:$port")
			target=$unbound
		fi
		before=$(cpu_ticks "$server_pid")
		out=$(PROOFS_FILE=$work/proofs taskset -c 1 wrk "${args[@]}" "http://127.0.0.1:$port/resources/peer/$target")
		used=$(($(cpu_ticks "$server_pid") - before))
		rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
		done_=$(awk '/requests in/ {print $1}' <<<"$out")
		errors=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out" | tr '\n' ' ')
		if [[ $name == bound ]] && ((done_ > proofs)); then
			errors+="(ran out of proofs: raise PROOFS)"
		fi
		printf 'round %d  %-8s %10s req/s %8.0f us CPU/req  %s\n' "$round" "$name" "$rps" \
			"$(awk -v t="$used" -v n="$done_" -v hz="$hz" 'BEGIN {print (n > 0 ? t * 1e6 / hz / n : 0)}')" "$errors" | tee -a "$report"
		total[$name]=$(awk -v a="${total[$name]:-0}" -v b="$rps" 'BEGIN {print a + b}')
		ticks[$name]=$((${ticks[$name]:-0} + used))
		requests[$name]=$((${requests[$name]:-0} + done_))
	done
done

cpu_per_req() { awk -v t="${ticks[$1]:-0}" -v n="${requests[$1]:-0}" -v hz="$hz" 'BEGIN {if (n > 0) printf "%.1f", t * 1e6 / hz / n; else printf "0"}'; }
# ns_op BENCHMARK: the mean ns/op of one Go benchmark's lines in $work/parts.
ns_op() { awk -v b="$1" '$1 ~ "^"b"(-[0-9]+)?$" {s += $3; n++} END {if (n) printf "%.1f", s / n / 1000; else printf "-"}' "$work/parts"; }
taskset -c 0 go test -run '^$' -benchtime 1s -count 3 \
	-bench 'BenchmarkVerifyProof$|BenchmarkEd25519Verify$|BenchmarkCheckClaims$|BenchmarkReplaysRemember$|BenchmarkVerifyMAC/' \
	./adapters/dpop/ ./application/ ./domain/handle/ >"$work/parts"
{
	echo
	echo "Mean req/s over $rounds rounds, and the server's CPU time per request:"
	for name in unbound bound; do
		awk -v n="$name" -v t="${total[$name]}" -v r="$rounds" -v c="$(cpu_per_req "$name")" \
			'BEGIN {printf "  %-8s %10.0f req/s %8.1f us CPU/req\n", n, t / r, c}'
	done
	echo
	awk -v b="${total[bound]}" -v u="${total[unbound]}" -v cb="$(cpu_per_req bound)" -v cu="$(cpu_per_req unbound)" 'BEGIN {
		printf "bound / unbound: %.2fx the requests per second, %.2fx from the CPU per request; %.1f us more CPU per request\n",
			b / u, cu / cb, cb - cu }'
	echo
	echo "The extra CPU of a bound redeem, by part (Go benchmarks on CPU 0, us per call):"
	verify=$(ns_op BenchmarkEd25519Verify)
	whole=$(ns_op BenchmarkVerifyProof)
	printf '  %-52s %8s\n' "verify: the Ed25519 signature" "$verify"
	printf '  %-52s %8s\n' "parse: the proof's JOSE parse and header rules" "$(awk -v w="$whole" -v v="$verify" 'BEGIN {printf "%.1f", w - v}')"
	printf '  %-52s %8s\n' "parse: the claim rules (htm, htu, iat, jti)" "$(ns_op BenchmarkCheckClaims)"
	printf '  %-52s %8s\n' "cache: the replay memory" "$(ns_op BenchmarkReplaysRemember)"
	printf '  %-52s %8s\n' "the bound MAC (two tags, not one)" \
		"$(awk -v b="$(ns_op BenchmarkVerifyMAC/bound)" -v u="$(ns_op BenchmarkVerifyMAC/unbound)" 'BEGIN {printf "%.1f", b - u}')"
	echo
	echo "report saved to $report"
} | tee -a "$report"
