#!/bin/bash
# Guest-module test, run INSIDE the test VM (tests/guest/run.sh boots it) as
# root, with a QEMU virtio-scsi-pci (num_queues=4) carrying two scsi-hd
# disks (target 0 and 1, LUN 0) and, with SQCQ_GUEST_EIO_DISK=T, a third
# one at target T whose QEMU blkdebug layer fails reads of the 4 KiB block
# at 1 MiB and writes of the 4 KiB block at 2 MiB with EIO (run.sh sets it
# up).  Prints one PASS:/FAIL: line per check.
#
# Usage: inside.sh KO
#   KO: path of virtio_scsi_sqcq.ko built for the running kernel
# Environment: SQCQ_RESULTS (host-visible directory; hotplug requests are
# written there for run.sh, which drives the QEMU monitor),
# SQCQ_GUEST_MONITOR=1 (run the monitor-driven parts), SQCQ_GUEST_EIO_DISK,
# SQCQ_GUEST_IO_DIV=N (the verify runs of sections 3, 4, 7 and 8 write 1/N
# of their size and must see 1/N of the completions, and section 9 is left
# out when N > 1: the sanitizer kernel's run, whose I/O is about ten times
# slower, sets 4).
set -u
KO=${1:?KO}
MOD=virtio_scsi_sqcq
DBG=/sys/kernel/debug/$MOD
DRV=/sys/bus/virtio/drivers/$MOD
k=$(uname -r)
PREFIX="guest $k"
# shellcheck source=tests/lib/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
EIO_T=${SQCQ_GUEST_EIO_DISK:-}
# Disks present at bind: targets 0 and 1, plus the error-injecting one.
NDISKS=2
[ -n "$EIO_T" ] && NDISKS=3
DIV=${SQCQ_GUEST_IO_DIV:-1}

log() { echo "guest-test: [${SECONDS}s] $*" >&2; }
# No progress lines: they would share a line with the next PASS:.
# SQCQ_FIO: the lean build run.sh made (tests/lib/fio.sh), else Debian's.
FIO=${SQCQ_FIO:-fio}
fio() { command "$FIO" --eta=never "$@"; }

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
modprobe -a scsi_mod sd_mod 2>/dev/null

# ---- helpers -------------------------------------------------------------
# The virtio device (virtioN) of the virtio-scsi controller.
vdev_name() {
	local d
	for d in /sys/bus/virtio/devices/virtio*; do
		[ "$(cat "$d/device")" = 0x0008 ] && { basename "$d"; return 0; }
	done
	return 1
}
# Our SCSI host number, if bound.
our_host() {
	local h
	for h in /sys/class/scsi_host/host*; do
		[ -e "$h" ] || continue
		[ "$(cat "$h/proc_name" 2>/dev/null)" = $MOD ] &&
			{ echo "${h##*/host}"; return 0; }
	done
	return 1
}
# Block devices of our host whose target is $1 ("" = all), sorted.
our_disks() {
	local h d t=${1:-}
	h=$(our_host) || return 1
	for d in /sys/class/scsi_host/host$h/device/target$h:0:$t*/$h:0:*/block/*; do
		[ -e "$d" ] && echo "/dev/${d##*/}"
	done | sort
}
ndisks() { our_disks | wc -l; }
has_disks() { [ "$(ndisks)" -ge "$1" ]; }
disks_eq() { [ "$(ndisks)" = "$1" ]; }
# queue_sum TYPE COLUMN: sum a column of the queues file over queues of TYPE
# (columns: 4 requests 5 kicks 6 interrupts 7 polls 8 completions).
queue_sum() {
	awk -v t="$1" -v c="$2" 'NR > 1 && $2 == t { s += $c } END { print s + 0 }' \
		"$DBG/$VDEV/queues"
}
info() { awk -v k="$1:" '$1 == k { print $2 }' "$DBG/$VDEV/info"; }
# bind_ours: load the module (params in $@) and wait for all disks.
bind_ours() {
	insmod "$KO" "$@" || return 1
	[ -e "$DRV/$VDEV" ] || return 1
	wait_for 30 has_disks $NDISKS
}
fio_verify() {	# fio_verify NAME ENGINE DEV SIZE [extra fio args]
	local name=$1 engine=$2 dev=$3 size=$4
	shift 4
	fio --name="$name" --filename="$dev" --ioengine="$engine" --direct=1 \
		--rw=randwrite --bssplit=512/25:4k/40:16k/15:64k/12:256k/6:1m/2 \
		--iodepth=32 --size="$size" --verify=crc32c --verify_fatal=1 \
		--do_verify=1 --verify_state_save=0 --output="/tmp/fio-$name.log" "$@"
}
# fio_ends LABEL PID: check that fio PID ends within 120 s (killed if
# not, never waited for unbounded); its exit status in REPLY.
# (Named for fio; any background PID.  One that did not end is killed and
# not waited for: a task stuck in the kernel would keep the wait forever.)
fio_ends() {
	if check "$1" wait_for 120 bash -c "! kill -0 $2 2>/dev/null"; then
		wait "$2"
		REPLY=$?
	else
		kill -9 "$2" 2>/dev/null
		REPLY=137
	fi
}
# A disk node must exist before fio runs: fio would create a plain file.
disk_ready() { wait_for 30 test -b "$1"; }
# io_flowing BASE: more than 200 requests were queued since BASE.
io_flowing() { [ $(($(queue_sum irq 4) + $(queue_sum poll 4) - $1)) -gt 200 ]; }

