#!/bin/bash
# End-to-end test, L2 part: runs inside the nested guest that tests/e2e/l1.sh
# starts (tests/vm/nested.sh), whose vhost-scsi-pci devices are served by the
# host backend loaded in L1.  Binds the guest driver, verifies data with fio,
# and asks L1 (through files in $SQCQ_RESULTS, a directory L1 watches) to
# hot-add and hot-remove a LUN.
#
# Usage: l2.sh GUEST LABEL [KO]
#   GUEST  intree (the kernel's virtio_scsi) or sqcq (virtio_scsi_sqcq, KO)
#   LABEL  prefix of the result lines, e.g. "intree/sqcq"
# Environment (set by l1.sh):
#   E2E_SLOT_A      PCI slot (hex) of the device L1 passed by vhostfd
#   E2E_SLOT_B      PCI slot of the device QEMU opened by plain wwpn ("" = none)
#   E2E_TPGT        target portal group tag = the guest's SCSI target id
#   E2E_FIO_SIZE    bytes fio writes and verifies on device A's LUN 0
#   E2E_MIN_IOS     I/Os (reads + writes) device A must complete at least
#   E2E_HOTPLUG     1: run the LUN hotplug handshake with L1
# Prints PASS:/FAIL: lines "e2e LABEL ..."; exit status 0 when all passed.
set -u
GUEST=${1:?GUEST}
LABEL=${2:?LABEL}
KO=${3:-}
fails=0
t_start=$SECONDS

pass() { echo "PASS: e2e $LABEL $*"; }
fail() { echo "FAIL: e2e $LABEL $*"; fails=$((fails + 1)); }
check() {
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}
log() { echo "e2e-l2: [${SECONDS}s] $*" >&2; }
# phase NAME: print the wall time since the previous phase mark.
phase() {
	echo "e2e-time: L2 $1 $((SECONDS - t_start))s" >&2
	t_start=$SECONDS
}
# wait_for SECONDS CMD...: poll CMD until it succeeds, for at most SECONDS
# of wall time (a poll itself is slow in a nested guest).
wait_for() {
	local end=$((SECONDS + $1))
	shift
	while :; do
		"$@" && return 0
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.5
	done
}

# The virtio device under a PCI slot: /sys/bus/pci/devices/.../virtioN.
vdev_of_slot() {
	local d
	for d in /sys/bus/pci/devices/0000:00:"$1".0/virtio*; do
		[ -d "$d" ] && { echo "$d"; return 0; }
	done
	return 1
}
driver_of() { basename "$(readlink "$1/driver" 2>/dev/null)" 2>/dev/null; }
# host_of SLOT: the SCSI host (hostN) of the virtio-scsi device under SLOT.
host_of() {
	local v h
	v=$(vdev_of_slot "$1") || return 1
	for h in "$v"/host*; do
		[ -d "$h" ] && { echo "${h##*/}"; return 0; }
	done
	return 1
}
# scan SLOT [LUN]: ask the SCSI midlayer to scan target $E2E_TPGT (the guest
# boots with scsi_mod.scan=manual: an automatic scan would probe all 256
# targets vhost-scsi announces, minutes in a nested guest).
scan() {
	local h
	h=$(host_of "$1") || return 1
	echo "0 $E2E_TPGT ${2:--}" >"/sys/class/scsi_host/$h/scan"
}
# has_feature SLOT BIT: the virtio device under SLOT negotiated feature BIT.
has_feature() {
	local v f
	v=$(vdev_of_slot "$1") || return 1
	f=$(cat "$v/features" 2>/dev/null)
	[ "${f:$2:1}" = 1 ]
}
# disks SLOT [LUN]: block devices of the SCSI host under SLOT, target
# $E2E_TPGT (all LUNs or LUN), one /dev path a line.
disks() {
	local v d hctl lun=${2:-}
	v=$(vdev_of_slot "$1") || return 0
	for d in "$v"/host*/target*/*/block/*; do
		[ -e "$d" ] || continue
		hctl=$(basename "$(dirname "$(dirname "$d")")")
		[ "$(echo "$hctl" | cut -d: -f3)" = "$E2E_TPGT" ] || continue
		[ -z "$lun" ] || [ "${hctl##*:}" = "$lun" ] || continue
		echo "/dev/${d##*/}"
	done | sort
}
has_disk() { [ -n "$(disks "$@")" ] && [ -b "$(disks "$@" | head -n 1)" ]; }
no_disk() { [ -z "$(disks "$@")" ]; }
# ios DEV: reads + writes completed on DEV (block layer statistics).
ios() { awk '{ print $1 + $5 }' "/sys/block/${1#/dev/}/stat"; }

