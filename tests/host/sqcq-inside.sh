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
# shellcheck source=tests/lib/worker.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/worker.sh"
workers() { sqcq_workers; }
# I/Os of the steady SQ/CQ load (3) and of the classic and own-workers
# loads, and the devices opened and closed in 1b: the sanitizer kernel's
# run (debug stage) asks for fewer, its requests and setups being several
# times slower (1000 devices took 122 s there).
STEADY=${SQCQ_STEADY_IOS:-100000} LOAD=${SQCQ_LOAD_IOS:-20000}
CYCLES=${SQCQ_SETUP_CYCLES:-1000}
POLICY=${SQCQ_POLICY_CHECKS:-1}
# policy_check NAME CMD...: a check of the shared poller's timing-bound
# behaviour, counted unless SQCQ_POLICY_CHECKS=0 (the debug stage: on the
# sanitizer kernel a busy worker often drains its queue so slowly that it
# never parks for the poller to hand it work, 34 s without a handoff in
# one run of 2026-12-03, and the poller, with nothing parked, has nothing
# to let go under a hog).  Not counted, it says what it saw.
policy_check() {
	local name=$1
	shift
	if [ "$POLICY" != 0 ]; then
		check "$name" "$@"
	elif "$@"; then
		echo "INFO: $PREFIX $name: held (not counted: SQCQ_POLICY_CHECKS=0)"
	else
		echo "INFO: $PREFIX $name: did not hold (not counted: SQCQ_POLICY_CHECKS=0)"
	fi
}
# section N: where the run is, and when (the log shows what each costs).
section() { echo "  [${SECONDS}s] section $1"; }
# worker_pid: the thread id of the first device worker (the poller), if any.
worker_pid() { sqcq_worker_tids | head -n 1; }
# host_sleeps: the first device's poll_sleeps (debugfs).
host_sleeps() { sed -n 's/^poll_sleeps: //p' $DBG/dev*/queues | head -n 1; }
# cpus_of TID: the CPU list thread TID may run on.
cpus_of() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null; }
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
# task_runs: "tid comm cpu timeslices" of every task (timeslices from
# /proc/.../schedstat, cpu: where it last ran), to name what contended a
# poller.
task_runs() {
	printf '%s\n' /proc/[0-9]*/task/[0-9]* | awk '{
		f = $0 "/stat"; g = $0 "/schedstat"
		if ((getline st < f) <= 0 || (getline ss < g) <= 0) next
		close(f); close(g)
		a = index(st, "("); b = 0
		for (i = length(st); i > a; i--) if (substr(st, i, 1) == ")") { b = i; break }
		comm = substr(st, a + 1, b - a - 1); gsub(/ /, "_", comm)
		split(substr(st, b + 2), r, " "); split(ss, q, " ")
		print substr(st, 1, a - 2), comm, r[37], q[3] }'
}
# busiest_on CPU BEFORE AFTER: the five tasks that ran most often between
# the two task_runs snapshots and last ran on CPU.
busiest_on() {
	awk -v cpu="$1" 'NR == FNR { n[$1] = $4; next }
		$3 == cpu && $4 - n[$1] > 0 { print $4 - n[$1], $2 "(" $1 ")" }' "$2" "$3" |
		sort -rn | head -n 5 | awk '{ printf "%s%s x%s", s, $2, $1; s = ", " }'
}
# runs_on_but CPU PREFIX BEFORE AFTER: how often tasks that last ran on CPU
# ran between the two task_runs snapshots, those whose name starts with
# PREFIX left out.
runs_on_but() {
	awk -v cpu="$1" -v skip="$2" 'NR == FNR { n[$1] = $4; next }
		$3 == cpu && index($2, skip) != 1 && $4 - n[$1] > 0 { t += $4 - n[$1] }
		END { print t + 0 }' "$3" "$4"
}
# dbg_vq COLUMN VQ OUTPUT: that column of queue VQ in the debugfs lines.
dbg_vq() {
	echo "$3" | awk -v col="$1" -v vq="$2" '
		/^debugfs: vq / { for (i = 2; i <= NF; i++) if ($i == col) c = i }
		/^debugfs: [0-9]+ / && c && $2 == vq { print $c }'
}

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
# The VM's cgroup of 4d is made now, while nothing else runs, and kept to
# the end: its cpu and memory controllers and its first cpu.max quota
# switch static keys, and the kernel patches the code of those branches
# live (enqueue_task_fair among them).  Done between two loaded sections,
# the guest once oopsed there, on both CPUs at once (int3 in
# enqueue_task_fair, 7.2 under TCG).
CG=/sys/fs/cgroup
VMCG=$CG/sqcq-vm
vmcg=none
if ! grep -qw cgroup2 /proc/filesystems; then
	# The sanitizer kernel is built without cgroups (tests/debug/debug.config).
	vmcg=unsupported
elif { grep -qs "^[^ ]* $CG cgroup2 " /proc/mounts || mount -t cgroup2 none $CG; } &&
	echo "+cpu +memory" >$CG/cgroup.subtree_control &&
	mkdir -p $VMCG && echo "20000 100000" >$VMCG/cpu.max &&
	echo $((512 << 20)) >$VMCG/memory.max; then
	vmcg=ready
fi
modprobe target_core_mod || fail "modprobe target_core_mod"
if ! insmod "$KO" poll_idle_us=20000; then
	fail "insmod $KO"
	exit 1
fi
pass "insmod ($(uname -r))"
# Sections 3 to 4c test each device's own poller (poll_cpu binds it);
# 4e the shared pollers, the default.
echo 0 >$P/poll_shared
mkdir -p $C/core/rd_mcp_0/sq &&
	echo rd_pages=$((64 << 8)) >$C/core/rd_mcp_0/sq/control &&
	echo 1 >$C/core/rd_mcp_0/sq/enable &&
	mkdir -p $C/vhost_sqcq/$W/tpgt_1/lun/lun_0 &&
	ln -s $C/core/rd_mcp_0/sq $C/vhost_sqcq/$W/tpgt_1/lun/lun_0/sq &&
	echo naa.5001405000000d02 >$C/vhost_sqcq/$W/tpgt_1/nexus &&
	pass "target" || fail "target (configfs)"

section 1
# 1. Setup checks, good and malformed (PASS/FAIL lines from the client),
# queues on workers of their own among them.
timeout 120 "$CLIENT" /dev/vhost-scsi-sqcq $W -q 4 -C || fails=$((fails + 1))

section 1b
# 1b. $CYCLES devices (1000) that ask for SQ/CQ and are closed at once, half of them
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
out=$(timeout 600 "$CLIENT" /dev/vhost-scsi-sqcq $W -q 4 -R "$CYCLES" 2>&1); rc=$?
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
# The module's budget for such lines is 30 a minute (vhost_lifecycle_rs;
# each device's, 10, within it), in windows that need not start with the
# run.
lines=$(($(modlines) - lines0)) most=$((30 * (secs / 60 + 2)))
check "setup-close-cycles-log-bounded ($lines lines for $CYCLES devices in $secs s, at most $most)" \
	[ "$lines" -le "$most" ]

section 2
# 2. sqcq=0 refuses, with its status.
echo 0 >$P/sqcq
out=$(timeout 60 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -n 10 2>&1); rc=$?
[ $rc = 3 ] && echo "$out" | grep -q "disabled on host" &&
	pass "disabled-refuses" || fail "disabled-refuses (rc $rc: $out)"
