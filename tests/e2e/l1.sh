#!/bin/bash
# End-to-end test, L1 part: runs inside the VM that tests/e2e/run.sh boots.
# Loads the host backend, builds an LIO target on ramdisks through configfs
# (tests/lib/target.sh), opens the backend's device node and starts the L2
# guest (tests/vm/nested.sh) with an unmodified QEMU
#   -device vhost-scsi-pci,wwpn=A,vhostfd=N        (both backends)
#   -device vhost-scsi-pci,wwpn=B                  (intree only: QEMU opens
#                                                   /dev/vhost-scsi itself)
# where tests/e2e/l2.sh binds the guest driver and verifies data.  While L2
# runs, answers its LUN hotplug requests (files in L2's results directory).
# Afterwards tears the target down and unloads the backend.
#
# Usage: l1.sh HOST GUEST
#   HOST   intree (modprobe vhost_scsi, fabric vhost, /dev/vhost-scsi),
#          sqcq (out/<abi>/host/vhost_scsi_sqcq.ko, fabric vhost_sqcq,
#          /dev/vhost-scsi-sqcq) or takeover (ours with takeover=1: fabric
#          vhost, /dev/vhost-scsi; a second device without vhostfd)
#   GUEST  intree or sqcq (see l2.sh)
# Environment: E2E_L2_TIMEOUT (s), E2E_FIO_SIZE, E2E_MIN_IOS, E2E_HOTPLUG,
# E2E_L2_APPEND (more L2 kernel arguments), E2E_L2_SMP (L2's vCPUs,
# default 1), E2E_L2_VHOST_OPTS (more vhost-scsi-pci properties),
# E2E_HOST_PARAMS (insmod
# parameters of our host module), E2E_L2_CPUS (L1's CPUs for L2's QEMU, its
# vCPU and other threads: tests/e2e/run.sh's E2E_L2_ISOLATE), E2E_L2_SCRIPT (what L2 runs, default
# tests/e2e/l2.sh; it gets the same arguments and environment, and every
# CMP_* variable: bench/compare-l2.sh uses this), E2E_L2_QEMU_SUITE (whose
# QEMU starts L2: bookworm, this root's qemu-system-x86_64, the default; or
# trixie, sid: E2E_L2_QEMU, the command tests/e2e/run.sh found for it, with
# E2E_L2_QBOOT, that suite's qboot.rom).
set -u
HOST=${1:?HOST}
GUEST=${2:?GUEST}
LABEL="$HOST/$GUEST"
# L1's kernel when it is not 6.1 (E2E_L1_ID, the --kernel of tests/e2e/run.sh).
[ "${E2E_L1_ID:-6.1}" = 6.1 ] || LABEL="$LABEL $E2E_L1_ID"
# Another suite's QEMU shows in every result line: the runs differ.
L2_QEMU_SUITE=${E2E_L2_QEMU_SUITE:-bookworm}
[ "$L2_QEMU_SUITE" = bookworm ] || LABEL="$LABEL qemu-$L2_QEMU_SUITE"
# E2E_L2_VIA=libvirt: libvirtd in L1 starts L2 (section 3, libvirt_up).
VIA=${E2E_L2_VIA:-qemu}
[ "$VIA" = qemu ] || LABEL="$LABEL $VIA"
# Another kernel in L2 (E2E_L2_ID, from --l2-kernel) and L2 under TCG
# inside TCG (SQCQ_VM_NESTED_ACCEL=tcg), in tests/e2e/run.sh's order.
[ "${E2E_L2_ABI:-$SQCQ_ABI}" = "$SQCQ_ABI" ] || LABEL="$LABEL l2-${E2E_L2_ID:-$E2E_L2_ABI}"
[ "${SQCQ_VM_NESTED_ACCEL:-auto}" != tcg ] || LABEL="$LABEL l2-tcg"
ROOT=$(pwd)
OUT=$ROOT/out/$SQCQ_ABI
t_mark=$SECONDS
PREFIX="e2e $LABEL"

# shellcheck source=tests/lib/target.sh
. "$ROOT/tests/lib/target.sh"

# shellcheck source=tests/lib/check.sh
. "$ROOT/tests/lib/check.sh"
# shellcheck source=tests/vm/common.sh
. "$ROOT/tests/vm/common.sh"	# SQCQ_VM_LOG_BAD: the rig's kernel-report patterns
# shellcheck source=tests/lib/worker.sh
. "$ROOT/tests/lib/worker.sh"
# shellcheck source=tests/lib/libvirt.sh
. "$ROOT/tests/lib/libvirt.sh"
log() { echo "e2e-l1: [${SECONDS}s] $*" >&2; }
# The guest driver L2 loads: the build for its kernel, or E2E_GUEST_KO (a
# test build, tests/e2e/selftest-lockup.sh).
GUEST_KO=${E2E_GUEST_KO:-$ROOT/out/${E2E_L2_ABI:-$SQCQ_ABI}/guest/virtio_scsi_sqcq.ko}
phase() {
	echo "e2e-time: L1 $1 $((SECONDS - t_mark))s" >&2
	t_mark=$SECONDS
}
# The end: a summary line on stderr and the status.
finish() {
	kill "$hb_pid" 2>/dev/null
	echo "e2e-l1: $fails failed" >&2
	[ "$fails" = 0 ]
	exit
}

