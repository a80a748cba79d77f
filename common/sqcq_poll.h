/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Poll policy shared by the host and guest pollers: how long a poller may
 * spin without work before it sleeps.  Pure arithmetic, no kernel state, so
 * the userspace unit tests (tests/unit) run the very same code.
 *
 * The idle window adapts as KVM's halt_poll_ns does.  After each idle
 * period (from the last work found to the next, spinning and sleeping
 * together) the poller asks sqcq_poll_window_next():
 *
 *   - the period ended inside the window: polling caught the work, keep it;
 *   - it was longer than the ceiling (poll_idle_us): no window allowed
 *     would have caught it, spinning was wasted, halve the window (below
 *     SQCQ_POLL_WINDOW_MIN_NS it drops to 0: sleep at once);
 *   - it ended after the window but within the ceiling: a longer window
 *     would have caught it, double the window (from SQCQ_POLL_WINDOW_MIN_NS),
 *     up to the ceiling.
 *
 * Gaps longer than the ceiling thus pull the window down, and steady work
 * grows it to just above the gaps between pieces of work.
 */
#ifndef SQCQ_POLL_H
#define SQCQ_POLL_H

#include <linux/types.h>
#ifndef __KERNEL__
#include <stdbool.h>
#endif

/* The smallest window that is not 0, and where growing starts. */
#define SQCQ_POLL_WINDOW_MIN_NS		10000ULL

/**
 * sqcq_poll_window_next() - the idle window after an idle period
 * @cur_ns: the current window
 * @idle_ns: the idle period that just ended (last work to this work)
 * @ceil_ns: the ceiling, poll_idle_us in ns
 *
 * Return: the new window, never above the ceiling, also when the ceiling
 * was lowered meanwhile.
 */
static inline __u64 sqcq_poll_window_next(__u64 cur_ns, __u64 idle_ns,
					  __u64 ceil_ns)
{
	__u64 next;

	if (cur_ns > ceil_ns)
		cur_ns = ceil_ns;
	if (idle_ns <= cur_ns)
		return cur_ns;
	if (idle_ns > ceil_ns) {
		next = cur_ns / 2;
		return next < SQCQ_POLL_WINDOW_MIN_NS ? 0 : next;
	}
	next = cur_ns ? cur_ns * 2 : SQCQ_POLL_WINDOW_MIN_NS;
	return next > ceil_ns ? ceil_ns : next;
}

/**
 * sqcq_poll_wake_pays() - whether a notification should wake a sleeping poller
 * @cur_ns: the poller's window now
 * @gap_ns: from the last work to the work this notification brings
 * @ceil_ns: the ceiling, poll_idle_us in ns
 * @next_ns: set to the window from now on
 *
 * For a notification whose handler completes the work itself (the guest's
 * queue interrupt): a poller whose window fell to 0 found that polling did
 * not pay, and waking it would only add a context switch, and an IPI when
 * it sleeps on another CPU, to work already done.  As halt polling starts
 * again from 0, a gap within the ceiling says a window would have caught
 * this work: the window starts over from SQCQ_POLL_WINDOW_MIN_NS and the
 * poller is woken.
 *
 * Return: true when the poller is to be woken.
 */
static inline bool sqcq_poll_wake_pays(__u64 cur_ns, __u64 gap_ns,
				       __u64 ceil_ns, __u64 *next_ns)
{
	*next_ns = cur_ns;
	if (cur_ns)
		return true;
	/* The window rule's own growth from 0 (a gap of 0 counts as 1 ns). */
	*next_ns = sqcq_poll_window_next(0, gap_ns ? gap_ns : 1, ceil_ns);
	return *next_ns != 0;
}

/* Why a poller went to sleep (debugfs counters). */
enum sqcq_sleep_reason {
	SQCQ_SLEEP_IDLE,	/* no work for a whole window */
	SQCQ_SLEEP_CONTENDED,	/* another task wanted the CPU */
	SQCQ_SLEEP_STOLEN,	/* guest: the hypervisor ran something else */
	SQCQ_SLEEP_NR
};

/* What a poller does after a pass. */
enum sqcq_poll_step {
	SQCQ_POLL_SPIN,		/* poll again */
	SQCQ_POLL_YIELD,	/* let the others run, peer notifications on */
	SQCQ_POLL_SLEEP		/* the sleep handshake, for *why */
};

/**
 * sqcq_poll_decide() - what a poller does after a pass
 * @work: the pass found work
 * @contended: another task is runnable on this CPU or the scheduler wants
 *             it back
 * @yielded: the previous pass yielded
 * @stolen: the hypervisor took the vCPU since the previous pass (guest)
 * @window_over: no work for the whole idle window
 * @why: set to the reason when the answer is %SQCQ_POLL_SLEEP
 *
 * Contended, the poller first yields (with notifications requested): the
 * other task is often short, such as the kworker the target core queued on
 * this CPU for the request just served, and polling goes on when it is
 * done.  Still contended at the next pass without work, it sleeps: a CPU
 * hog, or an application that needs the CPU.  Uncontended, it spins until
 * the window is over, and never while the vCPU is being stolen.
 *
 * Return: the step.
 */
static inline enum sqcq_poll_step
sqcq_poll_decide(bool work, bool contended, bool yielded, bool stolen,
		 bool window_over, enum sqcq_sleep_reason *why)
{
	if (contended) {
		if (work || !yielded)
			return SQCQ_POLL_YIELD;
		*why = SQCQ_SLEEP_CONTENDED;
		return SQCQ_POLL_SLEEP;
	}
	if (work)
		return SQCQ_POLL_SPIN;
	if (stolen) {
		*why = SQCQ_SLEEP_STOLEN;
		return SQCQ_POLL_SLEEP;
	}
	if (window_over) {
		*why = SQCQ_SLEEP_IDLE;
		return SQCQ_POLL_SLEEP;
	}
	return SQCQ_POLL_SPIN;
}

#endif /* SQCQ_POLL_H */
