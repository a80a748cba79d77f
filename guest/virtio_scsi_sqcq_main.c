// SPDX-License-Identifier: GPL-2.0-only
/*
 * virtio_scsi_sqcq: a virtio-scsi driver with dedicated poll queues and
 * SQ/CQ doorbell polling (docs/protocol.md).
 *
 * Virtqueue layout (virtio spec, SCSI host device): 0 = control,
 * 1 = event, 2.. = request queues.  The request queues are split into
 * interrupt queues (first) and, with poll_queues=N, N interrupt-less poll
 * queues (last) that blk-mq maps to HCTX_TYPE_POLL and drains through
 * ->mq_poll.  Every queue is drained by virtscsi_vq_drain(), whoever calls it
 * (interrupt, mq_poll, error handling, later the SQ/CQ poll threads).
 *
 * Error handling (docs/error-handling.md): the device owns a command, and
 * every buffer of it, until it returns it on the used ring or is reset.  A
 * command that outlives its timeout has its queue reaped and its timer
 * restarted (SCSI_EH_RESET_TIMER); ABORT TASK and LOGICAL UNIT RESET (sent
 * only when the midlayer asks for them otherwise) wait for their answer
 * without a time limit, reaping the control queue now and then.  Nothing
 * is ever given up while the device may still write into it.
 */
#include <linux/blk-mq.h>
#include <linux/completion.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/interrupt.h>
#include <linux/irq_work.h>
#include <linux/kernel_stat.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/sched/stat.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_scsi.h>
#include <linux/workqueue.h>
#include <linux/gfp.h>
#include <linux/io.h>
#include <linux/dma-mapping.h>
#include <linux/mutex.h>
#include <xen/xen.h>
#include <scsi/scsi_cmnd.h>
#include <scsi/scsi_device.h>
#include <scsi/scsi_devinfo.h>
#include <scsi/scsi_eh.h>
#include <scsi/scsi_host.h>
#include <scsi/scsi_tcq.h>

#include "sqcq_param.h"
#include "sqcq_uapi.h"
#include "sqcq_faults.h"
/* The tracepoints' one definition (guest/sqcq_guest_trace.h). */
#define CREATE_TRACE_POINTS
#include "sqcq_guest_trace.h"

/* Upper bound on poll queues; the device's queue count caps it further. */
#define SQCQ_MAX_POLL_QUEUES	256

static bool sqcq = true;
module_param_cb(sqcq, &sqcq_param_bool_ops, &sqcq, 0644);
MODULE_PARM_DESC(sqcq, "Request SQ/CQ doorbell polling from devices at probe (default 1; runtime writes apply to devices probed later)");

static unsigned int poll_queues;

static int virtscsi_poll_queues_set(const char *val, const struct kernel_param *kp)
{
	unsigned int v;

	if (kstrtouint(val, 0, &v) || v > SQCQ_MAX_POLL_QUEUES) {
		pr_err("%s: not an integer 0..%u\n", kp->name,
		       SQCQ_MAX_POLL_QUEUES);
		return sqcq_param_bad(kp);	/* at load: none */
	}
	if (v && !SQCQ_POLL_QUEUES_SUPPORTED)
		pr_warn("%s=%u: poll queues are unavailable on this kernel (no SCSI mq_poll); all queues use interrupts\n",
			kp->name, v);
	WRITE_ONCE(poll_queues, v);
	return 0;
}

static int virtscsi_poll_queues_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%u\n", READ_ONCE(poll_queues));
}

static const struct kernel_param_ops virtscsi_poll_queues_ops = {
	.set = virtscsi_poll_queues_set,
	.get = virtscsi_poll_queues_get,
};

module_param_cb(poll_queues, &virtscsi_poll_queues_ops, NULL, 0644);
MODULE_PARM_DESC(poll_queues, "Dedicated interrupt-less poll queues per device, as upstream virtscsi_poll_queues; at least one interrupt queue always stays (default 0; applies to devices probed later)");
/* Upstream virtio_scsi's name for the same setting. */
module_param_cb(virtscsi_poll_queues, &virtscsi_poll_queues_ops, NULL, 0644);
MODULE_PARM_DESC(virtscsi_poll_queues, "Alias of poll_queues");

/* ------------------------------------------------------------------ */
/* Device state                                                        */
/* ------------------------------------------------------------------ */

#define SQCQ_VQ_CTRL		0
#define SQCQ_VQ_EVENT		1
#define SQCQ_VQ_REQ0		2
#define SQCQ_NR_EVENTS		8
/*
 * Task-management requests are waited for without a time limit; every
 * SQCQ_CTRL_REAP the waiter reaps the control queue itself (a lost
 * interrupt must not look like a slow device), and after SQCQ_CTRL_SLOW it
 * logs once that it is still waiting.  The SQ/CQ setup exchange, which a
 * device that does not know it might never answer, is waited for at most
 * SQCQ_SETUP_WAIT: then the device stays classic (virtscsi_sqcq_setup()).
 */
#define SQCQ_CTRL_REAP		(5 * HZ)
#define SQCQ_CTRL_SLOW		(30 * HZ)
#define SQCQ_SETUP_WAIT		(10 * HZ)
/*
 * After the host stopped SQ/CQ on a live device (a paused VM, a migration,
 * the endpoint set again): negotiate again this long after the switch to
 * classic, doubling the delay while the device answers BUSY or requests
 * stay outstanding, at most SQCQ_RENEGO_TRIES times.
 */
#define SQCQ_RENEGO_DELAY	(10 * HZ)
#define SQCQ_RENEGO_TRIES	5
/* How long a renegotiation waits for outstanding requests to finish. */
#define SQCQ_RENEGO_IDLE_MS	10000
/* Completions taken off a ring per lock hold. */
#define SQCQ_DRAIN_BATCH	32
/* Bounds on what the device's config space may ask for. */
#define SQCQ_MAX_TARGET		255
#define SQCQ_MAX_LUN		16383
/*
 * The midlayer numbers a flat-space LUN >= 256 that REPORT LUNS returns as
 * 0x4000 + LUN (scsilun_to_int()); events carry the same two bytes.  Both
 * then reach the device unchanged through virtscsi_encode_lun().
 */
#define SQCQ_LUN_FLAT		0x4000

enum virtscsi_vq_kind {
	VIRTSCSI_VQ_KIND_CTRL, VIRTSCSI_VQ_KIND_EVENT, VIRTSCSI_VQ_KIND_IRQ, VIRTSCSI_VQ_KIND_POLL
};

/* Who called virtscsi_vq_drain(): decides which counter is bumped. */
enum virtscsi_drain_src {
	VIRTSCSI_DRAIN_SRC_IRQ, VIRTSCSI_DRAIN_SRC_POLL, VIRTSCSI_DRAIN_SRC_EH,
	VIRTSCSI_DRAIN_SRC_SQCQ
};

/*
 * Counters of one virtqueue.  All are updated with the queue lock held
 * and read locklessly by debugfs.
 */
struct virtscsi_vq_stats {
	u64 requests;		/* buffers added */
	u64 kicks;		/* notifications sent to the device */
	u64 interrupts;		/* interrupt callbacks */
	u64 polls;		/* mq_poll calls */
	u64 completions;	/* buffers taken back */
	u64 errors;		/* malformed completions */
	u64 doorbells;		/* CQ index moves the poll thread found */
	u64 kicks_saved;	/* submissions published without a kick */
};

struct virtscsi_dev;

/* Memory the device reads or writes outside the rings: the doorbell area. */
struct virtscsi_sqcq {
	void *cpu;
	dma_addr_t addr;		/* what the device is told */
	size_t bytes;
	struct device *dma_dev;		/* NULL: not through the DMA API */
};

/*
 * SQ/CQ state of a device.  OFF: never negotiated (classic).  ON: doorbells
 * in use.  STOPPED: the host set STOPPED (or the guest gave up the mode):
 * classic, exactly, until the device is reset or probed again.
 */
enum virtscsi_state { VIRTSCSI_STATE_OFF, VIRTSCSI_STATE_ON, VIRTSCSI_STATE_STOPPED };

struct virtscsi_vq {
	spinlock_t lock;	/* ring access, stats */
	struct virtqueue *vq;	/* NULL while the rings are torn down */
	struct virtscsi_dev *dev;
	enum virtscsi_vq_kind kind;
	struct virtscsi_vq_stats st;
	bool broken_seen;	/* "queue is broken" was logged */
	char name[20];		/* the virtio core keeps a pointer to it */
	/* Buffers added since the ring was set up = its avail index (lock). */
	u16 avail_shadow;
	/*
	 * SQ/CQ doorbells, NULL in classic mode.  sq: set and cleared under
	 * the lock (submitters read it there); cq: read by the poll thread,
	 * which is stopped before it is cleared.
	 */
	struct sqcq_sq *sq;
	struct sqcq_cq *cq;
	u16 cq_seen;		/* poll thread only */
};

struct virtscsi_event {
	struct virtio_scsi_event ev;	/* device-writable */
	struct work_struct work;
	struct virtscsi_dev *dev;
	/*
	 * Who holds the buffer (event.lock): the device (@posted), the work
	 * (@in_work, from the device's answer until the work re-posts it),
	 * or nobody (both false: after a reset, or events off).
	 */
	bool posted, in_work;
};

struct virtscsi_dev {
	struct virtio_device *vdev;
	struct Scsi_Host *shost;
	unsigned int nr_req;		/* request queues: nr_irq + nr_poll */
	unsigned int nr_irq;
	unsigned int nr_poll;
	bool events_on;			/* protected by event.lock */
	bool pi;			/* T10-PI negotiated */
	atomic64_t bad_completions;	/* short or malformed responses */
	atomic64_t tmf_slow;		/* control requests answered late */
	atomic64_t timer_resets;	/* timeouts answered by waiting on */
	atomic64_t host_resets;		/* virtscsi_eh_host_reset() runs */
	bool eh_resetting;		/* around a host reset (EH or ioctl) */
	unsigned int stale_cmds;	/* teardown: commands EH ended, left on a ring */
	u64 timeout_notifies;		/* notifications a timeout sent */
	atomic_t ctrl_waiting;		/* control requests being waited for */
	struct dentry *dbg;
	/* SQ/CQ (docs/protocol.md): the doorbell area and its poll thread. */
	struct sqcq_area *area;		/* NULL: never negotiated */
	struct virtscsi_sqcq mem;	/* where area lives */
	/* An area the device may still use (odd setup), freed after reset. */
	struct virtscsi_sqcq stale;
	/*
	 * A setup request the device still holds (probe killed, or no answer
	 * in time) and the teardown queued behind an unanswered one
	 * (virtscsi_setup_abandon()), ditto.
	 */
	struct virtscsi_tmf *stale_tmf;
	struct virtscsi_tmf *stale_teardown;
	/* TMFs a broken control queue still holds (ctrl.lock), ditto. */
	struct list_head held_tmfs;
	/* Why SQ/CQ is not in use (debugfs); NULL while it is. */
	const char *classic_why;
	enum virtscsi_state state;		/* written under virtscsi_lock */
	struct mutex virtscsi_lock;		/* state changes, poller stop */
	struct work_struct stop_work;	/* the host set STOPPED */
	struct delayed_work renego_work;	/* SQ/CQ again after that */
	unsigned int renego_tries;	/* renego_work's, virtscsi_lock */
	bool renego_off;		/* no renegotiation: virtscsi_lock */
	u64 renegotiations;		/* successful ones (debugfs) */
	u32 host_flags;			/* SQCQ_F_* the host accepted */
	/* The area address the last setup request carried (debugfs). */
	u64 setup_addr;
	bool setup_dma_api;
	bool poll_wake;			/* interrupts wake the poll thread */
	bool poller_running;		/* virtscsi_lock */
	struct task_struct *poller;	/* referenced until virtscsi_sqcq_stop() */
	int poll_bound_gen;		/* poll thread only */
	u64 poll_sleeps, poll_wakeups;	/* poll thread, racy reads */
	/*
	 * Starvation watchdog (virtscsi_poll_watchdog()).  poll_spinning: the
	 * CQs do not ask for interrupts, completions wait for the poll
	 * thread.  poll_passes: its loop count.  poll_rescued: the watchdog
	 * asked for interrupts since its last pass.  wd_armed: the poll
	 * thread is not asleep, the watchdog keeps running (written by the
	 * poll thread only).  poll_reap: the rescue's reaping, which takes
	 * the queues' spinlock_t and completes commands, so it cannot run in
	 * the watchdog's hard interrupt on PREEMPT_RT.
	 */
	struct hrtimer poll_watchdog;
	struct irq_work poll_reap;
	unsigned long poll_passes, wd_passes;
	bool poll_spinning, poll_rescued, wd_armed;
	u64 poll_yields, poll_rescues, poll_wd_starts;	/* racy reads */
	u64 poll_window_ns;		/* adaptive idle window, racy reads */
	/*
	 * The last work seen, by the poll thread or by an interrupt that left
	 * it asleep (virtscsi_poll_wake()); interrupts that did: poll_irq_only.
	 * Heuristics written from several CPUs: a lost update only moves a
	 * window.
	 */
	u64 poll_last_ns, poll_irq_only;
	u64 poll_sleep_why[SQCQ_SLEEP_NR];	/* sleeps by reason, ditto */
	u16 host_nthreads;
	u32 host_idle_us;
	struct virtscsi_vq ctrl;
	struct virtscsi_vq event;
	struct virtscsi_event events[SQCQ_NR_EVENTS];
	struct virtscsi_vq req[];
};

/* Per-command state, in the scsi_cmnd's private area (cmd_size). */
struct virtscsi_cmd {
	union {
		struct virtio_scsi_cmd_req cmd;
		struct virtio_scsi_cmd_req_pi cmd_pi;
	} req;
	struct virtio_scsi_cmd_resp resp;
} ____cacheline_aligned_in_smp;

/*
 * A task-management (or SQ/CQ setup/teardown) request.  The device owns it
 * from virtqueue_add_sgs() until it is returned on the used ring or handed
 * back by a reset; its waiter frees it only after that.
 */
struct virtscsi_tmf {
	union {
		struct virtio_scsi_ctrl_tmf_req tmf;
		struct {			/* SQ/CQ setup or teardown */
			struct sqcq_tmf_req tmf;
			struct sqcq_setup_req setup;
		} sqcq;
	} req;
	/*
	 * Stock vhost-scsi (up to at least 6.1) answers an unknown target on
	 * the control queue with a whole virtio_scsi_cmd_resp written into the
	 * first device-writable buffer, so that buffer must be that large.
	 */
	/*
	 * Device-writable: on cache lines of its own, apart from the request
	 * and from @done, which the waiter writes while the device may still
	 * write here (a non-coherent DMA sync of these lines must not discard
	 * the waiter's stores).
	 */
	union {
		struct virtio_scsi_ctrl_tmf_resp tmf;
		struct virtio_scsi_cmd_resp guard;
		struct sqcq_setup_in sqcq;
	} resp ____cacheline_aligned;
	struct completion done ____cacheline_aligned;
	/* On dev->held_tmfs while a broken device owns it (ctrl.lock). */
	struct list_head held;
};

static struct dentry *virtscsi_debugfs;

static inline struct virtscsi_dev *virtscsi_shost_dev(struct Scsi_Host *shost)
{
	return shost_priv(shost);
}

static const char *virtscsi_kind_name(enum virtscsi_vq_kind kind)
{
	switch (kind) {
	case VIRTSCSI_VQ_KIND_CTRL:
		return "ctrl";
	case VIRTSCSI_VQ_KIND_EVENT:
		return "event";
	case VIRTSCSI_VQ_KIND_IRQ:
		return "irq";
	case VIRTSCSI_VQ_KIND_POLL:
		return "poll";
	}
	return "?";
}

