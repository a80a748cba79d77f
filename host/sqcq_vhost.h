/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Host module only (implemented in host/vhost_core.c,
 * host/vhost_sqcq.c and host/vhost_log.c): the module's own small
 * vhost core -- device ownership and the owner's mm, the guest memory
 * table, split virtqueues driven through the vhost ioctl UAPI,
 * kick/call/err eventfds and the worker thread.
 *
 * It uses only exported kernel API and the UAPI <linux/vhost.h>; it never
 * includes drivers/vhost/vhost.h (distro header packages do not ship it and
 * its structures change between releases).
 *
 * Threading model: workers (struct vhost_worker) run with the owner's mm and
 * serve virtqueues.  The default worker, created at VHOST_SET_OWNER, serves
 * every virtqueue until the owner moves one to a worker of its own
 * (VHOST_NEW_WORKER, VHOST_ATTACH_VRING_WORKER; docs/host-vhost-core.md).
 * A kick marks the queue pending in its worker and wakes that worker; the
 * worker calls the device's handle_vq() for each of its pending queues,
 * with that queue's mutex held.  Only the default worker runs the SQ/CQ
 * poll loop (it is the device's "poll thread"): doorbells are installed
 * only while every queue is on it.
 *
 * Locking:
 *   vhost_dev.mutex  serialises ioctls; protects ownership (mm, workers),
 *                    features, the current memory table and every
 *                    vhost_vq's configuration fields while no vq is running.
 *   vhost_vq.mutex   protects one queue's ring state (addresses, indices,
 *                    eventfds, umem pointer, running/broken).  Held by the
 *                    worker while it processes the queue and by every ioctl
 *                    that changes the queue, so an ioctl that holds it knows
 *                    the worker is not inside the ring.  Order: vdev.mutex
 *                    before vq.mutex; the worker takes only vq.mutex.
 *   pending bitmap   atomic bitops, one bit per queue in each worker, set
 *                    by kick wakeups (atomic context) in the bitmap of the
 *                    queue's worker and cleared by that worker.
 *   vhost_vq.worker  RCU: wakers read it under rcu_read_lock(); written
 *                    with dev.mutex, poll_lock and vq.mutex held, so any of
 *                    the three keeps it stable.
 */
#ifndef SQCQ_VHOST_H
#define SQCQ_VHOST_H

#include <linux/cpumask.h>
#include <linux/eventfd.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/ratelimit.h>
#include <linux/sched.h>
#include <linux/types.h>
#include <linux/uio.h>
#include <linux/vhost.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include "sqcq_poll.h"

/* Split ring limit of the virtio spec (queue size is a power of 2 <= 32768). */
#define SQCQ_VQ_MAX_NUM		32768u
/* Regions a memory table may hold (QEMU needs 64 unless told otherwise). */
#define SQCQ_MAX_MEM_REGIONS	512u
/* Most segments one request may have after translation (as UIO_MAXIOV). */
#define SQCQ_MAX_IOV		1024u
/* Requests one handle_vq() call serves before yielding to other queues. */
#define SQCQ_VQ_WEIGHT		256u

struct vhost_mem_region {
	u64 gpa;		/* first guest-physical byte */
	u64 last;		/* last guest-physical byte (inclusive) */
	u64 uaddr;		/* owner's virtual address of gpa */
};

/* Immutable once published; sorted by gpa, no two regions overlap. */
struct vhost_umem {
	unsigned int nregions;
	struct vhost_mem_region r[];
};

struct vhost_dev;
struct vhost_poll_group;
struct sqcq_area;
struct sqcq_sq;
struct sqcq_cq;

/*
 * A guest's SQ/CQ doorbell area, pinned and mapped into the kernel
 * (host/vhost_sqcq.c).  Owned by the device; installed and removed with
 * vhost_dev.poll_lock held.
 */
struct vhost_sqcq {
	struct page **pages;
	unsigned int npages;
	void *vaddr;			/* vmap() of the pages */
	struct sqcq_area *area;		/* vaddr + offset of the area */
	u64 gpa, uaddr;
	u32 len;
	unsigned int first_vq, nq;	/* polled queues: first_vq .. + nq */
	bool sq_poll;			/* the host polls the SQ doorbells */
};

