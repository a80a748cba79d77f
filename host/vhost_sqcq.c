// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost_scsi_sqcq: SQ/CQ doorbells on the host side (docs/protocol.md).
 *
 * The guest's doorbell area is pinned and mapped into the kernel once, at
 * setup, so the poll loop reads and writes it with plain loads and stores
 * (no get_user, no page walks).  The device's worker thread is the poller:
 * while doorbells are installed it runs sqcq_poll_run(), which holds the
 * whole polling policy (when to spin, yield or sleep, and why) and the
 * sleep handshake of docs/protocol.md section 4.  Completions publish
 * the CQ index and signal only when the guest's poller asked for it
 * (sqcq_doorbells_publish_cq(), called from the one notify decision point,
 * sqcq_vq_notify()).
 *
 * Teardown (guest request, device reset, CLEAR_ENDPOINT, a ring stopped, a
 * memory table that no longer maps the area, owner exit) leaves SQ
 * NEED_WAKEUP | STOPPED set for good, so the guest kicks on every submit
 * again, and then unmaps: the host never touches the area afterwards.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/sched/stat.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "sqcq_param.h"
#include "sqcq_uapi.h"
#include "sqcq_vhost.h"

static void sqcq_db_free(struct sqcq_doorbells *db)
{
	if (db->vaddr)
		vunmap(db->vaddr);
	if (db->npages)
		unpin_user_pages_dirty_lock(db->pages, db->npages, true);
	kvfree(db->pages);
	kfree(db);
}

int __sqcq_doorbells_attach(struct sqcq_vdev *dev,
			    const struct sqcq_umem *umem, u64 gpa, u32 len,
			    unsigned int first_vq, unsigned int nq, bool sq_poll)
{
	const struct sqcq_mem_region *r;
	struct sqcq_doorbells *db;
	unsigned int i, off;
	int got;

	lockdep_assert_held(&dev->poll_lock);
	if (dev->db)
		return SQCQ_S_BUSY;
	/* The whole area in one region: one contiguous user range. */
	r = sqcq_umem_lookup(umem, gpa);
	if (!r || gpa + len - 1 > r->last)
		return SQCQ_S_BAD_ADDR;

	db = kzalloc(sizeof(*db), GFP_KERNEL_ACCOUNT);
	if (!db)
		return SQCQ_S_NO_RESOURCES;
	db->gpa = gpa;
	db->len = len;
	db->uaddr = r->uaddr + (gpa - r->gpa);
	db->first_vq = first_vq;
	db->nq = nq;
	db->sq_poll = sq_poll;
	off = db->uaddr & ~PAGE_MASK;
	db->npages = DIV_ROUND_UP(off + len, PAGE_SIZE);
	db->pages = kvcalloc(db->npages, sizeof(*db->pages),
			     GFP_KERNEL_ACCOUNT);
	if (!db->pages) {
		db->npages = 0;
		goto fail;
	}
	/* The worker runs in the owner's mm (kthread_use_mm). */
	got = pin_user_pages_fast(db->uaddr & PAGE_MASK, db->npages,
				  FOLL_WRITE | FOLL_LONGTERM, db->pages);
	if (got != db->npages) {
		db->npages = got > 0 ? got : 0;
		goto fail;
	}
	db->vaddr = vmap(db->pages, db->npages, VM_MAP, PAGE_KERNEL);
	if (!db->vaddr)
		goto fail;
	db->area = db->vaddr + off;

	for (i = 0; i < nq; i++) {
		struct sqcq_vq *vq = &dev->vqs[first_vq + i];
		struct sqcq_queue_lines *ql = &db->area->q[i];

		WRITE_ONCE(vq->sq, &ql->sq_line.sq);
		WRITE_ONCE(vq->cq, &ql->cq_line.cq);
		vq->sq_seen = sqcq_load16(&vq->sq->idx);
		/*
		 * The guest set SQ NEED_WAKEUP (kick me, as in classic mode);
		 * the first poll loop clears it.  The CQ index starts where
		 * the used ring is.
		 */
		sqcq_store16(&vq->cq->idx, vq->last_used_idx);
	}
	/*
	 * debugfs reads mode and queue pointers without poll_lock.  The
	 * worker sees the doorbells when it drops poll_lock and enters the
	 * poll loop, whose first pass clears SQ NEED_WAKEUP.
	 */
	WRITE_ONCE(dev->db, db);
	WRITE_ONCE(dev->poll_window_ns, sqcq_poll_window_start());
	return SQCQ_S_OK;

fail:
	sqcq_db_free(db);
	return SQCQ_S_NO_RESOURCES;
}

