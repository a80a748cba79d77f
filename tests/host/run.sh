#!/bin/bash
# tests/host/run.sh [--kernel ID] [--ko FILE] [--timeout S]
#
# The host module (vhost_scsi_sqcq) driven directly from userspace: compiles
# tests/host/client.c here (with client-lib.c and phase-*.c: gcc -Wall
# -Wextra -Werror, into out/tools/),
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

# shellcheck source=tests/lib/stage.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/stage.sh"
id=6.1 ko="" timeout_s=1500
stage_init host "kernel ko timeout" "$@"
stage_module host

# targetcli-fb (and a D-Bus daemon for it) for the takeover=1 checks.
# shellcheck source=tests/lib/apt.sh
. tests/lib/apt.sh
sqcq_install targetcli-fb dbus >&2 || echo "host: cannot install targetcli-fb" >&2
if stage_host_client out/tools/host-client; then
	echo "PASS: host client-builds"
else
	echo "FAIL: host client-builds"
	exit 1
fi

rc=0
tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout "$timeout_s" \
	-- tests/host/inside.sh "$ko" "$ROOT/out/tools/host-client" || rc=$?
exit "$rc"