# Heartbeat for run.sh's stall watchdog (it sees the file's mtime change).
(while :; do echo "$SECONDS" >"$SQCQ_RESULTS/heartbeat"; nap 10; done) &
hb_pid=$!

WWPN_A=naa.5001405e2e000001
WWPN_B=naa.5001405e2e000002
TPGT=1
SLOT_A=08 SLOT_B=09

# ---- 1. host backend ---------------------------------------------------------
case "$HOST" in
intree)
	FABRIC=vhost NODE=/dev/vhost-scsi MOD=vhost_scsi
	err=$(modprobe vhost_scsi 2>&1) || { fail "host-load (modprobe vhost_scsi: $err)"; finish; }
	;;
sqcq)
	FABRIC=vhost_sqcq NODE=/dev/vhost-scsi-sqcq MOD=vhost_scsi_sqcq
	# insmod resolves no dependencies: the target core first.
	modprobe target_core_mod 2>/dev/null
	# shellcheck disable=SC2086 # parameters, split on purpose
	err=$(insmod "$OUT/host/vhost_scsi_sqcq.ko" ${E2E_HOST_PARAMS:-} 2>&1) ||
		{ fail "host-load (insmod $OUT/host/vhost_scsi_sqcq.ko: $err)"; finish; }
	;;
takeover)
	# Ours under the in-tree names: QEMU opens /dev/vhost-scsi itself.
	FABRIC=vhost NODE=/dev/vhost-scsi MOD=vhost_scsi_sqcq
	modprobe target_core_mod 2>/dev/null
	# shellcheck disable=SC2086 # parameters, split on purpose
	err=$(insmod "$OUT/host/vhost_scsi_sqcq.ko" takeover=1 ${E2E_HOST_PARAMS:-} 2>&1) ||
		{ fail "host-load (insmod $OUT/host/vhost_scsi_sqcq.ko takeover=1: $err)"; finish; }
	;;
*) fail "unknown host backend '$HOST' (intree, sqcq or takeover)"; finish ;;
esac
if [ -c "$NODE" ]; then pass "host-load ($MOD, $NODE)"; else fail "host-load (no $NODE)"; finish; fi

# ---- 2. target ---------------------------------------------------------------
targets=("$WWPN_A")
[ "$HOST" = sqcq ] || targets+=("$WWPN_B")
for w in "${targets[@]}"; do
	if ! err=$(sqcq_target_setup "$FABRIC" "$w" "$TPGT" 1 64 2>&1); then
		fail "target-setup ($err)"
		for t in "${targets[@]}"; do sqcq_target_teardown "$FABRIC" "$t" 2>/dev/null; done
		finish
	fi
done
pass "target-setup ($FABRIC: ${targets[*]}, tpgt_$TPGT, rd_mcp LUN 0)"

# The in-tree pair beside ours (bench/compare.sh, CMP_MODES with intree):
# Debian's vhost_scsi loaded as well, its own ramdisk target (WWPN_B on
# fabric vhost) and a second device, slot B, for which QEMU opens
# /dev/vhost-scsi itself. L2 drives it with the in-tree virtio_scsi in
# that mode and leaves it idle in the others.
PEER=0
if [ "$HOST" = sqcq ] && [[ " ${CMP_MODES:-} " == *" intree "* ]]; then
	PEER=1
	if ! err=$(modprobe vhost_scsi 2>&1) ||
		! err=$(sqcq_target_setup vhost "$WWPN_B" "$TPGT" 1 64 2>&1); then
		fail "peer-setup (in-tree vhost_scsi, $WWPN_B: $err)"
		sqcq_target_teardown vhost "$WWPN_B" 2>/dev/null
		for t in "${targets[@]}"; do sqcq_target_teardown "$FABRIC" "$t" 2>/dev/null; done
		finish
	fi
	pass "peer-setup (in-tree vhost_scsi, /dev/vhost-scsi, vhost: $WWPN_B)"
fi
phase "host+target"

