#!/bin/bash
# Runs INSIDE the L1 VM (tests/host/sqcq.sh starts it), as root.
# Usage: sqcq-inside.sh KO CLIENT
set -u
KO=${1:?KO} CLIENT=${2:?CLIENT}
MOD=vhost_scsi_sqcq
C=/sys/kernel/config/target
P=/sys/module/$MOD/parameters
W=naa.5001405000000d01
DBG=/sys/kernel/debug/$MOD
PREFIX=sqcq
# shellcheck source=tests/lib/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
workers() { grep -l '^vhost-sqcq-' /proc/[0-9]*/comm 2>/dev/null | wc -l; }
# worker_pid: the PID of the first device worker (the poller), if any.
worker_pid() { grep -l '^vhost-sqcq-' /proc/[0-9]*/comm 2>/dev/null | head -n 1 | cut -d/ -f3; }
# host_sleeps: the first device's poll_sleeps (debugfs).
host_sleeps() { sed -n 's/^poll_sleeps: //p' $DBG/dev*/queues | head -n 1; }
# field NAME LINE: the value of NAME=... in a vhost-io result line
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
# dbg_sum COLUMN OUTPUT: sum of a column of the request queues (vq >= 2)
# in the debugfs lines vhost-io -D printed.
dbg_sum() {
	echo "$2" | awk -v col="$1" '
		/^debugfs: vq / { for (i = 2; i <= NF; i++) if ($i == col) c = i }
		/^debugfs: [0-9]+ / && c && $2 >= 2 { s += $c }
		END { print s + 0 }'
}
dbg_val() { echo "$2" | sed -n "s/^debugfs: $1: //p"; }

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
modprobe target_core_mod || fail "modprobe target_core_mod"
if ! insmod "$KO" poll_idle_us=20000; then
	fail "insmod $KO"
	exit 1
fi
pass "insmod ($(uname -r))"
mkdir -p $C/core/rd_mcp_0/sq &&
	echo rd_pages=$((64 << 8)) >$C/core/rd_mcp_0/sq/control &&
	echo 1 >$C/core/rd_mcp_0/sq/enable &&
	mkdir -p $C/vhost_sqcq/$W/tpgt_1/lun/lun_0 &&
	ln -s $C/core/rd_mcp_0/sq $C/vhost_sqcq/$W/tpgt_1/lun/lun_0/sq &&
	echo naa.5001405000000d02 >$C/vhost_sqcq/$W/tpgt_1/nexus &&
	pass "target" || fail "target (configfs)"

# 1. Setup checks, good and malformed (PASS/FAIL lines from the client).
timeout 120 "$CLIENT" /dev/vhost-scsi-sqcq $W -q 4 -C || fails=$((fails + 1))

# 1b. 1000 devices that ask for SQ/CQ and are closed at once, half of them
# before the answer (the close races the attach): nothing stays pinned
# (FOLL_PIN counters of /proc/vmstat balance) or mapped (no vmap of ours
# in /proc/vmallocinfo), and the kernel log gets a handful of lines.
# pins: pages pinned now (FOLL_PIN acquired - released), after folding the
# per-CPU vmstat deltas (without, the two counters may be read at
# different fold points: -2 was seen once).
pins() {
	echo 1 >/proc/sys/vm/stat_refresh 2>/dev/null
	awk '$1 == "nr_foll_pin_acquired" { a = $2; n++ } $1 == "nr_foll_pin_released" { r = $2; n++ }
		END { if (n == 2) print a - r; else print "no-counters" }' /proc/vmstat
}
vmaps() { grep -c "\[$MOD\]" /proc/vmallocinfo; }
modlines() { dmesg | grep -c "$MOD: "; }
pins0=$(pins) lines0=$(modlines) t0=$SECONDS
out=$(timeout 600 "$CLIENT" /dev/vhost-scsi-sqcq $W -q 4 -R 1000 2>&1); rc=$?
secs=$((SECONDS - t0))
sleep 1
[ $rc = 0 ] && pass "setup-close-cycles ($out)" || fail "setup-close-cycles (rc $rc: $out)"
check setup-close-cycles-no-worker-left [ "$(workers)" = 0 ]
pins1=$(pins)
# Earlier runs may still be unpinning when the first count is taken: the
# count may fall, never rise.
check "setup-close-cycles-no-pins-left ($pins0 -> $pins1 pages pinned)" \
	[ "$pins1" != no-counters -a "$pins1" -le "$pins0" ]
