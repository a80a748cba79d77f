# shellcheck shell=bash
# ---- 2b'''. QMP stop/cont under load: classic, then SQ/CQ again ------------
# Sourced by tests/e2e/l2.sh (its helpers, DISK_A, SLOT_A; our guest driver
# with our host).  While fio writes and verifies on DISK_A, L1 stops L2's
# QEMU over QMP and continues it 2 s later (tests/e2e/l1.sh: qmp_stopcont).
# QEMU's vhost-scsi clears the endpoint at the stop: the host sets STOPPED
# (docs/protocol.md section 5) and the guest must return to exact classic
# behaviour (docs/sqcq.md): debugfs says so, its poll thread (if poll_cpu
# gave it one) is gone, CQ doorbells and saved kicks stop counting while
# kicks and interrupts carry
# the I/O, and no data goes wrong.  Then the driver negotiates SQ/CQ again
# by itself, no reset.  Bash builtins only while it waits (see l2.sh).

# sc_state DIR: SC = "mode/sqcq_state/poll_thread/classic_why" of DIR/info,
# QM = the mode column of DIR/queues' request queues ("sqcq sqcq",
# "classic", ...), REPLY = both for the result lines.
sc_state() {
	local k q m
	SC=""
	for k in mode sqcq_state poll_thread classic_why; do
		dbg_value "$1" "$k"
		SC="${SC:+$SC/}$REPLY"
	done
	QM=""
	while read -r q _ m _; do
		[[ "$q" == request* ]] && QM="${QM:+$QM }$m"
	done <"$1/queues"
	REPLY="$SC, queues: $QM"
}
# sc_is SC QMODE: debugfs of $d shows SC, and every request queue QMODE.
sc_is() {
	local m
	sc_state "$d"
	[ "$SC" = "$1" ] && [ -n "$QM" ] || return 1
	for m in $QM; do [ "$m" = "$2" ] || return 1; done
}
# ios_past N: DISK_A completed more than N I/Os (ios).
ios_past() { ios "$DISK_A"; [ "$REPLY" -gt "$1" ]; }
sc_classic() { sc_is "classic/stopped/none/stopped by the host" classic; }
sc_sqcq() { sc_is "sqcq/on/$PT/-" sqcq; }

if [ "$GUEST" = sqcq ] && [ "$E2E_HOST" != intree ] && [ -n "$DISK_A" ] &&
	[ "${E2E_RESET:-1}" = 1 ] && vdev "$SLOT_A"; then
	d=/sys/kernel/debug/virtio_scsi_sqcq/${REPLY##*/}
	guest_pt
	sc_sqcq
	check "stop/cont: SQ/CQ before the stop ($REPLY)" sc_sqcq
	dbg_value "$d" timer_resets
	tr0=$REPLY
	# 32 MiB whatever --fio-size says: it must outlast the stop and 3 s more.
	fio_verify stopcont "$DISK_A:32m" &
	fpid=$!
	ios "$DISK_A"
	wait_for 30 ios_past $((REPLY + 100))
	# Doorbells carry the work under this load before the stop (within
	# 10 s: a busy, slow L1, the sanitizer one, once showed no move in 1 s
	# while its poller was contended): saved kicks, and CQ doorbells with
	# a guest poll thread, none without.
	queue_sums "$d"
	db0=$DBS sv0=$SAVED
	sc_doorbells_moved() { queue_sums "$d"; sqcq_moved "$db0" "$sv0"; }
	wait_for 10 sc_doorbells_moved
	check "stop/cont: saved kicks and CQ doorbells (poll thread $PT) count under load before the stop (doorbells $db0 -> $DBS, kicks_saved $sv0 -> $SAVED)" \
		sqcq_moved "$db0" "$sv0"
	host_log="" qmp=""
	if ask_l1 stopcont; then
		pass "stop/cont: L1 stopped L2 and continued it 2 s later over QMP"
	else
		fail "stop/cont: L1 stopped L2 and continued it 2 s later over QMP"
	fi
	# L1's answer: "ok", then "qmp COMMAND: REPLY" lines and "host-log: ...".
	[ -e "$SQCQ_RESULTS/hotplug-stopcont.done" ] && while read -r line; do
		case "$line" in
		"host-log: "*) host_log=${line#host-log: } ;;
		"qmp "*) qmp="$qmp; ${line#qmp }" ;;
		esac
	done <"$SQCQ_RESULTS/hotplug-stopcont.done"
	log "QMP: ${qmp#; }"
	check "stop/cont: the host stopped SQ/CQ (its log: ${host_log:-no answer})" \
		[ -n "$host_log" -a "$host_log" != none ]
	# Whoever sees STOPPED first (poll thread, interrupt, kick) switches.
	wait_for 20 sc_classic
	check "stop/cont: debugfs shows classic after the stop ($REPLY)" sc_classic
	# The load goes on, classic: kicks by the ring's suppression, completions
	# by interrupt; no doorbell, no saved kick, no poll thread.
	queue_sums "$d"
	a_r=$REQS a_k=$KICKS a_i=$IRQS a_db=$DBS a_sv=$SAVED
	nap 3
	fio_gone "$fpid" && log "fio ended within 3 s of the switch"
	queue_sums "$d"
	log "classic after the stop: requests $a_r -> $REQS, kicks $a_k -> $KICKS, interrupts $a_i -> $IRQS, doorbells $a_db -> $DBS, kicks_saved $a_sv -> $SAVED"
	check "stop/cont: I/O goes on after cont (requests $a_r -> $REQS)" [ "$REQS" -gt $((a_r + 50)) ]
	check "stop/cont: classic kicks (at most one a request) and interrupts carry it (kicks $a_k -> $KICKS, interrupts $a_i -> $IRQS)" \
		[ "$KICKS" -gt "$a_k" -a "$IRQS" -gt "$a_i" -a $((KICKS - a_k)) -le $((REQS - a_r)) ]
	check "stop/cont: no CQ doorbell, no saved kick after the switch (doorbells $a_db -> $DBS, kicks_saved $a_sv -> $SAVED)" \
		[ "$DBS.$SAVED" = "$a_db.$a_sv" ]
	sc_classic
	check "stop/cont: still classic, no poll thread ($REPLY)" sc_classic
	wait "$fpid"
	st=$?
	dbg_value "$d" timer_resets
	check "stop/cont: fio verify across the stop clean (status $st; timer_resets $tr0 -> $REPLY)" \
		[ "$st.$REPLY" = "0.$tr0" ]
	# Without a reset the driver negotiates again (docs/protocol.md
	# section 5) 10 s after the switch, once no command is outstanding:
	# SQ/CQ again, the poll thread back if poll_cpu gave it one.
	wait_for 90 sc_sqcq
	dbg_value "$d" renegotiations
	check "stop/cont: SQ/CQ again without a reset (renegotiations $REPLY; $(sc_state "$d"; echo "$REPLY"))" sc_sqcq
	queue_sums "$d"
	b_db=$DBS b_sv=$SAVED
	fio_verify stopcont-after "$DISK_A:4m"
	queue_sums "$d"
	check "stop/cont: doorbells move again (poll thread $PT: doorbells $b_db -> $DBS, kicks_saved $b_sv -> $SAVED)" \
		sqcq_moved "$b_db" "$b_sv"
	check "stop/cont: fio-verify-crc32c after the renegotiation ($DISK_A)" job_ok "$DISK_A"
	phase "stop/cont"
fi