#define virtscsi_err_rl(dev, fmt, ...) \
	dev_err_ratelimited(&(dev)->vdev->dev, fmt, ##__VA_ARGS__)

/* ------------------------------------------------------------------ */
/* Ring access                                                         */
/* ------------------------------------------------------------------ */

/*
 * Notify the device, without the queue lock held.  @vq was taken under the
 * lock when virtqueue_kick_prepare() asked for a notification (NULL: none).
 */
static void virtscsi_vq_notify(struct virtqueue *vq)
{
	if (vq)
		virtqueue_notify(vq);
}

/*
 * A timeout's notification (docs/protocol.md section 5): the device hears
 * of @q once more, whatever the ring's suppression or the SQ doorbell say,
 * so that a request it missed (in the avail ring but behind an index it
 * does not watch, e.g. added while SQ/CQ was set up or stopped) is seen
 * now.  A notification too many costs the device one look at the ring.
 * Under the queue lock: the ring may be going away (reset).
 */
static void virtscsi_vq_notify_anyway(struct virtscsi_vq *q)
{
	unsigned long flags;

	spin_lock_irqsave(&q->lock, flags);
	if (q->vq) {
		virtqueue_notify(q->vq);
		WRITE_ONCE(q->dev->timeout_notifies, q->dev->timeout_notifies + 1);
	}
	spin_unlock_irqrestore(&q->lock, flags);
}

/*
 * Whether the device must be notified about what was added to @q (lock
 * held, q->vq set).  The one place that decides a kick.  Classic: the
 * ring's own suppression.  SQ/CQ: publish the SQ index, full barrier, and
 * kick only when the host poller has set SQ NEED_WAKEUP (docs/protocol.md section 4); the
 * barrier inside sqcq_publish() pairs with sqcq_prepare_sleep() in the host
 * poller.  virtqueue_kick_prepare() also runs in SQ/CQ mode: it resets the
 * ring's count of unannounced buffers.
 */
static void virtscsi_host_stop_seen(struct virtscsi_dev *dev);

static bool virtscsi_vq_kick_needed(struct virtscsi_vq *q)
{
	bool classic;

	lockdep_assert_held(&q->lock);
	classic = virtqueue_kick_prepare(q->vq);

	if (!q->sq)
		return classic;
	if (sqcq_publish(&q->sq->idx, q->avail_shadow, &q->sq->flags,
			 SQCQ_SQ_F_NEED_WAKEUP)) {
		/*
		 * A host that stopped polling keeps NEED_WAKEUP set for good
		 * and adds STOPPED: this kick is the last one decided by the
		 * doorbell, the next ones follow the ring's suppression.
		 */
		if (unlikely(sqcq_load16(&q->sq->flags) & SQCQ_SQ_F_STOPPED)) {
			q->sq = NULL;
			virtscsi_host_stop_seen(q->dev);
		}
		return true;
	}
	q->st.kicks_saved++;
	return false;
}

/*
 * Decide and count the kick for what was added to @q (lock held, q->vq
 * set).  Returns what to pass to virtscsi_vq_notify() once the lock is
 * dropped: the virtqueue, or NULL for no kick.
 */
static struct virtqueue *virtscsi_vq_kick_prepare(struct virtscsi_vq *q)
{
	lockdep_assert_held(&q->lock);
	if (!virtscsi_vq_kick_needed(q))
		return NULL;
	q->st.kicks++;
	return q->vq;
}

/*
 * Add a buffer to @q (lock held): the one way commands, control requests
 * and event buffers reach a ring.  @sgs holds @out device-readable lists,
 * then @in device-writable ones; @data comes back on completion.  Counts
 * it and, when @last, decides the kick.  Request queues batch
 * (->commit_rqs kicks the rest), so there a failed add (a full ring) still
 * decides one, pushing out what earlier calls added.  Returns 0 or -errno
 * (-ENODEV: rings torn down); a decided kick lands in *@kick, for
 * virtscsi_vq_notify() once the lock is dropped.
 */
static int virtscsi_vq_add(struct virtscsi_vq *q, struct scatterlist *sgs[],
			   unsigned int out, unsigned int in, void *data,
			   bool last, struct virtqueue **kick)
{
	bool batches = q->kind == VIRTSCSI_VQ_KIND_IRQ || q->kind == VIRTSCSI_VQ_KIND_POLL;
	int ret;

	lockdep_assert_held(&q->lock);
	if (!q->vq)
		return -ENODEV;
	ret = virtqueue_add_sgs(q->vq, sgs, out, in, data, GFP_ATOMIC);
	if (!ret) {
		q->st.requests++;
		q->avail_shadow++;
	}
	if (ret ? batches : last)
		*kick = virtscsi_vq_kick_prepare(q);
	return ret;
}

/* Kick whatever was added without a kick; takes the queue lock. */
static void virtscsi_vq_kick(struct virtscsi_vq *q)
{
	unsigned long flags;
	struct virtqueue *kick = NULL;

	spin_lock_irqsave(&q->lock, flags);
	if (q->vq)
		kick = virtscsi_vq_kick_prepare(q);
	spin_unlock_irqrestore(&q->lock, flags);
	virtscsi_vq_notify(kick);
}

/*
 * The virtio core marks a ring broken when the device hands back an id it
 * never got (or twice), or when the device is gone.  Nothing comes back
 * from it any more: its commands, and new ones (virtscsi_queuecommand()),
 * wait for their timeout, and then error handling ends in a host reset
 * (virtscsi_eh_host_reset()).  Called with the queue lock held.
 */
static void virtscsi_vq_broken(struct virtscsi_vq *q)
{
	lockdep_assert_held(&q->lock);
	if (q->broken_seen)
		return;
	q->broken_seen = true;
	dev_err(&q->dev->vdev->dev,
		"%s: the device broke the ring protocol; %s\n", q->name,
		IS_ENABLED(CONFIG_PM_SLEEP) ?
		"its commands wait for their timeout and a host reset" :
		"its commands fail (no host reset without CONFIG_PM_SLEEP)");
}

/* Whether @q's ring is broken (virtscsi_vq_broken()); takes the lock. */
static bool virtscsi_vq_is_broken(struct virtscsi_vq *q)
{
	unsigned long flags;
	bool broken;

	spin_lock_irqsave(&q->lock, flags);
	broken = q->vq && virtqueue_is_broken(q->vq);
	if (broken)
		virtscsi_vq_broken(q);
	spin_unlock_irqrestore(&q->lock, flags);
	return broken;
}

static void virtscsi_cmd_done(struct virtscsi_dev *dev, struct virtscsi_vq *q,
			      void *buf, unsigned int len);
static void virtscsi_tmf_done(struct virtscsi_dev *dev, void *buf);
static void virtscsi_event_done(struct virtscsi_dev *dev, void *buf,
				unsigned int len);

static void virtscsi_vq_complete(struct virtscsi_vq *q, void *buf, unsigned int len)
{
	switch (q->kind) {
	case VIRTSCSI_VQ_KIND_CTRL:
		virtscsi_tmf_done(q->dev, buf);
		break;
	case VIRTSCSI_VQ_KIND_EVENT:
		virtscsi_event_done(q->dev, buf, len);
		break;
	default:
		virtscsi_cmd_done(q->dev, q, buf, len);
		break;
	}
}

/*
 * Take every used buffer off @q and complete it.  The single completion
 * path for all queues and all callers: the interrupt callback, ->mq_poll,
 * error handling.  Buffers are collected under the queue lock and
 * completed after dropping it, so completion handlers may submit again.
 * Returns the number of buffers completed.
 */
static unsigned int virtscsi_vq_drain(struct virtscsi_vq *q, enum virtscsi_drain_src src)
{
	struct {
		void *buf;
		unsigned int len;
	} batch[SQCQ_DRAIN_BATCH];
	bool irq_queue = q->kind != VIRTSCSI_VQ_KIND_POLL;
	unsigned int n, i, total = 0;
	unsigned long flags;
	bool counted = false;
	bool again;

	do {
		n = 0;
		again = false;
		spin_lock_irqsave(&q->lock, flags);
		if (!q->vq) {
			spin_unlock_irqrestore(&q->lock, flags);
			break;
		}
		if (!counted) {
			if (src == VIRTSCSI_DRAIN_SRC_IRQ)
				q->st.interrupts++;
			else if (src == VIRTSCSI_DRAIN_SRC_POLL)
				q->st.polls++;
			counted = true;
		}
		if (irq_queue)
			virtqueue_disable_cb(q->vq);
		while (n < SQCQ_DRAIN_BATCH) {
			batch[n].buf = virtqueue_get_buf(q->vq, &batch[n].len);
			if (!batch[n].buf)
				break;
			n++;
		}
		if (n == SQCQ_DRAIN_BATCH)
			again = true;
		else if (unlikely(virtqueue_is_broken(q->vq)))
			virtscsi_vq_broken(q);
		else if (irq_queue && !virtqueue_enable_cb(q->vq))
			again = true;	/* more arrived while re-enabling */
		q->st.completions += n;
		spin_unlock_irqrestore(&q->lock, flags);

		for (i = 0; i < n; i++)
			virtscsi_vq_complete(q, batch[i].buf, batch[i].len);
		total += n;
	} while (again);

	return total;
}

static void virtscsi_drain_requests(struct virtscsi_dev *dev)
{
	unsigned int i;

	for (i = 0; i < dev->nr_req; i++)
		virtscsi_vq_drain(&dev->req[i], VIRTSCSI_DRAIN_SRC_EH);
}

static struct virtscsi_dev *virtscsi_vq_to_dev(struct virtqueue *vq)
{
	struct Scsi_Host *shost = vq->vdev->priv;

	return virtscsi_shost_dev(shost);
}

static bool virtscsi_host_stopped(struct virtscsi_dev *dev, unsigned int i);

static void virtscsi_ctrl_cb(struct virtqueue *vq)
{
	virtscsi_vq_drain(&virtscsi_vq_to_dev(vq)->ctrl, VIRTSCSI_DRAIN_SRC_IRQ);
}

static void virtscsi_event_cb(struct virtqueue *vq)
{
	virtscsi_vq_drain(&virtscsi_vq_to_dev(vq)->event, VIRTSCSI_DRAIN_SRC_IRQ);
}

static void virtscsi_poll_wake(struct virtscsi_dev *dev);

static void virtscsi_req_cb(struct virtqueue *vq)
{
	struct virtscsi_dev *dev = virtscsi_vq_to_dev(vq);
	unsigned int i = vq->index - SQCQ_VQ_REQ0;

	if (WARN_ON_ONCE(i >= dev->nr_req))
		return;
	virtscsi_vq_drain(&dev->req[i], VIRTSCSI_DRAIN_SRC_IRQ);
	/* Pairs with the release in virtscsi_sqcq_setup(): dev->area is set. */
	if (smp_load_acquire(&dev->state) != VIRTSCSI_STATE_ON)
		return;
	/* A stopped host interrupts on every completion: nothing to wake. */
	if (virtscsi_host_stopped(dev, i)) {
		virtscsi_host_stop_seen(dev);
		return;
	}
	/*
	 * SQ/CQ: an interrupt means the poll thread published CQ NEED_WAKEUP
	 * and sleeps (or is about to): wake it if polling pays.  The task
	 * stays referenced until the rings are gone (virtscsi_sqcq_stop());
	 * poll_wake is cleared before it is stopped, and a wakeup racing with
	 * that is harmless.
	 */
	if (READ_ONCE(dev->poll_wake))
		virtscsi_poll_wake(dev);
}

/* ------------------------------------------------------------------ */
/* SCSI commands                                                       */
/* ------------------------------------------------------------------ */

/* The virtio-scsi single-level LUN format: 1, target, flat-space LUN. */
static void virtscsi_encode_lun(u8 *lun, const struct scsi_device *sdev)
{
	lun[0] = 1;
	lun[1] = sdev->id;
	lun[2] = (sdev->lun >> 8) | 0x40;
	lun[3] = sdev->lun & 0xff;
	memset(lun + 4, 0, 4);
}

static unsigned int virtscsi_host_byte(struct virtscsi_dev *dev, u8 response)
{
	switch (response) {
	case VIRTIO_SCSI_S_OK:
		return DID_OK;
	case VIRTIO_SCSI_S_OVERRUN:
		return DID_ERROR;
	case VIRTIO_SCSI_S_ABORTED:
		return DID_ABORT;
	case VIRTIO_SCSI_S_BAD_TARGET:
	case VIRTIO_SCSI_S_INCORRECT_LUN:
		return DID_BAD_TARGET;
	case VIRTIO_SCSI_S_RESET:
		return DID_RESET;
	case VIRTIO_SCSI_S_BUSY:
		return DID_BUS_BUSY;
	case VIRTIO_SCSI_S_TRANSPORT_FAILURE:
		return DID_TRANSPORT_DISRUPTED;
	case VIRTIO_SCSI_S_TARGET_FAILURE:
		return DID_BAD_TARGET;
	case VIRTIO_SCSI_S_NEXUS_FAILURE:	/* virtscsi_cmd_done(): a status */
	case VIRTIO_SCSI_S_FAILURE:
		return DID_ERROR;
	}
	virtscsi_err_rl(dev, "unknown command response %u\n", response);
	atomic64_inc(&dev->bad_completions);
	return DID_ERROR;
}

/*
 * A command came back.  @len is what the device says it wrote; 0 means
 * "not reported" (vhost-scsi always reports 0), anything else must at least
 * cover the response header.
 */
static void virtscsi_cmd_done(struct virtscsi_dev *dev, struct virtscsi_vq *q,
			      void *buf, unsigned int len)
{
	struct scsi_cmnd *sc = buf;
	struct virtscsi_cmd *cmd = scsi_cmd_priv(sc);
	struct virtio_scsi_cmd_resp *resp = &cmd->resp;
	struct virtio_device *vdev = dev->vdev;
	const unsigned int hdr = offsetof(struct virtio_scsi_cmd_resp, sense);
	unsigned int sense_len, resid;

	if (len && len < hdr) {
		virtscsi_err_rl(dev, "%s: used length %u shorter than the %u-byte response header; failing the command\n",
				q->name, len, hdr);
		atomic64_inc(&dev->bad_completions);
		sc->result = DID_ERROR << 16;
		scsi_done(sc);
		return;
	}

	/* The I_T nexus is lost: what SAM calls a reservation conflict. */
	if (resp->response == VIRTIO_SCSI_S_NEXUS_FAILURE)
		sc->result = SAM_STAT_RESERVATION_CONFLICT;
	else
		sc->result = (virtscsi_host_byte(dev, resp->response) << 16) |
			     resp->status;

	resid = virtio32_to_cpu(vdev, resp->resid);
	scsi_set_resid(sc, min(resid, scsi_bufflen(sc)));

	sense_len = virtio32_to_cpu(vdev, resp->sense_len);
	if (sense_len && sc->sense_buffer) {
		unsigned int max = min_t(unsigned int, SCSI_SENSE_BUFFERSIZE,
					 VIRTIO_SCSI_SENSE_SIZE);

		/* Never copy more than the device says it wrote. */
		if (len)
			max = min(max, len - hdr);
		memcpy(sc->sense_buffer, resp->sense, min(sense_len, max));
	}
	scsi_done(sc);
}

static void virtscsi_fill_req(struct virtscsi_dev *dev, struct scsi_cmnd *sc,
			      u8 *lun, __virtio64 *tag, u8 *cdb)
{
	struct request *rq = scsi_cmd_to_rq(sc);

	virtscsi_encode_lun(lun, sc->device);
	*tag = cpu_to_virtio64(dev->vdev, blk_mq_unique_tag(rq));
	memset(cdb, 0, VIRTIO_SCSI_CDB_SIZE);
	memcpy(cdb, sc->cmnd, min_t(unsigned int, sc->cmd_len,
				    VIRTIO_SCSI_CDB_SIZE));
}

static unsigned int virtscsi_prot_bytes(struct scsi_cmnd *sc)
{
	struct scatterlist *sg;
	unsigned int i, bytes = 0;

	scsi_for_each_prot_sg(sc, sg, scsi_prot_sg_count(sc), i)
		bytes += sg->length;
	return bytes;
}

/* Build the request header; returns its size. */
static size_t virtscsi_build_req(struct virtscsi_dev *dev, struct virtscsi_cmd *cmd,
				 struct scsi_cmnd *sc)
{
	struct virtio_device *vdev = dev->vdev;

	if (dev->pi) {
		struct virtio_scsi_cmd_req_pi *r = &cmd->req.cmd_pi;
		unsigned int pi = 0;

		memset(r, 0, offsetof(struct virtio_scsi_cmd_req_pi, cdb));
		virtscsi_fill_req(dev, sc, r->lun, &r->tag, r->cdb);
		r->task_attr = VIRTIO_SCSI_S_SIMPLE;
		if (scsi_get_prot_op(sc) != SCSI_PROT_NORMAL)
			pi = virtscsi_prot_bytes(sc);
		if (sc->sc_data_direction == DMA_TO_DEVICE)
			r->pi_bytesout = cpu_to_virtio32(vdev, pi);
		else if (sc->sc_data_direction == DMA_FROM_DEVICE)
			r->pi_bytesin = cpu_to_virtio32(vdev, pi);
		return sizeof(*r);
	}
	memset(&cmd->req.cmd, 0, offsetof(struct virtio_scsi_cmd_req, cdb));
	virtscsi_fill_req(dev, sc, cmd->req.cmd.lun, &cmd->req.cmd.tag,
			  cmd->req.cmd.cdb);
	cmd->req.cmd.task_attr = VIRTIO_SCSI_S_SIMPLE;
	return sizeof(cmd->req.cmd);
}

/*
 * Add a command to @q: out = request header [, PI] [, data-out],
 * in = response [, PI] [, data-in].  Kicks only for the @last request of
 * a batch (or when the ring is full); ->commit_rqs kicks the rest.
 */
static int virtscsi_add_cmd(struct virtscsi_dev *dev, struct virtscsi_vq *q,
			    struct scsi_cmnd *sc, bool last)
{
	struct virtscsi_cmd *cmd = scsi_cmd_priv(sc);
	struct scatterlist hdr_out, hdr_in, *sgs[6];
	bool prot = dev->pi && scsi_prot_sg_count(sc);
	unsigned int out = 0, in = 0;
	unsigned long flags;
	struct virtqueue *kick = NULL;
	int ret;

	sg_init_one(&hdr_out, &cmd->req, virtscsi_build_req(dev, cmd, sc));
	sgs[out++] = &hdr_out;
	if (sc->sc_data_direction == DMA_TO_DEVICE) {
		if (prot)
			sgs[out++] = scsi_prot_sglist(sc);
		if (scsi_sg_count(sc))
			sgs[out++] = scsi_sglist(sc);
	}
	memset(&cmd->resp, 0, sizeof(cmd->resp));
	sg_init_one(&hdr_in, &cmd->resp, sizeof(cmd->resp));
	sgs[out + in++] = &hdr_in;
	if (sc->sc_data_direction == DMA_FROM_DEVICE) {
		if (prot)
			sgs[out + in++] = scsi_prot_sglist(sc);
		if (scsi_sg_count(sc))
			sgs[out + in++] = scsi_sglist(sc);
	}

	spin_lock_irqsave(&q->lock, flags);
	ret = virtscsi_vq_add(q, sgs, out, in, sc, last, &kick);
	spin_unlock_irqrestore(&q->lock, flags);
	virtscsi_vq_notify(kick);
	return ret;
}

static struct virtscsi_vq *virtscsi_cmd_queue(struct virtscsi_dev *dev,
					      struct scsi_cmnd *sc)
{
	u32 tag = blk_mq_unique_tag(scsi_cmd_to_rq(sc));
	u16 hwq = blk_mq_unique_tag_to_hwq(tag);

	return &dev->req[hwq < dev->nr_req ? hwq : 0];
}

static sqcq_qc_ret_t virtscsi_queuecommand(struct Scsi_Host *shost,
					   struct scsi_cmnd *sc)
{
	struct virtscsi_dev *dev = virtscsi_shost_dev(shost);
	struct virtscsi_vq *q = virtscsi_cmd_queue(dev, sc);
	int ret;

	if (unlikely(sc->sc_data_direction == DMA_BIDIRECTIONAL)) {
		virtscsi_err_rl(dev, "bidirectional commands are not supported\n");
		sc->result = DID_ERROR << 16;
		scsi_done(sc);
		return 0;
	}

	/* Only in a test build (common/sqcq_faults.h): a device gone bad. */
	if (sqcq_fault_break_due())
		virtio_break_device(dev->vdev);
	ret = virtscsi_add_cmd(dev, q, sc, sc->flags & SCMD_LAST);
	if (likely(!ret))
		return 0;
	if (ret == -ENOSPC || ret == -ENOMEM)
		return SCSI_MLQUEUE_HOST_BUSY;
	/*
	 * -EIO: the ring is broken (a device that broke the protocol, or one
	 * removed by surprise).  Keep the command: it times out like those
	 * the device holds, error handling resets the host and retries it on
	 * the new rings; a device that cannot be reset fails it then.  A
	 * build without the host reset handler (no CONFIG_PM_SLEEP) has no
	 * reset to wait for: failed at once, or every command sent while the
	 * LUN goes away (the cache flush of its removal) would wait for its
	 * timeout and the whole error handling first, again and again.
	 */
	if (ret == -EIO) {
		virtscsi_vq_is_broken(q);	/* says so, once */
		if (IS_ENABLED(CONFIG_PM_SLEEP)) {
			virtscsi_err_rl(dev, "%s: ring broken; command held for the host reset\n",
					q->name);
			return 0;
		}
	}
	/* -ENODEV: torn down: again after a host reset, else removal. */
	if (READ_ONCE(dev->eh_resetting))
		return SCSI_MLQUEUE_HOST_BUSY;
	virtscsi_err_rl(dev, "%s: cannot queue command (%d); failing it\n",
			q->name, ret);
	sc->result = DID_NO_CONNECT << 16;
	scsi_done(sc);
	return 0;
}

/* blk-mq stopped dispatching: kick what queuecommand added without a kick. */
static void virtscsi_commit_rqs(struct Scsi_Host *shost, u16 hwq)
{
	struct virtscsi_dev *dev = virtscsi_shost_dev(shost);

	if (hwq < dev->nr_req)
		virtscsi_vq_kick(&dev->req[hwq]);
}

static int __maybe_unused virtscsi_mq_poll(struct Scsi_Host *shost, unsigned int queue_num)
{
	struct virtscsi_dev *dev = virtscsi_shost_dev(shost);

	if (unlikely(queue_num >= dev->nr_req))
		return 0;
	return virtscsi_vq_drain(&dev->req[queue_num], VIRTSCSI_DRAIN_SRC_POLL);
}

/*
 * Interrupt queues follow the vectors' affinity where the kernel can tell
 * it; poll queues are spread over all CPUs.
 */
static void virtscsi_map_irq_queues(struct virtscsi_dev *dev,
				    struct blk_mq_queue_map *map)
{
	blk_mq_map_hw_queues(map, &dev->vdev->dev, SQCQ_VQ_REQ0);
}

static sqcq_map_queues_ret_t virtscsi_map_queues(struct Scsi_Host *shost)
{
	struct virtscsi_dev *dev = virtscsi_shost_dev(shost);
	struct blk_mq_queue_map *map;
	unsigned int i, offset = 0;

	for (i = 0; i < sqcq_shost_nr_maps(shost); i++) {
		map = &shost->tag_set.map[i];
		map->queue_offset = offset;
		if (i == HCTX_TYPE_DEFAULT)
			map->nr_queues = dev->nr_irq;
		else if (i == HCTX_TYPE_POLL)
			map->nr_queues = dev->nr_poll;
		else
			map->nr_queues = 0;
		if (!map->nr_queues)
			continue;
		if (i == HCTX_TYPE_POLL)
			blk_mq_map_queues(map);
		else
			virtscsi_map_irq_queues(dev, map);
		offset += map->nr_queues;
	}
	SQCQ_MAP_QUEUES_DONE;
}

/* ------------------------------------------------------------------ */
/* Task management (control queue)                                     */
/* ------------------------------------------------------------------ */

static void virtscsi_tmf_done(struct virtscsi_dev *dev, void *buf)
{
	struct virtscsi_tmf *tmf = buf;

	/* Only in a test build (common/sqcq_faults.h): an answer lost. */
	if (sqcq_fault_setup_unanswered(le32_to_cpu(tmf->req.sqcq.tmf.subtype) ==
					SQCQ_TMF_SUBTYPE_SETUP))
		return;

	/* The waiter frees @tmf once it sees this; nothing may touch it after. */
	complete(&tmf->done);
}

static const char *virtscsi_tmf_name(u32 subtype)
{
	switch (subtype) {
	case VIRTIO_SCSI_T_TMF_ABORT_TASK:
		return "ABORT TASK";
	case VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET:
		return "LOGICAL UNIT RESET";
	}
	return "TMF";
}

/*
 * Only in a test build (common/sqcq_faults.h): whether the device is kept
 * from hearing of @tmf, a SCSI TMF left unanswered on the ring.
 */
static bool virtscsi_tmf_unheard(struct virtscsi_dev *dev,
				 struct virtscsi_tmf *tmf)
{
	u32 subtype = virtio32_to_cpu(dev->vdev, tmf->req.tmf.subtype);

	return sqcq_fault_tmf_unanswered(subtype == VIRTIO_SCSI_T_TMF_ABORT_TASK ||
					 subtype == VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET);
}

/*
 * Queue @tmf (@out_len readable bytes of its request, then its response
 * buffer) on the control queue.  Returns 0 when it is on the ring (the
 * device owns it now: see virtscsi_ctrl_wait()), else -errno (the caller still
 * owns it).
 */
static int virtscsi_ctrl_queue(struct virtscsi_dev *dev, struct virtscsi_tmf *tmf,
			       size_t out_len)
{
	struct scatterlist out, in, *sgs[2] = { &out, &in };
	struct virtscsi_vq *q = &dev->ctrl;
	struct virtqueue *kick = NULL;
	bool unheard = virtscsi_tmf_unheard(dev, tmf);
	unsigned long flags;
	int ret;

	init_completion(&tmf->done);
	sg_init_one(&out, &tmf->req, out_len);
	sg_init_one(&in, &tmf->resp, sizeof(tmf->resp));

	spin_lock_irqsave(&q->lock, flags);
	ret = virtscsi_vq_add(q, sgs, 1, 1, tmf, true, &kick);
	spin_unlock_irqrestore(&q->lock, flags);
	if (!unheard)
		virtscsi_vq_notify(kick);
	return ret;
}

/*
 * Wait until the device returned @tmf (answered, or handed back by a reset:
 * virtscsi_reclaim()).  Every SQCQ_CTRL_REAP the control queue is reaped
 * here, so a lost interrupt costs seconds, not forever.  @limit (jiffies, a
 * multiple of SQCQ_CTRL_REAP; 0: none) ends the wait with -ETIMEDOUT, and
 * so does a broken control queue.
 * @killable (probe only): a fatal signal ends it with -EINTR.  After
 * either the device still owns @tmf and may write its answer: the caller
 * keeps it until the device is reset.
 */
static int virtscsi_ctrl_wait(struct virtscsi_dev *dev, struct virtscsi_tmf *tmf,
			      const char *what, bool killable, unsigned long limit)
{
	unsigned long waited = 0;
	long left;

	atomic_inc(&dev->ctrl_waiting);
	for (;;) {
		if (killable)
			left = wait_for_completion_killable_timeout(&tmf->done,
								    SQCQ_CTRL_REAP);
		else
			left = wait_for_completion_timeout(&tmf->done,
							   SQCQ_CTRL_REAP);
		if (left < 0)
			break;
		if (!left) {
			virtscsi_vq_drain(&dev->ctrl, VIRTSCSI_DRAIN_SRC_EH);
			left = completion_done(&tmf->done);
			if (!left && !virtscsi_tmf_unheard(dev, tmf))
				virtscsi_vq_notify_anyway(&dev->ctrl);
		}
		if (left)
			break;
		/* Nothing comes back from a broken ring: only a reset ends it. */
		if (virtscsi_vq_is_broken(&dev->ctrl))
			break;
		waited += SQCQ_CTRL_REAP;
		if (limit && waited >= limit)
			break;
		if (waited == SQCQ_CTRL_SLOW) {
			atomic64_inc(&dev->tmf_slow);
			dev_warn(&dev->vdev->dev, "%s: no answer after %u s; still waiting (the device owns the request until it answers or is reset)\n",
				 what, SQCQ_CTRL_SLOW / HZ);
		}
	}
	atomic_dec(&dev->ctrl_waiting);
	if (left < 0)
		return -EINTR;
	if (!left)
		return -ETIMEDOUT;
	if (waited >= SQCQ_CTRL_SLOW)
		dev_info(&dev->vdev->dev, "%s: answered after about %lu s\n",
			 what, waited / HZ);
	return 0;
}

/* Keep @tmf, which a broken device still owns, until its reset. */
static void virtscsi_tmf_hold(struct virtscsi_dev *dev, struct virtscsi_tmf *tmf)
{
	unsigned long flags;

	spin_lock_irqsave(&dev->ctrl.lock, flags);
	list_add_tail(&tmf->held, &dev->held_tmfs);
	spin_unlock_irqrestore(&dev->ctrl.lock, flags);
}

/*
 * Send a TMF and wait for its answer, without a time limit unless the
 * control queue breaks (see virtscsi_ctrl_wait()).  Returns SUCCESS or
 * FAILED (the SCSI EH values).
 */
static int virtscsi_send_tmf(struct virtscsi_dev *dev, struct scsi_cmnd *sc,
			     u32 subtype, u64 tag)
{
	struct virtio_device *vdev = dev->vdev;
	struct virtscsi_tmf *tmf;
	int ret;
	u8 resp;

	tmf = kzalloc(sizeof(*tmf), GFP_NOIO);
	if (!tmf)
		return FAILED;
	tmf->req.tmf.type = cpu_to_virtio32(vdev, VIRTIO_SCSI_T_TMF);
	tmf->req.tmf.subtype = cpu_to_virtio32(vdev, subtype);
	tmf->req.tmf.tag = cpu_to_virtio64(vdev, tag);
	virtscsi_encode_lun(tmf->req.tmf.lun, sc->device);

	ret = virtscsi_ctrl_queue(dev, tmf, sizeof(tmf->req.tmf));
	if (ret) {
		/* Once per command of a broken device: rate-limited. */
		virtscsi_err_rl(dev, "%s: cannot queue on the control queue (%d)\n",
				virtscsi_tmf_name(subtype), ret);
		kfree(tmf);
		return FAILED;
	}
	/* Not killable: the error handler is a kernel thread. */
	if (virtscsi_ctrl_wait(dev, tmf, virtscsi_tmf_name(subtype), false, 0)) {
		/* The control queue broke: the device owns @tmf until the reset. */
		virtscsi_tmf_hold(dev, tmf);
		virtscsi_err_rl(dev, "%s: control queue broken; the request is held until a host reset\n",
				virtscsi_tmf_name(subtype));
		return FAILED;
	}

	resp = tmf->resp.tmf.response;
	kfree(tmf);
	/* The device has finished with the commands concerned: reap them. */
	virtscsi_drain_requests(dev);
	if (resp == SQCQ_VIRTIO_SCSI_S_FUNCTION_COMPLETE ||
	    resp == VIRTIO_SCSI_S_FUNCTION_SUCCEEDED)
		return SUCCESS;
	sdev_printk(KERN_WARNING, sc->device, "%s: device answered %u\n",
		    virtscsi_tmf_name(subtype), resp);
	return FAILED;
}

/*
 * One rate-limited line for a command the device keeps past its timeout:
 * the queue's counts and doorbells, what a hang needs to be understood.
 */
static void virtscsi_timeout_report(struct virtscsi_dev *dev, struct virtscsi_vq *q)
{
	u32 sq = U32_MAX, cq = U32_MAX;	/* idx << 16 | flags; MAX: none */
	unsigned long flags;
	u64 reqs, done;
	u16 avail;

	spin_lock_irqsave(&q->lock, flags);
	reqs = q->st.requests;
	done = q->st.completions;
	avail = q->avail_shadow;
	if (q->sq)
		sq = sqcq_load16(&q->sq->idx) << 16 | sqcq_load16(&q->sq->flags);
	if (q->cq)
		cq = sqcq_load16(&q->cq->idx) << 16 | sqcq_load16(&q->cq->flags);
	spin_unlock_irqrestore(&q->lock, flags);
	virtscsi_err_rl(dev, "%s: a command is past its timeout (requests %llu, completions %llu, avail %u, SQ idx/flags %#x, CQ %#x; ~0: none); notified again, still waiting\n",
			q->name, reqs, done, avail, sq, cq);
}

/*
 * A command outlived its timeout.  First reap its queue, so a lost
 * notification (an interrupt, or a CQ doorbell the poll thread slept
 * through) costs one timeout.  If the command was there it is complete now
 * and the midlayer sees that.  Otherwise the device still owns it, its data
 * pages and its response buffer: restart the timer and keep waiting, as
 * upstream virtio_scsi does.  Aborting or failing it would hand memory the
 * device may still write to back to its owner (docs/error-handling.md).
 * Only a broken ring goes to error handling, which ends in a host reset.
 */
static enum scsi_timeout_action virtscsi_eh_timed_out(struct scsi_cmnd *sc)
{
	struct virtscsi_dev *dev = virtscsi_shost_dev(sc->device->host);
	struct virtscsi_vq *q = virtscsi_cmd_queue(dev, sc);

	virtscsi_vq_drain(q, VIRTSCSI_DRAIN_SRC_EH);
	if (test_bit(SCMD_STATE_COMPLETE, &sc->state))
		return SCSI_EH_NOT_HANDLED;	/* the midlayer sees it done */
	/*
	 * A broken ring never returns it: error handling takes it, and its
	 * last step, the host reset, hands it back from a reset device.
	 */
	if (virtscsi_vq_is_broken(q))
		return SCSI_EH_NOT_HANDLED;
	virtscsi_timeout_report(dev, q);
	virtscsi_vq_notify_anyway(q);
	atomic64_inc(&dev->timer_resets);
	return SCSI_EH_RESET_TIMER;
}

static int virtscsi_eh_abort(struct scsi_cmnd *sc)
{
	struct virtscsi_dev *dev = virtscsi_shost_dev(sc->device->host);

	scmd_printk(KERN_INFO, sc, "abort\n");
	return virtscsi_send_tmf(dev, sc, VIRTIO_SCSI_T_TMF_ABORT_TASK,
			     blk_mq_unique_tag(scsi_cmd_to_rq(sc)));
}

static int virtscsi_eh_device_reset(struct scsi_cmnd *sc)
{
	struct virtscsi_dev *dev = virtscsi_shost_dev(sc->device->host);

	sdev_printk(KERN_INFO, sc->device, "LUN reset\n");
	return virtscsi_send_tmf(dev, sc, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0);
}

#ifdef CONFIG_PM_SLEEP
/*
 * The last step of the midlayer's error handling, reached when a ring broke
 * (virtscsi_eh_timed_out()) or when an abort and a LUN reset failed; every
 * command of the host is in the midlayer's hands then.  Also asked for by
 * an SG_SCSI_RESET ioctl, with commands in flight: no new one is
 * dispatched meanwhile, one being queued is sent back to the block layer.
 * Reset the device, which hands back all it held (DID_RESET: retried),
 * and set it up again through the virtio core's restore sequence (status,
 * features, virtqueues, DRIVER_OK, then virtscsi_restore(): events and an
 * SQ/CQ negotiation); the midlayer retries the commands on the new rings.
 * Event work is not waited for, since it may be waiting for this very
 * recovery: its buffer goes back to the device when it is done.
 */
static int virtscsi_eh_host_reset(struct scsi_cmnd *sc)
{
	struct Scsi_Host *shost = sc->device->host;
	struct virtscsi_dev *dev = virtscsi_shost_dev(shost);
	struct virtio_device *vdev = dev->vdev;
	int ret;

	atomic64_inc(&dev->host_resets);
	shost_printk(KERN_WARNING, shost, "host reset: resetting the virtio device\n");
	WRITE_ONCE(dev->eh_resetting, true);
	ret = virtio_device_freeze(vdev);
	if (!ret)
		ret = virtio_device_restore(vdev);
	WRITE_ONCE(dev->eh_resetting, false);
	if (ret) {
		shost_printk(KERN_ERR, shost, "host reset failed (%d): the device is not usable\n",
			     ret);
		return FAILED;
	}
	shost_printk(KERN_INFO, shost, "host reset done: %s mode\n",
		     READ_ONCE(dev->state) == VIRTSCSI_STATE_ON ? "SQ/CQ" : "classic");
	return SUCCESS;
}

#define SQCQ_SHT_HOST_RESET	.eh_host_reset_handler = virtscsi_eh_host_reset,
#else
/* Without the core's restore sequence there is no way to reset. */
#define SQCQ_SHT_HOST_RESET
#endif

/* ------------------------------------------------------------------ */
/* Events (hotplug, parameter changes)                                 */
/* ------------------------------------------------------------------ */

/*
 * Hand @e's buffer to the device, unless the device or the event's work
 * holds it, or events are off.  @from_work: that work is done with it.
 */
static void virtscsi_event_post(struct virtscsi_event *e, bool from_work)
{
	struct virtscsi_dev *dev = e->dev;
	struct virtscsi_vq *q = &dev->event;
	struct scatterlist sg, *sgs[1] = { &sg };
	unsigned long flags;
	struct virtqueue *kick = NULL;
	int ret = 0;

	spin_lock_irqsave(&q->lock, flags);
	if (from_work)
		e->in_work = false;
	/* Torn down rings (q->vq NULL) are no error here: nothing to post. */
	if (dev->events_on && q->vq && !e->posted && !e->in_work) {
		memset(&e->ev, 0, sizeof(e->ev));
		sg_init_one(&sg, &e->ev, sizeof(e->ev));
		ret = virtscsi_vq_add(q, sgs, 0, 1, e, true, &kick);
		e->posted = !ret;
	}
	spin_unlock_irqrestore(&q->lock, flags);
	if (ret)
		virtscsi_err_rl(dev, "cannot post an event buffer (%d)\n", ret);
	virtscsi_vq_notify(kick);
}

static void virtscsi_event_reset(struct virtscsi_dev *dev, u32 reason,
				 unsigned int target, u64 lun)
{
	struct scsi_device *sdev;

	switch (reason) {
	case VIRTIO_SCSI_EVT_RESET_RESCAN:
		/* LUN 0 stands for the target: scan all of its LUNs. */
		if (!lun) {
			scsi_scan_target(&dev->shost->shost_gendev, 0, target,
					 SCAN_WILD_CARD, SCSI_SCAN_INITIAL);
			break;
		}
		if (scsi_add_device(dev->shost, 0, target, lun))
			dev_info(&dev->vdev->dev, "hotplugged %u:%llu could not be added\n",
				 target, lun);
		break;
	case VIRTIO_SCSI_EVT_RESET_REMOVED:
		sdev = scsi_device_lookup(dev->shost, 0, target, lun);
		if (sdev) {
			scsi_remove_device(sdev);
			scsi_device_put(sdev);
		}
		break;
	case VIRTIO_SCSI_EVT_RESET_HARD:
		break;
	default:
		virtscsi_err_rl(dev, "unknown transport reset reason %u\n", reason);
	}
}

/*
 * A parameter change event's reason holds the sense code: ASC in its low
 * byte, ASCQ in the next.  The disk is read again for ASC 0x2a with ASCQ
 * 0x00 (parameters changed), 0x01 (mode parameters changed) or 0x09
 * (capacity data has changed); the other 0x2a codes (reservations,
 * registrations, access states) change nothing a rescan would read.
 */
static bool virtscsi_param_change_rescans(u32 reason)
{
	u8 asc = reason & 0xff, ascq = (reason >> 8) & 0xff;

	return asc == 0x2a && (ascq == 0x00 || ascq == 0x01 || ascq == 0x09);
}

static void virtscsi_event_param(struct virtscsi_dev *dev, u32 reason,
				 unsigned int target, u64 lun)
{
	struct scsi_device *sdev;

	sdev = scsi_device_lookup(dev->shost, 0, target, lun);
	if (!sdev)
		return;
	if (virtscsi_param_change_rescans(reason))
		scsi_rescan_device(sdev);
	scsi_device_put(sdev);
}

/*
 * A transport reset or parameter change event (@type): decode the LUN it
 * names and hand the event on, or drop it with a line when the LUN is not
 * one this host can have.
 */
static void virtscsi_event_lun(struct virtscsi_dev *dev, u32 type,
			       const struct virtio_scsi_event *ev)
{
	u32 reason = virtio32_to_cpu(dev->vdev, ev->reason);
	const u8 *lun = ev->lun;
	unsigned int target;
	u64 l;

	if (lun[0] != 1) {
		virtscsi_err_rl(dev, "event for a LUN in an unknown format (%*ph)\n",
				8, lun);
		return;
	}
	target = lun[1];
	/* As the scan numbers it: LUN < 256 as is, else SQCQ_LUN_FLAT + LUN. */
	l = (lun[2] << 8) | lun[3];
	if (target >= dev->shost->max_id || l >= dev->shost->max_lun) {
		virtscsi_err_rl(dev, "event for target %u LUN %llu outside the device's range\n",
				target, l);
		return;
	}
	if (type == VIRTIO_SCSI_T_TRANSPORT_RESET)
		virtscsi_event_reset(dev, reason, target, l);
	else
		virtscsi_event_param(dev, reason, target, l);
}

/* INQUIRY @sdev into @buf; the SCSI result (> 0 on error) or -errno. */
static int virtscsi_inquiry(struct scsi_device *sdev, u8 *buf, unsigned int len)
{
	u8 cdb[6] = { INQUIRY, 0, 0, 0, len, 0 };

	return scsi_execute_cmd(sdev, cdb, REQ_OP_DRV_IN, buf, len,
				30 * HZ, 3, NULL);
}

/*
 * Events were missed: a LUN may have gone without its REMOVED event.  Ask
 * each one; the device answers a LUN that is gone with a peripheral
 * qualifier (not attached) or, once the target has no LUN left, with
 * BAD_TARGET.  Remove those.
 */
static void virtscsi_remove_unplugged(struct virtscsi_dev *dev)
{
	struct scsi_device *sdev;
	unsigned int len;
	u8 *buf;
	int ret;

	buf = kmalloc(255, GFP_KERNEL);
	if (!buf)
		return;
	shost_for_each_device(sdev, dev->shost) {
		len = sdev->inquiry_len ?: 36;
		memset(buf, 0, len);
		ret = virtscsi_inquiry(sdev, buf, len);
		if ((!ret && buf[0] >> 5) ||
		    (ret > 0 && host_byte(ret) == DID_BAD_TARGET)) {
			sdev_printk(KERN_INFO, sdev, "gone while events were missed; removing\n");
			scsi_remove_device(sdev);
		}
	}
	kfree(buf);
}

static void virtscsi_event_work(struct work_struct *work)
{
	struct virtscsi_event *e = container_of(work, struct virtscsi_event, work);
	struct virtscsi_dev *dev = e->dev;
	u32 event = virtio32_to_cpu(dev->vdev, e->ev.event);

	if (event & VIRTIO_SCSI_T_EVENTS_MISSED) {
		dev_info(&dev->vdev->dev, "events were missed; rescanning\n");
		virtscsi_remove_unplugged(dev);
		scsi_scan_host(dev->shost);
		event &= ~VIRTIO_SCSI_T_EVENTS_MISSED;
	}
	switch (event) {
	case VIRTIO_SCSI_T_NO_EVENT:
		break;
	case VIRTIO_SCSI_T_TRANSPORT_RESET:
	case VIRTIO_SCSI_T_PARAM_CHANGE:
		virtscsi_event_lun(dev, event, &e->ev);
		break;
	default:
		virtscsi_err_rl(dev, "unknown event %#x\n", event);
	}
	virtscsi_event_post(e, true);
}

static void virtscsi_event_done(struct virtscsi_dev *dev, void *buf,
				unsigned int len)
{
	struct virtscsi_event *e = buf;
	unsigned long flags;
	bool short_len = len && len < sizeof(e->ev);

	spin_lock_irqsave(&dev->event.lock, flags);
	e->posted = false;	/* the device gave it back */
	if (dev->events_on && !short_len) {
		e->in_work = true;
		queue_work(system_freezable_wq, &e->work);
	}
	spin_unlock_irqrestore(&dev->event.lock, flags);
	if (short_len) {
		virtscsi_err_rl(dev, "event: used length %u shorter than %zu; ignored\n",
				len, sizeof(e->ev));
		atomic64_inc(&dev->bad_completions);
		virtscsi_event_post(e, false);
	}
}

/* Whether event buffers are posted and event work queued; takes event.lock. */
static void virtscsi_events_set(struct virtscsi_dev *dev, bool on)
{
	unsigned long flags;

	spin_lock_irqsave(&dev->event.lock, flags);
	dev->events_on = on;
	spin_unlock_irqrestore(&dev->event.lock, flags);
}

static void virtscsi_events_start(struct virtscsi_dev *dev)
{
	unsigned int i;

	virtscsi_events_set(dev, true);
	/* Those the device or a running work holds are skipped. */
	for (i = 0; i < SQCQ_NR_EVENTS; i++)
		virtscsi_event_post(&dev->events[i], false);
}

/*
 * After this, no event buffer is re-posted, and with @wait no event work
 * runs.  A host reset must not wait for event work (it may be waiting for
 * the reset): a running work's buffer then goes back to the device when
 * it is done (virtscsi_event_post()).
 */
static void virtscsi_events_stop(struct virtscsi_dev *dev, bool wait)
{
	unsigned long flags;
	unsigned int i;

	virtscsi_events_set(dev, false);
	if (!wait)
		return;
	for (i = 0; i < SQCQ_NR_EVENTS; i++) {
		cancel_work_sync(&dev->events[i].work);
		/* A work cancelled before it ran no longer holds its buffer. */
		spin_lock_irqsave(&dev->event.lock, flags);
		dev->events[i].in_work = false;
		spin_unlock_irqrestore(&dev->event.lock, flags);
	}
}

/* ------------------------------------------------------------------ */
/* Virtqueue setup and teardown                                        */
/* ------------------------------------------------------------------ */

static struct virtscsi_vq *virtscsi_vq_at(struct virtscsi_dev *dev, unsigned int index)
{
	if (index == SQCQ_VQ_CTRL)
		return &dev->ctrl;
	if (index == SQCQ_VQ_EVENT)
		return &dev->event;
	return &dev->req[index - SQCQ_VQ_REQ0];
}

static vq_callback_t *virtscsi_vq_callback(const struct virtscsi_vq *q)
{
	switch (q->kind) {
	case VIRTSCSI_VQ_KIND_CTRL:
		return virtscsi_ctrl_cb;
	case VIRTSCSI_VQ_KIND_EVENT:
		return virtscsi_event_cb;
	case VIRTSCSI_VQ_KIND_IRQ:
		return virtscsi_req_cb;
	case VIRTSCSI_VQ_KIND_POLL:
		break;
	}
	return NULL;	/* poll queue: no interrupt vector at all */
}

static int virtscsi_find_vqs(struct virtscsi_dev *dev, unsigned int n,
			     struct virtqueue **vqs, struct irq_affinity *desc)
{
	struct virtqueue_info *info;
	unsigned int i;
	int ret;

	info = kcalloc(n, sizeof(*info), GFP_KERNEL);
	if (!info)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		info[i].name = virtscsi_vq_at(dev, i)->name;
		info[i].callback = virtscsi_vq_callback(virtscsi_vq_at(dev, i));
	}
	ret = virtio_find_vqs(dev->vdev, n, vqs, info, desc);
	kfree(info);
	return ret;
}

