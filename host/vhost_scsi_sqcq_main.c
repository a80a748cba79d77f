// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost_scsi_sqcq: a self-contained vhost-scsi backend for the in-kernel
 * SCSI target (LIO) that can replace kicks and interrupts with SQ/CQ
 * doorbell polling (docs/protocol.md).
 *
 * This file is the module's front door: init and exit, the module
 * parameters, the misc device /dev/vhost-scsi-sqcq (or /dev/vhost-scsi with
 * takeover=1), debugfs, the vhost-scsi ioctls and the virtio-scsi queue
 * dispatch.  SQ/CQ setup and teardown requests arrive on the control queue
 * and are answered here (vhost_scsi_ctrl_sqcq()).
 *
 * The module is this translation unit, which includes its other parts at
 * the end, the way kernel/sched/build_policy.c builds several scheduler
 * files as one, linked with the shared poll parameters (host/sqcq_param.c,
 * common/sqcq_param.c):
 *
 *   host/vhost_core.c   the generic vhost part: ownership, memory table,
 *                       split rings, eventfds, the worker
 *   host/vhost_log.c    dirty logging for live migration
 *   host/vhost_sqcq.c   the SQ/CQ doorbell area: mapping, the poll loop
 *   host/sqcq_tcm.c     the TCM fabric and the SCSI data path
 *
 * Why not a separate core module, as vhost.ko is for the in-tree drivers:
 * this core serves one device type, so exporting its API would only add a
 * second module that every user, package and test must load in order, and
 * a symbol namespace to keep stable; as one unit the parts keep their
 * interfaces in host/sqcq_scsi.h and host/sqcq_vhost.h, and the compiler
 * sees the whole module.
 */
#include <linux/atomic.h>
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vhost.h>
#include <linux/virtio_scsi.h>

#include <linux/namei.h>

#include "sqcq_faults.h"
#include "sqcq_param.h"
#include "sqcq_scsi.h"
#include "sqcq_uapi.h"
#include "sqcq_vhost.h"
/* The tracepoints' one definition (host/sqcq_host_trace.h). */
#define CREATE_TRACE_POINTS
#include "sqcq_host_trace.h"

static bool sqcq = true;
module_param(sqcq, bool, 0644);
MODULE_PARM_DESC(sqcq, "Accept SQ/CQ setup requests from guests (default 1; runtime writes apply to the next setup request)");

static bool takeover;
module_param(takeover, bool, 0444);
MODULE_PARM_DESC(takeover, "Register as fabric \"vhost\" and /dev/vhost-scsi, the names of the in-tree vhost_scsi, for targetcli/libvirt (load time only; refused while vhost_scsi is loaded; default 0: fabric \"vhost_sqcq\", /dev/vhost-scsi-sqcq)");

/* 10 lines a minute for the whole module; see sqcq_vhost.h. */
DEFINE_RATELIMIT_STATE(vhost_lifecycle_rs, 60 * HZ, 30);

static struct dentry *vhost_scsi_debugfs;
static atomic_t vhost_scsi_dev_ids = ATOMIC_INIT(0);

/* ---- virtio-scsi queue handlers (worker, vq->mutex held) ---- */

/* A request too short for its type: say so once in a while. */
static u32 vhost_scsi_bad_request(struct vhost_vq *vq, struct vhost_req *req,
				  const char *what)
{
	u8 resp = VIRTIO_SCSI_S_FAILURE;

	pr_warn_ratelimited("owner %d vq %u: malformed %s request (out %zu, in %zu bytes)\n",
			    vq->dev->owner_pid, vq->index, what, req->out_len,
			    req->in_len);
	return vhc_req_copy_to(req, 0, &resp, req->in_len ? 1 : 0);
}

/* Request queues running from the first one on, without a gap. */
static unsigned int vhost_scsi_running_req_vqs(struct vhost_dev *vdev)
{
	unsigned int n = 0;

	while (SQCQ_FIRST_REQ_VQ + n < vdev->nvqs &&
	       READ_ONCE(vdev->vqs[SQCQ_FIRST_REQ_VQ + n].running))
		n++;
	return n;
}

/*
 * SQ/CQ setup or teardown (docs/protocol.md section 3), in the worker of
 * the control queue with its vq->mutex held; poll_lock held too when that
 * is the default worker (the poll thread).  Fills @in and returns the
 * bytes to write.
 */
