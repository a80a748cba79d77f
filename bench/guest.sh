#!/bin/bash
# bench/guest.sh [--kernel ID] [--runtime S] [--ko FILE]
#
# The guest driver side by side with the in-tree virtio_scsi, in one boot
# of the test VM (tests/vm/run.sh, QEMU TCG, -smp 2) with QEMU's userspace
#   -device virtio-scsi-pci,num_queues=4 and one scsi-hd on a null-co
#   block node (read-zeroes=on, 4 GiB): RAM-less, no host syscall or page
#   cache per request, so what is measured is the guest driver plus QEMU's
#   virtio-scsi emulation and nothing of a backstore.
# Drivers are switched in the same boot with rmmod/modprobe/insmod, before
# each measurement (the configurations alternate point by point):
#   in-tree       virtio_scsi, interrupt queues
#   ours          virtio_scsi_sqcq poll_queues=0, interrupt queues
#   ours-poll     virtio_scsi_sqcq poll_queues=2, fio io_uring --hipri
#   in-tree-poll  virtio_scsi virtscsi_poll_queues=2, --hipri (only where
#                 the in-tree driver has that parameter: not on 6.1)
# Each runs fio 4 KiB randread with io_uring at QD1 and QD32, 1 and 4 jobs,
# for --runtime seconds (default 10) after a 2 s ramp.  Prints one markdown
# table: IOPS, the ratios ours/in-tree and poll/irq, and interrupts and
# kicks per I/O (interrupts: the device's request-queue vectors in
# /proc/interrupts; kicks: our debugfs counters, the in-tree driver has
# none; I/Os: the disk's read count in /sys/block/*/stat, same window).
# TCG on a small machine: only ratios and counts mean anything, and a
# benchmark never asserts a timing.
#
# The module comes from out/<abi>/guest/ (tests/matrix.sh ID builds it) or
# --ko.  Takes about 4 x 4 x (runtime + 7) s plus a minute.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# ===================================================================
# Inside the VM: bench/guest.sh --inside KO RUNTIME
# ===================================================================
inside() {
	local ko=$1 rt=$2
	local mod=virtio_scsi_sqcq dbg=/sys/kernel/debug/virtio_scsi_sqcq
	local vdev d res=/tmp/bench
	set +e	# every failure below is handled where it happens
	mkdir -p $res
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	modprobe -a scsi_mod sd_mod 2>/dev/null || true
	for d in /sys/bus/virtio/devices/virtio*; do
		[ "$(cat "$d/device")" = 0x0008 ] && vdev=${d##*/}
	done
	[ -n "${vdev:-}" ] || { echo "bench: no virtio-scsi device" >&2; return 1; }
	log() { echo "bench: [${SECONDS}s] $*" >&2; }

	# The disk (target 0, LUN 0) of whichever driver holds the device.
	disk() {
		local b
		for b in /sys/bus/virtio/devices/"$vdev"/host*/target*/*:0:0:0/block/*; do
			[ -e "$b" ] && { echo "${b##*/}"; return 0; }
		done
		return 1
	}
	wait_disk() {
		local n=300 b
		while [ $n -gt 0 ]; do
			b=$(disk) && [ -b "/dev/$b" ] && { echo "$b"; return 0; }
			sleep 0.1
			n=$((n - 1))
		done
		return 1
	}
	# Interrupts of the device's request queues, all CPUs.
	irqs() {
		awk -v v="$vdev" 'NR == 1 { n = NF; next }
			$NF ~ "^" v "-(request|virtqueues)" { for (i = 2; i <= n + 1; i++) s += $i }
			END { print s + 0 }' /proc/interrupts
	}
	# Kicks of our request queues (debugfs column 5); empty for in-tree.
	kicks() {
		[ -r "$dbg/$vdev/queues" ] || return 0
		awk 'NR > 1 && ($2 == "irq" || $2 == "poll") { s += $5 } END { print s + 0 }' \
			"$dbg/$vdev/queues"
	}
	reads() { awk '{ print $1 }' "/sys/block/$1/stat"; }
	# unload: no driver on the device any more (modules unloaded, or the
	# device unbound where a driver is built in).
	unload() {
		local m drv=/sys/bus/virtio/devices/$vdev/driver
		for m in $mod virtio_scsi; do
			grep -q "^$m " /proc/modules && { rmmod "$m" || return 1; }
		done
		[ -e "$drv" ] && echo "$vdev" >"$drv/unbind"
		[ ! -e "$drv" ]
	}
	# use CONFIG: put CONFIG's driver on the device; prints the disk.
	use() {
		local drv
		unload || { log "cannot unload the previous driver"; return 1; }
		case $1 in
		in-tree) drv=virtio_scsi; modprobe virtio_scsi ;;
		in-tree-poll) drv=virtio_scsi; modprobe virtio_scsi virtscsi_poll_queues=2 ;;
		ours) drv=$mod; insmod "$ko" poll_queues=0 ;;
		ours-poll) drv=$mod; insmod "$ko" poll_queues=2 ;;
		esac || return 1
		# A module loaded while the device was unbound binds it at once;
		# a built-in one needs a bind.
		[ -e "/sys/bus/virtio/devices/$vdev/driver" ] ||
			echo "$vdev" >"/sys/bus/virtio/drivers/$drv/bind" || return 1
		wait_disk
	}
	# point CONFIG DISK QD JOBS: one fio run; appends a result line.
	point() {
		local cfg=$1 sd=$2 qd=$3 jobs=$4 hipri=0 i0 k0 r0 i1 k1 r1 iops out
		case $cfg in *-poll) hipri=1 ;; esac
		out=$res/$cfg-qd$qd-j$jobs.json
		i0=$(irqs) k0=$(kicks) r0=$(reads "$sd")
		fio --name=bench --filename="/dev/$sd" --ioengine=io_uring \
			--hipri=$hipri --direct=1 --rw=randread --bs=4k \
			--iodepth="$qd" --numjobs="$jobs" --norandommap --randrepeat=0 \
			--time_based --ramp_time=2 --runtime="$rt" --group_reporting \
			--output-format=json --output="$out" >/dev/null 2>"$out.err" ||
			{ log "fio failed: $(tail -n 3 "$out.err")"; return 1; }
		i1=$(irqs) k1=$(kicks) r1=$(reads "$sd")
		iops=$(python3 -c 'import json, sys
print(round(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' "$out")
		echo "$cfg $qd $jobs $iops $((i1 - i0)) ${k0:+$((k1 - k0))} $((r1 - r0))" |
			awk '{ if (NF == 6) { $7 = $6; $6 = "-" } print }' >>$res/points
		log "$cfg QD$qd x$jobs: $iops IOPS, $((i1 - i0)) interrupts, ${k0:+$((k1 - k0)) kicks, }$((r1 - r0)) reads"
	}

	local configs="in-tree ours ours-poll" cfg sd qd jobs
	if modinfo -p virtio_scsi 2>/dev/null | grep '^virtscsi_poll_queues:' >/dev/null; then
		configs="$configs in-tree-poll"
	fi
	: >$res/points
	: >$res/queues
	# Configurations alternate within each point, so that the drift of a
	# shared, noisy machine spreads over all of them alike.
	for qd in 1 32; do
		for jobs in 1 4; do
			for cfg in $configs; do
				sd=$(use "$cfg") || { log "$cfg: no disk"; return 1; }
				if [ "$qd$jobs" = 11 ]; then
					# blk-mq hardware queues, and our driver's mode
					# (classic or sqcq) from debugfs.
					echo "$cfg $(find /sys/block/"$sd"/mq/ -mindepth 1 -maxdepth 1 | wc -l)" \
						"$(awk '$1 == "mode:" { print $2 }' "$dbg/$vdev/info" 2>/dev/null)" >>$res/queues
					log "$cfg: /dev/$sd, io_poll $(cat /sys/block/"$sd"/queue/io_poll)," \
						"$(tail -n 1 $res/queues | cut -d' ' -f2) hardware queues"
				fi
				point "$cfg" "$sd" $qd $jobs || return 1
			done
		done
	done
	unload || true
	cp $res/points $res/queues "$SQCQ_RESULTS/"
}

# ===================================================================
# This machine: boot the VM, print the table.
# ===================================================================
table() {	# table POINTS-FILE QUEUES-FILE KERNEL
	python3 - "$1" "$2" "$3" <<'EOF'
import sys
queues = {}
for l in open(sys.argv[2]):
    f = l.split()
    queues[f[0]] = f[1] + (" (%s mode)" % f[2] if len(f) > 2 else "")
pts = {}
for line in open(sys.argv[1]):
    cfg, qd, jobs, iops, irq, kicks, ios = line.split()
    pts[(cfg, int(qd), int(jobs))] = (int(iops), int(irq),
                                      None if kicks == "-" else int(kicks), int(ios))
have_itp = any(k[0] == "in-tree-poll" for k in pts)

def iops(c, q, j):
    return pts[(c, q, j)][0] if (c, q, j) in pts else None

def ratio(a, b):
    return "%.2f" % (a / b) if a and b else "-"

def per_io(c, q, j, field):
    p = pts.get((c, q, j))
    if not p or p[field] is None or not p[3]:
        return "-"
    return "%.3f" % (p[field] / p[3])

hdr = ["randread 4k", "in-tree IOPS", "ours IOPS", "ours/in-tree",
       "ours-poll IOPS", "poll/irq"]
if have_itp:
    hdr += ["in-tree-poll IOPS", "ours-poll/in-tree-poll"]
hdr += ["irq/IO in-tree", "irq/IO ours", "irq/IO ours-poll",
        "kicks/IO ours", "kicks/IO ours-poll"]
print("kernel %s, QEMU virtio-scsi-pci num_queues=4, null-co disk, TCG -smp 2;"
      % sys.argv[3])
print("blk-mq hardware queues: " +
      ", ".join("%s %s" % (c, n) for c, n in queues.items()))
print()
print("| " + " | ".join(hdr) + " |")
print("|" + " --- |" * len(hdr))
for q in (1, 32):
    for j in (1, 4):
        a, b, p = iops("in-tree", q, j), iops("ours", q, j), iops("ours-poll", q, j)
        row = ["QD%d, %d job%s" % (q, j, "s" if j > 1 else ""),
               str(a or "-"), str(b or "-"), ratio(b, a), str(p or "-"), ratio(p, b)]
        if have_itp:
            t = iops("in-tree-poll", q, j)
            row += [str(t or "-"), ratio(p, t)]
        row += [per_io("in-tree", q, j, 1), per_io("ours", q, j, 1),
                per_io("ours-poll", q, j, 1), per_io("ours", q, j, 2),
                per_io("ours-poll", q, j, 2)]
        print("| " + " | ".join(row) + " |")
EOF
}

if [ "${1:-}" = --inside ]; then
	shift
	inside "$@"
	exit
fi

# shellcheck source=tests/lib/kernels.sh
. tests/lib/kernels.sh
id=6.1 ko="" rt=10
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	--runtime) rt=$2; shift 2 ;;
	--ko) ko=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
