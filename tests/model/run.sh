#!/bin/bash
# Exhaustive check of the NEED_WAKEUP handshake model (sqcq_handshake.pml)
# with spin, plus the mutations that must break it.
#
#   tests/model/run.sh
#
# Prints one line per check, "PASS: model <variant> (...)" or "FAIL: ...",
# with the states explored, then "model: N passed, N failed"; exits non-zero
# on any failure.  Installs spin and gcc itself (Debian, root) if missing.
# Work files, pan outputs and error trails (with a readable replay,
# trail.txt) go to $SQCQ_MODEL_OUT (default tests/model/out, ignored).
#
# Checks:
#   correct                  both directions, host poller also completes
#                            (N=3 requests, QD=2, 2-entry store buffers,
#                            graceful stop allowed): 0 errors, full search
#   correct_split_host       host completions from a second host CPU (N=2)
#   correct_shared           the host's shared poller (poll_shared): the
#                            worker parks, the shared poller on its own CPU
#                            hands it back or lets it go with the handshake
#                            (N=3, QD=2): 0 errors; _liveness: N=2, QD=1
#   no_park_mb_shared        the worker parks without set_current_state()'s
#                            barrier -> error (also .deadlock)
#   no_{recheck,consumer_mb}_shared  the shared poller's handshake broken
#                            -> error
#   correct_kick_clear       the host's kick handler clears SQ_NEED_WAKEUP
#                            before it wakes the poller (also _liveness,
#                            _shared): 0 errors
#   kick_wake_first          it wakes first, then clears -> error (also
#                            .deadlock)
#   correct_liveness         LTL <>(all completed), acceptance cycles, weak
#                            fairness (N=2, QD=1)
#   vacuity                  every interesting point is reachable in the
#                            correct model (sleep+kick, sleep+irq, re-check
#                            hits, stopped-mode wakeup, publishes that skip
#                            the notification)
#   no_producer_mb           sqcq_publish() without its sqcq_mb()     -> error
#   no_consumer_mb           sqcq_prepare_sleep() without sqcq_mb()   -> error
#   no_recheck               sqcq_prepare_sleep() without the re-read -> error
#   no_stop_mb               sqcq_stop_polling() without sqcq_mb()    -> error
#   <mutation>_{sq,cq}       the same in one direction only           -> error
#   <mutation>.deadlock      without the lost-wakeup monitor: the system
#                            hangs (invalid end state)                -> error
set -u

here=$(cd "$(dirname "$0")" && pwd)
out=${SQCQ_MODEL_OUT:-$here/out}
jobs=${SQCQ_MODEL_JOBS:-2}
model=sqcq_handshake.pml

ensure_deps() {
	# shellcheck source=tests/lib/apt.sh
	. "$here/../lib/apt.sh"
	sqcq_install spin gcc libc6-dev 2>/dev/null
	command -v spin >/dev/null 2>&1 || { echo "FAIL: model setup (no spin)"; exit 1; }
}

ensure_deps
mkdir -p "$out" || exit 1
t_start=$(date +%s%N)

# check NAME EXPECT "SPIN -D FLAGS" "PAN RUN FLAGS" [CC FLAGS]
#   EXPECT: ok | lost (lost-wakeup assertion) | deadlock (invalid end state)
#           | reach (all REACH points hit)
# Runs in the background; the verdict is written to $out/NAME/verdict.
check() {
	local name=$1 expect=$2 defs=$3 runflags=$4 cc=${5:--O0}
	local d=$out/$name
	rm -rf "$d"
	mkdir -p "$d"
	cp "$here/$model" "$d/"
	(
		cd "$d" || exit 1
		t0=$(date +%s%N)
		# shellcheck disable=SC2086 # flag lists
		if ! spin -a $defs $model >spin.out 2>&1; then
			echo "FAIL: model $name (spin -a failed, see $d/spin.out)" >verdict
			exit 0
		fi
		# shellcheck disable=SC2086
		if ! gcc $cc -w -o pan pan.c >cc.out 2>&1; then
			echo "FAIL: model $name (pan does not compile, see $d/cc.out)" >verdict
			exit 0
		fi
		# shellcheck disable=SC2086
		./pan $runflags >pan.out 2>&1
		t1=$(date +%s%N)
		ms=$(((t1 - t0) / 1000000))
		secs="$((ms / 1000)).$((ms % 1000 / 100)) s"
		errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)
		states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | head -1)
		depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out | head -1)
		first=$(grep -m1 '^pan:[0-9]*:' pan.out | sed 's/^pan:[0-9]*: *//')
		truncated=0
		grep -q 'max search depth too small' pan.out && truncated=1
		incomplete=0
		grep -q 'Search not completed' pan.out && incomplete=1
		info="${states:-?} states, depth ${depth:-?}, $secs"
		case $expect in
		ok)
			if [ "${errors:-x}" = 0 ] && [ $truncated = 0 ] && [ $incomplete = 0 ]; then
				echo "PASS: model $name ($info, errors: 0)" >verdict
			else
				echo "FAIL: model $name ($info, errors: ${errors:-?}, truncated=$truncated: ${first:-see $d/pan.out})" >verdict
			fi
			;;
		lost | lost-sq | lost-cq | deadlock)
			# Only the monitor's lost-wakeup assertion counts (its
			# LOST_SQ / LOST_CQ name sq_decided / cq_decided; the
			# final state's assertion names neither), and in the
			# direction the mutant broke where it broke one.
			case $expect:$first in
			"lost:assertion violated"*[sc]q_decided*) hit=1 ;;
			"lost-sq:assertion violated"*sq_decided*) hit=1 ;;
			"lost-cq:assertion violated"*cq_decided*) hit=1 ;;
			"deadlock:invalid end state"*) hit=1 ;;
			*) hit=0 ;;
			esac
			if [ "${errors:-0}" -ge 1 ] 2>/dev/null && [ -f $model.trail ] &&
				[ $hit = 1 ]; then
				# shellcheck disable=SC2086
				spin -t -p -g -l $defs $model >trail.txt 2>&1
				case $first in
				*h_sleep*) what="SQ lost wakeup: host poller asleep, no kick" ;;
				*g_sleep*) what="CQ lost wakeup: guest poller asleep, no interrupt" ;;
				*) what="deadlock: a poller asleep forever" ;;
				esac
				echo "PASS: model $name (error found as required: $what; $info; trail $d/trail.txt)" >verdict
			else
				echo "FAIL: model $name (no lost wakeup found; $info, errors: ${errors:-?}: ${first:-none})" >verdict
			fi
			;;
		reach)
			got=$(grep -o 'assertion violated (.*==0)' pan.out |
				sed 's/assertion violated (\(.*\)==0)/\1/' | sort -u |
				while read -r e; do echo $((e)); done | sort -un | tr '\n' ' ')
			if [ "$got" = "1 2 3 4 5 6 7 " ] && [ $truncated = 0 ]; then
				echo "PASS: model $name (all 7 points reached; $info)" >verdict
			else
				echo "FAIL: model $name (reached: ${got:-none}; want 1..7; $info)" >verdict
			fi
			;;
		esac
	) &
}

