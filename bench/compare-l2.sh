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
# randwrite:32:1 randread:32:4"; rw:iodepth:jobs), CMP_ROUNDS (default 5),
# CMP_IDLE_S (seconds the idle poller CPU is sampled, default 3),
# E2E_GUEST_PARAMS (more insmod parameters for both modes).
#
# CMP_ROUNDS rounds, each loading the driver once per mode, in alternating
# order (classic first in odd rounds, SQ/CQ first in even ones), so that a
# drift of the machine hits both modes alike.  For each point: fio 4 KiB
# libaio direct on the vhostfd device's LUN 0; IOPS from fio; kicks and
# interrupts per I/O from the driver's debugfs counters (request queues,
# the same window); L1's KVM exits and L1's busy CPU time (every thread
# of both sides: L2's vCPUs with fio and the guest poller, QEMU, the host
# poller, LIO) over the same window, sampled by l1.sh on request.  After
# the last SQ/CQ points, the CPU time the guest poll thread used while the
# device was idle.  Prints result lines
# "cmp MODE RW QD JOBS IOPS IOS KICKS INTERRUPTS EXITS BUSY_TICKS ROUND
# HOST_IDLE HOST_CONTENDED HOST_YIELDS GUEST_IDLE GUEST_CONTENDED
# GUEST_STOLEN GUEST_IRQ_ONLY" (the last seven: the poll threads' sleeps by
# reason, yields, and interrupts that left the guest poller asleep, over
# the point; "-" where not known)
# and "cmp-idle ..." on stdout for bench/compare.sh, which makes the table,
# and "PASS:/FAIL: compare ..." for what must hold (mode negotiated, fio
# ran).  Nothing here asserts a timing.
set -u
GUEST=${1:?GUEST}
KO=${3:?KO}
SLOT_A=${E2E_SLOT_A:?}
TPGT=${E2E_TPGT:?}
RT=${CMP_RUNTIME:-5}
POINTS=${CMP_POINTS:-randread:1:1 randread:32:1 randwrite:1:1 randwrite:32:1 randread:32:4}
IDLE_S=${CMP_IDLE_S:-3}
ROUNDS=${CMP_ROUNDS:-5}
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

# l1_stat: REPLY = "EXITS BUSY IDLE CONTENDED YIELDS" from L1 (its KVM exit
# count, the busy clock ticks of all its CPUs, the host pollers' sleeps
# and yields), or dashes when L1 does not answer.
l1_stat() {
	rm -f "$SQCQ_RESULTS/hotplug-stat.done"
	: >"$SQCQ_RESULTS/hotplug-stat.req"
	REPLY="- - - - -"
	wait_for 30 test -e "$SQCQ_RESULTS/hotplug-stat.done" || return 1
	read -r REPLY <"$SQCQ_RESULTS/hotplug-stat.done"
	rm -f "$SQCQ_RESULTS/hotplug-stat.done"
}
# delta A B: B - A for numbers, "-" when either is not one.
delta() {
	if [[ "$1" =~ ^[0-9]+$ && "$2" =~ ^[0-9]+$ ]]; then
		REPLY=$(($2 - $1))
	else
		REPLY=-
	fi
}

