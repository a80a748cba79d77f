#!/bin/bash
# Runs INSIDE the test VM as root (tests/host/run.sh starts it): load the
# host module, run the userspace vhost client against /dev/vhost-scsi-sqcq,
# then check that closing every device left nothing behind (worker threads,
# debugfs directories) and that the module unloads.
#
# Usage: inside.sh KO CLIENT
set -u
KO=${1:?KO}
CLIENT=${2:?CLIENT}
MOD=vhost_scsi_sqcq
fails=0

pass() { echo "PASS: host $*"; }
fail() { echo "FAIL: host $*"; fails=$((fails + 1)); }
check() {
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}
workers() { grep -l '^vhost-sqcq-' /proc/[0-9]*/comm 2>/dev/null | wc -l; }

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
if ! insmod "$KO"; then
	fail "insmod $KO"
	exit 1
fi
pass "insmod ($(uname -r))"
check devnode [ -c /dev/vhost-scsi-sqcq ]

"$CLIENT" /dev/vhost-scsi-sqcq || fails=$((fails + 1))

# Every device was closed (the client exits): no worker, no debugfs dir.
sleep 0.5
check no-worker-left [ "$(workers)" = 0 ]
check no-device-debugfs-left bash -c \
	"[ \"\$(ls /sys/kernel/debug/$MOD)\" = params ]"
check log-rate-limited bash -c \
	"[ \$(dmesg | grep -c '$MOD: ') -lt 200 ]"
check rmmod rmmod $MOD
check unloaded bash -c "! [ -d /sys/module/$MOD ]"
exit $((fails > 0))
