#!/bin/bash
# tests/vm/run.sh [OPTIONS] -- COMMAND [ARGS...]
#
# Boot a Debian kernel under QEMU TCG with this machine's root shared
# read-only over virtio-9p, and run COMMAND in it as root (cwd: the repo root,
# or --cwd). The VM kernel's own modules are at /lib/modules/$(uname -r), so
# `modprobe` works; /tmp, /var/tmp, /run, /dev/shm are tmpfs; proc, sys, dev,
# debugfs, configfs are mounted. See tests/README.md.
#
# Options:
#   --kernel ID|ABI   kernel id of tests/lib/kernels.sh or an ABI (default 6.1;
#                     in a VM: the running one)
#   --smp N           vCPUs (default 2)
#   --mem M           memory, MiB (default 2048)
#   --timeout S       hard limit for the whole VM in seconds (default 600):
#                     QEMU is killed, exit status 124
#   --append ARGS     more kernel command-line arguments
#   --qemu-arg ARG    one more QEMU argument (repeatable), e.g.
#                     --qemu-arg -device --qemu-arg vhost-scsi-pci,vhostfd=3
#   --results DIR     host directory the guest sees at $SQCQ_RESULTS
#                     (/run/sqcq/out) to bring files back (default: a
#                     temporary directory, removed afterwards)
#   --cwd DIR         working directory of COMMAND (default: the repo root)
#   --env NAME=VALUE  export into the guest (repeatable); SQCQ_* variables of
#                     the caller are passed through anyway
#   --bzimage         boot the compressed vmlinuz instead of the ELF vmlinux
#
# In the guest: SQCQ_IN_VM=1, SQCQ_ABI, SQCQ_KVER, SQCQ_RESULTS,
# SQCQ_VM_DEPTH (1 = L1, 2 = nested L2, ...), SQCQ_VM_EXPECTED (a file: a
# command that made the kernel print a report on purpose writes that
# report's lines there, exactly as dmesg prints them, and the log check
# below does not count those lines; no other).
#
# Environment: SQCQ_VM_NESTED_ACCEL (nested guests: auto, kvm or tcg; see
# nested.sh), SQCQ_VM_INITRD_EXTRA (more modules the initramfs loads, e.g.
# "scsi_mod sd_mod"), SQCQ_VM_QEMU (the QEMU command, default
# qemu-system-x86_64; tests/vm/qemu-chroot.sh ROOT runs another suite's),
# SQCQ_VM_QBOOT (the nested guests' qboot.rom).
#
# COMMAND's stdout and stderr come through live (on the first serial port).
# Exit status: COMMAND's; 124 on timeout; 125 when the VM died before
# COMMAND's status came back (or, nested under KVM, QEMU reported a "KVM
# internal error": "FAIL: vm-kvm-error"); 1 when COMMAND succeeded but the
# guest kernel log is dirty (WARNING, BUG, Oops, lockup, hung task, RCU
# stall, a sanitizer report, or a taint other than O/E; on a kernel with
# kmemleak, tests/debug/: an object its end-of-run scan found, or no scan;
# with lockdep: lockdep switched off), which also prints "FAIL: vm-kernel-log
# (<classes>: <first line>)", e.g. "(KASAN: BUG: KASAN: slab-out-of-bounds
# in ...)", and the last kernel log lines. A kernel's own parameters
# (<kimage>/cmdline, the sanitizer kernel's) are appended to the command line.
# A kernel that dies while booting, before COMMAND starts and untainted (no
# module of ours loaded), or a VM whose console stays silent for
# SQCQ_VM_BOOT_STALL_S (default 300, 120 for an L1, at most half of
# --timeout) s before COMMAND starts, is booted again, at most twice (a
# line on stderr says so each time).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
orig_args=("$@")	# for the boot retries below
# The caller's SQCQ_* variables (before the libraries set their own).
caller_sqcq_env=$(env | grep -E '^SQCQ_[A-Za-z0-9_]*=' || true)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

# ---- options ---------------------------------------------------------------
depth=$((${SQCQ_VM_DEPTH:-0} + 1))
if sqcq_in_vm; then
	kernel=${SQCQ_ABI:?SQCQ_ABI unset in the VM}
else
	kernel=6.1