check "setup-close-cycles-no-vmap-left ($(vmaps))" [ "$(vmaps)" = 0 ]
# The module's budget for such lines is 10 a minute (sqcq_lifecycle_rs),
# in windows that need not start with the run.
lines=$(($(modlines) - lines0)) most=$((10 * (secs / 60 + 2)))
check "setup-close-cycles-log-bounded ($lines lines for 1000 devices in $secs s, at most $most)" \
	[ "$lines" -le "$most" ]

# 2. sqcq=0 refuses, with its status.
echo 0 >$P/sqcq
out=$(timeout 60 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -n 10 2>&1); rc=$?
[ $rc = 3 ] && echo "$out" | grep -q "disabled on host" &&
	pass "disabled-refuses" || fail "disabled-refuses (rc $rc: $out)"
echo 1 >$P/sqcq

# 3. Steady load, SQ/CQ: >= 100000 verified I/Os, notifications per I/O.
# Under TCG a request takes milliseconds, so the idle timeout that keeps
# both pollers awake through the load is 200 ms here (1 ms on real
# hardware).  Notifications are counted where the pollers are not
# contended: the host poller on CPU 1, the client (a spinning guest
# poller) on CPU 0; sharing a CPU, the host poller sleeps whenever the
# client is runnable (4c) and the guest kicks.
# The target core runs each completion in a kworker on the submitting CPU
# (the poller's) unless the WWPN's cmd_completion_affinity names another:
# CPU 0 keeps CPU 1 to the poller (README, tuning).
AFF=$C/vhost_sqcq/$W/param/cmd_completion_affinity
[ -w $AFF ] && echo 0 >$AFF
echo 200000 >$P/poll_idle_us
echo 1 >$P/poll_cpu
out=$(taskset -c 0 timeout 600 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 4 -d 8 -m verify \
	-n 100000 -i 200000 -D 2>&1); rc=$?
echo >$P/poll_cpu
echo 20000 >$P/poll_idle_us
res=$(echo "$out" | grep '^ios=')
echo "  $res"
ios=$(field ios "$res")
[ $rc = 0 ] && [ "${ios:-0}" -ge 100000 ] && [ "$(field errors "$res")" = 0 ] &&
	pass "verify-100k ($ios I/Os, 0 errors)" ||
	fail "verify-100k (rc $rc: $(echo "$out" | tail -3 | tr '\n' ' '))"
req=$(dbg_sum requests "$out") kk=$(dbg_sum kicks "$out")
cl=$(dbg_sum calls "$out") db=$(dbg_sum doorbells "$out")
echo "  host counters: requests $req kicks $kk calls $cl doorbells $db sleeps $(dbg_val poll_sleeps "$out") (idle $(dbg_val poll_sleeps_idle "$out"), contended $(dbg_val poll_sleeps_contended "$out")), yields $(dbg_val poll_yields "$out"), window $(dbg_val poll_window_ns "$out") ns, completion affinity $(cat $AFF 2>/dev/null)"
[ "$(dbg_val mode "$out")" = sqcq ] && pass "debugfs-mode-sqcq" ||
	fail "debugfs-mode-sqcq ($(dbg_val mode "$out"))"
[ "${req:-0}" -ge 100000 ] && [ "${db:-0}" -gt 0 ] &&
	awk -v n=$((kk + cl)) -v r="$req" 'BEGIN { exit !(n / r < 0.01) }' &&
	pass "notifications-per-io ($(awk -v n=$((kk + cl)) -v r="$req" 'BEGIN { printf "%.4f", n / r }') < 0.01)" ||
	fail "notifications-per-io (requests $req kicks $kk calls $cl)"

# Classic on the same target, for comparison (and correctness).
out=$(timeout 600 "$CLIENT" /dev/vhost-scsi-sqcq $W -q 4 -d 8 -m verify \
	-n 20000 -D 2>&1); rc=$?