/* One request popped from a ring: readable segments, then writable ones. */
struct vhost_req {
	u16 head;			/* head descriptor index */
	unsigned int out_cnt;		/* iov[0 .. out_cnt) device-readable */
	unsigned int in_cnt;		/* iov[out_cnt ..) device-writable */
	size_t out_len, in_len;		/* bytes of each part */
	struct iovec *iov;		/* the vq's iov array */
	u64 *gpa;			/* guest address of each iov entry */
};

/* A guest range the host writes, for the dirty log (host/vhost_log.c). */
struct vhost_log_range {
	u64 gpa;
	u64 len;
};

/*
 * A worker thread: a thread of the owner (vtsk) where the kernel has
 * vhost_task, a kthread elsewhere.  Created by VHOST_SET_OWNER (the
 * default one, id 0, the poll thread) or VHOST_NEW_WORKER; freed by
 * VHOST_FREE_WORKER or the owner's reset/release.  vtsk and kthread are set
 * before the worker is reachable from any queue and stay until it is freed,
 * a grace period after the last queue left it.
 */
struct vhost_worker {
	struct vhost_dev *dev;
	unsigned int id;		/* slot in dev->workers[] */
	bool poller;			/* the default worker: runs the poll loop */
	struct task_struct *kthread;
	struct vhost_task *vtsk;
	bool stop;			/* vtsk: leave the poll loop */
	bool killed;			/* vtsk died with the owner */
	unsigned int attached;		/* queues served; dev->mutex */
	unsigned long *pending;		/* one bit per vq, atomic bitops */
	/* Non-pollers: the sqcq_poll_cpu_gen they placed themselves for. */
	int placed_gen;
	bool placed_off;		/* poll_cpu was set: placed off it */
};

struct vhost_vq {
	struct vhost_dev *dev;
	unsigned int index;
	struct mutex mutex;		/* see the file comment */
	struct vhost_worker __rcu *worker;	/* NULL: no owner */

	/* Configuration (ioctls, vq.mutex). */
	unsigned int num;		/* 0: not set */
	bool addr_set;
	void __user *desc;		/* descriptor table, 16-byte entries */
	void __user *avail;		/* driver area (avail ring) */
	void __user *used;		/* device area (used ring) */
	bool running;			/* worker may touch the ring */
	bool broken;			/* guest sent garbage; stopped until restart */
	u32 start_gen;			/* bumped at every start of the ring */

	/* Ring state (worker, vq.mutex). */
	u16 last_avail_idx;		/* next avail entry to consume */
	u16 avail_idx_cache;		/* last avail->idx read */
	u16 last_used_idx;		/* next used entry to fill */
	u16 signalled_used;		/* used idx at the last call signal */
	bool signalled_used_valid;
	const struct vhost_umem *umem;	/* table translations use */
	struct iovec *iov;		/* SQCQ_MAX_IOV entries while running */
	u64 *iov_gpa;			/* their guest addresses, as many */

	/*
	 * Dirty logging (host/vhost_log.c), vq.mutex: the log base (a copy
	 * of dev->log_base, 0: none), whether the used ring is logged and at
	 * which guest address (VHOST_VRING_F_LOG), the log eventfd.
	 */
	u64 log_base;
	bool log_used;
	u64 log_addr;
	struct eventfd_ctx *log_ctx;

	/* Eventfds (vq.mutex for the pointers). */
	struct eventfd_ctx *call_ctx;
	struct eventfd_ctx *err_ctx;
	struct file *kick_file;		/* held while the wait entry is queued */
	wait_queue_head_t *kick_wqh;	/* the eventfd's queue, NULL: not polled */
	wait_queue_entry_t kick_wait;
	poll_table kick_pt;