# ---- 3. L2 with the hotplug watcher -----------------------------------------
l2dir=/tmp/e2e-l2
rm -rf "$l2dir"
mkdir -p "$l2dir"
# host_idle_ticks S: clock ticks (user + system) the device's worker
# thread (the host poller in SQ/CQ mode) used over S seconds.
host_idle_ticks() {
	local pid a b
	# A kthread, or a thread of QEMU where the kernel has vhost_task.
	pid=$(grep -l '^vhost-sqcq-' /proc/[0-9]*/task/[0-9]*/comm 2>/dev/null |
		head -n 1 | cut -d/ -f5)
	[ -n "$pid" ] || { echo "no vhost-sqcq worker"; return 1; }
	read -ra a <"/proc/$pid/stat" || return 1
	sleep "$1"
	read -ra b <"/proc/$pid/stat" || return 1
	echo $(((b[13] + b[14]) - (a[13] + a[14])))
}
# L2's QEMU monitor (QMP), for hotplug-stopcont.req.
qmp_sock=/tmp/e2e-l2-qmp.sock
# qmp SOCK CMD...: QMP commands to the monitor at SOCK, one by one, each a
# bare command name or a JSON object (one with arguments), after
# qmp_capabilities (perl: perl-base is Essential in Debian, and bash cannot
# open a unix socket). Prints "qmp NAME: REPLY" for each; status 0 when
# every one returned.
qmp() {
	# shellcheck disable=SC2016 # perl's variables
	timeout 30 perl -MIO::Socket::UNIX -e '
		my $s = IO::Socket::UNIX->new(Peer => shift @ARGV) or die "connect: $!\n";
		my $ok = 1;
		<$s>; # the greeting
		for my $c ("qmp_capabilities", @ARGV) {
			my $j = $c =~ /^\{/ ? $c : "{\"execute\": \"$c\"}";
			my ($name) = $j =~ /"execute": *"([^"]*)"/;
			print $s "$j\n";
			my $r;
			while (defined($r = <$s>)) { last if $r =~ /"(return|error)"/ } # events
			defined $r or die "QMP closed at $name\n";
			chomp $r;
			print "qmp $name: $r\n" unless $c eq "qmp_capabilities";
			$ok = 0 unless $r =~ /"return"/;
		}
		exit !$ok;' "$@"
}
# qmp_stopcont S: QMP stop, S seconds, cont. Prints "ok" (every command
# returned) or "failed", each command's reply, and the first host log
# line "SQ/CQ stopped" that came meanwhile ("host-log: none" without one).
qmp_stopcont() {
	local n0 out st=0 line
	n0=$(dmesg | grep -c 'SQ/CQ stopped')
	out=$(qmp "$qmp_sock" stop query-status 2>&1) || st=$?
	sleep "$1"
	out="$out
$(qmp "$qmp_sock" cont query-status 2>&1)" || st=$?
	line=$(dmesg | grep 'SQ/CQ stopped' | tail -n +$((n0 + 1)) | head -n 1)
	[ "$st" = 0 ] && echo ok || echo "failed (status $st)"
	echo "$out"
	echo "host-log: ${line:-none}"
}
# l1_stat: "EXITS BUSY IDLE CONTENDED YIELDS": the KVM exits of every VM
# here (L2's), the busy clock ticks of all CPUs (user, nice, system, irq,
# softirq: L2's vCPUs, QEMU, the host poller, LIO) and our host pollers'
# sleeps (idle, contended) and yields summed over the devices ("-" without
# our module), for bench/compare-l2.sh.
l1_stat() {
	local exits=- u n s irq sirq f k v si=- sc=- y=-
	[ -r /sys/kernel/debug/kvm/exits ] && read -r exits </sys/kernel/debug/kvm/exits
	read -r _ u n s _ _ irq sirq _ </proc/stat
	for f in /sys/kernel/debug/"$MOD"/dev*/queues; do
		[ -r "$f" ] || continue
		[ "$si" = - ] && si=0 sc=0 y=0
		while read -r k v; do
			case $k in
			poll_sleeps_idle:) si=$((si + v)) ;;
			poll_sleeps_contended:) sc=$((sc + v)) ;;
			poll_yields:) y=$((y + v)) ;;
			esac
		done <"$f"
	done
	echo "$exits $((u + n + s + irq + sirq)) $si $sc $y"
}
# perf_on NAME / perf_off: profile L1's CPUs (CMP_PERF=1, bench/compare.sh)
# from one request to the next; the report goes to $SQCQ_RESULTS/perf.
# Only one profile runs at a time; its pid and name are kept in files, as
# each request is answered in a subshell.
perf_on() {
	local name=${1//[^A-Za-z0-9_.-]/_} n
	local ev=(-g -F 499)
	case ${CMP_PERF:-0} in
	1) ;;
	sched) ev=(-g -e sched:sched_switch -e sched:sched_wakeup) ;;
	*) echo "CMP_PERF is neither 1 nor sched"; return ;;
	esac
	command -v perf >/dev/null || { echo "no perf in L1"; return; }
	[ -n "$name" ] || { echo "no profile name"; return; }
	mkdir -p "$SQCQ_RESULTS/perf"
	perf record -a "${ev[@]}" -o "/tmp/perf-$name.data" >/dev/null 2>&1 7>&- &
	echo "$! $name" >/tmp/perf-current
	# perf writes its header once it has set up every CPU's buffer.
	for ((n = 0; n < 20; n++)); do
		[ -s "/tmp/perf-$name.data" ] && break
		nap 0.5
	done
	echo ok
}
perf_off() {
	local pid name d=$SQCQ_RESULTS/perf
	read -r pid name </tmp/perf-current 2>/dev/null || { echo "no profile running"; return; }
	rm -f /tmp/perf-current
	kill -INT "$pid" 2>/dev/null
	while kill -0 "$pid" 2>/dev/null; do nap 0.5; done
	# The symbols, for perf report outside L1 (--kallsyms).
	[ -s "$d/kallsyms" ] || cat /proc/kallsyms >"$d/kallsyms"
	perf report -i "/tmp/perf-$name.data" --stdio --no-children --sort comm \
		-g none 2>&1 | grep -v '^#' >"$d/$name.txt"
	mv "/tmp/perf-$name.data" "$d/$name.data"
	echo ok
}
# watch_l2: answer hotplug-{add,del}.req files (LUN 1 on WWPN_A's TPG),
# hotplug-idle.req (the host poller's CPU while idle, for compare-l2.sh),
# hotplug-sqcq{0,1}.req (our host's sqcq parameter),
# hotplug-stopcont.req (L2 stopped and continued, qmp_stopcont),
# hotplug-stat.req (l1_stat, answered at once) and hotplug-exits.req
# (L2's VM exits by reason so far, bench/l1-exits.sh, at once).
# With CMP_PERF=1 also hotplug-perfon.req (L1's CPUs profiled from now,
# perf record -a -g, or with CMP_PERF=sched the scheduler's switches and
# wakeups; the file holds the profile's name) and
# hotplug-perfoff.req (profile stopped: $SQCQ_RESULTS/perf/NAME.data, L1's
# kallsyms beside it for perf report --kallsyms, and NAME.txt, L1's CPU
# time by thread).
# It also keeps the last host debugfs "queues" file of ours that showed
# SQ/CQ in $l2dir/host-queues.sqcq (every 5 s), for the checks after L2.
watch_l2() {
	local what ans i=0 f
	# nap, not sleep: under TCG each start of /bin/sleep costs L1 tens of
	# ms of CPU, twice a second taken from the I/O path being measured.
	while :; do
		nap 0.5
		if [ "$MOD" = vhost_scsi_sqcq ] && [ $((++i % 10)) = 0 ]; then
			for f in /sys/kernel/debug/$MOD/dev*/queues; do
				grep -qs '^mode: sqcq' "$f" && cp "$f" "$l2dir/host-queues.sqcq" 2>/dev/null
			done
		fi
		for what in add del idle sqcq0 sqcq1 stopcont stat exits perfon perfoff; do
			[ -e "$l2dir/hotplug-$what.req" ] || continue
			read -r pname <"$l2dir/hotplug-$what.req"
			rm -f "$l2dir/hotplug-$what.req"
			# Let L2 start watching before the event goes out.
			case $what in stat | exits | perf*) ;; *) sleep 1 ;; esac
			if [ "$what" = stat ]; then
				ans=$(l1_stat)
			elif [ "$what" = exits ]; then
				ans=$(bash "$ROOT/bench/l1-exits.sh" 2>&1)
			elif [ "$what" = perfon ]; then
				ans=$(perf_on "$pname")
			elif [ "$what" = perfoff ]; then
				ans=$(perf_off)
			elif [ "$what" = idle ]; then
				ans=$(host_idle_ticks "${CMP_IDLE_S:-3}" 2>&1)
			elif [ "$what" = stopcont ]; then
				ans=$(qmp_stopcont 2)
			elif [ "$what" = sqcq0 ] || [ "$what" = sqcq1 ]; then
				ans=$(printf "%s\n" "${what#sqcq}" 2>&1 >"/sys/module/$MOD/parameters/sqcq") && ans=ok
			elif [ "$what" = add ]; then
				ans=$(sqcq_target_add_lun "$FABRIC" "$WWPN_A" "$TPGT" 1 16 2>&1) && ans=ok
			else
				ans=$(sqcq_target_del_lun "$FABRIC" "$WWPN_A" "$TPGT" 1 2>&1) && ans=ok
			fi
			echo "e2e-l1: hotplug $what: $ans" >&2
			echo "$ans" >"$l2dir/hotplug-$what.tmp"
			mv "$l2dir/hotplug-$what.tmp" "$l2dir/hotplug-$what.done"
		done
	done
}

