#!/bin/bash
# Classic vs SQ/CQ in the nested guest: runs in L2, started by
# tests/e2e/l1.sh (E2E_L2_SCRIPT) on top of our host backend, with our guest
# driver loaded twice in one boot: sqcq=0 (classic: kicks and interrupts)
# and sqcq=1 (SQ/CQ doorbells; pollers where poll_cpu gives them CPUs).
#
# Usage: compare-l2.sh GUEST LABEL KO   (the arguments l1.sh gives any L2
#        script; GUEST must be sqcq)
# Environment: E2E_SLOT_A, E2E_TPGT (l1.sh), CMP_RUNTIME (s per point,
# default 5), CMP_POINTS (default "randread:1:1 randread:32:1 randwrite:1:1
# randwrite:32:1 randread:32:4"; rw:iodepth:jobs), CMP_ROUNDS (default 5),
# CMP_ROUND0 (the number of the first round less one, default 0),
# CMP_IDLE_S (seconds the idle poller CPU is sampled, default 3),
# E2E_GUEST_PARAMS (more insmod parameters for both modes), CMP_MODES
# (default "classic sqcq"; "haltpoll" adds the peer below).
#
# Mode intree: Debian's own pair, the in-tree virtio_scsi on the second
# device (E2E_SLOT_B), whose backend in L1 is the in-tree vhost_scsi
# (tests/e2e/l1.sh sets it up when CMP_MODES names intree).  Its driver
# binds both devices, as ours does in the other modes; only the device of
# the mode carries I/O, the other is not scanned.  That driver has no
# counters: requests from the disk's /sys/block statistics, interrupts
# from /proc/interrupts (its request vectors), kicks not known ("-").
#
# Mode cross: our driver classic (sqcq=0) on the in-tree host, the second
# device (E2E_SLOT_B, needs intree among the modes): beside classic (our
# pair) and intree (Debian's) it says which side a difference between the
# pairs comes from.  Counted as classic is, from the driver's debugfs of
# that device.
#
# Mode haltpoll: classic (sqcq=0) with guest halt-polling, what an operator
# turns on today to cut the cost of a vCPU's wakeup.  L2 boots with the
# cpuidle-haltpoll driver (compare.sh puts cpuidle_haltpoll.force=1 on its
# command line: the nested guest has no KVM_HINTS_REALTIME; Debian builds
# the driver in, and its haltpoll governor not at all, so the menu governor
# chooses between polling and halting).  Its polling state (state0, "POLL")
# is enabled for this mode only and disabled for the others, which then
# halt as without the driver.
#
# CMP_ROUNDS rounds, each loading the driver once per mode, in alternating
# order (classic first in odd rounds, SQ/CQ first in even ones), so that a
# drift of the machine hits both modes alike.  For each point: fio 4 KiB
# direct on the vhostfd device's LUN 0, libaio, or io_uring with --hipri
# where the point says "hipri" (rw:iodepth:jobs:hipri: the waiting task
# polls a poll queue, which needs the driver's poll_queues; its name in
# the result lines is "RW/hipri"); IOPS from fio; kicks and
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
# the point; "-" where not known),
# "cmp-exits MODE RW QD JOBS ROUND IOS REASON=DELTA ..." (L1's VM exits of
# the point by reason, bench/l1-exits.sh run by l1.sh on request; reasons
# without exits left out; no line when L1 did not answer)
# and "cmp-idle ..." on stdout for bench/compare.sh, which makes the tables,
# and "PASS:/FAIL: compare ..." for what must hold (mode negotiated, fio
# ran, and after every point: still the mode loaded, the SQ/CQ doorbells
# used in SQ/CQ mode and never in classic).  A point that failed that check
# prints its lines with MODE "sqcq-fallback" or "classic-notclassic":
# compare.sh leaves them out of the medians and names them.  Nothing here
# asserts a timing.
set -uo pipefail
GUEST=${1:?GUEST}
KO=${3:?KO}
SLOT_A=${E2E_SLOT_A:?}
TPGT=${E2E_TPGT:?}
RT=${CMP_RUNTIME:-5}
POINTS=${CMP_POINTS:-randread:1:1 randread:32:1 randwrite:1:1 randwrite:32:1 randread:32:4}
IDLE_S=${CMP_IDLE_S:-3}
ROUNDS=${CMP_ROUNDS:-5}
# Rounds an earlier L1 completed before the emulator broke it (compare.sh):
# these are rounds ROUND0+1 .. ROUND0+ROUNDS.
ROUND0=${CMP_ROUND0:-0}
MODES=${CMP_MODES:-classic sqcq}
PREFIX=compare TAG=compare-l2
# shellcheck source=tests/e2e/l2-lib.sh
. tests/e2e/l2-lib.sh
[ "$GUEST" = sqcq ] || { fail "guest driver must be sqcq (got $GUEST)"; exit 1; }