static int virtscsi_vqs_setup(struct virtscsi_dev *dev)
{
	struct irq_affinity desc = { .pre_vectors = SQCQ_VQ_REQ0 };
	unsigned int n = SQCQ_VQ_REQ0 + dev->nr_req, i;
	struct virtqueue **vqs;
	unsigned long flags;
	int ret;

	vqs = kcalloc(n, sizeof(*vqs), GFP_KERNEL);
	if (!vqs)
		return -ENOMEM;
	ret = virtscsi_find_vqs(dev, n, vqs, &desc);
	if (ret)
		goto out;
	for (i = 0; i < n; i++) {
		struct virtscsi_vq *q = virtscsi_vq_at(dev, i);

		spin_lock_irqsave(&q->lock, flags);
		q->vq = vqs[i];
		q->broken_seen = false;
		q->avail_shadow = 0;	/* a new ring starts at index 0 */
		/* Poll queues: tell the device not to bother interrupting. */
		if (q->kind == VIRTSCSI_VQ_KIND_POLL)
			virtqueue_disable_cb(q->vq);
		spin_unlock_irqrestore(&q->lock, flags);
	}
	/* The driver chooses the CDB and sense sizes of its requests. */
	virtio_cwrite32(dev->vdev, offsetof(struct virtio_scsi_config, cdb_size),
			VIRTIO_SCSI_CDB_SIZE);
	virtio_cwrite32(dev->vdev,
			offsetof(struct virtio_scsi_config, sense_size),
			VIRTIO_SCSI_SENSE_SIZE);
out:
	kfree(vqs);
	return ret;
}

