#!/bin/bash
# Runs INSIDE the L1 VM (bench/host.sh starts it): one ramdisk, exported by
# the in-tree fabric "vhost" and by ours, "vhost_sqcq"; the same client
# against both device nodes, ours in classic and in SQ/CQ mode; one table.
# notifications/io = (kicks the client sent + calls it received) per I/O.
# A client run that failed (its status, verify errors, no result line, or
# another mode than asked: a refused SQ/CQ setup) prints a FAIL line and
# its point no ratios; the script then exits 1.
#
# Usage: host-inside.sh KO CLIENT SECONDS [IDLE_US]
set -euo pipefail
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
	read -r fab w <<<"$f"
	mkdir -p "$C/$fab/$w/tpgt_1/lun/lun_0"
	ln -s $C/core/rd_mcp_0/bench "$C/$fab/$w/tpgt_1/lun/lun_0/bench"
	echo naa.5001405000000c01 >"$C/$fab/$w/tpgt_1/nexus"
done

# run VAR Q QD RW: one client run of variant VAR (in: in-tree; cl: ours
# classic; sq: ours SQ/CQ); R[VAR] = "iops notifications/io".  The client
# prints "ios=N seconds=S iops=I kicks=K calls=C errors=E mode=M ..." and
# exits 0; anything else (status 1 verify errors, 2 a failed call, 3 SQ/CQ
# refused, a line missing or of another mode) is a FAIL line and status 1,
# R[VAR] unset: no ratio from a run that is not what its column says.
declare -A R
run() {
	local var=$1 q=$2 qd=$3 rw=$4 node=/dev/vhost-scsi-sqcq wwpn=$W_OURS
	local want=classic sq="" out st=0 f k v ios="" iops="" kicks="" calls="" errors="" mode=""
	case $var in
	in) node=/dev/vhost-scsi wwpn=$W_IN ;;
	sq) sq=1 want=sqcq ;;
	esac
	unset "R[$var]"
	out=$("$CLIENT" "$node" "$wwpn" -q "$q" -d "$qd" -t "$SECS" -m "$rw" -i "$IDLE" ${sq:+-s} 2>/tmp/bench-client.err) || st=$?
	for f in $out; do
		k=${f%%=*} v=${f#*=}
		case $k in
		ios | iops | kicks | calls | errors | mode) printf -v "$k" %s "$v" ;;
		esac
	done
	if [ "$st" != 0 ] || [ "$mode" != "$want" ] || [ "$errors" != 0 ] ||
		! [[ "$ios" =~ ^[1-9][0-9]*$ && "$kicks" =~ ^[0-9]+$ && "$calls" =~ ^[0-9]+$ ]]; then
		echo "FAIL: bench-host $var rand$rw q$q qd$qd: client status $st, mode ${mode:-none} (want $want), errors ${errors:-none}, ios ${ios:-none}: $(tail -n 1 /tmp/bench-client.err)"
		return 1
	fi
	R[$var]="${iops%.*} $(awk -v n=$((kicks + calls)) -v d="$ios" 'BEGIN { printf "%.3f", n / d }')"
}

printf '%-10s %2s %3s | %8s %8s %8s | %6s %6s | %-24s\n' rw q qd \
	in-tree classic sqcq ours/in sqcq/cl "notifications/io in,cl,sq"
n=0 failed=0
for rw in read write; do
	for q in 1 4; do
		for qd in 1 32; do
			# Rotate which variant runs first.
			case $((n % 3)) in
			0) order="in cl sq" ;;
			1) order="cl sq in" ;;
			2) order="sq in cl" ;;
			esac
			n=$((n + 1))
			bad=0
			for v in $order; do
				run "$v" "$q" "$qd" "$rw" || bad=1
			done
			if [ "$bad" = 1 ]; then
				failed=$((failed + 1))
				printf '%-10s %2s %3s | FAILED (see the FAIL lines): no ratios\n' "rand$rw" "$q" "$qd"
				continue
			fi
			read -r i_io i_n <<<"${R[in]}"
			read -r c_io c_n <<<"${R[cl]}"
			read -r s_io s_n <<<"${R[sq]}"
			printf '%-10s %2s %3s | %8s %8s %8s | %6.2f %6.2f | %6s %6s %6s\n' \
				"rand$rw" "$q" "$qd" "$i_io" "$c_io" "$s_io" \
				"$(awk -v a="$c_io" -v b="$i_io" 'BEGIN { print b ? a / b : 0 }')" \
				"$(awk -v a="$s_io" -v b="$c_io" 'BEGIN { print b ? a / b : 0 }')" \
				"$i_n" "$c_n" "$s_n"
		done
	done
done
echo "kernel $(uname -r), $(nproc) vCPUs (TCG), ${SECS}s per point, rd_mcp 80 MiB, 4 KiB, poll_idle_us $IDLE (host and client)"
for f in "vhost $W_IN" "vhost_sqcq $W_OURS"; do
	read -r fab w <<<"$f"
	rm "$C/$fab/$w/tpgt_1/lun/lun_0/bench"
	echo NULL >"$C/$fab/$w/tpgt_1/nexus"
	rmdir "$C/$fab/$w/tpgt_1/lun/lun_0" "$C/$fab/$w/tpgt_1" "$C/$fab/$w" "$C/$fab"
done
rmdir $C/core/rd_mcp_0/bench $C/core/rd_mcp_0
rmmod vhost_scsi_sqcq vhost_scsi
if [ "$failed" != 0 ]; then
	echo "FAIL: bench-host $failed of $n points had a failed client run"
	exit 1
fi
