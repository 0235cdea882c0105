#!/usr/bin/env bash
# scripts/install-service.sh — install zbmd as a systemd service:
# the binary, a config (an example when there is none yet), the config
# reference, and scripts/zbmd.service with the paths filled in.
#
# Every change goes through do_run/do_write_unit, which only print in
# --dry-run: a dry run reads the system and changes nothing.
set -euo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
BINARY=$REPO/build/bin/zbmd
PREFIX=/usr/local
CONFIG=/etc/zbmd/zbmd.ini
EXAMPLE=$REPO/config/examples/baremetal.ini
UNIT_DIR=/etc/systemd/system
ROOT=
ROOT_GIVEN=0
DRY_RUN=0
ENABLE=0
START=0
ACTION=install
UNIT_SRC=$HERE/zbmd.service

usage() {
	cat <<EOF
usage: $PROG [--binary PATH] [--prefix DIR] [--config FILE] [--example FILE]
             [--unit-dir DIR] [--root DIR] [--enable] [--start] [--dry-run]
       $PROG --uninstall [--prefix DIR] [--unit-dir DIR] [--root DIR] [--dry-run]

Install zbmd as the systemd service zbmd.service, which runs
\`zbmd run -c CONFIG\` after \`zbmd check-config CONFIG\`.

  --binary PATH   the zbmd binary to install (default: build/bin/zbmd)
  --prefix DIR    install under DIR/bin and DIR/share/doc/zbmd
                  (default /usr/local)
  --config FILE   the node's config (default /etc/zbmd/zbmd.ini). When it
                  exists it must pass check-config; when it does not, the
                  example is installed there for you to edit.
  --example FILE  the config to start from (default:
                  config/examples/baremetal.ini)
  --unit-dir DIR  where the unit goes (default /etc/systemd/system)
  --root DIR      stage everything under DIR (packaging, tests); systemctl
                  is not run; DIR must be absolute and not empty
  --enable        systemctl enable zbmd.service (start at boot)
  --start         systemctl restart zbmd.service now
  --uninstall     stop and disable the service, remove the unit, the binary
                  and the doc; the config and /var/lib/zbmd are kept
  --dry-run       print what would be done and change nothing
  -h, --help      this text

--prefix and --config go into the unit: letters, digits and / . _ - + , @ :
& = ~ only (no spaces, quotes, \\, \$, % or ;, which systemd would read).

Needs root unless --dry-run or --root. Exit status: 0 done, 1 failed
(e.g. the existing config is invalid), 2 bad usage.
EOF
}

. "$(dirname "$(readlink -f "$0")")/setup-lib.sh"

# The unit with its paths rewritten, written to $1 (or shown in a dry run).
# Plain string replacement (no sed: & or \ in a path is taken as it is);
# the replacements quoted, else bash 5.2 reads & in them as the match.
unit_text() {
	local line
	while IFS= read -r line || [ -n "$line" ]; do
		line=${line//\/usr\/local\/bin\/zbmd/"$PREFIX/bin/zbmd"}
		line=${line//\/etc\/zbmd\/zbmd.ini/"$CONFIG"}
		line=${line//\/usr\/local\/share\/doc\/zbmd/"$PREFIX/share/doc/zbmd"}
		printf '%s\n' "$line"
	done <"$UNIT_SRC"
}
do_write_unit() {
	local text
	text=$(unit_text)
	if [ "$DRY_RUN" -eq 1 ]; then
		echo "would write $1 with:"
		grep -E '^(ExecStartPre|ExecStart|Documentation)=' <<<"$text" | sed 's/^/    /'
	else
		echo "+ write $1"
		mkdir -p "$(dirname "$1")"
		printf '%s\n' "$text" >"$1"
		chmod 0644 "$1"
	fi
}

absolute() {
	case "$2" in
	/*) ;;
	*) usage_error "$1 must be an absolute path, not '$2'" ;;
	esac
}

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage; exit 0 ;;
	--dry-run) DRY_RUN=1 ;;
	--enable) ENABLE=1 ;;
	--start) START=1 ;;
	--uninstall) ACTION=uninstall ;;
	--binary) [ $# -ge 2 ] || usage_error "--binary needs a value"; BINARY=$2; shift ;;
	--prefix) [ $# -ge 2 ] || usage_error "--prefix needs a value"; PREFIX=$2; shift ;;
	--config) [ $# -ge 2 ] || usage_error "--config needs a value"; CONFIG=$2; shift ;;
	--example) [ $# -ge 2 ] || usage_error "--example needs a value"; EXAMPLE=$2; shift ;;
	--unit-dir) [ $# -ge 2 ] || usage_error "--unit-dir needs a value"; UNIT_DIR=$2; shift ;;
	--root) [ $# -ge 2 ] || usage_error "--root needs a value"; ROOT=$2; ROOT_GIVEN=1; shift ;;
	*) usage_error "unknown argument '$1'" ;;
	esac
	shift
done
absolute --prefix "$PREFIX"
absolute --config "$CONFIG"
case $CONFIG in */) usage_error "--config '$CONFIG' names a directory: give the config file's path" ;; esac
absolute --unit-dir "$UNIT_DIR"
# an empty --root would be the live system
[ "$ROOT_GIVEN" -eq 0 ] || [ -n "$ROOT" ] || usage_error "--root must not be empty (leave it out to install on this system)"
[ -z "$ROOT" ] || absolute --root "$ROOT"
# The unit's paths, checked before anything is written: systemd reads
# % (specifiers), \ (escapes), $ (variables), quotes, spaces and ; in
# ExecStart= lines.
for v in "$PREFIX" "$CONFIG"; do
	[[ "$v" =~ ^[A-Za-z0-9/._+,@:\&=~-]+$ ]] ||
		usage_error "'$v': paths in the unit take letters, digits and / . _ - + , @ : & = ~ only (not spaces, quotes, \\, \$, % or ;, which systemd would interpret)"
done
if [ -n "$ROOT" ] && { [ "$ENABLE" -eq 1 ] || [ "$START" -eq 1 ]; }; then
	usage_error "--enable and --start do not go with --root"
fi
if [ "$DRY_RUN" -eq 0 ] && [ -z "$ROOT" ] && [ "$(id -u)" -ne 0 ]; then
	die "needs root (or --dry-run, or --root DIR to stage)"
fi
[ -f "$UNIT_SRC" ] || die "$UNIT_SRC is missing"

BIN_DST=$ROOT$PREFIX/bin/zbmd
DOC_DST=$ROOT$PREFIX/share/doc/zbmd/config.md
UNIT_DST=$ROOT$UNIT_DIR/zbmd.service
CONFIG_DST=$ROOT$CONFIG

if [ "$ACTION" = uninstall ]; then
	if [ -z "$ROOT" ] && [ -e "$UNIT_DST" ]; then
		do_run systemctl disable --now zbmd.service
	fi
	for f in "$UNIT_DST" "$BIN_DST" "$DOC_DST"; do
		if [ -e "$f" ]; then do_run rm -f "$f"; fi
	done
	# the doc's folder, once empty (rmdir leaves it when it is not)
	if [ -d "${DOC_DST%/*}" ]; then do_run rmdir --ignore-fail-on-non-empty "${DOC_DST%/*}"; fi
	[ -n "$ROOT" ] || do_run systemctl daemon-reload
	echo "kept $CONFIG_DST and ${ROOT}/var/lib/zbmd"
	[ "$DRY_RUN" -eq 0 ] || echo "dry run: nothing was changed"
	exit 0
fi

[ -x "$BINARY" ] || die "$BINARY is not an executable (run make first, or give --binary)"

# The config: validate the one in place, or start from the example.
if [ -e "$CONFIG_DST" ]; then
	if ! "$BINARY" check-config "$CONFIG_DST" >/dev/null; then
		die "$CONFIG_DST is not a valid config (messages above); fix it first"
	fi
	echo "$CONFIG_DST: valid, kept"
	NEW_CONFIG=0
else
	[ -f "$EXAMPLE" ] || die "example config $EXAMPLE is missing"
	rc=0
	"$BINARY" check-config "$EXAMPLE" >/dev/null || rc=$?
	# 127 / 126: the binary itself did not run (a shared library missing
	# on this host, say), which is not the example's fault
	[ $rc -ne 127 ] && [ $rc -ne 126 ] || die "$BINARY does not run here (exit $rc; messages above: a shared library missing? the build machine's libraries must be installed here too)"
	[ $rc -eq 0 ] || die "example $EXAMPLE is not valid"
	NEW_CONFIG=1
	# an example is not this node's config: the node would start as node 0
	# of the example's cluster, at once and at every boot
	if [ "$ENABLE" -eq 1 ] || [ "$START" -eq 1 ]; then
		die "$CONFIG_DST does not exist yet, and --enable/--start would run the example config as it is: install without them, edit $CONFIG_DST for this node, then systemctl enable --now zbmd.service"
	fi
fi

do_run install -D -m 0755 "$BINARY" "$BIN_DST"
if [ -f "$REPO/docs/config.md" ]; then
	do_run install -D -m 0644 "$REPO/docs/config.md" "$DOC_DST"
fi
if [ "$NEW_CONFIG" -eq 1 ]; then
	do_run install -D -m 0644 "$EXAMPLE" "$CONFIG_DST"
fi
do_write_unit "$UNIT_DST"

if [ -z "$ROOT" ]; then
	do_run systemctl daemon-reload
	[ "$ENABLE" -eq 0 ] || do_run systemctl enable zbmd.service
	[ "$START" -eq 0 ] || do_run systemctl restart zbmd.service
fi
if [ "$NEW_CONFIG" -eq 1 ]; then
	if [ "$DRY_RUN" -eq 1 ]; then w="would install"; else w="installed"; fi
	echo "$w the example config as $CONFIG_DST: edit [node] id, [port.0], [peer.N],"
	echo "[cluster] and [control] for this node, then: zbmd check-config $CONFIG"
fi
if [ "$DRY_RUN" -eq 1 ]; then
	echo "dry run: nothing was changed"
fi
exit 0
