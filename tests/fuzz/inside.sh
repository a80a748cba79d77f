#!/bin/bash
# shellcheck disable=SC2317 # helpers run in the background
# Runs INSIDE the test VM as root (tests/fuzz/run.sh starts it).
#
#  1. load the target core and the host module; build an LIO target for
#     fabric vhost_sqcq on rd_mcp ramdisks: WWPN A (tpgt_1: LUNs 0 and 1,
#     tpgt_2: LUN 0) for the fuzzer's device, WWPN B (tpgt_1: LUN 0) for
#     the worker processes it kills;
#  2. a file of random bytes the fuzzer maps MAP_PRIVATE read-only as guest
#     memory (a pristine copy is kept to compare with at the end);
#  3. in the background, LUNs unlinked and relinked (A tpgt_1 lun_1,
#     A tpgt_2 lun_0, a LUN 2 added and removed) at random intervals;
#  4. the fuzzer in rounds of random length until SECONDS are used; about
#     half of the rounds are SIGKILLed at a random point; a fuzzer that
#     does not end (or, killed, does not exit) in time is a hang;
#  5. no worker thread and no device left, the file unchanged, the zero
#     page zero, the target torn down, rmmod works.
# All randomness (round lengths, kill points, relink timing) from SEED.
#
# Usage: inside.sh KO FUZZ SEED SECONDS KERNEL_ID [THREADS [HANG_S]]
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/target.sh
. "$HERE/../lib/target.sh"

KO=${1:?KO}
FUZZ=${2:?FUZZ}
SEED=${3:?SEED}
TOTAL=${4:?SECONDS}
KID=${5:?KERNEL_ID}
THREADS=${6:-4}
HANG=${7:-90}
MOD=vhost_scsi_sqcq
FAB=vhost_sqcq
WA=naa.5001405000000f01
WB=naa.5001405000000f02
LUN_MB=16
CFS=$SQCQ_TARGET_CFS
PREFIX=fuzz
REPLAY="tests/fuzz/run.sh --kernel $KID --seed $SEED --seconds $TOTAL"
# shellcheck source=tests/lib/check.sh
. "$HERE/../lib/check.sh"
# Every FAIL line carries the seed.
fail() {
	echo "FAIL: $PREFIX $* (seed $SEED; replay: $REPLAY)"
	fails=$((fails + 1))
}

# shellcheck source=tests/lib/worker.sh
. "$HERE/../lib/worker.sh"
workers() { sqcq_workers; }
no_devices() { [ -d "/sys/kernel/debug/$MOD" ] && ! ls -d "/sys/kernel/debug/$MOD"/dev* >/dev/null 2>&1; }
exited() {
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)
	[ -z "$st" ] || [ "$st" = Z ]
}
# The kernel stacks of a process's threads (where a hang sits).
stacks() {
	local t
	for t in /proc/"$1"/task/*; do
		echo "# task ${t##*/} ($(cat "$t/comm" 2>/dev/null)):"
		sed 's/^/#   /' "$t/stack" 2>/dev/null
	done
}

# Kernel reports (what the rig fails a run on, plus the OOM killer): after
# each round the new ones are printed with context, named by round.
BAD='WARNING:|BUG:|Oops|general protection fault|Kernel panic|kernel BUG|soft lockup|hard LOCKUP|hung_task|blocked for more than|rcu: INFO:|detected stalls|UBSAN:|KASAN:|KFENCE:|list_(add|del) corruption|refcount_t:|invoked oom-killer|Out of memory'
reports_seen=0
new_reports() {
	local n ln
	n=$(dmesg | grep -cE "$BAD")
	[ "$n" -gt "$reports_seen" ] || return 0
	echo "# round $1: $((n - reports_seen)) new kernel report line(s); the first with context:"
	ln=$(dmesg | grep -nE "$BAD" | sed -n "$((reports_seen + 1))p" | cut -d: -f1)
	dmesg | sed -n "$((ln > 3 ? ln - 3 : 1)),$((ln + 45))p" | sed 's/^/#   /'
	reports_seen=$n
}

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
echo "# fuzz: kernel $(uname -r), seed $SEED, $TOTAL s, $THREADS threads, hang limit $HANG s"

# ---- 1. module and target -----------------------------------------------------
check modprobe-target-core modprobe -a scsi_common target_core_mod || exit 1
if ! insmod "$KO"; then
	fail "insmod $KO"
	exit 1
fi
pass "insmod ($(uname -r))"
ok=1
check target-setup sqcq_target_tpg $FAB $WA 1 2 $LUN_MB || ok=0
[ "$ok" = 1 ] && { check target-setup-tpgt2 sqcq_target_tpg $FAB $WA 2 1 $LUN_MB || ok=0; }
[ "$ok" = 1 ] && { check target-setup-second-wwpn sqcq_target_tpg $FAB $WB 1 1 $LUN_MB || ok=0; }
if [ "$ok" != 1 ]; then
	fail "fuzz not run (no target)"
	exit 1
