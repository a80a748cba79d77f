/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Host module only (implemented in host/vhost_core.c and
 * host/vhost_sqcq.c): the module's own small
 * vhost core -- device ownership and the owner's mm, the guest memory
 * table, split virtqueues driven through the vhost ioctl UAPI,
 * kick/call/err eventfds and the worker thread.
 *
 * It uses only exported kernel API and the UAPI <linux/vhost.h>; it never
 * includes drivers/vhost/vhost.h (distro header packages do not ship it and
 * its structures change between releases).
 *
 * Threading model: one worker kthread per device, created at
 * VHOST_SET_OWNER, running with the owner's mm (kthread_use_mm), serves every
 * virtqueue of the device.  A kick marks the queue pending and wakes the
 * worker; the worker calls the device's handle_vq() for each pending queue,
 * with that queue's mutex held.
 *
 * Locking:
 *   sqcq_vdev.mutex  serialises ioctls; protects ownership (mm, worker),
 *                    features, the current memory table and every
 *                    sqcq_vq's configuration fields while no vq is running.
 *   sqcq_vq.mutex    protects one queue's ring state (addresses, indices,
 *                    eventfds, umem pointer, running/broken).  Held by the
 *                    worker while it processes the queue and by every ioctl
 *                    that changes the queue, so an ioctl that holds it knows
 *                    the worker is not inside the ring.  Order: vdev.mutex
 *                    before vq.mutex; the worker takes only vq.mutex.
 *   pending bitmap   atomic bitops, one bit per queue, set by kick wakeups
 *                    (atomic context) and cleared by the worker.
 */
#ifndef SQCQ_VHOST_H
#define SQCQ_VHOST_H

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
#include "sqcq_poll.h"

/* Split ring limit of the virtio spec (queue size is a power of 2 <= 32768). */
#define SQCQ_VQ_MAX_NUM		32768u
/* Regions a memory table may hold (QEMU needs 64 unless told otherwise). */
#define SQCQ_MAX_MEM_REGIONS	512u
/* Most segments one request may have after translation (as UIO_MAXIOV). */
#define SQCQ_MAX_IOV		1024u
/* Requests one handle_vq() call serves before yielding to other queues. */
#define SQCQ_VQ_WEIGHT		256u

struct sqcq_mem_region {
	u64 gpa;		/* first guest-physical byte */
	u64 last;		/* last guest-physical byte (inclusive) */
	u64 uaddr;		/* owner's virtual address of gpa */
};

/* Immutable once published; sorted by gpa, no two regions overlap. */
struct sqcq_umem {
	unsigned int nregions;
	struct sqcq_mem_region r[];
};

struct sqcq_vdev;
struct sqcq_area;
struct vring_sq;
struct vring_cq;

/*
 * A guest's SQ/CQ doorbell area, pinned and mapped into the kernel
 * (host/vhost_sqcq.c).  Owned by the device; installed and removed with
 * sqcq_vdev.poll_lock held.
 */
struct sqcq_doorbells {
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
struct sqcq_req {
	u16 head;			/* head descriptor index */
	unsigned int out_cnt;		/* iov[0 .. out_cnt) device-readable */
	unsigned int in_cnt;		/* iov[out_cnt ..) device-writable */
	size_t out_len, in_len;		/* bytes of each part */
	struct iovec *iov;		/* the vq's iov array */
};

struct sqcq_vq {
	struct sqcq_vdev *dev;
	unsigned int index;
	struct mutex mutex;		/* see the file comment */

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
	const struct sqcq_umem *umem;	/* table translations use */
	struct iovec *iov;		/* SQCQ_MAX_IOV entries while running */

	/* Eventfds (vq.mutex for the pointers). */
	struct eventfd_ctx *call_ctx;
	struct eventfd_ctx *err_ctx;
	struct file *kick_file;		/* held while the wait entry is queued */
	wait_queue_head_t *kick_wqh;	/* the eventfd's queue, NULL: not polled */
	wait_queue_entry_t kick_wait;
	poll_table kick_pt;

	/*
	 * SQ/CQ doorbells of this queue, NULL in classic mode.  Written with
	 * dev->poll_lock held, read by the worker (which holds poll_lock for
	 * each loop iteration).
	 */
	struct vring_sq *sq;
	struct vring_cq *cq;
	u16 sq_seen;			/* SQ index the worker last acted on */

