// SPDX-License-Identifier: GPL-2.0-only
/*
 * The poll parameters both modules share (common/sqcq_param.h): their
 * state, the setters and getters sysfs and the module command line call,
 * the CPU hotplug callback that asks pollers to bind again, and the init
 * and exit steps each module's init and exit run.
 *
 * Linked into each module as an object of its own: host/sqcq_param.c and
 * guest/sqcq_param.c build this file, in the module's directory, so that
 * the parameters carry that module's name (KBUILD_MODNAME: vhost_scsi_sqcq.
 * or virtio_scsi_sqcq. in /sys/module and on the command line) and each
 * module has its own state.  Kbuild builds one object per directory and
 * module; a single common/sqcq_param.o could not belong to both.
 */
#include <linux/atomic.h>
#include <linux/bitmap.h>
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/debugfs.h>
#include <linux/err.h>
#include <linux/gfp.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>

#include "sqcq_param.h"

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
int sqcq_param_bad(const struct kernel_param *kp)
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
int sqcq_parse_poll_cpu(const char *val, char *clean, size_t len,
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

const struct kernel_param_ops sqcq_param_bool_ops = {
	.flags = KERNEL_PARAM_OPS_FL_NOARG,
	.set = sqcq_param_bool_set,
	.get = param_get_bool,
};

/* The parameters themselves.  What an empty poll_cpu means differs. */
#ifdef SQCQ_COMPAT_GUEST
#define SQCQ_POLL_CPU_EMPTY_DESC "no guest poll thread: the host still polls the SQs, completions come by interrupt, or to the waiting task on poll queues; a device probed while poll_cpu names CPUs gets a thread, which then follows poll_cpu"
#else
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
int sqcq_param_init(const char *name, const struct file_operations *params_fops,
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

void sqcq_param_exit(void)
{
	if (sqcq_cpuhp_state > 0)
		cpuhp_remove_state_nocalls(sqcq_cpuhp_state);
	sqcq_cpuhp_state = 0;
	WRITE_ONCE(sqcq_param_live, false);
}

/* The effective poll settings, for the debugfs "params" file. */
void sqcq_show_poll_params(struct seq_file *m)
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