fi
smp=2 mem=2048 timeout_s=600 append="" results="" cwd="$SQCQ_REPO" bzimage=0
# Nested guests (nested.sh): its boot-time tuning, plus acpi=off (ACPI table
# interpretation and PCI link setup cost minutes under TCG inside TCG; PCI
# works through the BIOS tables and MSI-X, and the guest leaves by reboot).
# pci=noearly: no early PCI config scans (AGP aperture probing), each access
# is a VM exit.
if [ "${SQCQ_VM_NESTED:-0}" = 1 ]; then
	smp=1 mem=256 append=" acpi=off pci=noearly"
fi
qemu_extra=() envs=()
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kernel=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--append) append="$append $2"; shift 2 ;;
	--qemu-arg) qemu_extra+=("$2"); shift 2 ;;
	--results) results=$2; shift 2 ;;
	--cwd) cwd=$2; shift 2 ;;
	--env) envs+=("$2"); shift 2 ;;
	--bzimage) bzimage=1; shift ;;
	--) shift; break ;;
	-h | --help) usage ;;
	*) sqcq_log "unknown option $1"; usage ;;
	esac
done
[ $# -gt 0 ] || usage
[[ "$timeout_s" =~ ^[0-9]+$ ]] || sqcq_die "--timeout needs seconds"

# ---- accelerator, CPU, firmware ----------------------------------------------
# L1 runs under TCG (no KVM here) with qemu64 plus NPT: TCG emulates SVM with
# nested paging, so L1 can run KVM for L2 (see nested.sh).
# Nested guests use KVM when L1 has it (SQCQ_VM_NESTED_ACCEL=auto, the
# default; kvm: required; tcg: never), QEMU falling back to TCG by itself if
# KVM cannot start, and qboot instead of SeaBIOS (both: boot time).
accel=tcg
vm_machine=(-accel tcg)
if [ "${SQCQ_VM_NESTED:-0}" = 1 ]; then
	case "${SQCQ_VM_NESTED_ACCEL:-auto}" in
	tcg) ;;
	auto) sqcq_vm_kvm_ready && accel=kvm ;;
	kvm)
		sqcq_vm_kvm_ready || sqcq_die "SQCQ_VM_NESTED_ACCEL=kvm: no usable /dev/kvm"
		accel=kvm
		;;
	*) sqcq_die "SQCQ_VM_NESTED_ACCEL: auto, kvm or tcg" ;;
	esac
	# -cpu max: what L1's KVM offers (TSC deadline timer, no CPUID-exiting
	# alternatives fix-ups at boot); the TCG fallback takes it as well.
	[ "$accel" = kvm ] && vm_machine=(-accel kvm -accel tcg -cpu max)
	[ -f "$SQCQ_VM_QBOOT" ] && vm_machine+=(-bios "$SQCQ_VM_QBOOT")
elif ! sqcq_in_vm; then
	# shellcheck disable=SC2054 # one QEMU option value
	vm_machine+=(-cpu qemu64,+npt)
fi

# ---- kernel, initramfs, host prerequisites ----------------------------------
sqcq_vm_install_deps
kdir=$(sqcq_vm_fetch_kernel "$kernel")
abi=${kdir##*/}
case "$kdir" in *[[:space:]]*) sqcq_die "cache path with blanks: $kdir" ;; esac
initrd=$(sqcq_vm_initramfs "$kdir")
# Kernel parameters that belong to this kernel (the sanitizer kernel's).
[ ! -s "$kdir/cmdline" ] || append="$append $(cat "$kdir/cmdline")"
kimg="$kdir/vmlinux"
[ "$bzimage" = 0 ] && [ -f "$kimg" ] || kimg="$kdir/vmlinuz"
# The guest bind-mounts the cached modules on /lib/modules/<kver>; a
# read-only root needs the mount point to exist already. Debian machines
# without any kernel installed (containers, like this build machine) lack it.
if [ ! -d /lib/modules ]; then
	sqcq_in_vm && sqcq_die "/lib/modules missing in the shared root"
	mkdir -p /lib/modules
fi

# ---- control and results shares ---------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/sqcq-vm.XXXXXX")
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	local st=$?
	# The console, for a caller that reads the verdict again (tests/e2e/:
	# whether a run the emulator broke printed a kernel report first),
	# also when this script was killed.
	[ -z "${results:-}" ] || [ "$results" = "$work/out" ] ||
		cp "$work/console.log" "$results/console.log" 2>/dev/null || true
	if [ "${SQCQ_VM_KEEP:-0}" = 1 ]; then
		sqcq_log "kept $work"
	else
		rm -rf "$work"
	fi
	exit "$st"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ctl="$work/ctl"
