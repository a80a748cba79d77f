// SPDX-License-Identifier: GPL-2.0-only
/*
 * virtio_scsi_sqcq: a virtio-scsi driver with dedicated poll queues and
 * SQ/CQ doorbell polling (see DESIGN.md).
 *
 * Current state: module skeleton.  It exposes the module parameters with
 * their validation; it does not register a virtio driver yet, so loading it
 * binds no device.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/module.h>
#include <linux/seq_file.h>

#include "sqcq_compat.h"
#include "sqcq_param.h"
#include "sqcq_uapi.h"

/* Upper bound on poll queues; the device's queue count caps it further. */
#define SQCQ_MAX_POLL_QUEUES	256

static bool sqcq = true;
module_param(sqcq, bool, 0644);
MODULE_PARM_DESC(sqcq,
	"Request SQ/CQ doorbell polling from devices at probe (default 1; runtime writes apply to devices probed later)");

module_param_cb(poll_cpu, &sqcq_poll_cpu_ops, NULL, 0644);
MODULE_PARM_DESC(poll_cpu,
	"CPU list the guest poll threads are bound to, round-robin (default empty: unbound; all CPUs must be online; runtime writes apply at each poller's next idle/wake cycle)");

module_param_cb(poll_idle_us, &sqcq_poll_idle_ops, NULL, 0644);
MODULE_PARM_DESC(poll_idle_us,
	"Busy-poll time in microseconds without completions before a poller sets NEED_WAKEUP and sleeps, 0..1000000 (default 1000; runtime writes apply at the next idle/wake cycle)");

static unsigned int poll_queues;

static int sqcq_poll_queues_set(const char *val, const struct kernel_param *kp)
{
	unsigned int v;

	if (kstrtouint(val, 0, &v) || v > SQCQ_MAX_POLL_QUEUES) {
		pr_err("%s: not an integer 0..%u\n", kp->name,
		       SQCQ_MAX_POLL_QUEUES);
		return -EINVAL;
	}
	if (v && !SQCQ_POLL_QUEUES_SUPPORTED)
		pr_warn("%s=%u: poll queues are unavailable on this kernel (no SCSI mq_poll); all queues use interrupts\n",
			kp->name, v);
	WRITE_ONCE(poll_queues, v);
	return 0;
}

static int sqcq_poll_queues_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%u\n", READ_ONCE(poll_queues));
}

static const struct kernel_param_ops sqcq_poll_queues_ops = {
	.set = sqcq_poll_queues_set,
	.get = sqcq_poll_queues_get,
};

module_param_cb(poll_queues, &sqcq_poll_queues_ops, NULL, 0644);
MODULE_PARM_DESC(poll_queues,
	"Dedicated interrupt-less poll queues per device, as upstream virtscsi_poll_queues; at least one interrupt queue always stays (default 0; applies to devices probed later)");
/* Upstream virtio_scsi's name for the same setting. */
module_param_cb(virtscsi_poll_queues, &sqcq_poll_queues_ops, NULL, 0644);
MODULE_PARM_DESC(virtscsi_poll_queues, "Alias of poll_queues");

static struct dentry *sqcq_debugfs;

static int sqcq_params_show(struct seq_file *m, void *v)
{
	seq_printf(m, "sqcq: %d\n", READ_ONCE(sqcq));
	sqcq_show_poll_params(m);
	seq_printf(m, "poll_queues: %u\n", READ_ONCE(poll_queues));
	seq_printf(m, "poll_queues_supported: %d\n",
		   SQCQ_POLL_QUEUES_SUPPORTED);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(sqcq_params);

static int __init sqcq_guest_init(void)
{
	sqcq_debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("params", 0444, sqcq_debugfs, NULL,
			    &sqcq_params_fops);
	pr_info("version %s loaded (skeleton: no virtio driver registered yet)\n",
		SQCQ_PKG_VERSION);
	return 0;
}

static void __exit sqcq_guest_exit(void)
{
	debugfs_remove_recursive(sqcq_debugfs);
	pr_info("unloaded\n");
}

module_init(sqcq_guest_init);
module_exit(sqcq_guest_exit);

MODULE_DESCRIPTION("virtio-scsi driver with poll queues and SQ/CQ doorbell polling");
MODULE_AUTHOR("virtio-sqcq developers");
MODULE_LICENSE("GPL");
MODULE_VERSION(SQCQ_PKG_VERSION);