static unsigned int vhost_scsi_ctrl_sqcq(struct vhost_vq *vq, struct vhost_req *req,
					 u32 subtype, struct sqcq_setup_in *in)
{
	struct vhost_dev *vdev = vq->dev;
	struct vhost_scsi *s = vdev->priv;
	struct {
		struct sqcq_tmf_req tmf;
		struct sqcq_setup_req setup;
	} rq;
	enum sqcq_status st;
	unsigned int nq = 0;
	u32 flags = 0;

	lockdep_assert_held(&vq->mutex);
	in->response = VIRTIO_SCSI_S_FUNCTION_REJECTED;
	in->resp.magic = cpu_to_le32(SQCQ_MAGIC);
	in->resp.version = cpu_to_le16(SQCQ_VERSION);
	in->resp.poll_idle_us = cpu_to_le32(sqcq_poll_idle());

	/*
	 * The control queue on a worker of its own (VHOST_ATTACH_VRING_WORKER):
	 * no poll_lock here, and no doorbells either -- they exist only while
	 * the control queue is on the poll thread, and it cannot move back
	 * while we hold its mutex.  Request queues may be anywhere: the poll
	 * thread watches their doorbells and wakes their workers
	 * (docs/host-vhost-core.md, "SQ/CQ and workers").
	 */
	if (!vhc_vq_on_poller(vq)) {
		st = subtype == SQCQ_TMF_SUBTYPE_TEARDOWN ? SQCQ_S_NOT_SETUP :
		     SQCQ_S_NO_RESOURCES;
		goto out;
	}
	lockdep_assert_held(&vdev->poll_lock);
	if (subtype == SQCQ_TMF_SUBTYPE_TEARDOWN) {
		st = __vhost_sqcq_detach(vdev, "guest request") ?
		     SQCQ_S_OK : SQCQ_S_NOT_SETUP;
		goto out;
	}
	if (vhc_req_copy_from(req, &rq, sizeof(rq)) != sizeof(rq)) {
		st = SQCQ_S_BAD_REQUEST;
		goto out;
	}
	if (!READ_ONCE(sqcq)) {
		st = SQCQ_S_DISABLED;
		goto out;
	}
	st = sqcq_check_setup_req(&rq.setup, vhost_scsi_running_req_vqs(vdev));
	if (st != SQCQ_S_OK)
		goto out;
	/*
	 * Repeated setup, I/O in flight, or no endpoint: CLEAR_ENDPOINT
	 * (like a ring stop) clears ep_set before it detaches, so a setup
	 * served after that detach must not attach again.  ep_set is stable
	 * here: handle_vq holds ep_rwsem for reading.
	 */
	if (vdev->db || atomic_read(&s->inflight) || !s->ep_set) {
		st = SQCQ_S_BUSY;
		goto out;
	}
	nq = le16_to_cpu(rq.setup.nqueues);
	flags = le32_to_cpu(rq.setup.flags);
	st = __vhost_sqcq_attach(vdev, vq->umem,
				 le64_to_cpu(rq.setup.area_gpa),
				 le32_to_cpu(rq.setup.area_len),
				 SQCQ_FIRST_REQ_VQ, nq, flags);
	if (st != SQCQ_S_OK)
		goto out;
	st = sqcq_check_area_hdr(&vdev->db->area->hdr, &rq.setup);
	if (st != SQCQ_S_OK) {
		__vhost_sqcq_detach(vdev, "bad area header");
		goto out;
	}
	in->response = VIRTIO_SCSI_S_FUNCTION_SUCCEEDED;
	trace_sqcq_setup(s->id, vdev->owner_pid, nq, flags);
	in->resp.nqueues = cpu_to_le16(nq);
	in->resp.nthreads = cpu_to_le16(1);
	in->resp.flags = cpu_to_le32(flags);
	vhost_dev_log(vdev, KERN_INFO, "dev%d: SQ/CQ negotiated: %u queues, 1 poll thread, %s%s, poll_idle_us %u (guest %u)\n",
		      s->id, nq, flags & SQCQ_F_SQ_POLL ? "SQ polled" : "SQ kicked",
		      flags & SQCQ_F_CQ_POLL ? ", CQ polled" : ", CQ interrupts",
		      sqcq_poll_idle(), le32_to_cpu(rq.setup.poll_idle_us));
out:
	if (st != SQCQ_S_OK && subtype == SQCQ_TMF_SUBTYPE_SETUP) {
		vhost_dev_log(vdev, KERN_INFO, "dev%d: SQ/CQ refused: %s\n",
			      s->id, sqcq_status_str(st));
		trace_sqcq_classic(s->id, vdev->owner_pid, st,
				   sqcq_status_str(st));
	} else if (subtype == SQCQ_TMF_SUBTYPE_TEARDOWN && st == SQCQ_S_OK) {
		in->response = VIRTIO_SCSI_S_FUNCTION_SUCCEEDED;
	}
	in->resp.status = cpu_to_le16(st);
	return sizeof(*in);
}