mkdir -p "$ctl"
if [ -z "$results" ]; then
	results="$work/out"
fi
mkdir -p "$results"
results=$(cd "$results" && pwd)

# env.sh: sourced by stage 2 (guest-stage2.sh) before COMMAND runs.
{
	printf 'export SQCQ_KIMAGE=%q SQCQ_CWD=%q SQCQ_ABI=%q SQCQ_CACHE=%q SQCQ_VM_DEPTH=%q\n' \
		"$kdir" "$cwd" "$abi" "$SQCQ_CACHE" "$depth"
	echo 'export SQCQ_VM_EXPECTED=/run/sqcq/ctl/expected-log'
	while IFS='=' read -r name _; do
		case "$name" in
		SQCQ_IN_VM | SQCQ_ABI | SQCQ_KVER | SQCQ_RESULTS | SQCQ_VM_DEPTH | SQCQ_CACHE | \
			SQCQ_VM_EXPECTED | \
			SQCQ_VM_NESTED | SQCQ_VM_INITRD_EXTRA | SQCQ_APT_DIR | SQCQ_VM_BOOT_RETRY) ;;
		SQCQ_*) printf 'export %s=%q\n' "$name" "${!name-}" ;;
		esac
	done <<<"$caller_sqcq_env"
	for e in "${envs[@]}"; do
		printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"
	done
} >"$ctl/env.sh"
# cmd.sh: COMMAND, quoted word by word.
{
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
} >"$ctl/cmd.sh"

# ---- QEMU --------------------------------------------------------------------
p9opts="security_model=none,multidevs=remap"
# The QEMU binary: SQCQ_VM_QEMU (common.sh), split into words.
read -r -a qemu_cmd <<<"$SQCQ_VM_QEMU"
# shellcheck disable=SC2054 # commas belong to QEMU option values
qemu=(
	"${qemu_cmd[@]}" "${vm_machine[@]}" -nodefaults -nographic -monitor none
	-no-reboot -smp "$smp" -m "$mem"
	-kernel "$kimg" -initrd "$initrd"
	-append "console=ttyS0 quiet panic=-1 mitigations=off cryptomgr.notests=1 \
tsc=unstable no_timer_check rdinit=/init sqcq.kimage=$kdir$append"
	# ttyS0: kernel console (a file; SeaBIOS writes there too); ttyS1:
	# COMMAND's output (our stdout).
	-serial "file:$work/console.log" -serial stdio
	-fsdev "local,id=root,path=/,readonly=on,$p9opts"
	-device virtio-9p-pci,fsdev=root,mount_tag=sqcqroot
	-fsdev "local,id=ctl,path=$ctl,$p9opts"
	-device virtio-9p-pci,fsdev=ctl,mount_tag=sqcqctl
	-fsdev "local,id=out,path=$results,$p9opts"
	-device virtio-9p-pci,fsdev=out,mount_tag=sqcqout
	"${qemu_extra[@]}"
)

# kvm_error_watch: QEMU's stderr, passed on; on "KVM internal error" (KVM
# in L1 refused to go on with the nested guest, seen with TCG's emulated SVM
# underneath) QEMU only pauses the guest: note it and end QEMU instead of
# waiting for the timeout.
kvm_error_watch() {
	local line
	while IFS= read -r line; do
		printf '%s\n' "$line" >&2
		case "$line" in
		*"KVM internal error"*)
			[ -e "$work/kvm-error" ] && continue
			printf '%s\n' "$line" >"$work/kvm-error"
			# Let QEMU print its register dump first.
			(sleep 3 && kill -TERM "$(cat "$work/qemu.pid")") 2>/dev/null &
			;;
		esac
	done
}