VDEV=$(vdev_name) || { fail "no virtio-scsi device in the VM"; exit 1; }
log "virtio-scsi device: $VDEV"

# ---- 1. the in-tree driver must let go ------------------------------
log "fio: $FIO ($("$FIO" --version))"
log "section 1: the in-tree driver must let go"
if [ -e /sys/bus/virtio/drivers/virtio_scsi/$VDEV ]; then
	echo "$VDEV" >/sys/bus/virtio/drivers/virtio_scsi/unbind
fi
check "in-tree-virtio_scsi-not-bound" [ ! -e /sys/bus/virtio/drivers/virtio_scsi/$VDEV ]

# ---- 2. bind ours with two poll queues ------------------------------
log "section 2: bind ours with two poll queues"
check "bind poll_queues=2" bind_ours poll_queues=2
check "disks-visible ($(our_disks | tr '\n' ' '))" [ "$(ndisks)" = $NDISKS ]
check "debugfs-device-dir" test -r "$DBG/$VDEV/queues" -a -r "$DBG/$VDEV/info"
check "debugfs-params-still-there" grep -q '^poll_queues: 2$' "$DBG/params"
check "queues: 4 request = 2 interrupt + 2 poll" bash -c \
	"[ '$(info request_queues)' = 4 ] && [ '$(info interrupt_queues)' = 2 ] &&
	 [ '$(info poll_queues)' = 2 ]"
