#!/bin/bash
# Runs INSIDE the test VM as root (tests/host/limits.sh starts it).
# Usage: limits-inside.sh KO VHOSTIO CLIENT
#
#  0. the worker ioctls (host client "workers"): where workers are
#     kthreads, an owner gets NVQS + 2 x the possible CPUs of them, all its
#     devices together, then EAGAIN;
#
# What the host's worker allocates for a request in flight (the command,
# its page array and scatterlist) is charged to the memory cgroup of the
# device's owner, whatever the worker is: a thread of the owner (6.11+) or
# a kthread (5.10, 6.1), which the memory controller charges to nobody
# unless it is told the cgroup (docs/host-vhost-core.md).
#
#  1. LUN 0 on a null_blk disk that completes every request 3 s after it
#     came, through LIO's iblock backstore;
#  2. vhost-io, the VMM, in a memory cgroup of its own: 16 queues, 64
#     requests each (1024 in flight), and 2 s after it published them the
#     cgroup's slab bytes must have grown by at least 512 bytes a request
#     (a command alone is bigger), none of them completed yet;
#  3. the requests complete, the run ends clean;
#  4. with max_inflight=256 the same run gets BUSY for all but 256 of them
#     and the slab grows for 256 only;
#  5. the cgroup goes, rmmod.
set -u
KO=${1:?KO} IO=${2:?VHOSTIO} CLIENT=${3:?CLIENT}
MOD=vhost_scsi_sqcq
FAB=vhost_sqcq
W=naa.5001405000000e01
C=/sys/kernel/config/target
CG=/sys/fs/cgroup
MEMCG=$CG/sqcq-inflight
NQ=16 DEPTH=64 PER_REQ=512
PREFIX=limits
# shellcheck source=tests/lib/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
# shellcheck source=tests/lib/target.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/target.sh"
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

echo "# limits: kernel $(uname -r)"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
check modprobe-target modprobe -a target_core_mod target_core_iblock || exit 1
check insmod insmod "$KO" || exit 1

# ---- 0. worker kthreads per owner ---------------------------------------------------
"$CLIENT" workers /dev/vhost-scsi-sqcq | sed -u "s/^\(PASS\|FAIL\): /\1: $PREFIX /"
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
if ! grep -qw cgroup2 /proc/filesystems; then
	echo "SKIP: $PREFIX requests-in-flight-charged-to-the-owner (no cgroup support in $(uname -r))"
	rmmod $MOD
	exit $((fails > 0))
fi

# ---- 1. a LUN that answers after 3 s --------------------------------------------
# One hardware queue deep enough for every request, no I/O scheduler.
check modprobe-null-blk modprobe null_blk nr_devices=1 queue_mode=2 irqmode=2 \
	completion_nsec=3000000000 hw_queue_depth=2048 submit_queues=2 gb=1 || exit 1
echo none >/sys/block/nullb0/queue/scheduler 2>/dev/null
BS=$C/core/iblock_0/slow
ok=1
check target-tpg sqcq_target_tpg $FAB $W 1 0 1 || ok=0
if [ "$ok" = 1 ]; then
	{ mkdir -p $BS && echo udev_path=/dev/nullb0 >$BS/control &&
	  echo 1 >$BS/enable && mkdir $C/$FAB/$W/tpgt_1/lun/lun_0 &&
	  ln -s $BS $C/$FAB/$W/tpgt_1/lun/lun_0/backstore; } ||
		{ fail "target-slow-lun (iblock on /dev/nullb0)"; ok=0; }
	[ "$ok" = 0 ] || pass "target-slow-lun (iblock on /dev/nullb0, 3 s a request)"
fi