# Keep at most $jobs checks running.
throttle() {
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
}

names=()
add() {
	throttle
	names+=("$1")
	check "$@"
}

DEPTH=-m100000
# The big ones first (the longest, liveness, at once), so the small ones
# fill in around them.
add correct_liveness ok "-DLIVENESS -DN=2 -DQD=1" "-a -f $DEPTH" "-O0 -DNFAIR=3"
add correct ok "" "$DEPTH" "-O0 -DSAFETY"
add correct_split_host ok "-DSPLIT_HOST -DN=2 -DQD=1" "$DEPTH" "-O0 -DSAFETY"
# The shared poller (poll_shared): the handshake done on a parked
# worker's behalf from another CPU.
add correct_shared_liveness ok "-DSHARED -DLIVENESS -DN=2 -DQD=1" "-a -f $DEPTH" "-O0 -DNFAIR=3"
add correct_shared ok "-DSHARED" "$DEPTH" "-O0 -DSAFETY"
add no_park_mb_shared lost-sq "-DSHARED -DBROKEN_PARK_MB=1" "$DEPTH" "-O0 -DSAFETY"
add no_park_mb_shared.deadlock deadlock "-DSHARED -DBROKEN_PARK_MB=1 -DNO_MONITOR" "$DEPTH" "-O0 -DSAFETY"
add no_recheck_shared lost-sq "-DSHARED -DBROKEN_RECHECK=1" "$DEPTH" "-O0 -DSAFETY"
add no_consumer_mb_shared lost-sq "-DSHARED -DBROKEN_CONSUMER_MB=1" "$DEPTH" "-O0 -DSAFETY"
# The host's kick handler clears SQ_NEED_WAKEUP before it wakes the
# poller (vhc_kick_wake()); waking first loses a wakeup.
add correct_kick_clear ok "-DKICK_CLEAR" "$DEPTH" "-O0 -DSAFETY"
add correct_kick_clear_liveness ok "-DKICK_CLEAR -DLIVENESS -DN=2 -DQD=1" "-a -f $DEPTH" "-O0 -DNFAIR=3"
add correct_kick_clear_shared ok "-DKICK_CLEAR -DSHARED" "$DEPTH" "-O0 -DSAFETY"
add kick_wake_first lost-sq "-DKICK_CLEAR -DBROKEN_KICK_ORDER=1" "$DEPTH" "-O0 -DSAFETY"
add kick_wake_first.deadlock deadlock "-DKICK_CLEAR -DBROKEN_KICK_ORDER=1 -DNO_MONITOR" "$DEPTH" "-O0 -DSAFETY"
add vacuity reach "-DREACH=99" "-c0 $DEPTH" "-O0 -DSAFETY"
for m in producer_mb consumer_mb recheck stop_mb; do
	M=${m^^}
	add no_$m lost "-DBROKEN_$M=3" "$DEPTH" "-O0 -DSAFETY"
done
for m in producer_mb consumer_mb recheck; do
	M=${m^^}
	add no_${m}_sq lost-sq "-DBROKEN_$M=1" "$DEPTH" "-O0 -DSAFETY"
	add no_${m}_cq lost-cq "-DBROKEN_$M=2" "$DEPTH" "-O0 -DSAFETY"
	add no_$m.deadlock deadlock "-DBROKEN_$M=3 -DNO_MONITOR" "$DEPTH" "-O0 -DSAFETY"
done
wait

npass=0
nfail=0
for n in "${names[@]}"; do
	if [ -f "$out/$n/verdict" ]; then
		v=$(cat "$out/$n/verdict")
	else
		v="FAIL: model $n (no verdict)"
	fi
	echo "$v"
	case $v in PASS:*) npass=$((npass + 1)) ;; *) nfail=$((nfail + 1)) ;; esac
done
ms=$((($(date +%s%N) - t_start) / 1000000))
echo "model: took $((ms / 1000)).$((ms % 1000 / 100)) s"
echo "model: $npass passed, $nfail failed"
[ "$nfail" -eq 0 ]
