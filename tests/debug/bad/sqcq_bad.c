// SPDX-License-Identifier: GPL-2.0-only
/*
 * sqcq_bad: a module that misbehaves on request, to prove that the sanitizer
 * lane (tests/debug/) notices. Each parameter commits one kind of bug while
 * the module loads; without parameters it loads and unloads cleanly.
 *
 *   oob=1       write one byte past a kmalloc'ed buffer        (KASAN)
 *   leak=1      allocate buffers and drop every pointer     (kmemleak)
 *   sleep=1     take a mutex under a spinlock     (DEBUG_ATOMIC_SLEEP)
 *   lockdep=1   take two mutexes in both orders     (lockdep: circular)
 *   ubsan=1     index an array member past its end   (UBSAN: bounds)
 *   odebug=1    free a pending timer                (DEBUG_OBJECTS)
 *   rawnest=1   take a spinlock_t in a hard-irq hrtimer
 *                                   (PROVE_RAW_LOCK_NESTING: wait context)
 */
#include <linux/compiler.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/timer.h>

static bool oob;
module_param(oob, bool, 0444);
MODULE_PARM_DESC(oob, "write past the end of a kmalloc buffer");
static bool leak;
module_param(leak, bool, 0444);
MODULE_PARM_DESC(leak, "leak a kmalloc buffer");
static bool sleep;
module_param(sleep, bool, 0444);
MODULE_PARM_DESC(sleep, "take a mutex while holding a spinlock");
static bool lockdep;
module_param(lockdep, bool, 0444);
MODULE_PARM_DESC(lockdep, "take two mutexes in opposite orders");
static bool ubsan;
module_param(ubsan, bool, 0444);
MODULE_PARM_DESC(ubsan, "index an array past its end");
static bool odebug;
module_param(odebug, bool, 0444);
MODULE_PARM_DESC(odebug, "free a timer that is still pending");
static bool rawnest;
module_param(rawnest, bool, 0444);
MODULE_PARM_DESC(rawnest, "take a spinlock_t in a hard-irq hrtimer callback");

static DEFINE_SPINLOCK(bad_spin);
static DEFINE_MUTEX(bad_mutex_a);
static DEFINE_MUTEX(bad_mutex_b);

/* The array is followed by more of the struct: UBSAN's business, not KASAN's. */
static struct {
	int slot[4];
	int after;
} bad_table;

static noinline int bad_oob(void)
{
	size_t len = 32;
	char *buf;

	buf = kmalloc(len, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	/* Hide the length from the compiler: no warning, no folding. */
	OPTIMIZER_HIDE_VAR(len);
	WRITE_ONCE(buf[len], 1);
	kfree(buf);
	return 0;
}

/*
 * kmemleak misses an object while a stale copy of its address survives
 * somewhere it scans: a dead frame of this task's stack (kept in the
 * per-CPU stack cache after insmod exits) or a saved register. Every pass
 * below overwrites the previous pass's copies, so all the buffers but the
 * last are certainly unreferenced; one found is enough.
 */
#define BAD_LEAKS 8

static noinline int bad_leak(void)
{
	void *buf;
	int i;

	for (i = 0; i < BAD_LEAKS; i++) {
		buf = kmalloc(96, GFP_KERNEL);
		if (!buf)
			return -ENOMEM;
		OPTIMIZER_HIDE_VAR(buf);
	}
	pr_info("sqcq_bad: leaking %d buffers of 96 bytes\n", BAD_LEAKS);
	return 0;
}

static noinline void bad_sleep(void)
{
	spin_lock(&bad_spin);
	mutex_lock(&bad_mutex_a);
	mutex_unlock(&bad_mutex_a);
	spin_unlock(&bad_spin);
}

static noinline void bad_lockdep(void)
{
	mutex_lock(&bad_mutex_a);
	mutex_lock(&bad_mutex_b);
	mutex_unlock(&bad_mutex_b);
	mutex_unlock(&bad_mutex_a);

	mutex_lock(&bad_mutex_b);
	mutex_lock(&bad_mutex_a);
	mutex_unlock(&bad_mutex_a);
	mutex_unlock(&bad_mutex_b);
}

static noinline void bad_ubsan(void)
{
	int i = ARRAY_SIZE(bad_table.slot);

	OPTIMIZER_HIDE_VAR(i);
	/* A plain store: the address of slot[4] alone is valid C. */
	bad_table.slot[i] = 1;
}

static void bad_timer_fn(struct timer_list *t)
{
}

static noinline int bad_odebug(void)
{
	struct timer_list *t;

	t = kmalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		return -ENOMEM;
	timer_setup(t, bad_timer_fn, 0);
	mod_timer(t, jiffies + 3600 * HZ);
	/* DEBUG_OBJECTS reports this and deactivates the timer. */
	kfree(t);
	return 0;
}

/*
 * A hard-irq hrtimer's callback runs in hard interrupt context even on
 * PREEMPT_RT, where a spinlock_t sleeps: the guest watchdog's old bug.
 */
static struct hrtimer bad_hrtimer;
static bool bad_hrtimer_ran;

static enum hrtimer_restart bad_hrtimer_fn(struct hrtimer *t)
{
	spin_lock(&bad_spin);
	spin_unlock(&bad_spin);
	WRITE_ONCE(bad_hrtimer_ran, true);
	return HRTIMER_NORESTART;
}

static noinline void bad_rawnest(void)
{
	int i;

	hrtimer_init(&bad_hrtimer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	bad_hrtimer.function = bad_hrtimer_fn;
	hrtimer_start(&bad_hrtimer, ms_to_ktime(1), HRTIMER_MODE_REL_HARD);
	for (i = 0; i < 100 && !READ_ONCE(bad_hrtimer_ran); i++)
		msleep(10);
	hrtimer_cancel(&bad_hrtimer);
}

static int __init sqcq_bad_init(void)
{
	int ret = 0;

	/* lockdep first: any other report switches it off. */
	if (lockdep)
		bad_lockdep();
	if (rawnest)
		bad_rawnest();
	if (sleep)
		bad_sleep();
	if (ubsan)
		bad_ubsan();
	if (odebug)
		ret = ret ?: bad_odebug();
	if (leak)
		ret = ret ?: bad_leak();
	if (oob)
		ret = ret ?: bad_oob();
	return ret;
}

static void __exit sqcq_bad_exit(void)
{
}

module_init(sqcq_bad_init);
module_exit(sqcq_bad_exit);
MODULE_DESCRIPTION("Deliberate kernel bugs for the sanitizer lane's self-test");
MODULE_LICENSE("GPL");
