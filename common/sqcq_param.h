/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Module parameters both modules share: the poll CPU list, the poller idle
 * timeout and whether the idle window adapts.  Each module defines the
 * state once (SQCQ_PARAM_DEFINE) and declares the parameters with the ops
 * defined there; every other file of the module sees declarations and the
 * inline helpers.
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
#include <linux/bitmap.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/debugfs.h>
#include <linux/err.h>
#include <linux/gfp.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <linux/sched/isolation.h>
#include <linux/seq_file.h>
#include <linux/spinlock.h>
#include <linux/string.h>

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

/*
 * The state, one definition per module (the file that defines
 * SQCQ_PARAM_DEFINE before including this header).
 */
/* Protects sqcq_poll_cpu_str and sqcq_poll_cpu_mask as a pair. */
extern spinlock_t sqcq_param_lock;
extern char sqcq_poll_cpu_str[SQCQ_POLL_CPU_MAXLEN];
extern struct cpumask sqcq_poll_cpu_mask;	/* empty: unbound */
extern unsigned int sqcq_poll_idle_us;
/* Whether the idle window adapts below poll_idle_us (sqcq_poll.h). */
extern bool sqcq_poll_adaptive;
/* Bumped by every accepted poll_cpu write and when a poll CPU comes online. */
extern atomic_t sqcq_poll_cpu_gen;

#ifdef SQCQ_PARAM_DEFINE
DEFINE_SPINLOCK(sqcq_param_lock);
char sqcq_poll_cpu_str[SQCQ_POLL_CPU_MAXLEN];
struct cpumask sqcq_poll_cpu_mask;
unsigned int sqcq_poll_idle_us = SQCQ_POLL_IDLE_US_DEFAULT;
bool sqcq_poll_adaptive = true;
atomic_t sqcq_poll_cpu_gen = ATOMIC_INIT(0);
static int sqcq_cpuhp_state;	/* dynamic hotplug state, 0: none */
/*
 * False while the module loads: the kernel hands the setters the command
 * line's values before the module's init runs (sqcq_param_init() sets it).
 */
static bool sqcq_param_live;

/*
 * A value given at load time that cannot be used.  These modules drive
 * root disks, so a load never fails over a parameter: the value is ignored
 * (or replaced, as the caller says) with one log line.  A runtime write is
 * refused with -EINVAL.
 */
static int sqcq_param_bad(const struct kernel_param *kp)
{
	if (READ_ONCE(sqcq_param_live))
		return -EINVAL;
	pr_warn("%s: ignored at load; the module keeps the value its parameters file shows\n",
		kp->name);
	return 0;
}

/*
 * Parse a cpulist (as in "0-3,8") into @mask, @clean receiving the list
 * with the blanks around it trimmed.  Empty or blank means unbound.
 *
 * At runtime every CPU named must exist and be online.  At load a CPU that
 * is offline or absent (a VM booted with fewer CPUs than its options were
 * written for) is accepted with one log line: an offline one stays in
 * @mask, its poller running unbound until it comes online
 * (sqcq_poll_cpu_online()); an absent one cannot be in a cpumask and is
 * left out.
 */
static int sqcq_parse_poll_cpu(const char *val, char *clean, size_t len,
			       struct cpumask *mask)
{
	bool live = READ_ONCE(sqcq_param_live);
	unsigned long *named, *missing;
	unsigned int cpu;
	int ret;

	if (strlen(val) >= len) {
		pr_err("poll_cpu: list longer than %zu characters\n", len - 1);
		return -EINVAL;
	}
	strscpy(clean, skip_spaces(val), len);
	strim(clean);