static u32 vhost_scsi_ctrl_tmf(struct vhost_vq *vq, struct vhost_req *req)
{
	struct virtio_scsi_ctrl_tmf_req tmf;
	struct sqcq_setup_in in = {};
	u32 subtype;

	if (req->in_len < sizeof(struct virtio_scsi_ctrl_tmf_resp) ||
	    vhc_req_copy_from(req, &tmf, sizeof(tmf)) != sizeof(tmf))
		return vhost_scsi_bad_request(vq, req, "TMF");
	subtype = le32_to_cpu((__force __le32)tmf.subtype);
	if (subtype != SQCQ_TMF_SUBTYPE_SETUP &&
	    subtype != SQCQ_TMF_SUBTYPE_TEARDOWN)
		return vhost_scsi_tmf_one(vq, req, &tmf);
	/* The answer needs the response byte and the setup response. */
	if (req->in_len < offsetof(struct sqcq_setup_in, pad)) {
		struct virtio_scsi_ctrl_tmf_resp resp = {
			.response = VIRTIO_SCSI_S_FUNCTION_REJECTED,
		};

		pr_warn_ratelimited("owner %d: SQ/CQ request with a %zu-byte answer buffer, rejected\n",
				    vq->dev->owner_pid, req->in_len);
		return vhc_req_copy_to(req, 0, &resp, sizeof(resp));
	}
	return vhc_req_copy_to(req, 0, &in,
				min_t(size_t, req->in_len,
				      vhost_scsi_ctrl_sqcq(vq, req, subtype, &in)));
}

static u32 vhost_scsi_ctrl_an(struct vhost_vq *vq, struct vhost_req *req)
{
	struct virtio_scsi_ctrl_an_resp resp = {};
	struct virtio_scsi_ctrl_an_req an;

	if (req->in_len < sizeof(resp) ||
	    vhc_req_copy_from(req, &an, sizeof(an)) != sizeof(an))
		return vhost_scsi_bad_request(vq, req, "AN");
	/* No asynchronous events are supported: none granted. */
	resp.event_actual = 0;
	resp.response = VIRTIO_SCSI_S_OK;
	return vhc_req_copy_to(req, 0, &resp, sizeof(resp));
}

static u32 vhost_scsi_ctrl_one(struct vhost_vq *vq, struct vhost_req *req)
{
	__le32 type;

	if (vhc_req_copy_from(req, &type, sizeof(type)) != sizeof(type))
		return vhost_scsi_bad_request(vq, req, "control");
	switch (le32_to_cpu(type)) {
	case VIRTIO_SCSI_T_TMF:
		return vhost_scsi_ctrl_tmf(vq, req);
	case VIRTIO_SCSI_T_AN_QUERY:
	case VIRTIO_SCSI_T_AN_SUBSCRIBE:
		return vhost_scsi_ctrl_an(vq, req);
	default:
		return vhost_scsi_bad_request(vq, req, "unknown control");
	}
}

static void vhost_scsi_handle_vq(struct vhost_vq *vq)
{
	struct vhost_scsi *s = vq->dev->priv;

	lockdep_assert_held(&vq->mutex);
	if (vq->index == SQCQ_EVT_VQ) {
		vhost_scsi_handle_evt(vq);
		return;
	}
	/* The target table stays as it is for the whole batch. */
	down_read(&s->ep_rwsem);
	/* Paused: left in the ring for SET_ENDPOINT, which queues us. */
	if (!s->ep_paused)
		vhc_vq_serve_sync(vq, vq->index == SQCQ_CTRL_VQ ?
				    vhost_scsi_ctrl_one : vhost_scsi_cmd_one);
	up_read(&s->ep_rwsem);
}

static void vhost_scsi_reset(struct vhost_dev *vdev)
{
	/* Rings are stopped; the worker still runs to finish requests. */
	vhost_scsi_drop_endpoint(vdev->priv);
}

static const struct vhost_dev_ops vhost_scsi_dev_ops = {
	.features	= BIT_ULL(VIRTIO_SCSI_F_HOTPLUG),
	.complete_vq	= vhost_scsi_complete_vq,
	.handle_vq	= vhost_scsi_handle_vq,
	.reset		= vhost_scsi_reset,
	.sqcq		= &vhost_sqcq_ops,
};