echo 1 >$P/sqcq

section 3
# 3. Steady load, SQ/CQ: >= $STEADY verified I/Os, notifications per I/O.
# Under TCG a request takes milliseconds, so the idle timeout that keeps
# both pollers awake through the load is 200 ms here (1 ms on real
# hardware).  Notifications are counted where the pollers are not
# contended: the host poller on CPU 1, the client (a spinning guest
# poller) on CPU 0; sharing a CPU, the host poller sleeps whenever the
# client is runnable (4c) and the guest kicks.
# The target core runs each completion in a kworker on the submitting CPU
# (the poller's) unless the WWPN's cmd_completion_affinity names another:
# CPU 0 keeps CPU 1 to the poller (README, tuning).
# The premise is measured, from outside the module: a run with 0.01
# notifications per I/O or more during which other tasks ran on CPU 1 at
# least as often as the poller was notified (their run counts from
# /proc/<pid>/task/<tid>/schedstat, the poller's own left out) was
# contended: something else wanted CPU 1 (seen: 1929 contended sleeps and
# 0.014 in one run of four on 6.1; 5682 yields and 0.044 in a CI run).
# The module's own sleep and yield counters, the behaviour under test, are
# printed but decide nothing.  Such a run is repeated, up to three runs,
# saying so and naming what ran most on CPU 1.  When all three were
# contended the ratio is not measured here: a SKIP line, counted as
# skipped (never as passed) by tests/run-all.sh, says so.
AFF=$C/vhost_sqcq/$W/param/cmd_completion_affinity
[ -w $AFF ] && echo 0 >$AFF
echo 200000 >$P/poll_idle_us
echo 1 >$P/poll_cpu
contended=0
for try in 1 2 3; do
	task_runs >/tmp/runs0
	out=$(taskset -c 0 timeout 600 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 4 -d 8 -m verify \
		-n "$STEADY" -i 200000 -D 2>&1); rc=$?
	task_runs >/tmp/runs1
	res=$(echo "$out" | grep '^ios=')
	echo "  $res"
	req=$(dbg_sum requests "$out") kk=$(dbg_sum kicks "$out")
	cl=$(dbg_sum calls "$out") db=$(dbg_sum doorbells "$out")
	ctd=$(dbg_val poll_sleeps_contended "$out") yld=$(dbg_val poll_yields "$out")
	echo "  host counters: requests $req kicks $kk calls $cl doorbells $db sleeps $(dbg_val poll_sleeps "$out") (idle $(dbg_val poll_sleeps_idle "$out"), contended $ctd), yields $yld, window $(dbg_val poll_window_ns "$out") ns, completion affinity $(cat $AFF 2>/dev/null)"
	contended=0
	# A run with an error or a failed verify decides at once.
	[ $rc = 0 ] && [ "$(field errors "$res")" = 0 ] || break
	others=$(runs_on_but 1 sqcq-poll /tmp/runs0 /tmp/runs1)
	[ $(((kk + cl) * 100)) -ge "${req:-0}" ] && [ "$others" -ge $((kk + cl)) ] || break
	contended=1
	echo "  CPU 1 was contended: other tasks ran there $others times for $((kk + cl)) notifications, $req requests (most: $(busiest_on 1 /tmp/runs0 /tmp/runs1)); run $try of 3"
done
echo >$P/poll_cpu
echo 20000 >$P/poll_idle_us
ios=$(field ios "$res")
[ $rc = 0 ] && [ "${ios:-0}" -ge "$STEADY" ] && [ "$(field errors "$res")" = 0 ] &&
	pass "verify-steady ($ios of $STEADY I/Os, 0 errors)" ||
	fail "verify-steady ($STEADY I/Os; rc $rc: $(echo "$out" | tail -3 | tr '\n' ' '))"
[ "$(dbg_val mode "$out")" = sqcq ] && pass "debugfs-mode-sqcq" ||
	fail "debugfs-mode-sqcq ($(dbg_val mode "$out"))"
if [ "$contended" = 1 ]; then
	echo "SKIP: $PREFIX notifications-per-io not measured: CPU 1 was contended in three runs (last: requests $req kicks $kk calls $cl, other tasks ran there $others times)"
else
	[ "${req:-0}" -ge "$STEADY" ] && [ "${db:-0}" -gt 0 ] &&
		awk -v n=$((kk + cl)) -v r="$req" 'BEGIN { exit !(n / r < 0.01) }' &&
		pass "notifications-per-io ($(awk -v n=$((kk + cl)) -v r="$req" 'BEGIN { printf "%.4f", n / r }') < 0.01)" ||
		fail "notifications-per-io (requests $req kicks $kk calls $cl; contended sleeps $ctd, yields $yld)"
fi

# Classic on the same target, for comparison (and correctness).
out=$(timeout 600 "$CLIENT" /dev/vhost-scsi-sqcq $W -q 4 -d 8 -m verify \
	-n "$LOAD" -D 2>&1); rc=$?
res=$(echo "$out" | grep '^ios=')
req=$(dbg_sum requests "$out") kk=$(dbg_sum kicks "$out") cl=$(dbg_sum calls "$out")
echo "  classic: $res; host requests $req kicks $kk calls $cl"
[ $rc = 0 ] && [ "$(dbg_val mode "$out")" = classic ] &&
	pass "classic-verify ($(field ios "$res") I/Os)" || fail "classic-verify (rc $rc)"
creq=$req cnote=$((kk + cl))

section 3a
# 3a. No CPU given to polling (poll_cpu empty, the default): SQ/CQ is
# negotiated, and its worker serves what is kicked and sleeps after the
# first pass without work (docs/sqcq.md, serve-only): no spinning window,
# no yield, no contended sleep, no more notifications per request than
# the classic run above (its ratio, plus 0.05 for the noise of a load
# whose batches differ from run to run).
echo 200000 >$P/poll_idle_us
out=$(timeout 600 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 4 -d 8 -m verify \
	-n "$LOAD" -i 200000 -D 2>&1); rc=$?
echo 20000 >$P/poll_idle_us
res=$(echo "$out" | grep '^ios=')
req=$(dbg_sum requests "$out") kk=$(dbg_sum kicks "$out") cl=$(dbg_sum calls "$out")
spin=$(dbg_val poll_spin "$out") win=$(dbg_val poll_window_ns "$out")
yld=$(dbg_val poll_yields "$out") ctd=$(dbg_val poll_sleeps_contended "$out")
echo "  serve-only: $res; host requests $req kicks $kk calls $cl, spin $spin window $win yields $yld contended $ctd sleeps $(dbg_val poll_sleeps "$out")"
check "serve-only: SQ/CQ verified without a poll CPU (rc $rc, mode $(dbg_val mode "$out"), $(field ios "$res") I/Os, errors $(field errors "$res"))" \
	[ "$rc" = 0 -a "$(dbg_val mode "$out")" = sqcq -a "$(field errors "$res")" = 0 ]
check "serve-only: the worker never spins (poll_spin '$spin', window '$win' ns, yields '$yld', contended sleeps '$ctd')" \
	[ "$spin.$win.$yld.$ctd" = 0.0.0.0 ]
check "serve-only: notifications per request at most classic's + 0.05 ($((kk + cl)) for $req; classic $cnote for $creq)" \
	awk -v n=$((kk + cl)) -v r="${req:-0}" -v cn="$cnote" -v cr="${creq:-0}" \
	'BEGIN { exit !(r > 0 && cr > 0 && n / r <= cn / cr + 0.05) }'

