# shellcheck shell=bash
# What every measurement script in bench/ shares: sourced, never run. The caller sets SCRIPT
# (its name, for messages) before sourcing it.
#
#   require COMMAND...   exits 2 unless every COMMAND is on PATH, naming the ones that are
#                        missing and the exact command that installs them (Debian's or
#                        Ubuntu's packages). Nothing is ever installed here: the scripts run
#                        as the developer who starts them, and installing packages is theirs
#                        to decide.

# package_of COMMAND: the Debian package that provides COMMAND.
package_of() {
	case $1 in
	nginx) echo nginx-light ;;
	taskset) echo util-linux ;;
	nproc | shuf) echo coreutils ;;
	pgrep) echo procps ;;
	getconf) echo libc-bin ;;
	awk) echo gawk ;;
	*) echo "$1" ;; # wrk, curl, git, tar: each is its own package
	esac
}

require() {
	local missing=() packages=() command
	for command in "$@"; do
		if ! command -v "$command" >/dev/null 2>&1; then
			missing+=("$command")
			packages+=("$(package_of "$command")")
		fi
	done
	if ((${#missing[@]} > 0)); then
		echo "$SCRIPT: not installed: ${missing[*]}" >&2
		echo "$SCRIPT: install with: apt-get install -y ${packages[*]}" >&2
		exit 2
	fi
}