bool __sqcq_doorbells_detach(struct sqcq_vdev *dev, const char *why)
{
	struct sqcq_doorbells *db = dev->db;
	unsigned int i;

	lockdep_assert_held(&dev->poll_lock);
	if (!db)
		return false;
	for (i = 0; i < db->nq; i++) {
		struct sqcq_vq *vq = &dev->vqs[db->first_vq + i];

		/* Kick me from now on; full barrier inside. */
		sqcq_stop_polling(&vq->sq->flags, VRING_SQ_F_NEED_WAKEUP,
				  VRING_SQ_F_STOPPED);
		WRITE_ONCE(vq->sq, NULL);
		WRITE_ONCE(vq->cq, NULL);
	}
	WRITE_ONCE(dev->db, NULL);
	sqcq_db_free(db);
	sqcq_lifecycle_log(KERN_INFO, "owner %d: SQ/CQ stopped (%s), queues back to classic\n",
			   dev->owner_pid, why);
	/*
	 * Requests the guest published without kicking while we polled are
	 * in the rings: serve them now, classic from here on.
	 */
	for (i = 0; i < dev->nvqs; i++)
		if (READ_ONCE(dev->vqs[i].running))
			sqcq_vq_queue_work(&dev->vqs[i]);
	return true;
}

void sqcq_doorbells_detach(struct sqcq_vdev *dev, const char *why)
{
	/* The worker holds poll_lock for a whole loop: we wait for it. */
	mutex_lock(&dev->poll_lock);
	__sqcq_doorbells_detach(dev, why);
	mutex_unlock(&dev->poll_lock);
}

/*
 * True when the owner's address space still maps the pages we pinned at
 * db->uaddr.  The same address is not enough: the VMM may have mapped new
 * memory there, which the guest now writes while we would keep polling the
 * old pages.  Called by the owner (an ioctl), so current->mm is its mm.
 */
static bool sqcq_db_pages_current(const struct sqcq_doorbells *db)
{
	struct page **now;
	bool same;
	int got, i;

	now = kvcalloc(db->npages, sizeof(*now), GFP_KERNEL_ACCOUNT);
	if (!now)
		return false;
	got = get_user_pages_fast(db->uaddr & PAGE_MASK, db->npages,
				  FOLL_WRITE, now);
	same = got == (int)db->npages &&
	       !memcmp(now, db->pages, db->npages * sizeof(*now));
	for (i = 0; i < got; i++)
		put_page(now[i]);
	kvfree(now);
	return same;
}

void sqcq_doorbells_revalidate(struct sqcq_vdev *dev,
			       const struct sqcq_umem *umem)
{
	const struct sqcq_mem_region *r;
	struct sqcq_doorbells *db;

	mutex_lock(&dev->poll_lock);
	db = dev->db;
	if (db) {
		r = sqcq_umem_lookup(umem, db->gpa);
		if (!r || db->gpa + db->len - 1 > r->last ||
		    r->uaddr + (db->gpa - r->gpa) != db->uaddr ||
		    !sqcq_db_pages_current(db))
			__sqcq_doorbells_detach(dev, "memory table changed");
	}
	mutex_unlock(&dev->poll_lock);
}