# A kick withdraws SQ NEED_WAKEUP at once (vhost_sqcq_kicked()), so
# a client that publishes each request on its own (-1) kicks at most once
# for each time the sleeping worker asked for it (plus 10 % and 2 for
# the re-checks that find work after the flag was up, and the area's
# initial flag); before, it kicked for every request it published until
# the woken worker ran and cleared the flag.
echo 200000 >$P/poll_idle_us
out=$(timeout 300 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 1 -d 8 -1 -m read \
	-n $((LOAD / 5)) -i 200000 -D 2>&1); rc=$?
echo 20000 >$P/poll_idle_us
res=$(echo "$out" | grep '^ios=')
kk=$(field kicks "$res") sl=$(dbg_val poll_sleeps "$out")
echo "  serve-only, one request a publish: $res; worker sleeps $sl"
check "serve-only, one request a publish: at most one kick for each worker sleep (kicks $kk, sleeps $sl, rc $rc, $(field ios "$res") I/Os, errors $(field errors "$res"))" \
	[ "$rc" = 0 -a "$(field errors "$res")" = 0 -a "${sl:-0}" -gt 0 -a "${kk:-x}" -le $((${sl:-0} + ${sl:-0} / 10 + 2)) ]

section 3b
# 3b. Queues on workers of their own (vhost-io -W, as QEMU's
# worker_per_virtqueue=true: vq 3..5 each on a worker, vq 2 on the default
# one).  SQ/CQ is accepted; the poll thread (the default worker, on CPU 1)
# watches every SQ doorbell, serves vq 2 itself and hands the doorbells of
# vq 3..5 to their workers, which serve them; every I/O verified.
echo 200000 >$P/poll_idle_us
echo 1 >$P/poll_cpu
out=$(taskset -c 0 timeout 600 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -W -q 4 -d 8 -m verify \
	-n "$LOAD" -i 200000 -D 2>&1); rc=$?
echo >$P/poll_cpu
echo 20000 >$P/poll_idle_us
res=$(echo "$out" | grep '^ios=')
echo "  $res"
echo "$out" | grep '^debugfs: [0-9v]' | sed 's/^/  /'
[ $rc = 0 ] && [ "$(field ios "$res")" -ge "$LOAD" ] && [ "$(field errors "$res")" = 0 ] &&
	[ "$(dbg_val mode "$out")" = sqcq ] &&
	pass "own-workers: SQ/CQ, $LOAD I/Os verified" ||
	fail "own-workers: SQ/CQ, $LOAD I/Os verified (rc $rc: $(echo "$out" | grep -v '^debugfs' | tail -3 | tr '\n' ' '))"
ids="" bad=""
for vq in 3 4 5; do
	w=$(dbg_vq worker $vq "$out") h=$(dbg_vq handoffs $vq "$out") r=$(dbg_vq requests $vq "$out")
	ids+="$w "
	[ "${w:-0}" -gt 0 ] && [ "${h:-0}" -gt 0 ] && [ "${r:-0}" -gt 0 ] ||
		bad+="vq $vq: worker ${w:-?} handoffs ${h:-?} requests ${r:-?}; "
done
check "own-workers: vq 3..5 on workers of their own, their doorbells handed to them (workers $ids${bad:+; $bad})" \
	[ -z "$bad" -a "$(echo $ids | tr ' ' '\n' | sort -u | wc -l)" = 3 ]
w=$(dbg_vq worker 2 "$out") h=$(dbg_vq handoffs 2 "$out") d=$(dbg_vq doorbells 2 "$out")
check "own-workers: the poll thread serves vq 2 itself (worker $w, doorbells $d, handoffs $h)" \
	[ "$w" = 0 -a "${d:-0}" -gt 0 -a "$h" = 0 ]
req=$(dbg_sum requests "$out") kk=$(dbg_sum kicks "$out") cl=$(dbg_sum calls "$out")
echo "  own-workers: requests $req kicks $kk calls $cl"
check "own-workers: doorbells, not kicks (kicks $kk for $req requests)" \
	awk -v k="$kk" -v r="$req" 'BEGIN { exit !(r > 0 && k / r < 0.25) }'
# The same with the owner on CPUs 0-1: the workers of their own keep off
# CPU 1, the poll thread's (the device's default worker, bound there);
# every worker's CPUs while the client runs: one on CPU 1, the rest on 0.
if [ "$(nproc)" -ge 2 ]; then
	echo 1 >$P/poll_cpu
	# The load lasts until the CPUs are read (SIGUSR1), at most 300 s.
	taskset -c 0,1 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -W -q 4 -d 8 \
		-m verify -t 300 -i 200000 >/tmp/sqcq-place.out 2>&1 &
	cpid=$!
	four_workers() { [ "$(workers)" -ge 4 ]; }
	wait_for 60 four_workers
	sleep 2
	cpus=$(for t in $(sqcq_worker_tids); do cpus_of "$t"; done)
	alive=no
	kill -USR1 $cpid 2>/dev/null && alive=yes
	wait $cpid
	rc=$?
	echo >$P/poll_cpu
	check "own-workers: owner on CPUs 0-1, poll_cpu=1: the poll thread on CPU 1, the other workers off it (allowed: $(echo $cpus); client running then: $alive, rc $rc: $(tail -n 1 /tmp/sqcq-place.out))" \
		[ "$alive" = yes -a "$rc" = 0 -a "$(echo "$cpus" | wc -w)" -ge 4 -a \
		"$(echo "$cpus" | grep -cx 1)" = 1 -a -z "$(echo "$cpus" | grep -vx '[01]')" ]
fi

section 4
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

section 4g
# 4g. The stable view (docs/observability.md): the TPG's sqcq_status and
# the tracepoints, against the debugfs numbers.  Before a device is bound
# it says none; with the client (the VM) running SQ/CQ I/O: its mode, the
# client's pid as owner, and requests and kicks that bracket debugfs's
# read between two reads of the file and grow with the I/O; after the
# close, none again.  Reads racing devices that are bound and closed at
# once (the -R cycles of 1b) must all be whole (the sanitizer kernel
# checks their memory).  With the module's events on in tracefs: setup
# (this device, its owner, 2 queues), sleeps and wakes of this device
# with a reason, its teardown, and sqcq=0's refusal.
ST=$C/vhost_sqcq/$W/tpgt_1/sqcq_status
# sv KEY: KEY's value in sqcq_status.
sv() { awk -v k="$1:" '$1 == k { print $2 }' "$ST"; }
# dbg_req COLUMN: that column summed over this device's request queues in
# debugfs (one device is open).
dbg_col() { awk -v c="$1" 'NF >= 10 && $1 ~ /^[0-9]+$/ && $1 >= 2 { s += $c } END { print s + 0 }' $DBG/dev*/queues; }
check "status: sqcq_status in the TPG, no device bound ($(tr '\n' ' ' <"$ST" 2>&1))" \
	[ -r "$ST" -a "$(sv device)/$(sv mode)" = none/none ]
TR=/sys/kernel/tracing
[ -d $TR/events ] || mount -t tracefs nodev $TR 2>/dev/null
EV=$TR/events/$MOD
tracing=no
if [ -d $EV ]; then
	echo 0 >$TR/tracing_on
	echo 4096 >$TR/buffer_size_kb
	echo >$TR/trace
	echo 1 >$EV/enable && echo 1 >$TR/tracing_on && tracing=yes
