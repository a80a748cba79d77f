# shellcheck shell=bash
# ---- 3c. live migration ------------------------------------------------------
# Sourced by tests/e2e/l1.sh (its helpers, NODE, WWPN_A, TPGT, SLOT_A, MOD,
# GUEST_KO) with our host backend loaded and the target up.  An L2 is
# migrated between QEMU processes in L1 over a unix socket, there and
# back (three QEMUs: A, then B, then C), while it runs verified I/O with
# O_DIRECT on the disk (tests/e2e/migrate-verify.c, which fails when a
# page the host filled reaches the destination stale): once with our guest
# driver (SQ/CQ, which must stop on the source and come back on each
# destination by itself), once with the in-tree virtio_scsi (classic).
# vhost-scsi-pci needs migratable=on.  A 9p share mounted in the guest
# blocks migration in QEMU, so this L2 is not the rig's: it boots the rig's
# initramfs plus a second cpio archive with its init (tests/e2e/l2-migrate.sh
# via sqcq.init), the verifier and the guest driver, and reports on its
# console only.  Each QEMU opens the device node itself (vhostfd: a device
# of its own, as a VMM on a new host would); the destination binds the TPG
# when it starts, after the source released it.  E2E_MIGRATE=0 leaves this
# out; E2E_MIGRATE_S: how long L2 verifies (default 120 s with SQ/CQ, 45 s
# classic).

mig_dir=/tmp/e2e-migrate
# mig_start N [INCOMING]: QEMU N in the background (pid in mig_pid[N]),
# its console in $mig_dir/console-N.log; with INCOMING it waits for a
# migration on that unix socket.
declare -A mig_pid=()
mig_start() {
	local n=$1 inc=()
	[ -z "${2:-}" ] || inc=(-incoming "unix:$2")
	rm -f "$mig_dir/qmp-$n.sock"
	# shellcheck disable=SC2054 # commas belong to QEMU option values
	(
		exec 8<>"$NODE" || exit 1
		# shellcheck disable=SC2154 # l2_qemu: tests/e2e/l1.sh
		exec "${l2_qemu[@]}" "${mig_machine[@]}" -nodefaults -nographic -monitor none \
			-no-reboot -smp 1 -m 256 -kernel "$mig_kimg" -initrd "$mig_initrd" \
			-append "console=ttyS0 panic=-1 mitigations=off cryptomgr.notests=1 tsc=unstable no_timer_check rdinit=/init acpi=off pci=noearly scsi_mod.scan=manual sqcq.init=/l2-migrate.sh sqcq.mig_s=$mig_s sqcq.mig_tpgt=$TPGT $mig_append" \
			-serial "file:$mig_dir/console-$n.log" \
			-device "vhost-scsi-pci,wwpn=$WWPN_A,vhostfd=8,addr=0x$SLOT_A,migratable=on" \
			-qmp "unix:$mig_dir/qmp-$n.sock,server=on,wait=off" "${inc[@]}"
	) >"$mig_dir/qemu-$n.log" 2>&1 &
	mig_pid[$n]=$!
}

# mig_grep N REGEX: the console of QEMU N has a line matching REGEX.
mig_grep() { { tr -d '\r' <"$mig_dir/console-$1.log"; } 2>/dev/null | grep -qaE "$2"; }

# mig_move FROM TO: migrate QEMU FROM to a new QEMU TO; FROM quits.
mig_move() {
	local from=$1 to=$2 st=""
	mig_start "$to" "$mig_dir/mig-$to.sock"
	wait_for 30 test -S "$mig_dir/mig-$to.sock" || {
		fail "migrate $mig_kind $from->$to: the destination QEMU did not listen ($(tail -n 3 "$mig_dir/qemu-$to.log" | tr '\n' ' '))"
		return 1
	}
	qmp "$mig_dir/qmp-$from.sock" \
		"{\"execute\": \"migrate\", \"arguments\": {\"uri\": \"unix:$mig_dir/mig-$to.sock\"}}" \
		>>"$mig_dir/qmp.log" 2>&1 || { fail "migrate $mig_kind $from->$to: QMP migrate refused ($(tail -n 1 "$mig_dir/qmp.log"))"; return 1; }
	for _ in $(seq 240); do
		st=$(qmp "$mig_dir/qmp-$from.sock" query-migrate 2>&1 |
			sed -n 's/.*"status": "\([a-z-]*\)".*/\1/p' | tail -n 1)
		case "$st" in completed | failed | cancelled) break ;; esac
		sleep 1
	done
	log "migrate $mig_kind $from->$to: $st"
	check "migrate $mig_kind $from->$to: completed (${st:-no answer})" [ "$st" = completed ] || return 1
	qmp "$mig_dir/qmp-$from.sock" quit >>"$mig_dir/qmp.log" 2>&1
	wait "${mig_pid[$from]}" 2>/dev/null
	return 0
}