	cpumask_clear(mask);
	if (!clean[0])
		return 0;
	/* SQCQ_CPU_IDS bits: a CPU this boot lacks is still a number to accept. */
	named = bitmap_zalloc(SQCQ_CPU_IDS, GFP_KERNEL);
	missing = bitmap_zalloc(SQCQ_CPU_IDS, GFP_KERNEL);
	ret = -ENOMEM;
	if (!named || !missing)
		goto out;
	ret = bitmap_parselist(clean, named, SQCQ_CPU_IDS);
	if (ret == -ERANGE || (!ret && live &&
			       find_next_bit(named, SQCQ_CPU_IDS, nr_cpu_ids) < SQCQ_CPU_IDS)) {
		pr_err("poll_cpu: \"%s\" names a CPU that does not exist (possible CPUs: %*pbl)\n",
		       clean, cpumask_pr_args(cpu_possible_mask));
		ret = -EINVAL;
		goto out;
	}
	if (ret) {
		pr_err("poll_cpu: \"%s\" is not a valid CPU list (%d)\n",
		       clean, ret);
		ret = -EINVAL;
		goto out;
	}
	for_each_set_bit(cpu, named, SQCQ_CPU_IDS) {
		if (cpu < nr_cpu_ids && cpu_online(cpu)) {
			cpumask_set_cpu(cpu, mask);
			continue;
		}
		if (live) {
			pr_err("poll_cpu: CPU %u in \"%s\" is offline\n",
			       cpu, clean);
			ret = -EINVAL;
			goto out;
		}
		__set_bit(cpu, missing);
		if (cpu < nr_cpu_ids)
			cpumask_set_cpu(cpu, mask);
	}
	if (!bitmap_empty(missing, SQCQ_CPU_IDS))
		pr_warn("poll_cpu: CPU %*pbl of \"%s\" not online at load: their pollers run unbound until they come online\n",
			SQCQ_CPU_IDS, missing, clean);
out:
	bitmap_free(missing);
	bitmap_free(named);
	return ret;
}

static int sqcq_poll_cpu_set(const char *val, const struct kernel_param *kp)
{
	char clean[SQCQ_POLL_CPU_MAXLEN];
	cpumask_var_t mask;	/* 1 KiB with NR_CPUS=8192: not on the stack */
	int ret;

	if (!zalloc_cpumask_var(&mask, GFP_KERNEL))
		return -ENOMEM;
	ret = sqcq_parse_poll_cpu(val, clean, sizeof(clean), mask);
	if (!ret) {
		spin_lock(&sqcq_param_lock);
		strscpy(sqcq_poll_cpu_str, clean, sizeof(sqcq_poll_cpu_str));
		cpumask_copy(&sqcq_poll_cpu_mask, mask);
		spin_unlock(&sqcq_param_lock);
		atomic_inc(&sqcq_poll_cpu_gen);
	} else if (ret == -EINVAL) {
		ret = sqcq_param_bad(kp);	/* at load: stays unbound */
	}
	free_cpumask_var(mask);
	return ret;
}

static int sqcq_poll_cpu_get(char *buf, const struct kernel_param *kp)
{
	int n;

	spin_lock(&sqcq_param_lock);
	n = scnprintf(buf, PAGE_SIZE, "%s\n", sqcq_poll_cpu_str);
	spin_unlock(&sqcq_param_lock);
	return n;
}

static const struct kernel_param_ops sqcq_poll_cpu_ops = {
	.set = sqcq_poll_cpu_set,
	.get = sqcq_poll_cpu_get,
};

static int sqcq_poll_idle_set(const char *val, const struct kernel_param *kp)
{
	char shown[24];
	unsigned int v;

	if (kstrtouint(val, 0, &v) || v > SQCQ_POLL_IDLE_US_MAX) {
		strscpy(shown, val, sizeof(shown));
		pr_err("poll_idle_us: \"%s\" is not an integer 0..%u\n",
		       strim(shown), SQCQ_POLL_IDLE_US_MAX);
		return sqcq_param_bad(kp);	/* at load: the default stays */
	}
	/* Read by the pollers at each pass: nothing to rebind. */
	WRITE_ONCE(sqcq_poll_idle_us, v);
	return 0;
}

static int sqcq_poll_idle_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%u\n", READ_ONCE(sqcq_poll_idle_us));
}

static const struct kernel_param_ops sqcq_poll_idle_ops = {
	.set = sqcq_poll_idle_set,
	.get = sqcq_poll_idle_get,
};

/* A bool that never keeps the module from loading (sqcq_param_bad()). */
static int sqcq_param_bool_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (ret != -EINVAL)
		return ret;
	pr_err("%s: \"%s\" is not a boolean\n", kp->name, val ?: "");
	return sqcq_param_bad(kp);
}

static const struct kernel_param_ops sqcq_param_bool_ops = {
	.flags = KERNEL_PARAM_OPS_FL_NOARG,
	.set = sqcq_param_bool_set,
	.get = param_get_bool,
};

