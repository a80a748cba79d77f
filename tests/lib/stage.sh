# shellcheck shell=bash
# The preamble of a VM stage script (sourced right after its `set -...`
# line, which ends the script's header comment):
#
#   . "$(dirname "${BASH_SOURCE[0]}")/../lib/stage.sh"
#       ROOT: the repository, made the working directory; tests/lib/kernels.sh
#       loaded (and with it tests/lib/apt.sh: $SQCQ_CACHE, the package lists).
#
#   id=6.1 timeout_s=900            the script's defaults, then
#   stage_init NAME "kernel ko timeout" "$@"
#       parses the options the script takes of those three:
#         --kernel ID  -> id          (a kernel id of tests/lib/kernels.sh)
#         --ko FILE    -> ko          (another build of the module)
#         --timeout S  -> timeout_s
#       Any other option goes to the script's function stage_opt, when it
#       defines one: called with the remaining arguments, it sets
#       STAGE_SHIFT to how many it used, or returns 1.  An option nobody
#       knows prints the script's header comment on stderr and exits 2.
#       NAME starts the stage's FAIL lines ("FAIL: NAME ID: ...");
#       STAGE_NOTE, when set, is added to them (the fuzzer's seed).
#
#   stage_module host|guest|guest-faults
#       the module to test: ko (an absolute path) is --ko's file or, without
#       --ko, the one tests/matrix.sh "$id" builds into out/<abi>/ (abi set
#       too), built every time (quick when nothing changed: a module left in
#       out/ by an older tree is never the one tested).  No module: one FAIL
#       line and exit 1.
#
#   stage_host_client OUT
#       compiles the host client (tests/host/client.c, client-lib.c and
#       phase-*.c: one binary) into OUT with the flags every stage uses.
#
# The kernel itself (downloaded, or the local sanitizer build for `debug`)
# is fetched by tests/vm/run.sh when it boots the VM.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=tests/lib/kernels.sh
. tests/lib/kernels.sh

# The calling script's header comment (line 2 up to its `set -` line).
stage_usage() {
	sed -n '2,/^set -/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

stage_init() {
	STAGE_NAME=$1
	local known=" $2 "
	shift 2
	# shellcheck disable=SC2034 # id, ko, timeout_s belong to the calling script
	while [ $# -gt 0 ]; do
		case "$1:$known" in
		--kernel:*" kernel "*) id=${2:?--kernel needs an ID}; shift 2; continue ;;
		--ko:*" ko "*) ko=${2:?--ko needs a file}; shift 2; continue ;;
		--timeout:*" timeout "*) timeout_s=${2:?--timeout needs seconds}; shift 2; continue ;;
		esac
		STAGE_SHIFT=0
		if declare -F stage_opt >/dev/null && stage_opt "$@" && [ "$STAGE_SHIFT" -gt 0 ]; then
			shift "$STAGE_SHIFT"
			continue
		fi
		stage_usage
	done
}

# stage_fail WHAT [MORE]: "FAIL: NAME ID: WHAT (MORE; STAGE_NOTE)", exit 1.
stage_fail() {
	local more=${2:-}
	[ -z "${STAGE_NOTE:-}" ] || more=${more:+$more; }$STAGE_NOTE
	echo "FAIL: $STAGE_NAME $id: $1${more:+ ($more)}"
	exit 1
}

stage_module() {
	local rel
	case "$1" in
	host) rel=host/vhost_scsi_sqcq.ko ;;
	guest) rel=guest/virtio_scsi_sqcq.ko ;;
	guest-faults) rel=tests/faults/guest/virtio_scsi_sqcq_faults.ko ;;
	*) echo "stage_module: host, guest or guest-faults" >&2; exit 2 ;;
	esac
	if [ -z "${ko:-}" ]; then
		abi=$(sqcq_kernel_abi "$id") || stage_fail "cannot resolve the ABI"
		ko=$ROOT/out/$abi/$rel
		tests/matrix.sh "$id" >&2 || true
	fi
	[ -f "$ko" ] || stage_fail "no module at $ko" "tests/matrix.sh $id"
	ko=$(cd "$(dirname "$ko")" && pwd)/$(basename "$ko")
}

stage_host_client() {
	mkdir -p "$(dirname "$1")"
	gcc -O2 -Wall -Wextra -Werror -pthread -o "$1" tests/host/client.c \
		tests/host/client-lib.c tests/host/phase-*.c
}