# L2's QEMU (tests/vm/run.sh takes SQCQ_VM_QEMU and SQCQ_VM_QBOOT): the
# suite's version goes into the output, and one that cannot even say it
# fails here rather than as a boot failure of L2.
if [ "$L2_QEMU_SUITE" != bookworm ]; then
	export SQCQ_VM_QEMU=${E2E_L2_QEMU:?E2E_L2_QEMU unset for $L2_QEMU_SUITE}
	[ -z "${E2E_L2_QBOOT:-}" ] || export SQCQ_VM_QBOOT=$E2E_L2_QBOOT
fi
read -r -a l2_qemu <<<"${SQCQ_VM_QEMU:-qemu-system-x86_64}"
if ver=$("${l2_qemu[@]}" --version 2>&1 | head -n 1) && [[ "$ver" == "QEMU emulator version"* ]]; then
	echo "e2e-qemu: L2 ($L2_QEMU_SUITE): $ver"
else
	fail "l2-qemu ($L2_QEMU_SUITE: ${l2_qemu[*]} --version: $ver)"
	for w in "${targets[@]}"; do sqcq_target_teardown "$FABRIC" "$w" 2>/dev/null; done
	finish
fi

# A QEMU whose vhost-scsi has the hotplug property (newer than 7.2) offers
# VIRTIO_SCSI_F_HOTPLUG with it, and the backend's LUN events reach the guest.
hp=""
if "${l2_qemu[@]}" -device vhost-scsi-pci,help 2>/dev/null | grep -q '^ *hotplug='; then
	hp=",hotplug=on"
fi
# E2E_L2_VHOST_OPTS: more properties of both devices, e.g.
# "num_queues=2,worker_per_virtqueue=on" (QEMU 8.2 and newer: a worker per
# I/O queue after the first, through VHOST_NEW_WORKER and
# VHOST_ATTACH_VRING_WORKER).
hp="$hp${E2E_L2_VHOST_OPTS:+,$E2E_L2_VHOST_OPTS}"
qargs=(--qemu-arg -device --qemu-arg "vhost-scsi-pci,wwpn=$WWPN_A,vhostfd=7,addr=0x$SLOT_A$hp")
rm -f "$qmp_sock"
qargs+=(--qemu-arg -qmp --qemu-arg "unix:$qmp_sock,server=on,wait=off")
slot_b=""
if [ "$HOST" != sqcq ] || [ "$PEER" = 1 ]; then
	qargs+=(--qemu-arg -device --qemu-arg "vhost-scsi-pci,wwpn=$WWPN_B,addr=0x$SLOT_B${E2E_L2_VHOST_OPTS:+,$E2E_L2_VHOST_OPTS}")
	slot_b=$SLOT_B