/* Serve every polled queue whose SQ index moved; true if any did. */
static bool sqcq_doorbells_poll(struct sqcq_vdev *dev)
{
	struct sqcq_doorbells *db = dev->db;
	bool work = false;
	unsigned int i;

	lockdep_assert_held(&dev->poll_lock);
	for (i = 0; i < db->nq; i++) {
		struct sqcq_vq *vq = &dev->vqs[db->first_vq + i];
		u16 idx;

		/* Read barrier inside: the ring after the index. */
		idx = sqcq_consume_idx(&vq->sq->idx);
		if (idx == vq->sq_seen)
			continue;
		/*
		 * A bogus index only makes us look at the ring, which is
		 * checked on its own (avail->idx), so no trust is needed.
		 */
		vq->sq_seen = idx;
		WRITE_ONCE(vq->stat_doorbells, vq->stat_doorbells + 1);
		sqcq_worker_serve(vq);
		work = true;
	}
	return work;
}

/*
 * Publish SQ NEED_WAKEUP on every polled queue, full barrier, re-read each
 * index (docs/protocol.md section 4); pairs with sqcq_publish() in the
 * guest's submit path.  False, with the flags withdrawn, when a queue has
 * new requests.  The caller is armed: TASK_INTERRUPTIBLE, woken by kicks
 * (sqcq_vq_queue_work()).
 */
static bool sqcq_doorbells_prepare_sleep(struct sqcq_vdev *dev)
{
	struct sqcq_doorbells *db = dev->db;
	unsigned int i, j;

	lockdep_assert_held(&dev->poll_lock);
	for (i = 0; i < db->nq; i++) {
		struct sqcq_vq *vq = &dev->vqs[db->first_vq + i];

		if (sqcq_prepare_sleep(&vq->sq->flags, VRING_SQ_F_NEED_WAKEUP,
				       &vq->sq->idx, vq->sq_seen))
			continue;
		for (j = 0; j < i; j++)
			sqcq_clear_need_wakeup(&dev->vqs[db->first_vq + j].sq->flags,
					       VRING_SQ_F_NEED_WAKEUP);
		return false;
	}
	return true;
}

/*
 * Ask for kicks on every polled queue before leaving the CPU without
 * sleeping (a yield); the full barrier inside pairs with sqcq_publish() in
 * the guest.  A request published before the guest saw the flag was not
 * kicked: the next pass finds it through the index, as it would anyway.
 */
static void sqcq_doorbells_request_kicks(struct sqcq_vdev *dev)
{
	struct sqcq_doorbells *db = dev->db;
	unsigned int i;

	lockdep_assert_held(&dev->poll_lock);
	for (i = 0; i < db->nq; i++)
		sqcq_request_notify(&dev->vqs[db->first_vq + i].sq->flags,
				    VRING_SQ_F_NEED_WAKEUP);
}

/*
 * Polling (again): stop asking for kicks.  Only a set flag is written, so
 * a spinning poller does not dirty the line the guest reads on every
 * submit.  No barrier: see sqcq_clear_need_wakeup().
 */
static void sqcq_doorbells_awake(struct sqcq_vdev *dev)
{
	struct sqcq_doorbells *db = dev->db;
	unsigned int i;

	lockdep_assert_held(&dev->poll_lock);
	for (i = 0; i < db->nq; i++) {
		__le16 *flags = &dev->vqs[db->first_vq + i].sq->flags;

		if (sqcq_load16(flags) & VRING_SQ_F_NEED_WAKEUP)
			sqcq_clear_need_wakeup(flags, VRING_SQ_F_NEED_WAKEUP);
	}
}

static bool sqcq_poll_active(struct sqcq_vdev *dev)
{
	lockdep_assert_held(&dev->poll_lock);
	return dev->db && dev->db->sq_poll && !kthread_should_stop();
}