# boot_watch: COMMAND has not started and the kernel console has been
# silent for SQCQ_VM_BOOT_STALL_S (default 120 s for an L1, whose boot
# prints within seconds even on the sanitizer kernel; 300 s for a nested
# guest; or half the VM's --timeout when that is shorter) s: the VM hung
# while booting (a fuzz stage run lost 300 s so on 2026-12-02) (seen under TCG:
# SeaBIOS hung after an early reset, 2026-12-01; a 300 s VM of the
# sanitizer self-test hung so twice in a row, each time until its timeout
# came first). End QEMU and note it (the retry below). It holds none of
# the caller's descriptors (a vhostfd must close with QEMU).
boot_watch() {
	local fd size=-1 s last now limit=${SQCQ_VM_BOOT_STALL_S:-300}
	[ -n "${SQCQ_VM_BOOT_STALL_S:-}" ] || [ "$depth" != 1 ] || limit=120
	[ -n "${SQCQ_VM_BOOT_STALL_S:-}" ] || [ "$limit" -le $((timeout_s / 2)) ] ||
		limit=$((timeout_s / 2))
	for fd in /proc/$BASHPID/fd/*; do
		fd=${fd##*/}
		[ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
	done
	last=$(date +%s)
	while sleep 5; do
		[ -e "$ctl/uptime-start" ] && return 0
		s=$(stat -c %s "$work/console.log" 2>/dev/null) || s=0
		now=$(date +%s)
		if [ "$s" != "$size" ]; then
			size=$s last=$now
			continue
		fi
		[ $((now - last)) -ge "$limit" ] || continue
		echo "$((now - last))" >"$work/boot-stall"
		kill -TERM "$(cat "$work/qemu.pid" 2>/dev/null)" 2>/dev/null
		return 0
	done
}

t0=$(date +%s.%N)
boot_watch &
bw_pid=$!
set +e
# The hard timeout: timeout(1) kills QEMU (SIGKILL 5 s after SIGTERM).
# Extra file descriptors of the caller (e.g. a vhostfd=N) are inherited.
if [ "$accel" = kvm ]; then
	timeout -k 5 "$timeout_s" "${qemu[@]}" -pidfile "$work/qemu.pid" </dev/null \
		2> >(kvm_error_watch)
else
	timeout -k 5 "$timeout_s" "${qemu[@]}" -pidfile "$work/qemu.pid" </dev/null
fi
qrc=$?
kill "$bw_pid" 2>/dev/null
wait "$bw_pid" 2>/dev/null
set -e
t1=$(date +%s.%N)

# boot_again WHY: say so, and run this script again with the same arguments
# (at most twice: SQCQ_VM_BOOT_RETRY counts; a sanitizer kernel's boot
# stalled twice in a row in one CI run on 2026-12-02, the third boot of
# the same kind that day passed).
boot_again() {
	sqcq_log "kernel $abi $1; booting again ($((boot_retry + 1)) of $boot_retries)"
	[ "${SQCQ_VM_KEEP:-0}" = 1 ] || rm -rf "$work"
	trap - EXIT
	SQCQ_VM_BOOT_RETRY=$((boot_retry + 1)) exec "$here/run.sh" "${orig_args[@]}"
}
boot_retries=2
boot_retry=${SQCQ_VM_BOOT_RETRY:-0}
[[ "$boot_retry" =~ ^[0-9]+$ ]] || boot_retry=$boot_retries
# Both only before COMMAND started, and at most twice (SQCQ_VM_BOOT_RETRY).
if [ ! -f "$ctl/rc" ] && [ ! -e "$ctl/uptime-start" ] && [ "$boot_retry" -lt "$boot_retries" ]; then
	# A VM whose console stayed silent (boot_watch).
	if [ -s "$work/boot-stall" ]; then
		boot_again "stalled while booting, before COMMAND (console silent for $(cat "$work/boot-stall") s)"
	fi
	# A kernel that died while it booted with a report that says "Not
	# tainted" (a module of ours taints it O when it loads) did so without
	# anything under test; a second such death is a failure as usual. Seen
	# once: an int3 Oops in the scheduler of a 7.2 kernel 0.7 s into its
	# boot under TCG (2026-12-01).
	if [ "$qrc" = 0 ] && [ ! -s "$work/kvm-error" ] &&
		grep -aq 'Not tainted' "$work/console.log" 2>/dev/null &&
		boot_report=$(grep -a -m 1 -E "$SQCQ_VM_LOG_BAD" "$work/console.log"); then
		boot_again "died while booting, before COMMAND, untainted (${boot_report//$'\r'/})"
	fi
fi