DISK_A=$(our_disks 0 | head -n 1)
DISK_B=$(our_disks 1 | head -n 1)
log "disks: $DISK_A $DISK_B"
both_ready() { disk_ready "$DISK_A" && disk_ready "$DISK_B"; }
check "disk-nodes" both_ready
check "io_poll-enabled" [ "$(cat /sys/block/${DISK_A#/dev/}/queue/io_poll 2>/dev/null)" = 1 ]
# Upstream parity: a queue depth above the device's cmd_per_lun is capped.
qd_file=/sys/block/${DISK_A#/dev/}/device/queue_depth
cpl=$(info cmd_per_lun)
qd_old=$(cat "$qd_file")
echo $((cpl + 8)) >"$qd_file" 2>/dev/null
check "queue-depth-capped-at-cmd_per_lun ($(cat "$qd_file") <= $cpl)" [ "$(cat "$qd_file")" -le "$cpl" ]
echo "$qd_old" >"$qd_file"
# QEMU's own virtio-scsi does not know the SQ/CQ setup request (sqcq=1 is
# the default): the device stays classic, with the one line saying why.
check "sqcq-fallback-classic (QEMU virtio-scsi: mode $(info mode))" [ "$(info mode)" = classic ]
check "sqcq-fallback-log-line" bash -c "dmesg | grep -q 'SQ/CQ not available'"

# ---- 3. data integrity, libaio and io_uring, 512 B .. 1 MiB ---------
log "section 3: data integrity, libaio and io_uring, 512 B .. 1 MiB"
req0=$(( $(queue_sum irq 8) + $(queue_sum poll 8) ))
fio_verify libaio libaio "$DISK_A" $((64 / DIV))m &
p1=$!
fio_verify io_uring io_uring "$DISK_B" $((64 / DIV))m &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
check "fio-libaio-verify-crc32c" [ $r1 = 0 ]
check "fio-io_uring-verify-crc32c" [ $r2 = 0 ]
[ $r1 = 0 ] && [ $r2 = 0 ] || tail -n 20 /tmp/fio-libaio.log /tmp/fio-io_uring.log
ios=$(( $(queue_sum irq 8) + $(queue_sum poll 8) - req0 ))
log "request-queue completions during the verify run: $ios"
check "at-least-$((10000 / DIV))-ios ($ios)" [ "$ios" -ge $((10000 / DIV)) ]
check "interrupt-queues-got-interrupts" [ "$(queue_sum irq 6)" -gt 0 ]
check "poll-queues-idle-without-hipri" [ "$(queue_sum poll 8)" = 0 ]

# ---- 4. polled I/O: io_uring --hipri completes on poll queues, no IRQ ---
log "section 4: polled I/O: io_uring --hipri completes on poll queues, no IRQ"
pc0=$(queue_sum poll 8)
fio --name=hipri --filename="$DISK_A" --ioengine=io_uring --hipri=1 \
	--direct=1 --rw=randwrite --bssplit=4k/70:64k/30 --iodepth=8 \
	--size=$((24 / DIV))m --verify=crc32c --verify_fatal=1 --do_verify=1 \
	--verify_state_save=0 --output=/tmp/fio-hipri.log
r=$?
check "fio-io_uring-hipri-verify" [ $r = 0 ]
pc=$(( $(queue_sum poll 8) - pc0 ))
log "poll-queue completions: $pc; poll-queue interrupts: $(queue_sum poll 6); polls: $(queue_sum poll 7)"
cat "$DBG/$VDEV/queues" >&2
check "poll-queues-completed-io ($pc)" [ "$pc" -ge $((1000 / DIV)) ]
check "poll-queues-zero-interrupts" [ "$(queue_sum poll 6)" = 0 ]
check "poll-queues-polled" [ "$(queue_sum poll 7)" -gt 0 ]
# The operator's view (virtio-sqcq-stat): this controller, its mode and
# why classic (QEMU's own virtio-scsi offers no SQ/CQ), the requests so
# far and the share completed by polling.
# It reads sysfs, not debugfs: run in a mount namespace without debugfs.
STAT=$(dirname "${BASH_SOURCE[0]}")/../../switch/virtio-sqcq-stat
st=$(unshare -m sh -c "umount -l /sys/kernel/debug && ! [ -e /sys/kernel/debug/virtio_scsi_sqcq ] && '$STAT'" 2>&1)
echo "$st" >&2
stat_line=$(echo "$st" | awk -v d="$VDEV" '$1 == d')
read -r _ s_host s_mode s_why s_req _ _ s_polled _ <<<"$stat_line"
# The --hipri run above completed on the poll queues: a share above 0,
# never above 100 %.
stat_ok() {
	[ "${s_host:-}" = "host$(sed -n 's/^host: //p' "$DBG/$VDEV/info")" -a "${s_mode:-}" = classic \
		-a "${s_why:--}" != - -a "${s_req:-0}" -gt 0 ] &&
		awk -v p="${s_polled:--}" 'BEGIN { exit !(p + 0 > 0 && p + 0 <= 100) }'
}
check "virtio-sqcq-stat (no debugfs): $VDEV shown, classic and why, requests and polled share ($stat_line)" stat_ok
check "virtio-sqcq-stat -w 1 -c 1: an interval's rates after the totals" \
	bash -c "'$STAT' -w 1 -c 1 | grep -c '^device .* req/s ' | grep -qx 1"

# ---- 4b. the stable view: sysfs sqcq_* of the SCSI host, tracepoints ---
# docs/observability.md: /sys/class/scsi_host/hostN/sqcq_* say what
# debugfs says: this controller classic and why (QEMU's own virtio-scsi),
# no poll thread, the request queues' counters equal to debugfs's sums
# while idle, grown with a verify run, the poll queues' completions of the
# --hipri run as sqcq_polled.  The module's tracepoints go on in tracefs
# here; the probe at the rebind of section 7 must log its sqcq_classic.
log "section 4b: sysfs sqcq_* and tracepoints"
H=/sys/class/scsi_host/host$(our_host)
# sys NAME: sysfs file sqcq_NAME of our host.
sys() { cat "$H/sqcq_$1" 2>/dev/null; }
dinfo() { awk -v k="$1:" '$1 == k { sub(/^[^:]*: /, ""); print }' "$DBG/$VDEV/info"; }
# req_sum COLUMN: the request queues' (interrupt and poll) sum of COLUMN.
req_sum() { echo $(($(queue_sum irq "$1") + $(queue_sum poll "$1"))); }
sys_eq_dbg() {
	[ "$(sys requests)" = "$(req_sum 4)" ] && [ "$(sys kicks)" = "$(req_sum 5)" ] &&
		[ "$(sys interrupts)" = "$(req_sum 6)" ] && [ "$(sys completions)" = "$(req_sum 8)" ] &&
		[ "$(sys polled)" = "$(queue_sum poll 8)" ] && [ "$(sys doorbells)" = 0 ]
}
sys_line() {
	local f
	for f in mode classic_why poll_thread requests kicks kicks_saved interrupts completions doorbells polled poll_sleeps poll_wakeups; do
		printf '%s=%s ' "$f" "$(sys $f | tr ' ' _)"
	done
}
log "sysfs: $(sys_line)"
check "sysfs: mode classic, why as debugfs ('$(sys classic_why)'), no poll thread" \
	[ "$(sys mode)" = classic -a "$(dinfo mode)" = classic -a \
	"$(sys classic_why)" = "not supported by the device" -a \
	"$(sys classic_why)" = "$(dinfo classic_why)" -a "$(sys poll_thread)" = none ]
check "sysfs: counters equal debugfs's sums (requests $(sys requests), polled $(sys polled) > 0)" \
	eval 'wait_for 10 sys_eq_dbg && [ "$(sys polled)" -gt 0 ] && [ "$(sys requests)" -gt 0 ]'
r0=$(sys requests) i0=$(sys interrupts) c0=$(sys completions)
check "sysfs: a verify run" fio_verify sysfs libaio "$DISK_A" 4m
check "sysfs: requests, interrupts, completions grew with it ($r0 -> $(sys requests), $i0 -> $(sys interrupts), $c0 -> $(sys completions)) and equal debugfs's" \
	eval '[ "$(sys requests)" -gt "$r0" ] && [ "$(sys interrupts)" -gt "$i0" ] &&
		[ "$(sys completions)" -ge $((c0 + $(sys requests) - r0)) ] && wait_for 10 sys_eq_dbg'
TR=/sys/kernel/tracing
[ -d $TR/events ] || mount -t tracefs nodev $TR 2>/dev/null
tracing=no
if [ -d $TR/events/$MOD ]; then
	echo >$TR/trace
	echo 1 >$TR/events/$MOD/enable && echo 1 >$TR/tracing_on && tracing=yes
else
	echo "SKIP: $PREFIX trace: no tracefs events of $MOD on this kernel"
fi

# ---- 5. injected I/O errors reach fio as EIO, the driver stays usable ---
# The disk at target $EIO_T fails (in QEMU's blkdebug layer, on every try)
# reads of [1 MiB, +4 KiB) and writes of [2 MiB, +4 KiB); QEMU answers a
# CHECK CONDITION, the SCSI midlayer retries and then fails the request.
# Neither the driver nor error handling may turn that into anything else
# (no abort, no reset, no offline disk, no malformed completion).
if [ -n "$EIO_T" ]; then
	log "section 5: injected I/O errors reach fio as EIO"
	BAD_R=1048576 BAD_W=2097152
	DISK_E=$(our_disks "$EIO_T" | head -n 1)
	sde=${DISK_E#/dev/}
	check "eio-disk-node ($DISK_E)" disk_ready "$DISK_E"
	e0=$(dmesg | wc -l)
	eio_log() { dmesg | tail -n +$((e0 + 1)); }
	# fio_eio NAME RW ENGINE OFFSET SIZE [fio args]: a fio run that must
	# end with EIO on the bad block at BAD (read or write, by RW).
	fio_eio() {
		local name=$1 rw=$2 engine=$3 off=$4 size=$5 bad r
		shift 5
		case $rw in *read*) bad=$BAD_R ;; *) bad=$BAD_W ;; esac
		timeout 120 "$FIO" --name="$name" --filename="$DISK_E" \
			--ioengine="$engine" --direct=1 --rw="$rw" --bs=4k \
			--offset="$off" --size="$size" "$@" >"/tmp/fio-$name.log" 2>&1
		r=$?
		log "$name: fio status $r: $(grep -m1 'io_u error' "/tmp/fio-$name.log")"
		if [ $r = 0 ] || [ $r = 124 ] ||
			! grep -q "Input/output error: [a-z]* offset=$bad," "/tmp/fio-$name.log" ||
			! grep -Eq 'err= *5 ' "/tmp/fio-$name.log"; then
			tail -n 15 "/tmp/fio-$name.log" >&2
			return 1
		fi
	}
	# Sequential 4 KiB reads/writes from 4 KiB before the bad block to
	# 8 KiB after it: the first request after the good one fails.
	check "fio-read-eio (libaio, interrupt queue)" \
		fio_eio eio-read read libaio $((BAD_R - 4096)) 16k --iodepth=1
	check "fio-write-eio (libaio, interrupt queue)" \
		fio_eio eio-write write libaio $((BAD_W - 4096)) 16k --iodepth=1
	# The failing command among 31 good ones in flight (random order over
	# 4 MiB, each block once: the bad one comes up exactly once).
	check "fio-randread-qd32-eio (libaio, among 31 in flight)" \
		fio_eio eio-qd32 randread libaio 0 4m --iodepth=32
	pc0=$(queue_sum poll 8)
	check "fio-read-eio (io_uring --hipri, poll queue)" \
		fio_eio eio-hipri read io_uring $((BAD_R - 4096)) 16k --iodepth=1 --hipri=1
	check "eio-hipri-completed-on-poll-queues" [ $(($(queue_sum poll 8) - pc0)) -ge 2 ]
	check "eio-poll-queues-zero-interrupts" [ "$(queue_sum poll 6)" = 0 ]
	eio_log | grep -E "$sde|I/O error" | tail -n 12 >&2
	check "kernel-log-read-error ($sde sector 2048)" \
		bash -c "dmesg | tail -n +$((e0 + 1)) | grep -q 'I/O error, dev $sde, sector 2048 '"
	check "kernel-log-write-error ($sde sector 4096)" \
		bash -c "dmesg | tail -n +$((e0 + 1)) | grep -q 'I/O error, dev $sde, sector 4096 '"
	check "kernel-log-sense-data ($sde)" \
		bash -c "dmesg | tail -n +$((e0 + 1)) | grep -q '\[$sde\].*Sense Key'"
	check "eio-no-error-handling (no abort, no reset)" \
		bash -c "! dmesg | tail -n +$((e0 + 1)) | grep -Eq ' abort$|LUN reset|timed out'"
	check "eio-disk-still-running" [ "$(cat "/sys/block/$sde/device/state")" = running ]
	check "eio-no-bad-completions ($(info bad_completions))" [ "$(info bad_completions)" = 0 ]
	check "io-after-eio-verify (same disk, outside the bad blocks)" \
		fio_verify eio-good libaio "$DISK_E" 8m --offset=8m
	check "io-after-eio-verify (other disks, poll queue)" \
		fio_verify eio-good-a io_uring "$DISK_A" 8m --hipri=1
	check "io-after-eio-verify (other disks, interrupt queue)" \
		fio_verify eio-good-b libaio "$DISK_B" 8m
	check "eio-bad-block-still-fails (the error was not masked)" \
		fio_eio eio-again read libaio "$BAD_R" 4k --iodepth=1
	check "eio-kernel-log-clean" \
		bash -c "! dmesg | tail -n +$((e0 + 1)) | grep -Eq 'Oops|BUG:|WARNING:|Call Trace|general protection'"
