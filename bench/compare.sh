#!/bin/bash
# bench/compare.sh [--kernel ID] [--runtime S] [--rounds N] [--short] [--recipe]
#                  [--points LIST] [--log FILE]
#
# Classic vs SQ/CQ side by side, in one run, through unmodified QEMU: the
# test VM (L1, tests/e2e/run.sh) loads vhost_scsi_sqcq and builds an LIO
# ramdisk target; a nested guest (L2) gets it as vhost-scsi-pci and loads
# virtio_scsi_sqcq alternately with sqcq=0 and sqcq=1, --rounds times each
# (default 5; bench/compare-l2.sh), with fio 4 KiB libaio randread/randwrite
# at QD1 and QD32, 1 and 4 jobs (--recipe: other points, below).  Prints one markdown table: per point the
# median IOPS of each mode, the median of the per-round ratios and their
# spread (min-max), kicks and interrupts per I/O from the guest driver's
# debugfs counters, L1's KVM exits per I/O (the nested guest's VM exits)
# and L1's busy CPU time per I/O (every thread of both sides, pollers
# included), the mode each run negotiated, and the poll threads' CPU time
# while idle after the last SQ/CQ points.  A second table: why the pollers
# slept.  A third: L1's VM exits per I/O by exit reason (bench/l1-exits.sh),
# classic and SQ/CQ side by side with their difference.  A point whose mode
# no longer held afterwards (compare-l2.sh reads it after every point: an
# SQ/CQ run that fell back to classic, or a classic one that used the
# doorbells) is left out of every median and marked "(fell back)".
#
# --short: fewer points, 3 s each, 3 rounds.  --points replaces the points
# of the form chosen ("RW:IODEPTH:JOBS[:hipri] ...", as CMP_POINTS of
# bench/compare-l2.sh; the demo picks two per table).  Both modules
# run with their defaults (what a user gets without tuning); more insmod
# parameters: CMP_HOST_PARAMS (host), CMP_GUEST_PARAMS (guest, both modes).
# The defaults table has a third mode in the same rounds, the peer an
# operator turns on today to cut wakeup costs: classic with guest
# halt-polling (L2 boots with the cpuidle-haltpoll driver; its polling
# state is on for that mode only, bench/compare-l2.sh), in a table of its
# own; and a fourth, Debian's in-tree pair (vhost_scsi in L1 beside ours,
# on a second device of L2 that the in-tree virtio_scsi drives in that
# mode), in another.  CMP_HALTPOLL=0 and CMP_INTREE=0 leave them out;
# --recipe has neither.  CMP_CROSS=1 adds a fifth beside the in-tree pair:
# our guest driver (classic) on the in-tree host, in a table that places a
# gap between the pairs on the host or the guest side.
#
# --recipe: the deployment the design is for (README, "Tuning"), both
# modes in it: L1 on three vCPUs (CMP_L1_SMP), its CPU 0 given to the
# host's poll thread (poll_cpu=0, poll_shared=0: it serves the requests
# itself), L2's QEMU alone on CPU 1 (nohz_full, tests/e2e/run.sh
# E2E_L2_ISOLATE), LIO's work on the housekeeping CPU 2 (the host module
# submits a poll CPU's requests there), and in the guest a poll queue
# (num_queues=2, poll_queues=1) that fio's io_uring --hipri points poll
# from the waiting task: the limit case, no kick and no interrupt.  The
# guest gets no poll thread: L2 has one vCPU, none to give it.  Scaled to
# TCG's time: the host's poll_idle_us is 100000 (100 ms, where hardware
# would use its default 1000): requests of the nested guest under TCG come
# some hundred times further apart than on hardware.  CMP_HOST_PARAMS and
# CMP_GUEST_PARAMS replace these settings.
# CMP_L2_SMP: the nested guest's vCPUs (default 1, as in the e2e stage: on
# two, the emulated nested guest broke in most runs on the 2-core machine).
# When the emulator breaks L1 or L2 (tests/e2e/verdict.sh), the rounds
# complete by then stay and a new L1 runs the rest (CMP_RETRIES, default 3,
# such restarts); a round it broke is left out.  The run's output stays in
# out/logs/compare-last.log; --log FILE prints the tables of such a file
# again (with the options of its run).
# CMP_PERF=1: L1 profiles its CPUs over each point (perf record -a -g, the
# machine's perf over L1's 9p root); a perf.data file a point, with L1's
# kallsyms, in out/logs/e2e-sqcq-sqcq-*/perf/ (tests/e2e/l1.sh), for
# perf report --kallsyms: where a mode's host-side CPU time goes.
# CMP_PERF=sched records the scheduler's switches and wakeups instead
# (perf script: who waits for whom in a request's path).
# Only ratios and counts mean anything here (TCG, nested): nothing asserts
# a timing.  Exit status 0 when both modes ran every point, negotiated
# what they should and kept it to the end of every point.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