# ---- verdict -----------------------------------------------------------------
rc=""
[ -f "$ctl/rc" ] && rc=$(cat "$ctl/rc")
log="$ctl/dmesg"
[ -s "$log" ] || log="$work/console.log"
reason=""
if [ -s "$work/kvm-error" ]; then
	reason="$(cat "$work/kvm-error") in the nested guest; SQCQ_VM_NESTED_ACCEL=tcg avoids KVM"
	echo "FAIL: vm-kvm-error ($reason, kernel $abi)"
	rc=125
elif [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	reason="timeout after ${timeout_s}s"
	echo "FAIL: vm-timeout (QEMU killed after ${timeout_s}s, kernel $abi)"
	rc=124
elif [ -s "$work/boot-stall" ] && [ -z "$rc" ]; then
	reason="stalled while booting: console silent for $(cat "$work/boot-stall") s before COMMAND"
	echo "FAIL: vm-boot ($reason, kernel $abi)"
	rc=125
elif [ -z "$rc" ]; then
	reason="VM exited (QEMU status $qrc) without COMMAND's status"
	echo "FAIL: vm-boot ($reason, kernel $abi)"
	rc=125
fi
# Lines of a report COMMAND caused on purpose ($SQCQ_VM_EXPECTED).
expected="$ctl/expected-log"
if [ -s "$expected" ]; then
	sqcq_log "kernel $abi: $(wc -l <"$expected") kernel log line(s) declared expected by COMMAND, not counted; first: $(head -n 1 "$expected")"
fi
problems=$(sqcq_vm_log_problems "$log" "$expected"; sqcq_vm_log_problems "$work/console.log" "$expected")
# The sanitizer kernel's end-of-run checks (guest-stage2.sh): kmemleak's
# objects, a kmemleak that could not scan, lockdep switched off.
if [ -f "$ctl/rc" ] && grep -q '^CONFIG_DEBUG_KMEMLEAK=y' "$kdir/config" 2>/dev/null; then
	kml=$(sqcq_vm_kmemleak_problems "$ctl/kmemleak")
	if [ -n "$kml" ]; then
		# First: the summary names the object's backtrace.
		problems="$kml"$'\n'"$problems"
		# Without a pipe: under pipefail a sed that head -n 40 cut
		# off (SIGPIPE, a report over 4 KiB) ended this script before
		# its FAIL line (the debug selftest "all" in a CI run).
		sed -e 's/^/kmemleak| /' -e '40q' "$ctl/kmemleak"
	fi
	st=$(cat "$ctl/kmemleak-status" 2>/dev/null || echo "no kmemleak scan ran")
	[ "$st" = scanned ] || problems+=$'\n'"kmemleak: $st"
fi
if [ "$(cat "$ctl/debug_locks" 2>/dev/null)" = 0 ]; then
	problems+=$'\n'"lockdep turned itself off (debug_locks 0): a lock problem was reported"
fi
problems=$(echo "$problems" | awk 'NF && !seen[$0]++')
taint=$(sqcq_vm_taint_problems "$(cat "$ctl/tainted" 2>/dev/null || echo 0)")
if [ -n "$problems" ] || [ -n "$taint" ]; then
	first=$(echo "$problems" | sqcq_vm_log_classes)
	first=${first:-$taint}
	[ -z "$taint" ] || [ "$first" = "$taint" ] || first="$first; $taint"
	echo "FAIL: vm-kernel-log ($first)"
	reason=${reason:-dirty kernel log}
	[ "$rc" = 0 ] && rc=1
fi
if [ -n "$reason" ] || [ "$rc" != 0 ]; then
	echo "---- last kernel log lines (kernel $abi, $(basename "$log")) ----"
	tail -n 50 "$log"
	echo "----"
	# The first report whole (an oops' registers and call trace), which
	# the last lines may have scrolled past.
	for f in "$log" "$work/console.log"; do
		n=$(grep -anE -m 1 "$SQCQ_VM_LOG_BAD" "$f" 2>/dev/null | cut -d: -f1) || true
		[ -n "$n" ] || continue
		echo "---- first report (kernel $abi, $(basename "$f"), line $n) ----"
		sed -n "$((n > 5 ? n - 5 : 1)),$((n + 45))p" "$f"
		echo "----"
		break
	done
fi
started=$(cat "$ctl/uptime-start" 2>/dev/null || echo "?")
sqcq_log "kernel $abi (L$depth, $accel): command started at ${started}s guest uptime;" \
	"VM wall $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')s; status $rc"
exit "$rc"
