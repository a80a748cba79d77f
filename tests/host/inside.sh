#!/bin/bash
# shellcheck disable=SC2317 # helpers run through check() and --hook
# Runs INSIDE the test VM as root (tests/host/run.sh starts it).
#
#  1. load the host module, run the userspace vhost client against
#     /dev/vhost-scsi-sqcq without any target (ioctls, the worker ioctls and
#     their threads -- threads of the client where the kernel has
#     vhost_task --, rings, BAD_TARGET), check that closing every device
#     left nothing behind;
#     1b. in a memory cgroup of its own, the client's queue starts are
#     charged to that cgroup and the charge goes at close (client memcg);
#  2. build an LIO target for fabric vhost_sqcq on rd_mcp ramdisks (tpgt_1:
#     LUNs 0 and 1, tpgt_2: LUN 0, tpgt_3: nexus only) and run the client's
#     SCSI checks (client scsi ...: endpoints, commands, verified I/O on four
#     queues, malformed requests, TMFs, hotplug events, fault cases); the
#     client changes configfs through this script (--hook);
#  3. a client bound with I/O in flight is SIGKILLed: the device is released
#     and the whole target can be torn down;
#  4. rmmod is refused while a device is open, works after;
#  5. takeover=1: fabric "vhost" and /dev/vhost-scsi, a short I/O check
#     through them; refused (with a clear log line) while the in-tree
#     vhost_scsi is loaded, while loading beside it without takeover works;
#     5b. the same target built by targetcli-fb, saved, cleared and
#     restored by targetctl, I/O after each;
#  6. takeover=1 racing a load of the in-tree vhost_scsi (takeover-race.sh,
#     with the module's test build from tests/faults/host/).
#
# Usage: inside.sh KO CLIENT
#        inside.sh --hook FUNCTION ARGS...   (configfs changes for the client:
#        the sqcq_target_* functions of tests/lib/target.sh)
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/target.sh
. "$HERE/../lib/target.sh"

if [ "${1:-}" = --hook ]; then
	shift
	case "${1:-}" in
	sqcq_target_*) "$@"; exit ;;
	*) echo "inside.sh: no hook '${1:-}'" >&2; exit 2 ;;
	esac
fi

KO=${1:?KO}
CLIENT=${2:?CLIENT}
MOD=vhost_scsi_sqcq
FAB=vhost_sqcq
WWPN=naa.5001405000000a01
LUN_MB=32
CFS=$SQCQ_TARGET_CFS
PREFIX=host
# shellcheck source=tests/lib/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
# shellcheck source=tests/lib/worker.sh
. "$HERE/../lib/worker.sh"
workers() { sqcq_workers; }
no_devices() { [ -d "/sys/kernel/debug/$MOD" ] && ! ls -d "/sys/kernel/debug/$MOD"/dev* >/dev/null 2>&1; }
# The worker of the device that process $1 owns.
worker_of() { sqcq_worker_of "$1"; }
# Process $1 has exited (a zombie or gone): its files are released.
exited() {
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)
	[ -z "$st" ] || [ "$st" = Z ]
}
log_lines() { dmesg | grep -c "$MOD: "; }

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

# ---- 1. no target ------------------------------------------------------------
# The module needs the target core (and scsi_common); insmod does not load
# dependencies.
check modprobe-target-core modprobe -a scsi_common target_core_mod
if ! insmod "$KO"; then
	fail "insmod $KO"
	exit 1
fi
pass "insmod ($(uname -r))"
check devnode [ -c /dev/vhost-scsi-sqcq ]

# The client checks that NEW_WORKER's threads are its own where they must be.
vt=()
sqcq_vhost_task && vt=(SQCQ_VHOST_TASK=1)
env "${vt[@]}" "$CLIENT" /dev/vhost-scsi-sqcq || fails=$((fails + 1))

