#!/usr/bin/env bash
# scripts/install-service.sh — install zbmd as a systemd service:
# the binary, a config (an example when there is none yet), the config
# reference, the node-setup scripts (PREFIX/share/zbmd), and
# scripts/zbmd.service and scripts/zbmd-prepare.service (the boot-time
# oneshot that reserves hugepages and binds the NICs) with the paths
# filled in.
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
PREP_UNIT_SRC=$HERE/zbmd-prepare.service
# the node-setup scripts installed in PREFIX/share/zbmd (the prepare unit
# runs prepare-node.sh from there; the others are its helpers, and are for
# hand use too: bind-nic.sh --status / --restore, hugepages.sh --status)
SCRIPTS=(prepare-node.sh hugepages.sh bind-nic.sh setup-lib.sh)

usage() {
	cat <<EOF
usage: $PROG [--binary PATH] [--prefix DIR] [--config FILE] [--example FILE]
             [--unit-dir DIR] [--root DIR] [--enable] [--start] [--dry-run]
       $PROG --uninstall [--prefix DIR] [--unit-dir DIR] [--root DIR] [--dry-run]

Install zbmd as the systemd service zbmd.service, which runs
\`zbmd run -c CONFIG\` after \`zbmd check-config CONFIG\`, and the oneshot
zbmd-prepare.service that zbmd.service wants and starts after: at boot it
reserves the hugepages and binds the NICs of CONFIG to vfio-pci
(DIR/share/zbmd/prepare-node.sh --config CONFIG).

  --binary PATH   the zbmd binary to install (default: build/bin/zbmd)
  --prefix DIR    install the binary in DIR/bin, the doc in
                  DIR/share/doc/zbmd and the node-setup scripts
                  (prepare-node.sh, hugepages.sh, bind-nic.sh,
                  setup-lib.sh) in DIR/share/zbmd (default /usr/local)
  --config FILE   the node's config (default /etc/zbmd/zbmd.ini). When it
                  exists it must pass check-config; when it does not, the
                  example is installed there for you to edit.
  --example FILE  the config to start from (default:
                  config/examples/baremetal.ini)
  --unit-dir DIR  where the units go (default /etc/systemd/system)
  --root DIR      stage everything under DIR (packaging, tests); systemctl
                  is not run; DIR must be absolute and not empty
  --enable        systemctl enable zbmd-prepare.service zbmd.service (start
                  at boot)
  --start         systemctl restart zbmd.service now (which starts
                  zbmd-prepare.service first unless it ran already)
  --uninstall     stop and disable both services, remove the units, the
                  binary, the scripts and the doc; the config and
                  /var/lib/zbmd are kept
  --dry-run       print what would be done and change nothing
  -h, --help      this text

--prefix and --config go into the units: letters, digits and / . _ - + , @ :
& = ~ only (no spaces, quotes, \\, \$, % or ;, which systemd would read).

Needs root unless --dry-run or --root. Exit status: 0 done, 1 failed
(e.g. the existing config is invalid), 2 bad usage.
EOF
}

. "$(dirname "$(readlink -f "$0")")/setup-lib.sh"

# Unit file $1 with its paths rewritten: the default binary, config, doc
# and scripts paths become the ones given. Plain string replacement (no
# sed: & or \ in a path is taken as it is), in one pass from left to right:
# a path put in is not searched again (--config /usr/local/bin/zbmd.ini
# with --prefix /opt stays as given).
UNIT_FROM=(/usr/local/bin/zbmd /etc/zbmd/zbmd.ini /usr/local/share/doc/zbmd /usr/local/share/zbmd)
unit_text() {
	local line out pre i at best len
	local to=("$PREFIX/bin/zbmd" "$CONFIG" "$PREFIX/share/doc/zbmd" "$PREFIX/share/zbmd")
	while IFS= read -r line || [ -n "$line" ]; do
		out=
		while :; do
			# the first of the paths on what is left of the line
			best=-1 at=-1
			for i in "${!UNIT_FROM[@]}"; do
				pre=${line%%"${UNIT_FROM[i]}"*}
				[ "$pre" != "$line" ] || continue
				if [ "$at" -lt 0 ] || [ ${#pre} -lt "$at" ]; then at=${#pre} best=$i; fi
			done
			[ "$best" -ge 0 ] || break
			len=${#UNIT_FROM[best]}
			out+=${line:0:at}${to[best]}
			line=${line:at+len}
		done
		printf '%s\n' "$out$line"
	done <"$1"
}
# do_write_unit DST SRC: SRC's text, paths rewritten, written to DST
do_write_unit() {
	local text
	text=$(unit_text "$2")
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
BIN_DST=$ROOT$PREFIX/bin/zbmd
DOC_DST=$ROOT$PREFIX/share/doc/zbmd/config.md
UNIT_DST=$ROOT$UNIT_DIR/zbmd.service
PREP_UNIT_DST=$ROOT$UNIT_DIR/zbmd-prepare.service
SCRIPTS_DST=$ROOT$PREFIX/share/zbmd
CONFIG_DST=$ROOT$CONFIG

if [ "$ACTION" = uninstall ]; then
	if [ -z "$ROOT" ]; then
		for u in zbmd.service zbmd-prepare.service; do
			if [ -e "$ROOT$UNIT_DIR/$u" ]; then do_run systemctl disable --now "$u"; fi
		done
	fi
	for f in "$UNIT_DST" "$PREP_UNIT_DST" "$BIN_DST" "$DOC_DST"; do
		if [ -e "$f" ]; then do_run rm -f "$f"; fi
	done
	for s in "${SCRIPTS[@]}"; do
		if [ -e "$SCRIPTS_DST/$s" ]; then do_run rm -f "$SCRIPTS_DST/$s"; fi
	done
	# the doc's and the scripts' folders, once empty (rmdir leaves a folder
	# that is not)
	for d in "${DOC_DST%/*}" "$SCRIPTS_DST"; do
		if [ -d "$d" ]; then do_run rmdir --ignore-fail-on-non-empty "$d"; fi
	done
	[ -n "$ROOT" ] || do_run systemctl daemon-reload
	echo "kept $CONFIG_DST and ${ROOT}/var/lib/zbmd"
	[ "$DRY_RUN" -eq 0 ] || echo "dry run: nothing was changed"
	exit 0
fi

[ -x "$BINARY" ] || die "$BINARY is not an executable (run make first, or give --binary)"
for f in "$UNIT_SRC" "$PREP_UNIT_SRC" "${SCRIPTS[@]}"; do
	case $f in /*) ;; *) f=$HERE/$f ;; esac
	[ -f "$f" ] || die "$f is missing"
done

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

# Every folder written into, checked before anything is installed: one
# that is a file (R/etc a file, say) failed halfway, the binary and the
# doc already in place. The nearest existing folder on the way to each
# must be a folder.
for d in "${BIN_DST%/*}" "${DOC_DST%/*}" "${CONFIG_DST%/*}" "$SCRIPTS_DST" "${UNIT_DST%/*}"; do
	e=$d
	while [ -n "$e" ] && [ ! -e "$e" ] && [ ! -L "$e" ]; do e=${e%/*}; done
	[ -z "$e" ] || [ -d "$e" ] ||
		die "cannot install into $d: $e is not a directory (nothing was installed)"
done

do_run install -D -m 0755 "$BINARY" "$BIN_DST"
if [ -f "$REPO/docs/config.md" ]; then
	do_run install -D -m 0644 "$REPO/docs/config.md" "$DOC_DST"
fi
if [ "$NEW_CONFIG" -eq 1 ]; then
	do_run install -D -m 0644 "$EXAMPLE" "$CONFIG_DST"
fi
for s in "${SCRIPTS[@]}"; do
	mode=0755
	[ "$s" != setup-lib.sh ] || mode=0644   # sourced, never run
	do_run install -D -m "$mode" "$HERE/$s" "$SCRIPTS_DST/$s"
done
do_write_unit "$PREP_UNIT_DST" "$PREP_UNIT_SRC"
do_write_unit "$UNIT_DST" "$UNIT_SRC"

if [ -z "$ROOT" ]; then
	do_run systemctl daemon-reload
	[ "$ENABLE" -eq 0 ] || do_run systemctl enable zbmd-prepare.service zbmd.service
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