id=6.1 rt=10 rounds=5 recipe=0 short=0
points="randread:1:1 randread:32:1 randread:32:4 randwrite:1:1 randwrite:32:1 randwrite:32:4"
rpoints="randread:1:1 randread:32:1 randwrite:1:1 randread:1:1:hipri randread:32:1:hipri randwrite:1:1:hipri"
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	--runtime) rt=$2 rt_set=1; shift 2 ;;
	--rounds) rounds=$2 rounds_set=1; shift 2 ;;
	--short) short=1; shift ;;
	--recipe) recipe=1; shift ;;
	--points) pick=$2; shift 2 ;;
	--log) from=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "${0##*/}: unknown option $1" >&2; exit 2 ;;
	esac
done
if [ "$short" = 1 ]; then
	[ -n "${rt_set:-}" ] || rt=3
	[ -n "${rounds_set:-}" ] || rounds=3
	points="randread:1:1 randread:32:1 randwrite:1:1 randwrite:32:1"
	rpoints="randread:1:1 randread:32:1 randread:1:1:hipri"
fi
hp=${CMP_HOST_PARAMS:-} gp=${CMP_GUEST_PARAMS:-} isolate=0 vopts="" title="Defaults" l1smp=${CMP_L1_SMP:-2}
modes="classic sqcq" l2append=""
if [ "$recipe" = 0 ] && [ "${CMP_HALTPOLL:-1}" = 1 ]; then
	modes="$modes haltpoll" l2append="cpuidle_haltpoll.force=1"
fi
[ "$recipe" = 1 ] || [ "${CMP_INTREE:-1}" = 0 ] || modes="$modes intree"
# CMP_CROSS=1: our guest driver (classic) on the in-tree host as well, so
# that a gap between the two pairs is placed on a side.
[ "${CMP_CROSS:-0}" = 0 ] || [[ " $modes " != *" intree "* ]] || modes="$modes cross"
if [ "$recipe" = 1 ]; then
	points=$rpoints isolate=1 vopts=num_queues=2 title="The recipe" l1smp=${CMP_L1_SMP:-3}
	hp=${CMP_HOST_PARAMS-poll_cpu=0 poll_shared=0 poll_idle_us=100000}
	gp=${CMP_GUEST_PARAMS-poll_queues=1}
fi
# The host polls only where poll_cpu names CPUs (docs/sqcq.md).
hpolls=0
[[ " $hp " =~ \ poll_cpu=[0-9] ]] && hpolls=1
[[ "$rt" =~ ^[0-9]+$ ]] || { echo "${0##*/}: --runtime takes seconds" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "${0##*/}: --rounds takes a count" >&2; exit 2; }
if [ -n "${pick:-}" ]; then
	for p in $pick; do
		[[ "$p" =~ ^rand(read|write):[1-9][0-9]*:[1-9][0-9]*(:hipri)?$ ]] ||
			{ echo "${0##*/}: --points: '$p' is not RW:IODEPTH:JOBS[:hipri]" >&2; exit 2; }
	done
	points=$pick
fi

