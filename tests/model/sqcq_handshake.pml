/*
 * SPDX-License-Identifier: GPL-2.0
 *
 * Promela model of the virtio-sqcq NEED_WAKEUP handshake (docs/protocol.md section 4), both
 * directions at once, on x86-TSO memory with explicit store buffers.
 *
 * Threads (each on its own CPU, each CPU with a FIFO store buffer):
 *   guest_sub   guest submitter: SQ producer.  Publishes sqcq_sq.idx with
 *               sqcq_publish() and kicks (MMIO -> ioeventfd) when the host's
 *               SQ_NEED_WAKEUP is set.  At most QD requests in flight: it
 *               waits for completions, so a lost wakeup in either direction
 *               stops the whole system.
 *   host        host poll thread: SQ consumer (polls sqcq_sq.idx, sleeps on
 *               the kick eventfd via sqcq_prepare_sleep()) and, in the same
 *               thread and store buffer, CQ producer (completes what it took,
 *               sqcq_publish() on sqcq_cq.idx, interrupt when the guest's
 *               CQ_NEED_WAKEUP is set).
 *               With -DSPLIT_HOST the CQ producer is a separate host thread
 *               (a completion worker on another CPU) fed by the poller.
 *               With -DSHARED the host side is a shared poller
 *               (poll_shared, host/vhost_sqcq.c): the device's worker
 *               (CPU HOST) serves and, finding nothing, parks the device
 *               and sleeps with SQ_NEED_WAKEUP clear; the shared poller
 *               (CPU SPOLL, its own store buffer) reads sqcq_sq.idx of the
 *               parked device and either hands it back (wakes the worker)
 *               or lets it go with sqcq_prepare_sleep() done on the
 *               worker's behalf.  Parking, unparking and each pass of the
 *               shared poller hold its lock (glock).
 *   guest_poll  guest poll thread: CQ consumer (polls sqcq_cq.idx, sleeps
 *               until the queue interrupt).
 *   flusher     the memory system: drains any CPU's oldest buffered store
 *               to memory, at any time.
 *
 * Memory model (x86-TSO): a store goes into the storing CPU's FIFO store
 * buffer and reaches memory later (flusher); a load returns the youngest
 * buffered store of that CPU to the same address if there is one, else
 * memory.  So a store can be delayed past a later load of another address:
 * the one reordering x86 allows.  A full barrier (sqcq_mb(): virt_mb(),
 * mfence / locked op) waits until the CPU's store buffer is empty.
 * sqcq_wmb() is a compiler barrier on x86 (stores stay in order in the
 * FIFO), so it is not modelled.  The notifications themselves (kick,
 * interrupt) are sequentially consistent: eventfd and interrupt injection
 * go through locks / serialising instructions.
 *
 * Ring contents are abstracted: an index value stands for the entries
 * published up to it (their ordering is the usual virtio wmb/rmb business,
 * not the handshake's).  Indexes count 0..N without wrapping (wrap-around
 * arithmetic is covered by the unit tests).
 *
 * Checked properties:
 *   - assertion (monitor): never a lost wakeup.  A consumer is asleep (it
 *     committed to sleeping and waits for a notification), no notification
 *     is pending, yet the producer has already *finished* deciding about an
 *     index the consumer has not seen (published it, read the flag, chose
 *     not to notify).  Nothing will wake the consumer for that work.
 *   - invalid end states: the system never gets stuck; the only end state is
 *     all N requests submitted, processed and completed.
 *   - final assertion: memory agrees at the end.
 *   - with -DLIVENESS: LTL "<> all_done" (every request eventually
 *     completes), checked for acceptance cycles under weak fairness.
 *
 * Variants (-D on the spin command line), each a bit mask of directions
 * (1 = SQ, 2 = CQ, 3 = both; the helper is shared, so the header mutation is
 * 3):
 *   BROKEN_PRODUCER_MB  sqcq_publish() without sqcq_mb()
 *   BROKEN_CONSUMER_MB  sqcq_prepare_sleep() without sqcq_mb()
 *   BROKEN_RECHECK      sqcq_prepare_sleep() without the re-read of the index
 *   BROKEN_STOP_MB      sqcq_stop_polling() without sqcq_mb()
 *   BROKEN_PARK_MB      (SHARED) the worker parks without the full barrier
 *                       of set_current_state(): its clear of SQ_NEED_WAKEUP
 *                       may still sit in its store buffer
 *   KICK_CLEAR          the host's kick handler (vhc_kick_wake(), on the
 *                       kicking vCPU thread's CPU) clears SQ_NEED_WAKEUP
 *                       with a locked compare-and-exchange (NEED alone ->
 *                       0, never STOPPED) before it wakes the poller, so
 *                       that the guest stops kicking while the wakeup is on
 *                       its way; with BROKEN_KICK_ORDER it wakes first and
 *                       clears after (the clear can land on the flag of the
 *                       poller's next sleep)
 * Other knobs: N (requests, default 3), QD (queue depth, default 2), SB
 * (store buffer entries, default 2), NO_STOP (no graceful stop path),
 * SPLIT_HOST, LIVENESS, NO_MONITOR (leave the lost-wakeup assertion out, so
 * that a broken variant shows up as a deadlock: an invalid end state),
 * REACH (below).
 */

