# shellcheck shell=bash
# Helpers of the scripts that run in the nested guest (tests/e2e/l2.sh,
# bench/compare-l2.sh); sourced.  Starting a process costs seconds there,
# so these use bash builtins only.
# The caller sets PREFIX (start of its PASS:/FAIL: lines) and TAG (its log
# lines' tag) first.
fails=0

pass() { echo "PASS: $PREFIX $*"; }
fail() { echo "FAIL: $PREFIX $*"; fails=$((fails + 1)); }
check() {
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}
log() { echo "$TAG: [${SECONDS}s] $*" >&2; }
# nap SECONDS: sleep without starting a process (read on a pipe nobody
# writes to).
exec {nap_fd}<> <(:)
nap() { read -r -t "$1" -u "$nap_fd" _; }
# wait_for SECONDS CMD...: poll CMD until it succeeds, for at most SECONDS.
wait_for() {
	local end=$((SECONDS + $1))
	shift
	while :; do
		"$@" && return 0
		[ "$SECONDS" -lt "$end" ] || return 1
		nap 0.5
	done
}
# vdev SLOT: REPLY = the virtio device directory under that PCI slot.
vdev() {
	local d
	REPLY=""
	for d in /sys/bus/pci/devices/0000:00:"$1".0/virtio*; do
		[ -d "$d" ] && { REPLY=$d; return 0; }
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