[[ "$rt" =~ ^[0-9]+$ ]] && [ "$rt" -gt 0 ] || { echo "bench: --runtime needs seconds" >&2; exit 2; }

if [ -z "$ko" ]; then
	abi=$(sqcq_kernel_abi "$id") || { echo "bench: cannot resolve the ABI of $id" >&2; exit 1; }
	ko=$ROOT/out/$abi/guest/virtio_scsi_sqcq.ko
	[ -f "$ko" ] || tests/matrix.sh "$id" >&2 || true
fi
[ -f "$ko" ] || { echo "bench: no module at $ko (tests/matrix.sh $id)" >&2; exit 1; }
sqcq_install fio || { echo "bench: cannot install fio" >&2; exit 1; }

work=$(mktemp -d /tmp/sqcq-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The VM loads its own copy (seen at $SQCQ_RESULTS there), taken while no
# tests/matrix.sh rewrites out/<abi>/ (it holds out/.matrix.lock).
if [ -e out/.matrix.lock ]; then
	exec 7<out/.matrix.lock
	flock -s -w 1800 7 || echo "bench: out/.matrix.lock still held; copying anyway" >&2
fi
cp "$ko" "$work/virtio_scsi_sqcq.ko"
exec 7<&-

load0=$(cut -d' ' -f1-3 /proc/loadavg)
rc=0
tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 \
	--timeout $((16 * (rt + 8) + 300)) \
	--append " modprobe.blacklist=virtio_scsi" --results "$work" \
	--qemu-arg -device --qemu-arg virtio-scsi-pci,id=scsi0,num_queues=4 \
	--qemu-arg -blockdev \
	--qemu-arg driver=null-co,node-name=null0,read-zeroes=on,size=4294967296 \
	--qemu-arg -device --qemu-arg scsi-hd,drive=null0,bus=scsi0.0,scsi-id=0,lun=0 \
	-- bench/guest.sh --inside /run/sqcq/out/virtio_scsi_sqcq.ko "$rt" >&2 || rc=$?
[ "$rc" = 0 ] && [ -s "$work/points" ] || { echo "bench: the VM run failed (status $rc)" >&2; exit 1; }
echo
table "$work/points" "$work/queues" "$(sqcq_kernel_abi "$id")"
echo
echo "$(nproc) host CPUs; load average before $load0, after $(cut -d' ' -f1-3 /proc/loadavg);" \
	"$rt s per point after a 2 s ramp; fio io_uring, --hipri on the poll configurations"