/* Give back what a reset device still held. */
static void virtscsi_reclaim(struct virtscsi_dev *dev, struct virtscsi_vq *q,
			     void *buf, bool host_removed)
{
	struct virtscsi_tmf *tmf;
	struct scsi_cmnd *sc;
	unsigned long flags;

	switch (q->kind) {
	case VIRTSCSI_VQ_KIND_CTRL:
		/* Its waiter (or virtscsi_sqcq_stop() for a stale one) frees it. */
		tmf = buf;
		tmf->resp.tmf.response = VIRTIO_SCSI_S_FAILURE;
		complete(&tmf->done);
		break;
	case VIRTSCSI_VQ_KIND_EVENT:
		/* Embedded in dev; the next virtscsi_events_start() posts it. */
		spin_lock_irqsave(&q->lock, flags);
		((struct virtscsi_event *)buf)->posted = false;
		spin_unlock_irqrestore(&q->lock, flags);
		break;
	default:
		/*
		 * After scsi_remove_host() every command has ended: one still
		 * on a ring is one that error handling ended without a host
		 * reset (a broken ring, a build without the handler), and its
		 * memory went with the host's requests.  Not touched.
		 */
		if (host_removed) {
			dev->stale_cmds++;
			break;
		}
		/*
		 * A host reset retries what it hands back (DID_RESET; the
		 * commands error handling holds ignore it).
		 */
		sc = buf;
		sc->result = (dev->eh_resetting ? DID_RESET : DID_NO_CONNECT) << 16;
		scsi_done(sc);
		break;
	}
}

/*
 * Reset the device and delete its virtqueues.  After the reset the device
 * no longer touches any buffer, so everything still on the rings is handed
 * back: outstanding control requests fail, commands end with DID_RESET (a
 * host reset retries them) -- except after scsi_remove_host()
 * (@host_removed), when a command left on a ring was already ended by the
 * midlayer (virtscsi_reclaim()).
 */
static void virtscsi_vqs_teardown(struct virtscsi_dev *dev, bool host_removed)
{
	unsigned int n = SQCQ_VQ_REQ0 + dev->nr_req, i;
	unsigned long flags;
	struct virtqueue *vq;
	void *buf;

	virtio_reset_device(dev->vdev);
	for (i = 0; i < n; i++) {
		struct virtscsi_vq *q = virtscsi_vq_at(dev, i);

		spin_lock_irqsave(&q->lock, flags);
		vq = q->vq;
		q->vq = NULL;	/* drains and submitters now back off */
		spin_unlock_irqrestore(&q->lock, flags);
		if (!vq)
			continue;
		while ((buf = virtqueue_detach_unused_buf(vq)))
			virtscsi_reclaim(dev, q, buf, host_removed);
	}
	if (dev->stale_cmds)
		dev_warn(&dev->vdev->dev, "%u commands ended by error handling were still on the rings; left alone\n",
			 dev->stale_cmds);
	dev->stale_cmds = 0;
	dev->vdev->config->del_vqs(dev->vdev);
	/* No callback can run any more: no event work can be queued again. */
	for (i = 0; i < SQCQ_NR_EVENTS; i++)
		cancel_work_sync(&dev->events[i].work);
}

/* ------------------------------------------------------------------ */
/* SQ/CQ doorbells (docs/protocol.md)                                  */
/* ------------------------------------------------------------------ */

/*
 * Bind the poll thread to one CPU of poll_cpu (the SCSI host number picks
 * round-robin), or to the housekeeping CPUs when poll_cpu is empty.  A CPU
 * of poll_cpu that is offline leaves it unbound, with one line, until that
 * CPU comes back (sqcq_poll_bind_current()).
 */
static int virtscsi_poll_bind(struct virtscsi_dev *dev)
{
	int cpu = sqcq_poll_bind_current(dev->shost->host_no);

	if (cpu >= 0)
		dev_info(&dev->vdev->dev, "SQ/CQ poll thread bound to CPU %d\n",
			 cpu);
	else if (cpu == -EAGAIN)
		dev_warn(&dev->vdev->dev, "the SQ/CQ poll thread's CPU in poll_cpu is offline: unbound until it is back\n");
	return cpu;
}

/* Interrupt queues are the ones the poll thread serves. */
#define virtscsi_for_each_polled(dev, q, i) \
	for ((i) = 0; (i) < (dev)->nr_irq && ((q) = &(dev)->req[i]); (i)++)

/* Whether the host set STOPPED on request queue @i (any context). */
static bool virtscsi_host_stopped(struct virtscsi_dev *dev, unsigned int i)
{
	return sqcq_load16(&dev->area->q[i].sq_line.sq.flags) &
	       SQCQ_SQ_F_STOPPED;
}

/*
 * The host stopped polling (docs/protocol.md section 5): it sets SQ NEED_WAKEUP |
 * STOPPED for good and no longer moves the CQ indices.  Whoever sees it
 * first (a submitter, the interrupt, the poll thread) hands the switch back
 * to classic to virtscsi_stop_work().
 */
static void virtscsi_host_stop_seen(struct virtscsi_dev *dev)
{
	if (READ_ONCE(dev->state) == VIRTSCSI_STATE_ON)
		schedule_work(&dev->stop_work);
}

/*
 * Complete what the host published on each CQ doorbell; true if any.
 * *@stopped: the host set STOPPED.
 */
