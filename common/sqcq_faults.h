/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Fault hooks for the test builds of the modules (tests/faults/), which
 * make a failure this rig cannot otherwise cause: a device that never
 * answers, a poller that never yields, a load that loses a race.  In the
 * modules people load every
 * hook is a constant false and compiles away; a test build defines
 * SQCQ_TEST_FAULTS and the hooks' counters (module parameters of its own)
 * before it includes the module's source.
 */
#ifndef SQCQ_FAULTS_H
#define SQCQ_FAULTS_H

#ifdef SQCQ_TEST_FAULTS
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/sched/signal.h>

/* Defined by the test build: how many times each fault still fires. */
extern unsigned int fault_setup_unanswered;
extern unsigned int fault_poll_hog_s;
extern unsigned int fault_break_after;
extern unsigned int fault_tmf_unanswered;
/* Defined by the host's test build. */
extern unsigned int fault_takeover_wait_ms;

/* Take one firing of the fault counted by @n, if any is left. */
static inline bool sqcq_fault_take(unsigned int *n)
{
	unsigned int left = READ_ONCE(*n);

	if (!left)
		return false;
	WRITE_ONCE(*n, left - 1);
	return true;
}

/*
 * Guest: the device's answer to an SQ/CQ setup request (@is_setup) never
 * reaches the waiter -- to the driver, a device that does not answer.
 */
static inline bool sqcq_fault_setup_unanswered(bool is_setup)
{
	return is_setup && sqcq_fault_take(&fault_setup_unanswered);
}

/*
 * Guest poll thread, once it found work: spin fault_poll_hog_s seconds
 * with preemption off, never yielding (once) -- the lockup the e2e verdict
 * must fail, never repeat (tests/e2e/selftest-lockup.sh).
 */
static inline void sqcq_fault_poll_hog(void)
{
	unsigned int s = READ_ONCE(fault_poll_hog_s);
	u64 end;

	if (!s)
		return;
	WRITE_ONCE(fault_poll_hog_s, 0);
	end = ktime_get_ns() + (u64)s * NSEC_PER_SEC;
	preempt_disable();
	while (ktime_get_ns() < end)
		cpu_relax();
	preempt_enable();
}

/*
 * Guest submission: true once, for the fault_break_after-th command from
 * the moment it was set -- the caller then marks the device broken, as the
 * virtio core does for a device that returned a buffer it never got.
 */
static inline bool sqcq_fault_break_due(void)
{
	unsigned int left = READ_ONCE(fault_break_after);

	if (!left)
		return false;
	WRITE_ONCE(fault_break_after, left - 1);
	return left == 1;
}

/*
 * Host load with takeover=1, between the check for the in-tree vhost_scsi
 * and the registration of our node and fabric: wait up to
 * fault_takeover_wait_ms, so that the test can load the in-tree module
 * inside the window the check leaves open (tests/host/takeover-race.sh).
 * The test ends the wait early by writing 0 to the parameter (its file is
 * there while init runs); a signal to insmod ends it too.  Once.
 */
static inline void sqcq_fault_takeover_window(void)
{
	unsigned int ms = READ_ONCE(fault_takeover_wait_ms);
	unsigned long end;

	if (!ms)
		return;
	pr_info("fault: takeover window open (up to %u ms)\n", ms);
	end = jiffies + msecs_to_jiffies(ms);
	while (READ_ONCE(fault_takeover_wait_ms) &&
	       time_before(jiffies, end) && !signal_pending(current))
		msleep_interruptible(10);
	WRITE_ONCE(fault_takeover_wait_ms, 0);
	pr_info("fault: takeover window closed\n");
}

/*
 * Guest control queue: while fault_tmf_unanswered is set, the device is
 * not notified of a SCSI TMF (@is_scsi_tmf: ABORT TASK, LUN reset; not the
 * SQ/CQ requests) -- it stays on the ring, owned by the device and
 * unanswered, until the device is reset or the parameter is cleared (the
 * waiter's next periodic notification then reaches the device).
 */
static inline bool sqcq_fault_tmf_unanswered(bool is_scsi_tmf)
{
	return is_scsi_tmf && READ_ONCE(fault_tmf_unanswered);
}
#else
static inline bool sqcq_fault_setup_unanswered(bool is_setup)
{
	return false;
}

static inline void sqcq_fault_poll_hog(void)
{
}

static inline bool sqcq_fault_break_due(void)
{
	return false;
}

static inline void sqcq_fault_takeover_window(void)
{
}

static inline bool sqcq_fault_tmf_unanswered(bool is_scsi_tmf)
{
	return false;
}
#endif

#endif /* SQCQ_FAULTS_H */