points_n=$(wc -w <<<"$points")
modes_n=$(wc -w <<<"$modes")
# --log FILE: no run; the tables of a run whose output FILE kept (its
# "cmp-attempt" lines included), given the same options.  Without it the
# run's output is kept in out/logs/compare-last.log.
if [ -n "${from:-}" ]; then
	log=$(mktemp /tmp/sqcq-compare.XXXXXX)
	cp "$from" "$log" || exit 2
else
	mkdir -p out/logs
	log=out/logs/compare-last.log
	: >"$log"
fi
trap 'rm -f "$log.rounds"; [ -z "${from:-}" ] || rm -f "$log"' EXIT
# complete_rounds: the rounds of the log in which every mode ran every
# point (its "cmp MODE" lines), counted per L1 attempt ("cmp-attempt N"
# lines): one "ATTEMPT ROUND" line each.
complete_rounds() {
	awk -v want=$((modes_n * points_n)) '
		{ gsub(/\r/, "") }
		/^cmp-attempt / { a = $2 }
		/^cmp (classic|sqcq|haltpoll|intree|cross)(-fallback|-notclassic)? / { n[a, $12]++ }
		END { for (k in n) if (n[k] == want) { split(k, p, SUBSEP); print p[1], p[2] } }' "$log"
}
# rounds_done: done_r = the complete rounds so far, listed in $log.rounds
# for the tables.
rounds_done() {
	complete_rounds >"$log.rounds"
	done_r=$(wc -l <"$log.rounds")
}
echo "compare: $title: L1 on $l1smp vCPUs; host insmod ${hp:-(defaults)}; guest insmod ${gp:-(defaults)}${vopts:+; vhost-scsi-pci $vopts}$([ "$isolate" = 1 ] && echo "; L2 alone on L1's CPU 1")"
# One L1 (and L2) runs the rounds; when the emulator breaks it, the next
# one runs only the rounds still missing (CMP_ROUND0: the rounds done), so
# a break costs the round it hit, not the run: CMP_RETRIES (default 3)
# such L1s more at most.  A test's own failure ends the run.
set +e
done_r=0 try=0 rc=1
if [ -n "${from:-}" ]; then
	try=$(grep -c '^cmp-attempt ' "$log")
	rounds_done
	rc=0
fi
while [ -z "${from:-}" ] && [ "$done_r" -lt "$rounds" ] && [ "$try" -le "${CMP_RETRIES:-3}" ]; do
	try=$((try + 1))
	left=$((rounds - done_r))
	echo "cmp-attempt $try" >>"$log"
	E2E_L2_SCRIPT=bench/compare-l2.sh E2E_VIOMMU=0 E2E_RETRIES=0 \
	E2E_HOST_PARAMS=$hp E2E_GUEST_PARAMS=$gp E2E_L2_ISOLATE=$isolate E2E_L2_VHOST_OPTS=$vopts \
	E2E_L1_SMP=$l1smp E2E_L2_SMP=${CMP_L2_SMP:-1} CMP_RUNTIME=$rt CMP_POINTS=$points \
	CMP_ROUNDS=$left CMP_ROUND0=$done_r \
	CMP_HOST_POLLS=$hpolls CMP_MODES=$modes E2E_L2_APPEND="${E2E_L2_APPEND:-} $l2append" \
		tests/e2e/run.sh --kernel "$id" --host sqcq --guest sqcq --no-hotplug \
		--timeout $((900 + left * modes_n * (points_n * (rt + 25) + 40))) \
		--l2-timeout $((600 + left * modes_n * (points_n * (rt + 25) + 40))) 2>&1 | tee -a "$log" | grep --line-buffered -E '^(e2e|compare-l2|pass:|fail:|PASS:|FAIL:)'
	rc=${PIPESTATUS[0]}
	rounds_done
	[ "$rc" = 0 ] && break
	# run.sh says so when the emulator, not a test, broke its last attempt.
	sed -n '/^cmp-attempt '"$try"'$/,$p' "$log" | grep '^e2e: attempt [0-9]* failed in the emulator' >/dev/null || break
	echo "compare: L1 $try broke in the emulator; $done_r of $rounds rounds complete, the next L1 runs the rest"