	/*
	 * SQ/CQ doorbells of this queue, NULL in classic mode.  Written with
	 * dev->poll_lock held; the poll thread reads them under it (it holds
	 * it for each loop pass), the queue's worker, if another, reads cq
	 * under RCU (vhc_vq_notify()).
	 */
	struct sqcq_sq *sq;
	struct sqcq_cq *cq;
	/*
	 * The guest does not poll this queue's CQ (no SQCQ_F_CQ_POLL): a
	 * completion it wants an interrupt for still follows its used_event
	 * or NO_INTERRUPT, as in classic mode.  Written before the release
	 * store of cq, read after the acquire load (vhc_vq_notify()).
	 */
	bool cq_by_irq;
	u16 sq_seen;			/* SQ index the poller last acted on */

	/* Counters (worker; read racily by debugfs). */
	u64 stat_requests;
	u64 stat_kicks;
	u64 stat_calls;
	u64 stat_doorbells;		/* SQ index moves the poller found */
	u64 stat_calls_saved;		/* completions published without a call */
	u64 stat_handoffs;		/* doorbells passed to the queue's worker */
	u64 stat_log_writes;		/* guest ranges set in the dirty log */
};

struct vhost_dev_ops {
	/* Device feature bits offered on top of the ring features. */
	u64 features;
	/*
	 * Finish requests whose completion arrived since the last call;
	 * called by the worker with vq->mutex held before handle_vq(), even
	 * when the ring is stopped or broken (it must then free the requests
	 * without touching the ring).  Optional.
	 */
	void (*complete_vq)(struct vhost_vq *vq);
	/* Serve queue @vq; called by the worker with vq->mutex held. */
	void (*handle_vq)(struct vhost_vq *vq);
	/* Owner reset or release: drop device state; dev->mutex held. */
	void (*reset)(struct vhost_dev *dev);
	/* The SQ/CQ side: host/vhost_sqcq.c's vhost_sqcq_ops. */
	const struct vhost_sqcq_ops *sqcq;
};

/*
 * What the core asks of the SQ/CQ side (host/vhost_sqcq.c), through the
 * device's ops: the core calls no function of that file by name, so the
 * layers stay core <- SQ/CQ <- fabric <- front door (docs/host-vhost-core.md).
 * Each hook is the function of the same role declared below.
 */
struct vhost_sqcq_ops {
	/* vhost_sqcq_worker_place(): a worker that does not poll, per pass. */
	void (*place_worker)(struct vhost_worker *w);
	/* vhost_sqcq_poll_run(): the default worker while SQs are polled. */
	void (*poll_run)(struct vhost_worker *w);
	/* vhost_sqcq_kicked(): from the kick's wakeup, RCU read side. */
	void (*kicked)(struct sqcq_sq *sq);
	/* vhost_sqcq_publish_cq(): from vhc_vq_notify(). */
	bool (*publish_cq)(struct vhost_vq *vq, struct sqcq_cq *cq);
	/* __vhost_sqcq_detach(): poll_lock held. */
	bool (*detach)(struct vhost_dev *dev, const char *why);
	/* vhost_sqcq_cover(): poll_lock held. */
	bool (*cover)(struct vhost_dev *dev, const struct vhost_vq *vq);
	/* vhost_sqcq_revalidate(): after a new memory table. */
	void (*revalidate)(struct vhost_dev *dev,
			   const struct vhost_umem *umem);
};

struct vhost_dev {
	struct mutex mutex;		/* see the file comment */
	const struct vhost_dev_ops *ops;
	void *priv;			/* the device's own state */

	struct mm_struct *mm;		/* owner's mm (mmget), NULL: no owner */
	struct ratelimit_state log_rs;	/* vhost_dev_log()'s budget */
	int owner_pid;			/* tgid of the owner, for messages */
	/*
	 * The workers (see vhost_core.c), by id; [0] is the default worker
	 * while there is an owner.  At most nvqs of them.  The table is for
	 * the ioctls only (dev->mutex): wakers find a queue's worker through
	 * vq->worker.
	 */
	struct vhost_worker **workers;
	bool owner_task;		/* workers are vhost_tasks of the owner */
	struct work_struct reap_work;	/* a worker was killed: vhc_worker_reap() */
	struct task_struct *owner;	/* SET_OWNER's caller, referenced */

