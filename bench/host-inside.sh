#!/bin/bash
# Runs INSIDE the L1 VM (bench/host.sh starts it): one ramdisk, exported by
# the in-tree fabric "vhost" and by ours, "vhost_sqcq"; the same client
# against both device nodes, ours in classic and in SQ/CQ mode; one table.
# notifications/io = (kicks the client sent + calls it received) per I/O.
#
# Usage: host-inside.sh KO CLIENT SECONDS
set -eu
KO=$1 CLIENT=$2 SECS=$3 IDLE=${4:-1000}
C=/sys/kernel/config/target
W_IN=naa.5001405000000a01 W_OURS=naa.5001405000000b01

modprobe target_core_mod
modprobe vhost_scsi
insmod "$KO" poll_idle_us="$IDLE"
mkdir -p $C/core/rd_mcp_0/bench
echo rd_pages=$((80 << 8)) >$C/core/rd_mcp_0/bench/control
echo 1 >$C/core/rd_mcp_0/bench/enable
for f in "vhost $W_IN" "vhost_sqcq $W_OURS"; do
	set -- $f
	mkdir -p $C/$1/$2/tpgt_1/lun/lun_0
	ln -s $C/core/rd_mcp_0/bench $C/$1/$2/tpgt_1/lun/lun_0/bench
	echo naa.5001405000000c01 >$C/$1/$2/tpgt_1/nexus
done

run() { # NODE WWPN Q QD RW [sqcq] -> "iops notifications/io"
	"$CLIENT" "$1" "$2" -q "$3" -d "$4" -t "$SECS" -m "$5" -i "$IDLE" ${6:+-s} |
		awk -F'[= ]' '{ printf "%d %.3f", $6, ($8 + $10) / $2 }'
}

printf '%-10s %2s %3s | %8s %8s %8s | %6s %6s | %-24s\n' rw q qd \
	in-tree classic sqcq ours/in sqcq/cl "notifications/io in,cl,sq"
n=0
for rw in read write; do
	for q in 1 4; do
		for qd in 1 32; do
			# Rotate which variant runs first.
			case $((n % 3)) in
			0) a=$(run /dev/vhost-scsi $W_IN $q $qd $rw)
			   b=$(run /dev/vhost-scsi-sqcq $W_OURS $q $qd $rw)
			   c=$(run /dev/vhost-scsi-sqcq $W_OURS $q $qd $rw sqcq) ;;
			1) b=$(run /dev/vhost-scsi-sqcq $W_OURS $q $qd $rw)
			   c=$(run /dev/vhost-scsi-sqcq $W_OURS $q $qd $rw sqcq)
			   a=$(run /dev/vhost-scsi $W_IN $q $qd $rw) ;;
			2) c=$(run /dev/vhost-scsi-sqcq $W_OURS $q $qd $rw sqcq)
			   a=$(run /dev/vhost-scsi $W_IN $q $qd $rw)
			   b=$(run /dev/vhost-scsi-sqcq $W_OURS $q $qd $rw) ;;
			esac
			n=$((n + 1))
			set -- $a $b $c
			printf '%-10s %2s %3s | %8s %8s %8s | %6.2f %6.2f | %6s %6s %6s\n' \
				"rand$rw" "$q" "$qd" "$1" "$3" "$5" \
				"$(echo "$3 $1" | awk '{ print $2 ? $1 / $2 : 0 }')" \
				"$(echo "$5 $3" | awk '{ print $2 ? $1 / $2 : 0 }')" \
				"$2" "$4" "$6"
		done
	done
done
echo "kernel $(uname -r), $(nproc) vCPUs (TCG), ${SECS}s per point, rd_mcp 80 MiB, 4 KiB, poll_idle_us $IDLE (host and client)"
for f in "vhost $W_IN" "vhost_sqcq $W_OURS"; do
	set -- $f
	rm $C/$1/$2/tpgt_1/lun/lun_0/bench
	echo NULL >$C/$1/$2/tpgt_1/nexus
	rmdir $C/$1/$2/tpgt_1/lun/lun_0 $C/$1/$2/tpgt_1 $C/$1/$2 $C/$1
done
rmdir $C/core/rd_mcp_0/bench $C/core/rd_mcp_0
rmmod vhost_scsi_sqcq vhost_scsi
