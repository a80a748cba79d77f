#!/bin/bash
# The guest poll thread's watchdog under the sanitizer kernel: runs in L2
# (E2E_L2_SCRIPT, started by tests/e2e/l1.sh) on the debug kernel, whose
# PROVE_RAW_LOCK_NESTING reports a spinlock_t taken in hard-irq context
# ("BUG: Invalid wait context": a sleeping lock on PREEMPT_RT), with our
# host in L1.  KO is the driver's test build (tests/lib/faults-named.sh)
# loaded with E2E_GUEST_PARAMS, which must give it a poll thread.  Once
# the disk is there, fault_poll_hog_s=1: the next time the thread finds
# work it spins a second with preemption off, never passing its loop, so
# the watchdog's hard-irq timer must rescue (ask for interrupts, have what
# was published reaped).
#
# Usage: l2-watchdog.sh GUEST LABEL KO   (GUEST must be sqcq)
# Checks: SQ/CQ with a running poll thread; fio writes and verifies 4 MiB
# across the hog; the hog ran (the parameter back at 0); poll_rescues rose.  The rig fails the run on any report
# in L2's kernel log (tests/vm/common.sh), the wait-context one included.
set -uo pipefail
GUEST=${1:?GUEST}
LABEL=${2:?LABEL}
KO=${3:?KO}
SLOT_A=${E2E_SLOT_A:?}
TPGT=${E2E_TPGT:?}
FIO=${SQCQ_FIO:-fio}
PREFIX="e2e $LABEL watchdog" TAG=e2e-wd
# shellcheck source=tests/e2e/l2-lib.sh
. tests/e2e/l2-lib.sh
[ "$GUEST" = sqcq ] || { fail "guest driver must be sqcq (got $GUEST)"; exit 1; }

[ -d /sys/module/sd_mod ] || modprobe -a scsi_mod sd_mod
unbind_intree
# shellcheck disable=SC2086 # parameters, split on purpose
if ! insmod "$KO" ${E2E_GUEST_PARAMS:-}; then
	fail "insmod $KO ${E2E_GUEST_PARAMS:-}"
	exit 1
fi
check "the test build has the poll hog" test -e /sys/module/virtio_scsi_sqcq/parameters/fault_poll_hog_s ||
	exit 1
if ! wait_for 60 sqcq_bound || ! wait_for 60 scsi_host "$SLOT_A"; then
	fail "driver bound"
	exit 1
fi
echo "0 $TPGT 0" >"/sys/class/scsi_host/$REPLY/scan"
check "LUN 0 visible" wait_for 120 lun0_disk || exit 1
vdev "$SLOT_A"
d=/sys/kernel/debug/virtio_scsi_sqcq/${REPLY##*/}
dbg_snapshot "$d"
check "SQ/CQ with a poll thread (mode ${DBGV[mode]:-?}, poll_thread ${DBGV[poll_thread]:-?})" \
	[ "${DBGV[mode]:-}/${DBGV[poll_thread]:-}" = sqcq/running ]
r0=${DBGV[poll_rescues]:-0}
hog=/sys/module/virtio_scsi_sqcq/parameters/fault_poll_hog_s
echo 1 >"$hog"
log "poll_rescues $r0 before; hog $(<"$hog") s"
out=/tmp/fio-watchdog.log
# The hog needs the thread to find work once: a thread that slept through
# the run (its vCPU wanted by fio, steal time rising: completions by
# interrupt) leaves it armed.  Up to three runs, each said (seen on the
# sanitizer kernel in a CI run, 2026-12-06: the whole 4 MiB without it;
# tests/debug/watchdog.sh now fixes the thread's window, so that each
# interrupt wakes it).
for try in 1 2 3; do
	timeout -k 10 600 "$FIO" --eta=never --output="$out" --name=wd --filename="$DISK" \
		--size=4m --ioengine=libaio --direct=1 --rw=randwrite --bs=4k --iodepth=8 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0
	st=$?
	cp "$out" "$SQCQ_RESULTS/" 2>/dev/null
	[ "$st" = 0 ] || break
	[ "$(<"$hog")" != 0 ] || break
	log "run $try: the poll thread found no work with the hog armed; once more"
done
[ "$st" = 0 ] || while read -r line; do echo "    $line" >&2; done <"$out"
check "fio wrote and verified 4 MiB across the hog (status $st)" [ "$st" = 0 ]
check "the poll thread ran the hog (fault_poll_hog_s now $(<"$hog"))" [ "$(<"$hog")" = 0 ]
dbg_snapshot "$d"
r1=${DBGV[poll_rescues]:-0}
check "the watchdog rescued the hogging poll thread (poll_rescues $r0 -> $r1)" [ "$r1" -gt "$r0" ]
rmmod virtio_scsi_sqcq || fail "rmmod"
exit $((fails > 0))