res=$(echo "$out" | grep '^ios=')
req=$(dbg_sum requests "$out") kk=$(dbg_sum kicks "$out") cl=$(dbg_sum calls "$out")
echo "  classic: $res; host requests $req kicks $kk calls $cl"
[ $rc = 0 ] && [ "$(dbg_val mode "$out")" = classic ] &&
	pass "classic-verify ($(field ios "$res") I/Os)" || fail "classic-verify (rc $rc)"

# 4. Idle -> sleep -> kick wakes (poll_idle_us changed at runtime).
echo 2000 >$P/poll_idle_us
out=$(timeout 300 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 1 -d 2 -m verify \
	-n 4000 -p 1500 -i 2000 -D 2>&1); rc=$?
res=$(echo "$out" | grep '^ios=')
sl=$(dbg_val poll_sleeps "$out") wk=$(dbg_val poll_wakeups "$out")
echo "  idle run: $res; host sleeps $sl wakeups $wk"
[ $rc = 0 ] && [ "${sl:-0}" -ge 1 ] && [ "${wk:-0}" -ge 1 ] &&
	pass "idle-sleep-kick-wakes (sleeps $sl, wakeups $wk)" ||
	fail "idle-sleep-kick-wakes (rc $rc, sleeps $sl, wakeups $wk)"
echo 20000 >$P/poll_idle_us

# 4b. Runtime changes under load (a verified SQ/CQ load runs throughout):
# poll_cpu rebinds the running poller within a poll loop pass; its CPU
# going offline moves it and I/O goes on; poll_cpu emptied unbinds it;
# poll_idle_us=0 makes it sleep whenever a pass finds no work.
echo 200000 >$P/poll_idle_us
"$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 2 -d 4 -m verify -t 40 -i 200000 -D \
	>/tmp/sqcq-rt.out 2>&1 &
pid=$!
wpid=""
for _ in $(seq 50); do
	wpid=$(worker_pid)
	[ -n "$wpid" ] && grep -qs "^mode: sqcq" $DBG/dev*/queues && break
	sleep 0.2
done
allowed() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$wpid/status"; }
# on_cpu: the CPU the poller last ran on (field 39 of /proc/PID/stat).
on_cpu() { awk '{ print $39 }' "/proc/$wpid/stat"; }
requests() { awk 'NF >= 10 && $1 ~ /^[0-9]+$/ { s += $6 } END { print s + 0 }' $DBG/dev*/queues; }
is_allowed() { [ "$(allowed)" = "$1" ]; }
more_requests() { [ "$(requests)" -gt "$1" ]; }
if [ -n "$wpid" ] && [ "$(nproc)" -ge 2 ]; then
	echo 1 >$P/poll_cpu
	wait_for 5 is_allowed 1 && pass "runtime poll_cpu=1 rebinds the busy poller" ||
		fail "runtime poll_cpu=1 rebinds the busy poller (allowed: $(allowed))"
	if [ -w /sys/devices/system/cpu/cpu1/online ] &&
		echo 0 >/sys/devices/system/cpu/cpu1/online; then
		r0=$(requests)
		sleep 2
		kill -0 "$wpid" 2>/dev/null && [ "$(on_cpu)" != 1 ] &&
			wait_for 10 more_requests "$r0" &&
			pass "poll_cpu offline: poller moved to CPU $(on_cpu), I/O goes on" ||
			fail "poll_cpu offline (poller alive: $(kill -0 "$wpid" 2>/dev/null && echo yes || echo no), CPU $(on_cpu), requests $r0 -> $(requests))"
		echo 1 >/sys/devices/system/cpu/cpu1/online ||
			fail "CPU 1 back online"
		wait_for 5 is_allowed 1 &&
			pass "poll_cpu CPU back online: the poller is bound to it again" ||
			fail "poll_cpu CPU back online: the poller is not bound to it (allowed: $(allowed))"
	else
		fail "poll_cpu offline (cannot take CPU 1 offline)"
	fi
	# poll_idle_us is read at every pass: a write must not rebind.
	gen() { sed -n 's/^poll_cpu_generation: //p' /sys/kernel/debug/vhost_scsi_sqcq/params; }
	g0=$(gen)
	echo 300000 >$P/poll_idle_us
	echo 200000 >$P/poll_idle_us
	[ -n "$g0" ] && [ "$(gen)" = "$g0" ] && is_allowed 1 &&
		pass "runtime poll_idle_us writes do not rebind (generation $g0)" ||
		fail "runtime poll_idle_us writes do not rebind (generation $g0 -> $(gen), allowed $(allowed))"
	echo >$P/poll_cpu
	wait_for 5 is_allowed "0-$(($(nproc --all) - 1))" &&
		pass "runtime poll_cpu= (empty) unbinds it ($(allowed))" ||
		fail "runtime poll_cpu= (empty) unbinds it (allowed: $(allowed))"
	s0=$(host_sleeps)
	echo 0 >$P/poll_idle_us
	sleeps_grow() { [ "$(host_sleeps)" -gt "$s0" ]; }
	wait_for 10 sleeps_grow &&
		pass "runtime poll_idle_us=0 under load: the poller sleeps ($s0 -> $(host_sleeps))" ||
		fail "runtime poll_idle_us=0 under load: no sleeps ($s0)"