[ -d /sys/module/sd_mod ] || modprobe -a scsi_mod sd_mod
unbind_intree

# l1_exits: REPLY = L1's VM exits by reason since its first answer,
# "reason=count ..." (bench/l1-exits.sh, run by l1.sh on
# hotplug-exits.req); status 1 when L1 does not answer, or answers
# something else (an error message).  Without an answer to the first
# request (EXITS_OK=0) it asks no more: each would wait 30 s.
EXITS_OK=1
l1_exits() {
	local t
	REPLY=""
	[ "$EXITS_OK" = 1 ] || return 1
	l1_ask exits 30 || { REPLY=""; return 1; }
	for t in $REPLY; do
		[[ "$t" =~ ^[a-z0-9_:]+=[0-9]+$ ]] || { log "l1-exits answered: $REPLY"; REPLY=""; return 1; }
	done
}
# majflt: REPLY = L2's major page faults so far (/proc/vmstat): a nested
# guest short of memory drops the text of its programs and reads it again
# over 9p, work for L1's QEMU threads in the middle of a point.
majflt() {
	local k v
	REPLY=0
	while read -r k v; do
		[ "$k" = pgmajfault ] && { REPLY=$v; return 0; }
	done </proc/vmstat
}
# exits_delta BEFORE AFTER: REPLY = "reason=delta ..." of two l1_exits
# answers, reasons without exits left out (a reason missing from BEFORE
# had none yet); status 1 when they are not one counter's: a reason gone
# or a count gone down (the trigger removed), or the debugfs statistics
# (stat:, counted since boot) on one side only.
exits_delta() {
	local t k v b
	local -A a=()
	REPLY=""
	[ -n "$2" ] || return 1
	if [ -n "$1" ]; then
		[ "${1:0:5}" = stat: ] && [ "${2:0:5}" != stat: ] && return 1
		[ "${1:0:5}" != stat: ] && [ "${2:0:5}" = stat: ] && return 1
	else
		[ "${2:0:5}" != stat: ] || return 1
	fi
	for t in $1; do a[${t%%=*}]=${t#*=}; done
	for t in $2; do
		k=${t%%=*} v=${t#*=}
		b=${a[$k]:-0}
		unset "a[$k]"
		[ "$v" -ge "$b" ] || return 1
		[ "$v" = "$b" ] || REPLY+="${REPLY:+ }$k=$((v - b))"
	done
	[ "${#a[@]}" = 0 ]
}
# delta A B: B - A for numbers, "-" when either is not one.
delta() {
	if [[ "$1" =~ ^[0-9]+$ && "$2" =~ ^[0-9]+$ ]]; then
		REPLY=$(($2 - $1))
	else
		REPLY=-
	fi
}

# haltpoll_state 0|1: the cpuidle polling state of every CPU off or on;
# status 1 (REPLY: why) when the haltpoll driver is not the one in use or
# a CPU has no polling state 0.
haltpoll_state() {
	local d n
	read -r n </sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null
	[ "$n" = haltpoll ] || { REPLY="cpuidle driver '${n:-none}', not haltpoll"; return 1; }
	for d in /sys/devices/system/cpu/cpu[0-9]*/cpuidle/state0; do
		read -r n <"$d/name" 2>/dev/null
		[ "$n" = POLL ] || { REPLY="$d is '$n', not POLL"; return 1; }
		echo $((1 - $1)) >"$d/disable" || { REPLY="cannot write $d/disable"; return 1; }
	done
}

# intree_irqs SLOT: REPLY = the interrupts of the request vectors of the
# virtio device under SLOT (/proc/interrupts, "virtioN-request"), summed
# over the CPUs.
intree_irqs() {
	local name line f n=0
	local -a a
	vdev "$1" || return 1
	name="${REPLY##*/}-request"
	while read -r line; do
		[[ "$line" == *" $name"* ]] || continue
		read -ra a <<<"$line"
		for f in "${a[@]:1}"; do
			[[ "$f" =~ ^[0-9]+$ ]] || break
			n=$((n + f))
		done
	done </proc/interrupts
	REPLY=$n
}
# disk_ios DISK: REPLY = the reads and writes completed on DISK.
disk_ios() {
	local -a a
	read -ra a <"/sys/block/${1#/dev/}/stat" || return 1
	REPLY=$((a[0] + a[4]))
}
# load_intree: the in-tree virtio_scsi loaded, bound to the device of slot
# B, its LUN 0 visible as $DISK; DBG empty.
load_intree() {
	local v
	DBG=""
	if [ -z "${E2E_SLOT_B:-}" ]; then
		fail "intree: no in-tree device in L2 (E2E_SLOT_B empty)"
		return 1
	fi
	if ! modprobe virtio_scsi; then
		fail "intree modprobe virtio_scsi"
		return 1
	fi
	if ! wait_for 30 intree_bound || ! wait_for 30 scsi_host "$E2E_SLOT_B"; then
		fail "intree driver bound"
		rmmod virtio_scsi
		return 1
	fi
	echo "0 $TPGT 0" >"/sys/class/scsi_host/$REPLY/scan"
	if ! wait_for 60 lun0_disk "$E2E_SLOT_B"; then
		fail "intree disk visible"
		rmmod virtio_scsi
		return 1
	fi
	[ -n "${mode_ok[intree]:-}" ] || mode_ok[intree]=yes
	for v in /sys/bus/virtio/drivers/virtio_scsi_sqcq/virtio*; do
		[ -e "$v" ] && { fail "intree: $v bound to our driver as well"; mode_ok[intree]=no; }
	done
	return 0
}
# intree_bound: the device of slot B is bound to the in-tree virtio_scsi.
intree_bound() { vdev "$E2E_SLOT_B" && [ -e "/sys/bus/virtio/drivers/virtio_scsi/${REPLY##*/}" ]; }
# unload MODE: the driver of MODE removed.
unload() {
	if [ "$1" = intree ]; then
		rmmod virtio_scsi || fail "$1 rmmod"
	else
		rmmod virtio_scsi_sqcq || fail "$1 rmmod"
	fi
}
# counters MODE: REQS KICKS IRQS DBS SAVED of the mode's device (queue_sums
# for our driver; for the in-tree one the disk's I/Os and the request
# vectors' interrupts, no kicks, doorbells or saved kicks).
counters() {
	if [ "$1" = intree ]; then
		disk_ios "$DISK"
		REQS=$REPLY KICKS=0 DBS=0 SAVED=0
		intree_irqs "$E2E_SLOT_B"
		IRQS=$REPLY
	else
		queue_sums "$DBG"
	fi
}

# load MODE: our driver loaded with sqcq=0 or 1 (or the in-tree one, mode
# intree), LUN 0 visible as $DISK, $DBG its debugfs directory; the
# negotiated mode checked.
declare -A mode_ok
load() {
	local mode=$1 want=0 got expect=$1 slot=$SLOT_A
	[ "$mode" = sqcq ] && want=1
	[ "$mode" = haltpoll ] && expect=classic
	if [ "$mode" = cross ]; then
		expect=classic slot=${E2E_SLOT_B:-}
		[ -n "$slot" ] || { fail "cross: no in-tree device in L2 (E2E_SLOT_B empty)"; return 1; }
	fi
	# Halt-polling for the haltpoll mode alone.
	if [[ " $MODES " == *" haltpoll "* ]]; then
		local hp=0
		[ "$mode" = haltpoll ] && hp=1
		if ! haltpoll_state $hp; then
			fail "$mode: guest halt-polling cannot be set ($REPLY)"
			return 1
		fi
	fi
	[ "$mode" = intree ] && { load_intree; return; }
	# shellcheck disable=SC2086 # parameters, split on purpose
	if ! insmod "$KO" sqcq=$want ${E2E_GUEST_PARAMS:-}; then
		fail "$mode insmod"
		return 1
	fi
	if ! wait_for 30 sqcq_bound || ! wait_for 30 scsi_host "$slot"; then
		fail "$mode driver bound"
		rmmod virtio_scsi_sqcq
		return 1
	fi
	echo "0 $TPGT 0" >"/sys/class/scsi_host/$REPLY/scan"
	if ! wait_for 60 lun0_disk "$slot"; then
		fail "$mode disk visible"
		rmmod virtio_scsi_sqcq
		return 1
	fi
	vdev "$slot"
	DBG=/sys/kernel/debug/virtio_scsi_sqcq/${REPLY##*/}
	dbg_value "$DBG" mode
	got=$REPLY
	if [ "$got" != "$expect" ]; then
		fail "$mode mode-negotiated (got $got)"
		mode_ok[$mode]=no
	elif [ -z "${mode_ok[$mode]:-}" ]; then
		mode_ok[$mode]=yes
	fi
}

# guest_why: REPLY = the guest poller's "IDLE CONTENDED STOLEN IRQ_ONLY"
# (its sleeps by reason, and the interrupts that left it asleep).
guest_why() {
	[ -n "$DBG" ] || { REPLY="- - - -"; return; }
	dbg_snapshot "$DBG"
	REPLY="${DBGV[poll_sleeps_idle]:--} ${DBGV[poll_sleeps_contended]:--}"
	REPLY+=" ${DBGV[poll_sleeps_stolen]:--} ${DBGV[poll_irq_only]:--}"
}

# points MODE ROUND: every point once, a result line each; after each the
# mode checked again (see still_mode).
declare -A points_bad points_ok
points() {
	local mode=$1 round=$2 p rw qd nj out st iops e0 b0 e1 b1 ex bz
	local -a l0 l1 g0 g1
	local why i x0 xd tag kk m0 mf
	local eng name engine
	for p in $POINTS; do
		IFS=: read -r rw qd nj eng <<<"$p"
		name=$rw engine=(--ioengine=libaio)
		if [ "${eng:-}" = hipri ]; then
			name=$rw/hipri engine=(--ioengine=io_uring --hipri)
		fi
		l1_stat
		read -ra l0 <<<"$REPLY"
		e0=${l0[0]} b0=${l0[1]}
		guest_why
		read -ra g0 <<<"$REPLY"
		counters "$mode"
		r0=$REQS k0=$KICKS i0=$IRQS d0=$DBS s0=$SAVED
		# Exits by reason: sampled right around fio, the handshake
		# (L1 looks every 0.5 s) adds an idle second or so to each side.
		x0=-
		l1_exits && x0=$REPLY
		out=/tmp/cmp-$mode-${name/\//-}-$qd-$nj.terse
		majflt
		m0=$REPLY
		[ "${CMP_PERF:-0}" != 0 ] && ask_l1 perfon "$mode-${name/\//-}-$qd-$nj-r$round"
		timeout -k 5 $((RT + 60)) fio --minimal --name=cmp --filename="$DISK" \
			"${engine[@]}" --direct=1 --rw="$rw" --bs=4k --iodepth="$qd" \
			--numjobs="$nj" --group_reporting --time_based --runtime="$RT" \
			--size=16m --randrepeat=0 >"$out" 2>/dev/null
		st=$?
		[ "${CMP_PERF:-0}" != 0 ] && ask_l1 perfoff
		majflt
		mf=$((REPLY - m0))
		xd=""
		if [ "$x0" != - ] && l1_exits && exits_delta "$x0" "$REPLY"; then
			xd=$REPLY
		fi
		counters "$mode"
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
			fail "$mode fio $name qd$qd jobs$nj round $round (status $st)"
			continue
		fi
		tag=$mode
		if ! still_mode "$mode" $((DBS - d0)) $((SAVED - s0)); then
			if [ "$mode" = sqcq ]; then
				fail "$mode $name qd$qd jobs$nj round $round: fell back ($REPLY)"
				tag=sqcq-fallback
			else
				fail "$mode $name qd$qd jobs$nj round $round: not classic ($REPLY)"
				tag=$mode-notclassic
			fi
			points_bad[$mode]=$((${points_bad[$mode]:-0} + 1))
		else
			points_ok[$mode]=$((${points_ok[$mode]:-0} + 1))
		fi
		kk=$((KICKS - k0))
		[ "$mode" = intree ] && kk=-
		echo "cmp $tag $name $qd $nj $iops $((REQS - r0)) $kk $((IRQS - i0)) $ex $bz $round$why"
		[ -z "$xd" ] || echo "cmp-exits $tag $name $qd $nj $round $((REQS - r0)) $xd"
		echo "cmp-faults $tag $name $qd $nj $round $((REQS - r0)) $mf"
	done
}

# still_mode MODE DOORBELLS SAVED: the point just run was MODE's.  Its
# debugfs mode is still MODE, and in SQ/CQ mode, where the host polls
# (CMP_HOST_POLLS=1: poll_cpu given to it), a doorbell carried work
# (DOORBELLS: CQ index moves the guest poller found, SAVED: requests
# published on the SQ doorbell without a kick, both over the point): the
# sum, as at QD1 under TCG either may stay near 0 for a point while the
# other's poller sleeps.  Without a poll CPU the host serves what is
# kicked (docs/sqcq.md), and a QD1 point saves no kick.  In classic mode
# neither moves.  Else status 1, REPLY = what was seen.
still_mode() {
	local mode=$1 dbs=$2 saved=$3 now why
	if [ "$mode" = intree ]; then
		REPLY="slot B not bound to virtio_scsi any more"
		intree_bound
		return
	fi
	dbg_value "$DBG" mode
	now=$REPLY
	dbg_value "$DBG" classic_why
	why=$REPLY
	REPLY="mode $now, classic_why $why, doorbells +$dbs, kicks saved +$saved"
	if [ "$mode" = sqcq ]; then
		[ "$now" = sqcq ] && { [ "${CMP_HOST_POLLS:-0}" = 0 ] || [ $((dbs + saved)) -gt 0 ]; }
	else
		[ "$now" = classic ] && [ "$dbs" = 0 ] && [ "$saved" = 0 ]
	fi
}

# idle_sample: the CPU time of the idle poll threads (guest here, host in
# L1 on request) once they reached their idle timeout.
idle_sample() {
	local pid="" s c a b ticks s0
	for s in /proc/[0-9]*/comm; do
		read -r c <"$s" 2>/dev/null || continue
		[[ "$c" == sqcq-poll-* ]] && { pid=${s#/proc/}; pid=${pid%/comm}; break; }
	done
	dbg_value "$DBG" poll_thread
	if [ -z "$pid" ] && [ "$REPLY" = none ]; then
		echo "cmp-idle guest none $IDLE_S"
	elif [ -n "$pid" ]; then
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
	if l1_ask idle $((IDLE_S + 30)); then
		echo "cmp-idle host $REPLY $IDLE_S"
	else
		fail "sqcq host idle sample (L1 did not answer)"
	fi
}

# The first request installs L1's exit histogram (bench/l1-exits.sh):
# it counts from here, before the first point.
if ! l1_exits; then
	log "L1 gave no exits by reason (hotplug-exits.req): no cmp-exits lines"
	EXITS_OK=0
fi
read -ra modes <<<"$MODES"
for ((round = ROUND0 + 1; round <= ROUND0 + ROUNDS; round++)); do
	# Each round starts one mode further on: every mode runs first, in the
	# middle and last alike (two modes: classic first in odd rounds).
	order=""
	for ((i = 0; i < ${#modes[@]}; i++)); do
		order+=" ${modes[(round - 1 + i) % ${#modes[@]}]}"
	done
	for mode in $order; do
		load "$mode" || continue
		points "$mode" "$round"
		[ "$mode" = sqcq ] && [ "$round" = $((ROUND0 + ROUNDS)) ] && idle_sample
		unload "$mode"
	done
done
for mode in $MODES; do
	[ "${mode_ok[$mode]:-}" = yes ] && pass "$mode mode-negotiated ($mode, every round)"
	[ "${points_ok[$mode]:-0}" -gt 0 ] && [ "${points_bad[$mode]:-0}" = 0 ] &&
		pass "$mode stayed $mode (${points_ok[$mode]} points: mode and doorbells read after each)"
done
echo "compare-l2: $fails failed" >&2
[ "$fails" = 0 ]