# fio_verify NAME DEV SIZE [fio args]: random writes, then read back and
# check crc32c, with block sizes 512 B .. 1 MiB; hard time limit.
fio_verify() {
	local name=$1 dev=$2 size=$3 st
	shift 3
	timeout -k 10 "${E2E_FIO_TIMEOUT:-600}" fio --eta=never --name="$name" \
		--filename="$dev" --ioengine=libaio --direct=1 --rw=randwrite \
		--bssplit=512/20:1k/10:4k/40:8k/10:16k/10:64k/6:256k/3:1m/1 \
		--iodepth=16 --iodepth_batch_submit=8 --size="$size" --verify=crc32c --verify_fatal=1 \
		--do_verify=1 --verify_state_save=0 --output="/tmp/fio-$name.log" "$@"
	st=$?
	if [ $st != 0 ]; then
		log "fio $name failed (status $st)"
		tail -n 15 "/tmp/fio-$name.log" >&2
	fi
	cp "/tmp/fio-$name.log" "$SQCQ_RESULTS/" 2>/dev/null
	return $st
}

# ask_l1 WHAT: hand a request to L1 (hotplug-WHAT.req) and wait for its
# answer (hotplug-WHAT.done: "ok" or the reason it failed).
ask_l1() {
	local what=$1 ans
	echo "$what" >"$SQCQ_RESULTS/hotplug-$what.tmp" &&
		mv "$SQCQ_RESULTS/hotplug-$what.tmp" "$SQCQ_RESULTS/hotplug-$what.req" || return 1
	wait_for 60 test -e "$SQCQ_RESULTS/hotplug-$what.done" || { log "L1 did not answer $what"; return 1; }
	ans=$(cat "$SQCQ_RESULTS/hotplug-$what.done")
	[ "$ans" = ok ] || { log "L1: $what: $ans"; return 1; }
}

log "kernel $(uname -r), uptime $(cut -d' ' -f1 /proc/uptime)s, guest driver $GUEST"
# The kernel log as it happens: the rig only collects it when the command
# ends, not when L2 is killed on a timeout.
dmesg -w >"$SQCQ_RESULTS/dmesg-live.txt" 2>&1 &

# ---- 1. guest driver ---------------------------------------------------------
modprobe -a scsi_mod sd_mod 2>/dev/null
case "$GUEST" in
intree)
	want=virtio_scsi
	modprobe virtio_scsi || fail "modprobe virtio_scsi"
	;;
sqcq)
	want=virtio_scsi_sqcq
	# The in-tree driver is blacklisted on the command line; if something
	# bound it anyway, take the devices away from it.
	for v in /sys/bus/virtio/drivers/virtio_scsi/virtio*; do
		[ -e "$v" ] && echo "${v##*/}" >/sys/bus/virtio/drivers/virtio_scsi/unbind
	done
	[ -f "$KO" ] || fail "no guest module at $KO"
	# shellcheck disable=SC2086 # parameters, split on purpose
	insmod "$KO" ${E2E_GUEST_PARAMS:-} || fail "insmod $KO"
	;;
*) fail "unknown guest driver '$GUEST'"; exit 1 ;;
esac
slots="${E2E_SLOT_A:?} ${E2E_SLOT_B:-}"
bound_ok() {
	local s v
	for s in $slots; do
		v=$(vdev_of_slot "$s") || return 1
		[ "$(driver_of "$v")" = "$want" ] || return 1
	done
}
check "guest-driver-bound ($want on slot(s) $slots)" wait_for 30 bound_ok
for s in $slots; do
	wait_for 30 host_of "$s" >/dev/null && scan "$s"
done
check "disk-visible (vhostfd device)" wait_for 60 has_disk "$E2E_SLOT_A" 0
DISK_A=$(disks "$E2E_SLOT_A" 0 | head -n 1)
log "vhostfd device: $DISK_A"
phase "driver+scan"

# ---- 2. data integrity on the vhostfd device --------------------------------
if [ -n "$DISK_A" ]; then
	i0=$(ios "$DISK_A")
	t0=$SECONDS
	check "fio-verify-crc32c (libaio, direct, 512B..1MiB, $DISK_A)" \
		fio_verify verify "$DISK_A" "$E2E_FIO_SIZE"
	n=$(($(ios "$DISK_A") - i0))
	dt=$((SECONDS - t0))
	log "fio: $n I/Os in ${dt}s"
	check "ios>=$E2E_MIN_IOS ($n)" [ "$n" -ge "$E2E_MIN_IOS" ]
	phase "fio ($n I/Os)"
fi