static bool virtscsi_poll_cq(struct virtscsi_dev *dev, bool *stopped)
{
	struct virtscsi_vq *q;
	bool work = false;
	unsigned int i;
	u16 idx;

	virtscsi_for_each_polled(dev, q, i) {
		if (unlikely(virtscsi_host_stopped(dev, i)))
			*stopped = true;
		/* Read barrier inside: the used ring after the index. */
		idx = sqcq_consume_idx(&q->cq->idx);
		if (idx == q->cq_seen)
			continue;
		q->cq_seen = idx;
		WRITE_ONCE(q->st.doorbells, q->st.doorbells + 1);
		virtscsi_vq_drain(q, VIRTSCSI_DRAIN_SRC_SQCQ);
		work = true;
	}
	return work;
}

/* Publish CQ NEED_WAKEUP on every polled queue; false when work arrived. */
static bool virtscsi_poll_prepare_sleep(struct virtscsi_dev *dev)
{
	struct virtscsi_vq *q;
	unsigned int i, j;

	virtscsi_for_each_polled(dev, q, i) {
		/*
		 * Set NEED_WAKEUP, full barrier, re-read the index
		 * (docs/protocol.md section 4); pairs with sqcq_publish() in
		 * the host's completion path.  The caller is armed: TASK_INTERRUPTIBLE, and the
		 * queue interrupt wakes it (virtscsi_req_cb()).
		 */
		if (sqcq_prepare_sleep(&q->cq->flags, SQCQ_CQ_F_NEED_WAKEUP,
				       &q->cq->idx, q->cq_seen))
			continue;
		for (j = 0; j < i; j++)
			sqcq_clear_need_wakeup(&dev->req[j].cq->flags,
					       SQCQ_CQ_F_NEED_WAKEUP);
		return false;
	}
	return true;
}

/*
 * How long the poll thread may go without a pass while the CQs ask for no
 * interrupts.  Beyond it, the watchdog asks for them in its place: the
 * most a completion waits for a starved poll thread.  Longer than a
 * scheduler tick, so that the timer adds few interrupts of its own.
 */
#define SQCQ_POLL_WATCHDOG_NS	(10 * NSEC_PER_MSEC)

/*
 * The poll thread goes on polling: the CQs stop asking for interrupts, and
 * the watchdog watches that it keeps running.
 */
static void virtscsi_poll_awake(struct virtscsi_dev *dev)
{
	struct virtscsi_vq *q;
	unsigned int i;

	WRITE_ONCE(dev->poll_rescued, false);
	WRITE_ONCE(dev->poll_spinning, true);
	/*
	 * Armed once per wakeup, not per yield: starting the timer again
	 * reprograms the local APIC timer, a VM exit each time.  A timer
	 * whose callback is running and about to stop stays queued after
	 * this start (hrtimer core).
	 */
	if (!dev->wd_armed) {
		WRITE_ONCE(dev->wd_armed, true);
		WRITE_ONCE(dev->poll_wd_starts, dev->poll_wd_starts + 1);
		hrtimer_start(&dev->poll_watchdog,
			      ns_to_ktime(SQCQ_POLL_WATCHDOG_NS),
			      HRTIMER_MODE_REL_HARD);
	}
	virtscsi_for_each_polled(dev, q, i)
		sqcq_clear_need_wakeup(&q->cq->flags, SQCQ_CQ_F_NEED_WAKEUP);
}

/*
 * Ask for interrupts on every polled CQ.  The full barrier inside
 * sqcq_request_notify() orders the flag before the caller's re-read of the
 * CQ (virtscsi_poll_reap_cqs()), which must follow: what the host
 * published before it could see the flag raises no interrupt
 * (docs/protocol.md section 4: flag, barrier, re-read).  Touches only the
 * flags: any context, hard interrupts included.
 */
static void virtscsi_poll_ask_irqs(struct virtscsi_dev *dev)
{
	struct virtscsi_vq *q;
	unsigned int i;

	virtscsi_for_each_polled(dev, q, i)
		sqcq_request_notify(&q->cq->flags, SQCQ_CQ_F_NEED_WAKEUP);
}

/*
 * The re-read: complete what every polled CQ holds.  Takes the queues'
 * locks and calls scsi_done(): task context, a threadable interrupt or an
 * irq_work, never a hard-irq timer (a sleeping lock on PREEMPT_RT).
 */
static void virtscsi_poll_reap_cqs(struct virtscsi_dev *dev)
{
	struct virtscsi_vq *q;
	unsigned int i;

	virtscsi_for_each_polled(dev, q, i)
		virtscsi_vq_drain(q, VIRTSCSI_DRAIN_SRC_SQCQ);
}

/* Ask for interrupts, then reap what came before.  Task context. */
static void virtscsi_poll_request_irqs(struct virtscsi_dev *dev)
{
	virtscsi_poll_ask_irqs(dev);
	virtscsi_poll_reap_cqs(dev);
}

/*
 * The watchdog's re-read (virtscsi_poll_watchdog()).  An irq_work without
 * IRQ_WORK_HARD_IRQ: a self-interrupt on a stock kernel, the irq_work
 * thread on PREEMPT_RT, where the watchdog's hard-irq timer cannot take
 * the queues' locks.  Should that thread be starved too, the next
 * completion raises a queue interrupt, whose handler reaps the whole CQ.
 */
static void virtscsi_poll_reap(struct irq_work *w)
{
	virtscsi_poll_reap_cqs(container_of(w, struct virtscsi_dev, poll_reap));
}

/*
 * A queue interrupt, its completions done: wake the sleeping poll thread
 * unless its window fell to 0 and this completion came later than
 * poll_idle_us after the last work (sqcq_poll_wake_pays()).  Such a thread
 * stays asleep and the CQs keep asking for interrupts: completions come as
 * in classic mode, without a thread switch each.  Interrupt context.
 */
static void virtscsi_poll_wake(struct virtscsi_dev *dev)
{
	u64 now = ktime_get_ns(), last = READ_ONCE(dev->poll_last_ns), win;
	bool wake;

	wake = sqcq_poll_wake_pays(sqcq_poll_window(READ_ONCE(dev->poll_window_ns)),
				   now > last ? now - last : 0,
				   sqcq_poll_ceil_ns(), &win);
	if (!wake) {
		/* The next gap counts from this work. */
		WRITE_ONCE(dev->poll_last_ns, now);
		WRITE_ONCE(dev->poll_irq_only, dev->poll_irq_only + 1);
		return;
	}
	/*
	 * Woken, the thread finds this work on the CQ doorbell and measures
	 * the gap itself, from poll_last_ns.
	 */
	if (READ_ONCE(sqcq_poll_adaptive))
		WRITE_ONCE(dev->poll_window_ns, win);
	wake_up_process(dev->poller);
}

/*
 * The poll thread runs at normal priority: an RT task, or any preemption
 * on a fully preemptible kernel, can keep it off the CPU while the CQs ask
 * for no interrupts, and completions would wait for it.  This hard-irq
 * timer runs every SQCQ_POLL_WATCHDOG_NS while the thread polls; when the
 * thread made no pass in a whole period it asks for interrupts in the
 * thread's place and queues virtscsi_poll_reap() to complete what was
 * already published, so completions come by interrupt (virtscsi_req_cb()
 * completes them itself) until the thread runs again and clears the flags.
 */
/*
 * Whether every polled CQ asks for interrupts.  The thread's own flag
 * stores (a clear after a wakeup, the set before a sleep) are plain
 * read-modify-writes that an interrupt can fall between, so a rescue's
 * NEED_WAKEUP can be lost to a thread that is then kept from running: the
 * watchdog looks at the flags themselves, not only at whether it rescued.
 */
static bool virtscsi_cqs_ask_irqs(struct virtscsi_dev *dev)
{
	struct virtscsi_vq *q;
	unsigned int i;

	virtscsi_for_each_polled(dev, q, i)
		if (!(sqcq_load16(&q->cq->flags) & SQCQ_CQ_F_NEED_WAKEUP))
			return false;
	return true;
}

static enum hrtimer_restart virtscsi_poll_watchdog(struct hrtimer *t)
{
	struct virtscsi_dev *dev = container_of(t, struct virtscsi_dev, poll_watchdog);
	unsigned long passes = READ_ONCE(dev->poll_passes);

	/* The thread sleeps (or stops) with the CQs asking for interrupts. */
	if (!READ_ONCE(dev->wd_armed))
		return HRTIMER_NORESTART;
	/*
	 * A yield has asked for interrupts itself: nothing to rescue.  A
	 * rescue whose flags were lost is made again.
	 */
	if (READ_ONCE(dev->poll_spinning) && passes == dev->wd_passes &&
	    (!READ_ONCE(dev->poll_rescued) || !virtscsi_cqs_ask_irqs(dev))) {
		WRITE_ONCE(dev->poll_rescued, true);
		WRITE_ONCE(dev->poll_rescues, dev->poll_rescues + 1);
		/* Hard irq: the flags here, the re-read in virtscsi_poll_reap(). */
		virtscsi_poll_ask_irqs(dev);
		irq_work_queue(&dev->poll_reap);
	}
	dev->wd_passes = passes;
	hrtimer_forward_now(t, ns_to_ktime(SQCQ_POLL_WATCHDOG_NS));
	return HRTIMER_RESTART;
}

/*
 * Another task wants this CPU: give it up with every CQ asking for
 * interrupts, so that completions do not wait for this thread to be
 * scheduled again.
 */
static void virtscsi_poll_yield(struct virtscsi_dev *dev)
{
	virtscsi_poll_request_irqs(dev);
	WRITE_ONCE(dev->poll_spinning, false);
	WRITE_ONCE(dev->poll_yields, dev->poll_yields + 1);
	sqcq_poll_give_cpu();
	virtscsi_poll_awake(dev);
}

/* Steal time of the CPU we run on, and the CPU, at the previous pass. */
struct virtscsi_steal {
	u64 ns;
	int cpu;
};

/*
 * Whether the hypervisor ran something else on this vCPU since the last
 * pass (steal time rose): spinning then burns time the host takes from
 * another guest or thread, and our peer is likely not running either.
 * Steal time moves at ticks; a move to another CPU only takes a new base.
 */
static bool virtscsi_stolen(struct virtscsi_steal *st)
{
	int cpu = raw_smp_processor_id();
	u64 ns = kcpustat_cpu(cpu).cpustat[CPUTIME_STEAL];
	bool rose = cpu == st->cpu && ns != st->ns;

	st->ns = ns;
	st->cpu = cpu;
	return rose;
}

/*
 * The poll_wake tracepoint, enabled: why the poll thread, back from its
 * sleep, runs.  Its only waker besides kthread_stop() is a queue
 * interrupt (virtscsi_poll_wake()) for a completion the host published.
 */
static void virtscsi_trace_wake(struct virtscsi_dev *dev)
{
	enum sqcq_guest_wake why = SQCQ_WAKE_OTHER;
	struct virtscsi_vq *q;
	unsigned int i;

	if (kthread_should_stop()) {
		why = SQCQ_WAKE_STOP;
	} else {
		virtscsi_for_each_polled(dev, q, i)
			if (sqcq_load16(&q->cq->idx) != q->cq_seen)
				why = SQCQ_WAKE_INTERRUPT;
	}
	trace_poll_wake(dev->shost->host_no, why);
}

/*
 * The device's poll thread: completes commands from the CQ doorbells,
 * spinning while there is work and for an idle window after it, then
 * sleeps behind CQ NEED_WAKEUP until a queue interrupt.  The window adapts
 * to the gaps between completions below poll_idle_us; when another task
 * wants the CPU it yields, and sleeps if that task is still there at the
 * next pass without work; it sleeps at once without work while the
 * hypervisor steals the vCPU (sqcq_poll_decide(), common/sqcq_poll.h).  It
 * never leaves the CPU with the CQs asking for no interrupts: it yields
 * through virtscsi_poll_yield(), and the watchdog covers preemption.  When the
 * host stops polling, it asks virtscsi_stop_work() to stop it and waits for
 * that.
 */
static int virtscsi_poll_fn(void *data)
{
	struct virtscsi_dev *dev = data;
	u64 last = ktime_get_ns();
	struct virtscsi_steal steal = { .cpu = -1 };
	enum sqcq_poll_step step = SQCQ_POLL_SPIN;
	enum sqcq_sleep_reason why = SQCQ_SLEEP_IDLE;
	bool work, stopped = false;
	struct virtscsi_vq *q;
	unsigned int i;

	hrtimer_setup(&dev->poll_watchdog, virtscsi_poll_watchdog, CLOCK_MONOTONIC,
		      HRTIMER_MODE_REL_HARD);
	/* Idle here: the previous thread synced it before it ended. */
	init_irq_work(&dev->poll_reap, virtscsi_poll_reap);
	dev->wd_armed = false;
	dev->poll_bound_gen = atomic_read(&sqcq_poll_cpu_gen) - 1;
	WRITE_ONCE(dev->poll_window_ns, sqcq_poll_window_start());
	WRITE_ONCE(dev->poll_last_ns, last);
	virtscsi_poll_awake(dev);
	while (!kthread_should_stop()) {
		WRITE_ONCE(dev->poll_passes, dev->poll_passes + 1);
		/* The watchdog asked for interrupts while we were away. */
		if (unlikely(READ_ONCE(dev->poll_rescued)))
			virtscsi_poll_awake(dev);
		if (atomic_read(&sqcq_poll_cpu_gen) != dev->poll_bound_gen) {
			int gen = atomic_read(&sqcq_poll_cpu_gen);

			dev->poll_bound_gen =
				sqcq_poll_bind_again(virtscsi_poll_bind(dev), gen);
		}
		work = virtscsi_poll_cq(dev, &stopped);
		if (unlikely(stopped))
			break;
		if (work)
			sqcq_fault_poll_hog();	/* test builds only */
		step = sqcq_poll_next(&dev->poll_window_ns, &last, work,
				      step == SQCQ_POLL_YIELD,
				      virtscsi_stolen(&steal), &why);
		if (work)
			WRITE_ONCE(dev->poll_last_ns, last);
		if (step == SQCQ_POLL_YIELD) {
			virtscsi_poll_yield(dev);
			continue;
		}
		if (step == SQCQ_POLL_SPIN) {
			if (!work)
				cpu_relax();
			/* Nothing else wants the CPU: RCU's quiescent state. */
			cond_resched();
			continue;
		}
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop()) {
			__set_current_state(TASK_RUNNING);
			break;
		}
		if (!virtscsi_poll_prepare_sleep(dev)) {
			/* Work arrived: the next pass takes it. */
			__set_current_state(TASK_RUNNING);
			continue;
		}
		/*
		 * The flags ask for interrupts: the watchdog has nothing to
		 * do and stops at its next expiry (or goes on if we are back
		 * before it).
		 */
		WRITE_ONCE(dev->poll_spinning, false);
		WRITE_ONCE(dev->wd_armed, false);
		WRITE_ONCE(dev->poll_sleeps, dev->poll_sleeps + 1);
		WRITE_ONCE(dev->poll_sleep_why[why], dev->poll_sleep_why[why] + 1);
		trace_poll_sleep(dev->shost->host_no, why, dev->poll_window_ns);
		schedule();
		WRITE_ONCE(dev->poll_wakeups, dev->poll_wakeups + 1);
		if (trace_poll_wake_enabled())
			virtscsi_trace_wake(dev);
		/* Work the interrupts completed meanwhile counts. */
		last = max(last, READ_ONCE(dev->poll_last_ns));
		virtscsi_poll_awake(dev);
	}
	WRITE_ONCE(dev->poll_spinning, false);
	WRITE_ONCE(dev->wd_armed, false);
	hrtimer_cancel(&dev->poll_watchdog);
	/* The timer can queue no more: wait for its last reap to end. */
	irq_work_sync(&dev->poll_reap);
	/*
	 * Interrupt me on every completion from now on (docs/protocol.md section 5); the
	 * barrier inside pairs with sqcq_publish() in the host.  Then reap
	 * what was published before the host saw the flag.
	 */
	virtscsi_for_each_polled(dev, q, i) {
		sqcq_stop_polling(&q->cq->flags, SQCQ_CQ_F_NEED_WAKEUP,
				  SQCQ_CQ_F_STOPPED);
		virtscsi_vq_drain(q, VIRTSCSI_DRAIN_SRC_SQCQ);
	}
	if (stopped) {
		virtscsi_host_stop_seen(dev);
		/* Only kthread_stop() (virtscsi_poller_stop()) ends the thread. */
		for (;;) {
			set_current_state(TASK_INTERRUPTIBLE);
			if (kthread_should_stop())
				break;
			schedule();
		}
		__set_current_state(TASK_RUNNING);
	}
	return 0;
}

/* Stop the poll thread if it runs; it leaves CQ NEED_WAKEUP | STOPPED. */
static void virtscsi_poller_stop(struct virtscsi_dev *dev)
{
	lockdep_assert_held(&dev->virtscsi_lock);
	/* virtscsi_req_cb() stops waking it; a wakeup in flight is harmless. */
	WRITE_ONCE(dev->poll_wake, false);
	if (dev->poller && dev->poller_running) {
		kthread_stop(dev->poller);
		dev->poller_running = false;
	}
}

/*
 * Leave SQ/CQ for exact classic behaviour: submitters decide kicks by the
 * ring's own suppression (EVENT_IDX) again, the poll thread stops (every
 * queue asks for interrupts), debugfs says classic.  The area stays
 * allocated until the device is reset or answers a teardown request
 * (virtscsi_renego_work()): the host may still hold it.
 */