fi

# ---- 2. the file mapped as guest memory ------------------------------------------
FILE=/tmp/fuzz-mapped
if ! { head -c $((1 << 20)) /dev/urandom >"$FILE.orig" && cp "$FILE.orig" "$FILE"; }; then
	fail "mapped file"
	exit 1
fi

# ---- 3. LUN unlink/relink under load ------------------------------------------------
STOPF=/tmp/fuzz-relink.stop
COUNTF=/tmp/fuzz-relink.count
rm -f "$STOPF" "$COUNTF"
relink_loop() {
	local n=0 errs=0 dir rd l2=0 first=""
	RANDOM=$((SEED % 32768 + 1))
	while [ ! -e "$STOPF" ]; do
		case $((RANDOM % 4)) in
		0 | 1) dir=$CFS/$FAB/$WA/tpgt_1/lun/lun_1 ;;
		2) dir=$CFS/$FAB/$WA/tpgt_2/lun/lun_0 ;;
		3) dir="" ;;
		esac
		if [ -n "$dir" ]; then
			rd=$(readlink -f "$dir/backstore")
			if rm "$dir/backstore" 2>/dev/null; then
				nap "0.$((RANDOM % 10))"
				ln -s "$rd" "$dir/backstore" 2>/dev/null ||
					{ errs=$((errs + 1)); first=${first:-"relink $dir"}; }
			else
				errs=$((errs + 1)); first=${first:-"unlink $dir"}
			fi
		elif [ "$l2" = 0 ]; then
			if sqcq_target_add_lun $FAB $WA 1 2 1 2>/dev/null; then
				l2=1
			else
				errs=$((errs + 1)); first=${first:-"add lun_2"}
			fi
		else
			if sqcq_target_del_lun $FAB $WA 1 2 2>/dev/null; then
				l2=0
			else
				errs=$((errs + 1)); first=${first:-"del lun_2"}
			fi
		fi
		n=$((n + 1))
		echo "$n $errs $first" >"$COUNTF"
		nap "0.$((RANDOM % 10))$((RANDOM % 10))"
	done
	[ "$l2" = 1 ] && sqcq_target_del_lun $FAB $WA 1 2
}
relink_loop &
relink_pid=$!

# ---- 3b. poll settings changed under load -----------------------------------------
# poll_cpu set or empty, poll_shared on or off, poll_idle_us short or long,
# at random intervals from SEED: devices move between their own pollers,
# the shared poller (parked, handed back, let go) and classic sleeps while
# the fuzzer tears them down.
PSTOPF=/tmp/fuzz-poll.stop PCOUNTF=/tmp/fuzz-poll.count
PP=/sys/module/$MOD/parameters
rm -f "$PSTOPF" "$PCOUNTF"
poll_loop() {
	local n=0 errs=0 cpus
	cpus=$(($(nproc) - 1))
	RANDOM=$((SEED % 32768 + 2))
	while [ ! -e "$PSTOPF" ]; do
		case $((RANDOM % 4)) in
		0) echo "" >$PP/poll_cpu || errs=$((errs + 1)) ;;
		1) echo $((RANDOM % (cpus + 1))) >$PP/poll_cpu || errs=$((errs + 1)) ;;
		2) echo $((RANDOM % 2)) >$PP/poll_shared || errs=$((errs + 1)) ;;
		3) echo $(((RANDOM % 2) * 100000 + 50)) >$PP/poll_idle_us || errs=$((errs + 1)) ;;
		esac
		n=$((n + 1))
		echo "$n $errs" >"$PCOUNTF"
		nap "0.$((RANDOM % 10))$((RANDOM % 10))"
	done
	echo "" >$PP/poll_cpu
	echo 1000 >$PP/poll_idle_us
}
poll_loop &
poll_pid=$!