fi
"$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 2 -d 4 -m verify -t 300 -i 2000 -D \
	>/tmp/sqcq-status.out 2>&1 &
cpid=$!
st_sqcq() { [ "$(sv mode)" = sqcq ] && [ "$(sv requests)" -gt 0 ]; }
wait_for 60 st_sqcq
r1=$(sv requests) k1=$(sv kicks) dr=$(dbg_col 6) dk=$(dbg_col 7) r2=$(sv requests) k2=$(sv kicks)
devno=$(sv device)
dbg_owner=$(sed -n 's/^owner: //p' "$DBG/dev$devno/queues" 2>/dev/null)
echo "  status: $(tr '\n' ' ' <"$ST")"
check "status: mode sqcq, owner the client's pid $cpid, device $devno as in debugfs (owner $dbg_owner), 2 queues in SQ/CQ, serve-only without a poll CPU" \
	[ "$(sv mode)" = sqcq -a "$(sv owner_pid)" = "$cpid" -a "$dbg_owner" = "$cpid" -a \
	"$(sv endpoint)" = "$W" -a "$(sv queues)/$(sv sqcq_queues)" = 2/2 -a \
	"$(sv poller)/$(sv poll_cpu)" = serve/none ]
check "status: requests and kicks bracket debugfs's ($r1 <= $dr <= $r2, $k1 <= $dk <= $k2)" \
	[ "${r1:-0}" -gt 0 -a "${r1:-0}" -le "$dr" -a "$dr" -le "${r2:-0}" -a \
	"${k1:-0}" -le "$dk" -a "$dk" -le "${k2:-0}" ]
more_req() { [ "$(sv requests)" -gt "$1" ]; }
check "status: requests grow with the I/O" wait_for 30 more_req "$r2"
kill -USR1 $cpid 2>/dev/null
wait $cpid
rc=$?
out=$(cat /tmp/sqcq-status.out)
ios=$(field ios "$(echo "$out" | grep '^ios=')")
check "status: the client verified ($ios I/Os, rc $rc); after its close, no device ($(tr '\n' ' ' <"$ST"))" \
	[ $rc = 0 -a "${ios:-0}" -gt 0 -a "$(sv device)/$(sv mode)" = none/none ]
# Classic: the same file says so.
"$CLIENT" /dev/vhost-scsi-sqcq $W -q 1 -d 2 -m verify -t 300 >/tmp/sqcq-status.out 2>&1 &
cpid=$!
st_classic() { [ "$(sv mode)" = classic ] && [ "$(sv requests)" -gt 0 ]; }
wait_for 60 st_classic
check "status: a classic device: mode classic, owner $cpid, no poller ($(tr '\n' ' ' <"$ST"))" \
	[ "$(sv mode)/$(sv owner_pid)/$(sv sqcq_queues)/$(sv poller)" = "classic/$cpid/0/none" ]
kill -USR1 $cpid 2>/dev/null
wait $cpid
# Reads racing bind and close.
n=$((CYCLES / 4 > 25 ? CYCLES / 4 : 25))
timeout 600 "$CLIENT" /dev/vhost-scsi-sqcq $W -q 2 -R $n >/tmp/sqcq-status.out 2>&1 &
cpid=$!
reads=0 bad=0 seen=0
while kill -0 $cpid 2>/dev/null; do
	s=$(<"$ST") || bad=$((bad + 1))
	case $s in
	"device: none"*) ;;
	"device: "[0-9]*) seen=$((seen + 1)) ;;
	*) bad=$((bad + 1)); echo "  status read: $s" ;;
	esac
	reads=$((reads + 1))
done
wait $cpid
rc=$?
check "status: $reads reads racing $n devices bound and closed: all whole ($bad bad, $seen with a device; client rc $rc)" \
	[ $bad = 0 -a $rc = 0 -a $reads -gt 0 ]
if [ $tracing = yes ]; then
	echo 0 >$P/sqcq
	"$CLIENT" /dev/vhost-scsi-sqcq $W -s -n 10 >/dev/null 2>&1
	echo 1 >$P/sqcq
	echo 0 >$TR/tracing_on
	grep -v '^#' $TR/trace >/tmp/sqcq-trace.txt
	echo 0 >$EV/enable
	echo >$TR/trace
	echo 1 >$TR/tracing_on
	# tev EVENT REGEX: the events of that name on device $devno matching REGEX.
	tev() { grep " $1: dev=$devno " /tmp/sqcq-trace.txt | grep -cE "$2"; }
	sleeps=$(dbg_val poll_sleeps "$out")
	echo "  trace: $(wc -l </tmp/sqcq-trace.txt) events; dev$devno: setup $(tev sqcq_setup .), sleeps $(tev poll_sleep .), wakes $(tev poll_wake .), teardowns $(tev sqcq_teardown .); debugfs sleeps $sleeps"
	grep " dev=$devno " /tmp/sqcq-trace.txt | head -n 6 | sed 's/^/  trace| /'
	check "trace: sqcq_setup of device $devno, owner $dbg_owner, 2 queues" \
		[ "$(tev sqcq_setup "owner=$dbg_owner queues=2 flags=(0|0x[0-9a-f]+)$")" = 1 ]
	check "trace: poll_sleep of device $devno with a reason, at least debugfs's count at the dump ($(tev poll_sleep 'reason=idle poller=serve') >= $sleeps)" \
		[ "${sleeps:-0}" -gt 0 -a "$(tev poll_sleep 'reason=idle poller=serve window_ns=0$')" -ge "${sleeps:-0}" ]
	check "trace: poll_wake of device $devno, woken by a request ($(tev poll_wake 'reason=request parked=0$') of $(tev poll_wake .))" \
		[ "$(tev poll_wake 'reason=request parked=0$')" -gt 0 -a \
		"$(tev poll_wake 'reason=(request|work|cpus|stop|other) parked=[01]$')" = "$(tev poll_wake .)" ]
	check "trace: sqcq_teardown of device $devno, once, with why ($(grep " sqcq_teardown: dev=$devno " /tmp/sqcq-trace.txt | sed 's/.*why=//'))" \
		[ "$(tev sqcq_teardown "owner=$dbg_owner why=.+")" = 1 ]
	check "trace: sqcq=0's refusal (sqcq_classic: $(grep -c ' sqcq_classic: ' /tmp/sqcq-trace.txt))" \
		grep -qE ' sqcq_classic: dev=[0-9]+ owner=[0-9]+ status=[0-9]+ why=disabled on host$' /tmp/sqcq-trace.txt
else
	echo "SKIP: $PREFIX trace: no tracefs events of $MOD on this kernel ($(ls $TR 2>&1 | head -n 1))"
fi

section 4b
# 4b. Runtime changes under load (a verified SQ/CQ load runs throughout):
# poll_cpu rebinds the running poller within a poll loop pass; its CPU
# going offline moves it and I/O goes on; poll_cpu emptied unbinds it;
# poll_idle_us=0 makes it sleep whenever a pass finds no work.
echo 200000 >$P/poll_idle_us
# The load lasts until the checks are done (SIGUSR1), at most 300 s: the
# sanitizer kernel needs more than 40 s for them.
"$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 2 -d 4 -m verify -t 300 -i 200000 -D \
	>/tmp/sqcq-rt.out 2>&1 &