	/* Counters (worker; read racily by debugfs). */
	u64 stat_requests;
	u64 stat_kicks;
	u64 stat_calls;
	u64 stat_doorbells;		/* SQ index moves the poller found */
	u64 stat_calls_saved;		/* completions published without a call */
};

struct sqcq_vdev_ops {
	/* Device feature bits offered on top of the ring features. */
	u64 features;
	/*
	 * Finish requests whose completion arrived since the last call;
	 * called by the worker with vq->mutex held before handle_vq(), even
	 * when the ring is stopped or broken (it must then free the requests
	 * without touching the ring).  Optional.
	 */
	void (*complete_vq)(struct sqcq_vq *vq);
	/* Serve queue @vq; called by the worker with vq->mutex held. */
	void (*handle_vq)(struct sqcq_vq *vq);
	/* Owner reset or release: drop device state; dev->mutex held. */
	void (*reset)(struct sqcq_vdev *dev);
	/* Bind the calling poller per the poll_cpu setting. */
	void (*poll_bind)(struct sqcq_vdev *dev);
};

struct sqcq_vdev {
	struct mutex mutex;		/* see the file comment */
	const struct sqcq_vdev_ops *ops;
	void *priv;			/* the device's own state */

	struct mm_struct *mm;		/* owner's mm (mmget), NULL: no owner */
	struct task_struct *worker;
	int owner_pid;			/* tgid of the owner, for messages */

	u64 features;			/* acked by SET_FEATURES */
	const struct sqcq_umem *umem;	/* current table, NULL: none set */

	unsigned int nvqs;
	struct sqcq_vq *vqs;
	unsigned long *pending;		/* one bit per vq, atomic bitops */