fi
# No automatic SCSI scan in L2: vhost-scsi announces 256 targets, probing
# them all takes minutes nested; l2.sh scans the one it uses.
append="scsi_mod.scan=manual ${E2E_L2_APPEND:-}"
[ "$GUEST" = sqcq ] && append="$append modprobe.blacklist=virtio_scsi"
cmp_env=()
for v in $(compgen -e); do
	[[ "$v" == CMP_* ]] && cmp_env+=(--env "$v=${!v}")
done
# E2E_L2_VIA=libvirt: L2 is a transient libvirt domain. libvirtd runs here
# with its state, logs and configuration on tmpfs (L1's root is L0's,
# read-only; tests/e2e/run.sh made the directories there), QEMU as root
# without a security driver, namespaces, cgroups or virtlogd (its output to
# a file), the socket without polkit; the rig's
# QEMU command goes through tests/e2e/virsh-qemu.sh, which turns each
# vhost-scsi-pci device into a <hostdev> with <source protocol='vhost'
# wwpn=.../>: libvirt opens /dev/vhost-scsi itself (takeover=1 here).
libvirt_up() {
	local d
	command -v libvirtd >/dev/null && command -v virsh >/dev/null || return 1
	# libvirt learns at start whether KVM is there (and probes QEMU with it:
	# the held VM keeps that from flipping the scheduler's static key).
	sqcq_kvm_load >/dev/null
	for d in /var/lib/libvirt /var/cache/libvirt /var/log/libvirt; do
		mount -t tmpfs -o mode=755 tmpfs "$d" || return 1
	done
	mkdir -p /var/lib/libvirt/qemu /var/cache/libvirt/qemu /var/log/libvirt/qemu \
		/run/libvirt /tmp/etc-libvirt
	cp -a /etc/libvirt/. /tmp/etc-libvirt/ && mount --bind /tmp/etc-libvirt /etc/libvirt ||
		return 1
	# The QEMU driver resolves its build-time user before it reads
	# qemu.conf; libvirt-daemon-system would have made it.
	if ! getent passwd libvirt-qemu >/dev/null; then
		cp /etc/passwd /tmp/passwd-libvirt && cp /etc/group /tmp/group-libvirt &&
			echo "libvirt-qemu:x:64055:64055::/var/lib/libvirt:/usr/sbin/nologin" >>/tmp/passwd-libvirt &&
			echo "libvirt-qemu:x:64055:" >>/tmp/group-libvirt &&
			mount --bind /tmp/passwd-libvirt /etc/passwd &&
			mount --bind /tmp/group-libvirt /etc/group || return 1
	fi
	sqcq_libvirt_conf && sqcq_libvirtd_start
}
l2_via=()
if [ "$VIA" = libvirt ]; then
	if ! libvirt_up; then
		fail "libvirt: libvirtd up with a KVM domain type (libvirtd --version: $(libvirtd --version 2>&1))"
		tail -n 20 /var/log/libvirt/libvirtd.log >&2 2>/dev/null
		sqcq_libvirtd_stop
		for w in "${targets[@]}"; do sqcq_target_teardown "$FABRIC" "$w" 2>/dev/null; done
		finish
	fi
	pass "libvirt: $(libvirtd --version 2>&1) up ($(virsh -q version --daemon 2>/dev/null | grep -m1 'Running hypervisor' | sed 's/^ *//'))"
	l2_via=(env "SQCQ_VM_QEMU=$ROOT/tests/e2e/virsh-qemu.sh")
	phase "libvirtd up"
fi

# L2 on its own CPU (run.sh: tickless there, the host poller elsewhere).
l2_pin=()
if [ -n "${E2E_L2_CPUS:-}" ]; then
	l2_pin=(taskset -c "$E2E_L2_CPUS")
	log "L2's QEMU on CPU $E2E_L2_CPUS, tickless CPUs: $(cat /sys/devices/system/cpu/nohz_full 2>/dev/null)"