pid=$!
wpid=""
for _ in $(seq 50); do
	wpid=$(worker_pid)
	[ -n "$wpid" ] && grep -qs "^mode: sqcq" $DBG/dev*/queues && break
	sleep 0.2
done
allowed() { cpus_of "$wpid"; }
# on_cpu: the CPU the poller last ran on (field 39 of /proc/PID/stat).
on_cpu() { awk '{ print $39 }' "/proc/$wpid/stat"; }
requests() { awk 'NF >= 10 && $1 ~ /^[0-9]+$/ { s += $6 } END { print s + 0 }' $DBG/dev*/queues; }
# The kicks of every queue of every device: the guest (client) kicks only
# when the poller asked for it.  Here, not in 4c, which the sanitizer
# kernel's run leaves out: 4e's kick count read nothing there, and its
# check compared 0 with 0 (2026-12-06).
kicks() { awk 'NF >= 10 && $1 ~ /^[0-9]+$/ { s += $7 } END { print s + 0 }' $DBG/dev*/queues; }
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
kill -USR1 $pid 2>/dev/null
wait $pid
rc=$?
echo 20000 >$P/poll_idle_us
res=$(grep '^ios=' /tmp/sqcq-rt.out)
echo "  runtime-change run: $res"
[ $rc = 0 ] && [ "$(field errors "$res")" = 0 ] && [ "$(field ios "$res")" -gt 0 ] &&
	pass "runtime changes under load: verify ($(field ios "$res") I/Os, 0 errors)" ||
	fail "runtime changes under load: verify (rc $rc: $(tail -3 /tmp/sqcq-rt.out | tr '\n' ' '))"

section 4c
# 4c. Poll only while it pays.  A CPU hog beside the poller (poll_cpu=1,
# the client on CPU 0) makes it sleep with reason "contended" as soon as a
# pass finds no work, I/O going on by kicks; with the hog gone it polls
# again.  Then the adaptive idle window (debugfs poll_window_ns): sparse
# I/O (gaps longer than poll_idle_us) keeps it near the short gaps inside
# a request, steady I/O grows it from 10 us, never above poll_idle_us.
# All of it is policy, timed: not run where such checks are not counted
# (SQCQ_POLICY_CHECKS=0, the sanitizer kernel's run: 105 s there).  The
# paths it drives, a contended sleep, the window's updates, poll_cpu and
# poll_adaptive changed under load, run in 4, 4b and 4e as well.
dbgv() { sed -n "s/^$1: //p" $DBG/dev*/queues | head -n 1; }
if [ "$POLICY" = 0 ]; then
	echo "INFO: $PREFIX 4c (poll only while it pays) not run: SQCQ_POLICY_CHECKS=0"
elif [ "$(nproc)" -ge 2 ]; then
	echo 1 >$P/poll_cpu
	echo 200000 >$P/poll_idle_us
	# Until the samples below are taken (SIGUSR1), at most 300 s.
	taskset -c 0 "$CLIENT" /dev/vhost-scsi-sqcq $W -s -q 1 -d 4 -m verify -t 300 \
		-i 200000 >/tmp/sqcq-hog.out 2>&1 &
	pid=$!
	for _ in $(seq 50); do
		grep -qs "^mode: sqcq" $DBG/dev*/queues && break
		sleep 0.2
	done
	sleep 2
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
	kill -USR1 $pid 2>/dev/null
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

section 4h
# 4h. Quiet after the stop: QEMU stops the device when the guest resets it
# (a driver unbound, rmmod, a reboot) or the VM stops: CLEAR_ENDPOINT, then
# GET_VRING_BASE on every queue.  From then on the guest reuses the memory
# of its rings and doorbell area; a write by the host after that corrupts
# whatever the guest put there.  The client stops the device with 32
# requests in flight and checks that none of its memory changes for 300 ms,
# nor, filled with a pattern, for 300 ms more (vhost-io -Z): in classic
# mode and in SQ/CQ mode with each kind of poller: none (serve only), the
# device's own, spinning on CPU 1, and the shared one of CPU 1, the device
# parked on it.  First the control: without the stop, a read kicked once
# the copy to compare with is taken must show (vhost-io -z).
o=$(timeout 60 "$CLIENT" /dev/vhost-scsi-sqcq $W -q 1 -d 8 -m read -t 1 -z 300 2>&1)
r=$?
ctl_ok() { [ "$r" = 0 ] && grep -q '^quiet-control: the host' <<<"$o"; }
check "quiet after the stop, the control: no stop, a read kicked after the copy is seen (rc $r; $(grep '^quiet-control' <<<"$o"))" \
	ctl_ok
quiet() {	# quiet NAME MODE CLIENT-ARGS...: MODE as debugfs shows it
	local name=$1 mode=$2 o r
	shift 2
	o=$(timeout 60 "$CLIENT" /dev/vhost-scsi-sqcq $W -q 4 -d 8 -m read -t 1 -Z 300 -D "$@" 2>&1)
	r=$?
	q_ok() { [ "$r" = 0 ] && [ "$(dbg_val mode "$o")" = "$mode" ] && grep -q '^quiet-after-stop: ok' <<<"$o"; }
	check "quiet after the stop, $name: no byte of guest memory written after CLEAR_ENDPOINT and GET_VRING_BASE (rc $r, mode $(dbg_val mode "$o"); $(grep '^quiet-after-stop' <<<"$o"))" \
		q_ok
}
quiet classic classic
quiet "SQ/CQ, serve only" sqcq -s
if [ "$(nproc)" -ge 2 ]; then
	echo 1 >$P/poll_cpu
	echo 200000 >$P/poll_idle_us
	quiet "SQ/CQ, own poller on CPU 1" sqcq -s -i 200000
	echo 1 >$P/poll_shared
	quiet "SQ/CQ, shared poller on CPU 1" sqcq -s -i 200000
	echo 0 >$P/poll_shared
	echo >$P/poll_cpu
	echo 20000 >$P/poll_idle_us
fi