	u64 features;			/* acked by SET_FEATURES */
	const struct vhost_umem *umem;	/* current table, NULL: none set */
	/*
	 * The dirty log: VHOST_SET_LOG_BASE's address (0: none) and
	 * VHOST_SET_LOG_FD's eventfd.  Written with dev->mutex and poll_lock
	 * held, then copied into each vq under its mutex; the doorbell
	 * area's logging reads log_base under poll_lock.
	 */
	u64 log_base;
	struct eventfd_ctx *log_ctx;
	u64 stat_log_failures;		/* log writes that failed */

	unsigned int nvqs;
	struct vhost_vq *vqs;

	/*
	 * SQ/CQ polling.  poll_lock is held by the default worker for each
	 * loop iteration (serving queues included), by whoever installs or
	 * removes the doorbells, so the area is never touched after removal,
	 * and by whoever moves a queue between workers.  Other workers never
	 * take it: the doorbells are only installed while every queue is on
	 * the default worker.
	 * Order: dev->mutex, then poll_lock, then a vq->mutex; never take
	 * poll_lock while holding a vq->mutex.
	 */
	struct mutex poll_lock;
	struct vhost_sqcq *db;	/* NULL: classic */
	unsigned int poll_key;		/* picks the CPU of poll_cpu (device number) */
	/*
	 * The device's own poll CPUs (its TPG's attrib/poll_cpu, set by the
	 * fabric through vhost_sqcq_set_cpus()); while not empty they stand
	 * in for poll_cpu for this device alone.  poll_own_lock.
	 */
	spinlock_t poll_own_lock;
	cpumask_var_t poll_own;
	/*
	 * The shared poller of the device's poll CPU (poll_shared), NULL
	 * while the worker spins itself; set by the worker with poll_lock
	 * held.  pg_node and pg_worker belong to pg->lock: the device is on
	 * pg's list while its worker is parked there.
	 */
	struct vhost_poll_group *pg;
	struct list_head pg_node;
	struct vhost_worker *pg_worker;
	unsigned int pg_handoffs;	/* pg->lock: hand-offs since the park */
	/* Written by the poll loop (vhost_sqcq_poll_run()), racy reads. */
	bool poll_spin;			/* poll_cpu names a CPU: spin, else serve only */
	u64 poll_window_ns;		/* the adaptive idle window */
	u64 stat_sleeps, stat_wakeups, stat_yields;
	u64 stat_parks, stat_handoffs;	/* shared poller: parked, woken by it */
	u64 stat_sleep_why[SQCQ_SLEEP_NR];	/* sleeps by reason */
};

int vhc_dev_init(struct vhost_dev *dev, unsigned int nvqs,
		 const struct vhost_dev_ops *ops, void *priv);
/* Drop everything (owner, worker, rings, eventfds, table); for release. */
void vhc_dev_cleanup(struct vhost_dev *dev);

/*
 * Generic vhost ioctls.  Returns -ENOIOCTLCMD for a command this core does
 * not know, so the device can try its own.  Takes dev->mutex itself.
 */
long vhc_dev_ioctl(struct vhost_dev *dev, unsigned int cmd,
		   void __user *argp);
/* 0 when the caller owns @dev; -EPERM otherwise.  dev->mutex held. */
int vhc_dev_check_owner(struct vhost_dev *dev);
bool vhc_dev_any_running(struct vhost_dev *dev);

/* Whether the worker must leave the poll loop (stop, or a fatal signal). */
bool vhc_worker_should_stop(struct vhost_worker *w);
/*
 * Whether @vq is served by the default worker, the poll thread.  vq->mutex
 * or poll_lock held.
 */
bool vhc_vq_on_poller(struct vhost_vq *vq);
/* The id of @vq's worker (0: the default one), -1 for none.  Any context. */
int vhc_vq_worker_id(struct vhost_vq *vq);
/*
 * Into @mask: the CPUs a worker runs on when poll_cpu binds it nowhere --
 * where its owner may run now (its cpuset and affinity as they are, not
 * as they were at SET_OWNER), within the housekeeping CPUs for a kthread.
 */
void vhc_worker_unbound_cpus(struct vhost_dev *dev, struct cpumask *mask);