# Every device was closed (the client exits): no worker, no debugfs dir.
sleep 0.5
check no-worker-left [ "$(workers)" = 0 ]
check no-device-debugfs-left no_devices
check log-rate-limited bash -c "[ $(log_lines) -lt 200 ]"
check access-platform-refusal-logged bash -c \
	"dmesg | grep -q '$MOD: owner [0-9]*: VIRTIO_F_ACCESS_PLATFORM refused'"

# ---- 1b. the device's memory is charged to its owner's memory cgroup --------
# The client (the VMM) runs in a cgroup of its own; the iovec arrays of its
# 130 queue starts (about 2 MiB, GFP_KERNEL_ACCOUNT) must show in that
# cgroup's memory.current and leave it at close (client memcg).
CG=/sys/fs/cgroup
MEMCG=$CG/sqcq-memcg
if ! grep -qw cgroup2 /proc/filesystems; then
	# The sanitizer kernel is built without cgroups (tests/debug/debug.config).
	echo "# 1b (device memory in the owner's memory cgroup): not run on $(uname -r): no cgroup support"
elif { grep -qs "^[^ ]* $CG cgroup2 " /proc/mounts || mount -t cgroup2 none $CG; } &&
	echo "+memory" >$CG/cgroup.subtree_control && mkdir -p $MEMCG; then
	# shellcheck disable=SC2016
	sh -c 'echo $$ >'"$MEMCG"'/cgroup.procs && exec "$0" "$@"' "$CLIENT" \
		memcg /dev/vhost-scsi-sqcq || fails=$((fails + 1))
	wait_for 10 rmdir $MEMCG || fail "memcg: the client's cgroup removed after it exited"
else
	fail "memcg: a memory cgroup for the client (cgroup2 with the memory controller)"
fi

# ---- 1c. workers follow the owner's cpuset as it is now ---------------------
# The client runs in a cpuset of CPUs 0-1, takes a device, narrows its
# cpuset to CPU 0, sets poll_cpu=0 and starts a worker: every worker must
# stay on CPU 0 (the placement off the poll CPU once used the owner's CPUs
# at SET_OWNER, and put the worker on CPU 1, outside the cpuset).
CPUSET=$CG/sqcq-cpuset
if ! grep -qw cgroup2 /proc/filesystems; then
	echo "# 1c (workers within the owner's cpuset): not run on $(uname -r): no cgroup support"
elif echo "+cpuset" >$CG/cgroup.subtree_control && mkdir -p $CPUSET &&
	echo 0-1 >$CPUSET/cpuset.cpus; then
	# shellcheck disable=SC2016
	sh -c 'echo $$ >'"$CPUSET"'/cgroup.procs && exec "$0" "$@"' "$CLIENT" \
		cpuset /dev/vhost-scsi-sqcq || fails=$((fails + 1))
	echo >/sys/module/$MOD/parameters/poll_cpu
	wait_for 10 rmdir $CPUSET || fail "cpuset: the client's cgroup removed after it exited"
else
	fail "cpuset: a cpuset cgroup for the client (cgroup2 with the cpuset controller)"
fi

# ---- 2. an LIO target, the SCSI data path ------------------------------------
t0=$SECONDS
ok=1
check target-setup-tpgt1-two-luns sqcq_target_tpg $FAB $WWPN 1 2 $LUN_MB || ok=0
check target-setup-tpgt2-one-lun sqcq_target_tpg $FAB $WWPN 2 1 $LUN_MB || ok=0
check target-setup-tpgt3-no-lun sqcq_target_tpg $FAB $WWPN 3 0 $LUN_MB || ok=0
# One directory per TPG tag: other spellings of tag 1 are refused.
for alias in tpgt_01 tpgt_+1 tpgt_001; do
	check "tpg-alias-$alias-refused" bash -c "! mkdir $CFS/$FAB/$WWPN/$alias 2>/dev/null"
done
if [ "$ok" = 1 ]; then
	SQCQ_HOOK="$(printf '%q ' bash "$HERE/inside.sh" --hook)" \
		timeout -k 10 1200 "$CLIENT" scsi /dev/vhost-scsi-sqcq $FAB $WWPN $LUN_MB ||
		fails=$((fails + 1))
else
	fail "scsi-client (not run: no target)"
