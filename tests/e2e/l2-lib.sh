# shellcheck shell=bash
# Helpers of the scripts that run in the nested guest (tests/e2e/l2.sh,
# bench/compare-l2.sh); sourced from the repository root.  Starting a
# process costs seconds there, so these use bash builtins only.
# The caller sets PREFIX (start of its PASS:/FAIL: lines, see
# tests/lib/check.sh) and TAG (its log lines' tag) first.
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh

log() { echo "$TAG: [${SECONDS}s] $*" >&2; }
# Heartbeat for l1.sh's L2 watchdog: $SQCQ_RESULTS/heartbeat rewritten
# every 5 s while the script runs.
(while :; do echo "$SECONDS" >"$SQCQ_RESULTS/heartbeat"; nap 5; done) &
l2_heartbeat_pid=$!
# The kernel log as it happens: the rig only collects it when the command
# ends, not when L2 is killed (l1.sh reads it after a stall).
dmesg -w >"$SQCQ_RESULTS/dmesg-live.txt" 2>&1 &
l2_dmesg_pid=$!
trap 'kill "$l2_heartbeat_pid" "$l2_dmesg_pid" 2>/dev/null' EXIT
# vdev SLOT: REPLY = the virtio device directory under that PCI slot.
vdev() {
	local d
	REPLY=""
	for d in /sys/bus/pci/devices/0000:00:"$1".0/virtio*; do
		[ -d "$d" ] && { REPLY=$d; return 0; }
	done
	return 1
}
# dbg_value DIR KEY: REPLY = the value of "KEY: value" in the driver's
# debugfs DIR/info; status 1 when there is no such line.
dbg_value() {
	local k v
	REPLY=""
	while read -r k v; do
		[ "$k" = "$2:" ] && { REPLY=$v; return 0; }
	done <"$1/info"
	return 1
}
# dbg_snapshot DIR: DBGV[KEY] = every "KEY: value" of DIR/info, from one
# read (counters read one by one move by dozens in between).
declare -A DBGV
# shellcheck disable=SC2034 # DBGV is read by the callers
dbg_snapshot() {
	local info k v
	DBGV=()
	read -r -d '' info <"$1/info" || true	# status 1 at the end of the file
	while read -r k v; do
		DBGV[${k%:}]=$v
	done <<<"$info"
}
# queue_sums DIR: REQS KICKS IRQS DBS SAVED = requests, kicks, interrupts,
# doorbells and kicks saved summed over the request queues of DIR/queues
# (columns: queue type mode requests kicks interrupts polls completions
# doorbells kicks_saved).
queue_sums() {
	local q c4 c5 c6 c9 c10
	REQS=0 KICKS=0 IRQS=0 DBS=0 SAVED=0
	while read -r q _ _ c4 c5 c6 _ _ c9 c10 _; do
		[[ "$q" == request* ]] || continue
		REQS=$((REQS + c4)) KICKS=$((KICKS + c5)) IRQS=$((IRQS + c6))
		DBS=$((DBS + c9)) SAVED=$((SAVED + c10))
	done <"$1/queues"
}
# guest_pt: PT = the guest poll thread an SQ/CQ device probed now runs
# with: "running" when the driver's poll_cpu names CPUs, "none" without
# (completions by interrupt, no CQ doorbell read; docs/sqcq.md).
guest_pt() {
	local v=""
	read -r v </sys/module/virtio_scsi_sqcq/parameters/poll_cpu 2>/dev/null
	PT=none
	[ -z "$v" ] || PT=running
}
# sqcq_moved DB0 SV0: since DBS=DB0, SAVED=SAVED0 (queue_sums) kicks were
# saved, and the CQ doorbells moved with a poll thread ($PT, guest_pt),
# not at all without one.
sqcq_moved() {
	[ "$SAVED" -gt "$2" ] || return 1
	if [ "$PT" = running ]; then
		[ "$DBS" -gt "$1" ]
	else
		[ "$DBS" = "$1" ]
	fi
}
# unbind_intree: take every virtio-scsi device from the in-tree driver (it
# is blacklisted on L2's command line; if something bound it anyway).
unbind_intree() {
	local v
	for v in /sys/bus/virtio/drivers/virtio_scsi/virtio*; do
		[ -e "$v" ] && echo "${v##*/}" >/sys/bus/virtio/drivers/virtio_scsi/unbind
	done
}
# sqcq_bound: the device of $SLOT_A is bound to virtio_scsi_sqcq.
sqcq_bound() { vdev "$SLOT_A" && [ -e "/sys/bus/virtio/drivers/virtio_scsi_sqcq/${REPLY##*/}" ]; }
# lun0_disk [SLOT]: DISK = /dev path of LUN 0 of target $TPGT under SLOT
# (default $SLOT_A).
lun0_disk() {
	local d
	DISK=""
	vdev "${1:-$SLOT_A}" || return 1
	for d in "$REPLY"/host*/target*:0:"$TPGT"/*:0:"$TPGT":0/block/*; do
		[ -e "$d" ] && { DISK=/dev/${d##*/}; [ -b "$DISK" ]; return; }
	done
	return 1
}
# scsi_host SLOT: REPLY = its SCSI host (hostN).
scsi_host() {
	local h
	vdev "$1" || return 1
	for h in "$REPLY"/host*; do
		[ -d "$h" ] && { REPLY=${h##*/}; return 0; }
	done
	return 1
}
# l1_ask WHAT SECONDS [TEXT]: hand L1 a request (hotplug-WHAT.req, holding
# TEXT; tests/e2e/l1.sh's watch_l2 answers it) and wait up to SECONDS for
# its answer, hotplug-WHAT.done (an older answer is removed first, so a
# request may be repeated): REPLY = its first line, the file stays for
# callers that read more of it.  Status 1 when none came; the request is
# then withdrawn.
l1_ask() {
	rm -f "$SQCQ_RESULTS/hotplug-$1.done"
	echo "${3:-}" >"$SQCQ_RESULTS/hotplug-$1.req" || return 1
	if ! wait_for "$2" test -e "$SQCQ_RESULTS/hotplug-$1.done"; then
		rm -f "$SQCQ_RESULTS/hotplug-$1.req"
		return 1
	fi
	read -r REPLY <"$SQCQ_RESULTS/hotplug-$1.done"
}
# ask_l1 WHAT [TEXT]: a request L1 carries out (l1_ask, 60 s), answered
# "ok" or why it failed; status 1 (and a log line) unless ok.
ask_l1() {
	l1_ask "$1" 60 "${2:-}" || { log "L1 did not answer $1"; return 1; }
	[ "$REPLY" = ok ] || { log "L1: $1: $REPLY"; return 1; }
}
# l1_stat: REPLY = "EXITS BUSY IDLE CONTENDED YIELDS" from L1 (its KVM exit
# count, the busy clock ticks of all its CPUs, the host pollers' sleeps
# and yields), or dashes when L1 does not answer.
l1_stat() {
	l1_ask stat 30 || { REPLY="- - - - -"; return 1; }
}
