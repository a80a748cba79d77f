#!/bin/bash
# tests/host/run.sh [--kernel ID] [--ko FILE] [--timeout S]
#
# The host module (vhost_scsi_sqcq) driven directly from userspace: compiles
# tests/host/client.c here (gcc -Wall -Wextra -Werror, into out/tools/),
# boots the test VM (tests/vm/run.sh) and runs tests/host/inside.sh there,
# which loads the module and runs the client against /dev/vhost-scsi-sqcq:
# every vhost ioctl with good and malformed input, ownership, the split
# ring engine (control and request queues, indirect descriptors, EVENT_IDX,
# NO_INTERRUPT, NOTIFY_ON_EMPTY, malformed chains), reset and owner exit;
# then, with an LIO target on rd_mcp ramdisks (fabric vhost_sqcq):
# endpoints, INQUIRY/REPORT LUNS/READ CAPACITY, verified READ/WRITE(10/16)
# on four queues in every descriptor layout, malformed requests, TMFs,
# hotplug events, CLEAR_ENDPOINT/LUN unlink/SIGKILL/close with I/O in
# flight, unload; and takeover=1 (fabric "vhost", /dev/vhost-scsi), the
# target built by targetcli-fb and restored by targetctl; takeover=1 racing
# a load of the in-tree vhost_scsi (takeover-race.sh, with the module's
# test build from tests/faults/host/, which the matrix builds beside it).
#
# The module comes from out/<abi>/host/ (tests/matrix.sh ID builds it) or
# --ko (a path under the repository: the VM sees the host root read-only,
# but its own /tmp). Prints PASS:/FAIL: lines; exit status 0 when all passed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=tests/lib/kernels.sh
. tests/lib/kernels.sh

id=6.1 ko="" timeout_s=1500
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	--ko) ko=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done

if [ -z "$ko" ]; then
	abi=$(sqcq_kernel_abi "$id") || { echo "FAIL: host $id: cannot resolve the ABI"; exit 1; }
	ko=$ROOT/out/$abi/host/vhost_scsi_sqcq.ko
	# Built every time (quick when nothing changed): a module left in
	# out/ by an older tree must never be the one tested.
	tests/matrix.sh "$id" >&2 || true
fi
[ -f "$ko" ] || { echo "FAIL: host $id: no module at $ko (tests/matrix.sh $id)"; exit 1; }
ko=$(cd "$(dirname "$ko")" && pwd)/$(basename "$ko")

# targetcli-fb (and a D-Bus daemon for it) for the takeover=1 checks.
# shellcheck source=tests/lib/apt.sh
. tests/lib/apt.sh
sqcq_install targetcli-fb dbus >&2 || echo "host: cannot install targetcli-fb" >&2
mkdir -p out/tools
if gcc -O2 -Wall -Wextra -Werror -pthread -o out/tools/host-client tests/host/client.c; then
	echo "PASS: host client-builds"
else
	echo "FAIL: host client-builds"
	exit 1
fi

rc=0
tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout "$timeout_s" \
	-- tests/host/inside.sh "$ko" "$ROOT/out/tools/host-client" || rc=$?
exit "$rc"