section 4e
# 4e. Shared pollers (poll_shared=1, the default): with poll_cpu=1, four
# devices under load cost one spinning thread, the shared poller
# "sqcq-poll/1" bound to CPU 1, whatever the number of devices.  Each
# device's worker parks on it when a pass finds nothing, sleeps, and is
# woken to serve (in its own thread, off CPU 1) when the poller sees its SQ
# index move.  A hog on CPU 1 makes the poller let every device go (sleeps
# "contended") while I/O goes on by kicks.  poll_shared=0 at runtime: the
# workers spin themselves again, bound to CPU 1, the shared poller idle.
ww() { printf 'naa.50014050000e%04x' "$1"; }
pollers() { tail -n +2 $DBG/pollers; }
# pcol COLUMN: that column of the first shared poller's line.
pcol() {
	awk -v col="$1" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		NR == 2 { print $c[col] }' $DBG/pollers
}
npoll_threads() { grep -l '^sqcq-poll/' /proc/[0-9]*/task/[0-9]*/comm 2>/dev/null | wc -l; }
dev_sum() { sed -n "s/^$1: //p" $DBG/dev*/queues | awk '{ s += $1 } END { print s + 0 }'; }
# workers_on1: how many device workers are bound to CPU 1 alone.
workers_on1() {
	local t n=0
	for t in $(sqcq_worker_tids); do
		[ "$(cpus_of "$t")" = 1 ] && n=$((n + 1))
	done
	echo $n
}
if [ "$(nproc)" -ge 2 ]; then
	echo 1 >$P/poll_shared
	echo 1 >$P/poll_cpu
	echo 200000 >$P/poll_idle_us
	# A ramdisk each: every client verifies from block 0.
	for i in 1 2 3 4; do
		t=$C/vhost_sqcq/$(ww $i)
		mkdir -p $C/core/rd_mcp_0/sh$i &&
			echo rd_pages=$((8 << 8)) >$C/core/rd_mcp_0/sh$i/control &&
			echo 1 >$C/core/rd_mcp_0/sh$i/enable &&
			mkdir -p "$t/tpgt_1/lun/lun_0" &&
			ln -s $C/core/rd_mcp_0/sh$i "$t/tpgt_1/lun/lun_0/sh" &&
			echo naa.5001405000000d02 >"$t/tpgt_1/nexus" ||
			fail "shared: target $(ww $i)"
	done
	pids=()
	for i in 1 2 3 4; do
		taskset -c 0 "$CLIENT" /dev/vhost-scsi-sqcq "$(ww $i)" -s -q 2 -d 4 -m verify \
			-t 300 -i 200000 -D >/tmp/sqcq-sh.$i 2>&1 &
		pids+=($!)
	done
	all_sqcq() { [ "$(grep -ls '^mode: sqcq' $DBG/dev*/queues | wc -l)" = 4 ]; }
	wait_for 60 all_sqcq
	sleep 3
	echo "  shared pollers: $(pollers | tr '\n' ';')"
	check "shared: 4 devices in SQ/CQ" all_sqcq
	check "shared: one poll thread for 4 devices ($(npoll_threads))" [ "$(npoll_threads)" = 1 ]
	ppid=$(pcol pid)
	check "shared: the poller is on CPU 1 (line: $(pollers | head -n 1))" \
		[ "$(pcol cpu)" = 1 -a "$(cpus_of "$ppid")" = 1 ]
	on1=$(workers_on1)
	check "shared: no device worker bound to the poll CPU ($on1 of $(workers))" [ "$on1" = 0 ]
	# A window in which the poller let the devices go "contended" more
	# than once per 100 requests (CPU 1 wanted by others, the premise of
	# the kick count gone) is measured again, up to three windows, and
	# says so.
	for try in 1 2 3; do
		h0=$(pcol handoffs) p0=$(dev_sum poll_parks) r0=$(requests) k0=$(kicks) c0=$(pcol sleeps_contended)
		sleep 4
		h1=$(pcol handoffs) p1=$(dev_sum poll_parks) r1=$(requests) k1=$(kicks) c1=$(pcol sleeps_contended)
		echo "  shared, 4 s: handoffs $h0 -> $h1, parks $p0 -> $p1, requests $r0 -> $r1, kicks $k0 -> $k1, contended $c0 -> $c1"
		contended=0
		[ $((c1 - c0)) -gt $(((r1 - r0) / 100)) ] && contended=1
		[ "$contended" = 1 ] && [ "$try" != 3 ] || break
		echo "  the shared poller was contended: once more"
	done
	# No handoff in the window: on the sanitizer kernel CPU 1 is now and
	# then taken for seconds (one CI run: 6 contended sleeps and 0
	# handoffs in 4 s, kicks carrying all I/O, the premise of the retry
	# above not met).  The poller must hand work over once it spins again.
	handed() { [ "$(pcol handoffs)" -gt "${h0:-0}" ]; }
	# Not where the check is not counted (SQCQ_POLICY_CHECKS=0): 30 s.
	if [ "${h1:-0}" -le "${h0:-0}" ] && [ "$POLICY" != 0 ] &&
		wait_for 30 handed; then
		echo "  shared: the first handoff came after the window: $(pcol handoffs) (contended $(pcol sleeps_contended))"
		h1=$(pcol handoffs)
	fi
	policy_check "shared: the poller hands work to the workers ($h0 -> $h1)" [ "${h1:-0}" -gt "${h0:-0}" ]
	check "shared: the workers park between pieces of work ($p0 -> $p1)" [ "${p1:-0}" -gt "${p0:-0}" ]
	# Kicks come from the times the poller let the devices go because CPU
	# 1 was wanted: 2-3% of requests on 6.1 and 7.2, 5-7% on the
	# sanitizer kernel, whose own threads want CPU 1 more often; classic
	# kicks once per batch, 13% of requests with this client.
	# Contended in all three (a busy machine under this VM: 5.5 and 4.6
	# contended sleeps per 100 requests, 10.3 % kicked, in a run beside
	# make check): the premise is gone, and the ratio says nothing either
	# way (classic kicks 13 %): a counted SKIP, never a pass.  A ratio
	# that depends on the poller getting its CPU: not counted where the
	# policy's checks are not (the sanitizer kernel).
	if [ "$contended" = 1 ]; then
		echo "SKIP: $PREFIX shared: polled, not kicked: not measured, the poller was contended in three windows (last: kicks $((k1 - k0)) for $((r1 - r0)) requests, contended sleeps $((c1 - c0)))"
	else
		policy_check "shared: polled, not kicked (kicks $((k1 - k0)) for $((r1 - r0)) requests, under 8%)" \
			awk -v k=$((k1 - k0)) -v r=$((r1 - r0)) 'BEGIN { exit !(r > 0 && k / r < 0.08) }'
	fi
	c0=$(pcol sleeps_contended) r0=$(requests)
	taskset -c 1 sh -c 'while :; do :; done' &
	hog=$!
	sleep 3
	c1=$(pcol sleeps_contended) r1=$(requests)
	kill $hog
	wait $hog 2>/dev/null
	policy_check "shared: a hog on CPU 1, the poller lets go contended ($c0 -> $c1)" [ "${c1:-0}" -gt "${c0:-0}" ]
	check "shared: with the hog, I/O goes on ($r0 -> $r1)" [ "${r1:-0}" -gt "${r0:-0}" ]
	echo 0 >$P/poll_shared
	dedicated() { [ "$(workers_on1)" = 4 ] && [ "$(pcol devices)" = 0 ]; }
	check "poll_shared=0 at runtime: each worker spins bound to CPU 1, none parked" wait_for 10 dedicated
	echo 1 >$P/poll_shared
	r0=$(requests) h0=$(pcol handoffs)
	parked_again() { [ "$(pcol handoffs)" -gt "$h0" ] && [ "$(requests)" -gt "$r0" ]; }
	wait_for 10 parked_again
	check "poll_shared=1 again: the shared poller hands work over again, I/O goes on (handoffs $h0 -> $(pcol handoffs), requests $r0 -> $(requests))" \
		parked_again
	# The load lasts until here (at most 300 s).
	kill -USR1 "${pids[@]}" 2>/dev/null
	rc=0
	for i in 0 1 2 3; do
		wait "${pids[$i]}" || rc=$((rc + 1))
	done
	res=$(grep -h '^ios=' /tmp/sqcq-sh.[1-4] | awk -F'[= ]' '{ n += $2; e += $12 } END { print n + 0, e + 0 }')
	check "shared: 4 devices verify ($rc failed; I/Os and errors: $res)" \
		[ "$rc" = 0 -a "${res#* }" = 0 -a "${res% *}" -gt 0 ]
	no_parked() { [ "$(pcol devices)" = 0 ]; }
	check "shared: no device left parked" wait_for 10 no_parked
	# Then one device with its second queue on a worker of its own (-W),
	# alone: the shared poller hands that queue's doorbells to its worker.
	# (Not among the four above: before the workers of their own kept
	# off poll_cpu, that worker, a kthread on 6.1, ran on CPU 1 and
	# raised the kick count there.)
	out=$(taskset -c 0 timeout 300 "$CLIENT" /dev/vhost-scsi-sqcq "$(ww 1)" -s -W -q 2 -d 4 -m verify \
		-n $((LOAD / 4)) -i 200000 -D 2>&1); rc=$?
	w=$(dbg_vq worker 3 "$out") h=$(dbg_vq handoffs 3 "$out") r=$(dbg_vq requests 3 "$out")
	check "shared: a queue on a worker of its own gets its doorbells handed to that worker, verify clean (rc $rc; vq 3: worker $w, handoffs $h, requests $r)" \
		[ $rc = 0 -a "${w:-0}" -gt 0 -a "${h:-0}" -gt 0 -a "${r:-0}" -gt 0 ]
	# The same device busy on that queue alone (-O: the first request
	# queue idle).  The shared poller (a thread of the module, in no VM's
	# cgroup) hands such a queue's doorbells to its worker while the
	# device stays parked; it must give the device back to its default
	# worker (the VM's, under its cpu.max) after at most 16 of them
	# (SQCQ_PG_HANDOFF_BUDGET), or a busy guest keeps it spinning with
	# nothing of the VM's running between doorbells.  Counted over 2 s of
	# the load: device hand-backs (poll_handoffs) against the queue's
	# hand-offs; without the bound, 0 hand-backs for ~19 000 hand-offs.
	taskset -c 0 "$CLIENT" /dev/vhost-scsi-sqcq "$(ww 1)" -s -W -O -q 2 -d 4 -m verify \
		-t 300 -i 200000 -D >/tmp/sqcq-own.out 2>&1 &
	opid=$!
	sleep 3
	# vq3_handoffs: the last column of vq 3's line in the device's queues file.
	vq3_handoffs() { awk '$1 == 3 && NF >= 12 { print $12 }' $DBG/dev*/queues; }
	b0=$(dev_sum poll_handoffs) q0=$(vq3_handoffs) k0=$(dev_sum poll_parks)
	sleep 2
	b1=$(dev_sum poll_handoffs) q1=$(vq3_handoffs) k1=$(dev_sum poll_parks)
	kill -USR1 $opid 2>/dev/null
	wait $opid
	rc=$?
	out=$(cat /tmp/sqcq-own.out)
	r2=$(dbg_vq requests 2 "$out") r3=$(dbg_vq requests 3 "$out")
	db=$((b1 - b0)) dq=$((${q1:-0} - ${q0:-0}))
	# Parked in the window (parks rose), the device must have been given
	# back too; a device never parked there was polled by its own worker
	# (seen on the sanitizer kernel: 1 hand-back, 701 hand-offs, the
	# worker's).  Without the bound, 7.2: parks 111 -> 289, 0 hand-backs.
	dk=$((k1 - k0))
	own_ok() {
		[ $rc = 0 -a "${r2:-1}" = 0 -a "${r3:-0}" -gt 0 -a "$dq" -gt 0 ] &&
			{ [ "$db" -gt 0 ] || [ "$dk" = 0 ]; }
	}
	# On the sanitizer kernel the shared poller's window runs out between
	# requests and lets the device go instead (a kick brings the worker
	# back, no hand-back counted: parks 489, hand-backs 0, hand-offs 873
	# in one run): the bound shows only where the policy's checks count.
	policy_check "shared: a device busy only on a queue of its own worker goes back to its default worker, not kept parked by the shared poller (2 s: parks $dk, hand-backs $db, hand-offs $dq; rc $rc; requests vq 2 ${r2:-?}, vq 3 ${r3:-?})" \
		own_ok
	check "shared: the device busy on a queue of its own worker verifies (rc $rc; requests vq 2 ${r2:-?}, vq 3 ${r3:-?})" \
		[ $rc = 0 -a "${r2:-1}" = 0 -a "${r3:-0}" -gt 0 ]

	section 4f
	# 4f. A VM's poller on CPUs of its own: a TPG's attrib/poll_cpu stands
	# in for poll_cpu for the device bound to it.  With poll_cpu empty
	# (no device polls) and poll_shared=0, two devices whose TPGs name
	# CPU 0 and CPU 1 spin, each worker bound to its TPG's CPU; a write
	# under load moves one; an empty write gives poll_cpu back (serve-only
	# here).  Bad lists are refused and leave the value.
	echo >$P/poll_cpu
	echo 0 >$P/poll_shared
	attr() { echo "$C/vhost_sqcq/$(ww "$1")/tpgt_1/attrib/poll_cpu"; }
	check "tpg poll_cpu: attrib/poll_cpu exists, empty by default ('$(cat "$(attr 1)" 2>&1)')" \
		[ -f "$(attr 1)" -a -z "$(cat "$(attr 1)" 2>/dev/null)" ]
	for bad in banana 4096 0-x "1,,2"; do
		check "tpg poll_cpu: '$bad' refused, the value kept" \
			bash -c "! echo '$bad' 2>/dev/null >'$(attr 1)' && [ -z \"\$(cat '$(attr 1)')\" ]"
	done
	check "tpg poll_cpu: CPU 0 for the first TPG" bash -c "echo 0 >'$(attr 1)' && [ \"\$(cat '$(attr 1)')\" = 0 ]"
	check "tpg poll_cpu: CPU 1 for the second TPG" bash -c "echo ' 1 ' >'$(attr 2)' && [ \"\$(cat '$(attr 2)')\" = 1 ]"
	# The clients on every CPU: a worker that is a thread of its owner
	# (vhost_task) runs unbound where the owner may run.  Until the
	# samples are taken (SIGUSR1), at most 600 s: on the sanitizer
	# kernel, where a process start costs near a second, 300 s ran out
	# before the checks after virtio-sqcq-stat's samples (CI run).
	pids=()
	for i in 1 2; do
		"$CLIENT" /dev/vhost-scsi-sqcq "$(ww $i)" -s -q 1 -d 4 -m verify \
			-t 600 -i 200000 -D >/tmp/sqcq-own.$i 2>&1 &
		pids+=($!)
	done
	two_sqcq() { [ "$(grep -ls '^mode: sqcq' $DBG/dev*/queues | wc -l)" = 2 ]; }
	wait_for 60 two_sqcq
	# own_cpus: each device's "poll_cpu_own poll_spin", sorted.
	own_cpus() {
		local f
		for f in $DBG/dev*/queues; do
			grep -qs '^mode: sqcq' "$f" || continue
			echo "$(sed -n 's/^poll_cpu_own: //p' "$f") $(sed -n 's/^poll_spin: //p' "$f")"
		done | sort | tr '\n' ';'
	}
	# worker_cpus: the CPU lists of the device workers, sorted.
	worker_cpus() {
		local t
		for t in $(sqcq_worker_tids); do cpus_of "$t"; done | sort | tr '\n' ';'
	}
	bound01() { [ "$(own_cpus)" = "0 1;1 1;" ] && [ "$(worker_cpus)" = "0;1;" ]; }
	check "tpg poll_cpu: with poll_cpu empty, each device spins on its TPG's CPU (devices: $(own_cpus) workers: $(worker_cpus))" \
		wait_for 10 bound01
	# The operator's view (virtio-sqcq-stat): both devices in SQ/CQ,
	# spinning on their TPG's CPU, with requests and the poller's CPU time;
	# then one interval's rates.
	# It reads configfs, not debugfs: run in a mount namespace without it.
	STAT=$(dirname "${BASH_SOURCE[0]}")/../../switch/virtio-sqcq-stat
	st=$(unshare -m sh -c "umount -l /sys/kernel/debug && ! [ -e /sys/kernel/debug/vhost_scsi_sqcq ] && '$STAT'" 2>&1)
	echo "$st" | sed 's/^/  stat| /'
	check "virtio-sqcq-stat (no debugfs): both devices in SQ/CQ, spinning on CPU 0 and 1, with requests" \
		[ "$(echo "$st" | awk '$5 == "sqcq" && $6 > 0 && $9 == "spin" { print $10 }' | sort | tr '\n' ' ')" = "0 1 " ]
	ivl=$("$STAT" -w 1 -c 1 2>&1 | awk '/req\/s/ { n++ } n == 1 && $5 == "sqcq" && $6 > 0 { k++ } END { print k + 0 }')
	check "virtio-sqcq-stat -w 1 -c 1: both devices with requests per second in the interval ($ivl)" [ "$ivl" = 2 ]
	echo 0 >"$(attr 2)"
	bound00() { [ "$(own_cpus)" = "0 1;0 1;" ] && [ "$(worker_cpus)" = "0;0;" ]; }
	check "tpg poll_cpu: a write under load moves that device's worker (devices: $(own_cpus) workers: $(worker_cpus))" \
		wait_for 10 bound00
	echo >"$(attr 1)"
	echo >"$(attr 2)"
	all_cpus="0-$(($(nproc --all) - 1))"
	unbound() { [ "$(own_cpus)" = "none 0;none 0;" ] && [ "$(worker_cpus)" = "$all_cpus;$all_cpus;" ]; }
	check "tpg poll_cpu: emptied, poll_cpu (empty) again: serve-only, unbound (devices: $(own_cpus) workers: $(worker_cpus))" \
		wait_for 10 unbound
	kill -USR1 "${pids[@]}" 2>/dev/null
	rc=0
	for i in 0 1; do
		wait "${pids[$i]}" || rc=$((rc + 1))
	done
	res=$(grep -h '^ios=' /tmp/sqcq-own.[12] | awk -F'[= ]' '{ n += $2; e += $12 } END { print n + 0, e + 0 }')
	check "tpg poll_cpu: both devices verify across the moves ($rc failed; I/Os and errors: $res)" \
		[ "$rc" = 0 -a "${res#* }" = 0 -a "${res% *}" -gt 0 ]
	for i in 1 2 3 4; do
		t=$C/vhost_sqcq/$(ww $i)
		rm "$t/tpgt_1/lun/lun_0/sh"
		echo NULL >"$t/tpgt_1/nexus"
		rmdir "$t/tpgt_1/lun/lun_0" "$t/tpgt_1" "$t" $C/core/rd_mcp_0/sh$i
	done
	echo >$P/poll_cpu
	echo 20000 >$P/poll_idle_us
	echo 0 >$P/poll_shared