done
[ "$rc" != 0 ] || [ "$done_r" -ge "$rounds" ] || rc=1
set -e

awk -v rt="$rt" -v rounds="$rounds" -v done="$done_r" -v tries="$try" -v title="$title" -v l1smp="$l1smp" -v hp="${hp:-defaults}" -v gp="${gp:-defaults}" '
function perio(n, d) { return d > 0 ? sprintf("%.3f", n / d) : "-" }
# mode m at point k: interrupts, L1 exits and L1 CPU microseconds per I/O
function irqio(m, k) { return perio(irqs[m, k], ios[m, k]) }
function exitio(m, k) { return perio(exits[m, k], exio[m, k]) }
function cpuio(m, k) { return perio(busy[m, k] * 10000, bzio[m, k]) }
# table_head(TITLE, COLUMNS): a "### TITLE" section (none for "") and the
# header of its table: COLUMNS separated by " | ", the first left-aligned.
function table_head(title, cols,    c, nc, i) {
	if (title != "")
		printf "\n### %s\n\n", title
	nc = split(cols, c, / \| /)
	printf "| %s |\n|---|", cols
	for (i = 2; i <= nc; i++)
		printf "---:|"
	printf "\n"
}
# median and spread of the space-separated numbers in s
function stats(s,    a, n, i, j, t) {
	n = split(s, a, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	if (!n) { med = "-"; lo = "-"; hi = "-"; return 0 }
	med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	lo = a[1]; hi = a[n]
	return n
}
# Lines from the console of the VM end in carriage returns.
{ gsub(/\r/, "") }
# Only rounds in which every mode ran every point count (complete_rounds):
# the lines of a round the emulator broke are left out.
FILENAME == ARGV[1] { keep[$1, $2] = 1; next }
/^cmp-attempt / { att = $2 }
/^cmp-exits / && !((att, $6) in keep) { next }
/^cmp [a-z-]+ / && !((att, $12) in keep) { next }
# point(rw, qd, jobs): the name of a point in the tables, in order of first sight.
function point(rw, qd, nj,    k) {
	k = rw " QD" qd " x" nj
	if (!(k in seen)) { seen[k] = 1; order[++n] = k }
	return k
}
# Points that did not keep their mode: named, left out of the medians.
/^cmp (sqcq-fallback|classic-notclassic|haltpoll-notclassic|intree-notclassic|cross-notclassic) / {
	k = point($3, $4, $5)
	fb[k] = fb[k] sprintf("%s%s round %s", fb[k] == "" ? "" : ", ",
		$2 ~ /^sqcq/ ? "SQ/CQ" : $2 ~ /^haltpoll/ ? "classic with halt-polling" : $2 ~ /^intree/ ? "the in-tree pair" : $2 ~ /^cross/ ? "our guest on the in-tree host" : "classic", $12)
}
# cmp-exits MODE RW QD JOBS ROUND IOS reason=delta...: per round and reason.
/^cmp-exits (classic|sqcq|haltpoll|intree|cross) / {
	k = point($3, $4, $5)
	m = $2; r = $6
	if ($7 <= 0 || (m, k, r) in xios) next
	xios[m, k, r] = $7; xr[m, k] = xr[m, k] " " r
	for (f = 8; f <= NF; f++) {
		split($f, kv, "=")
		xv[m, k, r, kv[1]] = kv[2]
		if (!((k, kv[1]) in xset)) { xset[k, kv[1]] = 1; xnames[k] = xnames[k] " " kv[1] }
	}
}
/^cmp (classic|sqcq|haltpoll|intree|cross) / {
	k = point($3, $4, $5)
	m = $2; r = $12
	if (m == "haltpoll") peer = 1
	if (m == "intree") tree = 1
	if (m == "cross") cross = 1
	iops[m, k, r] = $6
	allio[m, k] = allio[m, k] " " $6
	ios[m, k] += $7; kicks[m, k] += $8; irqs[m, k] += $9
	if ($10 != "-") { exits[m, k] += $10; exio[m, k] += $7 }
	if ($11 != "-") { busy[m, k] += $11; bzio[m, k] += $7 }
	# Fields 13-19: sleeps of the pollers by reason, yields, interrupts that
	# left the guest poller asleep.
	for (f = 13; f <= 19; f++)
		if (f <= NF && $f != "-") { why[m, k, f] += $f; whyio[m, k, f] += $7 }
}
/^cmp-idle guest none / { idle = "no guest poll thread (poll_cpu empty)"; next }
/^cmp-idle guest / { idle = sprintf("guest poll thread %d ticks in %d s (its sleeps %d -> %d)", $3, $4, $5, $6) }
/^cmp-idle host / { hidle = sprintf("host poll thread %s ticks in %d s", $3, $4) }
/^PASS: compare (classic|sqcq|haltpoll|intree|cross) mode-negotiated/ { mode[$3] = 1 }
function label(k) { return (k in fb) ? k " (fell back)" : k }
# ratio(a, b, k): mode a over mode b at point k, the median of the per-round
# ratios with their spread and count; "-" without a round that has both.
function ratio(a, b, k,    r, rs, rn) {
	rs = ""
	for (r = 1; r <= rounds; r++)
		if (iops[b, k, r] > 0 && iops[a, k, r] > 0)
			rs = rs " " sprintf("%.3f", iops[a, k, r] / iops[b, k, r])
	rn = stats(rs)
	return rn ? sprintf("%.2f (%.2f-%.2f, %d)", med, lo, hi, rn) : "-"
}
# xmed(m, k, name): median over the rounds of mode m at point k of that
# reason: exits per I/O (0 in a round without it); "" without rounds.
function xmed(m, k, name,    rs, nr, i, v) {
	nr = split(xr[m, k], rs, " ")
	if (!nr) return ""
	v = ""
	for (i = 1; i <= nr; i++)
		v = v " " (((m, k, rs[i], name) in xv) ? xv[m, k, rs[i], name] / xios[m, k, rs[i]] : 0)
	stats(v)
	return med
}
END {
	printf "\n## %s: classic vs SQ/CQ (nested guest, unmodified QEMU, TCG, L1 on %s vCPUs; %s s per point, %s alternating rounds%s; host: %s; guest: %s)\n\n", title, l1smp, rt, done, (tries > 1 ? sprintf(", in %d boots of L1: the emulator broke the others", tries) : ""), hp, gp
	table_head("", "4 KiB, fio | classic IOPS | SQ/CQ IOPS | SQ/CQ / classic (min-max) | kicks/io C | irqs/io C | kicks/io S | irqs/io S | exits/io C | exits/io S | CPU us/io C | CPU us/io S")
	for (i = 1; i <= n; i++) {
		k = order[i]
		stats(allio["classic", k]); mc = med
		stats(allio["sqcq", k]); ms = med
		printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label(k), mc, ms, ratio("sqcq", "classic", k),
			perio(kicks["classic", k], ios["classic", k]), irqio("classic", k),
			perio(kicks["sqcq", k], ios["sqcq", k]), irqio("sqcq", k),
			exitio("classic", k), exitio("sqcq", k),
			cpuio("classic", k), cpuio("sqcq", k)
	}
	printf "\nC = classic, S = SQ/CQ. Ratio: median of the per-round ratios (min-max, rounds). exits/io: KVM exits in L1 (every exit of L2) per I/O. CPU us/io: L1 busy time (both vCPUs: L2 with fio and the guest poller, QEMU, the host poller, LIO) per I/O.\n"
	printf "mode negotiated: classic run %s, SQ/CQ run %s\n", \
		("classic" in mode) ? "classic" : "NOT classic", ("sqcq" in mode) ? "sqcq" : "NOT sqcq"
	for (i = 1; i <= n; i++)
		if (order[i] in fb)
			printf "fell back (mode or doorbells after the point not the mode loaded; left out of every median): %s: %s\n", order[i], fb[order[i]]
	if (peer) {
		table_head("The peer: classic with guest halt-polling (H), same rounds", "4 KiB, fio | classic IOPS | H IOPS | H / classic (min-max) | SQ/CQ / H (min-max) | irqs/io H | exits/io C | exits/io H | exits/io S | CPU us/io C | CPU us/io H | CPU us/io S")
		for (i = 1; i <= n; i++) {
			k = order[i]
			stats(allio["classic", k]); mc = med
			stats(allio["haltpoll", k]); mh = med
			r1 = ratio("haltpoll", "classic", k); r2 = ratio("sqcq", "haltpoll", k)
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label(k), mc, mh, r1, r2,
				irqio("haltpoll", k),
				exitio("classic", k), exitio("haltpoll", k), exitio("sqcq", k),
				cpuio("classic", k), cpuio("haltpoll", k), cpuio("sqcq", k)
		}
		printf "\nH: our driver classic (sqcq=0) with the guest'"'"'s cpuidle polling state on (cpuidle-haltpoll driver, Debian'"'"'s menu governor: its haltpoll governor is not built); C and S with it off. mode negotiated: halt-polling run %s\n", ("haltpoll" in mode) ? "classic" : "NOT classic"
	}
	if (tree) {
		table_head("Debian'"'"'s in-tree pair (I: vhost_scsi + virtio_scsi), same rounds", "4 KiB, fio | I IOPS | classic / I (min-max) | SQ/CQ / I (min-max) | irqs/io I | irqs/io C | exits/io I | exits/io C | exits/io S | CPU us/io I | CPU us/io C | CPU us/io S")
		for (i = 1; i <= n; i++) {
			k = order[i]
			stats(allio["intree", k]); mi = med
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label(k), mi,
				ratio("classic", "intree", k), ratio("sqcq", "intree", k), irqio("intree", k), irqio("classic", k),
				exitio("intree", k), exitio("classic", k), exitio("sqcq", k),
				cpuio("intree", k), cpuio("classic", k), cpuio("sqcq", k)
		}
		printf "\nI: Debian'"'"'s vhost_scsi in L1 (loaded beside ours, its own ramdisk target) and its virtio_scsi in L2, on a second device; C and S on ours. Its driver counts nothing: I/Os from the disk'"'"'s statistics, interrupts from /proc/interrupts, kicks unknown. mode run: in-tree %s\n", ("intree" in mode) ? "bound, every round" : "NOT bound"
	}
	if (cross) {
		table_head("Which side: our guest driver on the in-tree host (X), same rounds", "4 KiB, fio | X IOPS | C / X: the hosts (min-max) | X / I: the guests (min-max) | irqs/io X | exits/io I, X, C | CPU us/io I, X, C")
		for (i = 1; i <= n; i++) {
			k = order[i]
			stats(allio["cross", k]); mx = med
			printf "| %s | %s | %s | %s | %s | %s, %s, %s | %s, %s, %s |\n", label(k), mx,
				ratio("classic", "cross", k), ratio("cross", "intree", k), irqio("cross", k),
				exitio("intree", k), exitio("cross", k), exitio("classic", k),
				cpuio("intree", k), cpuio("cross", k), cpuio("classic", k)
		}
		printf "\nX: our driver classic (sqcq=0) on the second device, whose host is Debian'"'"'s vhost_scsi. C / X compares the hosts under the same guest driver, X / I the guest drivers on the same host. mode negotiated: X run %s\n", ("cross" in mode) ? "classic" : "NOT classic"
	}
	table_head("Why the SQ/CQ pollers slept (SQ/CQ mode, per 1000 I/O, all rounds)", "4 KiB, fio | host idle | host contended | host yields | guest idle | guest contended | guest stolen | irqs, guest poller left asleep")
	for (i = 1; i <= n; i++) {
		k = order[i]
		printf "| %s", label(k)
		for (f = 13; f <= 19; f++)
			printf " | %s", perio(why["sqcq", k, f] * 1000, whyio["sqcq", k, f])
		printf " |\n"
	}
	printf "\nA poller that sleeps leaves NEED_WAKEUP set: the other side kicks (host) or interrupts (guest) for the next request. idle: its adaptive window ran out without work; contended: another task wanted its CPU; stolen: the hypervisor ran something else on the guest poller'"'"'s vCPU; yields: the host poller gave the CPU up and went on polling.\n"
	if (idle != "" || hidle != "")
		printf "CPU while idle after the SQ/CQ points (clock ticks of 10 ms): %s; %s\n", idle, hidle
	printf "\n### L1'"'"'s VM exits by reason (per I/O, median over rounds)\n\n"
	rows = 0
	for (i = 1; i <= n; i++) {
		k = order[i]
		nn = split(xnames[k], nm, " ")
		# The reasons with the most exits (both modes) first.
		for (j = 1; j <= nn; j++) {
			c = xmed("classic", k, nm[j]); s = xmed("sqcq", k, nm[j])
			xc[j] = c; xs[j] = s; tot[j] = c + s; ix[j] = j
		}
		for (j = 2; j <= nn; j++)
			for (l = j; l > 1 && tot[ix[l - 1]] < tot[ix[l]]; l--) { t = ix[l]; ix[l] = ix[l - 1]; ix[l - 1] = t }
		small = 0
		for (j = 1; j <= nn; j++) {
			c = xc[ix[j]]; s = xs[ix[j]]
			# Below 0.001 per I/O in both: counted, not shown.
			if ((c == "" || c < 0.0005) && (s == "" || s < 0.0005)) { small++; continue }
			if (!rows++) {
				printf "| 4 KiB, fio | exit reason |%s classic | SQ/CQ | SQ/CQ - classic |\n", tree ? " in-tree |" : ""
				printf "|---|---|%s---:|---:|---:|\n", tree ? "---:|" : ""
			}
			it = ""
			if (tree) {
				it = xmed("intree", k, nm[ix[j]])
				it = " " (it == "" ? "-" : sprintf("%.3f", it)) " |"
			}
			printf "| %s | %s |%s %s | %s | %s |\n", label(k), nm[ix[j]], it,
				c == "" ? "-" : sprintf("%.3f", c), s == "" ? "-" : sprintf("%.3f", s),
				(c == "" || s == "") ? "-" : sprintf("%+.3f", s - c)
		}
		if (small)
			printf "| %s | %d more |%s < 0.001 | < 0.001 | |\n", label(k), small, tree ? " |" : ""
	}
	if (rows)
		printf "\nExits of the nested guest seen by KVM in L1 (kvm:kvm_exit, keyed on the exit code; \"stat:\": KVM'"'"'s debugfs statistics where the tracepoint was not usable) per I/O, over fio'"'"'s window plus about a second of idle handshake on each side. SVM names: npf = nested page fault (virtio-pci notify writes are MMIO, so kicks land here), io = port I/O, hlt = idle vCPU, msr = MSR accesses (TSC-deadline timer, x2APIC EOI and IPIs), intr = host interrupt, vintr = interrupt window; see bench/README.md.\n"
	else
		printf "none: L1 gave no exits by reason (bench/l1-exits.sh, hotplug-exits.req in tests/e2e/l1.sh)\n"
}' "$log.rounds" "$log"
if [ "$rc" != 0 ]; then
	# The reason on screen: the run's last lines that the filter above
	# did not show (an apt or build step's error, a VM that did not boot).
	echo "compare: the run failed (status $rc); its last lines:" >&2
	grep -vE '^(e2e|compare-l2|pass:|fail:|PASS:|cmp|cmp-exits|cmp-idle) ' "$log" | tail -n 15 | sed 's/^/  | /' >&2
	echo "compare: whole logs in out/logs/e2e-sqcq-sqcq-*/" >&2
fi
exit "$rc"
