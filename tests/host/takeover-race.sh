#!/bin/bash
# shellcheck disable=SC2317 # helpers run through check() and bounded()
# Runs INSIDE the test VM as root (tests/host/inside.sh, section 6; alone:
# tests/vm/run.sh --kernel ID -- tests/host/takeover-race.sh KO FAULTS_KO).
#
# takeover=1 against an in-tree vhost_scsi loaded at the same time.  Our
# load looks for the in-tree module, then registers /dev/vhost-scsi and
# fabric "vhost"; an in-tree vhost_scsi that loads between the two must
# leave one module holding both names and the other gone without a trace.
# The host module's test build (tests/faults/host/) holds our load right
# after its check (fault_takeover_wait_ms), this script loads the in-tree
# module inside that window and then lets ours go on.  Checked:
#  - the in-tree module loaded while ours was held (the interleaving);
#  - the loser left nothing: not in /sys/module, no debugfs directory, no
#    CPU hotplug state (ours); its refusal in the log;
#  - the winner alone holds /dev/vhost-scsi (an open raises its module's
#    reference count, no other's) and fabric "vhost": an LIO target on it,
#    the fabric's version file its own; it unloads cleanly, and the target
#    core keeps no fabric "vhost" after it (our shipped module loaded
#    with takeover=1 then gets the fabric directory);
#  - the loser's misc_register() met the name taken: the driver core's
#    report of a duplicate sysfs name (a stack trace), which this race
#    causes and the script declares to the rig ($SQCQ_VM_EXPECTED); any
#    other report in the kernel log fails.
# Each step that could hang in the kernel runs bounded, so that a broken
# fabric list fails here instead of stopping the VM.  The order before the
# fix (fabric registered before the node, the error path unregistering the
# fabric by name) failed here: the error path removed the in-tree fabric,
# ours stayed listed in freed module memory, and the mkdir of target/vhost
# oopsed in target_core_register_fabric (tests/README.md).
#
# Usage: takeover-race.sh KO FAULTS_KO
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/target.sh
. "$HERE/../lib/target.sh"
# shellcheck source=tests/vm/common.sh
. "$HERE/../vm/common.sh"	# SQCQ_VM_LOG_BAD
PREFIX=host
# shellcheck source=tests/lib/check.sh
. "$HERE/../lib/check.sh"

KO=${1:?KO}
FKO=${2:?FAULTS_KO}
MOD=vhost_scsi_sqcq
FMOD=vhost_scsi_sqcq_faults
CFS=$SQCQ_TARGET_CFS
WWPN=naa.5001405000000b01
# Our load waits this long at most; the script ends the wait itself.
WIN_MS=60000

# Process $1 has exited (a zombie or gone).
exited() {
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)
	[ -z "$st" ] || [ "$st" = Z ]
}
# bounded SECONDS CMD...: CMD in the background for at most SECONDS; its
# status, or 124 with CMD left running (stuck in the kernel).
bounded() {
	local s=$1 pid
	shift
	"$@" &
	pid=$!
	if ! wait_for "$s" exited "$pid"; then
		echo "# still running after $s s: $*"
		return 124
	fi
	wait "$pid"
}
# The kernel log since a mark of this run (the buffer of a long run has
# wrapped: counting lines would not do); nothing when the mark is gone.
MARK="takeover-race: start $$ $SECONDS"
echo "$MARK" >/dev/kmsg
new_log() { dmesg | awk -v m="$MARK" 'on { print } index($0, m) { on = 1 }'; }
mark_in_log() { dmesg | grep -qF "$MARK"; }
window_still_open() { ! new_log | grep -q "$FMOD: fault: takeover window closed"; }
in_log() { new_log | grep -q "$1"; }
# The driver core's report of a duplicate /dev/vhost-scsi: from its first
# line to the kobject line after the stack trace.
dup_report() {
	new_log | awk '
		/sysfs: cannot create duplicate filename .\/devices\/virtual\/misc\/vhost-scsi./ { on = 1 }
		on { print }
		on && /kobject_add_internal failed for vhost-scsi with -EEXIST/ { exit }'
}
# refused_at_misc REPORT MODULE: REPORT is MODULE's misc_register() meeting
# the name taken.
refused_at_misc() {
	grep -q "kobject_add_internal failed for vhost-scsi with -EEXIST" <<<"$1" &&
		grep -q "misc_register" <<<"$1" && grep -qF "[$2]" <<<"$1"
}
refcnt() { cat "/sys/module/$1/refcnt" 2>/dev/null || echo -; }
# The modules whose reference count an open of /dev/vhost-scsi raises.
node_holders() {
	local a b fd out=""
	a=$(refcnt vhost_scsi) b=$(refcnt $FMOD)
	exec {fd}<>/dev/vhost-scsi || return 1
	[ "$(refcnt vhost_scsi)" = "$a" ] || out+=" vhost_scsi"
	[ "$(refcnt $FMOD)" = "$b" ] || out+=" $FMOD"
	exec {fd}>&-
	echo "${out# }"
}
# fabric_of_vhost WHO: the fabric directory "vhost" is WHO's (its version
# file names our module, or does not for the in-tree one).
fabric_of_vhost() {
	local v
	v=$(cat "$CFS/vhost/version") || return 1
	echo "# $CFS/vhost/version: $v"
	case $1 in
	vhost_scsi) [[ "$v" != *"$MOD"* ]] ;;
	*) [[ "$v" == *"$1"* ]] ;;
	esac
}
# Best effort, so that what follows finds no module of this run.
cleanup() {
	[ ! -d "$CFS/vhost/$WWPN" ] || bounded 60 sqcq_target_teardown vhost $WWPN
	[ ! -d "$CFS/vhost" ] || bounded 10 rmdir "$CFS/vhost"
	local m
	for m in $FMOD vhost_scsi $MOD; do
		[ ! -d "/sys/module/$m" ] || bounded 30 rmmod "$m"
	done
}