# load MODE: our driver loaded with sqcq=0 or 1, LUN 0 visible as $DISK,
# $DBG its debugfs directory; the negotiated mode checked.
declare -A mode_ok
load() {
	local mode=$1 want=0 got
	[ "$mode" = sqcq ] && want=1
	# shellcheck disable=SC2086 # parameters, split on purpose
	if ! insmod "$KO" sqcq=$want ${E2E_GUEST_PARAMS:-}; then
		fail "$mode insmod"
		return 1
	fi
	if ! wait_for 30 bound || ! wait_for 30 scsi_host "$SLOT_A"; then
		fail "$mode driver bound"
		rmmod virtio_scsi_sqcq
		return 1
	fi
	echo "0 $TPGT 0" >"/sys/class/scsi_host/$REPLY/scan"
	if ! wait_for 60 disk; then
		fail "$mode disk visible"
		rmmod virtio_scsi_sqcq
		return 1
	fi
	vdev "$SLOT_A"
	DBG=/sys/kernel/debug/virtio_scsi_sqcq/${REPLY##*/}
	dbg_value "$DBG" mode
	got=$REPLY
	if [ "$got" != "$mode" ]; then
		fail "$mode mode-negotiated (got $got)"
		mode_ok[$mode]=no
	elif [ -z "${mode_ok[$mode]:-}" ]; then
		mode_ok[$mode]=yes
	fi
}

# guest_why: REPLY = the guest poller's "IDLE CONTENDED STOLEN IRQ_ONLY"
# (its sleeps by reason, and the interrupts that left it asleep).
guest_why() {
	dbg_snapshot "$DBG"
	REPLY="${DBGV[poll_sleeps_idle]:--} ${DBGV[poll_sleeps_contended]:--}"
	REPLY+=" ${DBGV[poll_sleeps_stolen]:--} ${DBGV[poll_irq_only]:--}"
}

# points MODE ROUND: every point once, a result line each.
points() {
	local mode=$1 round=$2 p rw qd nj out st iops e0 b0 e1 b1 ex bz
	local -a l0 l1 g0 g1
	local why i
	for p in $POINTS; do
		IFS=: read -r rw qd nj <<<"$p"
		l1_stat
		read -ra l0 <<<"$REPLY"
		e0=${l0[0]} b0=${l0[1]}
		guest_why
		read -ra g0 <<<"$REPLY"
		queue_sums "$DBG"
		r0=$REQS k0=$KICKS i0=$IRQS
		out=/tmp/cmp-$mode-$rw-$qd-$nj.terse
		timeout -k 5 $((RT + 60)) fio --minimal --name=cmp --filename="$DISK" \
			--ioengine=libaio --direct=1 --rw="$rw" --bs=4k --iodepth="$qd" \
			--numjobs="$nj" --group_reporting --time_based --runtime="$RT" \
			--size=16m --randrepeat=0 >"$out" 2>/dev/null
		st=$?
		queue_sums "$DBG"
		guest_why
		read -ra g1 <<<"$REPLY"
		l1_stat
		read -ra l1 <<<"$REPLY"
		e1=${l1[0]} b1=${l1[1]}
		why=""
		for i in 2 3 4; do
			delta "${l0[i]:--}" "${l1[i]:--}"
			why+=" $REPLY"
		done
		for i in 0 1 2 3; do
			delta "${g0[i]}" "${g1[i]}"
			why+=" $REPLY"
		done
		delta "$e0" "$e1"
		ex=$REPLY
		delta "$b0" "$b1"
		bz=$REPLY
		# Terse v3: field 8 read IOPS, field 49 write IOPS.
		IFS=';' read -ra f <"$out"
		iops=${f[7]:-0}
		[ "$rw" = randwrite ] && iops=${f[48]:-0}
		if [ "$st" != 0 ] || [ "${iops:-0}" = 0 ]; then
			fail "$mode fio $rw qd$qd jobs$nj round $round (status $st)"
			continue
		fi
		echo "cmp $mode $rw $qd $nj $iops $((REQS - r0)) $((KICKS - k0)) $((IRQS - i0)) $ex $bz $round$why"
	done
}

# idle_sample: the CPU time of the idle poll threads (guest here, host in
# L1 on request) once they reached their idle timeout.
idle_sample() {
	local pid="" s c a b ticks s0
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
	: >"$SQCQ_RESULTS/hotplug-idle.req"
	if wait_for $((IDLE_S + 30)) test -e "$SQCQ_RESULTS/hotplug-idle.done"; then
		read -r ans <"$SQCQ_RESULTS/hotplug-idle.done"
		echo "cmp-idle host $ans $IDLE_S"
	else
		fail "sqcq host idle sample (L1 did not answer)"
	fi
}

for ((round = 1; round <= ROUNDS; round++)); do
	order="classic sqcq"
	[ $((round % 2)) = 0 ] && order="sqcq classic"
	for mode in $order; do
		load "$mode" || continue
		points "$mode" "$round"
		[ "$mode" = sqcq ] && [ "$round" = "$ROUNDS" ] && idle_sample
		rmmod virtio_scsi_sqcq || fail "$mode rmmod"
	done
done
for mode in classic sqcq; do
	[ "${mode_ok[$mode]:-}" = yes ] && pass "$mode mode-negotiated ($mode, every round)"
done
echo "compare-l2: $fails failed" >&2
[ "$fails" = 0 ]