static void virtscsi_go_classic(struct virtscsi_dev *dev, const char *why)
{
	unsigned long flags;
	unsigned int i;

	lockdep_assert_held(&dev->virtscsi_lock);
	for (i = 0; i < dev->nr_req; i++) {
		struct virtscsi_vq *q = &dev->req[i];

		spin_lock_irqsave(&q->lock, flags);
		q->sq = NULL;
		spin_unlock_irqrestore(&q->lock, flags);
	}
	virtscsi_poller_stop(dev);
	dev->classic_why = why;
	WRITE_ONCE(dev->state, VIRTSCSI_STATE_STOPPED);
	trace_sqcq_teardown(dev->shost->host_no, why);
}

static void virtscsi_stop_work(struct work_struct *work)
{
	struct virtscsi_dev *dev = container_of(work, struct virtscsi_dev, stop_work);

	mutex_lock(&dev->virtscsi_lock);
	if (dev->state == VIRTSCSI_STATE_ON) {
		virtscsi_go_classic(dev, "stopped by the host");
		dev_info(&dev->vdev->dev, "SQ/CQ stopped by the host: classic mode; negotiating again in %u s\n",
			 SQCQ_RENEGO_DELAY / HZ);
		dev->renego_tries = 0;
		if (!dev->renego_off)
			/* Long: it waits for the rings to drain. */
			queue_delayed_work(system_long_wq, &dev->renego_work,
					   SQCQ_RENEGO_DELAY);
	}
	mutex_unlock(&dev->virtscsi_lock);
}

/* Why an answer to the setup request does not enable SQ/CQ, or NULL. */
static const char *virtscsi_setup_answer(struct virtscsi_dev *dev,
					 const struct sqcq_setup_in *in,
				     bool *host_attached)
{
	const struct sqcq_setup_resp *r = &in->resp;
	u32 flags = le32_to_cpu(r->flags);

	*host_attached = false;
	if (in->response != VIRTIO_SCSI_S_FUNCTION_SUCCEEDED) {
		if (le32_to_cpu(r->magic) == SQCQ_MAGIC &&
		    le16_to_cpu(r->status) != SQCQ_S_OK)
			return sqcq_status_str(le16_to_cpu(r->status));
		return "not supported by the device";
	}
	*host_attached = true;
	if (le32_to_cpu(r->magic) != SQCQ_MAGIC ||
	    le16_to_cpu(r->version) != SQCQ_VERSION ||
	    le16_to_cpu(r->status) != SQCQ_S_OK ||
	    le16_to_cpu(r->nqueues) != dev->nr_req ||
	    !flags || (flags & ~(SQCQ_F_SQ_POLL | SQCQ_F_CQ_POLL)))
		return "malformed answer";
	return NULL;
}

/*
 * The device address of the doorbell area is what the device's DMA sees,
 * exactly like the rings' addresses: with VIRTIO_F_ACCESS_PLATFORM (vIOMMU,
 * swiotlb, SEV/TDX, s390 PV) or under Xen the virtio core maps the rings
 * through the DMA API on the virtqueue's DMA device, and so must we;
 * otherwise the rings use guest-physical addresses, and so do we.  Returns
 * why SQ/CQ must be refused, or NULL with *@dma_dev set (NULL: physical).
 */
static const char *virtscsi_area_dma_dev(struct virtscsi_dev *dev,
					 struct device **dma_dev)
{
	struct virtio_device *vdev = dev->vdev;
	bool platform = virtio_has_feature(vdev, VIRTIO_F_ACCESS_PLATFORM) ||
			xen_domain();

	*dma_dev = virtqueue_dma_dev(dev->req[0].vq);
	if (*dma_dev)
		return NULL;
	/* No DMA device although the platform restricts access: custom mapping ops. */
	if (platform)
		return "the transport maps buffers without a DMA device";
	return NULL;
}

/* Allocate the zeroed, page-aligned doorbell area; returns why not, or NULL. */
static const char *virtscsi_area_alloc(struct virtscsi_dev *dev,
				       struct virtscsi_sqcq *mem, size_t bytes)
{
	const char *why = virtscsi_area_dma_dev(dev, &mem->dma_dev);

	if (why)
		return why;
	mem->bytes = bytes;
	if (mem->dma_dev) {
		/* Coherent: both sides poll it; page-aligned for bytes >= a page. */
		mem->cpu = dma_alloc_coherent(mem->dma_dev, bytes, &mem->addr,
					      GFP_KERNEL);
		if (mem->cpu && !IS_ALIGNED(mem->addr, SQCQ_AREA_ALIGN)) {
			dma_free_coherent(mem->dma_dev, bytes, mem->cpu,
					  mem->addr);
			mem->cpu = NULL;
			return "misaligned DMA address";
		}
	} else {
		mem->cpu = alloc_pages_exact(bytes, GFP_KERNEL | __GFP_ZERO);
		if (mem->cpu)
			mem->addr = virt_to_phys(mem->cpu);
	}
	if (!mem->cpu)
		return "out of memory";
	memset(mem->cpu, 0, bytes);
	return NULL;
}

static void virtscsi_area_free(struct virtscsi_sqcq *mem)
{
	if (!mem->cpu)
		return;
	if (mem->dma_dev)
		dma_free_coherent(mem->dma_dev, mem->bytes, mem->cpu, mem->addr);
	else
		free_pages_exact(mem->cpu, mem->bytes);
	memset(mem, 0, sizeof(*mem));
}

/* Why this device cannot use SQ/CQ at all, or NULL. */
static const char *virtscsi_refusal(struct virtscsi_dev *dev)
{
	/* The doorbell indices are split-ring avail/used indices. */
	if (virtio_has_feature(dev->vdev, VIRTIO_F_RING_PACKED))
		return "packed ring negotiated";
	return NULL;
}

/*
 * Ask the device to let go of the area after an answer we refused.  Returns
 * true when it says it holds none (teardown done, or never set up).
 * *@held: the wait ended without an answer (-EINTR or -ETIMEDOUT), the
 * device owning @tmf.
 */
static bool virtscsi_teardown_req(struct virtscsi_dev *dev, struct virtscsi_tmf *tmf,
				  int *held)
{
	u16 st;

	*held = 0;
	memset(&tmf->resp, 0, sizeof(tmf->resp));
	tmf->req.sqcq.tmf.subtype = cpu_to_le32(SQCQ_TMF_SUBTYPE_TEARDOWN);
	if (virtscsi_ctrl_queue(dev, tmf, sizeof(tmf->req.sqcq)))
		return false;
	*held = virtscsi_ctrl_wait(dev, tmf, "SQ/CQ teardown", true,
				   SQCQ_SETUP_WAIT);
	if (*held)
		return false;
	st = le16_to_cpu(tmf->resp.sqcq.resp.status);
	return le32_to_cpu(tmf->resp.sqcq.resp.magic) == SQCQ_MAGIC &&
	       (st == SQCQ_S_OK || st == SQCQ_S_NOT_SETUP);
}

/* The TMF header of an SQ/CQ setup or teardown request (@subtype). */
static void virtscsi_sqcq_req_header(struct virtscsi_tmf *tmf, u32 subtype)
{
	tmf->req.sqcq.tmf.type = cpu_to_le32(SQCQ_VIRTIO_SCSI_T_TMF);
	tmf->req.sqcq.tmf.subtype = cpu_to_le32(subtype);
	tmf->req.sqcq.tmf.lun[0] = 1;
}

/*
 * Whether a new device asks to poll its CQs with a thread: only where
 * poll_cpu gives the thread CPUs of its own.  A poll thread on the vCPU
 * that runs the application is woken by the very interrupt it was meant
 * to save, one more switch per completion than classic (docs/sqcq.md,
 * "Where polling pays"); without it the host still polls the SQs and the
 * interrupt completes, as in classic mode.
 */
static bool virtscsi_cq_poll_wanted(void)
{
	cpumask_var_t cpus;
	bool given;

	if (!zalloc_cpumask_var(&cpus, GFP_KERNEL))
		return false;
	given = sqcq_poll_cpus(cpus);
	free_cpumask_var(cpus);
	return given;
}

/*
 * Build the setup request: initialise the doorbell area at @mem (each SQ
 * index at its ring's avail index) and fill a control request that offers
 * it to the device.  Returns the request, or NULL when out of memory.
 */
static struct virtscsi_tmf *virtscsi_setup_build(struct virtscsi_dev *dev,
						 const struct virtscsi_sqcq *mem)
{
	struct sqcq_area *area = mem->cpu;
	struct sqcq_setup_req *req;
	struct virtscsi_tmf *tmf;
	unsigned int i;

	tmf = kzalloc(sizeof(*tmf), GFP_KERNEL);
	if (!tmf)
		return NULL;
	sqcq_area_init(area, dev->nr_req);
	for (i = 0; i < dev->nr_req; i++) {
		area->q[i].sq_line.sq.idx = cpu_to_le16(dev->req[i].avail_shadow);
		/* Poll queues never want interrupts: mq_poll reaps them. */
		if (dev->req[i].kind == VIRTSCSI_VQ_KIND_POLL)
			area->q[i].cq_line.cq.flags = 0;
	}

	virtscsi_sqcq_req_header(tmf, SQCQ_TMF_SUBTYPE_SETUP);
	req = &tmf->req.sqcq.setup;
	req->magic = cpu_to_le32(SQCQ_MAGIC);
	req->version = cpu_to_le16(SQCQ_VERSION);
	req->nqueues = cpu_to_le16(dev->nr_req);
	/* A device address (docs/protocol.md section 2), not necessarily guest-physical. */
	req->area_gpa = cpu_to_le64(mem->addr);
	dev->setup_addr = mem->addr;
	dev->setup_dma_api = !!mem->dma_dev;
	req->area_len = cpu_to_le32(mem->bytes);
	req->flags = cpu_to_le32(SQCQ_F_SQ_POLL |
				 (virtscsi_cq_poll_wanted() ? SQCQ_F_CQ_POLL : 0));
	req->poll_idle_us = cpu_to_le32(sqcq_poll_idle());
	return tmf;
}

/*
 * Send the setup request on the control queue and wait for the answer
 * (killable, at most SQCQ_SETUP_WAIT).  Returns 0 once answered; -EINTR
 * when killed or -ETIMEDOUT without an answer, the device still owning
 * @tmf and the area; -ENODEV when it could not be queued (the caller still
 * owns both).
 */
static int virtscsi_setup_send(struct virtscsi_dev *dev, struct virtscsi_tmf *tmf)
{
	if (virtscsi_ctrl_queue(dev, tmf, sizeof(tmf->req.sqcq)))
		return -ENODEV;
	return virtscsi_ctrl_wait(dev, tmf, "SQ/CQ setup", true, SQCQ_SETUP_WAIT);
}

/*
 * The setup request went unanswered: queue a teardown behind it, not
 * waited for.  A device that answers late takes the two in order, so a
 * late success is undone at once and the device serves the rings as
 * classic (a setup the guest did not install must not be polled).  The
 * request, if it could be queued, belongs to the device like the setup
 * (kept in dev->stale_teardown until the reset).
 */
static void virtscsi_setup_abandon(struct virtscsi_dev *dev)
{
	struct virtscsi_tmf *tmf;

	tmf = kzalloc(sizeof(*tmf), GFP_KERNEL);
	if (!tmf)
		return;
	virtscsi_sqcq_req_header(tmf, SQCQ_TMF_SUBTYPE_TEARDOWN);
	if (virtscsi_ctrl_queue(dev, tmf, sizeof(tmf->req.sqcq))) {
		kfree(tmf);
		return;
	}
	dev->stale_teardown = tmf;
}

/* What becomes of the doorbell area after the device answered. */
enum virtscsi_setup_end {
	VIRTSCSI_SETUP_END_USE,		/* a well-formed success: install it */
	VIRTSCSI_SETUP_END_FREE,	/* refused, the device holds nothing: free it */
	VIRTSCSI_SETUP_END_KEEP,	/* refused, the device may hold it until reset */
	VIRTSCSI_SETUP_END_HELD,	/* teardown unanswered, the device holds both */
	VIRTSCSI_SETUP_END_KILLED,	/* teardown interrupted, the device holds both */
};

/*
 * Interpret the device's answer to the setup request: on a well-formed
 * success record what the host accepted; on a refusal that the host may
 * have attached to anyway, ask it to let go.  *@why: why SQ/CQ is not
 * used (NULL for VIRTSCSI_SETUP_END_USE).
 */
static enum virtscsi_setup_end virtscsi_setup_interpret(struct virtscsi_dev *dev,
							struct virtscsi_tmf *tmf,
							const char **why)
{
	const struct sqcq_setup_resp *r = &tmf->resp.sqcq.resp;
	bool attached;
	int held;

	*why = virtscsi_setup_answer(dev, &tmf->resp.sqcq, &attached);
	if (!*why) {
		dev->host_flags = le32_to_cpu(r->flags);
		dev->host_nthreads = le16_to_cpu(r->nthreads);
		dev->host_idle_us = le32_to_cpu(r->poll_idle_us);
		return VIRTSCSI_SETUP_END_USE;
	}
	if (!attached)
		return VIRTSCSI_SETUP_END_FREE;
	/* The host may have attached: ask it to let go first. */
	if (virtscsi_teardown_req(dev, tmf, &held))
		return VIRTSCSI_SETUP_END_FREE;
	if (held == -EINTR)
		return VIRTSCSI_SETUP_END_KILLED;
	return held ? VIRTSCSI_SETUP_END_HELD : VIRTSCSI_SETUP_END_KEEP;
}

/*
 * Install the doorbells the host accepted (dev->host_flags): start the
 * poll thread if the host leaves the CQs to us, point each request queue
 * at its SQ and CQ, and switch the device to VIRTSCSI_STATE_ON.
 */
static void virtscsi_setup_install(struct virtscsi_dev *dev,
				   const struct virtscsi_sqcq *mem)
{
	struct task_struct *poller = NULL;
	struct sqcq_area *area = mem->cpu;
	u32 hflags = dev->host_flags;
	unsigned long flags;
	unsigned int i;

	/* The host interrupts on every completion unless we poll the CQs. */
	if (hflags & SQCQ_F_CQ_POLL) {
		poller = kthread_create(virtscsi_poll_fn, dev, "sqcq-poll-%u",
					dev->shost->host_no);
		if (IS_ERR(poller)) {
			/* CQ NEED_WAKEUP stays set: completions by interrupt. */
			dev_warn(&dev->vdev->dev, "cannot start the SQ/CQ poll thread (%ld); completions by interrupt\n",
				 PTR_ERR(poller));
			poller = NULL;
		} else {
			get_task_struct(poller);
		}
	}
	dev->mem = *mem;
	dev->area = area;
	for (i = 0; i < dev->nr_req; i++) {
		struct virtscsi_vq *q = &dev->req[i];

		q->cq_seen = 0;
		q->cq = &area->q[i].cq_line.cq;
		spin_lock_irqsave(&q->lock, flags);
		/* Kicks follow SQ NEED_WAKEUP only if the host polls the SQs. */
		q->sq = (hflags & SQCQ_F_SQ_POLL) ? &area->q[i].sq_line.sq
						  : NULL;
		spin_unlock_irqrestore(&q->lock, flags);
	}
	mutex_lock(&dev->virtscsi_lock);
	dev->classic_why = NULL;
	/* dev->area before the state; pairs with virtscsi_req_cb()'s acquire. */
	smp_store_release(&dev->state, VIRTSCSI_STATE_ON);
	if (poller) {
		dev->poller = poller;
		dev->poller_running = true;
		WRITE_ONCE(dev->poll_wake, true);
		wake_up_process(poller);
	}
	mutex_unlock(&dev->virtscsi_lock);
	trace_sqcq_setup(dev->shost->host_no, dev->nr_req, hflags, poller);
	dev_info(&dev->vdev->dev, "SQ/CQ negotiated: %u queues, %s%s, poll_idle_us %u, area at device address %#llx%s (host: %u poll thread%s, poll_idle_us %u)\n",
		 dev->nr_req, poller ? "1 poll thread" :
		 (hflags & SQCQ_F_CQ_POLL) ? "no poll thread" :
		 "no poll thread (poll_cpu empty), completions by interrupt",
		 (hflags & SQCQ_F_SQ_POLL) ? "" : ", host does not poll the SQs",
		 sqcq_poll_idle(), (unsigned long long)mem->addr,
		 mem->dma_dev ? " (DMA API)" : "", dev->host_nthreads,
		 dev->host_nthreads == 1 ? "" : "s", dev->host_idle_us);
}

/*
 * Ask the device for SQ/CQ (module parameter sqcq), at probe and restore.
 * Any answer but a well-formed success leaves the device classic, with one
 * line.  The answer is waited for without a time limit (the device owns the
 * request and the area); the wait is killable, and then -EINTR tells the
 * caller to fail: the device is reset on the way out, which hands both
 * back.  Returns 0 otherwise, whatever the mode.
 */