check race-fault-build-present test -f "$FKO" || exit 1
if [ -d /sys/module/vhost_scsi ] || [ -d /sys/module/$MOD ] || [ -e /dev/vhost-scsi ]; then
	fail "race (the in-tree vhost_scsi or ours is loaded already)"
	exit 1
fi
check race-modprobe-target-core modprobe -a scsi_common target_core_mod || exit 1

# Ours, held right after its check for the in-tree module.
insmod "$FKO" takeover=1 fault_takeover_wait_ms=$WIN_MS 2>/tmp/race-insmod.err &
ipid=$!
if ! check race-window-open wait_for 60 in_log "$FMOD: fault: takeover window open"; then
	kill "$ipid" 2>/dev/null
	wait_for 30 exited "$ipid" && wait "$ipid"
	cleanup
	exit 1
fi
# The in-tree module, while ours waits.
t0=$SECONDS
bounded 60 modprobe vhost_scsi
mp=$?
echo "# modprobe vhost_scsi: status $mp in $((SECONDS - t0)) s"
check race-intree-loaded-inside-window window_still_open
# Ours goes on.
check race-window-released bash -c "echo 0 >/sys/module/$FMOD/parameters/fault_takeover_wait_ms"
if wait_for 60 exited "$ipid"; then
	wait "$ipid"
	ist=$?
else
	ist=124
fi
echo "# insmod $FMOD takeover=1: status $ist $(tr '\n' ' ' </tmp/race-insmod.err)"

if [ "$ist" != 0 ]; then
	# Ours lost: nothing of it may be left.
	winner=vhost_scsi loser=$FMOD
	check race-intree-loaded bash -c "[ $mp = 0 ] && [ -d /sys/module/vhost_scsi ]"
	check race-ours-refused-log-line in_log \
		"$FMOD: cannot register /dev/vhost-scsi: -[0-9]* (the in-tree vhost_scsi has it)"
	check race-ours-not-loaded [ ! -d /sys/module/$FMOD ]
	check race-ours-no-debugfs-left [ ! -e /sys/kernel/debug/$FMOD ]
	check race-ours-no-cpuhp-state-left bash -c \
		"! grep -q '$MOD' /sys/devices/system/cpu/hotplug/states"
else
	# Ours won: the in-tree module must have failed to load, cleanly.
	winner=$FMOD loser=vhost_scsi
	check race-intree-refused [ "$mp" != 0 ]
	check race-intree-not-loaded [ ! -d /sys/module/vhost_scsi ]
fi
echo "# takeover race: $winner won"
holders=$(node_holders)
echo "# an open of /dev/vhost-scsi holds: ${holders:-no module}"
check "race-devnode-held-by-$winner-alone" [ "$holders" = $winner ]
check race-fabric-dir-made bounded 30 mkdir "$CFS/vhost"
check "race-fabric-is-$winner" bounded 10 fabric_of_vhost $winner
check race-target-on-winner bounded 60 sqcq_target_tpg vhost $WWPN 1 1 16
check race-target-teardown bounded 60 sqcq_target_teardown vhost $WWPN
check race-fabric-dir-removed bounded 10 rmdir "$CFS/vhost"
check "race-$winner-rmmod" bounded 60 rmmod $winner
check race-devnode-gone bash -c "[ ! -e /dev/vhost-scsi ] && [ ! -d /sys/module/$winner ]"
# No fabric "vhost" left in the target core: ours takes the name again.
if check race-shipped-takeover-insmod bounded 60 insmod "$KO" takeover=1; then
	check race-shipped-fabric-dir bounded 30 mkdir "$CFS/vhost"
	check race-shipped-fabric-is-ours bounded 10 fabric_of_vhost $MOD
	check race-shipped-fabric-dir-removed bounded 10 rmdir "$CFS/vhost"
	check race-shipped-rmmod bounded 60 rmmod $MOD
fi
# The loser's misc_register() met the winner's node: the driver core
# reports the duplicate sysfs name with a stack trace, the one report this
# race must cause; it is declared to the rig ($SQCQ_VM_EXPECTED), any other
# line fails.
rep=$(dup_report)
check "race-$loser-refused-at-misc-register" refused_at_misc "$rep" "$loser"
if [ -n "$rep" ]; then
	echo "# expected: the driver core's duplicate-name report, $(wc -l <<<"$rep") lines"
	[ -z "${SQCQ_VM_EXPECTED:-}" ] || printf '%s\n' "$rep" >>"$SQCQ_VM_EXPECTED"
fi
bad=$(new_log | grep -avxF -f <(printf '%s\n' "$rep") | grep -aE "$SQCQ_VM_LOG_BAD" | head -n 5)
# The whole log since the mark, or the check would see nothing.
check race-kernel-log-whole mark_in_log
check race-kernel-log-clean [ -z "$bad" ] || printf '# %s\n' "$bad"
cleanup
exit $((fails > 0))