/*
 * The SQ/CQ poll loop of a device's worker, shaped like io_uring's SQPOLL
 * thread: each pass holds poll_lock (the doorbells cannot go away under
 * it), stops asking for kicks, rebinds if poll_cpu changed, serves pending
 * queues and moved SQ doorbells, then does what sqcq_poll_decide()
 * (common/sqcq_poll.h) says:
 *
 *   - spin: poll again;
 *   - yield (another task wants this CPU): ask for kicks on every SQ, give
 *     the CPU up if the scheduler wants it, and poll again; the next pass
 *     clears the flags;
 *   - sleep (idle window over, or still contended after a yield): the
 *     handshake of docs/protocol.md section 4: task state, NEED_WAKEUP on
 *     every SQ, full barrier, re-check (sqcq_doorbells_prepare_sleep()),
 *     schedule(); the next pass clears the flags.
 *
 * The idle window adapts to the gaps between requests below poll_idle_us
 * (sqcq_poll_window_update()).  Returns when the doorbells are gone or the
 * worker must stop.
 */
void sqcq_poll_run(struct sqcq_vdev *dev)
{
	int bound_gen = atomic_read(&sqcq_poll_cpu_gen) - 1;
	u64 last = ktime_get_ns(), now;
	enum sqcq_sleep_reason why = SQCQ_SLEEP_IDLE;
	bool work, contended, yielded = false;
	enum sqcq_poll_step step;
	int gen;

	for (;;) {
		mutex_lock(&dev->poll_lock);
		if (!sqcq_poll_active(dev)) {
			mutex_unlock(&dev->poll_lock);
			return;
		}
		sqcq_doorbells_awake(dev);
		gen = atomic_read(&sqcq_poll_cpu_gen);
		if (gen != bound_gen) {
			bound_gen = gen;
			dev->ops->poll_bind(dev);
		}
		work = sqcq_worker_serve_pending(dev);
		/* Serving may have torn the doorbells down (a guest request). */
		if (!sqcq_poll_active(dev)) {
			mutex_unlock(&dev->poll_lock);
			return;
		}
		work |= sqcq_doorbells_poll(dev);
		now = ktime_get_ns();
		if (work)
			sqcq_poll_work_at(&dev->poll_window_ns, &last, now);
		contended = need_resched() || !single_task_running();
		step = sqcq_poll_decide(work, contended, yielded, false,
					now - last >=
					sqcq_poll_window(dev->poll_window_ns),
					&why);
		yielded = step == SQCQ_POLL_YIELD;
		if (step == SQCQ_POLL_YIELD) {
			sqcq_doorbells_request_kicks(dev);
			WRITE_ONCE(dev->stat_yields, dev->stat_yields + 1);
		}
		if (step != SQCQ_POLL_SLEEP) {
			mutex_unlock(&dev->poll_lock);
			if (step == SQCQ_POLL_YIELD)
				sqcq_poll_give_cpu();
			else if (!work)
				cpu_relax();
			/* RCU's quiescent state on kernels without preemption. */
			cond_resched();
			continue;
		}
		/* Armed before the re-checks: see sqcq_vq_queue_work(). */
		set_current_state(TASK_INTERRUPTIBLE);
		if (sqcq_worker_has_pending(dev) ||
		    !sqcq_doorbells_prepare_sleep(dev)) {
			__set_current_state(TASK_RUNNING);
			mutex_unlock(&dev->poll_lock);
			continue;
		}
		WRITE_ONCE(dev->stat_sleeps, dev->stat_sleeps + 1);
		WRITE_ONCE(dev->stat_sleep_why[why],
			   dev->stat_sleep_why[why] + 1);
		mutex_unlock(&dev->poll_lock);
		schedule();
		WRITE_ONCE(dev->stat_wakeups, dev->stat_wakeups + 1);
	}
}

bool sqcq_doorbells_publish_cq(struct sqcq_vq *vq)
{
	lockdep_assert_held(&vq->mutex);
	/*
	 * The used ring (entries and used->idx) is written; publish the CQ
	 * index, full barrier, read the guest poller's flag (docs/protocol.md
	 * section 4).
	 * Pairs with sqcq_prepare_sleep() in the guest poller.
	 */
	return sqcq_publish(&vq->cq->idx, vq->last_used_idx, &vq->cq->flags,
			    VRING_CQ_F_NEED_WAKEUP);
}
