#!/bin/bash
# Classic vs SQ/CQ in the nested guest: runs in L2, started by
# tests/e2e/l1.sh (E2E_L2_SCRIPT) on top of our host backend, with our guest
# driver loaded twice in one boot: sqcq=0 (classic: kicks and interrupts)
# and sqcq=1 (SQ/CQ doorbells, poll threads on both sides).
#
# Usage: compare-l2.sh GUEST LABEL KO   (the arguments l1.sh gives any L2
#        script; GUEST must be sqcq)
# Environment: E2E_SLOT_A, E2E_TPGT (l1.sh), CMP_RUNTIME (s per point,
# default 5), CMP_POINTS (default "randread:1:1 randread:32:1 randwrite:1:1
# randwrite:32:1 randread:32:4"; rw:iodepth:jobs), CMP_IDLE_S (seconds the
# idle poller CPU is sampled, default 3), E2E_GUEST_PARAMS (more insmod
# parameters for both modes).
#
# For each point: fio 4 KiB libaio direct on the vhostfd device's LUN 0;
# IOPS from fio; kicks and interrupts per I/O from the driver's debugfs
# counters (request queues, the same window). After the SQ/CQ points, the
# CPU time the guest poll thread used while the device was idle. Prints
# result lines "cmp MODE RW QD JOBS IOPS IOS KICKS INTERRUPTS" and
# "cmp-idle ..." on stdout for bench/compare.sh, which makes the table, and
# "PASS:/FAIL: compare ..." for what must hold (mode negotiated, fio ran).
# Nothing here asserts a timing.
set -u
GUEST=${1:?GUEST}
KO=${3:?KO}
SLOT_A=${E2E_SLOT_A:?}
TPGT=${E2E_TPGT:?}
RT=${CMP_RUNTIME:-5}
POINTS=${CMP_POINTS:-randread:1:1 randread:32:1 randwrite:1:1 randwrite:32:1 randread:32:4}
IDLE_S=${CMP_IDLE_S:-3}
PREFIX=compare TAG=compare-l2
# shellcheck source=tests/e2e/l2-lib.sh
. tests/e2e/l2-lib.sh
[ "$GUEST" = sqcq ] || { fail "guest driver must be sqcq (got $GUEST)"; exit 1; }

bound() { vdev "$SLOT_A" && [ -e "/sys/bus/virtio/drivers/virtio_scsi_sqcq/${REPLY##*/}" ]; }
# disk: DISK = /dev path of LUN 0 of target $TPGT.
disk() {
	local d
	DISK=""
	vdev "$SLOT_A" || return 1
	for d in "$REPLY"/host*/target*:0:"$TPGT"/*:0:"$TPGT":0/block/*; do
		[ -e "$d" ] && { DISK=/dev/${d##*/}; [ -b "$DISK" ]; return; }
	done
	return 1
}

[ -d /sys/module/sd_mod ] || modprobe -a scsi_mod sd_mod
for v in /sys/bus/virtio/drivers/virtio_scsi/virtio*; do
	[ -e "$v" ] && echo "${v##*/}" >/sys/bus/virtio/drivers/virtio_scsi/unbind
done

for mode in classic sqcq; do
	want=0
	[ "$mode" = sqcq ] && want=1
	# shellcheck disable=SC2086 # parameters, split on purpose
	if ! insmod "$KO" sqcq=$want ${E2E_GUEST_PARAMS:-}; then
		fail "$mode insmod"
		continue
	fi
	if ! wait_for 30 bound || ! wait_for 30 scsi_host "$SLOT_A"; then
		fail "$mode driver bound"
		rmmod virtio_scsi_sqcq
		continue
	fi
	echo "0 $TPGT 0" >"/sys/class/scsi_host/$REPLY/scan"
	if ! wait_for 60 disk; then
		fail "$mode disk visible"
		rmmod virtio_scsi_sqcq
		continue
	fi
	vdev "$SLOT_A"
	DBG=/sys/kernel/debug/virtio_scsi_sqcq/${REPLY##*/}
	dbg_value "$DBG" mode
	got=$REPLY
	if [ "$got" = "$mode" ]; then pass "$mode mode-negotiated ($got)"; else fail "$mode mode-negotiated (got $got)"; fi
	for p in $POINTS; do
		IFS=: read -r rw qd nj <<<"$p"
		queue_sums "$DBG"
		r0=$REQS k0=$KICKS i0=$IRQS
		out=/tmp/cmp-$mode-$rw-$qd-$nj.terse
		timeout -k 5 $((RT + 60)) fio --minimal --name=cmp --filename="$DISK" \
			--ioengine=libaio --direct=1 --rw="$rw" --bs=4k --iodepth="$qd" \
			--numjobs="$nj" --group_reporting --time_based --runtime="$RT" \
			--size=16m --randrepeat=0 >"$out" 2>/dev/null
		st=$?
		queue_sums "$DBG"
		# Terse v3: field 8 read IOPS, field 49 write IOPS.
		IFS=';' read -ra f <"$out"
		iops=${f[7]:-0}
		[ "$rw" = randwrite ] && iops=${f[48]:-0}
		if [ "$st" != 0 ] || [ "${iops:-0}" = 0 ]; then
			fail "$mode fio $rw qd$qd jobs$nj (status $st)"
			continue
		fi
		echo "cmp $mode $rw $qd $nj $iops $((REQS - r0)) $((KICKS - k0)) $((IRQS - i0))"
	done
	if [ "$mode" = sqcq ]; then
		# CPU time of the idle poll thread: let it reach its idle timeout,
		# then sample utime+stime (clock ticks) over IDLE_S seconds.
		pid=""
		for s in /proc/[0-9]*/comm; do
			read -r c <"$s" 2>/dev/null || continue
			[[ "$c" == sqcq-poll-* ]] && { pid=${s#/proc/}; pid=${pid%/comm}; break; }
		done
		if [ -n "$pid" ]; then
			nap 1
			read -ra a <"/proc/$pid/stat"
			dbg_value "$DBG" poll_sleeps
			s0=$REPLY
			nap "$IDLE_S"
			read -ra b <"/proc/$pid/stat"
			dbg_value "$DBG" poll_sleeps
			ticks=$(( (b[13] + b[14]) - (a[13] + a[14]) ))
			echo "cmp-idle guest $ticks $IDLE_S $s0 $REPLY"
		else
			fail "sqcq guest poll thread not found"
		fi
		# The host poller (L1's device worker) over the same kind of
		# window, sampled by l1.sh on request.
		: >"$SQCQ_RESULTS/hotplug-idle.req"
		if wait_for $((IDLE_S + 30)) test -e "$SQCQ_RESULTS/hotplug-idle.done"; then
			read -r ans <"$SQCQ_RESULTS/hotplug-idle.done"
			echo "cmp-idle host $ans $IDLE_S"
		else
			fail "sqcq host idle sample (L1 did not answer)"
		fi
	fi
	rmmod virtio_scsi_sqcq || fail "$mode rmmod"
done
echo "compare-l2: $fails failed" >&2
[ "$fails" = 0 ]
