/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Module parameters both modules share: the poll CPU list, the poller idle
 * timeout and whether the idle window adapts: the state and the steps
 * each module's init and exit run, defined in common/sqcq_param.c (linked
 * into each module), and the inline helpers the pollers use.
 *
 * Writes arrive through sysfs (or the module command line) with the module's
 * parameter lock held, so setters never race each other.  Pollers read the
 * values through the snapshot helpers, which take sqcq_param_lock.  They
 * read poll_idle_us on every pass, and look at sqcq_poll_cpu_gen to notice
 * that they must bind again: a poll_cpu write, or a CPU of poll_cpu coming
 * back online.
 */
#ifndef SQCQ_PARAM_H
#define SQCQ_PARAM_H

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/debugfs.h>
#include <linux/gfp.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <linux/sched/isolation.h>
#include <linux/sched/stat.h>
#include <linux/seq_file.h>
#include <linux/spinlock.h>
#include <linux/timekeeping.h>

#include "sqcq_poll.h"

/*
 * Every CPU number a kernel of this build can have (CONFIG_NR_CPUS): a
 * poll_cpu given at load may name one this boot lacks (a VM started with
 * fewer vCPUs than its options were written for), which must not refuse
 * the module (sqcq_parse_poll_cpu()).
 */
#define SQCQ_CPU_IDS			CONFIG_NR_CPUS
/* Longest cpulist string accepted, and the idle timeout's range. */
#define SQCQ_POLL_CPU_MAXLEN		256
#define SQCQ_POLL_IDLE_US_DEFAULT	1000
#define SQCQ_POLL_IDLE_US_MAX		1000000

/* The state, one per module (common/sqcq_param.c). */
/* Protects sqcq_poll_cpu_str and sqcq_poll_cpu_mask as a pair. */
extern spinlock_t sqcq_param_lock;
extern char sqcq_poll_cpu_str[SQCQ_POLL_CPU_MAXLEN];
extern struct cpumask sqcq_poll_cpu_mask;	/* empty: unbound */
extern unsigned int sqcq_poll_idle_us;
/* Whether the idle window adapts below poll_idle_us (sqcq_poll.h). */
extern bool sqcq_poll_adaptive;
/* Bumped by every accepted poll_cpu write and when a poll CPU comes online. */
extern atomic_t sqcq_poll_cpu_gen;

/*
 * Module init: follow CPU hotplug for poll_cpu (cpuhp state @name), then
 * create the module's debugfs directory in *@dir with its "params" file
 * (@params_fops).  Returns 0, or the error (logged) with nothing left set
 * up.  debugfs is optional: *@dir may hold an error pointer.
 */
int sqcq_param_init(const char *name, const struct file_operations *params_fops,
		    struct dentry **dir);
/* Module exit, and an init that fails after sqcq_param_init(). */
void sqcq_param_exit(void);
/* The effective poll settings, for the debugfs "params" file. */
void sqcq_show_poll_params(struct seq_file *m);
/*
 * A parameter value that cannot be used: -EINVAL at runtime, ignored with
 * one log line at load (a load never fails over a parameter).
 */
int sqcq_param_bad(const struct kernel_param *kp);
/* A bool parameter that never keeps the module from loading. */
extern const struct kernel_param_ops sqcq_param_bool_ops;
/*
 * Parse a cpulist as poll_cpu takes it into @mask, the trimmed list into
 * @clean (@len bytes); 0 or -EINVAL (logged) or -ENOMEM.
 */
int sqcq_parse_poll_cpu(const char *val, char *clean, size_t len,
			struct cpumask *mask);

/* Copy the poll CPU mask; returns false when pollers are unbound. */
static inline bool sqcq_poll_cpus(struct cpumask *out)
{
	spin_lock(&sqcq_param_lock);
	cpumask_copy(out, &sqcq_poll_cpu_mask);
	spin_unlock(&sqcq_param_lock);
	return !cpumask_empty(out);
}

static inline unsigned int sqcq_poll_idle(void)
{
	return READ_ONCE(sqcq_poll_idle_us);
}

/* The most a poller spins without work, in ns (poll_idle_us). */
static inline u64 sqcq_poll_ceil_ns(void)
{
	return (u64)sqcq_poll_idle() * NSEC_PER_USEC;
}

/*
 * A poller's idle window after an idle period of @idle_ns: adaptive below
 * the ceiling (sqcq_poll_window_next()), or the ceiling itself with
 * poll_adaptive=0.
 */
static inline u64 sqcq_poll_window_update(u64 cur_ns, u64 idle_ns)
{
	u64 ceil = sqcq_poll_ceil_ns();

	if (!READ_ONCE(sqcq_poll_adaptive))
		return ceil;
	return sqcq_poll_window_next(cur_ns, idle_ns, ceil);
}

/*
 * A poller found work at @now, the previous work was at *@last: adapt
 * *@window_ns to the gap (written for debugfs readers) and move *@last.
 */
static inline void sqcq_poll_work_at(u64 *window_ns, u64 *last, u64 now)
{
	WRITE_ONCE(*window_ns, sqcq_poll_window_update(*window_ns, now - *last));
	*last = now;
}

/*
 * A poller's yield (SQCQ_POLL_YIELD): let the task that wants this CPU run
 * now, through the scheduler's own preemption point when it asked, else by
 * yielding to the runnable task (often the kworker the target core has
 * just queued on this CPU, which would otherwise wait for the next tick).
 */
static inline void sqcq_poll_give_cpu(void)
{
	if (need_resched())
		cond_resched();
	else
		yield();
}