# ---- 2b. SQ/CQ: negotiated with our host, classic with any other -------------
# sqcq_counts FILE: "requests kicks interrupts doorbells kicks_saved" summed
# over the request queues of a debugfs "queues" file.
sqcq_counts() {
	awk '$1 ~ /^request/ { r += $4; k += $5; i += $6; d += $9; s += $10 }
		END { print r + 0, k + 0, i + 0, d + 0, s + 0 }' "$1"
}
if [ "$GUEST" = sqcq ] && [ -n "${E2E_HOST:-}" ]; then
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	v=$(vdev_of_slot "$E2E_SLOT_A")
	d=/sys/kernel/debug/virtio_scsi_sqcq/${v##*/}
	mode=$(sed -n 's/^mode: //p' "$d/info" 2>/dev/null)
	sq_want=classic
	[ "$E2E_HOST" = intree ] || sq_want=sqcq
	check "sqcq-mode ($mode with host $E2E_HOST, want $sq_want)" [ "$mode" = "$sq_want" ]
	read -r r k i db ks < <(sqcq_counts "$d/queues")
	log "guest counters: requests $r kicks $k interrupts $i doorbells $db kicks_saved $ks; $(grep poll_ "$d/info" | tr '\n' ' ')"
	if [ "$sq_want" = sqcq ]; then
		check "sqcq-doorbells-used (doorbells $db, kicks saved $ks)" \
			[ "$db" -gt 0 -a "$ks" -gt 0 ]
		# Kicks the host poller made unnecessary (the completion side is
		# counted by tests/host/sqcq.sh; here the guest may run with
		# poll_idle_us=0, see tests/run-all.sh).
		check "sqcq-fewer-kicks ($k kicks for $r requests)" [ "$k" -lt "$r" ]
	fi
	pat="SQ/CQ not available"
	[ "$sq_want" = sqcq ] && pat="SQ/CQ negotiated"
	check "sqcq-log-line ($pat)" bash -c "dmesg | grep -q '$pat'"
fi

# ---- 3. the device QEMU opened by itself (plain wwpn=) -----------------------
if [ -n "${E2E_SLOT_B:-}" ]; then
	if check "disk-visible (plain wwpn device)" wait_for 60 has_disk "$E2E_SLOT_B" 0; then
		DISK_B=$(disks "$E2E_SLOT_B" 0 | head -n 1)
		check "fio-verify-crc32c (plain wwpn device, $DISK_B)" fio_verify plain "$DISK_B" 2m
	fi
	phase "plain-wwpn device"
fi

# ---- 4. LUN hotplug driven by L1 --------------------------------------------
# A device that offers VIRTIO_SCSI_F_HOTPLUG (QEMU's vhost-scsi only with
# hotplug=on, which QEMU 7.2 lacks) reports the LUN in an event and the
# driver adds and removes the disk by itself. Otherwise the guest finds the
# new LUN by a target scan, and the removed one by I/O failing on it (LIO:
# LOGICAL UNIT NOT SUPPORTED), then deletes the stale device.
# scan_has_disk SLOT LUN: scan for the LUN, then check for its disk.
scan_has_disk() { scan "$1" "$2" 2>/dev/null; has_disk "$1" "$2"; }
# lun_gone DEV: a direct read of DEV fails.
lun_gone() { ! dd if="$1" of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null; }
if [ "${E2E_HOTPLUG:-1}" = 1 ]; then
	if has_feature "$E2E_SLOT_A" 1; then
		how=event
	else
		how=rescan
	fi
	log "LUN hotplug by $how"
	if ask_l1 add; then
		if [ $how = event ]; then
			ok=0
			wait_for 60 has_disk "$E2E_SLOT_A" 1 && ok=1
		else
			ok=0
			wait_for 60 scan_has_disk "$E2E_SLOT_A" 1 && ok=1
		fi
		if [ $ok = 1 ]; then
			pass "hotplug-add-lun (new disk appears, $how)"
			DISK_H=$(disks "$E2E_SLOT_A" 1 | head -n 1)
			check "fio-verify-crc32c (hotplugged LUN, $DISK_H)" fio_verify hotplug "$DISK_H" 2m
		else
			fail "hotplug-add-lun (no disk for LUN 1 after 60 s, $how)"
		fi
		if ask_l1 del; then
			if [ $how = event ]; then
				check "hotplug-remove-lun (disk goes, event)" wait_for 60 no_disk "$E2E_SLOT_A" 1
			elif [ -n "${DISK_H:-}" ]; then
				if wait_for 60 lun_gone "$DISK_H"; then
					echo 1 >"/sys/block/${DISK_H#/dev/}/device/delete"
					check "hotplug-remove-lun (I/O fails, device deleted, rescan)" \
						wait_for 30 no_disk "$E2E_SLOT_A" 1
				else
					fail "hotplug-remove-lun ($DISK_H still answers 60 s after the unlink)"
				fi
			fi
		else
			fail "hotplug-remove-lun (L1 could not unlink the LUN)"
		fi
	else
		fail "hotplug-add-lun (L1 could not link the LUN)"
	fi
	check "lun0-still-there-after-hotplug" has_disk "$E2E_SLOT_A" 0
	check "lun0-io-after-hotplug" fio_verify after "$DISK_A" 1m
	phase "hotplug"
fi

# ---- 5. counters, unload ----------------------------------------------------
if [ "$GUEST" = sqcq ]; then
	for f in /sys/kernel/debug/virtio_scsi_sqcq/*/queues; do
		[ -r "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
	done
fi
check "guest-driver-unload (rmmod $want)" rmmod "$want"
phase "unload"
echo "e2e-l2: $fails failed" >&2
[ "$fails" = 0 ]