fi
sleep 0.5
check scsi-no-worker-left [ "$(workers)" = 0 ]
check scsi-no-device-debugfs-left no_devices
echo "# scsi checks took $((SECONDS - t0)) s"

# ---- 3. a bound client killed with I/O in flight -----------------------------
ready=/tmp/sqcq-hold.ready
rm -f "$ready"
"$CLIENT" hold /dev/vhost-scsi-sqcq $FAB $WWPN "$ready" &
hpid=$!
for ((i = 0; i < 240; i++)); do
	[ -e "$ready" ] && break
	kill -0 "$hpid" 2>/dev/null || break
	sleep 0.5
done
check hold-client-bound-with-io [ -e "$ready" ]
check hold-worker-running worker_of "$hpid"
check rmmod-refused-while-bound bash -c "! rmmod $MOD 2>/dev/null"
check bound-tpg-rmdir-refused bash -c "! rmdir $CFS/$FAB/$WWPN/tpgt_2 2>/dev/null"
check bound-nexus-drop-refused bash -c "! echo NULL 2>/dev/null >$CFS/$FAB/$WWPN/tpgt_2/nexus"
kill -9 "$hpid" 2>/dev/null
for ((i = 0; i < 120; i++)); do
	exited "$hpid" && break
	sleep 0.5
done
if exited "$hpid"; then
	pass killed-client-released
	wait "$hpid" 2>/dev/null
else
	fail "killed-client-released (process $hpid still exiting after 60 s)"
fi
check killed-no-worker-left [ "$(workers)" = 0 ]
check killed-no-device-debugfs-left no_devices
check teardown-after-kill sqcq_target_teardown $FAB $WWPN
check fabric-dir-removed rmdir "$CFS/$FAB"

# ---- 4. module references: an open device, then unload -----------------------
exec 3<>/dev/vhost-scsi-sqcq
check rmmod-refused-while-open bash -c "! rmmod $MOD 2>/dev/null"
exec 3>&-
check log-rate-limited-with-target bash -c "[ $(log_lines) -lt 500 ]"
check rmmod rmmod $MOD
check unloaded bash -c "! [ -d /sys/module/$MOD ]"

# ---- 5. takeover=1 -----------------------------------------------------------
if [ -d /sys/module/vhost_scsi ] || [ -e /dev/vhost-scsi ]; then
	fail "takeover (the in-tree vhost_scsi is loaded already)"
else
	check takeover-insmod insmod "$KO" takeover=1
	check takeover-devnode [ -c /dev/vhost-scsi ]
	check takeover-no-sqcq-devnode [ ! -e /dev/vhost-scsi-sqcq ]
	# (sqcq_target_setup would modprobe the in-tree vhost_scsi for "vhost".)
	ok=0
	mkdir "$CFS/vhost" && sqcq_target_tpg vhost $WWPN 1 1 16 && ok=1
	check takeover-target-setup [ "$ok" = 1 ]
	check takeover-fabric-is-ours grep -q "$MOD" "$CFS/vhost/version"
	if [ "$ok" = 1 ]; then
		timeout -k 10 600 "$CLIENT" io /dev/vhost-scsi vhost $WWPN ||
			fails=$((fails + 1))
	fi
	check takeover-teardown sqcq_target_teardown vhost $WWPN
	check takeover-fabric-dir-removed rmdir "$CFS/vhost"
	check takeover-rmmod rmmod $MOD
	check takeover-devnode-gone [ ! -e /dev/vhost-scsi ]
fi
# ---- 5b. targetcli-fb under takeover=1 ------------------------------------
# What an operator runs: targetcli builds the target on our fabric "vhost"
# (ramdisk, WWN with its TPG and nexus, LUN) and saves it; clearconfig
# removes it; targetctl restore, what target.service runs at boot, builds
# it again from the file.  I/O goes through /dev/vhost-scsi each time.
# targetcli asks a system D-Bus for tcmu-runner's handlers: a private bus
# stands in for it (DBUS_SYSTEM_BUS_ADDRESS).
TW=naa.5001405000000e01
TSAVE=/tmp/targetcli-saved.json
tcli() { targetcli "$@" >>/tmp/targetcli.log 2>&1; }
if [ -d /sys/module/vhost_scsi ] || ! command -v targetcli >/dev/null ||
	! command -v dbus-daemon >/dev/null; then
	fail "targetcli (not installed, or the in-tree vhost_scsi is loaded)"
