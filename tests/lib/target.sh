# shellcheck shell=bash
# An LIO target for vhost-scsi, built through raw configfs (no targetcli).
# Sourced, as root, inside a test VM (the kernel's module tree and modprobe
# are there).  FABRIC is "vhost" for the in-tree vhost_scsi module or
# "vhost_sqcq" for ours (same layout, docs/host-fabric.md).
#
#   sqcq_target_setup FABRIC WWPN TPGT NLUNS SIZE_MB
#       load target_core_mod (with the rd_mcp ramdisk backstore; and
#       vhost_scsi for "vhost"),
#       then create FABRIC/WWPN/tpgt_TPGT with its I_T nexus and LUNs
#       0..NLUNS-1, each on its own rd_mcp ramdisk of SIZE_MB MiB
#   sqcq_target_tpg FABRIC WWPN TPGT NLUNS SIZE_MB
#       the same without loading modules
#   sqcq_target_add_lun FABRIC WWPN TPGT LUN SIZE_MB
#       one more LUN (hotplug: a guest attached to the TPG gets an event)
#   sqcq_target_del_lun FABRIC WWPN TPGT LUN
#       unlink LUN (hot-unplug), remove its directory and ramdisk
#   sqcq_target_teardown FABRIC WWPN
#       remove everything below FABRIC/WWPN in the order the fabric accepts:
#       LUN links, nexus, LUN directories, TPGs, WWPN, ramdisks
#   sqcq_target_initiator WWPN
#       the initiator (nexus) name setup uses for WWPN
#
# WWPN is "naa." plus 16 hex digits.  The nexus' initiator port is WWPN with
# its first hex digit replaced (same "naa." protocol, as the fabric demands).
# Ramdisks are target/core/rd_mcp_$SQCQ_TARGET_HBA (default 0)/NAME, NAME
# made of fabric, WWPN, TPG and LUN so that targets of both fabrics coexist.
#
# Every function returns 0 on success, or non-zero after printing one line
# "target: <function>: <what failed>" on stderr.
#
# Order rules (in-tree vhost_scsi, and ours by the same contract):
# - the nexus must exist before an endpoint (QEMU) attaches to the TPG;
# - the nexus cannot be dropped while LUNs are linked (-EBUSY) or while an
#   endpoint is attached (-EBUSY): close the vhost device first;
# - a backstore cannot be removed while a LUN links it.

SQCQ_TARGET_CFS=${SQCQ_TARGET_CFS:-/sys/kernel/config/target}

_sqcq_target_fail() {
	echo "target: ${FUNCNAME[1]}: $*" >&2
	return 1
}

# _sqcq_target_write VALUE FILE: write VALUE into a configfs attribute; on
# failure print why (the kernel's errno) and return 1.
_sqcq_target_write() {
	local err
	err=$( { printf '%s\n' "$1" >"$2"; } 2>&1) && return 0
	echo "echo '$1' > $2: ${err##*: }"
	return 1
}

_sqcq_target_check_wwpn() {
	[[ "$1" =~ ^naa\.[0-9a-fA-F]{16}$ ]] ||
		{ echo "bad WWPN '$1' (want naa. and 16 hex digits)"; return 1; }
}

sqcq_target_initiator() {
	local w=${1#naa.} d
	d=${w:0:1}
	[ "$d" = 6 ] && d=7 || d=6
	echo "naa.$d${w:1}"
}

# The ramdisk of a LUN: its configfs directory.
_sqcq_target_rd_dir() {
	echo "$SQCQ_TARGET_CFS/core/rd_mcp_${SQCQ_TARGET_HBA:-0}/$1-${2#naa.}-t$3-l$4"
}

# _sqcq_target_modules FABRIC: target core, ramdisk backstore, fabric.
_sqcq_target_modules() {
	local fabric=$1 err
	# The rd_mcp backstore is part of target_core_mod.
	if ! [ -d "$SQCQ_TARGET_CFS/core" ]; then
		err=$(modprobe target_core_mod 2>&1) ||
			{ echo "modprobe target_core_mod: $err"; return 1; }
	fi
	[ -d "$SQCQ_TARGET_CFS/core" ] ||
		{ echo "$SQCQ_TARGET_CFS/core missing (configfs not mounted?)"; return 1; }
	case "$fabric" in
	vhost)
		# Fabric "vhost" is ours when vhost_scsi_sqcq runs with takeover=1.
		if ! [ -d /sys/module/vhost_scsi ] &&
		   [ "$(cat /sys/module/vhost_scsi_sqcq/parameters/takeover 2>/dev/null)" != Y ]; then
			err=$(modprobe vhost_scsi 2>&1) ||
				{ echo "modprobe vhost_scsi: $err"; return 1; }
		fi
		;;
	vhost_sqcq)
		[ -d /sys/module/vhost_scsi_sqcq ] ||
			{ echo "fabric vhost_sqcq: load vhost_scsi_sqcq.ko first"; return 1; }
		;;
	*) echo "unknown fabric '$fabric' (vhost or vhost_sqcq)"; return 1 ;;
	esac
	# mkdir of the fabric directory looks the fabric up (and keeps it).
	if ! [ -d "$SQCQ_TARGET_CFS/$fabric" ]; then
		err=$(mkdir "$SQCQ_TARGET_CFS/$fabric" 2>&1) ||
			{ echo "fabric $fabric not registered with the target core (mkdir: ${err##*: })"
			  return 1; }
	fi
}