/* ---- vhost-scsi ioctls ---- */

/*
 * Validate a vhost_scsi_target.  QEMU zeroes the structure and fills in
 * only the WWPN, so abi_version 0 is accepted besides the current one.
 */
static int vhost_scsi_get_target(void __user *argp, struct vhost_scsi_target *t)
{
	if (copy_from_user(t, argp, sizeof(*t)))
		return -EFAULT;
	if (t->reserved)
		return -EOPNOTSUPP;
	if (t->abi_version != 0 && t->abi_version != VHOST_SCSI_ABI_VERSION)
		return -EINVAL;
	if (strnlen(t->vhost_wwpn, sizeof(t->vhost_wwpn)) ==
	    sizeof(t->vhost_wwpn))
		return -EINVAL;
	return 0;
}

static long vhost_scsi_dev_ioctl(struct vhost_scsi *s, unsigned int cmd,
				 void __user *argp)
{
	struct vhost_dev *vdev = &s->vdev;
	struct vhost_scsi_target t;
	u32 events_missed;
	long ret;

	mutex_lock(&vdev->mutex);
	ret = vhc_dev_check_owner(vdev);
	if (cmd == VHOST_SCSI_GET_ABI_VERSION && ret && !vdev->mm)
		ret = 0;	/* a constant: answered before SET_OWNER too */
	if (ret)
		goto out;

	switch (cmd) {
	case VHOST_SCSI_GET_ABI_VERSION:
		if (put_user(VHOST_SCSI_ABI_VERSION, (int __user *)argp))
			ret = -EFAULT;
		break;
	case VHOST_SCSI_SET_ENDPOINT:
		ret = vhost_scsi_get_target(argp, &t);
		if (!ret)
			ret = vhost_scsi_set_endpoint(s, &t);
		break;
	case VHOST_SCSI_CLEAR_ENDPOINT:
		ret = vhost_scsi_get_target(argp, &t);
		if (ret)
			break;
		/* Ends SQ/CQ too (QEMU's stop), see vhost_scsi_clear_endpoint(). */
		ret = vhost_scsi_clear_endpoint(s, &t);
		break;
	case VHOST_SCSI_SET_EVENTS_MISSED:
		if (get_user(events_missed, (u32 __user *)argp))
			ret = -EFAULT;
		else
			vhost_scsi_set_events_missed(s, events_missed);
		break;
	case VHOST_SCSI_GET_EVENTS_MISSED:
		if (put_user((u32)vhost_scsi_get_events_missed(s),
			     (u32 __user *)argp))
			ret = -EFAULT;
		break;
	default:
		ret = -ENOTTY;
		break;
	}
out:
	mutex_unlock(&vdev->mutex);
	return ret;
}

/* ---- debugfs: per-device, per-queue counters ---- */

