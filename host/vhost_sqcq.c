// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost_scsi_sqcq: SQ/CQ doorbells on the host side (docs/protocol.md).
 *
 * The guest's doorbell area is pinned and mapped into the kernel once, at
 * setup, so the poll loop reads and writes it with plain loads and stores
 * (no get_user, no page walks).  The device's default worker is the poller:
 * while doorbells are installed it runs vhost_sqcq_poll_run(), which holds the
 * whole polling policy (when to spin, yield or sleep, and why) and the
 * sleep handshake of docs/protocol.md section 4.  It serves the queues it
 * owns itself, and hands a moved SQ doorbell of a queue that the owner gave
 * a worker of its own (VHOST_ATTACH_VRING_WORKER, QEMU's
 * worker_per_virtqueue) to that worker, which serves it on its CPU.
 * Completions publish the CQ index and signal only when the guest's
 * poller asked for it (vhost_sqcq_publish_cq(), called from the one
 * notify decision point, vhc_vq_notify()).
 *
 * Teardown (guest request, device reset, CLEAR_ENDPOINT, a ring stopped, a
 * memory table that no longer maps the area, the control ring moved to a
 * worker of its own, owner exit) leaves SQ NEED_WAKEUP | STOPPED set for
 * good, so the guest kicks on every submit again, and then unmaps: the
 * host never touches the area afterwards.
 */
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/sched/stat.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "sqcq_param.h"
#include "sqcq_uapi.h"
#include "sqcq_vhost.h"

/* A shared poller (poll_shared); see "Shared pollers" below. */
struct vhost_poll_group {
	int cpu;
	struct task_struct *task;
	/* The list, and pg_node/pg_worker of each device on it. */
	spinlock_t lock;
	struct list_head devs;		/* parked devices */
	unsigned int ndevs;
	u64 work_ns;			/* a worker parked after serving */
	/* Written by the poller (work_ns by parking workers), racy reads. */
	bool spinning;
	u64 window_ns;
	u64 stat_handoffs, stat_sleeps, stat_wakeups, stat_yields;
	u64 stat_sleep_why[SQCQ_SLEEP_NR];
};

static void vhost_poll_group_unpark(struct vhost_dev *dev);

static void vhost_db_free(struct vhost_sqcq *db)
{
	if (db->vaddr)
		vunmap(db->vaddr);
	if (db->npages)
		unpin_user_pages_dirty_lock(db->pages, db->npages, true);
	kvfree(db->pages);
	kfree(db);
}

int __vhost_sqcq_attach(struct vhost_dev *dev,
			const struct vhost_umem *umem, u64 gpa, u32 len,
			unsigned int first_vq, unsigned int nq, u32 flags)
{
	const struct vhost_mem_region *r;
	struct vhost_sqcq *db;
	unsigned int i, off;
	int got;

	lockdep_assert_held(&dev->poll_lock);
	if (dev->db)
		return SQCQ_S_BUSY;
	/* The whole area in one region: one contiguous user range. */
	r = vhc_umem_lookup(umem, gpa);
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
	db->sq_poll = flags & SQCQ_F_SQ_POLL;
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
		struct vhost_vq *vq = &dev->vqs[first_vq + i];
		struct sqcq_queue_lines *ql = &db->area->q[i];

		vq->sq_seen = sqcq_load16(&ql->sq_line.sq.idx);
		/*
		 * The guest set SQ NEED_WAKEUP (kick me, as in classic mode);
		 * the first poll loop clears it.  The CQ index starts where
		 * the used ring is.  A queue on a worker of its own may be
		 * completing meanwhile (only if the guest submits while its
		 * setup request is in flight): its next completion publishes
		 * the index again.
		 */
		sqcq_store16(&ql->cq_line.cq.idx, READ_ONCE(vq->last_used_idx));
		WRITE_ONCE(vq->sq, &ql->sq_line.sq);
		WRITE_ONCE(vq->cq_by_irq, !(flags & SQCQ_F_CQ_POLL));
		/*
		 * The CQ index and cq_by_irq above before the pointer: pairs
		 * with the acquire load of vq->cq in vhc_vq_notify().
		 */
		smp_store_release(&vq->cq, &ql->cq_line.cq);
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
	vhost_db_free(db);
	return SQCQ_S_NO_RESOURCES;
}