# mig_run KIND: sqcq (our guest driver) or classic (the in-tree driver).
mig_run() {
	local extra="scsi_mod sd_mod" base x n0 klines
	mig_pid=()
	mig_kind=$1
	mig_s=${E2E_MIGRATE_S:-120}
	[ "$mig_kind" = sqcq ] || { extra="$extra virtio_scsi"; mig_s=${E2E_MIGRATE_S:-45}; }
	rm -rf "$mig_dir"
	mkdir -p "$mig_dir/x/lib/sqcq-modules"
	base=$(SQCQ_VM_INITRD_EXTRA=$extra sqcq_vm_initramfs "$mig_kdir") ||
		{ fail "migrate $mig_kind: initramfs"; return; }
	x=$mig_dir/x
	cp "$ROOT/tests/e2e/l2-migrate.sh" "$x/l2-migrate.sh"
	cp "$mig_verify" "$x/migrate-verify"
	# After the rig's modules (their names start with a number).
	[ "$mig_kind" != sqcq ] || cp "$GUEST_KO" "$x/lib/sqcq-modules/zz-virtio_scsi_sqcq.ko"
	chmod 755 "$x/l2-migrate.sh" "$x/migrate-verify"
	(cd "$x" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) \
		>"$mig_dir/extra.cpio" || { fail "migrate $mig_kind: cpio"; return; }
	mig_initrd=$mig_dir/initrd.cpio
	cat "$base" "$mig_dir/extra.cpio" >"$mig_initrd"
	read -r klines _ < <(dmesg | wc -l)

	mig_start A
	if ! wait_for 300 mig_grep A '^migrate-l2: (ready|end)'; then
		fail "migrate $mig_kind: L2 did not start its I/O ($(tr -d '\r' <"$mig_dir/console-A.log" | tail -n 3 | tr '\n' ' '))"
		kill "${mig_pid[A]}" 2>/dev/null
		# Its console, for the verdict (migrate_boot_freeze).
		cp -r "$mig_dir" "$SQCQ_RESULTS/migrate-$mig_kind" 2>/dev/null
		return
	fi
	check "migrate $mig_kind: L2 ready ($(tr -d '\r' <"$mig_dir/console-A.log" | grep -a -m1 '^migrate-l2: ready'))" \
		mig_grep A '^migrate-l2: ready'
	if [ "$mig_kind" = sqcq ]; then
		check "migrate sqcq: SQ/CQ on the source" wait_for 60 mig_grep A '^migrate-l2: mode sqcq'
	else
		sleep 5
	fi
	n0=$(dmesg | grep -c 'SQ/CQ stopped')
	if mig_move A B; then
		if [ "$mig_kind" = sqcq ]; then
			check "migrate sqcq A->B: the source stopped SQ/CQ (host log)" \
				[ "$(dmesg | grep -c 'SQ/CQ stopped')" -gt "$n0" ]
			check "migrate sqcq A->B: the guest ran classic after the move" \
				wait_for 60 mig_grep B '^migrate-l2: mode classic'
			check "migrate sqcq A->B: SQ/CQ negotiated again on the destination" \
				wait_for 90 mig_grep B '^migrate-l2: mode sqcq'
		else
			sleep 10
		fi
		if mig_move B C && [ "$mig_kind" = sqcq ]; then
			check "migrate sqcq B->C: SQ/CQ negotiated again back home" \
				wait_for 90 mig_grep C '^migrate-l2: mode sqcq'
		fi
	fi
	# The last QEMU standing runs to the verifier's end.
	for x in C B A; do
		[ -n "${mig_pid[$x]:-}" ] && kill -0 "${mig_pid[$x]}" 2>/dev/null && break
	done
	wait_for $((mig_s + 120)) mig_grep "$x" '^migrate-l2: end' ||
		fail "migrate $mig_kind: L2 did not end on $x"
	for x in A B C; do
		[ -n "${mig_pid[$x]:-}" ] || continue
		kill "${mig_pid[$x]}" 2>/dev/null
		wait "${mig_pid[$x]}" 2>/dev/null
	done
	local v
	v=$(cat "$mig_dir"/console-[ABC].log 2>/dev/null | tr -d '\r' | grep -a '^verify: done' | tail -n 1)
	check "migrate $mig_kind: verified I/O across both moves (${v:-no result}; $(cat "$mig_dir"/console-[ABC].log | tr -d '\r' | grep -a -m1 '^verify: block' || echo no mismatch))" \
		grep -q '^verify: done ios=[1-9][0-9]* bad=0 errors=0$' <<<"$v"
	x=$(cat "$mig_dir"/console-[ABC].log | tr -d '\r' | grep -a -m1 -E "$SQCQ_VM_LOG_BAD")
	check "migrate $mig_kind: L2's kernel log clean (${x:-clean})" [ -z "$x" ]
	x=$(dmesg | tail -n +"$((klines + 1))" | grep -m1 -E "$SQCQ_VM_LOG_BAD|dirty log")
	check "migrate $mig_kind: the host's log clean (${x:-clean})" [ -z "$x" ]
	cp -r "$mig_dir" "$SQCQ_RESULTS/migrate-$mig_kind" 2>/dev/null
}

if [ "$HOST" != intree ] && [ "${E2E_MIGRATE:-0}" = 1 ] && [ "$VIA" = qemu ]; then
	mig_kdir=$(sqcq_vm_fetch_kernel "${E2E_L2_ABI:-$SQCQ_ABI}")
	mig_kimg=$mig_kdir/vmlinux
	[ -f "$mig_kimg" ] || mig_kimg=$mig_kdir/vmlinuz
	mig_machine=(-accel tcg)
	# As tests/vm/run.sh starts a nested guest.
	sqcq_vm_kvm_ready && mig_machine=(-accel kvm -accel tcg -cpu max)
	[ -f "$SQCQ_VM_QBOOT" ] && mig_machine+=(-bios "$SQCQ_VM_QBOOT")
	mig_append=""
	# L2's kernel on the sanitizer lane: its parameters, as run.sh does.
	[ -r "$mig_kdir/cmdline" ] && mig_append=$(cat "$mig_kdir/cmdline")
	mig_verify=/tmp/migrate-verify
	if gcc -O2 -static -o "$mig_verify" "$ROOT/tests/e2e/migrate-verify.c" -lpthread \
		>"$SQCQ_RESULTS/migrate-verify-build.log" 2>&1; then
		mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
		mig_run sqcq
		mig_run classic
	else
		fail "migrate: building the verifier ($(tail -n 2 "$SQCQ_RESULTS/migrate-verify-build.log"))"
	fi
	phase "live migration"
fi