else
	fail "shared pollers (needs 2 CPUs)"
fi

section 4d
# 4d. The worker belongs to the VM.  The client (the VMM) runs in a
# cgroup with cpu.max at 20% of a CPU.  Its device's worker must be in that
# cgroup (a thread of the client where the kernel has vhost_task, else a
# kthread attached to the client's cgroups), its CPU time, polling
# included, must count in the cgroup's cpu.stat, and cpu.max must throttle
# it: a worker outside would spin unthrottled, far above the cgroup's use.
if [ $vmcg = unsupported ]; then
	echo "# 4d (the worker in the VM's cgroup): not run on $(uname -r): no cgroup support"
elif [ $vmcg = ready ]; then
	echo 200000 >$P/poll_idle_us
	# shellcheck disable=SC2016
	sh -c 'echo $$ >'"$VMCG"'/cgroup.procs && exec "$0" "$@"' "$CLIENT" \
		/dev/vhost-scsi-sqcq $W -s -q 1 -d 4 -m verify -t 20 -i 200000 \
		>/tmp/sqcq-cg.out 2>&1 &
	pid=$!
	polling() { grep -qs "^mode: sqcq" $DBG/dev*/queues; }
	wait_for 60 polling
	wtid=$(worker_pid)
	cgstat() { sed -n "s/^$1 //p" $VMCG/cpu.stat; }
	# ticks TID: the user + system clock ticks of thread TID.
	ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }
	if sqcq_vhost_task; then
		check "vhost_task kernel: the worker ($wtid) is a thread of its owner ($pid)" \
			[ -n "$wtid" -a -d "/proc/$pid/task/$wtid" ]
	else
		check "no vhost_task: the worker ($wtid) is a kthread" \
			[ -n "$wtid" -a "$(awk '/^PPid:/ { print $2 }' "/proc/$wtid/status" 2>/dev/null)" = 2 ]
	fi
	check "the worker is in the owner's cgroup ($(cat "/proc/$wtid/cgroup" 2>/dev/null))" \
		grep -qx '0::/sqcq-vm' "/proc/$wtid/cgroup"
	# The cgroup's window holds the worker's: usage read first at the
	# start and last at the end (each read takes a while under TCG).
	u0=$(cgstat usage_usec) t0=$(cgstat nr_throttled) w0=$(ticks "$wtid")
	sleep 5
	w1=$(ticks "$wtid") t1=$(cgstat nr_throttled) u1=$(cgstat usage_usec)
	hz=$(getconf CLK_TCK)
	wus=$(((${w1:-0} - ${w0:-0}) * 1000000 / hz))
	echo "  VM cgroup: usage $u0 -> $u1 us, nr_throttled $t0 -> $t1, memory.current $(cat $VMCG/memory.current); worker $wus us"
	check "the worker ran meanwhile ($wus us of CPU in 5 s)" [ "$wus" -ge 50000 ]
	check "the worker's CPU time counts in the VM's cgroup (usage +$((u1 - u0)) us, worker $wus us)" \
		[ $((u1 - u0 + 1000000 / hz)) -ge "$wus" ]
	check "cpu.max throttles the VM, its poller included ($t0 -> $t1)" [ "${t1:-0}" -gt "${t0:-0}" ]
	wait $pid
	rc=$?
	res=$(grep '^ios=' /tmp/sqcq-cg.out)
	check "in a cgroup: verify (rc $rc, $res)" [ $rc = 0 -a "$(field errors "$res")" = 0 ]
	echo 20000 >$P/poll_idle_us
	cg_empty() { [ -z "$(cat $VMCG/cgroup.procs)" ]; }
	wait_for 10 cg_empty ||
		fail "VM cgroup empty after the client exited ($(cat $VMCG/cgroup.procs | tr '\n' ' '))"
else
	fail "a cgroup for the VM (cgroup2 with the cpu and memory controllers)"
fi

section 5
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
[ "$(workers)" = 0 ] && ! ls -d $DBG/dev* >/dev/null 2>&1 &&
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
[ $vmcg = ready ] && { rmdir $VMCG || fail "VM cgroup removed at the end"; }
rmmod $MOD && pass "rmmod" || fail "rmmod"
exit $((fails > 0))