bool __vhost_sqcq_detach(struct vhost_dev *dev, const char *why)
{
	struct vhost_sqcq *db = dev->db;
	unsigned int i;

	lockdep_assert_held(&dev->poll_lock);
	if (!db)
		return false;
	trace_sqcq_teardown(dev->poll_key, dev->owner_pid, why);
	/* The shared poller reads the area while the device is parked there. */
	vhost_poll_group_unpark(dev);
	for (i = 0; i < db->nq; i++) {
		struct vhost_vq *vq = &dev->vqs[db->first_vq + i];

		/* Kick me from now on; full barrier inside. */
		sqcq_stop_polling(&vq->sq->flags, SQCQ_SQ_F_NEED_WAKEUP,
				  SQCQ_SQ_F_STOPPED);
		WRITE_ONCE(vq->sq, NULL);
		WRITE_ONCE(vq->cq, NULL);
	}
	WRITE_ONCE(dev->db, NULL);
	/*
	 * Two writers reach the area without poll_lock, each inside an RCU
	 * read section: a kick's wakeup callback withdrawing SQ NEED_WAKEUP
	 * (vhost_sqcq_kicked()), and a worker of its own publishing
	 * its queue's CQ doorbell (vhc_vq_notify()).  Wait for both to
	 * leave the area before it goes.
	 */
	synchronize_rcu();
	/*
	 * The host's last write to the area is behind us: log all of it.
	 * Every earlier write (CQ indexes, flags) is covered too, as the VMM
	 * stops the rings (GET_VRING_BASE, which detaches) before its final
	 * copy.  Logging each CQ publish instead would cost a log write per
	 * completion batch, on the path SQ/CQ exists to make cheap.
	 */
	vhc_dev_log_area(dev, db->gpa, db->len);
	vhost_db_free(db);
	vhost_dev_log(dev, KERN_INFO, "owner %d: SQ/CQ stopped (%s), queues back to classic\n",
		      dev->owner_pid, why);
	/*
	 * Requests the guest published without kicking while we polled are
	 * in the rings: serve them now, classic from here on.
	 */
	for (i = 0; i < dev->nvqs; i++)
		if (READ_ONCE(dev->vqs[i].running))
			vhc_vq_queue_work(&dev->vqs[i]);
	return true;
}

/*
 * True when the owner's address space still maps the pages we pinned at
 * db->uaddr.  The same address is not enough: the VMM may have mapped new
 * memory there, which the guest now writes while we would keep polling the
 * old pages.  Called by the owner (an ioctl), so current->mm is its mm.
 */
static bool vhost_db_pages_current(const struct vhost_sqcq *db)
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

void vhost_sqcq_revalidate(struct vhost_dev *dev,
			   const struct vhost_umem *umem)
{
	const struct vhost_mem_region *r;
	struct vhost_sqcq *db;

	mutex_lock(&dev->poll_lock);
	db = dev->db;
	if (db) {
		r = vhc_umem_lookup(umem, db->gpa);
		if (!r || db->gpa + db->len - 1 > r->last ||
		    r->uaddr + (db->gpa - r->gpa) != db->uaddr ||
		    !vhost_db_pages_current(db))
			__vhost_sqcq_detach(dev, "memory table changed");
	}
	mutex_unlock(&dev->poll_lock);
}

bool vhost_sqcq_cover(struct vhost_dev *dev, const struct vhost_vq *vq)
{
	lockdep_assert_held(&dev->poll_lock);
	return dev->db && vq->index >= dev->db->first_vq &&
	       vq->index - dev->db->first_vq < dev->db->nq;
}

/*
 * @vq's SQ index moved and the poll thread does not serve it: queue it on
 * its own worker (VHOST_ATTACH_VRING_WORKER), which serves it on its CPU
 * and publishes its CQ doorbell.  The full barrier of the bit set there
 * orders our read of the SQ index before the worker's read of the ring.
 */
static void vhost_sqcq_hand_off(struct vhost_vq *vq)
{
	WRITE_ONCE(vq->stat_handoffs, vq->stat_handoffs + 1);
	vhc_vq_queue_work(vq);
}

/*
 * Who may poll and flag a device's doorbells: its worker, with poll_lock
 * held, or, while the device is parked on a shared poller (which only its
 * worker does, with poll_lock held), that poller, with its lock held.
 */
static void vhost_sqcq_assert_owner(struct vhost_dev *dev)
{
	if (list_empty(&dev->pg_node))
		lockdep_assert_held(&dev->poll_lock);
	else
		lockdep_assert_held(&dev->pg->lock);
}

/*
 * Whether @vq's SQ index moved since the poller last acted on it; if so,
 * note the new one.  Read barrier inside: the ring after the index.  A
 * bogus index only makes the worker look at the ring, which is checked on
 * its own (avail->idx), so no trust is needed.
 */
static bool vhost_sqcq_take(struct vhost_vq *vq)
{
	u16 idx;

	vhost_sqcq_assert_owner(vq->dev);
	idx = sqcq_consume_idx(&vq->sq->idx);

	if (idx == vq->sq_seen)
		return false;
	vq->sq_seen = idx;
	WRITE_ONCE(vq->stat_doorbells, vq->stat_doorbells + 1);
	return true;
}

/*
 * Serve every polled queue whose SQ index moved, or hand it to its own
 * worker; true if any moved.
 */
static bool vhost_sqcq_poll(struct vhost_worker *w)
{
	struct vhost_dev *dev = w->dev;
	struct vhost_sqcq *db = dev->db;
	bool work = false;
	unsigned int i;

	lockdep_assert_held(&dev->poll_lock);
	for (i = 0; i < db->nq; i++) {
		struct vhost_vq *vq = &dev->vqs[db->first_vq + i];

		if (!vhost_sqcq_take(vq))
			continue;
		/* vq->worker is stable under poll_lock. */
		if (vhc_vq_on_poller(vq)) {
			vhc_worker_serve(vq, w);
			/*
			 * Up to a weight of requests per queue, and a device
			 * has up to 128 queues: a scheduling point (and an
			 * RCU-Tasks quiescent state) after each served one.
			 * poll_lock is a mutex; nobody waits for it under a
			 * spinlock.
			 */
			cond_resched_tasks_rcu_qs();
		} else {
			vhost_sqcq_hand_off(vq);
		}
		work = true;
	}
	return work;
}

