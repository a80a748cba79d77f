#!/bin/bash
# VM test (runs INSIDE a test VM booted with debugfs=off and 2 CPUs, as
# root): nothing a kernel's configuration does, and no failed load, may
# cost a VM its disk driver or leave a piece of a module behind.
#
#  - Both modules load and unload without debugfs (a kernel booted with
#    debugfs=off, or built without it), saying once that counters are off.
#  - A load whose init fails after it has followed CPU hotplug undoes it:
#    the guest module while tests/smoke/squat/sqcq_squat.ko holds its
#    driver name, the host module refused takeover=1 beside the in-tree
#    vhost_scsi.  No hotplug state of ours is left, and taking a CPU
#    offline and back (which would call a callback left in freed module
#    text) runs clean: tests/vm/run.sh fails the run on any kernel report.
#
# Usage: load-fail.sh KO_DIR   (KO_DIR: out/<abi> of the matrix build)
set -u
KO=${1:?KO_DIR}
HOST=vhost_scsi_sqcq
GUEST=virtio_scsi_sqcq
SQUAT=$KO/tests/smoke/squat/sqcq_squat.ko
PREFIX="load-fail $(uname -r)"
# shellcheck source=tests/lib/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
STATES=/sys/devices/system/cpu/hotplug/states
CPU1=/sys/devices/system/cpu/cpu1/online
# shellcheck source=tests/lib/modules.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/modules.sh"

# no_state MOD: no CPU hotplug state named after MOD is registered.
no_state() { ! grep -q " $1:" "$STATES"; }
# cpu_cycle: CPU 1 offline and online again (runs every hotplug callback).
cpu_cycle() { echo 0 >"$CPU1" && echo 1 >"$CPU1" && [ "$(cat "$CPU1")" = 1 ]; }
ko_of() {
	case $1 in
	"$HOST") echo "$KO/host/$HOST.ko" ;;
	*) echo "$KO/guest/$GUEST.ko" ;;
	esac
}

for f in "$(ko_of $HOST)" "$(ko_of $GUEST)" "$SQUAT"; do
	check "built ${f#"$KO"/}" [ -f "$f" ] || exit 1
done
check "debugfs-is-off" bash -c \
	"grep -qw 'debugfs=off' /proc/cmdline && ! mount -t debugfs none /sys/kernel/debug 2>/dev/null"
check "hotplug-states-readable" [ -r "$STATES" ]
check "cpu1-can-go-offline" [ -w "$CPU1" ]

for mod in $HOST $GUEST; do
	ko=$(ko_of $mod)
	check "$mod dependencies" load_deps "$ko"
	dmesg -C
	if check "$mod loads-without-debugfs" insmod "$ko"; then
		check "$mod says-no-debugfs" bash -c "dmesg | grep -q '$mod: no debugfs'"
		check "$mod follows-hotplug" grep -q " $mod:online" "$STATES"
		check "$mod cpu-cycle-loaded" cpu_cycle
		check "$mod unloads" rmmod $mod
	fi
	check "$mod no-state-after-unload" no_state $mod
done

# The guest: its driver name taken, init fails in register_virtio_driver().
if check "squat-loads" insmod "$SQUAT"; then
	check "$GUEST load-fails-name-taken" bash -c "! insmod $(ko_of $GUEST) 2>/dev/null"
	check "$GUEST nothing-left-after-failed-load" bash -c \
		"! [ -d /sys/module/$GUEST ] && ! grep -q ' $GUEST:' $STATES"
	check "$GUEST cpu-cycle-after-failed-load" cpu_cycle
	rmmod sqcq_squat
fi
# The host: takeover=1 refused while the in-tree vhost_scsi is loaded.
if check "in-tree-vhost_scsi-loads" modprobe vhost_scsi; then
	dmesg -C
	check "$HOST takeover-refused" bash -c "! insmod $(ko_of $HOST) takeover=1 2>/dev/null"
	check "$HOST takeover-refusal-logged" bash -c \
		"dmesg | grep -q 'takeover=1: the in-tree vhost_scsi holds'"
	check "$HOST nothing-left-after-failed-load" bash -c \
		"! [ -d /sys/module/$HOST ] && ! grep -q ' $HOST:' $STATES"
	check "$HOST cpu-cycle-after-failed-load" cpu_cycle
	rmmod vhost_scsi
fi
# And both load again afterwards.
for mod in $GUEST $HOST; do
	check "$mod loads-after-failed-load" insmod "$(ko_of $mod)" &&
		rmmod $mod
done
exit $((fails > 0))