static int __virtscsi_sqcq_setup(struct virtscsi_dev *dev)
{
	size_t bytes = PAGE_ALIGN(sqcq_area_bytes(dev->nr_req));
	struct virtio_device *vdev = dev->vdev;
	struct virtscsi_sqcq mem = {};
	struct virtscsi_tmf *tmf;
	const char *why;
	int ret;

	WRITE_ONCE(dev->state, VIRTSCSI_STATE_OFF);
	dev->classic_why = "sqcq=0";
	if (!READ_ONCE(sqcq))
		return 0;
	why = virtscsi_refusal(dev) ?: virtscsi_area_alloc(dev, &mem, bytes);
	if (why) {
		dev->classic_why = why;
		dev_info(&vdev->dev, "SQ/CQ refused (%s): classic mode\n", why);
		return 0;
	}
	tmf = virtscsi_setup_build(dev, &mem);
	if (!tmf) {
		why = "out of memory";
		goto free_area;
	}
	ret = virtscsi_setup_send(dev, tmf);
	if (ret == -EINTR)
		goto killed;
	if (ret == -ETIMEDOUT) {
		why = "no answer to the setup request";
		virtscsi_setup_abandon(dev);
		goto held;
	}
	if (ret) {
		why = "control queue unavailable";
		goto free_area;
	}
	switch (virtscsi_setup_interpret(dev, tmf, &why)) {
	case VIRTSCSI_SETUP_END_USE:
		break;
	case VIRTSCSI_SETUP_END_FREE:
		goto free_area;
	case VIRTSCSI_SETUP_END_KEEP:
		dev_warn(&vdev->dev, "SQ/CQ not used (%s, teardown refused); classic mode (%zu bytes kept for the device until it is reset)\n",
			 why, bytes);
		dev->classic_why = why;
		dev->stale = mem;
		kfree(tmf);
		return 0;
	case VIRTSCSI_SETUP_END_HELD:
		goto held;
	case VIRTSCSI_SETUP_END_KILLED:
		goto killed;
	}
	kfree(tmf);
	virtscsi_setup_install(dev, &mem);
	return 0;

held:
	/* Classic; the device still owns both: freed after the reset. */
	dev_warn(&vdev->dev, "SQ/CQ not used (%s within %u s): classic mode (the request and %zu bytes kept for the device until it is reset)\n",
		 why, SQCQ_SETUP_WAIT / HZ, bytes);
	dev->classic_why = why;
	dev->stale = mem;
	dev->stale_tmf = tmf;
	return 0;

free_area:
	dev->classic_why = why;
	dev_info(&vdev->dev, "SQ/CQ not available (%s): classic mode\n", why);
	kfree(tmf);
	virtscsi_area_free(&mem);
	return 0;

killed:
	/* The device still owns both: freed after the reset (virtscsi_sqcq_stop()). */
	dev_warn(&vdev->dev, "interrupted while the device held the SQ/CQ request; the device will be reset\n");
	dev->classic_why = "interrupted";
	dev->stale = mem;
	dev->stale_tmf = tmf;
	return -EINTR;
}

/* The same, and the sqcq_classic tracepoint when it ended classic. */
static int virtscsi_sqcq_setup(struct virtscsi_dev *dev)
{
	int ret = __virtscsi_sqcq_setup(dev);

	if (READ_ONCE(dev->state) != VIRTSCSI_STATE_ON)
		trace_sqcq_classic(dev->shost->host_no,
				   dev->classic_why ?: "unknown");
	return ret;
}

/*
 * Wait, submissions blocked, until no command of @shost is outstanding;
 * false after SQCQ_RENEGO_IDLE_MS.
 */
static bool virtscsi_wait_idle(struct Scsi_Host *shost)
{
	unsigned int ms;

	for (ms = 0; ms < SQCQ_RENEGO_IDLE_MS; ms += 20) {
		if (!scsi_host_busy(shost))
			return true;
		msleep(20);
	}
	return !scsi_host_busy(shost);
}

/*
 * Drop the doorbell area the host stopped using, once it answered a
 * teardown request (OK, or NOT_SETUP: it holds none).  Submissions are
 * blocked and the poll thread is stopped; returns false, with one line,
 * when the host does not let go (the area then stays until the reset).
 */
static bool virtscsi_area_release(struct virtscsi_dev *dev)
{
	struct virtscsi_tmf *tmf;
	unsigned int i;
	int held;

	tmf = kzalloc(sizeof(*tmf), GFP_KERNEL);
	if (!tmf)
		return false;
	virtscsi_sqcq_req_header(tmf, SQCQ_TMF_SUBTYPE_TEARDOWN);
	if (!virtscsi_teardown_req(dev, tmf, &held)) {
		if (held)
			virtscsi_tmf_hold(dev, tmf);	/* the device's */
		else
			kfree(tmf);
		dev_warn(&dev->vdev->dev, "SQ/CQ not negotiated again: the device did not let go of the doorbell area; classic mode until it is reset\n");
		return false;
	}
	kfree(tmf);
	mutex_lock(&dev->virtscsi_lock);
	if (dev->poller) {
		put_task_struct(dev->poller);	/* stopped by virtscsi_go_classic() */
		dev->poller = NULL;
	}
	mutex_unlock(&dev->virtscsi_lock);
	for (i = 0; i < dev->nr_req; i++)
		dev->req[i].cq = NULL;	/* the poll thread is gone; q->sq is NULL */
	dev->area = NULL;
	virtscsi_area_free(&dev->mem);
	return true;
}

/*
 * The host stopped SQ/CQ on a live device (docs/protocol.md section 5): a
 * paused VM, a migration, the endpoint set again.  Negotiate again once no
 * command is outstanding: block submissions, wait for the rings to drain,
 * have the host let go of the old area, send a new setup request.  While
 * the device answers BUSY (or commands stay outstanding), try again later.
 */
static void virtscsi_renego_work(struct work_struct *work)
{
	struct virtscsi_dev *dev = container_of(to_delayed_work(work),
						struct virtscsi_dev, renego_work);
	struct Scsi_Host *shost = dev->shost;
	bool retry = false;

	mutex_lock(&dev->virtscsi_lock);
	if (dev->renego_off || dev->state == VIRTSCSI_STATE_ON) {
		mutex_unlock(&dev->virtscsi_lock);
		return;
	}
	mutex_unlock(&dev->virtscsi_lock);

	scsi_block_requests(shost);
	/*
	 * blk-mq dispatches under rcu_read_lock() and interrupt handlers run
	 * with interrupts off: after this no submitter missed the block and
	 * no interrupt still acts on the SQ/CQ state before the stop.
	 */
	synchronize_rcu();
	if (!virtscsi_wait_idle(shost)) {
		retry = true;
		goto out;
	}
	if (!virtscsi_area_release(dev))
		goto out;
	virtscsi_sqcq_setup(dev);	/* not killable here: returns 0 */
	if (READ_ONCE(dev->state) == VIRTSCSI_STATE_ON) {
		WRITE_ONCE(dev->renegotiations, dev->renegotiations + 1);
		dev_info(&dev->vdev->dev, "SQ/CQ negotiated again after the host stopped it\n");
	} else if (dev->classic_why &&
		   !strcmp(dev->classic_why, sqcq_status_str(SQCQ_S_BUSY))) {
		retry = true;
	}
out:
	scsi_unblock_requests(shost);
	mutex_lock(&dev->virtscsi_lock);
	if (retry && !dev->renego_off &&
	    ++dev->renego_tries < SQCQ_RENEGO_TRIES)
		queue_delayed_work(system_long_wq, &dev->renego_work,
				   SQCQ_RENEGO_DELAY << dev->renego_tries);
	mutex_unlock(&dev->virtscsi_lock);
}

/* No renegotiation from now on (freeze, remove); waits for a running one. */
static void virtscsi_renego_stop(struct virtscsi_dev *dev)
{
	mutex_lock(&dev->virtscsi_lock);
	dev->renego_off = true;
	mutex_unlock(&dev->virtscsi_lock);
	cancel_delayed_work_sync(&dev->renego_work);
}

/* After a reset: free the TMFs a broken control queue held. */
static void virtscsi_held_tmfs_free(struct virtscsi_dev *dev)
{
	struct virtscsi_tmf *tmf, *next;
	unsigned long flags;
	LIST_HEAD(list);

	spin_lock_irqsave(&dev->ctrl.lock, flags);
	list_splice_init(&dev->held_tmfs, &list);
	spin_unlock_irqrestore(&dev->ctrl.lock, flags);
	list_for_each_entry_safe(tmf, next, &list, held)
		kfree(tmf);
}

/*
 * After the device was reset (virtscsi_vqs_teardown()): the host no longer
 * touches the area, no queue interrupt or submitter can come; stop the poll
 * thread and free the area.
 */
static void virtscsi_sqcq_stop(struct virtscsi_dev *dev)
{
	unsigned int i;

	mutex_lock(&dev->virtscsi_lock);
	virtscsi_poller_stop(dev);
	if (dev->state == VIRTSCSI_STATE_ON)
		trace_sqcq_teardown(dev->shost->host_no, "device reset");
	WRITE_ONCE(dev->state, VIRTSCSI_STATE_OFF);
	mutex_unlock(&dev->virtscsi_lock);
	/* Nothing can queue it now: no callback, submitter or poller is left. */
	cancel_work_sync(&dev->stop_work);
	if (dev->poller) {
		put_task_struct(dev->poller);
		dev->poller = NULL;
	}
	for (i = 0; i < dev->nr_req; i++) {
		dev->req[i].sq = NULL;	/* rings are gone: no submitter */
		dev->req[i].cq = NULL;
	}
	dev->area = NULL;
	virtscsi_area_free(&dev->mem);
	virtscsi_area_free(&dev->stale);
	kfree(dev->stale_tmf);
	dev->stale_tmf = NULL;
	kfree(dev->stale_teardown);
	dev->stale_teardown = NULL;
	virtscsi_held_tmfs_free(dev);
}

static bool virtscsi_wants_events(struct virtio_device *vdev)
{
	return virtio_has_feature(vdev, VIRTIO_SCSI_F_HOTPLUG) ||
	       virtio_has_feature(vdev, VIRTIO_SCSI_F_CHANGE);
}

/* ------------------------------------------------------------------ */
/* debugfs: /sys/kernel/debug/virtio_scsi_sqcq/<device>/                */
/* ------------------------------------------------------------------ */

static void virtscsi_show_vq(struct seq_file *m, struct virtscsi_vq *q)
{
	seq_printf(m, "%-10s %-5s %-7s %llu %llu %llu %llu %llu %llu %llu\n",
		   q->name, virtscsi_kind_name(q->kind),
		   READ_ONCE(q->sq) ? "sqcq" : "classic",
		   READ_ONCE(q->st.requests), READ_ONCE(q->st.kicks),
		   READ_ONCE(q->st.interrupts), READ_ONCE(q->st.polls),
		   READ_ONCE(q->st.completions), READ_ONCE(q->st.doorbells),
		   READ_ONCE(q->st.kicks_saved));
}

static int virtscsi_queues_show(struct seq_file *m, void *v)
{
	struct virtscsi_dev *dev = m->private;
	unsigned int i;

	seq_puts(m, "queue      type  mode    requests kicks interrupts polls completions doorbells kicks_saved\n");
	virtscsi_show_vq(m, &dev->ctrl);
	virtscsi_show_vq(m, &dev->event);
	for (i = 0; i < dev->nr_req; i++)
		virtscsi_show_vq(m, &dev->req[i]);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(virtscsi_queues);

static int virtscsi_info_show(struct seq_file *m, void *v)
{
	struct virtscsi_dev *dev = m->private;
	struct Scsi_Host *shost = dev->shost;

	enum virtscsi_state state = READ_ONCE(dev->state);
	const char *why = READ_ONCE(dev->classic_why);

	seq_printf(m, "mode: %s\n", state == VIRTSCSI_STATE_ON ? "sqcq" : "classic");
	seq_printf(m, "sqcq_state: %s\n", state == VIRTSCSI_STATE_ON ? "on" :
		   state == VIRTSCSI_STATE_STOPPED ? "stopped" : "off");
	seq_printf(m, "classic_why: %s\n", why ? why : "-");
	seq_printf(m, "host_flags: %#x\n", dev->host_flags);
	seq_printf(m, "area_addr: %#llx\n",
		   (unsigned long long)(dev->area ? dev->mem.addr : 0));
	seq_printf(m, "area_dma_api: %d\n", dev->area && dev->mem.dma_dev);
	seq_printf(m, "setup_addr: %#llx\n", dev->setup_addr);
	seq_printf(m, "setup_addr_kind: %s\n", !dev->setup_addr ? "none" :
		   dev->setup_dma_api ? "dma" : "phys");
	seq_printf(m, "access_platform: %d\n",
		   virtio_has_feature(dev->vdev, VIRTIO_F_ACCESS_PLATFORM));
	seq_printf(m, "poll_thread: %s\n",
		   READ_ONCE(dev->poll_wake) ? "running" : "none");
	seq_printf(m, "poll_sleeps: %llu\n", READ_ONCE(dev->poll_sleeps));
	seq_printf(m, "poll_wakeups: %llu\n", READ_ONCE(dev->poll_wakeups));
	seq_printf(m, "poll_irq_only: %llu\n", READ_ONCE(dev->poll_irq_only));
	seq_printf(m, "poll_yields: %llu\n", READ_ONCE(dev->poll_yields));
	seq_printf(m, "poll_rescues: %llu\n", READ_ONCE(dev->poll_rescues));
	seq_printf(m, "poll_watchdog_starts: %llu\n", READ_ONCE(dev->poll_wd_starts));
	seq_printf(m, "poll_sleeps_idle: %llu\n",
		   READ_ONCE(dev->poll_sleep_why[SQCQ_SLEEP_IDLE]));
	seq_printf(m, "poll_sleeps_contended: %llu\n",
		   READ_ONCE(dev->poll_sleep_why[SQCQ_SLEEP_CONTENDED]));
	seq_printf(m, "poll_sleeps_stolen: %llu\n",
		   READ_ONCE(dev->poll_sleep_why[SQCQ_SLEEP_STOLEN]));
	seq_printf(m, "poll_window_ns: %llu\n", READ_ONCE(dev->poll_window_ns));
	seq_printf(m, "host: %u\n", shost->host_no);
	seq_printf(m, "request_queues: %u\n", dev->nr_req);
	seq_printf(m, "interrupt_queues: %u\n", dev->nr_irq);
	seq_printf(m, "poll_queues: %u\n", dev->nr_poll);
	seq_printf(m, "can_queue: %d\n", shost->can_queue);
	seq_printf(m, "cmd_per_lun: %d\n", shost->cmd_per_lun);
	seq_printf(m, "sg_tablesize: %u\n", shost->sg_tablesize);
	seq_printf(m, "max_sectors: %u\n", shost->max_sectors);
	seq_printf(m, "max_id: %u\n", shost->max_id);
	seq_printf(m, "max_lun: %llu\n", (unsigned long long)shost->max_lun);
	seq_printf(m, "t10_pi: %d\n", dev->pi);
	seq_printf(m, "hotplug: %d\n",
		   virtio_has_feature(dev->vdev, VIRTIO_SCSI_F_HOTPLUG));
	seq_printf(m, "bad_completions: %lld\n",
		   (long long)atomic64_read(&dev->bad_completions));
	seq_printf(m, "tmf_slow: %lld\n",
		   (long long)atomic64_read(&dev->tmf_slow));
	seq_printf(m, "ctrl_waiting: %d\n", atomic_read(&dev->ctrl_waiting));
	seq_printf(m, "timer_resets: %lld\n",
		   (long long)atomic64_read(&dev->timer_resets));
	seq_printf(m, "timeout_notifies: %llu\n", READ_ONCE(dev->timeout_notifies));
	/* Whether this build has the handler (CONFIG_PM_SLEEP). */
	seq_printf(m, "host_reset: %d\n", IS_ENABLED(CONFIG_PM_SLEEP));
	seq_printf(m, "host_resets: %lld\n",
		   (long long)atomic64_read(&dev->host_resets));
	seq_printf(m, "renegotiations: %llu\n", READ_ONCE(dev->renegotiations));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(virtscsi_info);

static void virtscsi_debugfs_add(struct virtscsi_dev *dev)
{
	dev->dbg = debugfs_create_dir(dev_name(&dev->vdev->dev), virtscsi_debugfs);
	debugfs_create_file("queues", 0444, dev->dbg, dev, &virtscsi_queues_fops);
	debugfs_create_file("info", 0444, dev->dbg, dev, &virtscsi_info_fops);
}

/* ------------------------------------------------------------------ */
/* sysfs: /sys/class/scsi_host/hostN/sqcq_* (docs/observability.md)    */
/* ------------------------------------------------------------------ */

/*
 * The stable view of what debugfs shows, one value a file.  The files
 * exist from scsi_add_host() to scsi_remove_host(), which waits for their
 * readers; the device and its queues' counters live until the host is
 * put, after that.  Counters are the racy snapshot debugfs prints.
 */
static struct virtscsi_dev *virtscsi_sysfs_dev(struct device *d)
{
	return virtscsi_shost_dev(class_to_shost(d));
}

static ssize_t sqcq_mode_show(struct device *d, struct device_attribute *attr,
			      char *buf)
{
	return sysfs_emit(buf, "%s\n",
			  READ_ONCE(virtscsi_sysfs_dev(d)->state) == VIRTSCSI_STATE_ON ?
			  "sqcq" : "classic");
}
static DEVICE_ATTR_RO(sqcq_mode);

/* A string of the driver's own (a literal or sqcq_status_str()), or NULL. */
static ssize_t sqcq_classic_why_show(struct device *d,
				     struct device_attribute *attr, char *buf)
{
	struct virtscsi_dev *dev = virtscsi_sysfs_dev(d);
	const char *why = READ_ONCE(dev->classic_why);

	if (READ_ONCE(dev->state) == VIRTSCSI_STATE_ON || !why)
		why = "-";
	return sysfs_emit(buf, "%s\n", why);
}
static DEVICE_ATTR_RO(sqcq_classic_why);

static ssize_t sqcq_poll_thread_show(struct device *d,
				     struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n",
			  READ_ONCE(virtscsi_sysfs_dev(d)->poll_wake) ?
			  "running" : "none");
}
static DEVICE_ATTR_RO(sqcq_poll_thread);

/* A counter summed over the request queues (@poll_only: the poll queues). */
#define SQCQ_REQ_COUNTER(name, field, poll_only)			\
static ssize_t name##_show(struct device *d,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	struct virtscsi_dev *dev = virtscsi_sysfs_dev(d);		\
	unsigned int i;							\
	u64 sum = 0;							\
									\
	for (i = 0; i < dev->nr_req; i++)				\
		if (!(poll_only) || dev->req[i].kind == VIRTSCSI_VQ_KIND_POLL)	\
			sum += READ_ONCE(dev->req[i].st.field);		\
	return sysfs_emit(buf, "%llu\n", sum);				\
}									\
static DEVICE_ATTR_RO(name)

