# scripts/setup-lib.sh — shared by the bare-metal setup scripts
# (hugepages.sh, bind-nic.sh, install-service.sh); sourced, never run.
# The caller sets PROG (its name) and DRY_RUN (0 or 1) before using these.

die() { echo "$PROG: $*" >&2; exit 1; }
usage_error() { echo "$PROG: $*" >&2; echo "try: $PROG --help" >&2; exit 2; }

# quote_args ARG...: ARGs as one line a shell reads back as the same words
# (an argument with characters the shell would interpret goes in '...')
quote_args() {
	local a out=()
	for a in "$@"; do
		if [[ "$a" =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then
			out+=("$a")
		else
			out+=("'${a//\'/\'\\\'\'}'")
		fi
	done
	echo "${out[*]}"
}

# do_run CMD...: run CMD (echoed with "+ "), or only say it under --dry-run;
# either way the command is printed quoted, ready to paste
do_run() {
	if [ "$DRY_RUN" -eq 1 ]; then
		echo "would run: $(quote_args "$@")"
	else
		echo "+ $(quote_args "$@")"
		"$@"
	fi
}

# do_write VALUE FILE: write VALUE into FILE (sysfs knobs), or say it
do_write() {
	if [ "$DRY_RUN" -eq 1 ]; then
		echo "would write '$1' to $2"
	else
		echo "+ echo '$1' > $2"
		echo "$1" >"$2"
	fi
}