sqcq_target_add_lun() {
	local fabric=$1 wwpn=$2 tpgt=$3 lun=$4 size_mb=$5 msg rd tpg err
	[ $# = 5 ] || _sqcq_target_fail "usage: FABRIC WWPN TPGT LUN SIZE_MB" || return
	msg=$(_sqcq_target_check_wwpn "$wwpn") || _sqcq_target_fail "$msg" || return
	[[ "$lun" =~ ^[0-9]+$ && "$tpgt" =~ ^[0-9]+$ && "$size_mb" =~ ^[1-9][0-9]*$ ]] ||
		_sqcq_target_fail "bad TPGT/LUN/SIZE_MB '$tpgt' '$lun' '$size_mb'" || return
	tpg=$SQCQ_TARGET_CFS/$fabric/$wwpn/tpgt_$tpgt
	[ -d "$tpg" ] || _sqcq_target_fail "no $tpg" || return
	[ -e "$tpg/lun/lun_$lun" ] && { _sqcq_target_fail "lun_$lun exists in $tpg"; return; }
	rd=$(_sqcq_target_rd_dir "$fabric" "$wwpn" "$tpgt" "$lun")
	# The ramdisk: its HBA, the device, its size in 4 KiB pages, enable.
	mkdir -p "$rd" 2>/dev/null || _sqcq_target_fail "mkdir $rd failed" || return
	msg=$(_sqcq_target_write "rd_pages=$((size_mb * 256))" "$rd/control") ||
		{ rmdir "$rd" 2>/dev/null; _sqcq_target_fail "$msg"; return; }
	msg=$(_sqcq_target_write 1 "$rd/enable") ||
		{ rmdir "$rd" 2>/dev/null; _sqcq_target_fail "$msg"; return; }
	# The LUN and its link to the ramdisk (the link is what the fabric sees:
	# port_link, and the hotplug event to an attached guest).
	err=$(mkdir "$tpg/lun/lun_$lun" 2>&1) ||
		{ rmdir "$rd" 2>/dev/null; _sqcq_target_fail "mkdir lun_$lun: ${err##*: }"; return; }
	err=$(ln -s "$rd" "$tpg/lun/lun_$lun/backstore" 2>&1) || {
		rmdir "$tpg/lun/lun_$lun" "$rd" 2>/dev/null
		_sqcq_target_fail "link lun_$lun -> ${rd##*/}: ${err##*: }"
		return
	}
}

sqcq_target_del_lun() {
	local fabric=$1 wwpn=$2 tpgt=$3 lun=$4 dir l rd="" err
	[ $# = 4 ] || _sqcq_target_fail "usage: FABRIC WWPN TPGT LUN" || return
	dir=$SQCQ_TARGET_CFS/$fabric/$wwpn/tpgt_$tpgt/lun/lun_$lun
	[ -d "$dir" ] || _sqcq_target_fail "no $dir" || return
	for l in "$dir"/*; do
		[ -L "$l" ] || continue
		rd=$(readlink -f "$l")
		err=$(rm "$l" 2>&1) || _sqcq_target_fail "unlink $l: ${err##*: }" || return
	done
	err=$(rmdir "$dir" 2>&1) || _sqcq_target_fail "rmdir $dir: ${err##*: }" || return
	# Only our own ramdisks go (another target may link a foreign one).
	if [ -n "$rd" ] && [ "$rd" = "$(_sqcq_target_rd_dir "$fabric" "$wwpn" "$tpgt" "$lun")" ]; then
		err=$(rmdir "$rd" 2>&1) || _sqcq_target_fail "rmdir $rd: ${err##*: }" || return
	fi
	rmdir "${rd%/*}" 2>/dev/null # the HBA, once empty
	return 0
}

sqcq_target_setup() {
	local fabric=$1 msg
	[ $# = 5 ] || _sqcq_target_fail "usage: FABRIC WWPN TPGT NLUNS SIZE_MB" || return
	msg=$(_sqcq_target_modules "$fabric") || _sqcq_target_fail "$msg" || return
	sqcq_target_tpg "$@"
}

# sqcq_target_tpg FABRIC WWPN TPGT NLUNS SIZE_MB: sqcq_target_setup without
# loading modules (the caller did; Debian kernels have no target_core_rd).
sqcq_target_tpg() {
	local fabric=$1 wwpn=$2 tpgt=$3 nluns=$4 size_mb=$5 msg tpg err i
	[ $# = 5 ] || _sqcq_target_fail "usage: FABRIC WWPN TPGT NLUNS SIZE_MB" || return
	msg=$(_sqcq_target_check_wwpn "$wwpn") || _sqcq_target_fail "$msg" || return
	[[ "$tpgt" =~ ^[0-9]+$ && "$nluns" =~ ^[0-9]+$ ]] ||
		_sqcq_target_fail "bad TPGT/NLUNS '$tpgt' '$nluns'" || return
	tpg=$SQCQ_TARGET_CFS/$fabric/$wwpn/tpgt_$tpgt
	[ -e "$tpg" ] && { _sqcq_target_fail "$tpg exists already"; return; }
	# The fabric's directory appears when it is first made.
	if ! [ -d "$SQCQ_TARGET_CFS/$fabric" ]; then
		err=$(mkdir "$SQCQ_TARGET_CFS/$fabric" 2>&1) ||
			_sqcq_target_fail "mkdir $fabric: ${err##*: }" || return
	fi
	if ! [ -d "$SQCQ_TARGET_CFS/$fabric/$wwpn" ]; then
		err=$(mkdir "$SQCQ_TARGET_CFS/$fabric/$wwpn" 2>&1) ||
			_sqcq_target_fail "mkdir $fabric/$wwpn: ${err##*: }" || return
	fi
	err=$(mkdir "$tpg" 2>&1) || _sqcq_target_fail "mkdir $tpg: ${err##*: }" || return
	# Fabrics with an enable attribute (not vhost so far) start disabled.
	if [ -f "$tpg/enable" ] && [ "$(cat "$tpg/enable" 2>/dev/null)" = 0 ]; then
		msg=$(_sqcq_target_write 1 "$tpg/enable") || _sqcq_target_fail "$msg" || return
	fi
	msg=$(_sqcq_target_write "$(sqcq_target_initiator "$wwpn")" "$tpg/nexus") ||
		_sqcq_target_fail "$msg" || return
	for ((i = 0; i < nluns; i++)); do
		sqcq_target_add_lun "$fabric" "$wwpn" "$tpgt" "$i" "$size_mb" || return
	done
}

# _sqcq_target_note MSG: teardown remembers its first failure and goes on
# (sets the caller's rc and first).
_sqcq_target_note() {
	[ -n "$first" ] || first=$1
	rc=1
}

sqcq_target_teardown() {
	local fabric=$1 wwpn=$2 base tpg lun l rc=0 err rds=() rd first=""
	[ $# = 2 ] || _sqcq_target_fail "usage: FABRIC WWPN" || return
	base=$SQCQ_TARGET_CFS/$fabric/$wwpn
	[ -d "$base" ] || return 0
	# 1. LUN links (the fabric refuses to drop a nexus with linked LUNs).
	for tpg in "$base"/tpgt_*; do
		[ -d "$tpg" ] || continue
		for lun in "$tpg"/lun/lun_*; do
			for l in "$lun"/*; do
				[ -L "$l" ] || continue
				rds+=("$(readlink -f "$l")")
				err=$(rm "$l" 2>&1) || _sqcq_target_note "unlink $l: ${err##*: }"
			done
		done
	done
	# 2. nexus (fails while an endpoint is attached: QEMU still running),
	# 3. LUN directories and the TPG.
	for tpg in "$base"/tpgt_*; do
		[ -d "$tpg" ] || continue
		if [ -n "$(cat "$tpg/nexus" 2>/dev/null)" ]; then
			err=$(_sqcq_target_write NULL "$tpg/nexus") ||
				_sqcq_target_note "$err (vhost device still attached?)"
		fi
		for lun in "$tpg"/lun/lun_*; do
			[ -d "$lun" ] || continue
			err=$(rmdir "$lun" 2>&1) || _sqcq_target_note "rmdir $lun: ${err##*: }"
		done
		err=$(rmdir "$tpg" 2>&1) || _sqcq_target_note "rmdir $tpg: ${err##*: }"
	done
	# 4. WWPN, 5. our ramdisks (not foreign backstores a LUN linked).
	err=$(rmdir "$base" 2>&1) || _sqcq_target_note "rmdir $base: ${err##*: }"
	for rd in "${rds[@]}"; do
		case "${rd##*/}" in
		"$fabric-${wwpn#naa.}-t"*)
			err=$(rmdir "$rd" 2>&1) || _sqcq_target_note "rmdir $rd: ${err##*: }"
			rmdir "${rd%/*}" 2>/dev/null
			;;
		esac
	done
	[ "$rc" = 0 ] || _sqcq_target_fail "$first"
}