else
	fail "runtime changes under load (no poller found, or 1 CPU)"
fi
wait $pid
rc=$?
echo 20000 >$P/poll_idle_us
res=$(grep '^ios=' /tmp/sqcq-rt.out)
echo "  runtime-change run: $res"
[ $rc = 0 ] && [ "$(field errors "$res")" = 0 ] && [ "$(field ios "$res")" -gt 0 ] &&
	pass "runtime changes under load: verify ($(field ios "$res") I/Os, 0 errors)" ||
	fail "runtime changes under load: verify (rc $rc: $(tail -3 /tmp/sqcq-rt.out | tr '\n' ' '))"

# 4c. Poll only while it pays.  A CPU hog beside the poller (poll_cpu=1,
# the client on CPU 0) makes it sleep with reason "contended" as soon as a
# pass finds no work, I/O going on by kicks; with the hog gone it polls
# again.  Then the adaptive idle window (debugfs poll_window_ns): sparse
# I/O (gaps longer than poll_idle_us) keeps it near the short gaps inside
# a request, steady I/O grows it from 10 us, never above poll_idle_us.
dbgv() { sed -n "s/^$1: //p" $DBG/dev*/queues | head -n 1; }
if [ "$(nproc)" -ge 2 ]; then
	echo 1 >$P/poll_cpu
	echo 200000 >$P/poll_idle_us
	taskset -c 0 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 1 -d 4 -m verify -t 40 \
		-i 200000 >/tmp/sqcq-hog.out 2>&1 &
	pid=$!
	for _ in $(seq 50); do
		grep -qs "^mode: sqcq" $DBG/dev*/queues && break
		sleep 0.2
	done
	sleep 2
	# kicks: the guest (client) kicks only when the poller asked for it.
	kicks() { awk 'NF >= 10 && $1 ~ /^[0-9]+$/ { s += $7 } END { print s + 0 }' $DBG/dev*/queues; }
	c0=$(dbgv poll_sleeps_contended) r0=$(requests) k0=$(kicks)
	taskset -c 1 sh -c 'while :; do :; done' &
	hog=$!
	sleep 4
	c1=$(dbgv poll_sleeps_contended) r1=$(requests) k1=$(kicks)
	kill $hog
	wait $hog 2>/dev/null
	sleep 1
	c2=$(dbgv poll_sleeps_contended) r2=$(requests) k2=$(kicks)
	sleep 4
	c3=$(dbgv poll_sleeps_contended) r3=$(requests) k3=$(kicks)
	echo "  hog: contended sleeps $c0 -> $c1, requests $r0 -> $r1, kicks $k0 -> $k1"
	echo "  no hog: contended sleeps $c2 -> $c3, requests $r2 -> $r3, kicks $k2 -> $k3"
	check "hog on the poller's CPU: it sleeps contended ($c0 -> $c1)" [ "${c1:-0}" -gt "${c0:-0}" ]
	check "hog on the poller's CPU: I/O goes on ($r0 -> $r1)" [ "${r1:-0}" -gt "${r0:-0}" ]
	# Kicks per request: the share of requests the poller did not find.
	check "hog gone: it polls again (kicks per request $((k3 - k2))/$((r3 - r2)) below $((k1 - k0))/$((r1 - r0)) with the hog)" \
		awk -v a=$((k3 - k2)) -v b=$((r3 - r2)) -v c=$((k1 - k0)) -v d=$((r1 - r0)) \
		'BEGIN { exit !(b > 0 && d > 0 && a / b < c / d) }'
	wait $pid
	rc=$?
	res=$(grep '^ios=' /tmp/sqcq-hog.out)
	check "hog run: verify (rc $rc, $res)" [ $rc = 0 -a "$(field errors "$res")" = 0 ]

	out=$(taskset -c 0 timeout 120 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 1 -d 1 \
		-m verify -n 12 -g 300 -i 1000 -D 2>&1)
	rc=$?
	w=$(dbg_val poll_window_ns "$out")
	echo "  sparse: $(echo "$out" | grep '^ios='); window $w ns"
	# Each 300 ms gap halves it; the short gaps inside a request (kick,
	# submission, completion) grow it back to about their length: it
	# stays far below the 200 ms a fixed window would spin after each.
	check "sparse I/O (300 ms gaps, poll_idle_us 200 ms): window stays below 1 ms ($w)" \
		[ $rc = 0 -a "${w:-x}" -lt 1000000 ]
	out=$(taskset -c 0 timeout 300 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 1 -d 1 \
		-m verify -n 3000 -i 200000 -D 2>&1)
	rc=$?
	w=$(dbg_val poll_window_ns "$out")
	echo "  steady: $(echo "$out" | grep '^ios='); window $w ns"
	check "steady I/O: window grows above 10 us, at most 200 ms ($w)" \
		[ $rc = 0 -a "${w:-0}" -gt 10000 -a "${w:-0}" -le 200000000 ]
	echo 0 >$P/poll_adaptive
	out=$(taskset -c 0 timeout 120 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 1 -d 1 \
		-m verify -n 12 -g 300 -i 1000 -D 2>&1)
	rc=$?
	w=$(dbg_val poll_window_ns "$out")
	check "poll_adaptive=0: the window stays poll_idle_us under sparse I/O ($w)" \
		[ $rc = 0 -a "${w:-0}" = 200000000 ]
	echo 1 >$P/poll_adaptive
	echo >$P/poll_cpu
	echo 20000 >$P/poll_idle_us