static int vhost_scsi_queues_show(struct seq_file *m, void *v)
{
	struct vhost_scsi *s = m->private;
	unsigned int i;

	seq_printf(m, "owner: %d\nfeatures: 0x%llx\nmode: %s\npoll_sleeps: %llu\npoll_wakeups: %llu\n",
		   READ_ONCE(s->vdev.owner_pid), READ_ONCE(s->vdev.features),
		   READ_ONCE(s->vdev.db) ? "sqcq" : "classic",
		   READ_ONCE(s->vdev.stat_sleeps),
		   READ_ONCE(s->vdev.stat_wakeups));
	seq_printf(m, "poll_sleeps_idle: %llu\npoll_sleeps_contended: %llu\npoll_yields: %llu\npoll_window_ns: %llu\n",
		   READ_ONCE(s->vdev.stat_sleep_why[SQCQ_SLEEP_IDLE]),
		   READ_ONCE(s->vdev.stat_sleep_why[SQCQ_SLEEP_CONTENDED]),
		   READ_ONCE(s->vdev.stat_yields),
		   READ_ONCE(s->vdev.poll_window_ns));
	seq_printf(m, "poll_parks: %llu\npoll_handoffs: %llu\npoll_spin: %d\n",
		   READ_ONCE(s->vdev.stat_parks),
		   READ_ONCE(s->vdev.stat_handoffs),
		   READ_ONCE(s->vdev.poll_spin));
	seq_printf(m, "dirty_log: %s\nlog_failures: %llu\n",
		   vhc_dev_logging(&s->vdev) ? "on" : "off",
		   READ_ONCE(s->vdev.stat_log_failures));
	/* Printed under the lock: no copy of the mask on the stack. */
	spin_lock(&s->vdev.poll_own_lock);
	if (cpumask_empty(s->vdev.poll_own))
		seq_puts(m, "poll_cpu_own: none\n");
	else
		seq_printf(m, "poll_cpu_own: %*pbl\n",
			   cpumask_pr_args(s->vdev.poll_own));
	spin_unlock(&s->vdev.poll_own_lock);
	seq_puts(m, "vq num running broken mode requests kicks calls doorbells calls_saved worker handoffs log_writes\n");
	/* Racy snapshot of counters the worker updates; good enough. */
	for (i = 0; i < s->vdev.nvqs; i++) {
		struct vhost_vq *vq = &s->vdev.vqs[i];

		if (!READ_ONCE(vq->num) && !READ_ONCE(vq->stat_kicks))
			continue;
		seq_printf(m, "%u %u %d %d %s %llu %llu %llu %llu %llu %d %llu %llu\n",
			   i, READ_ONCE(vq->num), READ_ONCE(vq->running),
			   READ_ONCE(vq->broken),
			   READ_ONCE(vq->cq) ? "sqcq" : "classic",
			   READ_ONCE(vq->stat_requests),
			   READ_ONCE(vq->stat_kicks), READ_ONCE(vq->stat_calls),
			   READ_ONCE(vq->stat_doorbells),
			   READ_ONCE(vq->stat_calls_saved),
			   vhc_vq_worker_id(vq),
			   READ_ONCE(vq->stat_handoffs),
			   READ_ONCE(vq->stat_log_writes));
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(vhost_scsi_queues);

static int vhost_scsi_targets_show(struct seq_file *m, void *v)
{
	vhost_scsi_show_targets(m, m->private);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(vhost_scsi_targets);

/* ---- the device node ---- */

static int vhost_scsi_open(struct inode *inode, struct file *f)
{
	struct vhost_scsi *s;
	char name[24];
	int ret;

	s = kzalloc(sizeof(*s), GFP_KERNEL_ACCOUNT);
	if (!s)
		return -ENOMEM;
	ret = vhost_scsi_tcm_init(s);
	if (!ret) {
		ret = vhc_dev_init(&s->vdev, SQCQ_NVQS, &vhost_scsi_dev_ops, s);
		if (ret)
			vhost_scsi_tcm_free(s);
	}
	if (ret) {
		kfree(s);
		return ret;
	}
	s->id = atomic_inc_return(&vhost_scsi_dev_ids);
	s->vdev.poll_key = s->id;
	snprintf(name, sizeof(name), "dev%d", s->id);
	s->dbg = debugfs_create_dir(name, vhost_scsi_debugfs);
	debugfs_create_file("queues", 0444, s->dbg, s, &vhost_scsi_queues_fops);
	debugfs_create_file("targets", 0444, s->dbg, s, &vhost_scsi_targets_fops);
	f->private_data = s;
	return nonseekable_open(inode, f);
}

static int vhost_scsi_release(struct inode *inode, struct file *f)
{
	struct vhost_scsi *s = f->private_data;

	/* Waits for readers of the counters before the device goes. */
	debugfs_remove_recursive(s->dbg);
	/* Unbinds the targets and waits for every request (reset op). */
	vhc_dev_cleanup(&s->vdev);
	vhost_scsi_tcm_free(s);
	kfree(s);
	return 0;
}

static long vhost_scsi_ioctl(struct file *f, unsigned int cmd,
			     unsigned long arg)
{
	struct vhost_scsi *s = f->private_data;
	void __user *argp = (void __user *)arg;
	long ret;

	ret = vhc_dev_ioctl(&s->vdev, cmd, argp);
	if (ret != -ENOIOCTLCMD)
		return ret;
	switch (cmd) {
	case VHOST_SCSI_GET_ABI_VERSION:
	case VHOST_SCSI_SET_ENDPOINT:
	case VHOST_SCSI_CLEAR_ENDPOINT:
	case VHOST_SCSI_SET_EVENTS_MISSED:
	case VHOST_SCSI_GET_EVENTS_MISSED:
		return vhost_scsi_dev_ioctl(s, cmd, argp);
	default:
		/* Logging, endianness, busy polling, fork-from-owner, ... */
		return -ENOTTY;
	}
}

static const struct file_operations vhost_scsi_fops = {
	.owner		= THIS_MODULE,
	.open		= vhost_scsi_open,
	.release	= vhost_scsi_release,
	.unlocked_ioctl	= vhost_scsi_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static struct miscdevice vhost_scsi_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "vhost-scsi-sqcq",
	.fops	= &vhost_scsi_fops,
};

/* True when @path exists (sysfs): used to see the in-tree module. */
static bool vhost_scsi_path_exists(const char *path)
{
	struct path p;

	if (kern_path(path, 0, &p))
		return false;
	path_put(&p);
	return true;
}

static int vhost_scsi_params_show(struct seq_file *m, void *v)
{
	seq_printf(m, "sqcq: %d\n", READ_ONCE(sqcq));
	sqcq_show_poll_params(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(vhost_scsi_params);

static int vhost_scsi_pollers_show(struct seq_file *m, void *v)
{
	vhc_poll_groups_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(vhost_scsi_pollers);

static int __init vhost_scsi_init(void)
{
	int ret;

	/* debugfs first: an open of the node creates a directory in it. */
	ret = sqcq_param_init("vhost_scsi_sqcq:online", &vhost_scsi_params_fops,
			      &vhost_scsi_debugfs);
	if (ret)
		return ret;
	if (takeover) {
		/*
		 * The target core does not refuse a second fabric of the same
		 * name (and unregisters by name), so look for the in-tree
		 * module first.  An in-tree vhost_scsi loaded after us fails to
		 * register /dev/vhost-scsi and gives up.  A refusal undoes what
		 * init did so far, as every failed load must.
		 */
		if (vhost_scsi_path_exists("/sys/module/vhost_scsi") ||
		    vhost_scsi_path_exists("/sys/class/misc/vhost-scsi")) {
			pr_err("takeover=1: the in-tree vhost_scsi holds fabric \"vhost\" and /dev/vhost-scsi; unload it first (rmmod vhost_scsi) or load without takeover\n");
			ret = -EBUSY;
			goto err_debugfs;
		}
		/* Only in a test build: the in-tree module may load here. */
		sqcq_fault_takeover_window();
		vhost_scsi_misc.name = "vhost-scsi";
	}
	debugfs_create_file("pollers", 0444, vhost_scsi_debugfs, NULL,
			    &vhost_scsi_pollers_fops);
	/*
	 * The node first: misc_register() refuses a name that is taken
	 * (-EEXIST, after the driver core's report of a duplicate sysfs
	 * name), so an in-tree vhost_scsi that got in since the check above
	 * stops us here, before our fabric is in the core's list.  Once the
	 * fabric is registered nothing can fail, and no error path of ours
	 * unregisters a fabric by a name another module may hold too.
	 */
	ret = misc_register(&vhost_scsi_misc);
	if (ret) {
		pr_err("cannot register /dev/%s: %d%s\n", vhost_scsi_misc.name,
		       ret, takeover && (ret == -EEXIST || ret == -EBUSY) ?
		       " (the in-tree vhost_scsi has it)" : "");
		goto err_debugfs;
	}
	ret = vhost_scsi_register(takeover);
	if (ret) {
		pr_err("cannot register the TCM fabric: %d\n", ret);
		goto err_misc;
	}
	pr_info("version %s loaded: /dev/%s, TCM fabric \"%s\"\n",
		SQCQ_PKG_VERSION, vhost_scsi_misc.name,
		takeover ? "vhost" : "vhost_sqcq");
	return 0;

err_misc:
	misc_deregister(&vhost_scsi_misc);
err_debugfs:
	debugfs_remove_recursive(vhost_scsi_debugfs);
	sqcq_param_exit();
	return ret;
}

static void __exit vhost_scsi_exit(void)
{
	/*
	 * No device is open: every open file holds a module reference, and
	 * so does every configfs directory of the fabric.
	 */
	misc_deregister(&vhost_scsi_misc);
	vhost_scsi_unregister();
	debugfs_remove_recursive(vhost_scsi_debugfs);
	vhc_poll_groups_exit();
	sqcq_param_exit();
	pr_info("unloaded\n");
}

module_init(vhost_scsi_init);
module_exit(vhost_scsi_exit);

MODULE_DESCRIPTION("vhost-scsi backend with SQ/CQ doorbell polling");
MODULE_AUTHOR("virtio-sqcq developers");
MODULE_LICENSE("GPL");
MODULE_VERSION(SQCQ_PKG_VERSION);

/* The other parts of the module (see the top of this file). */
#include "vhost_core.c"
#include "vhost_log.c"
#include "vhost_sqcq.c"
#include "sqcq_tcm.c"