#ifndef N
#define N	3
#endif
#ifndef QD
#define QD	2
#endif
#ifndef SB
#define SB	2
#endif
#ifndef BROKEN_PRODUCER_MB
#define BROKEN_PRODUCER_MB	0
#endif
#ifndef BROKEN_CONSUMER_MB
#define BROKEN_CONSUMER_MB	0
#endif
#ifndef BROKEN_RECHECK
#define BROKEN_RECHECK		0
#endif
#ifndef BROKEN_STOP_MB
#define BROKEN_STOP_MB		0
#endif
#ifndef BROKEN_PARK_MB
#define BROKEN_PARK_MB		0
#endif

#ifndef BROKEN_KICK_ORDER
#define BROKEN_KICK_ORDER	0
#endif

#ifndef REACH
#define REACH	0
#endif
/* Vacuity checks: with -DREACH=n, reaching point n is reported as an
 * assertion violation "((n)==0)", which proves the point is reachable;
 * -DREACH=99 marks all of them at once (run pan with -c0 to see them all).
 *   1 host poller slept and a kick woke it      2 same, guest poller / irq
 *   3 host re-check saw the index move          4 same, guest poller
 *   5 a stopped poller was woken (classic mode)
 *   6 guest published without kicking           7 host completed without irq
 */
#define REACHED(n)	if :: REACH == (n) || REACH == 99 -> assert((n) == 0) :: else -> skip fi

#define DIR_SQ	1
#define DIR_CQ	2

/* Flag bits, as VRING_{SQ,CQ}_F_* */
#define NEED	1
#define STOPPED	2

/* Addresses in the doorbell area */
#define SQ_IDX		0	/* written by the guest */
#define SQ_FLAGS	1	/* written by the host */
#define CQ_IDX		2	/* written by the host */
#define CQ_FLAGS	3	/* written by the guest */

/* CPUs */
#define G_SUB	0
#define HOST	1	/* SQ poller (and CQ producer unless SPLIT_HOST) */
#define G_POLL	2
#define HOST_CQ	3	/* SPLIT_HOST only */
#define SPOLL	3	/* SHARED only: the shared poller */
#if defined(SPLIT_HOST) || defined(SHARED)
#define NCPU	4
#else
#define NCPU	3
#endif

byte mem[4];

typedef storebuf {
	byte addr[SB];
	byte val[SB];
	byte n
};
storebuf sb[NCPU];

/* Notifications: kick eventfd (SQ) and queue interrupt (CQ); level, like an
 * eventfd counter that the sleeper reads to zero.
 */
bool kick, irq;
#ifdef KICK_CLEAR
/* The guest's MMIO kick, not yet through the host's kick handler. */
bool kick_raw;
#define SQ_NOTE	kick_raw
#define KICK_PENDING	(kick || kick_raw)
#else
#define SQ_NOTE	kick
#define KICK_PENDING	kick
#endif

/* Consumers' progress: last index processed.  g_seen is also how the guest
 * submitter learns of completions (guest-internal, locked: SC).
 */
byte h_seen, g_seen;
#ifdef SPLIT_HOST
byte h_done;		/* completions the CQ worker has published */
#endif