fi
# libvirt opens the node itself.
[ "$VIA" = libvirt ] || exec 7<>"$NODE" || { fail "open $NODE"; finish; }
log "starting L2: ${qargs[*]}"
# watch_l2_stall: L2's script rewrites $l2dir/heartbeat every 5 s
# (tests/e2e/l2-lib.sh). When that stops for E2E_L2_STALL_S (default 180 s),
# L2 is frozen (seen with KVM here on TCG's emulated SVM: the nested guest
# stops while L1 runs on): end its QEMU instead of waiting for the timeout.
watch_l2_stall() {
	local last now
	while :; do
		nap 10
		last=$(stat -c %Y "$l2dir/heartbeat" 2>/dev/null) || continue
		printf -v now '%(%s)T' -1
		[ $((now - last)) -ge "${E2E_L2_STALL_S:-180}" ] || continue
		echo "$((now - last))" >"$l2dir/stalled"
		log "L2 stalled (no heartbeat for $((now - last)) s), ending its QEMU"
		pkill -TERM -x qemu-system-x86
		return
	done
}
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
# Neither watcher may hold the device open (fd 7): rmmod follows.
watch_l2 7>&- &
watch_pid=$!
watch_l2_stall 7>&- &
stall_pid=$!
l2rc=0
# scsi_mod and sd_mod load from L2's initramfs: kmod takes ~25 s for them
# in the nested guest (run.sh builds that initramfs into the shared cache).
SQCQ_VM_INITRD_EXTRA=${E2E_L2_INITRD_EXTRA:-scsi_mod sd_mod} \
	"${l2_pin[@]}" "${l2_via[@]}" "$ROOT/tests/vm/nested.sh" --timeout "${E2E_L2_TIMEOUT:-900}" --results "$l2dir" \
	--smp "${E2E_L2_SMP:-1}" --mem "${E2E_L2_MEM:-256}" --kernel "${E2E_L2_ABI:-$SQCQ_ABI}" \
	--append "$append" "${qargs[@]}" \
	--env "E2E_SLOT_A=$SLOT_A" --env "E2E_SLOT_B=$slot_b" --env "E2E_TPGT=$TPGT" \
	--env "E2E_FIO_SIZE=${E2E_FIO_SIZE:-32m}" --env "E2E_MIN_IOS=${E2E_MIN_IOS:-10000}" \
	--env "E2E_HOTPLUG=${E2E_HOTPLUG:-1}" --env "E2E_HOST=$HOST" \
	--env "E2E_FIO_TIMEOUT=${E2E_FIO_TIMEOUT:-600}" \
	--env "E2E_GUEST_PARAMS=${E2E_GUEST_PARAMS:-}" --env "E2E_RESET=${E2E_RESET:-1}" \
	--env "E2E_RTHOG=${E2E_RTHOG:-1}" --env "E2E_POLL_PHASES=${E2E_POLL_PHASES:-1}" --env "E2E_GUEST_HOG=${E2E_GUEST_HOG:-1}" \
	--env "E2E_HIPRI=${E2E_HIPRI:-0}" \
	"${cmp_env[@]}" \
	-- "${E2E_L2_SCRIPT:-tests/e2e/l2.sh}" "$GUEST" "$LABEL" \
	"$GUEST_KO" || l2rc=$?
exec 7>&-
kill "$watch_pid" "$stall_pid" 2>/dev/null
wait "$watch_pid" "$stall_pid" 2>/dev/null
# A stalled L2 whose kernel log (kept live) shows a lockup, a hung task or
# an oops failed in the kernel; one with a clean log stopped as a whole,
# which is the emulator's doing (tests/e2e/run.sh repeats such a run).
if [ -s "$l2dir/stalled" ]; then
	# L2's console (nested run.sh leaves it there) before the copy its
	# user space kept: on a 1-vCPU L2 a lockup stops user space, so the
	# report reaches only the console.
	why=$(cat "$l2dir/console.log" "$l2dir/dmesg-live.txt" 2>/dev/null | tr -d '\r' |
		grep -a -m1 -E "$SQCQ_VM_LOG_BAD")
	if [ -n "$why" ]; then
		fail "l2-stalled (kernel log: $why)"
	else
		echo "FAIL: vm-l2-stall (no heartbeat from L2 for $(cat "$l2dir/stalled") s, clean console and kernel log: the nested guest stopped)"
		fails=$((fails + 1))
	fi
fi
cp -r "$l2dir" "$SQCQ_RESULTS/l2" 2>/dev/null
if [ "$l2rc" = 0 ]; then pass "l2-run"; else fail "l2-run (nested.sh status $l2rc)"; fi
# With poll_cpu set our host's shared poller (poll_shared, the default)
# watched L2's device: it must have handed work to the device's worker.
# These two read what L2's run did: after a failed L2 run (its FAIL above)
# they would only repeat it, and would make a run the emulator broke look
# like a test's failure (tests/e2e/verdict.sh).
pp=/sys/module/$MOD/parameters
if [ "$l2rc" = 0 ] && [ "$MOD" = vhost_scsi_sqcq ] && [ -n "$(cat $pp/poll_cpu 2>/dev/null)" ] &&
	[ "$(cat $pp/poll_shared 2>/dev/null)" = Y ]; then
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	pl=$(tail -n +2 /sys/kernel/debug/$MOD/pollers 2>/dev/null | head -n 1)
	log "host shared pollers (cpu pid state devices handoffs sleeps idle contended wakeups yields window): ${pl:-none}"
	read -r _ _ _ _ ho _ <<<"$pl"
	check "host shared poller (poll_cpu=$(cat $pp/poll_cpu)) handed L2's work to the worker (${ho:-no} hand-offs)" \
		[ "${ho:-0}" -gt 0 ]
