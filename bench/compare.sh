#!/bin/bash
# bench/compare.sh [--kernel ID] [--runtime S] [--short]
#
# Classic vs SQ/CQ side by side, in one run, through unmodified QEMU: the
# test VM (L1, tests/e2e/run.sh) loads vhost_scsi_sqcq and builds an LIO
# ramdisk target; a nested guest (L2) gets it as vhost-scsi-pci and loads
# virtio_scsi_sqcq twice in the same boot, sqcq=0 then sqcq=1
# (bench/compare-l2.sh), with fio 4 KiB libaio randread/randwrite at QD1
# and QD32, 1 and 4 jobs.  Prints one markdown table: IOPS per mode and
# their ratio, kicks and interrupts per I/O from the guest driver's debugfs
# counters, the mode each run negotiated, and the guest poll thread's CPU
# time while idle after its timeout.
#
# --short: the demo's form (four points, 3 s each).  Host parameters:
# CMP_HOST_PARAMS (default "poll_idle_us=200000": under TCG a host poller
# with a shorter timeout sleeps between the guest's requests); guest:
# CMP_GUEST_PARAMS (default "poll_idle_us=200000", the same reason); CMP_L2_SMP: the nested
# guest's vCPUs (default 2).
# Only ratios and counts mean anything here (TCG, nested): nothing asserts
# a timing.  Exit status 0 when both modes ran every point and negotiated
# what they should.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

id=6.1 rt=10
points="randread:1:1 randread:32:1 randread:32:4 randwrite:1:1 randwrite:32:1 randwrite:32:4"
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	--runtime) rt=$2; shift 2 ;;
	--short) rt=3 points="randread:1:1 randread:32:1 randwrite:1:1 randwrite:32:1"; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "${0##*/}: unknown option $1" >&2; exit 2 ;;
	esac
done
[[ "$rt" =~ ^[0-9]+$ ]] || { echo "${0##*/}: --runtime takes seconds" >&2; exit 2; }

log=$(mktemp /tmp/sqcq-compare.XXXXXX)
trap 'rm -f "$log"' EXIT
set +e
E2E_L2_SCRIPT=bench/compare-l2.sh \
E2E_HOST_PARAMS=${CMP_HOST_PARAMS:-poll_idle_us=200000} \
E2E_GUEST_PARAMS=${CMP_GUEST_PARAMS:-poll_idle_us=200000} \
E2E_L2_SMP=${CMP_L2_SMP:-2} CMP_RUNTIME=$rt CMP_POINTS=$points \
	tests/e2e/run.sh --kernel "$id" --host sqcq --guest sqcq --no-hotplug \
	--timeout 1500 --l2-timeout 1200 2>&1 | tee "$log" | grep --line-buffered -E '^(e2e|compare-l2|pass:|fail:|PASS:|FAIL:)'
rc=${PIPESTATUS[0]}
set -e

# The last attempt's lines win (run.sh repeats a run the emulator broke).
awk -v rt="$rt" '
function perio(n, d) { return d > 0 ? sprintf("%.3f", n / d) : "-" }
/^cmp (classic|sqcq) / {
	k = $3 " QD" $4 " x" $5
	if (!(k in seen)) { seen[k] = 1; order[++n] = k }
	iops[$2, k] = $6; ios[$2, k] = $7; kicks[$2, k] = $8; irqs[$2, k] = $9
}
/^cmp-idle guest / { idle = sprintf("guest poll thread %d ticks in %d s (its sleeps %d -> %d)", $3, $4, $5, $6) }
/^cmp-idle host / { hidle = sprintf("host poll thread %s ticks in %d s", $3, $4) }
/^PASS: compare .* mode-negotiated/ { sub(/.*mode-negotiated \(/, ""); sub(/\).*/, ""); mode[$0] = 1 }
END {
	printf "\n## Classic vs SQ/CQ (nested guest, unmodified QEMU, TCG; %s s per point)\n\n", rt
	printf "| 4 KiB libaio | classic IOPS | SQ/CQ IOPS | SQ/CQ / classic | classic kicks/io | classic irqs/io | SQ/CQ kicks/io | SQ/CQ irqs/io |\n"
	printf "|---|---:|---:|---:|---:|---:|---:|---:|\n"
	for (i = 1; i <= n; i++) {
		k = order[i]
		r = (iops["classic", k] > 0 && ("sqcq", k) in iops) ? sprintf("%.2f", iops["sqcq", k] / iops["classic", k]) : "-"
		printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", k,
			iops["classic", k], iops["sqcq", k], r,
			perio(kicks["classic", k], ios["classic", k]), perio(irqs["classic", k], ios["classic", k]),
			perio(kicks["sqcq", k], ios["sqcq", k]), perio(irqs["sqcq", k], ios["sqcq", k])
	}
	printf "\nmode negotiated: classic run %s, SQ/CQ run %s\n", \
		("classic" in mode) ? "classic" : "NOT classic", ("sqcq" in mode) ? "sqcq" : "NOT sqcq"
	if (idle != "" || hidle != "")
		printf "CPU while idle after the SQ/CQ points (clock ticks of 10 ms): %s; %s\n", idle, hidle
}' "$log"
if [ "$rc" != 0 ]; then
	echo "compare: the run failed (status $rc); see the lines above and out/logs/e2e-sqcq-sqcq-*/" >&2
fi
exit "$rc"
