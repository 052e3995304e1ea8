# shellcheck shell=bash
# The capsule the listing measurements (bench/listing-e2e.sh, bench/watch-poll-cost.sh) share:
# sourced, never run. Needs head, split, find and touch (coreutils, findutils).
#
#   old_files_capsule DIR FILES NAME
#       writes DIR/murmur.yaml (a manifest named NAME exporting out/ read-only, max_bytes 1Mi)
#       and FILES files of 16 KiB of random bytes under DIR/wd/out/, 100 to a directory
#       (d0/f000 … d0/f099, d1/f000 …), their modification times an hour ago. Their change
#       times are now: a listing reuses their hashes only once the racy window (2 s) has
#       passed since.
old_files_capsule() {
	local dir=$1 files=$2 name=$3 per_dir=100 d n
	mkdir -p "$dir/wd/out"
	for ((d = 0; d * per_dir < files; d++)); do
		mkdir "$dir/wd/out/d$d"
		n=$((files - d * per_dir < per_dir ? files - d * per_dir : per_dir))
		head -c $((n * 16384)) /dev/urandom >"$dir/chunk"
		split -b 16384 -d -a 3 "$dir/chunk" "$dir/wd/out/d$d/f"
	done
	rm "$dir/chunk"
	find "$dir/wd/out" -type f -exec touch -d '1 hour ago' {} +
	printf 'name: %s\nexports:\n  files:\n    root: out/\n    mode: read-only\n    max_bytes: 1Mi\n' "$name" >"$dir/murmur.yaml"
}