/* Features the core and the device offer (split ring only). */
u64 vhost_dev_offered_features(const struct vhost_dev *dev);

static inline bool vhc_dev_has_feature(struct vhost_dev *dev,
				       unsigned int bit)
{
	return READ_ONCE(dev->features) & BIT_ULL(bit);
}

/* ---- for the device's handle_vq(), vq->mutex held ---- */

/*
 * Pop the next request.  Returns 1 with @req filled, 0 when the ring is
 * empty, or a negative errno after marking the ring broken.
 */
int vhc_vq_pop(struct vhost_vq *vq, struct vhost_req *req);
/* Publish one used entry (no signal). */
int vhc_vq_push_used(struct vhost_vq *vq, u16 head, u32 len);
/* Signal the call eventfd if the driver wants it (the ONE decision point). */
void vhc_vq_notify(struct vhost_vq *vq);
/* Suppress kicks while serving the ring. */
void vhc_vq_disable_kicks(struct vhost_vq *vq);
/* Ask for kicks again; true when the ring gained entries meanwhile. */
bool vhc_vq_enable_kicks(struct vhost_vq *vq);
/* Queue @vq for the worker (as a kick would). */
void vhc_vq_queue_work(struct vhost_vq *vq);
/* Mark the ring broken and signal the err eventfd. */
void vhc_vq_fail(struct vhost_vq *vq, const char *why);

/*
 * Lines a guest or a VMM can trigger at will (SQ/CQ negotiated, refused or
 * stopped, a poller bound, an endpoint bound or cleared) are rate limited:
 * a storm of setup/teardown/close cycles gives a handful of lines, not one
 * per cycle.  A device's lines (vhost_dev_log()) pass its own budget, 10 a
 * minute, and then the module's, vhost_lifecycle_rs (30 a minute, which
 * the module's own lines use alone; vhost_scsi_sqcq_main.c defines it): one
 * VM's storm takes at most a third of the module's budget, so it does not
 * hide another VM's lines, and a storm of devices stays bounded too.
 */
extern struct ratelimit_state vhost_lifecycle_rs;