elif ! modinfo iscsi_target_mod >/dev/null 2>&1; then
	# saveconfig and clearconfig walk every fabric and load its module;
	# the sanitizer kernel (tests/debug/debug.config) has no iSCSI target.
	echo "# targetcli: not run on $(uname -r): no iscsi_target_mod, which targetcli loads"
elif ! insmod "$KO" takeover=1; then
	fail "targetcli-insmod"
else
	mkdir -p /tmp/targetcli-home
	dbus-daemon --session --address=unix:path=/tmp/targetcli-bus --fork \
		--print-pid >/tmp/targetcli-bus.pid
	export HOME=/tmp/targetcli-home
	export DBUS_SYSTEM_BUS_ADDRESS=unix:path=/tmp/targetcli-bus
	check targetcli-backstore tcli /backstores/ramdisk create name=rd0 size=16M
	check targetcli-vhost-target tcli /vhost create $TW
	check targetcli-fabric-is-ours grep -q "$MOD" "$CFS/vhost/version"
	check targetcli-nexus grep -q naa. "$CFS/vhost/$TW/tpgt_1/nexus"
	check targetcli-lun tcli /vhost/$TW/tpg1/luns create /backstores/ramdisk/rd0
	check targetcli-saveconfig tcli saveconfig $TSAVE
	timeout -k 10 600 "$CLIENT" io /dev/vhost-scsi vhost $TW targetcli- ||
		fails=$((fails + 1))
	check targetcli-clearconfig tcli clearconfig confirm=True
	check targetcli-cleared [ ! -e "$CFS/vhost/$TW" ]
	check targetctl-restore targetctl restore $TSAVE
	check targetctl-restored [ -e "$CFS/vhost/$TW/tpgt_1/lun/lun_0" ]
	timeout -k 10 600 "$CLIENT" io /dev/vhost-scsi vhost $TW targetctl- ||
		fails=$((fails + 1))
	check targetctl-clear targetctl clear
	# clearconfig leaves the fabric's directory, which holds the module.
	check targetcli-fabric-dir-removed rmdir "$CFS/vhost"
	check targetcli-rmmod rmmod $MOD
	kill "$(cat /tmp/targetcli-bus.pid)" 2>/dev/null
	unset DBUS_SYSTEM_BUS_ADDRESS
	[ "$fails" = 0 ] || tail -n 40 /tmp/targetcli.log
fi
check intree-modprobe modprobe vhost_scsi
check intree-devnode [ -c /dev/vhost-scsi ]
check takeover-refused-beside-intree bash -c "! insmod $KO takeover=1 2>/dev/null"
check takeover-refused-log-line bash -c \
	"dmesg | grep -q '$MOD: takeover=1: the in-tree vhost_scsi holds'"
check takeover-refused-not-loaded bash -c "! [ -d /sys/module/$MOD ]"
check coexist-insmod insmod "$KO"
check coexist-both-devnodes bash -c "[ -c /dev/vhost-scsi ] && [ -c /dev/vhost-scsi-sqcq ]"
check coexist-rmmod rmmod $MOD
check intree-rmmod rmmod vhost_scsi

# ---- 6. takeover=1 racing the in-tree vhost_scsi -----------------------------
# The test build (tests/faults/host/, built by the matrix beside the module)
# holds our load between its check for the in-tree module and its
# registrations while the in-tree module loads (takeover-race.sh).
FKO=$(dirname "$(dirname "$KO")")/tests/faults/host/vhost_scsi_sqcq_faults.ko
"$HERE/takeover-race.sh" "$KO" "$FKO" || fails=$((fails + 1))
exit $((fails > 0))