/*
 * Publish SQ NEED_WAKEUP on every polled queue, full barrier, re-read each
 * index (docs/protocol.md section 4); pairs with sqcq_publish() in the
 * guest's submit path.  False, with the flags withdrawn, when a queue has
 * new requests.  The worker that sleeps is armed: TASK_INTERRUPTIBLE,
 * woken by kicks (vhc_vq_queue_work()).  Called by the worker, or by the
 * shared poller while the device is parked there and its worker asleep
 * (vhost_poll_group_let_go()).
 */
static bool vhost_sqcq_prepare_sleep(struct vhost_dev *dev)
{
	struct vhost_sqcq *db = dev->db;
	unsigned int i, j;

	vhost_sqcq_assert_owner(dev);
	for (i = 0; i < db->nq; i++) {
		struct vhost_vq *vq = &dev->vqs[db->first_vq + i];

		if (sqcq_prepare_sleep(&vq->sq->flags, SQCQ_SQ_F_NEED_WAKEUP,
				       &vq->sq->idx, vq->sq_seen))
			continue;
		for (j = 0; j < i; j++)
			sqcq_clear_need_wakeup(&dev->vqs[db->first_vq + j].sq->flags,
					       SQCQ_SQ_F_NEED_WAKEUP);
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
static void vhost_sqcq_request_kicks(struct vhost_dev *dev)
{
	struct vhost_sqcq *db = dev->db;
	unsigned int i;

	vhost_sqcq_assert_owner(dev);
	for (i = 0; i < db->nq; i++)
		sqcq_request_notify(&dev->vqs[db->first_vq + i].sq->flags,
				    SQCQ_SQ_F_NEED_WAKEUP);
}

/*
 * Polling (again): stop asking for kicks.  Only a set flag is written, so
 * a spinning poller does not dirty the line the guest reads on every
 * submit.  No barrier: see sqcq_clear_need_wakeup().
 */
static void vhost_sqcq_awake(struct vhost_dev *dev)
{
	struct vhost_sqcq *db = dev->db;
	unsigned int i;

	vhost_sqcq_assert_owner(dev);
	for (i = 0; i < db->nq; i++) {
		__le16 *flags = &dev->vqs[db->first_vq + i].sq->flags;

		if (sqcq_load16(flags) & SQCQ_SQ_F_NEED_WAKEUP)
			sqcq_clear_need_wakeup(flags, SQCQ_SQ_F_NEED_WAKEUP);
	}
}

/*
 * The guest kicked a ring whose SQ doorbell is installed: its poller asked
 * for that (SQ NEED_WAKEUP: it sleeps, yields or is parked) and is about
 * to be woken.  Without more, the flag stays set until the woken poller's
 * next pass clears it (vhost_sqcq_awake()), and the guest kicks for
 * every request it publishes meanwhile, where classic's avail_event asks
 * for one kick a sleep (bench/RESULTS.md, 2026-12-05: +0.15-0.20 exits
 * per I/O at QD32).  So the kick withdraws the flag at once.
 *
 * Only a word that is NEED_WAKEUP alone is cleared: teardown's NEED_WAKEUP
 * | STOPPED stays for good (docs/protocol.md section 5).  The flags share
 * a 32-bit word with the guest's index, and a locked compare-and-exchange
 * of that word is atomic against the guest's index store and the poller's
 * own flag stores (it fails if either came between; a few tries, then the
 * flag stays set: one spare kick, nothing lost).  It is also a full
 * barrier that orders the clear before the wakeup our caller sends next
 * (the pending bit's test_and_set_bit(), or wake_up_process()): every
 * clear is followed by a wakeup, after which the poller passes over the
 * index and sets the flag again only through sqcq_prepare_sleep(), whose
 * re-check pairs with the guest's sqcq_publish().  Waking first could
 * clear the flag of the poller's next sleep: a lost kick (tests/model:
 * kick_wake_first; correct_kick_clear checks this order).
 *
 * The area stays mapped while our caller is in its RCU read section:
 * __vhost_sqcq_detach() clears vq->sq and waits for a grace period
 * before it unmaps.
 */
void vhost_sqcq_kicked(struct sqcq_sq *sq)
{
	u32 *word = (u32 *)sq;
	u32 old = READ_ONCE(*word), prev;
	union {
		struct sqcq_sq sq;
		u32 word;
	} want;
	int tries;

	BUILD_BUG_ON(sizeof(struct sqcq_sq) != sizeof(u32));
	for (tries = 0; tries < 4; tries++) {
		want.word = old;
		if (want.sq.flags != cpu_to_le16(SQCQ_SQ_F_NEED_WAKEUP))
			return;
		want.sq.flags = 0;
		prev = cmpxchg(word, old, want.word);
		if (prev == old)
			return;
		old = prev;
	}
}

/*
 * ---- Shared pollers (poll_shared, docs/sqcq.md) ----
 *
 * With poll_cpu set and poll_shared on, a device's worker does not spin:
 * when a pass finds nothing to do it parks the device on the shared
 * poller of its CPU of poll_cpu (device number round-robin) and sleeps.
 * That poller, one kernel thread per CPU ("sqcq-poll/N"), spins over
 * the SQ indices of every device parked on it and wakes a device's worker
 * when one moves; the worker serves in the owner's mm and cgroups as
 * before, then parks again.  When the poller's idle window is over, or
 * another task wants its CPU, it does the sleep handshake of
 * docs/protocol.md section 4 for each parked device (NEED_WAKEUP, full
 * barrier, re-check) and lets it go: kicks wake its worker from then on.
 * So N devices on poll_cpu=C cost one spinning thread on C, not N.
 *
 * A parked device's doorbells are read by the poller without poll_lock:
 * the device is on the poller's list only while its worker sleeps, and
 * whoever removes the doorbells takes it off the list first, under the
 * poller's lock (__vhost_sqcq_detach()).  vq->sq_seen and the
 * device's poll counters are the worker's while it runs and the poller's
 * while the device is listed.
 */

static bool poll_shared = true;

/* A change makes every poller choose again at its next pass. */
static int vhost_poll_shared_set(const char *val,
				 const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (!ret)
		atomic_inc(&sqcq_poll_cpu_gen);
	return ret;
}

static const struct kernel_param_ops vhost_poll_shared_ops = {
	.set = vhost_poll_shared_set,
	.get = param_get_bool,
};
module_param_cb(poll_shared, &vhost_poll_shared_ops, &poll_shared, 0644);
MODULE_PARM_DESC(poll_shared, "With poll_cpu set, one shared poll thread per CPU of poll_cpu watches the SQ doorbells of all devices and wakes a device's worker when it has work (default 1); 0: each device's worker spins itself, bound to a CPU of poll_cpu");

/* Creates and stops the pollers; vhost_pgs[cpu] is read under it. */
static DEFINE_MUTEX(vhost_pg_mutex);
static struct vhost_poll_group **vhost_pgs;	/* by CPU, on first use */

/* Take parked @dev off @g's list (its worker runs or is told to). */
static void vhost_poll_group_drop(struct vhost_poll_group *g,
				  struct vhost_dev *dev)
{
	lockdep_assert_held(&g->lock);
	list_del_init(&dev->pg_node);
	g->ndevs--;
}

/* @dev's SQ index moved: its worker serves it. */
static void vhost_poll_group_hand_back(struct vhost_poll_group *g,
				       struct vhost_dev *dev)
{
	lockdep_assert_held(&g->lock);
	vhost_poll_group_drop(g, dev);
	WRITE_ONCE(dev->stat_handoffs, dev->stat_handoffs + 1);
	WRITE_ONCE(g->stat_handoffs, g->stat_handoffs + 1);
	/* Parked: the worker sleeps in vhost_sqcq_poll_run() and is alive. */
	vhc_worker_wake(dev->pg_worker);
}

/*
 * Doorbells a shared poller hands to the queues' own workers for a parked
 * device before it gives the device back to its default worker.  The
 * poller is a thread of the module, in no VM's cgroup: with no bound, a
 * guest keeping only such queues busy (or merely moving their SQ indices)
 * would keep it spinning while nothing of the VM's ran between doorbells.
 * The default worker must run once, charged to the VM and under its
 * cpu.max, for every this many, and park again; a throttled VM leaves the
 * poller to the others.  Small enough that the poller's share per
 * VM-paid pass is small, large enough that a busy queue costs its default
 * worker a wakeup only now and then.
 */
#define SQCQ_PG_HANDOFF_BUDGET	16

/*
 * Look at the polled SQ indices of parked @dev: a queue on a worker of its
 * own that moved is handed to that worker and the device stays parked,
 * within SQCQ_PG_HANDOFF_BUDGET; one on the device's worker (the default
 * one, parked), or the budget spent, makes us hand the device back to it.
 * True if any moved.
 */
static bool vhost_poll_group_scan(struct vhost_poll_group *g,
				  struct vhost_dev *dev)
{
	struct vhost_sqcq *db = dev->db;
	bool work = false;
	unsigned int i;

	vhost_sqcq_assert_owner(dev);
	for (i = 0; i < db->nq; i++) {
		struct vhost_vq *vq = &dev->vqs[db->first_vq + i];

		/*
		 * A plain read: the parked worker re-reads the index with
		 * the read barrier before the ring.
		 */
		if (sqcq_load16(&vq->sq->idx) == vq->sq_seen)
			continue;
		work = true;
		/*
		 * Which worker serves the queue may change under us (the
		 * owner moves queues under poll_lock, not our lock): either
		 * answer is safe, as vhc_vq_queue_work() queues the queue on
		 * whichever worker has it by then.
		 */
		if (rcu_access_pointer(vq->worker) == dev->pg_worker ||
		    dev->pg_handoffs >= SQCQ_PG_HANDOFF_BUDGET) {
			vhost_poll_group_hand_back(g, dev);
			return true;
		}
		if (vhost_sqcq_take(vq)) {
			dev->pg_handoffs++;
			vhost_sqcq_hand_off(vq);
		}
	}
	return work;
}

/*
 * The window is over or the CPU is wanted: the sleep handshake for every
 * parked device.  One with a request already published goes back to its
 * worker; the others are let go with SQ NEED_WAKEUP set.
 */
static void vhost_poll_group_let_go(struct vhost_poll_group *g,
				    enum sqcq_sleep_reason why)
{
	struct vhost_dev *dev, *tmp;

	lockdep_assert_held(&g->lock);
	list_for_each_entry_safe(dev, tmp, &g->devs, pg_node) {
		/* Full barrier inside, pairs with sqcq_publish() in the guest. */
		if (!vhost_sqcq_prepare_sleep(dev)) {
			vhost_poll_group_hand_back(g, dev);
			continue;
		}
		vhost_poll_group_drop(g, dev);
		WRITE_ONCE(dev->stat_sleeps, dev->stat_sleeps + 1);
		WRITE_ONCE(dev->stat_sleep_why[why],
			   dev->stat_sleep_why[why] + 1);
		trace_poll_sleep(dev->poll_key, why, SQCQ_POLLER_SHARED,
				 g->window_ns);
	}
	WRITE_ONCE(g->stat_sleeps, g->stat_sleeps + 1);
	WRITE_ONCE(g->stat_sleep_why[why], g->stat_sleep_why[why] + 1);
}

static int vhost_poll_group_fn(void *data)
{
	struct vhost_poll_group *g = data;
	int gen, bound_gen = atomic_read(&sqcq_poll_cpu_gen) - 1;
	u64 last = ktime_get_ns();
	enum sqcq_sleep_reason why = SQCQ_SLEEP_IDLE;
	bool work, yielded = false, rebind = false;
	struct vhost_dev *dev, *tmp;
	enum sqcq_poll_step step;

	while (!kthread_should_stop()) {
		/*
		 * Fails while the CPU is offline: runs elsewhere until it
		 * comes back.  One still coming online (not active yet, see
		 * sqcq_poll_bind_current_to()) is tried again at each pass.
		 */
		if (unlikely(rebind))
			rebind = set_cpus_allowed_ptr(current, cpumask_of(g->cpu)) &&
				 cpu_online(g->cpu);
		spin_lock(&g->lock);
		gen = atomic_read(&sqcq_poll_cpu_gen);
		if (gen != bound_gen) {
			/*
			 * poll_cpu, poll_shared or a device's own CPUs
			 * changed, or a CPU came back: the workers choose
			 * again.
			 */
			list_for_each_entry_safe(dev, tmp, &g->devs, pg_node)
				vhost_poll_group_hand_back(g, dev);
			spin_unlock(&g->lock);
			bound_gen = gen;
			rebind = true;
			continue;
		}
		if (list_empty(&g->devs)) {
			WRITE_ONCE(g->spinning, false);
			/* Armed under the lock: a later park wakes us. */
			set_current_state(TASK_INTERRUPTIBLE);
			spin_unlock(&g->lock);
			if (!kthread_should_stop())
				schedule();
			__set_current_state(TASK_RUNNING);
			WRITE_ONCE(g->stat_wakeups, g->stat_wakeups + 1);
			continue;
		}
		WRITE_ONCE(g->spinning, true);
		work = false;
		list_for_each_entry_safe(dev, tmp, &g->devs, pg_node) {
			/* Polling again after a yield: no kicks wanted. */
			if (yielded)
				vhost_sqcq_awake(dev);
			work |= vhost_poll_group_scan(g, dev);
		}
		/* A worker that parked after serving found work too. */
		if (g->work_ns > last)
			sqcq_poll_work_at(&g->window_ns, &last, g->work_ns);
		/* The policy of every poller (common/sqcq_poll.h). */
		step = sqcq_poll_next(&g->window_ns, &last, work, yielded,
				      false, &why);
		yielded = step == SQCQ_POLL_YIELD;
		if (step == SQCQ_POLL_SLEEP) {
			vhost_poll_group_let_go(g, why);
		} else if (step == SQCQ_POLL_YIELD) {
			/* Kicks while the other task runs; they stay parked. */
			list_for_each_entry(dev, &g->devs, pg_node)
				vhost_sqcq_request_kicks(dev);
			WRITE_ONCE(g->stat_yields, g->stat_yields + 1);
		}
		spin_unlock(&g->lock);
		sqcq_poll_pass_end(step, work);
	}
	return 0;
}

/* The shared poller of @cpu, started on first use; NULL if it cannot be. */
static struct vhost_poll_group *vhost_poll_group_get(int cpu)
{
	struct vhost_poll_group *g = NULL;
	struct task_struct *task;

	mutex_lock(&vhost_pg_mutex);
	if (!vhost_pgs)
		vhost_pgs = kcalloc(nr_cpu_ids, sizeof(*vhost_pgs), GFP_KERNEL);
	if (!vhost_pgs)
		goto out;
	g = vhost_pgs[cpu];
	if (g)
		goto out;
	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g)
		goto out;
	g->cpu = cpu;
	spin_lock_init(&g->lock);
	INIT_LIST_HEAD(&g->devs);
	g->window_ns = sqcq_poll_window_start();
	task = kthread_create(vhost_poll_group_fn, g, "sqcq-poll/%d",
			      cpu);
	if (IS_ERR(task)) {
		kfree(g);
		g = NULL;
		goto out;
	}
	g->task = task;
	vhost_pgs[cpu] = g;
	wake_up_process(task);
	vhost_lifecycle_log(KERN_INFO, "shared poll thread for CPU %d started\n",
			    cpu);
out:
	mutex_unlock(&vhost_pg_mutex);
	return g;
}

/*
 * Park @dev on its shared poller: the caller, worker @w, holds poll_lock
 * and is armed (TASK_INTERRUPTIBLE), then drops poll_lock and sleeps until
 * the poller or a kick wakes it.  @served: it served since it last parked.
 */
static void vhost_poll_group_park(struct vhost_dev *dev,
				  struct vhost_worker *w, bool served)
{
	struct vhost_poll_group *g = dev->pg;

	lockdep_assert_held(&dev->poll_lock);
	spin_lock(&g->lock);
	if (list_empty(&dev->pg_node)) {
		dev->pg_worker = w;
		dev->pg_handoffs = 0;
		list_add_tail(&dev->pg_node, &g->devs);
		g->ndevs++;
	}
	if (served)
		g->work_ns = ktime_get_ns();
	spin_unlock(&g->lock);
	WRITE_ONCE(dev->stat_parks, dev->stat_parks + 1);
	/* Sleeping with an empty list, or spinning: both fine. */
	wake_up_process(g->task);
}

/* Off the shared poller's list, if on it: the worker or the doorbells' end. */
static void vhost_poll_group_unpark(struct vhost_dev *dev)
{
	struct vhost_poll_group *g = dev->pg;

	if (!g)
		return;
	spin_lock(&g->lock);
	if (!list_empty(&dev->pg_node))
		vhost_poll_group_drop(g, dev);
	spin_unlock(&g->lock);
}

/*
 * Let the calling worker of @dev run on its owner's CPUs but @off, or on all
 * of them when that leaves none (or no mask can be allocated).
 */
static void vhost_worker_allow_but(struct vhost_dev *dev,
				   const struct cpumask *off)
{
	cpumask_var_t unbound, mask;

	if (!zalloc_cpumask_var(&unbound, GFP_KERNEL))
		return;		/* the worker stays where it is */
	vhc_worker_unbound_cpus(dev, unbound);
	if (zalloc_cpumask_var(&mask, GFP_KERNEL) &&
	    cpumask_andnot(mask, unbound, off))
		set_cpus_allowed_ptr(current, mask);
	else
		set_cpus_allowed_ptr(current, unbound);
	free_cpumask_var(mask);
	free_cpumask_var(unbound);
}

void vhost_sqcq_set_cpus(struct vhost_dev *dev, const struct cpumask *cpus)
{
	spin_lock(&dev->poll_own_lock);
	cpumask_copy(dev->poll_own, cpus);
	spin_unlock(&dev->poll_own_lock);
	atomic_inc(&sqcq_poll_cpu_gen);
}

/*
 * The device's poll CPU: the poll_key-th of its own CPUs (a TPG's
 * attrib/poll_cpu) when it has any, else of poll_cpu; as
 * sqcq_poll_pick_cpu().
 */
int vhost_sqcq_poll_cpu(struct vhost_dev *dev, bool *own)
{
	cpumask_var_t mine;
	int cpu;

	if (!zalloc_cpumask_var(&mine, GFP_KERNEL))
		return -ENOMEM;
	spin_lock(&dev->poll_own_lock);
	cpumask_copy(mine, dev->poll_own);
	spin_unlock(&dev->poll_own_lock);
	*own = !cpumask_empty(mine);
	if (!*own)
		cpu = sqcq_poll_pick_cpu(dev->poll_key);
	else
		cpu = sqcq_cpumask_nth(mine, dev->poll_key);
	free_cpumask_var(mine);
	return cpu;
}

static int vhost_sqcq_pick_cpu(struct vhost_dev *dev)
{
	bool own;

	return vhost_sqcq_poll_cpu(dev, &own);
}

/*
 * Bind the calling poller (the device's worker) to @cpu; with none
 * (nr_cpu_ids), back to where the worker runs unbound
 * (vhc_worker_unbound_cpus()).  A @cpu that is offline leaves it
 * unbound, with one line, until that CPU comes back.
 */
static int vhost_sqcq_poll_bind(struct vhost_dev *dev, int cpu)
{
	cpumask_var_t unbound;

	if (cpu < 0 || !zalloc_cpumask_var(&unbound, GFP_KERNEL))
		return cpu < 0 ? cpu : -ENOMEM;	/* stays where it is */
	vhc_worker_unbound_cpus(dev, unbound);
	cpu = sqcq_poll_bind_current_to(cpu, unbound);
	free_cpumask_var(unbound);

	if (cpu >= 0)
		vhost_dev_log(dev, KERN_INFO, "dev%u: poll thread bound to CPU %d\n",
			      dev->poll_key, cpu);
	else if (cpu == -EAGAIN)
		vhost_dev_log(dev, KERN_WARNING, "dev%u: the poll thread's CPU (poll_cpu, or its TPG's attrib/poll_cpu) is offline: unbound until it is back\n",
			      dev->poll_key);
	return cpu;
}

/*
 * Choose how the calling worker polls, after a change of poll_cpu,
 * poll_shared or the device's own CPUs: parked on a shared poller (the
 * worker itself then runs off that CPU where it can), or spinning itself
 * (vhost_sqcq_poll_bind()).
 */
static int vhost_sqcq_poll_choose(struct vhost_dev *dev)
{
	bool spin;
	int cpu;

	lockdep_assert_held(&dev->poll_lock);
	vhost_poll_group_unpark(dev);
	dev->pg = NULL;
	cpu = vhost_sqcq_pick_cpu(dev);
	/*
	 * poll_cpu empty: no CPU is given to polling, and a poller that
	 * shares the vCPUs' CPUs pays for each kick it saves with a yield or
	 * a contended sleep (docs/sqcq.md, "Polling only where a CPU is
	 * given").  The worker then serves as in classic mode.  A failed
	 * allocation (cpu < 0) keeps polling, unbound.
	 */
	spin = (unsigned int)cpu != nr_cpu_ids;
	if (!spin)
		WRITE_ONCE(dev->poll_window_ns, 0);
	else if (!dev->poll_spin)
		WRITE_ONCE(dev->poll_window_ns, sqcq_poll_window_start());
	WRITE_ONCE(dev->poll_spin, spin);
	if (READ_ONCE(poll_shared) && cpu >= 0 && (unsigned int)cpu < nr_cpu_ids)
		dev->pg = vhost_poll_group_get(cpu);
	if (!dev->pg)
		return vhost_sqcq_poll_bind(dev, cpu);
	vhost_worker_allow_but(dev, cpumask_of(cpu));
	vhost_dev_log(dev, KERN_INFO, "owner %d: SQ doorbells watched by the shared poll thread of CPU %d\n",
		      dev->owner_pid, cpu);
	return cpu;
}

void vhost_sqcq_worker_place(struct vhost_worker *w)
{
	int gen = atomic_read(&sqcq_poll_cpu_gen);
	cpumask_var_t poll;
	bool was_off;

	/* 0 at creation: poll_cpu never set, nothing to keep off. */
	if (likely(w->placed_gen == gen))
		return;
	/* Allocation failed: tried again on the next pass. */
	if (!zalloc_cpumask_var(&poll, GFP_KERNEL))
		return;
	w->placed_gen = gen;
	was_off = w->placed_off;
	w->placed_off = sqcq_poll_cpus(poll);
	/* poll_cpu cleared: back to the owner's placement (@poll empty). */
	if (w->placed_off || was_off)
		vhost_worker_allow_but(w->dev, poll);
	free_cpumask_var(poll);
}

void vhc_poll_groups_show(struct seq_file *m)
{
	struct vhost_poll_group *g;
	unsigned int cpu;

	seq_puts(m, "cpu pid state devices handoffs sleeps sleeps_idle sleeps_contended wakeups yields window_ns\n");
	mutex_lock(&vhost_pg_mutex);
	for (cpu = 0; vhost_pgs && cpu < nr_cpu_ids; cpu++) {
		g = vhost_pgs[cpu];
		if (!g)
			continue;
		seq_printf(m, "%d %d %s %u %llu %llu %llu %llu %llu %llu %llu\n",
			   g->cpu, task_pid_nr(g->task),
			   READ_ONCE(g->spinning) ? "spinning" : "sleeping",
			   READ_ONCE(g->ndevs), READ_ONCE(g->stat_handoffs),
			   READ_ONCE(g->stat_sleeps),
			   READ_ONCE(g->stat_sleep_why[SQCQ_SLEEP_IDLE]),
			   READ_ONCE(g->stat_sleep_why[SQCQ_SLEEP_CONTENDED]),
			   READ_ONCE(g->stat_wakeups),
			   READ_ONCE(g->stat_yields),
			   READ_ONCE(g->window_ns));
	}
	mutex_unlock(&vhost_pg_mutex);
}

void vhc_poll_groups_exit(void)
{
	unsigned int cpu;

	/* No device is left, so no list holds one. */
	for (cpu = 0; vhost_pgs && cpu < nr_cpu_ids; cpu++) {
		if (!vhost_pgs[cpu])
			continue;
		kthread_stop(vhost_pgs[cpu]->task);
		kfree(vhost_pgs[cpu]);
	}
	kfree(vhost_pgs);
	vhost_pgs = NULL;
}

static bool vhost_sqcq_poll_active(struct vhost_worker *w)
{
	struct vhost_dev *dev = w->dev;

	lockdep_assert_held(&dev->poll_lock);
	return dev->db && dev->db->sq_poll && !vhc_worker_should_stop(w);
}

/* Whether a request queue's SQ index moved since the poller last acted. */
static bool vhost_sqcq_moved(struct vhost_dev *dev)
{
	struct vhost_sqcq *db = dev->db;
	unsigned int i;

	lockdep_assert_held(&dev->poll_lock);
	for (i = 0; db && i < db->nq; i++) {
		struct vhost_vq *vq = &dev->vqs[db->first_vq + i];

		if (sqcq_load16(&vq->sq->idx) != vq->sq_seen)
			return true;
	}
	return false;
}

/*
 * The poll_wake tracepoint, enabled: why the worker, back from a sleep
 * (@parked: from a park on the shared poller), runs.  At the top of its
 * next pass, under poll_lock, where the doorbells can be read; only while
 * the event is on.
 */
static void vhost_sqcq_trace_wake(struct vhost_worker *w, int bound_gen,
				  bool parked)
{
	struct vhost_dev *dev = w->dev;
	enum sqcq_host_wake why = SQCQ_WAKE_OTHER;

	lockdep_assert_held(&dev->poll_lock);
	if (!vhost_sqcq_poll_active(w))
		why = SQCQ_WAKE_STOP;
	else if (vhost_sqcq_moved(dev))
		why = SQCQ_WAKE_REQUEST;
	else if (vhc_worker_has_pending(w))
		why = SQCQ_WAKE_WORK;
	else if (atomic_read(&sqcq_poll_cpu_gen) != bound_gen)
		why = SQCQ_WAKE_CPUS;
	trace_poll_wake(dev->poll_key, why, parked);
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
 *     every SQ, full barrier, re-check (vhost_sqcq_prepare_sleep()),
 *     schedule(); the next pass clears the flags.
 *
 * The idle window adapts to the gaps between requests below poll_idle_us
 * (sqcq_poll_window_update()).  Returns when the doorbells are gone or the
 * worker must stop.
 */
void vhost_sqcq_poll_run(struct vhost_worker *w)
{
	struct vhost_dev *dev = w->dev;
	int bound_gen = atomic_read(&sqcq_poll_cpu_gen) - 1;
	u64 last = ktime_get_ns();
	enum sqcq_sleep_reason why = SQCQ_SLEEP_IDLE;
	bool work, yielded = false, served = true;
	bool woke = false, parked = false;
	enum sqcq_poll_step step;
	int gen;

	for (;;) {
		mutex_lock(&dev->poll_lock);
		if (unlikely(woke)) {
			woke = false;
			vhost_sqcq_trace_wake(w, bound_gen, parked);
		}
		if (!vhost_sqcq_poll_active(w)) {
			mutex_unlock(&dev->poll_lock);
			return;
		}
		vhost_sqcq_awake(dev);
		gen = atomic_read(&sqcq_poll_cpu_gen);
		if (gen != bound_gen)
			bound_gen = sqcq_poll_bind_again(vhost_sqcq_poll_choose(dev),
							 gen);
		work = vhc_worker_serve_pending(w);
		/* Serving may have torn the doorbells down (a guest request). */
		if (!vhost_sqcq_poll_active(w)) {
			mutex_unlock(&dev->poll_lock);
			return;
		}
		work |= vhost_sqcq_poll(w);
		if (dev->pg) {
			/*
			 * A shared poller watches for us: serve while there
			 * is work, then park there and sleep.  Armed before
			 * the last test of the pending bits (kicks); the full
			 * barrier of set_current_state() also makes this
			 * pass's clear of SQ NEED_WAKEUP visible before the
			 * shared poller, once we are parked, may set it in
			 * its handshake (tests/model: no_park_mb_shared).
			 */
			served |= work;
			if (!work)
				set_current_state(TASK_INTERRUPTIBLE);
			if (work || vhc_worker_has_pending(w)) {
				__set_current_state(TASK_RUNNING);
				mutex_unlock(&dev->poll_lock);
				cond_resched_tasks_rcu_qs();
				continue;
			}
			vhost_poll_group_park(dev, w, served);
			served = false;
			mutex_unlock(&dev->poll_lock);
			schedule();
			vhost_poll_group_unpark(dev);
			woke = trace_poll_wake_enabled();
			parked = true;
			continue;
		}
		if (!dev->poll_spin) {
			/*
			 * Serve-only: while passes find work, go on (the
			 * scheduler may take the CPU between them, as between
			 * the classic worker's rounds); the first pass without
			 * any sleeps, with no window, yield or contention rule.
			 */
			why = SQCQ_SLEEP_IDLE;
			step = work ? SQCQ_POLL_SPIN : SQCQ_POLL_SLEEP;
		} else {
			step = sqcq_poll_next(&dev->poll_window_ns, &last, work,
					      yielded, false, &why);
		}
		yielded = step == SQCQ_POLL_YIELD;
		if (step == SQCQ_POLL_YIELD) {
			vhost_sqcq_request_kicks(dev);
			WRITE_ONCE(dev->stat_yields, dev->stat_yields + 1);
		}
		if (step != SQCQ_POLL_SLEEP) {
			mutex_unlock(&dev->poll_lock);
			sqcq_poll_pass_end(step, work);
			continue;
		}
		/* Armed before the re-checks: see vhc_vq_queue_work(). */
		set_current_state(TASK_INTERRUPTIBLE);
		if (vhc_worker_has_pending(w) ||
		    !vhost_sqcq_prepare_sleep(dev)) {
			__set_current_state(TASK_RUNNING);
			mutex_unlock(&dev->poll_lock);
			continue;
		}
		WRITE_ONCE(dev->stat_sleeps, dev->stat_sleeps + 1);
		WRITE_ONCE(dev->stat_sleep_why[why],
			   dev->stat_sleep_why[why] + 1);
		trace_poll_sleep(dev->poll_key, why, dev->poll_spin ?
				 SQCQ_POLLER_SPIN : SQCQ_POLLER_SERVE,
				 dev->poll_window_ns);
		mutex_unlock(&dev->poll_lock);
		schedule();
		WRITE_ONCE(dev->stat_wakeups, dev->stat_wakeups + 1);
		/* Its reason is known under poll_lock, at the next pass. */
		woke = trace_poll_wake_enabled();
		parked = false;
	}
}

bool vhost_sqcq_publish_cq(struct vhost_vq *vq, struct sqcq_cq *cq)
{
	lockdep_assert_held(&vq->mutex);
	/*
	 * The used ring (entries and used->idx) is written; publish the CQ
	 * index, full barrier, read the guest poller's flag (docs/protocol.md
	 * section 4).
	 * Pairs with sqcq_prepare_sleep() in the guest poller.
	 */
	return sqcq_publish(&cq->idx, vq->last_used_idx, &cq->flags,
			    SQCQ_CQ_F_NEED_WAKEUP);
}

const struct vhost_sqcq_ops vhost_sqcq_ops = {
	.place_worker	= vhost_sqcq_worker_place,
	.poll_run	= vhost_sqcq_poll_run,
	.kicked		= vhost_sqcq_kicked,
	.publish_cq	= vhost_sqcq_publish_cq,
	.detach		= __vhost_sqcq_detach,
	.cover		= vhost_sqcq_cover,
	.revalidate	= vhost_sqcq_revalidate,
};
