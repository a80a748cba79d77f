#!/bin/bash
# tests/e2e/run.sh [--kernel ID] [--host intree|sqcq|takeover] [--guest intree|sqcq]
#                  [--timeout S] [--l2-timeout S] [--fio-size SIZE]
#                  [--min-ios N] [--no-hotplug]
#
# Nested end-to-end test with an unmodified QEMU on both levels:
#   L0 (this machine) boots L1 (tests/vm/run.sh, Debian kernel ID, default
#   6.1), which loads the target core, ramdisk backstores and the HOST
#   backend, builds the target through configfs (tests/lib/target.sh), opens
#   the backend's node and boots L2 (tests/vm/nested.sh) with
#   -device vhost-scsi-pci,wwpn=W,vhostfd=N; for --host intree also a second
#   device with plain wwpn=W (QEMU opens /dev/vhost-scsi).  L2 binds the
#   GUEST driver, runs fio --verify=crc32c (libaio, direct, 512 B..1 MiB,
#   at least --min-ios I/Os, default 10000) and a LUN hotplug/unplug that L1
#   drives on request (tests/e2e/l1.sh, tests/e2e/l2.sh).
#
#   --host intree   in-tree vhost_scsi: fabric vhost, /dev/vhost-scsi
#   --host takeover vhost_scsi_sqcq.ko takeover=1: fabric vhost,
#                   /dev/vhost-scsi (plus the plain-wwpn device)
#   --host sqcq     out/<abi>/host/vhost_scsi_sqcq.ko: fabric vhost_sqcq,
#                   /dev/vhost-scsi-sqcq
#   --guest intree  the kernel's virtio_scsi
#   --guest sqcq    out/<abi>/guest/virtio_scsi_sqcq.ko (default), the in-tree
#                   driver blacklisted
#
# Modules come from out/<abi>/ (built by tests/matrix.sh ID when missing).
# Prints "PASS:/FAIL: e2e HOST/GUEST ..." lines and the wall time of each
# phase; exit status 0 when all passed.  Every wait has a hard limit: the
# whole run (--timeout, default 1800 s), L2 (--l2-timeout, default 1200 s),
# fio, and each hotplug step.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=tests/lib/kernels.sh
. tests/lib/kernels.sh

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

id=6.1 host=intree guest=sqcq timeout_s=1800 l2_timeout=1200 fio_size=32m
min_ios=10000 hotplug=1
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	--host) host=$2; shift 2 ;;
	--guest) guest=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--l2-timeout) l2_timeout=$2; shift 2 ;;
	--fio-size) fio_size=$2; shift 2 ;;
	--min-ios) min_ios=$2; shift 2 ;;
	--no-hotplug) hotplug=0; shift ;;
	-h | --help) usage ;;
	*) echo "${0##*/}: unknown option $1" >&2; usage ;;
	esac
done
label="$host/$guest"
case "$host" in intree | sqcq | takeover) ;; *) echo "${0##*/}: --host intree|sqcq|takeover" >&2; exit 2 ;; esac
case "$guest" in intree | sqcq) ;; *) echo "${0##*/}: --guest intree|sqcq" >&2; exit 2 ;; esac
[[ "$timeout_s" =~ ^[0-9]+$ && "$l2_timeout" =~ ^[0-9]+$ ]] || usage
# L1 needs time around L2: its own boot, the target, the teardown.
[ "$l2_timeout" -lt "$timeout_s" ] || l2_timeout=$((timeout_s - 120))

t0=$SECONDS
abi=$(sqcq_kernel_abi "$id") || { echo "FAIL: e2e $label $id: cannot resolve the ABI"; exit 1; }
need=()
[ "$host" != intree ] && need+=("out/$abi/host/vhost_scsi_sqcq.ko")
[ "$guest" = sqcq ] && need+=("out/$abi/guest/virtio_scsi_sqcq.ko")
for f in "${need[@]}"; do
	[ -f "$f" ] && continue
	tests/matrix.sh "$id" >&2 || true
	break
done
for f in "${need[@]}"; do
	[ -f "$f" ] || { echo "FAIL: e2e $label $id: no module $f (tests/matrix.sh $id)"; exit 1; }
done
# fio runs in L2 from this machine's root (shared over 9p twice).
if ! command -v fio >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q fio </dev/null >&2 ||
		{ apt-get update -q </dev/null >&2 &&
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -q fio </dev/null >&2; } ||
		{ echo "FAIL: e2e $label $id: cannot install fio"; exit 1; }
fi
prep=$((SECONDS - t0))

work=$(mktemp -d /tmp/sqcq-e2e.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/results"
echo "e2e: $label on $abi (L1: kernel $abi; L2: same kernel, nested)" >&2
rc=0
set +e
tests/vm/run.sh --kernel "$id" --smp 2 --timeout "$timeout_s" --results "$work/results" \
	--env "E2E_L2_TIMEOUT=$l2_timeout" --env "E2E_FIO_SIZE=$fio_size" \
	--env "E2E_MIN_IOS=$min_ios" --env "E2E_HOTPLUG=$hotplug" \
	--env "E2E_L2_APPEND=${E2E_L2_APPEND:-}" --env "E2E_GUEST_PARAMS=${E2E_GUEST_PARAMS:-}" \
	-- tests/e2e/l1.sh "$host" "$guest" 2>&1 | tee "$work/log"
rc=${PIPESTATUS[0]}
set -e
total=$((SECONDS - t0))

# Keep the logs of the last run for a look after a failure.
logdir=$ROOT/out/logs/e2e-${host}-${guest}-$abi
rm -rf "$logdir"
mkdir -p "$logdir"
cp "$work/log" "$logdir/console.log"
cp -r "$work/results/." "$logdir/" 2>/dev/null || true

# Phase times: L1 boot and L2 boot from the rig's "command started at" lines
# (L1's first, then L2's), the rest from the e2e-time: lines.
{
	echo "---- e2e $label on $abi: wall times ----"
	printf '  %-28s %ss\n' "preparation (L0)" "$prep"
	sed -n 's/.*(\(L[12]\), \([a-z]*\)): command started at \([0-9.]*\)s guest uptime.*/\1 \2 \3/p' \
		"$work/log" | sort | awk '!seen[$1]++ {
			printf "  %-28s %.0fs\n", $1 " boot (" $2 ", guest uptime)", $3 }'
	sed -n 's/^e2e-time: \(L[12]\) \(.*\) \([0-9]*s\)$/  \1 \2|\3/p' "$work/log" |
		awk -F'|' '{ printf "  %-28s %s\n", $1, $2 }'
	printf '  %-28s %ss\n' "total" "$total"
} >&2
if [ "$rc" != 0 ] && ! grep -q '^FAIL: ' "$work/log"; then
	echo "FAIL: e2e $label $abi (status $rc)"
fi
exit "$rc"
