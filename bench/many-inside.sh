#!/bin/bash
# Runs INSIDE the L1 VM (bench/many.sh starts it): N devices, one TPG each
# on one ramdisk, N clients at once, classic then SQ/CQ; one line per mode.
# A client that failed (its status, verify errors, another mode than
# asked) prints a FAIL line and its mode no line; the script then exits 1.
#
# Usage: many-inside.sh KO CLIENT DEVICES SECONDS POLL_CPU IDLE_US
set -euo pipefail
KO=$1 CLIENT=$2 N=$3 SECS=$4 CPU=$5 IDLE=$6
C=/sys/kernel/config/target
# shellcheck source=tests/lib/worker.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tests/lib/worker.sh"
wwpn() { printf 'naa.50014050000%05x' "$1"; }

modprobe target_core_mod
insmod "$KO" poll_idle_us="$IDLE" poll_cpu="$CPU"
mkdir -p $C/core/rd_mcp_0/many
echo rd_pages=$((32 << 8)) >$C/core/rd_mcp_0/many/control
echo 1 >$C/core/rd_mcp_0/many/enable
for i in $(seq "$N"); do
	w=$(wwpn "$i")
	mkdir -p "$C/vhost_sqcq/$w/tpgt_1/lun/lun_0"
	ln -s $C/core/rd_mcp_0/many "$C/vhost_sqcq/$w/tpgt_1/lun/lun_0/many"
	echo naa.5001405000ffff01 >"$C/vhost_sqcq/$w/tpgt_1/nexus"
done

# poll_tids: the module's shared poll threads (poll_shared=1).
poll_tids() {
	grep -l '^sqcq-poll/' /proc/[0-9]*/task/[0-9]*/comm 2>/dev/null | cut -d/ -f5
}
# ticks: "TID TICKS CPU" for every worker and shared poll thread (user +
# system ticks).
ticks() {
	local t
	for t in $(sqcq_worker_tids) $(poll_tids); do
		awk -v t="$t" '{ print t, $14 + $15, $39 }' "/proc/$t/stat" 2>/dev/null
	done
}

printf '%-9s %7s %9s %8s %7s %12s %12s %9s %8s\n' mode devices iops notif/io \
	threads "cpu s/s all" "cpu s/s max" "on cpu $CPU" "busy>0.5"
# sqcq: one shared poll thread on the poll CPU (poll_shared=1, the
# default); dedicated: each device's worker spins itself there.
failed=0
for mode in classic sqcq dedicated; do
	rm -f /tmp/many.*
	s=""
	[ $mode = classic ] || s=-s
	if [ $mode = dedicated ]; then
		echo 0 >/sys/module/vhost_scsi_sqcq/parameters/poll_shared
	else
		echo 1 >/sys/module/vhost_scsi_sqcq/parameters/poll_shared
	fi
	pids=()
	for i in $(seq "$N"); do
		# shellcheck disable=SC2086
		taskset -c 0 "$CLIENT" /dev/vhost-scsi-sqcq "$(wwpn "$i")" -q 1 -d 8 \
			-m read -t "$SECS" -i "$IDLE" $s >"/tmp/many.$i" 2>&1 &
		pids[i]=$!
	done
	# Sample the workers once every client runs (their setup takes
	# seconds under TCG), over a third of the run.
	for _ in $(seq 100); do
		[ "$(sqcq_workers)" -ge "$N" ] && break
		sleep 0.2
	done
	sleep 1
	a=$(ticks) t0=$(date +%s%N)
	sleep $((SECS / 3))
	b=$(ticks) t1=$(date +%s%N)
	# Every client must have run as asked: a refused SQ/CQ setup runs
	# nothing, a classic fallback would be summed as SQ/CQ.
	want=sqcq bad=0
	[ $mode = classic ] && want=classic
	for i in $(seq "$N"); do
		st=0
		wait "${pids[i]}" || st=$?
		if [ "$st" != 0 ] || ! grep -q "errors=0 mode=$want " "/tmp/many.$i"; then
			echo "FAIL: bench-many $mode device $i: client status $st: $(tail -n 1 "/tmp/many.$i")"
			bad=1
		fi
	done
	if [ "$bad" = 1 ]; then
		failed=$((failed + 1))
		continue
	fi
	hz=$(getconf CLK_TCK)
	echo "$a" >/tmp/many.a
	echo "$b" | awk -v hz="$hz" -v ns=$((t1 - t0)) -v cpu="$CPU" '
		NR == FNR { a[$1] = $2; next }
		$1 in a { d = ($2 - a[$1]) / hz / (ns / 1e9); s += d; n++
			  if (d > m) m = d; if ($3 == cpu) on++; if (d > 0.5) busy++ }
		END { printf "%d %.2f %.2f %d %d\n", n, s, m, on, busy }' /tmp/many.a - >/tmp/many.w
	read -r nw all max on busy </tmp/many.w
	cat /tmp/many.[0-9]* | awk -v mode="$mode" -v n="$N" -v nw="$nw" \
		-v all="$all" -v max="$max" -v on="$on" -v busy="$busy" -F'[= ]' '
		/^ios=/ { ios += $2; iops += $6; notif += $8 + $10 }
		END { printf "%-9s %7d %9d %8.3f %7d %12.2f %12.2f %9d %8d\n",
			mode, n, iops, ios ? notif / ios : 0, nw, all, max, on, busy }'
done
echo "kernel $(uname -r), $(nproc) vCPUs (TCG), $N devices, clients on CPU 0, poll_cpu=$CPU, poll_idle_us $IDLE, ${SECS} s, 4 KiB random read, QD 8"
for i in $(seq "$N"); do
	w=$(wwpn "$i")
	rm "$C/vhost_sqcq/$w/tpgt_1/lun/lun_0/many"
	echo NULL >"$C/vhost_sqcq/$w/tpgt_1/nexus"
	rmdir "$C/vhost_sqcq/$w/tpgt_1/lun/lun_0" "$C/vhost_sqcq/$w/tpgt_1" "$C/vhost_sqcq/$w"
done
rmdir $C/vhost_sqcq $C/core/rd_mcp_0/many $C/core/rd_mcp_0
rmmod vhost_scsi_sqcq
if [ "$failed" != 0 ]; then
	echo "FAIL: bench-many $failed of 3 modes had a failed client"
	exit 1
fi
