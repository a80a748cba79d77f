#!/bin/bash
# bench/compare.sh [--kernel ID] [--runtime S] [--rounds N] [--short]
#
# Classic vs SQ/CQ side by side, in one run, through unmodified QEMU: the
# test VM (L1, tests/e2e/run.sh) loads vhost_scsi_sqcq and builds an LIO
# ramdisk target; a nested guest (L2) gets it as vhost-scsi-pci and loads
# virtio_scsi_sqcq alternately with sqcq=0 and sqcq=1, --rounds times each
# (default 5; bench/compare-l2.sh), with fio 4 KiB libaio randread/randwrite
# at QD1 and QD32, 1 and 4 jobs.  Prints one markdown table: per point the
# median IOPS of each mode, the median of the per-round ratios and their
# spread (min-max), kicks and interrupts per I/O from the guest driver's
# debugfs counters, L1's KVM exits per I/O (the nested guest's VM exits)
# and L1's busy CPU time per I/O (every thread of both sides, pollers
# included), the mode each run negotiated, and the poll threads' CPU time
# while idle after the last SQ/CQ points.
#
# --short: the demo's form (four points, 3 s each, 3 rounds).  Both modules
# run with their defaults (what a user gets without tuning); more insmod
# parameters: CMP_HOST_PARAMS (host), CMP_GUEST_PARAMS (guest, both modes).
# CMP_L2_SMP: the nested guest's vCPUs (default 1, as in the e2e stage: on
# two, the emulated nested guest broke in most runs on the 2-core machine).
# Only ratios and counts mean anything here (TCG, nested): nothing asserts
# a timing.  Exit status 0 when both modes ran every point and negotiated
# what they should.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

id=6.1 rt=10 rounds=5
points="randread:1:1 randread:32:1 randread:32:4 randwrite:1:1 randwrite:32:1 randwrite:32:4"
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	--runtime) rt=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--short) rt=3 rounds=3 points="randread:1:1 randread:32:1 randwrite:1:1 randwrite:32:1"; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "${0##*/}: unknown option $1" >&2; exit 2 ;;
	esac
done
[[ "$rt" =~ ^[0-9]+$ ]] || { echo "${0##*/}: --runtime takes seconds" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "${0##*/}: --rounds takes a count" >&2; exit 2; }

points_n=$(wc -w <<<"$points")
log=$(mktemp /tmp/sqcq-compare.XXXXXX)
trap 'rm -f "$log"' EXIT
set +e
E2E_L2_SCRIPT=bench/compare-l2.sh E2E_VIOMMU=0 \
E2E_HOST_PARAMS=${CMP_HOST_PARAMS:-} \
E2E_GUEST_PARAMS=${CMP_GUEST_PARAMS:-} \
E2E_L2_SMP=${CMP_L2_SMP:-1} CMP_RUNTIME=$rt CMP_POINTS=$points CMP_ROUNDS=$rounds \
	tests/e2e/run.sh --kernel "$id" --host sqcq --guest sqcq --no-hotplug \
	--timeout $((900 + rounds * 2 * (points_n * (rt + 25) + 40))) \
	--l2-timeout $((600 + rounds * 2 * (points_n * (rt + 25) + 40))) 2>&1 | tee "$log" | grep --line-buffered -E '^(e2e|compare-l2|pass:|fail:|PASS:|FAIL:)'
rc=${PIPESTATUS[0]}
set -e

