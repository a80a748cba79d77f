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
# default 1), E2E_HOST_PARAMS (insmod
# parameters of our host module), E2E_L2_SCRIPT (what L2 runs, default
# tests/e2e/l2.sh; it gets the same arguments and environment, and every
# CMP_* variable: bench/compare-l2.sh uses this).
set -u
HOST=${1:?HOST}
GUEST=${2:?GUEST}
LABEL="$HOST/$GUEST"
ROOT=$(pwd)
OUT=$ROOT/out/$SQCQ_ABI
t_mark=$SECONDS
PREFIX="e2e $LABEL"

# shellcheck source=tests/lib/target.sh
. "$ROOT/tests/lib/target.sh"

# shellcheck source=tests/lib/check.sh
. "$ROOT/tests/lib/check.sh"
log() { echo "e2e-l1: [${SECONDS}s] $*" >&2; }
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
(while :; do echo "$SECONDS" >"$SQCQ_RESULTS/heartbeat"; sleep 10; done) &
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
phase "host+target"

# ---- 3. L2 with the hotplug watcher -----------------------------------------
l2dir=/tmp/e2e-l2
rm -rf "$l2dir"
mkdir -p "$l2dir"
# host_idle_ticks S: clock ticks (user + system) the device's worker
# thread (the host poller in SQ/CQ mode) used over S seconds.
host_idle_ticks() {
	local pid a b
	pid=$(pgrep -o '^vhost-sqcq-') || { echo "no vhost-sqcq worker"; return 1; }
	read -ra a <"/proc/$pid/stat" || return 1
	sleep "$1"
	read -ra b <"/proc/$pid/stat" || return 1
	echo $(((b[13] + b[14]) - (a[13] + a[14])))
}
# L2's QEMU monitor (QMP), for hotplug-stopcont.req.
qmp_sock=/tmp/e2e-l2-qmp.sock
# qmp_stopcont S: QMP stop, S seconds, cont (perl: perl-base is Essential in
# Debian, and bash cannot open a unix socket). Prints "ok" (both commands
# returned) or "failed", each command's reply, and the first host log
# line "SQ/CQ stopped" that came meanwhile ("host-log: none" without one).
qmp_stopcont() {
	local n0 out st=0 line
	n0=$(dmesg | grep -c 'SQ/CQ stopped')
	# shellcheck disable=SC2016 # perl's variables
	out=$(timeout 30 perl -MIO::Socket::UNIX -e '
		my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect $ARGV[0]: $!\n";
		my $ok = 1;
		<$s>; # the greeting
		for my $c (qw(qmp_capabilities stop query-status cont query-status)) {
			sleep $ARGV[1] if $c eq "cont";
			print $s "{\"execute\": \"$c\"}\n";
			my $r;
			while (defined($r = <$s>)) { last if $r =~ /"(return|error)"/ } # events
			defined $r or die "QMP closed at $c\n";
			chomp $r;
			print "qmp $c: $r\n";
			$ok = 0 unless $r =~ /"return"/;
		}
		exit !$ok;' "$qmp_sock" "$1" 2>&1) || st=$?
	line=$(dmesg | grep 'SQ/CQ stopped' | tail -n +$((n0 + 1)) | head -n 1)
	[ "$st" = 0 ] && echo ok || echo "failed (status $st)"
	echo "$out"
	echo "host-log: ${line:-none}"
}
# l1_stat: "EXITS BUSY": the KVM exits of every VM here (L2's) and the busy
# clock ticks of all CPUs (user, nice, system, irq, softirq: L2's vCPUs,
# QEMU, the host poller, LIO), for bench/compare-l2.sh.
l1_stat() {
	local exits=- u n s irq sirq
	[ -r /sys/kernel/debug/kvm/exits ] && read -r exits </sys/kernel/debug/kvm/exits
	read -r _ u n s _ _ irq sirq _ </proc/stat
	echo "$exits $((u + n + s + irq + sirq))"
}
# watch_l2: answer hotplug-{add,del}.req files (LUN 1 on WWPN_A's TPG),
# hotplug-idle.req (the host poller's CPU while idle, for compare-l2.sh),
# hotplug-sqcq{0,1}.req (our host's sqcq parameter),
# hotplug-stopcont.req (L2 stopped and continued, qmp_stopcont) and
# hotplug-stat.req (l1_stat, answered at once).
watch_l2() {
	local what ans
	while sleep 0.5; do
		for what in add del idle sqcq0 sqcq1 stopcont stat; do
			[ -e "$l2dir/hotplug-$what.req" ] || continue
			rm -f "$l2dir/hotplug-$what.req"
			# Let L2 start watching before the event goes out.
			[ "$what" = stat ] || sleep 1
			if [ "$what" = stat ]; then
				ans=$(l1_stat)
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

# A QEMU whose vhost-scsi has the hotplug property (newer than 7.2) offers
# VIRTIO_SCSI_F_HOTPLUG with it, and the backend's LUN events reach the guest.
hp=""
if qemu-system-x86_64 -device vhost-scsi-pci,help 2>/dev/null | grep -q '^ *hotplug='; then
	hp=",hotplug=on"
fi
qargs=(--qemu-arg -device --qemu-arg "vhost-scsi-pci,wwpn=$WWPN_A,vhostfd=7,addr=0x$SLOT_A$hp")
rm -f "$qmp_sock"
qargs+=(--qemu-arg -qmp --qemu-arg "unix:$qmp_sock,server=on,wait=off")
slot_b=""
if [ "$HOST" != sqcq ]; then
	qargs+=(--qemu-arg -device --qemu-arg "vhost-scsi-pci,wwpn=$WWPN_B,addr=0x$SLOT_B")
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
exec 7<>"$NODE" || { fail "open $NODE"; finish; }
log "starting L2: ${qargs[*]}"
# watch_l2_stall: L2's script rewrites $l2dir/heartbeat every 5 s
# (tests/e2e/l2-lib.sh). When that stops for E2E_L2_STALL_S (default 180 s),
# L2 is frozen (seen with KVM here on TCG's emulated SVM: the nested guest
# stops while L1 runs on): end its QEMU instead of waiting for the timeout.
watch_l2_stall() {
	local last now
	while sleep 10; do
		last=$(stat -c %Y "$l2dir/heartbeat" 2>/dev/null) || continue
		now=$(date +%s)
		[ $((now - last)) -ge "${E2E_L2_STALL_S:-180}" ] || continue
		echo "$((now - last))" >"$l2dir/stalled"
		log "L2 stalled (no heartbeat for $((now - last)) s), ending its QEMU"
		pkill -TERM -x qemu-system-x86
		return
	done
}
# Neither watcher may hold the device open (fd 7): rmmod follows.
watch_l2 7>&- &
watch_pid=$!
watch_l2_stall 7>&- &
stall_pid=$!
l2rc=0
# scsi_mod and sd_mod load from L2's initramfs: kmod takes ~25 s for them
# in the nested guest (run.sh builds that initramfs into the shared cache).
SQCQ_VM_INITRD_EXTRA=${E2E_L2_INITRD_EXTRA:-scsi_mod sd_mod} \
	"$ROOT/tests/vm/nested.sh" --timeout "${E2E_L2_TIMEOUT:-900}" --results "$l2dir" \
	--smp "${E2E_L2_SMP:-1}" --kernel "${E2E_L2_ABI:-$SQCQ_ABI}" \
	--append "$append" "${qargs[@]}" \
	--env "E2E_SLOT_A=$SLOT_A" --env "E2E_SLOT_B=$slot_b" --env "E2E_TPGT=$TPGT" \
	--env "E2E_FIO_SIZE=${E2E_FIO_SIZE:-32m}" --env "E2E_MIN_IOS=${E2E_MIN_IOS:-10000}" \
	--env "E2E_HOTPLUG=${E2E_HOTPLUG:-1}" --env "E2E_HOST=$HOST" \
	--env "E2E_FIO_TIMEOUT=${E2E_FIO_TIMEOUT:-600}" \
	--env "E2E_GUEST_PARAMS=${E2E_GUEST_PARAMS:-}" --env "E2E_RESET=${E2E_RESET:-1}" \
	--env "E2E_RTHOG=${E2E_RTHOG:-1}" "${cmp_env[@]}" \
	-- "${E2E_L2_SCRIPT:-tests/e2e/l2.sh}" "$GUEST" "$LABEL" \
	"$ROOT/out/${E2E_L2_ABI:-$SQCQ_ABI}/guest/virtio_scsi_sqcq.ko" || l2rc=$?
exec 7>&-
kill "$watch_pid" "$stall_pid" 2>/dev/null
wait "$watch_pid" "$stall_pid" 2>/dev/null
# A stalled L2 whose kernel log (kept live) shows a lockup, a hung task or
# an oops failed in the kernel; one with a clean log stopped as a whole,
# which is the emulator's doing (tests/e2e/run.sh repeats such a run).
if [ -s "$l2dir/stalled" ]; then
	why=$(grep -m1 -E 'soft lockup|hard LOCKUP|hung_task|blocked for more than|BUG:|Oops|self-detected stall|rcu_.*stall' \
		"$l2dir/dmesg-live.txt" 2>/dev/null)
	if [ -n "$why" ]; then
		fail "l2-stalled (kernel log: $why)"
	else
		echo "FAIL: vm-l2-stall (no heartbeat from L2 for $(cat "$l2dir/stalled") s, clean kernel log: the nested guest stopped)"
		fails=$((fails + 1))
	fi
fi
cp -r "$l2dir" "$SQCQ_RESULTS/l2" 2>/dev/null
if [ "$l2rc" = 0 ]; then pass "l2-run"; else fail "l2-run (nested.sh status $l2rc)"; fi
phase "L2 (boot+test)"

# ---- 4. teardown, unload -----------------------------------------------------
tear_ok=1
for w in "${targets[@]}"; do
	err=$(sqcq_target_teardown "$FABRIC" "$w" 2>&1) || { tear_ok=0; fail "target-teardown ($err)"; }
done
[ "$tear_ok" = 1 ] && [ ! -e "$SQCQ_TARGET_CFS/$FABRIC/$WWPN_A" ] &&
	pass "target-teardown"
# The fabric directory holds a reference on the fabric module.
rmdir "$SQCQ_TARGET_CFS/$FABRIC" 2>/dev/null
if err=$(rmmod "$MOD" 2>&1); then pass "host-unload ($MOD)"; else fail "host-unload ($err)"; fi
phase "teardown"
finish