/*
 * The end of a poll pass that does not sleep (lock dropped): yield the CPU
 * after SQCQ_POLL_YIELD, relax it after a pass without work, and pass
 * through RCU's quiescent state on kernels without preemption.
 */
static inline void sqcq_poll_pass_end(enum sqcq_poll_step step, bool work)
{
	if (step == SQCQ_POLL_YIELD)
		sqcq_poll_give_cpu();
	else if (!work)
		cpu_relax();
	/*
	 * A poller alone on its CPU never switches, so cond_resched() alone
	 * would leave RCU-Tasks (ftrace, BPF and optprobe trampolines)
	 * waiting for it as long as it spins: report the quiescent state.
	 */
	cond_resched_tasks_rcu_qs();
}

/* A new poller's window: where adapting starts, or the fixed ceiling. */
static inline u64 sqcq_poll_window_start(void)
{
	u64 ceil = sqcq_poll_ceil_ns();

	if (!READ_ONCE(sqcq_poll_adaptive))
		return ceil;
	return min_t(u64, SQCQ_POLL_WINDOW_MIN_NS, ceil);
}

/* The window to spin for now: never above the current ceiling. */
static inline u64 sqcq_poll_window(u64 cur_ns)
{
	u64 ceil = sqcq_poll_ceil_ns();

	if (!READ_ONCE(sqcq_poll_adaptive))
		return ceil;
	return min(cur_ns, ceil);
}

/*
 * The end of every poller's pass (host and guest alike): a pass that found
 * @work adapts *@window_ns to the gap since *@last and moves *@last to now
 * (sqcq_poll_work_at()); then sqcq_poll_decide() answers from that, from
 * whether another task wants this CPU, whether the previous pass yielded
 * (@yielded), @stolen, and whether the idle window is over.  *@why is set
 * when the answer is SQCQ_POLL_SLEEP.
 */
static inline enum sqcq_poll_step
sqcq_poll_next(u64 *window_ns, u64 *last, bool work, bool yielded,
	       bool stolen, enum sqcq_sleep_reason *why)
{
	u64 now = ktime_get_ns();

	if (work)
		sqcq_poll_work_at(window_ns, last, now);
	return sqcq_poll_decide(work, need_resched() || !single_task_running(),
				yielded, stolen,
				now - *last >= sqcq_poll_window(*window_ns),
				why);
}

/* The @k-th CPU of @mask, modulo its weight; nr_cpu_ids when it is empty. */
static inline unsigned int sqcq_cpumask_nth(const struct cpumask *mask,
					    unsigned int k)
{
	unsigned int cpu, w = cpumask_weight(mask);

	if (!w)
		return nr_cpu_ids;
	k %= w;
	for_each_cpu(cpu, mask)
		if (!k--)
			break;
	return cpu;
}

/*
 * The @k-th CPU of poll_cpu, modulo its weight: nr_cpu_ids when poll_cpu
 * is empty, -ENOMEM when no mask can be allocated.
 */
static inline int sqcq_poll_pick_cpu(unsigned int k)
{
	unsigned int cpu = nr_cpu_ids;
	cpumask_var_t mask;

	if (!zalloc_cpumask_var(&mask, GFP_KERNEL))
		return -ENOMEM;
	if (sqcq_poll_cpus(mask))
		cpu = sqcq_cpumask_nth(mask, k);
	free_cpumask_var(mask);
	return cpu;
}

/*
 * Bind the calling poll thread to @cpu (from a pick above: a CPU, or
 * nr_cpu_ids for none), or to @unbound.  Returns the CPU it is bound to,
 * -ENOENT when there is none, -EAGAIN when @cpu is offline (then it runs
 * on @unbound until that CPU comes back: sqcq_poll_cpu_online() asks for a
 * new bind), or -EBUSY when @cpu is coming online: CPU hotplug runs
 * sqcq_poll_cpu_online() before the scheduler makes the CPU active, and a
 * thread that is not a kthread (a vhost_task worker) cannot be bound to it
 * until then.  The caller tries again at its next pass after -EBUSY
 * (sqcq_poll_bind_again()); no later event would ask it to.
 */
static inline int sqcq_poll_bind_current_to(unsigned int cpu,
					    const struct cpumask *unbound)
{
	int ret = -ENOENT;

	if (cpu < nr_cpu_ids) {
		if (!set_cpus_allowed_ptr(current, cpumask_of(cpu)))
			return cpu;
		ret = cpu_online(cpu) ? -EBUSY : -EAGAIN;
	}
	set_cpus_allowed_ptr(current, unbound);
	return ret;
}

/*
 * A poller's generation of poll_cpu after a bind that returned @ret for
 * generation @gen: @gen, or one that differs from it (the next pass binds
 * again) when the CPU was still coming online.
 */
static inline int sqcq_poll_bind_again(int ret, int gen)
{
	return ret == -EBUSY ? gen - 1 : gen;
}

/* The same for the @k-th CPU of poll_cpu (sqcq_poll_pick_cpu()). */
static inline int sqcq_poll_bind_current_or(unsigned int k,
					    const struct cpumask *unbound)
{
	int cpu = sqcq_poll_pick_cpu(k);

	if (cpu < 0)
		return cpu;
	return sqcq_poll_bind_current_to(cpu, unbound);
}

/*
 * The same for a kthread: unbound means the CPUs the kernel keeps for
 * unbound kthreads (isolcpus= and nohz_full= CPUs stay untouched).
 */
static inline int sqcq_poll_bind_current(unsigned int k)
{
	return sqcq_poll_bind_current_or(k,
					 housekeeping_cpumask(HK_TYPE_KTHREAD));
}

#endif /* SQCQ_PARAM_H */