/* The parameters themselves, declared in the module that defines them. */
/* What an empty poll_cpu means differs between the modules. */
#ifndef SQCQ_POLL_CPU_EMPTY_DESC
#define SQCQ_POLL_CPU_EMPTY_DESC "unbound, on the kernel's housekeeping CPUs"
#endif
module_param_cb(poll_cpu, &sqcq_poll_cpu_ops, NULL, 0644);
MODULE_PARM_DESC(poll_cpu, "CPU list the poll threads are bound to, round-robin (default empty: "
		 SQCQ_POLL_CPU_EMPTY_DESC
		 "; at load an offline or absent CPU is accepted and its poller runs unbound until it comes online, a runtime write must name online CPUs; runtime writes apply at each poller's next pass, a sleeping one's when it wakes)");

module_param_cb(poll_idle_us, &sqcq_poll_idle_ops, NULL, 0644);
MODULE_PARM_DESC(poll_idle_us, "Busy-poll time in microseconds without work before a poller sets NEED_WAKEUP and sleeps, 0..1000000 (default 1000; runtime writes apply at each poller's next pass)");

module_param_cb(poll_adaptive, &sqcq_param_bool_ops, &sqcq_poll_adaptive, 0644);
MODULE_PARM_DESC(poll_adaptive, "Adapt each poller's idle window below poll_idle_us to the gaps between requests, as KVM halt polling does (default 1; 0: always spin poll_idle_us)");

/*
 * A CPU came online: pollers meant for it bind again at their next pass.
 * Every poller chooses again, not only those of poll_cpu: a host device's
 * own poll CPUs (a TPG's attrib/poll_cpu) may name it too.
 */
static int sqcq_poll_cpu_online(unsigned int cpu)
{
	atomic_inc(&sqcq_poll_cpu_gen);
	return 0;
}

/*
 * Module init: follow CPU hotplug for poll_cpu (cpuhp state @name), then
 * create the module's debugfs directory in *@dir with its "params" file
 * (@params_fops).  debugfs is optional (debugfs=off, kernels without it):
 * *@dir may then hold an error pointer, which debugfs calls take as "no
 * directory", and the module works without counters.  Returns 0, or the
 * error (logged) when hotplug cannot be followed; nothing is left set up
 * then.
 */
static inline int sqcq_param_init(const char *name,
				  const struct file_operations *params_fops,
				  struct dentry **dir)
{
	int ret;

	*dir = NULL;
	ret = cpuhp_setup_state_nocalls(CPUHP_AP_ONLINE_DYN, name,
					sqcq_poll_cpu_online, NULL);
	if (ret < 0) {
		pr_err("cannot follow CPU hotplug for poll_cpu: %d\n", ret);
		return ret;
	}
	sqcq_cpuhp_state = ret;
	WRITE_ONCE(sqcq_param_live, true);
	*dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	if (IS_ERR(*dir))
		pr_info("no debugfs (%ld): counters are not shown\n",
			PTR_ERR(*dir));
	debugfs_create_file("params", 0444, *dir, NULL, params_fops);
	return 0;
}

static inline void sqcq_param_exit(void)
{
	if (sqcq_cpuhp_state > 0)
		cpuhp_remove_state_nocalls(sqcq_cpuhp_state);
	sqcq_cpuhp_state = 0;
	WRITE_ONCE(sqcq_param_live, false);
}
#endif /* SQCQ_PARAM_DEFINE */

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

/* The effective poll settings, for the debugfs "params" file. */
static inline void sqcq_show_poll_params(struct seq_file *m)
{
	/* Printed under the lock: no copy of the mask on the stack. */
	spin_lock(&sqcq_param_lock);
	if (!cpumask_empty(&sqcq_poll_cpu_mask))
		seq_printf(m, "poll_cpu_effective: %*pbl\n",
			   cpumask_pr_args(&sqcq_poll_cpu_mask));
	else
		seq_puts(m, "poll_cpu_effective: unbound\n");
	spin_unlock(&sqcq_param_lock);
	seq_printf(m, "poll_idle_us_effective: %u\n", sqcq_poll_idle());
	seq_printf(m, "poll_adaptive: %d\n", READ_ONCE(sqcq_poll_adaptive));
	seq_printf(m, "poll_cpu_generation: %d\n",
		   atomic_read(&sqcq_poll_cpu_gen));
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
