#!/bin/bash
# Runs INSIDE the L1 VM (bench/host.sh starts it): one ramdisk, exported by
# the in-tree fabric "vhost" and by ours, "vhost_sqcq"; the same client
# against both device nodes; one table.
#
# Usage: host-inside.sh KO CLIENT SECONDS
set -eu
KO=$1 CLIENT=$2 SECS=$3
C=/sys/kernel/config/target
W_IN=naa.5001405000000a01 W_OURS=naa.5001405000000b01

modprobe target_core_mod
modprobe vhost_scsi
insmod "$KO"
mkdir -p $C/core/rd_mcp_0/bench
echo rd_pages=$((80 << 8)) >$C/core/rd_mcp_0/bench/control
echo 1 >$C/core/rd_mcp_0/bench/enable
for f in "vhost $W_IN" "vhost_sqcq $W_OURS"; do
	set -- $f
	mkdir -p $C/$1/$2/tpgt_1/lun/lun_0
	ln -s $C/core/rd_mcp_0/bench $C/$1/$2/tpgt_1/lun/lun_0/bench
	echo naa.5001405000000c01 >$C/$1/$2/tpgt_1/nexus
done

run() { # NODE WWPN Q QD RW -> "iops kicks/io calls/io"
	"$CLIENT" "$1" "$2" "$3" "$4" "$SECS" "$5" |
		awk -F'[= ]' '{ printf "%d %.3f %.3f", $6, $8 / $2, $10 / $2 }'
}

printf '%-6s %2s %3s | %9s %9s | %6s | %-15s %-15s\n' rw q qd \
	in-tree ours ratio "kicks/io in,us" "calls/io in,us"
n=0
for rw in read write; do
	for q in 1 4; do
		for qd in 1 32; do
			# Alternate which module runs first.
			if [ $((n % 2)) = 0 ]; then
				a=$(run /dev/vhost-scsi $W_IN $q $qd $rw)
				b=$(run /dev/vhost-scsi-sqcq $W_OURS $q $qd $rw)
			else
				b=$(run /dev/vhost-scsi-sqcq $W_OURS $q $qd $rw)
				a=$(run /dev/vhost-scsi $W_IN $q $qd $rw)
			fi
			n=$((n + 1))
			set -- $a $b
			printf '%-6s %2s %3s | %9s %9s | %6.2f | %6s %6s     %6s %6s\n' \
				"rand$rw" "$q" "$qd" "$1" "$4" \
				"$(echo "$4 $1" | awk '{ print $2 ? $1 / $2 : 0 }')" \
				"$2" "$5" "$3" "$6"
		done
	done
done
echo "kernel $(uname -r), $(nproc) vCPUs (TCG), ${SECS}s per point, rd_mcp 80 MiB, 4 KiB"
for f in "vhost $W_IN" "vhost_sqcq $W_OURS"; do
	set -- $f
	rm $C/$1/$2/tpgt_1/lun/lun_0/bench
	echo NULL >$C/$1/$2/tpgt_1/nexus
	rmdir $C/$1/$2/tpgt_1/lun/lun_0 $C/$1/$2/tpgt_1 $C/$1/$2 $C/$1
done
rmdir $C/core/rd_mcp_0/bench $C/core/rd_mcp_0
rmmod vhost_scsi_sqcq vhost_scsi