/* Ghost state for the properties. */
bool h_sleep, g_sleep;		/* consumer waits for its notification */
byte sq_decided, cq_decided;	/* producer finished the notify decision
				 * for this index */
byte finished;

#ifdef SHARED
/* Host-internal, under the shared poller's lock (SC): the device is parked
 * (the shared poller watches it), the poller handed it back (a wakeup of
 * the worker is pending), the lock is held.
 */
bool parked, handoff, glock;
/* Asleep and nobody watching: parked means the shared poller will look. */
#define LOST_SQ	(h_sleep && !parked && !KICK_PENDING && !handoff && sq_decided > h_seen)
#else
#define LOST_SQ	(h_sleep && !KICK_PENDING && sq_decided > h_seen)
#endif
#define LOST_CQ	(g_sleep && !irq && cq_decided > g_seen)

#ifdef SPLIT_HOST
#define NWORKERS	4
#else
#define NWORKERS	3
#endif

/* ---- TSO primitives --------------------------------------------------- */

/* Store: append to the CPU's store buffer (stall while it is full). */
inline st(cpu, a, v)
{
	d_step {
		sb[cpu].n < SB ->
		sb[cpu].addr[sb[cpu].n] = a;
		sb[cpu].val[sb[cpu].n] = v;
		sb[cpu].n++
	}
}

/* Load with store forwarding: youngest own buffered store, else memory. */
inline ld(cpu, a, r)
{
	d_step {
		r = mem[a];
		k = 0;
		do
		:: k < sb[cpu].n ->
			if
			:: sb[cpu].addr[k] == a -> r = sb[cpu].val[k]
			:: else -> skip
			fi;
			k++
		:: else -> break
		od;
		k = 0
	}
}

/* Full barrier: wait until the store buffer has drained. */
inline mb(cpu)
{
	(sb[cpu].n == 0)
}

/* ---- the helpers of common/sqcq_uapi.h ---------------------------------- */

/* sqcq_publish(): store idx; mb; load peer flags; notify if NEED.
 * The notification itself (MMIO kick: a VM exit; eventfd write: a syscall)
 * is serialising, so the producer's store buffer is empty when it lands.
 */
inline publish(cpu, ia, fa, v, note, decided, dir)
{
	st(cpu, ia, v);
	if
	:: (BROKEN_PRODUCER_MB & dir) -> skip
	:: else -> mb(cpu)
	fi;
	ld(cpu, fa, f);
	if
	:: (f & NEED) -> d_step { sb[cpu].n == 0 -> note = 1; decided = v }
	:: else -> d_step { REACHED(5 + dir); decided = v }
	fi
}

/* sqcq_prepare_sleep(): set own NEED; mb; re-read idx; if it moved, clear
 * NEED and return 0 (keep polling), else return 1 (sleep).
 */
inline prepare_sleep(cpu, fa, ia, seen, dir, res)
{
	ld(cpu, fa, f);
	st(cpu, fa, f | NEED);
	if
	:: (BROKEN_CONSUMER_MB & dir) -> skip
	:: else -> mb(cpu)
	fi;
	if
	:: (BROKEN_RECHECK & dir) -> res = 1
	:: else ->
		ld(cpu, ia, r);
		if
		:: r != seen ->
			ld(cpu, fa, f);
			st(cpu, fa, f & ~NEED);
			res = 0
		:: else -> res = 1
		fi
	fi
}

/* sqcq_clear_need_wakeup(): clear own NEED, no barrier. */
inline clear_need_wakeup(cpu, fa)
{
	ld(cpu, fa, f);
	st(cpu, fa, f & ~NEED)
}

/* sqcq_stop_polling(): set NEED | STOPPED for good; mb. */
inline stop_polling(cpu, fa, dir)
{
	ld(cpu, fa, f);
	st(cpu, fa, f | NEED | STOPPED);
	if
	:: (BROKEN_STOP_MB & dir) -> skip
	:: else -> mb(cpu)
	fi
}

/* Block until notified; the wakeup consumes the notification.  Going to
 * sleep is serialising too (set_current_state() is a full barrier, and
 * schedule() follows), so the sleeper's store buffer is empty while it
 * sleeps; what it loaded before is what it decided on.
 */
inline sleep_until(cpu, note, sleeping)
{
	d_step { sb[cpu].n == 0 -> sleeping = 1 };
	d_step { note -> note = 0; sleeping = 0 }
}

