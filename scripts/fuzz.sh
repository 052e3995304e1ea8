#!/usr/bin/env bash
# Run every Go fuzz target of the module for FUZZTIME each, one target at a time, and print the
# fuzzer's last status line of each run (docs/fuzzing.md). `make fuzz` runs this script.
#
# Settings (environment):
#   FUZZTIME      -fuzztime of each target                          (default 30s)
#   FUZZ          regexp: only the targets whose name it matches    (default .)
#   FUZZPARALLEL  -parallel: fuzzing workers per target             (default empty: GOMAXPROCS)
#   OUT_DIR       where each run's output is saved                  (default tmp/fuzz, gitignored)
#
# The targets are the `func FuzzX(f *testing.F)` of every *_test.go file. Plain `go test` runs
# only their seed corpus (testdata/fuzz/FuzzX/ and the f.Add calls). A run that fails leaves
# the failing input in that package's testdata/fuzz/FuzzX/; the script goes on with the other
# targets and exits 1 at the end.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

go=${GO:-go}
fuzztime=${FUZZTIME:-30s}
select=${FUZZ:-.}
parallel=${FUZZPARALLEL:-}
out_dir=${OUT_DIR:-tmp/fuzz}

mkdir -p "$out_dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
summary=$out_dir/fuzz-$stamp.txt

# "<package dir> <target>" for every fuzz target, sorted.
mapfile -t targets < <(grep -rHo --include='*_test.go' --exclude-dir=.git --exclude-dir=tmp --exclude-dir=bin \
	-E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . |
	sed -E 's|^\./(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*).*|\1 \2|' | awk -v re="$select" '$2 ~ re' | sort)
if [[ ${#targets[@]} -eq 0 ]]; then
	echo "fuzz.sh: no fuzz target matches FUZZ=$select" >&2
	exit 1
fi

echo "# scripts/fuzz.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(nproc) CPUs, $($go version | cut -d' ' -f3)," \
	"FUZZTIME=$fuzztime FUZZPARALLEL=${parallel:-GOMAXPROCS}, ${#targets[@]} targets" | tee "$summary"
failed=0
for entry in "${targets[@]}"; do
	read -r dir name <<<"$entry"
	log=$out_dir/$name-$stamp.log
	args=(test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime")
	if [[ -n $parallel ]]; then
		args+=(-parallel "$parallel")
	fi
	echo "== $name (./$dir)"
	status=ok
	if ! "$go" "${args[@]}" "./$dir" >"$log" 2>&1; then
		status=FAIL
		failed=1
	fi
	last=$(grep -E '^fuzz: elapsed' "$log" | tail -n 1 || true)
	printf '%-40s %-30s %-4s %s\n' "$name" "./$dir" "$status" "${last:-(no status line)}" | tee -a "$summary"
	if [[ $status == FAIL ]]; then
		grep -E -A 20 -- '--- FAIL|^panic:|Failing input written to' "$log" | head -n 40 >&2 || true
		echo "fuzz.sh: $name failed; the whole output is in $log" >&2
	fi
done
echo "# summary saved to $summary"
exit "$failed"