SQCQ_REQ_COUNTER(sqcq_requests, requests, false);
SQCQ_REQ_COUNTER(sqcq_kicks, kicks, false);
SQCQ_REQ_COUNTER(sqcq_kicks_saved, kicks_saved, false);
SQCQ_REQ_COUNTER(sqcq_interrupts, interrupts, false);
SQCQ_REQ_COUNTER(sqcq_completions, completions, false);
SQCQ_REQ_COUNTER(sqcq_doorbells, doorbells, false);
SQCQ_REQ_COUNTER(sqcq_polled, completions, true);

static ssize_t sqcq_poll_sleeps_show(struct device *d,
				     struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n",
			  READ_ONCE(virtscsi_sysfs_dev(d)->poll_sleeps));
}
static DEVICE_ATTR_RO(sqcq_poll_sleeps);

static ssize_t sqcq_poll_wakeups_show(struct device *d,
				      struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n",
			  READ_ONCE(virtscsi_sysfs_dev(d)->poll_wakeups));
}
static DEVICE_ATTR_RO(sqcq_poll_wakeups);

static sqcq_shost_attr_t *virtscsi_host_attrs[] = {
	SQCQ_SHOST_ATTR(sqcq_mode),
	SQCQ_SHOST_ATTR(sqcq_classic_why),
	SQCQ_SHOST_ATTR(sqcq_poll_thread),
	SQCQ_SHOST_ATTR(sqcq_requests),
	SQCQ_SHOST_ATTR(sqcq_kicks),
	SQCQ_SHOST_ATTR(sqcq_kicks_saved),
	SQCQ_SHOST_ATTR(sqcq_interrupts),
	SQCQ_SHOST_ATTR(sqcq_completions),
	SQCQ_SHOST_ATTR(sqcq_doorbells),
	SQCQ_SHOST_ATTR(sqcq_polled),
	SQCQ_SHOST_ATTR(sqcq_poll_sleeps),
	SQCQ_SHOST_ATTR(sqcq_poll_wakeups),
	NULL,
};

SQCQ_SHOST_GROUPS(virtscsi_host);

/* ------------------------------------------------------------------ */
/* Probe, remove, PM                                                   */
/* ------------------------------------------------------------------ */

/* Never deeper than the device's cmd_per_lun. */
static int virtscsi_change_queue_depth(struct scsi_device *sdev, int depth)
{
	return scsi_change_queue_depth(sdev,
				       min_t(int, depth, sdev->host->cmd_per_lun));
}

/*
 * Read the VPD pages even of a device that claims SPC-2: that is where a
 * hypervisor reports the backing store's limits (block limits, unmap).
 */
static int virtscsi_sdev_init(struct scsi_device *sdev)
{
	sdev->sdev_bflags = BLIST_TRY_VPD_PAGES;
	return 0;
}

static struct scsi_host_template virtscsi_sht = {
	.module			= THIS_MODULE,
	.name			= "Virtio SCSI HBA (sqcq)",
	.proc_name		= KBUILD_MODNAME,
	.this_id		= -1,
	.cmd_size		= sizeof(struct virtscsi_cmd),
	.queuecommand		= virtscsi_queuecommand,
	.commit_rqs		= virtscsi_commit_rqs,
	SQCQ_SHT_MQ_POLL(virtscsi_mq_poll)
	.map_queues		= virtscsi_map_queues,
	.change_queue_depth	= virtscsi_change_queue_depth,
	.sdev_init		= virtscsi_sdev_init,
	.eh_timed_out		= virtscsi_eh_timed_out,
	.eh_abort_handler	= virtscsi_eh_abort,
	.eh_device_reset_handler = virtscsi_eh_device_reset,
	SQCQ_SHT_HOST_RESET
	SQCQ_SHT_SHOST_ATTRS(virtscsi_host)
	.can_queue		= 1024,
	.dma_boundary		= UINT_MAX,
	.track_queue_depth	= 1,
};

#define virtscsi_cread32(vdev, field) \
	virtio_cread32(vdev, offsetof(struct virtio_scsi_config, field))

/* Decide how many request queues of each kind this device gets. */
static void virtscsi_size_queues(struct virtio_device *vdev, unsigned int *nr_req,
				 unsigned int *nr_poll)
{
	unsigned int cfg = virtscsi_cread32(vdev, num_queues);
	unsigned int want_poll = 0;

	if (SQCQ_POLL_QUEUES_SUPPORTED)
		want_poll = READ_ONCE(poll_queues);
	if (!cfg) {
		dev_warn(&vdev->dev, "device reports 0 request queues; using 1\n");
		cfg = 1;
	}
	/*
	 * One interrupt queue per CPU that takes managed interrupts at most
	 * (sqcq_possible_queues()); poll queues come on top.
	 */
	*nr_req = min(cfg, sqcq_possible_queues(cfg) + want_poll);
	*nr_poll = min(want_poll, *nr_req - 1);
	if (*nr_poll < want_poll)
		dev_info(&vdev->dev, "poll_queues=%u: only %u possible with %u request queues (one interrupt queue stays)\n",
			 want_poll, *nr_poll, *nr_req);
}

static void virtscsi_init_vq(struct virtscsi_dev *dev, struct virtscsi_vq *q,
			     enum virtscsi_vq_kind kind, const char *name)
{
	spin_lock_init(&q->lock);
	q->dev = dev;
	q->kind = kind;
	strscpy(q->name, name, sizeof(q->name));
}

static void virtscsi_init_dev(struct virtscsi_dev *dev, struct Scsi_Host *shost,
			      struct virtio_device *vdev, unsigned int nr_req,
			  unsigned int nr_poll)
{
	char name[20];
	unsigned int i;

	dev->vdev = vdev;
	dev->shost = shost;
	dev->nr_req = nr_req;
	dev->nr_poll = nr_poll;
	dev->nr_irq = nr_req - nr_poll;
	atomic64_set(&dev->bad_completions, 0);
	atomic64_set(&dev->tmf_slow, 0);
	atomic64_set(&dev->timer_resets, 0);
	atomic64_set(&dev->host_resets, 0);
	atomic_set(&dev->ctrl_waiting, 0);
	INIT_LIST_HEAD(&dev->held_tmfs);
	mutex_init(&dev->virtscsi_lock);
	INIT_WORK(&dev->stop_work, virtscsi_stop_work);
	INIT_DELAYED_WORK(&dev->renego_work, virtscsi_renego_work);
	virtscsi_init_vq(dev, &dev->ctrl, VIRTSCSI_VQ_KIND_CTRL, "control");
	virtscsi_init_vq(dev, &dev->event, VIRTSCSI_VQ_KIND_EVENT, "event");
	for (i = 0; i < nr_req; i++) {
		snprintf(name, sizeof(name), "request%u", i);
		virtscsi_init_vq(dev, &dev->req[i], i < dev->nr_irq ?
			     VIRTSCSI_VQ_KIND_IRQ : VIRTSCSI_VQ_KIND_POLL, name);
	}
	for (i = 0; i < SQCQ_NR_EVENTS; i++) {
		dev->events[i].dev = dev;
		INIT_WORK(&dev->events[i].work, virtscsi_event_work);
	}
}

/* Apply the device's limits (virtio_scsi_config) to the SCSI host. */
static void virtscsi_apply_config(struct virtscsi_dev *dev)
{
	struct virtio_device *vdev = dev->vdev;
	struct Scsi_Host *shost = dev->shost;
	u32 seg_max = virtscsi_cread32(vdev, seg_max);
	u32 max_sectors = virtscsi_cread32(vdev, max_sectors);
	u32 cmd_per_lun = virtscsi_cread32(vdev, cmd_per_lun);
	u32 event_size = virtscsi_cread32(vdev, event_info_size);
	u32 max_target = virtio_cread16(vdev,
			offsetof(struct virtio_scsi_config, max_target));
	u32 max_lun = virtscsi_cread32(vdev, max_lun);
	unsigned int ring = virtqueue_get_vring_size(dev->req[0].vq);

	shost->can_queue = ring;
	shost->sg_tablesize = clamp_t(u32, seg_max, 1, 0xffff);
	shost->max_sectors = max_sectors ? min_t(u32, max_sectors, UINT_MAX >> 9)
					 : 0xffff;
	shost->cmd_per_lun = clamp_t(u32, cmd_per_lun, 1, ring);
	shost->max_channel = 0;
	shost->max_id = min_t(u32, max_target, SQCQ_MAX_TARGET) + 1;
	shost->max_lun = min_t(u32, max_lun, SQCQ_MAX_LUN) + 1 + SQCQ_LUN_FLAT;
	shost->max_cmd_len = VIRTIO_SCSI_CDB_SIZE;
	shost->max_segment_size = min_t(size_t, virtio_max_dma_size(vdev),
					UINT_MAX);
	shost->nr_hw_queues = dev->nr_req;
	sqcq_shost_set_nr_maps(shost, dev->nr_poll ? HCTX_MAX_TYPES : 1);
	if (event_size && event_size < sizeof(struct virtio_scsi_event))
		dev_warn(&vdev->dev, "event_info_size %u is smaller than an event (%zu); events may be cut short\n",
			 event_size, sizeof(struct virtio_scsi_event));

	/* Offered only with CONFIG_BLK_DEV_INTEGRITY (virtscsi_features). */
	if (IS_ENABLED(CONFIG_BLK_DEV_INTEGRITY) &&
	    virtio_has_feature(vdev, VIRTIO_SCSI_F_T10_PI)) {
		dev->pi = true;
		scsi_host_set_prot(shost, SHOST_DIF_TYPE1_PROTECTION |
				   SHOST_DIF_TYPE2_PROTECTION |
				   SHOST_DIF_TYPE3_PROTECTION |
				   SHOST_DIX_TYPE1_PROTECTION |
				   SHOST_DIX_TYPE2_PROTECTION |
				   SHOST_DIX_TYPE3_PROTECTION);
		scsi_host_set_guard(shost, SHOST_DIX_GUARD_CRC);
		shost->sg_prot_tablesize = shost->sg_tablesize;
	}
}

static int virtscsi_probe(struct virtio_device *vdev)
{
	unsigned int nr_req, nr_poll;
	struct Scsi_Host *shost;
	struct virtscsi_dev *dev;
	int ret;

	if (!vdev->config->get) {
		dev_err(&vdev->dev, "config space is not accessible\n");
		return -EINVAL;
	}
	virtscsi_size_queues(vdev, &nr_req, &nr_poll);

	shost = scsi_host_alloc(&virtscsi_sht, struct_size(dev, req, nr_req));
	if (!shost)
		return -ENOMEM;
	dev = virtscsi_shost_dev(shost);
	virtscsi_init_dev(dev, shost, vdev, nr_req, nr_poll);
	vdev->priv = shost;

	ret = virtscsi_vqs_setup(dev);
	if (ret) {
		dev_err(&vdev->dev, "cannot set up %u virtqueues (%d)\n",
			SQCQ_VQ_REQ0 + nr_req, ret);
		goto err_put;
	}
	virtscsi_apply_config(dev);

	ret = scsi_add_host(shost, &vdev->dev);
	if (ret)
		goto err_vqs;
	virtio_device_ready(vdev);
	if (virtscsi_wants_events(vdev))
		virtscsi_events_start(dev);
	virtscsi_debugfs_add(dev);

	dev_info(&vdev->dev, "host%u: %u request queues (%u interrupt, %u poll%s)%s\n",
		 shost->host_no, dev->nr_req, dev->nr_irq, dev->nr_poll,
		 SQCQ_POLL_QUEUES_SUPPORTED ? "" :
		 ": unavailable on this kernel, no SCSI mq_poll",
		 dev->pi ? ", T10-PI" : "");
	/* Before the scan: all I/O of the device runs in its final mode. */
	ret = virtscsi_sqcq_setup(dev);
	if (ret)
		goto err_host;
	scsi_scan_host(shost);
	return 0;

err_host:
	debugfs_remove_recursive(dev->dbg);
	virtscsi_renego_stop(dev);
	virtscsi_events_stop(dev, true);
	scsi_remove_host(shost);
	virtscsi_vqs_teardown(dev, true);
	virtscsi_sqcq_stop(dev);
	goto err_put;
err_vqs:
	virtscsi_vqs_teardown(dev, false);
	virtscsi_sqcq_stop(dev);
err_put:
	vdev->priv = NULL;
	scsi_host_put(shost);
	return ret;
}

static void virtscsi_remove(struct virtio_device *vdev)
{
	struct Scsi_Host *shost = vdev->priv;
	struct virtscsi_dev *dev = virtscsi_shost_dev(shost);

	debugfs_remove_recursive(dev->dbg);
	virtscsi_renego_stop(dev);
	virtscsi_events_stop(dev, true);
	/* Outstanding commands still complete through the live rings. */
	scsi_remove_host(shost);
	virtscsi_vqs_teardown(dev, true);
	virtscsi_sqcq_stop(dev);
	vdev->priv = NULL;
	scsi_host_put(shost);
}

#ifdef CONFIG_PM_SLEEP
static int virtscsi_freeze(struct virtio_device *vdev)
{
	struct virtscsi_dev *dev = virtscsi_shost_dev(vdev->priv);

	virtscsi_renego_stop(dev);
	virtscsi_events_stop(dev, !dev->eh_resetting);
	virtscsi_vqs_teardown(dev, false);
	virtscsi_sqcq_stop(dev);
	return 0;
}

static int virtscsi_restore(struct virtio_device *vdev)
{
	struct virtscsi_dev *dev = virtscsi_shost_dev(vdev->priv);
	int ret;

	ret = virtscsi_vqs_setup(dev);
	if (ret)
		return ret;
	virtio_device_ready(vdev);
	if (virtscsi_wants_events(vdev))
		virtscsi_events_start(dev);
	/* Killed while the device held the request: reset, hand all back. */
	ret = virtscsi_sqcq_setup(dev);
	if (ret) {
		virtscsi_events_stop(dev, !dev->eh_resetting);
		virtscsi_vqs_teardown(dev, false);
		virtscsi_sqcq_stop(dev);
		return ret;
	}
	mutex_lock(&dev->virtscsi_lock);
	dev->renego_off = false;
	mutex_unlock(&dev->virtscsi_lock);
	return 0;
}
#endif

static const struct virtio_device_id virtscsi_id_table[] = {
	{ VIRTIO_ID_SCSI, VIRTIO_DEV_ANY_ID },
	{ 0 },
};

/*
 * The alias lets udev load the module for a virtio-scsi controller.  The
 * in-tree virtio_scsi carries the same alias: which driver gets the device
 * is chosen by the packaged switch (virtio-sqcq-guest, docs/guest-switch.md),
 * which blacklists one of the two.
 */
MODULE_DEVICE_TABLE(virtio, virtscsi_id_table);

static unsigned int virtscsi_features[] = {
	VIRTIO_SCSI_F_HOTPLUG,
	VIRTIO_SCSI_F_CHANGE,
#ifdef CONFIG_BLK_DEV_INTEGRITY
	VIRTIO_SCSI_F_T10_PI,
#endif
};

static struct virtio_driver virtscsi_driver = {
	.driver.name		= KBUILD_MODNAME,
	.driver.owner		= THIS_MODULE,
	.id_table		= virtscsi_id_table,
	.feature_table		= virtscsi_features,
	.feature_table_size	= ARRAY_SIZE(virtscsi_features),
	.probe			= virtscsi_probe,
	.remove			= virtscsi_remove,
#ifdef CONFIG_PM_SLEEP
	.freeze			= virtscsi_freeze,
	.restore		= virtscsi_restore,
#endif
};

static int virtscsi_params_show(struct seq_file *m, void *v)
{
	seq_printf(m, "sqcq: %d\n", READ_ONCE(sqcq));
	sqcq_show_poll_params(m);
	seq_printf(m, "poll_queues: %u\n", READ_ONCE(poll_queues));
	seq_printf(m, "poll_queues_supported: %d\n",
		   SQCQ_POLL_QUEUES_SUPPORTED);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(virtscsi_params);

static int __init virtscsi_guest_init(void)
{
	int ret;

	ret = sqcq_param_init("virtio_scsi_sqcq:online", &virtscsi_params_fops,
			      &virtscsi_debugfs);
	if (ret)
		return ret;
	ret = register_virtio_driver(&virtscsi_driver);
	if (ret) {
		pr_err("cannot register the virtio driver (%d)\n", ret);
		debugfs_remove_recursive(virtscsi_debugfs);
		sqcq_param_exit();
		return ret;
	}
	pr_info("version %s loaded%s\n", SQCQ_PKG_VERSION,
		SQCQ_POLL_QUEUES_SUPPORTED ? "" :
		" (poll queues unavailable on this kernel: no SCSI mq_poll)");
	return 0;
}

static void __exit virtscsi_guest_exit(void)
{
	unregister_virtio_driver(&virtscsi_driver);
	debugfs_remove_recursive(virtscsi_debugfs);
	sqcq_param_exit();
	pr_info("unloaded\n");
}

module_init(virtscsi_guest_init);
module_exit(virtscsi_guest_exit);

MODULE_DESCRIPTION("virtio-scsi driver with poll queues and SQ/CQ doorbell polling");
MODULE_AUTHOR("virtio-sqcq developers");
MODULE_LICENSE("GPL");
MODULE_VERSION(SQCQ_PKG_VERSION);
