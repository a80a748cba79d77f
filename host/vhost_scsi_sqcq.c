// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost_scsi_sqcq: a self-contained vhost-scsi backend for the in-kernel
 * SCSI target (LIO) that can replace kicks and interrupts with SQ/CQ
 * doorbell polling (see DESIGN.md).
 *
 * Current state: module skeleton.  It registers the device node and the
 * module parameters with their validation; the vhost core, the TCM fabric
 * and the data path are not implemented yet, so every ioctl on the node
 * fails with -ENOTTY.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/seq_file.h>

#include "sqcq_compat.h"
#include "sqcq_param.h"
#include "sqcq_uapi.h"

#define SQCQ_HOST_NODE	"vhost-scsi-sqcq"

static bool sqcq = true;
module_param(sqcq, bool, 0644);
MODULE_PARM_DESC(sqcq,
	"Accept SQ/CQ setup requests from guests (default 1; runtime writes apply to the next setup request)");

module_param_cb(poll_cpu, &sqcq_poll_cpu_ops, NULL, 0644);
MODULE_PARM_DESC(poll_cpu,
	"CPU list the host poll threads are bound to, round-robin (default empty: unbound; all CPUs must be online; runtime writes apply at each poller's next idle/wake cycle)");

module_param_cb(poll_idle_us, &sqcq_poll_idle_ops, NULL, 0644);
MODULE_PARM_DESC(poll_idle_us,
	"Busy-poll time in microseconds without work before a poller sets NEED_WAKEUP and sleeps, 0..1000000 (default 1000; runtime writes apply at the next idle/wake cycle)");

static struct dentry *sqcq_debugfs;

static int sqcq_host_open(struct inode *inode, struct file *f)
{
	return nonseekable_open(inode, f);
}

static int sqcq_host_release(struct inode *inode, struct file *f)
{
	return 0;
}

/* No ioctl is implemented yet: everything is unknown. */
static long sqcq_host_ioctl(struct file *f, unsigned int cmd,
			    unsigned long arg)
{
	return -ENOTTY;
}

static const struct file_operations sqcq_host_fops = {
	.owner		= THIS_MODULE,
	.open		= sqcq_host_open,
	.release	= sqcq_host_release,
	.unlocked_ioctl	= sqcq_host_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static struct miscdevice sqcq_host_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= SQCQ_HOST_NODE,
	.fops	= &sqcq_host_fops,
};

static int sqcq_params_show(struct seq_file *m, void *v)
{
	seq_printf(m, "sqcq: %d\n", READ_ONCE(sqcq));
	sqcq_show_poll_params(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(sqcq_params);

static int __init sqcq_host_init(void)
{
	int ret;

	ret = misc_register(&sqcq_host_misc);
	if (ret) {
		pr_err("cannot register /dev/%s: %d\n", SQCQ_HOST_NODE, ret);
		return ret;
	}
	sqcq_debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("params", 0444, sqcq_debugfs, NULL,
			    &sqcq_params_fops);
	pr_info("version %s loaded, /dev/%s (skeleton: no data path yet)\n",
		SQCQ_PKG_VERSION, SQCQ_HOST_NODE);
	return 0;
}

static void __exit sqcq_host_exit(void)
{
	debugfs_remove_recursive(sqcq_debugfs);
	misc_deregister(&sqcq_host_misc);
	pr_info("unloaded\n");
}

module_init(sqcq_host_init);
module_exit(sqcq_host_exit);

MODULE_DESCRIPTION("vhost-scsi backend with SQ/CQ doorbell polling");
MODULE_AUTHOR("virtio-sqcq developers");
MODULE_LICENSE("GPL");
MODULE_VERSION(SQCQ_PKG_VERSION);