fi

# ---- 6. QEMU monitor: hotplug (event queue), throttling (error handling) ---
log "section 6: QEMU monitor: hotplug (event queue), throttling (error handling)"
# monitor_req WHAT: ask run.sh (on the host) to run a monitor command; see
# watch_monitor there for WHAT.
# The request appears whole (written aside, then renamed over the 9p
# share): the host polls for it and must never read a half-written one.
monitor_req() {
	rm -f "$SQCQ_RESULTS/monitor-done"
	echo "$1" >"$SQCQ_RESULTS/monitor-request.new"
	mv "$SQCQ_RESULTS/monitor-request.new" "$SQCQ_RESULTS/monitor-request"
	wait_for 30 test -e "$SQCQ_RESULTS/monitor-done"
}
if [ -n "${SQCQ_RESULTS:-}" ] && [ "${SQCQ_GUEST_MONITOR:-0}" = 1 ]; then
	if monitor_req add; then
		check "hotplug-add-lun (event queue)" wait_for 30 has_disks $((NDISKS + 1))
		monitor_req del
		check "hotplug-remove-lun (event queue)" wait_for 30 disks_eq $NDISKS
		# LUN 300: flat space, numbered 0x4000 + 300 = 16684 as the
		# midlayer's REPORT LUNS scan numbers it, at hotplug and at a
		# rescan alike (no second device for the same LUN).
		h=$(our_host)
		lun_dev() { test -e "/sys/class/scsi_host/host$h/device/target$h:0:2/$h:0:2:$1"; }
		if monitor_req addhi; then
			check "hotplug-lun-300-as-16684" wait_for 30 lun_dev 16684
			echo "- - -" >/sys/class/scsi_host/host$h/scan
			check "rescan-lun-300-no-duplicate" bash -c \
				"[ \$(ls -d /sys/class/scsi_host/host$h/device/target$h:0:2/$h:0:2:* 2>/dev/null | wc -l) = 1 ]"
			monitor_req delhi
			check "hotplug-remove-lun-300" wait_for 30 bash -c "! test -e /sys/class/scsi_host/host$h/device/target$h:0:2/$h:0:2:16684"
		else
			fail "hotplug LUN 300 (host did not answer)"
		fi
	else
		fail "hotplug (host did not answer)"
	fi

	# A stalled backend (docs/error-handling.md: the device owns a command until it
	# returns it).  Disk B is throttled to 2 IOPS and one of its reads is
	# stopped in QEMU's blkdebug layer ("break") for 45 s, under a 3 s SCSI
	# timeout, while fio verifies disk A on the same controller.  The old
	# driver aborted, gave the abort up after 30 s, offlined the disk and
	# finished the command while QEMU still owned it (its data pages,
	# response and tag then reused; the late completion landed in whatever
	# lived there).  Now: no error handling at all, the timer is restarted,
	# disk A keeps verifying, the read completes when the stall ends.
	sdb=${DISK_B#/dev/}
	echo 3 >/sys/block/$sdb/device/timeout
	n0=$(dmesg | wc -l)
	new_log() { dmesg | tail -n +$((n0 + 1)); }
	rm -f /tmp/verify-failed /tmp/verify-stop /tmp/verify-runs
	(
		i=0
		while [ ! -e /tmp/verify-stop ]; do
			i=$((i + 1))
			if fio_verify stallv$i libaio "$DISK_A" 16m; then
				echo ok >>/tmp/verify-runs
			else
				tail -n 20 /tmp/fio-stallv$i.log >&2
				echo "$i" >>/tmp/verify-failed
			fi
		done
	) &
	vp=$!
	tr0=$(info timer_resets) tn0=$(info timeout_notifies)
	if monitor_req throttle && monitor_req stall; then
		fio --name=slow --filename="$DISK_B" --ioengine=libaio --direct=1 \
			--rw=randread --bs=4k --iodepth=16 --number_ios=48 \
			--output=/tmp/fio-slow.log &
		p=$!
		# Longer than the old driver's 3 s timeout + 30 s TMF wait.
		sleep 45
		check "stalled-read-still-owned (fio waits)" kill -0 $p
		check "stall-timer-restarted ($tr0 -> $(info timer_resets))" \
			[ "$(info timer_resets)" -gt "${tr0:-0}" ]
		# Each restart notified the device once more (a request it
		# missed is seen then), docs/error-handling.md.
		check "stall-timeouts-notify ($tn0 -> $(info timeout_notifies))" \
			[ "$(info timeout_notifies)" -gt "${tn0:-0}" ]
		check "stall-no-error-handling (no abort, reset, offline)" \
			bash -c "! dmesg | tail -n +$((n0 + 1)) | grep -Eq ' abort$|LUN reset|offline|timing out command|rejecting I/O'"
		check "stall-disk-running" [ "$(cat /sys/block/$sdb/device/state)" = running ]
		check "stall-resumed" monitor_req resume
		monitor_req unthrottle
		if ! check "stalled-fio-ends" wait_for 120 bash -c "! kill -0 $p 2>/dev/null"; then
			# Never wait on it unbounded: resume once more, then end it.
			monitor_req resume
			kill -9 $p 2>/dev/null
		fi
		wait $p
		r=$?
		check "stalled-fio-succeeded (status $r)" [ $r = 0 ]
		[ $r = 0 ] || tail -n 15 /tmp/fio-slow.log >&2
		touch /tmp/verify-stop
		wait $vp
		check "verify-other-lun-during-stall ($(wc -l </tmp/verify-runs 2>/dev/null || echo 0) runs)" \
			bash -c "[ ! -e /tmp/verify-failed ] && [ \$(wc -l </tmp/verify-runs) -ge 2 ]"
		new_log | grep -E 'abort|reset|sqcq|timed out|offline|still waiting' | tail -n 8 >&2
		check "disk-still-running-after-stall" [ "$(cat /sys/block/$sdb/device/state)" = running ]
		echo 30 >/sys/block/$sdb/device/timeout
		check "io-after-stall-verify" fio_verify afterstall libaio "$DISK_B" 8m
		check "stall-bad-completions ($(info bad_completions))" [ "$(info bad_completions)" = 0 ]
	else
		touch /tmp/verify-stop
		wait $vp
		fail "throttle/stall (host did not answer)"
	fi
fi

# ---- 7. unbind under I/O, bind again --------------------------------
log "section 7: unbind under I/O, bind again"
base=$(($(queue_sum irq 4) + $(queue_sum poll 4)))
fio --name=busy --filename="$DISK_A" --ioengine=libaio --direct=1 \
	--rw=randrw --bs=4k --iodepth=32 --time_based --runtime=60 \
	--output=/tmp/fio-busy.log &
p=$!
check "io-flowing-before-unbind" wait_for 60 io_flowing $base
r=1
echo "$VDEV" >"$DRV/unbind" && r=0
check "unbind-under-io" test $r = 0 -a ! -e "$DRV/$VDEV"
check "fio-ends-after-unbind" wait_for 60 bash -c "! kill -0 $p 2>/dev/null"
wait $p 2>/dev/null
check "debugfs-device-dir-gone" [ ! -e "$DBG/$VDEV" ]
echo "$VDEV" >"$DRV/bind"
check "rebind" wait_for 30 has_disks $NDISKS
DISK_A=$(our_disks 0 | head -n 1)
check "rebind-disk-node" disk_ready "$DISK_A"
check "io-after-rebind" fio_verify rebind libaio "$DISK_A" $((16 / DIV))m
if [ $tracing = yes ]; then
	ev=$(grep -v '^#' $TR/trace | grep ' sqcq_classic: ')
	echo 0 >$TR/events/$MOD/enable
	log "trace: $ev"
	check "trace: the probe of the rebind logged sqcq_classic for host$(our_host), why as sysfs" \
		[ "$(echo "$ev" | grep -c " sqcq_classic: host=$(our_host) why=not supported by the device$")" = 1 ]
	# Setup, teardown, sleeps and wakes need a device with SQ/CQ, which
	# QEMU's own virtio-scsi is not (the e2e stage has both of ours).
	check "trace: no sqcq_setup, poll_sleep or poll_wake for a classic device" \
		[ "$(grep -v '^#' $TR/trace | grep -cE ' (sqcq_setup|poll_sleep|poll_wake): ')" = 0 ]
fi
H=/sys/class/scsi_host/host$(our_host)
check "sysfs: the rebound host's files ($(sys_line))" \
	[ "$(sys mode)/$(sys classic_why)" = "classic/not supported by the device" ]

# ---- 8. rmmod under I/O ---------------------------------------------
log "section 8: rmmod under I/O"
# Whether an open disk pins the module depends on the kernel; both outcomes
# must be clean: refused (the I/O goes on and verifies) or the host goes away
# under the I/O (fio fails and ends, no hang, nothing in the kernel log).
base=$(($(queue_sum irq 4) + $(queue_sum poll 4)))
fio --name=busy2 --filename="$DISK_A" --ioengine=io_uring --direct=1 \
	--rw=randwrite --bs=4k --iodepth=16 --size=$((32 / DIV))m --verify=crc32c \
	--verify_fatal=1 --do_verify=1 --verify_state_save=0 \
	--output=/tmp/fio-busy2.log &
p=$!
check "io-flowing-before-rmmod" wait_for 60 io_flowing $base
# Each outcome is judged by what must follow it, not by which one came.
if rmmod $MOD 2>/dev/null; then
	log "rmmod went through while the disk was open"
	check "rmmod-under-io: fio ends after the host went away" \
		wait_for 60 bash -c "! kill -0 $p 2>/dev/null"
	wait $p 2>/dev/null
	check "rmmod-under-io: fio saw the I/O fail (status $?)" [ $? != 0 ]
else
	log "rmmod refused while the disk was open"
	wait $p
	check "rmmod-under-io: refused, the I/O went on and verified (status $?)" [ $? = 0 ]
	check "rmmod" rmmod $MOD
fi
check "module-gone" [ ! -d /sys/module/$MOD ]
check "debugfs-dir-gone-after-rmmod" [ ! -e "$DBG" ]
check "device-unbound-after-rmmod" [ -z "$(our_host)" ]

# ---- 9. no poll queues: everything on interrupts --------------------
# Not where the I/O is cut down (SQCQ_GUEST_IO_DIV > 1, the sanitizer
# kernel's run, about 100 s there): a second probe without poll queues
# and one more verify, no path the sections above have not taken but the
# queue map without a poll type.
if [ "$DIV" -gt 1 ]; then
	log "section 9 (no poll queues) not run: SQCQ_GUEST_IO_DIV=$DIV"
else
	log "section 9: no poll queues: everything on interrupts"
	check "bind poll_queues=0" bind_ours
	check "queues: 2 interrupt, 0 poll" bash -c \
		"[ '$(info interrupt_queues)' = 2 ] && [ '$(info poll_queues)' = 0 ]"
	DISK_A=$(our_disks 0 | head -n 1)
	disk_ready "$DISK_A"
	check "fio-verify-no-poll-queues" fio_verify nopoll io_uring "$DISK_A" 16m
	check "rmmod-again" rmmod $MOD
fi

# ---- 10. a device that never answers the SQ/CQ setup request ---------
# The driver's test build (tests/faults/guest/: the same source, its fault
# hooks live) drops QEMU's answer to the setup request
# (fault_setup_unanswered=1): to the driver, a device that never answers,
# the one a stock backend could be.  Probe ends after the bounded wait, the
# device classic with the reason in debugfs and its disks usable, the
# teardown queued behind the request answered; the reset at rmmod ends it.
log "section 10: a device that never answers the setup request"
FMOD=virtio_scsi_sqcq_faults
FKO=$(dirname "$KO")/$FMOD.ko
# The SCSI host's proc_name shows at most 19 characters (and NULs after).
# fdisks [TARGET]: its disks (of that target), sorted: the verify runs take
# target 0's, never the error-injecting one (the names follow the scan's
# order: target 3 was sda in one run, and its write at 2 MiB failed).
fdisks() {
	local h d t=${1:-}
	for h in /sys/class/scsi_host/host*; do
		[ "$(tr -d '\0' <"$h/proc_name" 2>/dev/null)" = "${FMOD:0:19}" ] || continue
		for d in "$h"/device/target*:0:$t*/*/block/*; do
			[ -e "$d" ] && echo "/dev/${d##*/}"
		done
	done | sort
}
fhas_disks() { [ "$(fdisks | wc -l)" -ge "$NDISKS" ]; }
finfo() { awk -v k="$1:" '$1 == k { sub(/^[^:]*: /, ""); print }' "/sys/kernel/debug/$FMOD/$VDEV/info"; }
[ ! -d /sys/module/$MOD ] || rmmod $MOD
if check "fault build present ($FKO)" test -f "$FKO"; then
	dmesg -C
	# insmod returns once probe has: never, before the bounded wait.
	if check "probe ends without a setup answer" timeout 120 insmod "$FKO" \
		fault_setup_unanswered=1 poll_queues=0; then
		check "disks of the unanswered device ($NDISKS)" wait_for 30 fhas_disks
		check "classic, why: $(finfo classic_why)" \
			[ "$(finfo mode)/$(finfo classic_why)" = "classic/no answer to the setup request" ]
		fh=$(for h in /sys/class/scsi_host/host*; do
			[ "$(tr -d '\0' <"$h/proc_name" 2>/dev/null)" = "${FMOD:0:19}" ] && echo "$h"
		done | head -n 1)
		check "sysfs: classic, why: $(cat "$fh/sqcq_classic_why" 2>&1)" \
			[ "$(cat "$fh/sqcq_mode")/$(cat "$fh/sqcq_classic_why")" = "classic/no answer to the setup request" ]
		check "one line says so" \
			[ "$(dmesg | grep -c 'SQ/CQ not used (no answer to the setup request within')" = 1 ]
		FDISK=$(fdisks 0 | head -n 1)
		if ! check "fio-verify on the unanswered device" fio_verify nosetup libaio "$FDISK" $((8 / DIV + 1))m; then
			# What the driver and the SCSI layer said meanwhile.
			dmesg | tail -n 40 | sed 's/^/# dmesg: /'
			finfo_all=$(cat "/sys/kernel/debug/$FMOD/$VDEV/info" 2>/dev/null | tr '\n' ' ')
			log "debugfs info: $finfo_all"
		fi
		check "rmmod the unanswered device" rmmod $FMOD
	fi