	/*
	 * SQ/CQ polling.  poll_lock is held by the worker for each loop
	 * iteration (serving queues included) and by whoever installs or
	 * removes the doorbells, so the area is never touched after removal.
	 * Order: dev->mutex, then poll_lock, then a vq->mutex; never take
	 * poll_lock while holding a vq->mutex.
	 */
	struct mutex poll_lock;
	struct sqcq_doorbells *db;	/* NULL: classic */
	/* Written by the poll loop (sqcq_poll_run()), racy reads. */
	u64 poll_window_ns;		/* the adaptive idle window */
	u64 stat_sleeps, stat_wakeups, stat_yields;
	u64 stat_sleep_why[SQCQ_SLEEP_NR];	/* sleeps by reason */
};

int sqcq_vdev_init(struct sqcq_vdev *dev, unsigned int nvqs,
		   const struct sqcq_vdev_ops *ops, void *priv);
/* Drop everything (owner, worker, rings, eventfds, table); for release. */
void sqcq_vdev_cleanup(struct sqcq_vdev *dev);

/*
 * Generic vhost ioctls.  Returns -ENOIOCTLCMD for a command this core does
 * not know, so the device can try its own.  Takes dev->mutex itself.
 */
long sqcq_vdev_ioctl(struct sqcq_vdev *dev, unsigned int cmd,
		     void __user *argp);
/* 0 when the caller owns @dev; -EPERM otherwise.  dev->mutex held. */
int sqcq_vdev_check_owner(struct sqcq_vdev *dev);
bool sqcq_vdev_any_running(struct sqcq_vdev *dev);

/* Features the core and the device offer (split ring only). */
u64 sqcq_vdev_offered_features(const struct sqcq_vdev *dev);

static inline bool sqcq_vdev_has_feature(struct sqcq_vdev *dev,
					 unsigned int bit)
{
	return READ_ONCE(dev->features) & BIT_ULL(bit);
}

/* ---- for the device's handle_vq(), vq->mutex held ---- */

/*
 * Pop the next request.  Returns 1 with @req filled, 0 when the ring is
 * empty, or a negative errno after marking the ring broken.
 */
int sqcq_vq_pop(struct sqcq_vq *vq, struct sqcq_req *req);
/* Publish one used entry (no signal). */
int sqcq_vq_push_used(struct sqcq_vq *vq, u16 head, u32 len);
/* Signal the call eventfd if the driver wants it (the ONE decision point). */
void sqcq_vq_notify(struct sqcq_vq *vq);
/* Suppress kicks while serving the ring. */
void sqcq_vq_disable_kicks(struct sqcq_vq *vq);
/* Ask for kicks again; true when the ring gained entries meanwhile. */
bool sqcq_vq_enable_kicks(struct sqcq_vq *vq);
/* Queue @vq for the worker (as a kick would). */
void sqcq_vq_queue_work(struct sqcq_vq *vq);
/* Mark the ring broken and signal the err eventfd. */
void sqcq_vq_fail(struct sqcq_vq *vq, const char *why);

/*
 * Lines a guest or a VMM can trigger at will (SQ/CQ negotiated, refused or
 * stopped, a poller bound, an endpoint bound or cleared) share one rate
 * limit for the whole module: a storm of setup/teardown/close cycles gives
 * a handful of lines, not one per cycle.  vhost_scsi_sqcq.c defines it.
 */
extern struct ratelimit_state sqcq_lifecycle_rs;

#define sqcq_lifecycle_log(level, fmt, ...)				\
	do {								\
		if (__ratelimit(&sqcq_lifecycle_rs))			\
			printk(level pr_fmt(fmt), ##__VA_ARGS__);	\
	} while (0)

/* What a serve handler returns for a request it completes later. */
#define SQCQ_REQ_ASYNC	U32_MAX

/**
 * sqcq_vq_serve_sync() - serve a ring with a per-request handler
 * @vq: the ring; vq->mutex held (the worker, from handle_vq())
 * @one: handles one popped request and returns the bytes it wrote to the
 *       request's writable part, or %SQCQ_REQ_ASYNC when the request
 *       completes later (the device then pushes the used entry itself,
 *       from complete_vq())
 *
 * Handles kick suppression, the weight limit and the call signal.
 */
void sqcq_vq_serve_sync(struct sqcq_vq *vq,
			u32 (*one)(struct sqcq_vq *vq, struct sqcq_req *req));

/* ---- SQ/CQ doorbells (host/vhost_sqcq.c) ---- */

/**
 * __sqcq_doorbells_attach() - install a guest's doorbell area
 * @dev: the device; poll_lock held (the worker, serving the control queue)
 * @umem: the memory table of the queue the setup request came on
 * @gpa: the area's guest address; [@gpa, @gpa + @len) must lie in one
 *       region of @umem
 * @len: the area's length
 * @first_vq: the first polled queue
 * @nq: how many queues from @first_vq are polled through the area
 * @sq_poll: the host polls the SQ doorbells (else the guest kicks)
 *
 * Pins and maps the area (docs/protocol.md section 3).
 *
 * Return: an SQCQ_S_* status.
 */
int __sqcq_doorbells_attach(struct sqcq_vdev *dev,
			    const struct sqcq_umem *umem, u64 gpa, u32 len,
			    unsigned int first_vq, unsigned int nq,
			    bool sq_poll);
/**
 * __sqcq_doorbells_detach() - stop polling for good and unmap the area
 * @dev: the device; poll_lock held
 * @why: for the log line
 *
 * Leaves SQ NEED_WAKEUP | STOPPED set (docs/protocol.md section 5) and
 * queues every running ring, so requests published meanwhile are served.
 *
 * Return: false when no area was installed.
 */
bool __sqcq_doorbells_detach(struct sqcq_vdev *dev, const char *why);
/* The same from any context that holds no vq->mutex. */
void sqcq_doorbells_detach(struct sqcq_vdev *dev, const char *why);
/* After a new memory table: keep the area only if it still maps the same. */
void sqcq_doorbells_revalidate(struct sqcq_vdev *dev,
			       const struct sqcq_umem *umem);
/**
 * sqcq_poll_run() - the SQ/CQ poll loop of a device's worker
 * @dev: the device; called by its worker without poll_lock
 *
 * Runs for as long as doorbells with SQ polling are installed: the whole
 * polling policy and the sleep handshake (host/vhost_sqcq.c).  Returns when
 * they are gone or the worker must stop.
 */
void sqcq_poll_run(struct sqcq_vdev *dev);
/**
 * sqcq_doorbells_publish_cq() - publish a ring's CQ doorbell
 * @vq: the ring, vq->mutex held; its used ring is written
 *
 * The completion side of the handshake, from sqcq_vq_notify().
 *
 * Return: true when the guest's poller asked for an interrupt.
 */
bool sqcq_doorbells_publish_cq(struct sqcq_vq *vq);
const struct sqcq_mem_region *sqcq_umem_lookup(const struct sqcq_umem *umem,
					       u64 gpa);
void sqcq_worker_serve(struct sqcq_vq *vq);
/* Worker, poll_lock held: serve every pending queue; true if any. */
bool sqcq_worker_serve_pending(struct sqcq_vdev *dev);
/* Whether a queue is pending (a kick or a completion not served yet). */
bool sqcq_worker_has_pending(struct sqcq_vdev *dev);

/* Copy between a request's segments and a kernel buffer. */
size_t sqcq_req_copy_from(const struct sqcq_req *req, void *buf,
			  size_t len);
size_t sqcq_req_copy_to(const struct sqcq_req *req, size_t offset,
			const void *buf, size_t len);

#endif /* SQCQ_VHOST_H */