/* ---- threads ----------------------------------------------------------- */

proctype guest_sub()
{
	byte i = 0, f, k;

	do
	:: i < N && i - g_seen < QD ->
		i++;
		publish(G_SUB, SQ_IDX, SQ_FLAGS, i, SQ_NOTE, sq_decided, DIR_SQ)
	:: i == N -> break
	od;
	finished++
}

/*
 * A poller: consumes index ia (own flags fa, notification note), calls
 * COMPLETE after taking new work.  Polls once, then goes for sleep (more
 * polls only delay; the scheduler already covers every timing).  May stop
 * polling for good at an idle point (teardown), then works classic: drain,
 * sleep until notified, repeat; its NEED stays set.
 */
#define POLLER_BODY(cpu, ia, fa, seen, note, sleeping, dir, COMPLETE)	\
	clear_need_wakeup(cpu, fa);					\
	do								\
	:: seen == N -> break						\
	:: else ->							\
		ld(cpu, ia, r);						\
		if							\
		:: r != seen ->						\
			assert(r > seen && r - seen <= QD);		\
			seen = r;					\
			COMPLETE					\
		:: r == seen && !stopped ->				\
			prepare_sleep(cpu, fa, ia, seen, dir, res);	\
			if						\
			:: res ->					\
				sleep_until(cpu, note, sleeping);		\
				REACHED(dir);				\
				clear_need_wakeup(cpu, fa)		\
			:: else -> REACHED(2 + dir)			\
			fi						\
		:: r == seen && !stopped && CAN_STOP ->			\
			stop_polling(cpu, fa, dir);			\
			stopped = 1					\
		:: r == seen && stopped ->				\
			sleep_until(cpu, note, sleeping);			\
			REACHED(5)					\
		fi							\
	od

#ifdef NO_STOP
#define CAN_STOP	false
#else
#define CAN_STOP	true
#endif

#ifdef SPLIT_HOST
#define HOST_COMPLETE	skip
#else
#define HOST_COMPLETE	publish(HOST, CQ_IDX, CQ_FLAGS, h_seen, irq, cq_decided, DIR_CQ)
#endif

#ifndef SHARED
proctype host()
{
	byte r, f, k;
	bool res, stopped;

	POLLER_BODY(HOST, SQ_IDX, SQ_FLAGS, h_seen, kick, h_sleep, DIR_SQ,
		    HOST_COMPLETE);
	finished++
}
#else
/*
 * The device's worker with a shared poller: each pass clears SQ_NEED_WAKEUP
 * (vhost_sqcq_awake()) and polls; finding nothing it parks and
 * sleeps (set_current_state(), a full barrier, then the lock).  A kick or
 * the shared poller's hand-back wakes it; it unparks under the lock.
 */
proctype host()
{
	byte r, f, k;

	do
	:: h_seen == N -> break
	:: else ->
		clear_need_wakeup(HOST, SQ_FLAGS);
		ld(HOST, SQ_IDX, r);
		if
		:: r != h_seen ->
			assert(r > h_seen && r - h_seen <= QD);
			h_seen = r;
			HOST_COMPLETE
		:: r == h_seen ->
			if
			:: BROKEN_PARK_MB -> d_step { !glock -> parked = 1; h_sleep = 1 }
			:: else -> d_step { sb[HOST].n == 0 && !glock -> parked = 1; h_sleep = 1 }
			fi;
			d_step {
				(kick || handoff) && !glock ->
				kick = 0; handoff = 0; h_sleep = 0; parked = 0
			};
			REACHED(1)
		fi
	od;
	finished++
}

/*
 * The shared poller: each pass, under its lock, reads the parked device's
 * SQ index; moved: hand it back; else keep watching, or (window over, CPU
 * contended) run the handshake for it and let it go, or hand it back when
 * the re-check saw the index move (vhost_poll_group_let_go()).
 */
proctype spoll()
{
	byte r, f, k;
	bool res;

end:	do
	:: d_step { parked && !glock -> glock = 1 };
		ld(SPOLL, SQ_IDX, r);
		if
		:: r != h_seen -> d_step { parked = 0; handoff = 1; glock = 0 }
		:: r == h_seen -> glock = 0
		:: r == h_seen ->
			prepare_sleep(SPOLL, SQ_FLAGS, SQ_IDX, h_seen, DIR_SQ, res);
			if
			:: res -> parked = 0
			:: else -> REACHED(3); d_step { parked = 0; handoff = 1 }
			fi;
			glock = 0
		fi
	od
}
#endif