fi

# ---- 11. a ring that breaks under I/O: host reset, nothing lost -------
# The test build marks the device broken (virtio_break_device(), what the
# virtio core does to a device that returns a buffer it never got, or that
# is gone) at the 100th command from when fio runs, while fio writes and
# verifies with a 3 s SCSI timeout.  Nothing comes back from a broken
# ring: before, every command after the break failed with EIO, the disk
# unusable until the driver was loaded again.  Now the ring's commands and
# the ones queued after the break time out, error handling ends in the
# host reset (device reset, everything handed back, set up again) and the
# midlayer retries them: fio ends and verifies, the disk keeps running.
# Then a host reset by ioctl with commands in flight, under fio verify.
log "section 11: a ring that breaks under I/O"
[ ! -d /sys/module/$FMOD ] || rmmod $FMOD
if [ -f "$FKO" ] && check "bind the fault build for the break" \
	timeout 120 insmod "$FKO" poll_queues=0 && wait_for 30 fhas_disks; then
	FDISK=$(fdisks 0 | head -n 1)
	disk_ready "$FDISK"
	echo 3 >"/sys/block/${FDISK#/dev/}/device/timeout"
	dmesg -C
	freqs() { awk 'NR > 1 && $2 == "irq" { s += $4 } END { print s + 0 }' \
		"/sys/kernel/debug/$FMOD/$VDEV/queues"; }
	fflowing() { [ "$(freqs)" -gt $(($1 + 100)) ]; }
	b0=$(freqs)
	fio_verify broken libaio "$FDISK" $((16 / DIV + 4))m &
	p=$!
	wait_for 60 fflowing "$b0"
	echo 100 >/sys/module/$FMOD/parameters/fault_break_after
	check "break: the driver saw the broken ring" \
		wait_for 30 bash -c "dmesg | grep -q 'broke the ring protocol'"
	if [ "$(finfo host_reset)" != 1 ]; then
		# A kernel without CONFIG_PM_SLEEP (the sanitizer kernel) has
		# no restore sequence, so no host reset: the commands in flight
		# end in error handling, the ones sent after the break fail at
		# once (held for a reset that never comes, each waited for its
		# timeout and error handling, again and again) -- no hang.
		echo "SKIP: $PREFIX break: host reset, retry and ioctl reset not run: no host reset handler on $k (CONFIG_PM_SLEEP off); checked instead that the I/O ends"
		fio_ends "break: fio ends" "$p"
		check "break: fio saw the I/O fail (status $REPLY)" [ "$REPLY" != 0 ]
		dd if="$FDISK" of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null &
		fio_ends "break: a read after the break ends" $!
		check "break: a read after the break fails (status $REPLY)" [ "$REPLY" != 0 ]
	else
		check "break: error handling reset the host (host_resets $(finfo host_resets))" \
			wait_for 120 bash -c "dmesg | grep -q 'host reset done'"
		fio_ends "break: fio ends" "$p"
		r=$REPLY
		[ $r = 0 ] || tail -n 15 /tmp/fio-broken.log >&2
		dmesg | grep -E 'broke|reset|abort|offline|held|timing out' | tail -n 12 >&2
		check "break: fio verify across the break and the reset clean (status $r)" [ $r = 0 ]
		check "break: one host reset ($(finfo host_resets))" [ "$(finfo host_resets)" = 1 ]
		check "break: disk running after the reset" \
			[ "$(cat "/sys/block/${FDISK#/dev/}/device/state")" = running ]
		check "break: fio verify after the reset" fio_verify afterbreak libaio "$FDISK" $((8 / DIV + 1))m
		# A host reset asked for by ioctl (SG_SCSI_RESET, what sg_reset -H
		# does; perl-base is Essential) while fio writes: the commands in
		# flight come back from the reset device with DID_RESET and are
		# retried, none fails.
		hr0=$(finfo host_resets)
		b0=$(freqs)
		fio_verify ioctlreset libaio "$FDISK" $((16 / DIV + 4))m &
		p=$!
		wait_for 60 fflowing "$b0"
		# shellcheck disable=SC2016 # perl's variables, not the shell's
		check "ioctl: SG_SCSI_RESET host reset under I/O" perl -e \
			'open(my $f, "<", $ARGV[0]) or die "$!"; my $a = pack("i", 3); ioctl($f, 0x2284, $a) or die "ioctl: $!\n"' "$FDISK"
		fio_ends "ioctl: fio ends" "$p"
		r=$REPLY
		[ $r = 0 ] || tail -n 15 /tmp/fio-ioctlreset.log >&2
		check "ioctl: fio verify across the reset clean (status $r)" [ $r = 0 ]
		check "ioctl: one more host reset ($hr0 -> $(finfo host_resets))" \
			[ "$(finfo host_resets)" = $((hr0 + 1)) ]
	fi
	# Bounded: without a host reset handler the removal's own commands
	# (the cache flush) waited for a reset that never comes, each through
	# its timeout and error handling, for 10 minutes and more (CI of
	# 2026-12-05 on the sanitizer kernel).
	rmmod $FMOD &
	fio_ends "break: rmmod afterwards ends" $!
	check "break: rmmod afterwards (status $REPLY)" [ "$REPLY" = 0 ]
fi

echo "guest tests: $fails failed"
[ $fails = 0 ]