fi
# QEMU's worker_per_virtqueue=on (E2E_L2_VHOST_OPTS): its second I/O queue
# on a worker of its own, and SQ/CQ negotiated all the same (L2 checks the
# mode); the host's queues file while SQ/CQ ran shows the worker.
if [ "$l2rc" = 0 ] && [ "$MOD" = vhost_scsi_sqcq ] &&
	[[ "${E2E_L2_VHOST_OPTS:-}" == *worker_per_virtqueue=on* ]]; then
	own=$(awk '$1 == "vq" { for (i = 1; i <= NF; i++) c[$i] = i; next }
		c["worker"] && $1 >= 2 && $c["mode"] == "sqcq" && $c["worker"] > 0 {
			printf "vq %s on worker %s; ", $1, $c["worker"] }' "$l2dir/host-queues.sqcq" 2>/dev/null)
	check "worker_per_virtqueue=on: SQ/CQ with a request queue on a worker of its own (${own:-none seen})" \
		[ -n "$own" ]
fi
phase "L2 (boot+test)"

# ---- 3a. virsh destroy under I/O (libvirt) ------------------------------------
# A second domain runs verified writes (l2.sh with E2E_L2_BUSY=1); once the
# target's command count moves, `virsh destroy` ends it under them. The
# device libvirt opened must be released (no device left in our debugfs,
# no worker), the target torn down after as always, the kernel log clean
# (the rig checks it at the end).
# lio_cmds: REPLY = the commands every LUN of the target core has seen.
lio_cmds() {
	local f n
	REPLY=0
	for f in "$SQCQ_TARGET_CFS"/core/*/*/statistics/scsi_lu/num_cmds; do
		[ -r "$f" ] && read -r n <"$f" && REPLY=$((REPLY + n))
	done
}
no_host_devices() {
	! compgen -G "/sys/kernel/debug/$MOD/dev*" >/dev/null
}
if [ "$VIA" = libvirt ]; then
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	bdir=$SQCQ_RESULTS/busy
	mkdir -p "$bdir"
	E2E_VIRSH_DOMAIN=sqcq-busy SQCQ_VM_INITRD_EXTRA=${E2E_L2_INITRD_EXTRA:-scsi_mod sd_mod} \
		"${l2_via[@]}" "$ROOT/tests/vm/nested.sh" --timeout 600 --results "$bdir" \
		--kernel "${E2E_L2_ABI:-$SQCQ_ABI}" --append "$append" "${qargs[@]}" \
		--env "E2E_SLOT_A=$SLOT_A" --env "E2E_SLOT_B=$slot_b" --env "E2E_TPGT=$TPGT" \
		--env "E2E_HOST=$HOST" --env "E2E_GUEST_PARAMS=${E2E_GUEST_PARAMS:-}" \
		--env "E2E_L2_BUSY=1" \
		-- tests/e2e/l2.sh "$GUEST" "$LABEL" \
		"$GUEST_KO" \
		>"$bdir/run.log" 2>&1 &
	bpid=$!
	if wait_for 400 test -e "$bdir/busy"; then
		# The marker comes before fio, which L2 loads over 9p: wait up
		# to 60 s for its commands (3 s were too few once).
		lio_cmds
		n0=$REPLY n1=$REPLY
		for _ in $(seq 60); do
			sleep 1
			lio_cmds
			n1=$REPLY
			[ "$n1" -gt $((n0 + 16)) ] && break
		done
		check "virsh destroy under I/O: I/O flows before ($n0 -> $n1 commands)" [ "$n1" -gt "$n0" ]
		check "virsh destroy under I/O: destroyed" virsh -q destroy sqcq-busy
	else
		fail "virsh destroy under I/O: the busy domain did not start its writes"
		virsh -q destroy sqcq-busy >/dev/null 2>&1
	fi
	gone_bpid() { ! kill -0 "$bpid" 2>/dev/null; }
	check "virsh destroy under I/O: the rig saw the domain end" wait_for 60 gone_bpid
	wait "$bpid" 2>/dev/null
	check "virsh destroy under I/O: the device is released (no device in debugfs)" \
		wait_for 30 no_host_devices
	no_workers() { [ "$(sqcq_workers)" = 0 ]; }
	check "virsh destroy under I/O: no worker left" wait_for 10 no_workers
	phase "virsh destroy under I/O"
fi

# ---- 3b. beside a vIOMMU (our host) -------------------------------------------
# A second, short L2 on q35 beside an emulated Intel IOMMU, its vhost-scsi-pci
# device with iommu_platform=on: the device offers VIRTIO_F_ACCESS_PLATFORM,
# the guest driver accepts it, and the addresses in the rings would be IOVAs
# wherever the guest enables the vIOMMU. Our host has no IOTLB, so it must
# refuse the feature when QEMU starts the vhost device: its log line, and
# QEMU's error (QEMU then ends the guest); no disk may come up. The
# intel-iommu comes before the device (a device takes its DMA address space
# when it is created). L2 keeps the rig's acpi=off, so it does not see the
# DMAR table and its DMA stays untranslated: with acpi=force on top (ACPI
# tables, but PCI and IRQ routing still without ACPI) the guest found dmar0
# and then failed to set up the device's virtqueues (-ENOMEM), which says
# nothing of the host; our guest driver behind intel-iommu is
# tests/guest/run.sh's second VM. tests/e2e/l2-viommu.sh records what the
# guest saw.
# E2E_VIOMMU=0 leaves this out.
# Not through libvirt: its <hostdev> has no iommu_platform.
if [ "$HOST" != intree ] && [ "${E2E_VIOMMU:-1}" = 1 ] && [ "$VIA" = qemu ]; then
	vdir=$SQCQ_RESULTS/viommu
	mkdir -p "$vdir"
	vq=(--qemu-arg -machine --qemu-arg q35
		--qemu-arg -device --qemu-arg intel-iommu
		--qemu-arg -device
		--qemu-arg "vhost-scsi-pci,wwpn=$WWPN_A,vhostfd=7,addr=0x$SLOT_A,disable-legacy=on,iommu_platform=on")
	read -r klines _ < <(dmesg | wc -l)
	exec 7<>"$NODE" || fail "open $NODE"
	vrc=0
	SQCQ_VM_INITRD_EXTRA=${E2E_L2_INITRD_EXTRA:-scsi_mod sd_mod} \
		"${l2_pin[@]}" timeout -k 10 300 "$ROOT/tests/vm/nested.sh" --timeout 240 --results "$vdir" \
		--kernel "${E2E_L2_ABI:-$SQCQ_ABI}" --append "$append" "${vq[@]}" \
		--env "E2E_SLOT_A=$SLOT_A" --env "E2E_TPGT=$TPGT" \
		--env "E2E_GUEST_PARAMS=${E2E_GUEST_PARAMS:-}" \
		-- tests/e2e/l2-viommu.sh "$GUEST" "$LABEL" \
		"$GUEST_KO" \
		>"$vdir/qemu.log" 2>&1 || vrc=$?
	exec 7>&-
	hlog=$(dmesg | tail -n +"$((klines + 1))")
	declare -A seen=()
	while read -r k v; do seen[$k]=$v; done <"$vdir/viommu.txt" 2>/dev/null
	qerr=$(grep -E '^qemu-system-x86_64: .*vhost' "$vdir/qemu.log" | tr '\n' ' ')
	log "viommu: L2 saw ${seen[*]@K}; rig status $vrc; QEMU said: ${qerr:-nothing}"
	# An L2 gone before its driver was loaded (the rig's vm-boot, QEMU
	# silent) tested nothing: the rig's line says so, its console decides
	# whose fault it was (tests/e2e/verdict.sh), the checks are not made.
	if [ -z "${seen[insmod]:-}" ] && [ -z "$qerr" ] && [ "$vrc" = 125 ]; then
		grep -m 1 '^FAIL: vm-boot' "$vdir/qemu.log" | sed 's/)$/; the vIOMMU L2)/'
		fails=$((fails + 1))
	else
		check "viommu: the host refused VIRTIO_F_ACCESS_PLATFORM (its log line)" \
			grep -q 'VIRTIO_F_ACCESS_PLATFORM refused' <<<"$hlog"
		check "viommu: QEMU reported the failed vhost start (${qerr:-nothing})" \
			grep -q 'vhost_set_features failed: Operation not supported' "$vdir/qemu.log"
		# Only where L2 ran its script (its first line): an L2 that never
		# started saw no disk for no reason of the host's.
		viommu_no_disk() { [ -n "${seen[iommu]:-}" ] && [ "${seen[disk]:-none}" = none ]; }
		check "viommu: no disk on untranslated addresses (L2 iommu ${seen[iommu]:-unknown: L2 did not run}, insmod ${seen[insmod]:-did not return}, disk ${seen[disk]:-none})" \
			viommu_no_disk
	fi
	phase "L2 beside a vIOMMU"
fi

# ---- 3c. live migration (E2E_MIGRATE=1, our host) ------------------------------
# shellcheck source=tests/e2e/l1-migrate.sh
. "$ROOT/tests/e2e/l1-migrate.sh"

# ---- 4. teardown, unload -----------------------------------------------------
[ "$VIA" != libvirt ] || sqcq_libvirtd_stop
tear_ok=1
for w in "${targets[@]}"; do
	err=$(sqcq_target_teardown "$FABRIC" "$w" 2>&1) || { tear_ok=0; fail "target-teardown ($err)"; }
done
if [ "$tear_ok" = 1 ]; then
	check "target-teardown" [ ! -e "$SQCQ_TARGET_CFS/$FABRIC/$WWPN_A" ]
fi
# The fabric directory holds a reference on the fabric module.
rmdir "$SQCQ_TARGET_CFS/$FABRIC" 2>/dev/null
if err=$(rmmod "$MOD" 2>&1); then pass "host-unload ($MOD)"; else fail "host-unload ($err)"; fi
if [ "$PEER" = 1 ]; then
	if err=$(sqcq_target_teardown vhost "$WWPN_B" 2>&1) && rmdir "$SQCQ_TARGET_CFS/vhost" 2>/dev/null &&
		err=$(rmmod vhost_scsi 2>&1); then
		pass "peer-unload (vhost_scsi)"
	else
		fail "peer-unload (${err:-fabric directory vhost stays})"
	fi
fi
# The VM of tests/lib/kvm.sh held KVM's scheduler static key through every
# nested guest (none with L2 under TCG): still there, its VM in KVM's debugfs.
kvm_held() {
	local p
	p=$(cat /run/sqcq-kvm-hold.pid) && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sqcq-kvm-hold ] &&
		compgen -G "/sys/kernel/debug/kvm/$p-*" >/dev/null
}
[ ! -e /run/sqcq-kvm-hold.pid ] ||
	check "kvm-held (an empty VM kept KVM's preempt-notifier key on while L2 started and ended)" kvm_held
phase "teardown"
finish