# ---- 4. fuzzer rounds ---------------------------------------------------------------
RANDOM=$((SEED % 32768))
t_start=$SECONDS
round=0 killed=0 finished=0 hung=0
while :; do
	left=$((TOTAL - (SECONDS - t_start)))
	[ "$left" -ge 5 ] || [ "$round" = 0 ] || break
	[ "$left" -ge 5 ] || left=5
	len=$((10 + RANDOM % (left / 2 + 1)))
	[ "$len" -le "$left" ] || len=$left
	kill_at=0
	# About half the rounds end by SIGKILL at a random point (not the
	# last one: its end-of-run checks must run).
	if [ $((RANDOM % 2)) = 0 ] && [ $((left - len)) -ge 5 ]; then
		kill_at=$((1 + RANDOM % (len + 5)))
	fi
	log=/tmp/fuzz-round-$round.log
	"$FUZZ" --seed "$SEED" --round "$round" --seconds "$len" --hang "$HANG" \
		--threads "$THREADS" --kernel "$KID" --file "$FILE" \
		--wwpn $WA --wwpn2 $WB >"$log" 2>&1 &
	fpid=$!
	limit=$((len + HANG + 120))
	[ "$kill_at" = 0 ] || limit=$kill_at
	end=$((SECONDS + limit))
	while ! exited "$fpid" && [ "$SECONDS" -lt "$end" ]; do
		nap 0.5
	done
	how=finished
	if ! exited "$fpid"; then
		if [ "$kill_at" = 0 ]; then
			how=hung
			echo "# round $round: the fuzzer did not end in $limit s:"
			stacks "$fpid"
		else
			how=killed
		fi
		kill -9 "$fpid" 2>/dev/null
		if ! wait_for 90 exited "$fpid"; then
			fail "hang (round $round: the fuzzer, SIGKILLed, did not exit in 90 s: stuck in the kernel)"
			stacks "$fpid"
			hung=1
		fi
	fi
	[ "$hung" = 1 ] || wait "$fpid" 2>/dev/null
	frc=$?
	# The fuzzer's own lines; its PASS lines named by round.
	sed -e "s/^PASS: fuzz /PASS: fuzz r$round-/" "$log"
	case "$how" in
	finished)
		finished=$((finished + 1))
		if [ "$frc" != 0 ] && ! grep -q '^FAIL:' "$log"; then
			fail "round $round (fuzzer status $frc without a FAIL line)"
		fi
		fails=$((fails + $(grep -c '^FAIL:' "$log")))
		;;
	killed)
		killed=$((killed + 1))
		echo "# round $round: SIGKILLed after $kill_at s"
		fails=$((fails + $(grep -c '^FAIL:' "$log")))
		;;
	hung)
		fail "hang (round $round: the fuzzer did not end $limit s after it started)"
		fails=$((fails + $(grep -c '^FAIL:' "$log")))
		;;
	esac
	new_reports "$round"
	round=$((round + 1))
	[ "$hung" = 0 ] || break
done
touch "$STOPF" "$PSTOPF"
wait_for 30 exited "$relink_pid" || kill -9 "$relink_pid"
wait "$relink_pid" 2>/dev/null
wait_for 30 exited "$poll_pid" || kill -9 "$poll_pid"
wait "$poll_pid" 2>/dev/null
read -r npoll nperr <"$PCOUNTF" 2>/dev/null || { npoll=0 nperr=0; }
check "poll-settings-under-load ($npoll changes, $nperr refused)" \
	[ "${npoll:-0}" -ge 1 -a "${nperr:-1}" = 0 ]
read -r nrel nerr first <"$COUNTF" 2>/dev/null || { nrel=0 nerr=0 first=""; }
echo "# fuzz: $round rounds ($finished ran to the end, $killed SIGKILLed) in $((SECONDS - t_start)) s"
check rounds-ran-to-end [ "$finished" -ge 1 ]
if [ "${nrel:-0}" -ge 1 ] && [ "${nerr:-0}" = 0 ]; then
	pass "lun-relink-under-load ($nrel configfs changes)"
else
	fail "lun-relink-under-load ($nrel changes, $nerr failed; first: $first)"
fi

# ---- 5. nothing left behind ----------------------------------------------------------
if [ "$hung" = 1 ]; then
	fail "cleanup (skipped: a fuzzer process is stuck in the kernel)"
	exit 1
fi
no_workers() { [ "$(sqcq_workers)" = 0 ]; }
check no-worker-left wait_for 60 no_workers
check no-device-left wait_for 10 no_devices
if cmp -s "$FILE.orig" "$FILE"; then
	pass "mapped-file-unchanged-at-end"
else
	fail "mapped-file-unchanged-at-end ($(cmp -l "$FILE.orig" "$FILE" | wc -l) bytes differ; first: $(cmp "$FILE.orig" "$FILE" 2>&1 | head -n 1))"
fi
zl=$("$FUZZ" --check-zero 2>&1)
case "$zl" in
PASS:*) pass "zero-page-intact-at-end" ;;
*) fail "zero-page-intact-at-end (${zl#FAIL: fuzz zero-page-intact })" ;;
esac
echo "# module log lines: $(dmesg | grep -c "$MOD: ") ($(dmesg | grep "$MOD: " | sed 's/.*\] //; s/[0-9]\+/N/g' | sort | uniq -c | sort -rn | head -n 8 | awk '{ $1 = $1 "x"; print }' | paste -sd ';' -))"
check target-teardown sqcq_target_teardown $FAB $WA
check target-teardown-second-wwpn sqcq_target_teardown $FAB $WB
rmdir "$CFS/$FAB" 2>/dev/null
# What the shared pollers did meanwhile (poll_cpu and poll_shared moved).
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
sed 's/^/# shared pollers: /' "/sys/kernel/debug/$MOD/pollers" 2>/dev/null
check rmmod wait_for 30 rmmod $MOD
check unloaded bash -c "! [ -d /sys/module/$MOD ]"
exit $((fails > 0))