#define vhost_lifecycle_log(level, fmt, ...)				\
	do {								\
		if (__ratelimit(&vhost_lifecycle_rs))			\
			printk(level pr_fmt(fmt), ##__VA_ARGS__);	\
	} while (0)

#define vhost_dev_log(dev, level, fmt, ...)				\
	do {								\
		if (__ratelimit(&(dev)->log_rs) &&			\
		    __ratelimit(&vhost_lifecycle_rs))			\
			printk(level pr_fmt(fmt), ##__VA_ARGS__);	\
	} while (0)

/* What a serve handler returns for a request it completes later. */
#define SQCQ_REQ_ASYNC	U32_MAX

/**
 * vhc_vq_serve_sync() - serve a ring with a per-request handler
 * @vq: the ring; vq->mutex held (the worker, from handle_vq())
 * @one: handles one popped request and returns the bytes it wrote to the
 *       request's writable part, or %SQCQ_REQ_ASYNC when the request
 *       completes later (the device then pushes the used entry itself,
 *       from complete_vq())
 *
 * Handles kick suppression, the weight limit and the call signal.
 */
void vhc_vq_serve_sync(struct vhost_vq *vq,
		       u32 (*one)(struct vhost_vq *vq, struct vhost_req *req));

/* ---- SQ/CQ doorbells (host/vhost_sqcq.c) ---- */

/**
 * __vhost_sqcq_attach() - install a guest's doorbell area
 * @dev: the device; poll_lock held (the worker, serving the control queue)
 * @umem: the memory table of the queue the setup request came on
 * @gpa: the area's guest address; [@gpa, @gpa + @len) must lie in one
 *       region of @umem
 * @len: the area's length
 * @first_vq: the first polled queue
 * @nq: how many queues from @first_vq are polled through the area
 * @flags: SQCQ_F_* the guest asked for: SQ_POLL, the host polls the SQ
 *	doorbells (else the guest kicks); CQ_POLL, the guest polls the CQs
 *	(else its interrupts follow the ring's suppression, as in classic)
 *
 * Pins and maps the area (docs/protocol.md section 3).
 *
 * Return: an SQCQ_S_* status.
 */
int __vhost_sqcq_attach(struct vhost_dev *dev,
			const struct vhost_umem *umem, u64 gpa, u32 len,
			unsigned int first_vq, unsigned int nq,
			u32 flags);
/**
 * vhost_sqcq_kicked() - a kick arrived for a ring with an SQ doorbell
 * @sq: the ring's SQ doorbell (vq->sq), read under an RCU read section
 *
 * Called by the kick eventfd's wakeup callback before it wakes anyone:
 * withdraws SQ NEED_WAKEUP so that the guest stops kicking while the wakeup
 * is on its way.  See the function for the ordering it needs.
 */
void vhost_sqcq_kicked(struct sqcq_sq *sq);
/**
 * __vhost_sqcq_detach() - stop polling for good and unmap the area
 * @dev: the device; poll_lock held
 * @why: for the log line
 *
 * Leaves SQ NEED_WAKEUP | STOPPED set (docs/protocol.md section 5) and
 * queues every running ring, so requests published meanwhile are served.
 *
 * Return: false when no area was installed.
 */
bool __vhost_sqcq_detach(struct vhost_dev *dev, const char *why);
/*
 * The same from any context that holds no vq->mutex (host/vhost_core.c,
 * through the ops).
 */
void vhc_dev_stop_doorbells(struct vhost_dev *dev, const char *why);
/* Whether @vq is polled through the area; poll_lock held. */
bool vhost_sqcq_cover(struct vhost_dev *dev, const struct vhost_vq *vq);
/* After a new memory table: keep the area only if it still maps the same. */
void vhost_sqcq_revalidate(struct vhost_dev *dev,
			   const struct vhost_umem *umem);
/**
 * vhost_sqcq_poll_run() - the SQ/CQ poll loop of a device's default worker
 * @w: the default worker (the caller), without poll_lock
 *
 * Runs for as long as doorbells with SQ polling are installed: the whole
 * polling policy and the sleep handshake (host/vhost_sqcq.c).  Returns when
 * they are gone or the worker must stop.
 */
void vhost_sqcq_poll_run(struct vhost_worker *w);
/*
 * A worker that does not poll (one of VHOST_NEW_WORKER's) keeps off the
 * CPUs of poll_cpu, which are the pollers'; called by @w itself before a
 * pass, it acts once per change of poll_cpu.
 */
void vhost_sqcq_worker_place(struct vhost_worker *w);
/*
 * The device's own poll CPUs (@cpus empty: the module's poll_cpu again);
 * its pollers choose again at their next pass.  Any context that may
 * sleep.
 */
void vhost_sqcq_set_cpus(struct vhost_dev *dev, const struct cpumask *cpus);
/*
 * The CPU the device's poller takes by the current settings (its own CPUs,
 * else poll_cpu), nr_cpu_ids for none, -ENOMEM; *@own: from its own CPUs.
 * For the status views; any context that may sleep.
 */
int vhost_sqcq_poll_cpu(struct vhost_dev *dev, bool *own);
/* These, as the device's ops carry them (host/vhost_sqcq.c). */
extern const struct vhost_sqcq_ops vhost_sqcq_ops;
/*
 * The shared pollers (poll_shared): at most one kernel thread per CPU of
 * poll_cpu watches the SQ doorbells of every device whose worker is
 * parked on it (host/vhost_sqcq.c).  Stopped at module exit, when no
 * device is left.
 */
void vhc_poll_groups_exit(void);
void vhc_poll_groups_show(struct seq_file *m);
/* Wake worker @w (a kick, or the shared poller handing a device back). */
void vhc_worker_wake(struct vhost_worker *w);
/**
 * vhost_sqcq_publish_cq() - publish a ring's CQ doorbell
 * @vq: the ring, vq->mutex held; its used ring is written
 * @cq: its CQ doorbell, read once (see vhc_vq_notify())
 *
 * The completion side of the handshake, from vhc_vq_notify().
 *
 * Return: true when the guest's poller asked for an interrupt.
 */
bool vhost_sqcq_publish_cq(struct vhost_vq *vq, struct sqcq_cq *cq);
const struct vhost_mem_region *vhc_umem_lookup(const struct vhost_umem *umem,
					       u64 gpa);
/*
 * Serve @vq as worker @w (NULL: the reaper, for stopped rings only).  A
 * queue that moved to another worker meanwhile is left to that one.
 */
void vhc_worker_serve(struct vhost_vq *vq, struct vhost_worker *w);
/*
 * Worker @w (poll_lock held for the default one): serve each of its
 * pending queues; true if any.
 */
bool vhc_worker_serve_pending(struct vhost_worker *w);
/* Whether a queue of @w is pending (a kick or a completion not served yet). */
bool vhc_worker_has_pending(struct vhost_worker *w);

/* ---- dirty logging (host/vhost_log.c; the rings' part in vhost_core.c) ---- */

/*
 * A used ring's entry, and the bytes of a ring of @num entries (flags,
 * idx, ring, avail_event).
 */
struct vhost_used_elem {
	__le32 id;
	__le32 len;
};

static inline size_t vhc_used_bytes(unsigned int num)
{
	return 4 + sizeof(struct vhost_used_elem) * (size_t)num + 2;
}

/*
 * Whether @umem's guest addresses, and every logged used ring, have their
 * bits inside user memory at log base @base (0: no log, always true).
 * dev->mutex held.
 */
bool vhc_log_covers(struct vhost_dev *dev, const struct vhost_umem *umem,
		    u64 base);
/* Whether [@gpa, @gpa + @len) has its bits in user memory at @base. */
bool vhc_log_range_ok(u64 base, u64 gpa, u64 len);
/*
 * Set the bits of guest range [@gpa, @gpa + @len) in the bitmap at @base,
 * after the host's write to it, in the caller's mm.  0 or -EFAULT (a log
 * page not mapped writable, or a range that wraps).
 */
int vhc_log_mark(u64 base, u64 gpa, u64 len);
/* Whether the device logs now: a log base and LOG_ALL.  Any context. */
bool vhc_dev_logging(const struct vhost_dev *dev);
/* VHOST_SET_LOG_BASE and VHOST_SET_LOG_FD; dev->mutex held, the owner. */
long vhc_dev_set_log_base(struct vhost_dev *dev, u64 base);
long vhc_dev_set_log_fd(struct vhost_dev *dev, int fd);
/*
 * The host wrote guest range [@gpa, @gpa + @len): set its bits in the
 * dirty log if logging is on.  vq->mutex held, in the owner's mm.  A log
 * that cannot be written fails the ring (a page left out would reach the
 * destination stale).  Returns 0 or -EFAULT.
 */
int vhc_vq_log_write(struct vhost_vq *vq, u64 gpa, u64 len);
int vhc_vq_log_ranges(struct vhost_vq *vq, const struct vhost_log_range *r,
		      unsigned int n);
/* The writable part of @req, all of it; vq->mutex held. */
int vhc_vq_log_req(struct vhost_vq *vq, const struct vhost_req *req);
/* Used ring bytes [@offset, @offset + @len), if the ring is logged. */
int vhc_vq_log_used(struct vhost_vq *vq, u64 offset, u64 len);
/*
 * Into @out (room for req->in_cnt entries): the writable part of @req as
 * guest ranges, adjacent ones merged.  Returns how many.
 */
unsigned int vhc_req_in_ranges(const struct vhost_req *req,
			       struct vhost_log_range *out);
/*
 * The doorbell area [@gpa, @gpa + @len) after the host's last write to
 * it; poll_lock held.  Only in the owner's mm (an ioctl or a worker).
 */
void vhc_dev_log_area(struct vhost_dev *dev, u64 gpa, u64 len);

/* Copy between a request's segments and a kernel buffer. */
size_t vhc_req_copy_from(const struct vhost_req *req, void *buf,
			 size_t len);
size_t vhc_req_copy_to(const struct vhost_req *req, size_t offset,
		       const void *buf, size_t len);

#endif /* SQCQ_VHOST_H */