else
	fail "poll only while it pays (needs 2 CPUs)"
fi

[ -w $AFF ] && echo -1 >$AFF

# 5. The client killed while its device polls.
"$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 2 -d 4 -m write -t 120 >/dev/null 2>&1 &
pid=$!
sleep 5
grep -qs "^mode: sqcq" $DBG/dev*/queues && pass "polling-before-kill" ||
	fail "polling-before-kill ($(cat $DBG/dev*/queues 2>/dev/null | head -3 | tr '\n' ' '))"
kill -9 $pid
wait $pid 2>/dev/null
for _ in 1 2 3 4 5 6 7 8 9 10; do
	[ "$(workers)" = 0 ] && break
	sleep 0.5
done
[ "$(workers)" = 0 ] && [ "$(ls $DBG)" = params ] &&
	pass "killed-while-polled-released" ||
	fail "killed-while-polled-released (workers $(workers), debugfs $(ls $DBG | tr '\n' ' '))"

# Logs: one negotiation line per setup, refusals rate-limited, no oops.
n=$(dmesg | grep -c "SQ/CQ negotiated")
[ "$n" -ge 3 ] && pass "negotiation-logged ($n)" || fail "negotiation-logged ($n)"
[ "$(dmesg | grep -c "$MOD: ")" -lt 300 ] && pass "log-bounded" ||
	fail "log-bounded ($(dmesg | grep -c "$MOD: ") lines)"

# Teardown and unload.
rm $C/vhost_sqcq/$W/tpgt_1/lun/lun_0/sq
echo NULL >$C/vhost_sqcq/$W/tpgt_1/nexus
rmdir $C/vhost_sqcq/$W/tpgt_1/lun/lun_0 $C/vhost_sqcq/$W/tpgt_1 \
	$C/vhost_sqcq/$W $C/vhost_sqcq
rmdir $C/core/rd_mcp_0/sq $C/core/rd_mcp_0
rmmod $MOD && pass "rmmod" || fail "rmmod"
exit $((fails > 0))