#ifdef KICK_CLEAR
/*
 * The host's kick handler: takes the guest's kick (the eventfd's wakeup
 * callback), clears SQ_NEED_WAKEUP if it is NEED alone (a locked cmpxchg:
 * atomic on memory, a full barrier; the handler stores nothing else, so
 * its store buffer stays empty), then wakes the poller.  The kick stays
 * pending (kick_raw) until the wakeup is sent, as the eventfd's counter
 * does.
 */
#define KICK_CAS	d_step { if :: mem[SQ_FLAGS] == NEED -> mem[SQ_FLAGS] = 0 :: else -> skip fi }
proctype kickwake()
{
end:	do
	:: kick_raw ->
		if
		:: BROKEN_KICK_ORDER -> d_step { kick_raw = 0; kick = 1 }; KICK_CAS
		:: else -> KICK_CAS; d_step { kick_raw = 0; kick = 1 }
		fi
	od
}
#endif

#ifdef SPLIT_HOST
/* Host completion worker on another CPU, handed work by the poller through
 * host-internal (locked, SC) state.
 */
proctype host_cq()
{
	byte f, k;

	do
	:: h_done == N -> break
	:: h_done < h_seen ->
		h_done = h_seen;
		publish(HOST_CQ, CQ_IDX, CQ_FLAGS, h_done, irq, cq_decided, DIR_CQ)
	od;
	finished++
}
#endif

proctype guest_poll()
{
	byte r, f, k;
	bool res, stopped;

	POLLER_BODY(G_POLL, CQ_IDX, CQ_FLAGS, g_seen, irq, g_sleep, DIR_CQ, skip);
	finished++
}

#define FLUSH(c)							\
	d_step {							\
		sb[c].n > 0 ->						\
		mem[sb[c].addr[0]] = sb[c].val[0];			\
		j = 1;							\
		do							\
		:: j < sb[c].n ->					\
			sb[c].addr[j - 1] = sb[c].addr[j];		\
			sb[c].val[j - 1] = sb[c].val[j];		\
			j++						\
		:: else -> break					\
		od;							\
		sb[c].n--;						\
		sb[c].addr[sb[c].n] = 0;				\
		sb[c].val[sb[c].n] = 0;					\
		j = 0							\
	}

proctype flusher()
{
	byte j;

end:	do
	:: FLUSH(0)
	:: FLUSH(1)
	:: FLUSH(2)
#if defined(SPLIT_HOST) || defined(SHARED)
	:: FLUSH(3)
#endif
	od
}

/* Never a lost wakeup, in either direction. */
proctype monitor()
{
end:	do
	:: d_step { LOST_SQ -> assert(!LOST_SQ) }
	:: d_step { LOST_CQ -> assert(!LOST_CQ) }
	od
}

/* At the end: everything submitted, taken, completed and in memory. */
proctype final_check()
{
end:	d_step {
#if NCPU == 4
		finished == NWORKERS && sb[0].n + sb[1].n + sb[2].n + sb[3].n == 0 ->
#else
		finished == NWORKERS && sb[0].n + sb[1].n + sb[2].n == 0 ->
#endif
		assert(h_seen == N && g_seen == N);
		assert(mem[SQ_IDX] == N && mem[CQ_IDX] == N);
		assert(!h_sleep && !g_sleep)
	}
}

init {
	atomic {
		/* sqcq_area_init(): both NEED_WAKEUP bits start set. */
		mem[SQ_FLAGS] = NEED;
		mem[CQ_FLAGS] = NEED;
		run flusher();
#ifndef NO_MONITOR
		run monitor();
#endif
		run final_check();
		run guest_sub();
		run host();
#ifdef SPLIT_HOST
		run host_cq();
#endif
#ifdef SHARED
		run spoll();
#endif
#ifdef KICK_CLEAR
		run kickwake();
#endif
		run guest_poll()
	}
}

#ifdef LIVENESS
ltl all_done { <> (g_seen == N && h_seen == N) }
#endif