# The last attempt's lines win (run.sh repeats a run the emulator broke).
awk -v rt="$rt" -v rounds="$rounds" '
function perio(n, d) { return d > 0 ? sprintf("%.3f", n / d) : "-" }
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
/^e2e: attempt [0-9]+ failed in the emulator/ {
	split("", seen); split("", iops); split("", allio); split("", ios); split("", kicks)
	split("", irqs); split("", exits); split("", exio); split("", busy); split("", bzio)
	split("", why); split("", whyio); n = 0
}
/^cmp (classic|sqcq) / {
	k = $3 " QD" $4 " x" $5
	if (!(k in seen)) { seen[k] = 1; order[++n] = k }
	m = $2; r = $12
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
/^cmp-idle guest / { idle = sprintf("guest poll thread %d ticks in %d s (its sleeps %d -> %d)", $3, $4, $5, $6) }
/^cmp-idle host / { hidle = sprintf("host poll thread %s ticks in %d s", $3, $4) }
/^PASS: compare (classic|sqcq) mode-negotiated/ { mode[$3] = 1 }
END {
	printf "\n## Classic vs SQ/CQ (nested guest, unmodified QEMU, TCG; %s s per point, %s alternating rounds)\n\n", rt, rounds
	printf "| 4 KiB libaio | classic IOPS | SQ/CQ IOPS | SQ/CQ / classic (min-max) | kicks/io C | irqs/io C | kicks/io S | irqs/io S | exits/io C | exits/io S | CPU us/io C | CPU us/io S |\n"
	printf "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
	for (i = 1; i <= n; i++) {
		k = order[i]
		rs = ""
		for (r = 1; r <= rounds; r++)
			if (iops["classic", k, r] > 0 && iops["sqcq", k, r] > 0)
				rs = rs " " sprintf("%.3f", iops["sqcq", k, r] / iops["classic", k, r])
		stats(allio["classic", k]); mc = med
		stats(allio["sqcq", k]); ms = med
		rn = stats(rs)
		ratio = rn ? sprintf("%.2f (%.2f-%.2f, %d)", med, lo, hi, rn) : "-"
		printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", k, mc, ms, ratio,
			perio(kicks["classic", k], ios["classic", k]), perio(irqs["classic", k], ios["classic", k]),
			perio(kicks["sqcq", k], ios["sqcq", k]), perio(irqs["sqcq", k], ios["sqcq", k]),
			perio(exits["classic", k], exio["classic", k]), perio(exits["sqcq", k], exio["sqcq", k]),
			perio(busy["classic", k] * 10000, bzio["classic", k]), perio(busy["sqcq", k] * 10000, bzio["sqcq", k])
	}
	printf "\nC = classic, S = SQ/CQ. Ratio: median of the per-round ratios (min-max, rounds). exits/io: KVM exits in L1 (every exit of L2) per I/O. CPU us/io: L1 busy time (both vCPUs: L2 with fio and the guest poller, QEMU, the host poller, LIO) per I/O.\n"
	printf "mode negotiated: classic run %s, SQ/CQ run %s\n", \
		("classic" in mode) ? "classic" : "NOT classic", ("sqcq" in mode) ? "sqcq" : "NOT sqcq"
	printf "\n### Why the SQ/CQ pollers slept (SQ/CQ mode, per 1000 I/O, all rounds)\n\n"
	printf "| 4 KiB libaio | host idle | host contended | host yields | guest idle | guest contended | guest stolen | irqs, guest poller left asleep |\n"
	printf "|---|---:|---:|---:|---:|---:|---:|---:|\n"
	for (i = 1; i <= n; i++) {
		k = order[i]
		printf "| %s", k
		for (f = 13; f <= 19; f++)
			printf " | %s", perio(why["sqcq", k, f] * 1000, whyio["sqcq", k, f])
		printf " |\n"
	}
	printf "\nA poller that sleeps leaves NEED_WAKEUP set: the other side kicks (host) or interrupts (guest) for the next request. idle: its adaptive window ran out without work; contended: another task wanted its CPU; stolen: the hypervisor ran something else on the guest poller'"'"'s vCPU; yields: the host poller gave the CPU up and went on polling.\n"
	if (idle != "" || hidle != "")
		printf "CPU while idle after the SQ/CQ points (clock ticks of 10 ms): %s; %s\n", idle, hidle
}' "$log"
if [ "$rc" != 0 ]; then
	echo "compare: the run failed (status $rc); see the lines above and out/logs/e2e-sqcq-sqcq-*/" >&2
fi
exit "$rc"