# ---- 2. requests in flight charged to the owner's cgroup ---------------------------
if [ "$ok" = 1 ] && { grep -qs "^[^ ]* $CG cgroup2 " /proc/mounts || mount -t cgroup2 none $CG; } &&
	echo "+memory" >$CG/cgroup.subtree_control && mkdir -p $MEMCG; then
	# shellcheck disable=SC2016
	out=$(sh -c 'echo $$ >'"$MEMCG"'/cgroup.procs && exec "$0" "$@"' "$IO" \
		/dev/vhost-scsi-sqcq $W -q $NQ -d $DEPTH -n $((NQ * DEPTH)) -m read -M 2000 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# vhost-io: /'
	line=$(echo "$out" | grep '^memcg ')
	s0=$(field slab_before "$line") s1=$(field slab_inflight "$line")
	done_early=$(field completed "$line")
	want=$((NQ * DEPTH * PER_REQ))
	if [ -z "$s0" ] || [ "${s0:-0}" -lt 0 ] || [ "${s1:-0}" -lt 0 ]; then
		fail "requests-in-flight-charged-to-the-owner (no slab count in memory.stat: '$line')"
	else
		echo "# limits: slab $s0 -> $s1 bytes (+$((s1 - s0)), want >= $want) with $((NQ * DEPTH)) requests published, $done_early completed"
		check "requests-still-in-flight-when-measured ($done_early of $((NQ * DEPTH)) completed)" \
			[ "${done_early:-1}" = 0 ]
		check "requests-in-flight-charged-to-the-owner (+$((s1 - s0)) bytes of slab for $((NQ * DEPTH)) requests, want >= $want)" \
			[ $((s1 - s0)) -ge "$want" ]
	fi
	check "run-ends-clean (status $rc, $(field ios "$(echo "$out" | grep '^ios=')") I/Os)" [ "$rc" = 0 ]

	# ---- 2b. the device's bound on requests in flight -------------------------------
	# max_inflight=256: of the 1024 requests published at once, the rest
	# are answered BUSY, and the slab grows for 256 (+1 a worker: one
	# worker serves every queue here) at the size measured above.
	per=$(( (s1 - s0) / (NQ * DEPTH) ))
	echo 256 >/sys/module/$MOD/parameters/max_inflight
	# shellcheck disable=SC2016
	out=$(sh -c 'echo $$ >'"$MEMCG"'/cgroup.procs && exec "$0" "$@"' "$IO" \
		/dev/vhost-scsi-sqcq $W -q $NQ -d $DEPTH -n $((NQ * DEPTH)) -m read -M 2000 2>&1)
	echo "$out" | sed 's/^/# vhost-io (max_inflight=256): /'
	line=$(echo "$out" | grep '^memcg ')
	b0=$(field slab_before "$line") b1=$(field slab_inflight "$line")
	busy=$(field errors "$(echo "$out" | grep '^ios=')")
	cap=$(( (256 + 1) * per + 65536 ))
	echo "# limits: max_inflight=256: slab $b0 -> $b1 (+$((b1 - b0)), at most $cap at $per bytes a request), $busy answered BUSY"
	check "max-inflight-bounds-the-device (+$((b1 - b0)) bytes of slab, at most $cap)" \
		[ -n "$b0" -a $((b1 - b0)) -le "$cap" ]
	check "max-inflight-answers-busy ($busy of $((NQ * DEPTH)) requests, want >= $((NQ * DEPTH - 257)))" \
		[ "${busy:-0}" -ge $((NQ * DEPTH - 257)) ]
	echo 16384 >/sys/module/$MOD/parameters/max_inflight
	wait_for 10 rmdir $MEMCG || fail "the client's cgroup removed after it exited"
else
	[ "$ok" = 1 ] && fail "a memory cgroup for the client (cgroup2 with the memory controller)"
fi

# ---- 3. teardown -------------------------------------------------------------------
rm -f $C/$FAB/$W/tpgt_1/lun/lun_0/backstore 2>/dev/null
check target-teardown sqcq_target_teardown $FAB $W
rmdir $BS $C/core/iblock_0 2>/dev/null
rmdir $C/$FAB 2>/dev/null
check rmmod wait_for 30 rmmod $MOD
echo "# limits: $fails failed"
exit $((fails > 0))
