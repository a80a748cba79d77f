// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost_scsi_sqcq: the module's own vhost core (see host/sqcq_vhost.h for
 * the threading and locking model).
 *
 * Everything the guest or the VMM hands us is treated as hostile: ring
 * indices, descriptor chains, lengths, addresses and ioctl arguments are
 * validated before use; a ring that breaks the rules is marked broken (and
 * the err eventfd signalled) instead of being trusted.
 */
#include <linux/cgroup.h>
#include <linux/file.h>
#include <linux/kthread.h>
#include <linux/log2.h>
#include <linux/memcontrol.h>
#include <linux/mm.h>
#include <linux/nospec.h>
#include <linux/overflow.h>
#include <linux/sched/isolation.h>
#include <linux/sched/signal.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>

#include "sqcq_vhost.h"

/* Ring features of this core; the device adds its own (ops->features). */
#define SQCQ_RING_FEATURES	(BIT_ULL(VIRTIO_F_VERSION_1) |		\
				 BIT_ULL(VIRTIO_F_ANY_LAYOUT) |		\
				 BIT_ULL(VIRTIO_F_NOTIFY_ON_EMPTY) |	\
				 BIT_ULL(VIRTIO_RING_F_INDIRECT_DESC) |	\
				 BIT_ULL(VIRTIO_RING_F_EVENT_IDX))

/*
 * Split ring layout (virtio 1.x 2.7), as byte offsets so every access goes
 * through a typed little-endian user pointer:
 *   avail: le16 flags, le16 idx, le16 ring[num], le16 used_event
 *   used:  le16 flags, le16 idx, {le32 id, le32 len} ring[num], le16 avail_event
 */
#define SQCQ_DESC_SIZE		16u
#define SQCQ_DESC_ALIGN		16u
#define SQCQ_AVAIL_ALIGN	2u
#define SQCQ_USED_ALIGN		4u
/* Descriptors a chain walk reads between two scheduling points. */
#define SQCQ_WALK_RESCHED	256u

struct vhost_desc {
	__le64 addr;
	__le32 len;
	__le16 flags;
	__le16 next;
};

static size_t vhc_avail_bytes(unsigned int num)
{
	return 4 + 2 * (size_t)num + 2;
}

static __le16 __user *vhost_avail_flags(struct vhost_vq *vq)
{
	return vq->avail;
}

static __le16 __user *vhost_avail_idx(struct vhost_vq *vq)
{
	return vq->avail + 2;
}

static __le16 __user *vhost_avail_entry(struct vhost_vq *vq, u16 idx)
{
	return vq->avail + 4 + 2 * (idx & (vq->num - 1));
}

static __le16 __user *vhost_used_event(struct vhost_vq *vq)
{
	return vq->avail + 4 + 2 * vq->num;
}

static __le16 __user *vhost_used_flags(struct vhost_vq *vq)
{
	return vq->used;
}

static __le16 __user *vhost_used_idx(struct vhost_vq *vq)
{
	return vq->used + 2;
}

static void __user *vhc_used_entry(struct vhost_vq *vq, u16 idx)
{
	return vq->used + 4 +
	       sizeof(struct vhost_used_elem) * (idx & (vq->num - 1));
}

static __le16 __user *vhost_avail_event(struct vhost_vq *vq)
{
	return vq->used + 4 + sizeof(struct vhost_used_elem) * vq->num;
}

u64 vhost_dev_offered_features(const struct vhost_dev *dev)
{
	return SQCQ_RING_FEATURES | BIT_ULL(VHOST_F_LOG_ALL) | dev->ops->features;
}

/* ------------------------------------------------------------------ */
/* Memory table                                                        */
/* ------------------------------------------------------------------ */

/* The region holding @gpa, or NULL.  Binary search over the sorted table. */
static const struct vhost_mem_region *
vhost_umem_find(const struct vhost_umem *umem, u64 gpa)
{
	unsigned int lo = 0, hi;

	if (!umem)
		return NULL;
	hi = umem->nregions;
	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;
		const struct vhost_mem_region *r = &umem->r[mid];

		if (gpa < r->gpa)
			hi = mid;
		else if (gpa > r->last)
			lo = mid + 1;
		else
			return r;
	}
	return NULL;
}

/*
 * True when [@gpa, @gpa + @len) runs past 2^64: walked region by region it
 * would go on at guest-physical 0.
 */
static bool vhc_gpa_wraps(u64 gpa, u64 len)
{
	u64 last;

	return len && check_add_overflow(gpa, len - 1, &last);
}

/* Copy @len bytes of guest memory at @gpa, across regions if need be. */
static int vhc_copy_from_guest(struct vhost_vq *vq, void *buf, u64 gpa,
			       size_t len)
{
	if (vhc_gpa_wraps(gpa, len))
		return -EFAULT;
	while (len) {
		const struct vhost_mem_region *r = vhost_umem_find(vq->umem, gpa);
		u64 chunk;

		if (!r)
			return -EFAULT;
		chunk = min_t(u64, len, r->last - gpa + 1);
		if (copy_from_user(buf,
				   u64_to_user_ptr(r->uaddr + (gpa - r->gpa)),
				   chunk))
			return -EFAULT;
		buf += chunk;
		gpa += chunk;
		len -= chunk;
	}
	return 0;
}

const struct vhost_mem_region *vhc_umem_lookup(const struct vhost_umem *umem,
					       u64 gpa)
{
	return vhost_umem_find(umem, gpa);
}

static int vhc_region_cmp(const void *a, const void *b)
{
	const struct vhost_mem_region *ra = a, *rb = b;

	if (ra->gpa < rb->gpa)
		return -1;
	return ra->gpa > rb->gpa;
}

/*
 * Build a table from the VMM's regions.  Rules (errno):
 *   more than SQCQ_MAX_MEM_REGIONS regions        E2BIG
 *   non-zero padding or flags_padding             EINVAL
 *   zero memory_size                              EINVAL
 *   gpa + size or uaddr + size past 2^64          EOVERFLOW
 *   uaddr range not in user space (access_ok)     EFAULT
 *   two regions overlapping in guest-physical     EINVAL
 * Regions need not be page aligned: translation is byte exact, and QEMU's
 * memory sections are not guaranteed to be page aligned.  Aliases (two
 * guest ranges on the same user memory) are fine.  Zero regions is a valid,
 * empty table: every translation then fails.
 */
static struct vhost_umem *vhc_umem_build(void __user *argp)
{
	struct vhost_memory_region *in = NULL;
	struct vhost_memory hdr;
	struct vhost_umem *umem;
	unsigned int i;
	int ret;

	if (copy_from_user(&hdr, argp, sizeof(hdr)))
		return ERR_PTR(-EFAULT);
	if (hdr.nregions > SQCQ_MAX_MEM_REGIONS) {
		pr_warn_ratelimited("mem table: %u regions, at most %u\n",
				    hdr.nregions, SQCQ_MAX_MEM_REGIONS);
		return ERR_PTR(-E2BIG);
	}
	if (hdr.padding)
		return ERR_PTR(-EINVAL);

	umem = kvzalloc(struct_size(umem, r, hdr.nregions), GFP_KERNEL_ACCOUNT);
	if (!umem)
		return ERR_PTR(-ENOMEM);
	umem->nregions = hdr.nregions;
	if (!hdr.nregions)
		return umem;

	in = kvmalloc_array(hdr.nregions, sizeof(*in), GFP_KERNEL_ACCOUNT);
	ret = -ENOMEM;
	if (!in)
		goto err;
	ret = -EFAULT;
	if (copy_from_user(in, argp + offsetof(struct vhost_memory, regions),
			   array_size(hdr.nregions, sizeof(*in))))
		goto err;

	for (i = 0; i < hdr.nregions; i++) {
		const struct vhost_memory_region *v = &in[i];
		u64 glast, ulast;

		ret = -EINVAL;
		if (!v->memory_size || v->flags_padding)
			goto bad;
		ret = -EOVERFLOW;
		if (check_add_overflow(v->guest_phys_addr, v->memory_size - 1,
				       &glast) ||
		    check_add_overflow(v->userspace_addr, v->memory_size - 1,
				       &ulast))
			goto bad;
		ret = -EFAULT;
		if ((unsigned long)v->userspace_addr != v->userspace_addr ||
		    (unsigned long)v->memory_size != v->memory_size ||
		    !access_ok(u64_to_user_ptr(v->userspace_addr),
			       v->memory_size))
			goto bad;
		umem->r[i].gpa = v->guest_phys_addr;
		umem->r[i].last = glast;
		umem->r[i].uaddr = v->userspace_addr;
	}

	sort(umem->r, umem->nregions, sizeof(umem->r[0]), vhc_region_cmp,
	     NULL);
	for (i = 1; i < umem->nregions; i++) {
		if (umem->r[i].gpa <= umem->r[i - 1].last) {
			pr_warn_ratelimited("mem table: regions at gpa 0x%llx and 0x%llx overlap\n",
					    umem->r[i - 1].gpa, umem->r[i].gpa);
			ret = -EINVAL;
			goto err;
		}
	}
	kvfree(in);
	return umem;

bad:
	pr_warn_ratelimited("mem table: region %u (gpa 0x%llx size 0x%llx uaddr 0x%llx) rejected: %d\n",
			    i, in[i].guest_phys_addr, in[i].memory_size,
			    in[i].userspace_addr, ret);
err:
	kvfree(in);
	kvfree(umem);
	return ERR_PTR(ret);
}

static long vhc_set_mem_table(struct vhost_dev *dev, void __user *argp)
{
	const struct vhost_umem *old = dev->umem;
	struct vhost_umem *umem;
	unsigned int i;

	umem = vhc_umem_build(argp);
	if (IS_ERR(umem))
		return PTR_ERR(umem);
	/* While logging, the log must hold the new table's bits too. */
	if (vhc_dev_has_feature(dev, VHOST_F_LOG_ALL) &&
	    !vhc_log_covers(dev, umem, dev->log_base)) {
		vhost_dev_log(dev, KERN_WARNING, "owner %d: memory table refused: the dirty log at 0x%llx does not cover it\n",
			      dev->owner_pid, dev->log_base);
		kvfree(umem);
		return -EFAULT;
	}
	/*
	 * Each queue switches under its own mutex, so the worker sees either
	 * table for a whole batch and never the old one after this loop.
	 */
	for (i = 0; i < dev->nvqs; i++) {
		struct vhost_vq *vq = &dev->vqs[i];

		mutex_lock(&vq->mutex);
		vq->umem = umem;
		mutex_unlock(&vq->mutex);
	}
	/*
	 * A doorbell area stays only where the new table maps it the same.
	 * After the switch: an attach racing with it used either table.
	 */
	dev->ops->sqcq->revalidate(dev, umem);
	dev->umem = umem;
	kvfree(old);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Worker                                                              */
/* ------------------------------------------------------------------ */

/*
 * Mark @vq pending in its worker and wake that worker.  Any context (kick
 * wakeups run under the eventfd's wait-queue lock).  test_and_set_bit() is
 * a full barrier when it sets the bit, so the worker, which sets its task
 * state before testing the bits, either sees the bit or is woken.
 *
 * The RCU read section covers the worker: one that lost its last queue is
 * freed a grace period later (vhc_worker_destroy()), and one that died
 * with its owner (vhc_worker_killed()) waits for a grace period before
 * it exits, so whoever saw it here may still wake it.  From then on wakers
 * see the killed flag and queue the reaper instead.  Before SET_OWNER and
 * after a reset a queue has no worker and nothing is queued.
 */
void vhc_vq_queue_work(struct vhost_vq *vq)
{
	struct vhost_dev *dev = vq->dev;
	struct vhost_worker *w;

	rcu_read_lock();
	/* Pairs with rcu_assign_pointer() in vhc_vq_set_worker(). */
	w = rcu_dereference(vq->worker);
	if (w && !test_and_set_bit(vq->index, w->pending)) {
		/* Pairs with WRITE_ONCE() in vhc_worker_killed(). */
		if (READ_ONCE(w->killed))
			queue_work(system_dfl_wq, &dev->reap_work);
		else
			vhc_worker_wake(w);
	}
	rcu_read_unlock();
}

void vhc_worker_wake(struct vhost_worker *w)
{
	if (w->vtsk)
		vhost_task_wake(w->vtsk);
	else
		wake_up_process(w->kthread);
}

void vhc_worker_serve(struct vhost_vq *vq, struct vhost_worker *w)
{
	/* Excludes the vring ioctls: they see the ring idle or not running. */
	mutex_lock(&vq->mutex);
	if (w && rcu_dereference_protected(vq->worker,
					   lockdep_is_held(&vq->mutex)) != w) {
		/*
		 * Moved to another worker since it was queued here: the move
		 * queued it there already unless we took the bit first, so
		 * queue it again (a spare pass is harmless).
		 */
		mutex_unlock(&vq->mutex);
		vhc_vq_queue_work(vq);
		return;
	}
	if (vq->dev->ops->complete_vq)
		vq->dev->ops->complete_vq(vq);
	/*
	 * Only a worker reads the ring: it runs in the owner's mm.  The
	 * reaper (@w NULL), a kworker, would reach whatever mm its CPU has.
	 */
	if (w && vq->running && !vq->broken)
		vq->dev->ops->handle_vq(vq);
	mutex_unlock(&vq->mutex);
}

bool vhc_worker_serve_pending(struct vhost_worker *w)
{
	struct vhost_dev *dev = w->dev;
	bool served = false;
	unsigned int i;

	/* The poll thread serves under poll_lock: see vhc_vq_notify(). */
	if (w->poller)
		lockdep_assert_held(&dev->poll_lock);
	for_each_set_bit(i, w->pending, dev->nvqs) {
		if (!test_and_clear_bit(i, w->pending))
			continue;
		__set_current_state(TASK_RUNNING);
		served = true;
		vhc_worker_serve(&dev->vqs[i], w);
		/* 130 queues of a busy guest: not in one go. */
		cond_resched();
	}
	return served;
}

bool vhc_worker_has_pending(struct vhost_worker *w)
{
	return !bitmap_empty(w->pending, w->dev->nvqs);
}

bool vhc_vq_on_poller(struct vhost_vq *vq)
{
	struct vhost_worker *w;

	w = rcu_dereference_protected(vq->worker,
				      lockdep_is_held(&vq->mutex) ||
				      lockdep_is_held(&vq->dev->poll_lock));
	return w && w->poller;
}

int vhc_vq_worker_id(struct vhost_vq *vq)
{
	struct vhost_worker *w;
	int id;

	/* A worker is freed a grace period after its last queue left it. */
	rcu_read_lock();
	w = rcu_dereference(vq->worker);
	id = w ? w->id : -1;
	rcu_read_unlock();
	return id;
}

/*
 * A kick on polled @vq, served by a worker of its own, woke only that
 * worker: wake the device's poll thread, the default worker, too.  It is
 * found through a queue it serves, under RCU, as vhc_vq_queue_work()
 * finds a queue's worker (the control queue is one while doorbells are
 * installed).  A killed one is left to the reaper.  Any context.
 */
static void vhc_vq_wake_poller(struct vhost_vq *vq)
{
	struct vhost_dev *dev = vq->dev;
	struct vhost_worker *w;
	unsigned int i;

	rcu_read_lock();
	/* Pairs with rcu_assign_pointer() in vhc_vq_set_worker(). */
	w = rcu_dereference(vq->worker);
	/* On the poll thread: the kick woke it already. */
	if (w && !w->poller) {
		for (i = 0; i < dev->nvqs; i++) {
			w = rcu_dereference(dev->vqs[i].worker);
			if (!w || !w->poller)
				continue;
			/* Pairs with WRITE_ONCE() in vhc_worker_killed(). */
			if (!READ_ONCE(w->killed))
				vhc_worker_wake(w);
			break;
		}
	}
	rcu_read_unlock();
}

/*
 * The workers: each serves the queues marked pending in its bitmap (kicks,
 * completions) and sleeps when none is.  The default worker, while
 * doorbells with SQ polling are installed, runs the poll loop instead
 * (vhost_sqcq_poll_run(), host/vhost_sqcq.c), which returns here when they
 * go.  The other workers never take poll_lock: the poll thread hands them
 * the doorbells of their queues that moved (vhc_vq_queue_work()), and
 * they publish those queues' CQ doorbells inside an RCU read section
 * (vhc_vq_notify()).
 *
 * Where the kernel has vhost_task (6.11+), a worker is a thread of the
 * owner, as with the in-tree vhost: it runs in the owner's mm, shows in
 * its thread list, is charged to its cgroups (CPU time, memory) and dies
 * with it.  Elsewhere it is a kthread that uses the owner's mm and is
 * attached to the owner's cgroups when it is created.
 *
 * vhc_worker_step() is one pass, for both: true when it served or
 * polled (call it again), false with the task state set to
 * TASK_INTERRUPTIBLE before the last test of the pending bits (schedule()).
 */
static void vhc_dev_stop(struct vhost_dev *dev, const char *why);

static bool vhc_worker_step(void *data)
{
	struct vhost_worker *w = data;
	struct vhost_dev *dev = w->dev;
	bool served, polling = false;

	/* vhost_task calls in TASK_INTERRUPTIBLE; mutex_lock() may sleep. */
	__set_current_state(TASK_RUNNING);
	if (!w->poller) {
		/* Before the task state: placing may sleep. */
		dev->ops->sqcq->place_worker(w);
		/* Task state before the bit tests: see vhc_vq_queue_work(). */
		set_current_state(TASK_INTERRUPTIBLE);
		served = vhc_worker_serve_pending(w);
	} else {
		/* Excludes doorbell removal while queues are served. */
		mutex_lock(&dev->poll_lock);
		/* Task state before the bit tests: see vhc_vq_queue_work(). */
		set_current_state(TASK_INTERRUPTIBLE);
		served = vhc_worker_serve_pending(w);
		polling = dev->db && dev->db->sq_poll;
		mutex_unlock(&dev->poll_lock);
	}
	if (polling) {
		__set_current_state(TASK_RUNNING);
		dev->ops->sqcq->poll_run(w);
		return true;
	}
	if (served) {
		__set_current_state(TASK_RUNNING);
		cond_resched();
	}
	return served;
}

/*
 * The memory cgroup a kthread worker charges its allocations to.  The
 * memory controller charges nothing a kthread allocates, owner's mm and
 * cgroups or not, unless the thread names a cgroup (current->active_memcg,
 * which memcg_kmem_bypass() lets through): so the commands, page arrays,
 * scatterlists and bounce pages of the guest's requests (GFP_KERNEL_ACCOUNT)
 * go to the cgroup of the owner's mm, looked up again after every sleep as
 * the VM may have moved.  Task context only (the kthread itself), hence the
 * field and not set_active_memcg(), whose interrupt branch uses a per-CPU
 * variable 5.10 does not export.  Returns the reference to put next time.
 */
static struct mem_cgroup *vhc_worker_charge_to(struct mm_struct *mm,
					       struct mem_cgroup *prev)
{
#ifdef CONFIG_MEMCG
	struct mem_cgroup *memcg = get_mem_cgroup_from_mm(mm);

	current->active_memcg = memcg;
	mem_cgroup_put(prev);
	return memcg;
#else
	return NULL;
#endif
}

static int vhc_worker_kthread(void *data)
{
	struct vhost_worker *w = data;
	struct mm_struct *mm = w->dev->mm;
	struct mem_cgroup *memcg;

	/* dev->mm is set before any worker starts and put after all stop. */
	kthread_use_mm(mm);
	memcg = vhc_worker_charge_to(mm, NULL);
	while (!kthread_should_stop()) {
		if (vhc_worker_step(w))
			continue;
		/* After the task state: a kthread_stop() now wakes us. */
		if (kthread_should_stop()) {
			__set_current_state(TASK_RUNNING);
			break;
		}
		schedule();
		memcg = vhc_worker_charge_to(mm, memcg);
	}
#ifdef CONFIG_MEMCG
	current->active_memcg = NULL;
#endif
	mem_cgroup_put(memcg);
	kthread_unuse_mm(mm);
	return 0;
}

bool vhc_worker_should_stop(struct vhost_worker *w)
{
	if (w->vtsk)
		return READ_ONCE(w->stop) || signal_pending(current);
	return kthread_should_stop();
}

/*
 * The owner was killed, and this vhost_task worker with it (vhost_task
 * calls this in the dying thread, unless the device stopped it first).
 * Nobody may wake the thread once it has exited: flag it, wait until no
 * waker can still be using it, then let the reaper do what is left.  Each
 * worker of the device comes here on its own.
 */
static void vhc_worker_killed(void *data)
{
	struct vhost_worker *w = data;
	struct vhost_dev *dev = w->dev;

	/* Pairs with READ_ONCE() under rcu_read_lock() in vhc_vq_queue_work(). */
	WRITE_ONCE(w->killed, true);
	synchronize_rcu();
	queue_work(system_dfl_wq, &dev->reap_work);
	vhost_dev_log(dev, KERN_INFO, "owner %d: worker %u killed with its owner, rings stopped\n",
		      dev->owner_pid, w->id);
}

/*
 * After vhc_worker_killed(): stop every ring and the SQ/CQ polling, and
 * finish what the target core still hands back for the queues of killed
 * workers.  complete_vq() of a stopped ring frees its commands without
 * touching guest memory, which this kworker could not reach; handle_vq()
 * is never called.  The reaper runs without dev->mutex (a reset waits for it while holding it):
 * it finds the workers only through vq->worker, under RCU, as wakers do.
 */
static void vhc_worker_reap(struct work_struct *work)
{
	struct vhost_dev *dev = container_of(work, struct vhost_dev, reap_work);
	struct vhost_worker *w;
	unsigned int i;
	bool mine;

	vhc_dev_stop(dev, "owner killed");
	for (i = 0; i < dev->nvqs; i++) {
		rcu_read_lock();
		w = rcu_dereference(dev->vqs[i].worker);
		/* Pairs with WRITE_ONCE() in vhc_worker_killed(). */
		mine = w && READ_ONCE(w->killed) &&
		       test_and_clear_bit(i, w->pending);
		rcu_read_unlock();
		if (!mine)
			continue;
		/* As the poll thread would; a setup request then sees it held. */
		mutex_lock(&dev->poll_lock);
		vhc_worker_serve(&dev->vqs[i], NULL);
		mutex_unlock(&dev->poll_lock);
	}
}

/*
 * Kthread workers per owner process, all its devices together.  A thread
 * of the owner (vhost_task) counts against the owner's RLIMIT_NPROC and
 * its cgroup's pids.max like any thread; a kthread counts against neither,
 * so without a bound one process could make us start 130 of them per
 * device it opens.  At most what one device can use (a worker per queue)
 * and twice the CPUs besides (a second device, QEMU's controllers with a
 * worker each): more cannot run at once anyway.  Keyed by the owner's
 * tgid as SET_OWNER saw it (dev->owner_pid; a worker may outlive its owner
 * until the last close: a new process with the pid shares the count
 * meanwhile, which errs on the safe side).
 */
static DEFINE_XARRAY(vhost_owner_kthreads);
static DEFINE_MUTEX(vhost_owner_kthreads_lock);

static unsigned long vhc_owner_kthreads_max(unsigned int nvqs)
{
	return nvqs + 2 * num_possible_cpus();
}

/*
 * Count one more kthread for @owner, whose devices have @nvqs queues;
 * -EAGAIN at the bound.
 */
static int vhc_owner_kthread_get(pid_t owner, unsigned int nvqs)
{
	unsigned long n = 0;
	void *e;
	int ret;

	mutex_lock(&vhost_owner_kthreads_lock);
	e = xa_load(&vhost_owner_kthreads, owner);
	if (e)
		n = xa_to_value(e);
	if (n >= vhc_owner_kthreads_max(nvqs))
		ret = -EAGAIN;
	else
		ret = xa_err(xa_store(&vhost_owner_kthreads, owner,
				      xa_mk_value(n + 1), GFP_KERNEL_ACCOUNT));
	mutex_unlock(&vhost_owner_kthreads_lock);
	if (ret == -EAGAIN)
		pr_warn_ratelimited("owner %d: %lu worker kthreads already, no more\n",
				    owner, n);
	return ret;
}

static void vhc_owner_kthread_put(pid_t owner)
{
	unsigned long n;
	void *e;

	mutex_lock(&vhost_owner_kthreads_lock);
	e = xa_load(&vhost_owner_kthreads, owner);
	n = e ? xa_to_value(e) : 0;
	if (WARN_ON_ONCE(!n) || n == 1)
		xa_erase(&vhost_owner_kthreads, owner);
	else
		/* Replaces an entry: allocates nothing, cannot fail. */
		xa_store(&vhost_owner_kthreads, owner, xa_mk_value(n - 1),
			 GFP_KERNEL);
	mutex_unlock(&vhost_owner_kthreads_lock);
}

/*
 * Start a worker in slot @id of dev->workers, as a thread of the caller
 * (the owner) where the kernel has vhost_task, else as a kthread in the
 * caller's cgroups.  dev->mutex held, dev->mm set.
 */
static struct vhost_worker *vhc_worker_create(struct vhost_dev *dev,
					      unsigned int id)
{
	char name[TASK_COMM_LEN];
	struct task_struct *kt;
	struct vhost_task *vtsk;
	struct vhost_worker *w;
	int ret;

	lockdep_assert_held(&dev->mutex);
	w = kzalloc(sizeof(*w), GFP_KERNEL_ACCOUNT);
	if (!w)
		return ERR_PTR(-ENOMEM);
	w->pending = bitmap_zalloc(dev->nvqs, GFP_KERNEL_ACCOUNT);
	if (!w->pending) {
		ret = -ENOMEM;
		goto free;
	}
	w->dev = dev;
	w->id = id;
	w->poller = !id;
	/* Every worker of a device has the same name, as upstream's. */
	snprintf(name, sizeof(name), "vhost-sqcq-%d", dev->owner_pid);
	vtsk = vhost_task_create(vhc_worker_step, vhc_worker_killed, w,
				 name);
	if (!IS_ERR_OR_NULL(vtsk)) {
		w->vtsk = vtsk;
		/* Read racily by vhc_worker_unbound_cpus(). */
		WRITE_ONCE(dev->owner_task, true);
		vhost_task_start(vtsk);
		goto done;
	}
	if (vtsk != ERR_PTR(-EOPNOTSUPP)) {
		ret = vtsk ? PTR_ERR(vtsk) : -ENOMEM;
		goto free;
	}
	ret = vhc_owner_kthread_get(dev->owner_pid, dev->nvqs);
	if (ret)
		goto free;
	kt = kthread_create(vhc_worker_kthread, w, "%s", name);
	if (IS_ERR(kt)) {
		ret = PTR_ERR(kt);
		goto uncount;
	}
	/*
	 * The worker works for the owner: put it in the owner's cgroups, so
	 * its CPU time is charged to the VM, not to the host (its memory:
	 * vhc_worker_charge_to()).
	 */
	ret = cgroup_attach_task_all(current, kt);
	if (ret) {
		kthread_stop(kt);
		goto uncount;
	}
	w->kthread = kt;
	wake_up_process(kt);
done:
	dev->workers[id] = w;
	return w;
uncount:
	vhc_owner_kthread_put(dev->owner_pid);
free:
	bitmap_free(w->pending);
	kfree(w);
	return ERR_PTR(ret);
}

/*
 * Stop and free @w, which no queue uses any more (attached == 0, every
 * vq->worker moved away or cleared) and which was taken out of
 * dev->workers a grace period ago, so that no waker that read a
 * vq->worker pointing here before the queue moved is still using it
 * (rcu_read_lock() in vhc_vq_queue_work()).  dev->mutex held.
 */
static void vhc_worker_free(struct vhost_dev *dev, struct vhost_worker *w)
{
	unsigned int i;

	lockdep_assert_held(&dev->mutex);
	WARN_ON_ONCE(w->attached);
	if (w->kthread) {
		kthread_stop(w->kthread);
		/* Workers go before RESET_OWNER or close clears owner_pid. */
		vhc_owner_kthread_put(dev->owner_pid);
	}
	if (w->vtsk) {
		/* Leaves the poll loop if it is in it; see vhc_worker_should_stop(). */
		WRITE_ONCE(w->stop, true);
		/* Waits for the thread, or only frees it if it was killed. */
		vhost_task_stop(w->vtsk);
	}
	/*
	 * Bits such a late waker set here: the queue's worker now serves
	 * it (after a reset there is none, and nothing is left to serve).
	 */
	for_each_set_bit(i, w->pending, dev->nvqs)
		vhc_vq_queue_work(&dev->vqs[i]);
	bitmap_free(w->pending);
	kfree(w);
}

/* The same for one worker, grace period included.  dev->mutex held. */
static void vhc_worker_destroy(struct vhost_dev *dev, struct vhost_worker *w)
{
	lockdep_assert_held(&dev->mutex);
	dev->workers[w->id] = NULL;
	synchronize_rcu();
	vhc_worker_free(dev, w);
}

/* Every worker of @dev, with one grace period for all.  dev->mutex held. */
static void vhc_dev_free_workers(struct vhost_dev *dev)
{
	struct vhost_worker **ws = dev->workers;
	unsigned int i;

	lockdep_assert_held(&dev->mutex);
	synchronize_rcu();
	for (i = 0; i < dev->nvqs; i++) {
		if (!ws[i])
			continue;
		vhc_worker_free(dev, ws[i]);
		ws[i] = NULL;
	}
}

/*
 * Point @vq at worker @w (NULL: none).  dev->mutex, poll_lock and the vq
 * mutex held, so readers holding any of them see it stable, and the worker
 * that served the ring is not inside it.
 */
static void vhc_vq_set_worker(struct vhost_vq *vq, struct vhost_worker *w)
{
	struct vhost_dev *dev = vq->dev;
	struct vhost_worker *old;

	lockdep_assert_held(&dev->mutex);
	lockdep_assert_held(&dev->poll_lock);
	lockdep_assert_held(&vq->mutex);
	old = rcu_dereference_protected(vq->worker,
					lockdep_is_held(&vq->mutex));
	if (old)
		old->attached--;
	if (w)
		w->attached++;
	/*
	 * Publishes a started worker (vtsk/kthread set); pairs with
	 * rcu_dereference() in vhc_vq_queue_work().
	 */
	rcu_assign_pointer(vq->worker, w);
	/*
	 * Work queued for the ring on the old worker goes to the new one.
	 * A waker still holding the old pointer sets the bit there later:
	 * the old worker, finding the ring moved, queues it again
	 * (vhc_worker_serve()), or vhc_worker_destroy() does.
	 */
	if (old && w && test_and_clear_bit(vq->index, old->pending))
		vhc_vq_queue_work(vq);
}

void vhc_worker_unbound_cpus(struct vhost_dev *dev, struct cpumask *mask)
{
	struct task_struct *owner = READ_ONCE(dev->owner);
	unsigned long flags;

	if (!owner) {
		cpumask_copy(mask, housekeeping_cpumask(HK_TYPE_KTHREAD));
		return;
	}
	/* cpus_mask changes under pi_lock (set_cpus_allowed_ptr(), cpusets). */
	raw_spin_lock_irqsave(&owner->pi_lock, flags);
	cpumask_copy(mask, &owner->cpus_mask);
	raw_spin_unlock_irqrestore(&owner->pi_lock, flags);
	/*
	 * A thread of the owner keeps the owner's placement; a kthread stays
	 * off the isolated CPUs as well, unless that leaves it none.
	 */
	if (!READ_ONCE(dev->owner_task) &&
	    cpumask_intersects(mask, housekeeping_cpumask(HK_TYPE_KTHREAD)))
		cpumask_and(mask, mask, housekeeping_cpumask(HK_TYPE_KTHREAD));
}

/* ------------------------------------------------------------------ */
/* Eventfds                                                            */
/* ------------------------------------------------------------------ */

static int vhc_kick_wake(wait_queue_entry_t *wait, unsigned int mode,
			 int sync, void *key)
{
	struct vhost_vq *vq = container_of(wait, struct vhost_vq, kick_wait);
	struct sqcq_sq *sq;

	if (!(key_to_poll(key) & EPOLLIN))
		return 0;
	/* Wakeups of one eventfd are serialised by its wait-queue lock. */
	WRITE_ONCE(vq->stat_kicks, vq->stat_kicks + 1);
	/*
	 * The guest kicks a polled queue only while the poll thread asks
	 * for it (SQ NEED_WAKEUP: it sleeps, yields or is parked): stop
	 * asking before the wakeups below (vhost_sqcq_kicked() says
	 * why that order).  The read section keeps the area mapped
	 * (__vhost_sqcq_detach() waits for it).
	 */
	rcu_read_lock();
	sq = READ_ONCE(vq->sq);
	if (sq)
		vq->dev->ops->sqcq->kicked(sq);
	rcu_read_unlock();
	vhc_vq_queue_work(vq);
	/*
	 * The poll thread must poll again, also when another worker
	 * serves the queue.  A racy read: a spare wakeup is harmless.
	 */
	if (sq)
		vhc_vq_wake_poller(vq);
	return 0;
}

static void vhc_kick_queue_proc(struct file *file, wait_queue_head_t *wqh,
				poll_table *pt)
{
	struct vhost_vq *vq = container_of(pt, struct vhost_vq, kick_pt);

	vq->kick_wqh = wqh;
	add_wait_queue(wqh, &vq->kick_wait);
}

/* Stop polling the kick eventfd.  vq->mutex held. */
static void vhc_kick_unbind(struct vhost_vq *vq)
{
	lockdep_assert_held(&vq->mutex);
	/*
	 * remove_wait_queue() takes the eventfd's wait-queue lock, under
	 * which vhc_kick_wake() runs: once it returns no wakeup is running
	 * or will run for this entry.
	 */
	if (vq->kick_wqh)
		remove_wait_queue(vq->kick_wqh, &vq->kick_wait);
	vq->kick_wqh = NULL;
	if (vq->kick_file)
		fput(vq->kick_file);
	vq->kick_file = NULL;
}

/* Start polling @file; true when a kick is already pending. */
static bool vhc_kick_bind(struct vhost_vq *vq, struct file *file)
{
	__poll_t mask;

	vq->kick_file = file;
	vq->kick_wqh = NULL;
	init_waitqueue_func_entry(&vq->kick_wait, vhc_kick_wake);
	init_poll_funcptr(&vq->kick_pt, vhc_kick_queue_proc);
	mask = vfs_poll(file, &vq->kick_pt);
	return mask & EPOLLIN;
}

/* Resolve an eventfd number; NULL for VHOST_FILE_UNBIND. */
static struct eventfd_ctx *vhc_eventfd_get(int fd)
{
	if (fd == VHOST_FILE_UNBIND)
		return NULL;
	if (fd < 0)
		return ERR_PTR(-EBADF);
	return eventfd_ctx_fdget(fd);
}

static void vhc_eventfd_swap(struct eventfd_ctx **slot,
			     struct eventfd_ctx *ctx)
{
	if (*slot)
		eventfd_ctx_put(*slot);
	*slot = ctx;
}

/* ------------------------------------------------------------------ */
/* Split ring engine                                                   */
/* ------------------------------------------------------------------ */

void vhc_vq_fail(struct vhost_vq *vq, const char *why)
{
	lockdep_assert_held(&vq->mutex);
	if (!vq->broken)
		pr_warn_ratelimited("owner %d vq %u: %s; queue stopped until restarted\n",
				    vq->dev->owner_pid, vq->index, why);
	vq->broken = true;
	if (vq->err_ctx)
		eventfd_signal(vq->err_ctx);
}

/* Add guest range [gpa, gpa + len) to @req, split by memory region. */
static int vhc_req_add(struct vhost_vq *vq, struct vhost_req *req, u64 gpa,
		       u32 len, bool writable)
{
	/* Refused before any segment is added. */
	if (vhc_gpa_wraps(gpa, len))
		return -EFAULT;
	if (!writable && req->in_cnt)
		return -EINVAL;	/* readable after writable */
	if (writable)
		req->in_len += len;
	else
		req->out_len += len;

	while (len) {
		const struct vhost_mem_region *r = vhost_umem_find(vq->umem, gpa);
		struct iovec *iov;
		u64 chunk;

		if (!r)
			return -EFAULT;
		if (req->out_cnt + req->in_cnt >= SQCQ_MAX_IOV)
			return -E2BIG;
		/*
		 * r->last - gpa + 1 cannot wrap: a region holding gpa 0 ends
		 * below 2^64-1 (its size is at most 2^64-1).  gpa + chunk
		 * wraps only at the end of the range, checked above.
		 */
		chunk = min_t(u64, len, r->last - gpa + 1);
		iov = &req->iov[req->out_cnt + req->in_cnt];
		iov->iov_base = u64_to_user_ptr(r->uaddr + (gpa - r->gpa));
		iov->iov_len = chunk;
		req->gpa[req->out_cnt + req->in_cnt] = gpa;
		if (writable)
			req->in_cnt++;
		else
			req->out_cnt++;
		gpa += chunk;
		len -= chunk;
	}
	return 0;
}

/*
 * The part of a chain walk shared by the ring and by indirect tables: add
 * descriptor @d to @req, then find the next one.  Returns 0 at the end of the
 * chain, 1 with *@next set when the chain goes on (to an index below
 * @count), or a negative errno.
 */
static int vhc_chain_step(struct vhost_vq *vq, struct vhost_req *req,
			  const struct vhost_desc *d, unsigned int count,
			  unsigned int *next)
{
	u16 flags = le16_to_cpu(d->flags);
	int ret;

	ret = vhc_req_add(vq, req, le64_to_cpu(d->addr), le32_to_cpu(d->len),
			  flags & VRING_DESC_F_WRITE);
	if (ret)
		return ret;
	if (!(flags & VRING_DESC_F_NEXT))
		return 0;
	*next = le16_to_cpu(d->next);
	return *next < count ? 1 : -EINVAL;
}

/* Walk an indirect table (the descriptor @ind points at). */
static int vhc_walk_indirect(struct vhost_vq *vq, struct vhost_req *req,
			     const struct vhost_desc *ind)
{
	u64 base = le64_to_cpu(ind->addr);
	u32 len = le32_to_cpu(ind->len);
	unsigned int count, left, i = 0;
	struct vhost_desc d;
	int ret;

	if (!len || len % SQCQ_DESC_SIZE)
		return -EINVAL;
	count = len / SQCQ_DESC_SIZE;
	if (count > SQCQ_VQ_MAX_NUM)
		return -E2BIG;
	for (left = count; ; left--) {
		if (!left)
			return -ELOOP;
		/* Up to 32768 entries: let others run now and then. */
		if (!(left % SQCQ_WALK_RESCHED))
			cond_resched();
		ret = vhc_copy_from_guest(vq, &d, base + (u64)i * SQCQ_DESC_SIZE,
					  sizeof(d));
		if (ret)
			return ret;
		if (le16_to_cpu(d.flags) & VRING_DESC_F_INDIRECT)
			return -EINVAL;	/* nested indirect */
		ret = vhc_chain_step(vq, req, &d, count, &i);
		if (ret <= 0)
			return ret;
	}
}

/*
 * Walk the chain at @head.  Each descriptor of the ring may be visited at
 * most once per chain (num visits), each of an indirect table at most once
 * (count visits), so loops end with -ELOOP.
 */
static int vhc_walk_chain(struct vhost_vq *vq, struct vhost_req *req, u16 head)
{
	unsigned int left, i = head;
	struct vhost_desc d;
	int ret;

	req->head = head;
	req->out_cnt = 0;
	req->in_cnt = 0;
	req->out_len = 0;
	req->in_len = 0;
	req->iov = vq->iov;
	req->gpa = vq->iov_gpa;
	for (left = vq->num; ; left--) {
		u16 flags;

		if (!left)
			return -ELOOP;
		if (!(left % SQCQ_WALK_RESCHED))
			cond_resched();
		if (copy_from_user(&d, vq->desc + i * SQCQ_DESC_SIZE,
				   sizeof(d)))
			return -EFAULT;
		flags = le16_to_cpu(d.flags);
		if (flags & VRING_DESC_F_INDIRECT) {
			if (!vhc_dev_has_feature(vq->dev,
						 VIRTIO_RING_F_INDIRECT_DESC) ||
						 (flags & VRING_DESC_F_NEXT))
				return -EINVAL;
			return vhc_walk_indirect(vq, req, &d);
		}
		ret = vhc_chain_step(vq, req, &d, vq->num, &i);
		if (ret <= 0)
			return ret;
	}
}

static const char *vhc_chain_error(int err)
{
	switch (err) {
	case -ELOOP:
		return "descriptor loop or chain longer than its table";
	case -EFAULT:
		return "descriptor address outside the memory table";
	case -E2BIG:
		return "too many segments in one request";
	default:
		return "malformed descriptor chain";
	}
}

/*
 * The rings' dirty log: what a ring wrote into guest memory is marked in
 * the log (host/vhost_log.c) under the ring's mutex, and a log that cannot
 * be written fails the ring here.  vhc_vq_logging(): logging is on for
 * this ring's writes.
 */
static bool vhc_vq_logging(struct vhost_vq *vq)
{
	lockdep_assert_held(&vq->mutex);
	return vq->log_base && vhc_dev_has_feature(vq->dev, VHOST_F_LOG_ALL);
}

int vhc_vq_log_write(struct vhost_vq *vq, u64 gpa, u64 len)
{
	if (!len || !vhc_vq_logging(vq))
		return 0;
	if (vhc_log_mark(vq->log_base, gpa, len)) {
		WRITE_ONCE(vq->dev->stat_log_failures,
			   vq->dev->stat_log_failures + 1);
		vhc_vq_fail(vq, "cannot set guest pages in the dirty log (log base not mapped for the memory table)");
		return -EFAULT;
	}
	WRITE_ONCE(vq->stat_log_writes, vq->stat_log_writes + 1);
	if (vq->log_ctx)
		eventfd_signal(vq->log_ctx);
	return 0;
}

int vhc_vq_log_ranges(struct vhost_vq *vq, const struct vhost_log_range *r,
		      unsigned int n)
{
	unsigned int i;
	int ret;

	if (!vhc_vq_logging(vq))
		return 0;
	for (i = 0; i < n; i++) {
		ret = vhc_vq_log_write(vq, r[i].gpa, r[i].len);
		if (ret)
			return ret;
	}
	return 0;
}

int vhc_vq_log_req(struct vhost_vq *vq, const struct vhost_req *req)
{
	unsigned int i;
	int ret;

	if (!vhc_vq_logging(vq))
		return 0;
	for (i = req->out_cnt; i < req->out_cnt + req->in_cnt; i++) {
		ret = vhc_vq_log_write(vq, req->gpa[i], req->iov[i].iov_len);
		if (ret)
			return ret;
	}
	return 0;
}

int vhc_vq_log_used(struct vhost_vq *vq, u64 offset, u64 len)
{
	if (!vq->log_used)
		return 0;
	/* log_addr + the ring's size was checked not to wrap (set_addr). */
	return vhc_vq_log_write(vq, vq->log_addr + offset, len);
}

int vhc_vq_pop(struct vhost_vq *vq, struct vhost_req *req)
{
	__le16 raw;
	u16 head;
	int ret;

	lockdep_assert_held(&vq->mutex);
	if (vq->avail_idx_cache == vq->last_avail_idx) {
		u16 idx;

		if (get_user(raw, vhost_avail_idx(vq))) {
			vhc_vq_fail(vq, "cannot read avail->idx");
			return -EFAULT;
		}
		idx = le16_to_cpu(raw);
		if ((u16)(idx - vq->last_avail_idx) > vq->num) {
			vhc_vq_fail(vq, "avail->idx moved by more than the ring size");
			return -EINVAL;
		}
		vq->avail_idx_cache = idx;
		if (idx == vq->last_avail_idx)
			return 0;
		/*
		 * Read ring entries only after the index that covers them;
		 * pairs with the driver's write barrier between filling
		 * avail->ring[] and publishing avail->idx.
		 */
		smp_rmb();
	}

	if (get_user(raw, vhost_avail_entry(vq, vq->last_avail_idx))) {
		vhc_vq_fail(vq, "cannot read avail->ring");
		return -EFAULT;
	}
	head = le16_to_cpu(raw);
	if (head >= vq->num) {
		vhc_vq_fail(vq, "avail head index out of range");
		return -EINVAL;
	}
	ret = vhc_walk_chain(vq, req, head);
	if (ret) {
		vhc_vq_fail(vq, vhc_chain_error(ret));
		return ret;
	}
	vq->last_avail_idx++;
	WRITE_ONCE(vq->stat_requests, vq->stat_requests + 1);
	return 1;
}

int vhc_vq_push_used(struct vhost_vq *vq, u16 head, u32 len)
{
	struct vhost_used_elem e = {
		.id = cpu_to_le32(head),
		.len = cpu_to_le32(len),
	};

	lockdep_assert_held(&vq->mutex);
	if (copy_to_user(vhc_used_entry(vq, vq->last_used_idx), &e,
			 sizeof(e))) {
		vhc_vq_fail(vq, "cannot write used->ring");
		return -EFAULT;
	}
	/*
	 * The entry before the index that publishes it; pairs with the
	 * driver's read barrier between reading used->idx and the entries.
	 */
	smp_wmb();
	if (put_user(cpu_to_le16(vq->last_used_idx + 1), vhost_used_idx(vq))) {
		vhc_vq_fail(vq, "cannot write used->idx");
		return -EFAULT;
	}
	/* After both writes (vhost_log.c says why after). */
	if (vhc_vq_log_used(vq, vhc_used_entry(vq, vq->last_used_idx) -
			      vq->used, sizeof(e)) ||
	    vhc_vq_log_used(vq, (void __user *)vhost_used_idx(vq) - vq->used,
			    sizeof(__le16)))
		return -EFAULT;
	vq->last_used_idx++;
	/* 65536 entries since the last signal: the old mark is ambiguous. */
	if (vq->last_used_idx == vq->signalled_used)
		vq->signalled_used_valid = false;
	return 0;
}

/*
 * Classic interrupt suppression (flags / used_event).  vhc_vq_notify() is
 * the one place that decides whether the driver gets an interrupt: it uses
 * this, or the CQ doorbell handshake when the queue is in SQ/CQ mode.
 */
static bool vhc_vq_should_signal(struct vhost_vq *vq)
{
	u16 old, new, event;
	bool valid;
	__le16 raw;

	/*
	 * Order our used->idx store before reading the driver's suppression
	 * state; pairs with the full barrier the driver puts between writing
	 * used_event (or clearing NO_INTERRUPT) and re-reading used->idx.
	 * With both barriers one side always sees the other.
	 */
	smp_mb();

	if (vhc_dev_has_feature(vq->dev, VIRTIO_F_NOTIFY_ON_EMPTY)) {
		if (get_user(raw, vhost_avail_idx(vq)))
			return true;
		if (le16_to_cpu(raw) == vq->last_avail_idx)
			return true;
	}

	if (!vhc_dev_has_feature(vq->dev, VIRTIO_RING_F_EVENT_IDX)) {
		if (get_user(raw, vhost_avail_flags(vq)))
			return true;
		return !(le16_to_cpu(raw) & VRING_AVAIL_F_NO_INTERRUPT);
	}

	old = vq->signalled_used;
	valid = vq->signalled_used_valid;
	new = vq->last_used_idx;
	vq->signalled_used = new;
	vq->signalled_used_valid = true;
	if (!valid)
		return true;
	if (get_user(raw, vhost_used_event(vq)))
		return true;
	event = le16_to_cpu(raw);
	/* Signal when used_event lies in (old, new]: virtio 1.x 2.7.10. */
	return (u16)(new - event - 1) < (u16)(new - old);
}

void vhc_vq_notify(struct vhost_vq *vq)
{
	struct sqcq_cq *cq;
	bool saved, by_irq;

	lockdep_assert_held(&vq->mutex);
	/*
	 * Workers only.  On the poll thread vq->cq cannot change under us
	 * (poll_lock).  Another worker reads it once, in an RCU read section
	 * that __vhost_sqcq_detach() waits for before it unmaps the
	 * area; the acquire pairs with the release store in
	 * __vhost_sqcq_attach() (the CQ index and cq_by_irq).
	 */
	rcu_read_lock();
	/* Pairs with the release in __vhost_sqcq_attach(). */
	cq = smp_load_acquire(&vq->cq);
	if (cq) {
		saved = !vq->dev->ops->sqcq->publish_cq(vq, cq);
		by_irq = READ_ONCE(vq->cq_by_irq);
		rcu_read_unlock();
		/*
		 * The guest does not poll the CQ: it wants the interrupts of
		 * classic mode, no more (its used_event may batch them).
		 * publish_cq()'s full barrier already ordered used->idx
		 * before the reads of vhc_vq_should_signal().  A guest
		 * poller's flag alone decides: the ring's suppression state
		 * is stale for the next use of that rule.
		 */
		if (!by_irq)
			vq->signalled_used_valid = false;
		else if (!saved && !vhc_vq_should_signal(vq))
			return;		/* as classic would: not a saved call */
		if (saved) {
			WRITE_ONCE(vq->stat_calls_saved, vq->stat_calls_saved + 1);
			return;
		}
	} else {
		rcu_read_unlock();
		if (!vhc_vq_should_signal(vq))
			return;
	}
	if (vq->call_ctx) {
		eventfd_signal(vq->call_ctx);
		WRITE_ONCE(vq->stat_calls, vq->stat_calls + 1);
	}
}

void vhc_vq_disable_kicks(struct vhost_vq *vq)
{
	lockdep_assert_held(&vq->mutex);
	/* With EVENT_IDX, an avail_event left behind suppresses kicks. */
	if (vhc_dev_has_feature(vq->dev, VIRTIO_RING_F_EVENT_IDX))
		return;
	if (put_user(cpu_to_le16(VRING_USED_F_NO_NOTIFY), vhost_used_flags(vq)))
		vhc_vq_fail(vq, "cannot write used->flags");
	else
		vhc_vq_log_used(vq, 0, sizeof(__le16));
}

bool vhc_vq_enable_kicks(struct vhost_vq *vq)
{
	__le16 raw;
	int ret;

	lockdep_assert_held(&vq->mutex);

	if (vhc_dev_has_feature(vq->dev, VIRTIO_RING_F_EVENT_IDX))
		ret = put_user(cpu_to_le16(vq->last_avail_idx),
			       vhost_avail_event(vq));
	else
		ret = put_user(cpu_to_le16(0), vhost_used_flags(vq));
	if (ret) {
		vhc_vq_fail(vq, "cannot write the kick suppression field");
		return false;
	}
	if (vhc_dev_has_feature(vq->dev, VIRTIO_RING_F_EVENT_IDX))
		ret = vhc_vq_log_used(vq, (void __user *)vhost_avail_event(vq) -
					vq->used, sizeof(__le16));
	else
		ret = vhc_vq_log_used(vq, 0, sizeof(__le16));
	if (ret)
		return false;
	/*
	 * Publish "kick me" before re-reading avail->idx; pairs with the
	 * driver's full barrier between publishing avail->idx and reading
	 * our flags/avail_event.  Either it sees our request and kicks, or we
	 * see its new entries here.
	 */
	smp_mb();
	if (get_user(raw, vhost_avail_idx(vq))) {
		vhc_vq_fail(vq, "cannot read avail->idx");
		return false;
	}
	return le16_to_cpu(raw) != vq->last_avail_idx;
}

void vhc_vq_serve_sync(struct vhost_vq *vq,
		       u32 (*one)(struct vhost_vq *vq, struct vhost_req *req))
{
	unsigned int served = 0, pushed = 0;
	struct vhost_req req;
	u32 len;
	int ret;

	lockdep_assert_held(&vq->mutex);
	vhc_vq_disable_kicks(vq);
	while (!vq->broken) {
		ret = vhc_vq_pop(vq, &req);
		if (ret < 0)
			break;
		if (!ret) {
			if (!vhc_vq_enable_kicks(vq))
				break;
			vhc_vq_disable_kicks(vq);
			continue;
		}
		len = one(vq, &req);
		if (len != SQCQ_REQ_ASYNC) {
			/* What one() wrote, before the entry that says so. */
			if (vhc_vq_log_req(vq, &req) ||
			    vhc_vq_push_used(vq, req.head, len))
				break;
			pushed++;
		}
		if (++served >= SQCQ_VQ_WEIGHT) {
			/* Let other queues run; come back for the rest. */
			vhc_vq_queue_work(vq);
			break;
		}
	}
	if (pushed && !vq->broken)
		vhc_vq_notify(vq);
}

size_t vhc_req_copy_from(const struct vhost_req *req, void *buf, size_t len)
{
	struct iov_iter it;

	iov_iter_init(&it, ITER_SOURCE, req->iov, req->out_cnt, req->out_len);
	return copy_from_iter(buf, len, &it);
}

size_t vhc_req_copy_to(const struct vhost_req *req, size_t offset,
		       const void *buf, size_t len)
{
	struct iov_iter it;

	if (offset > req->in_len)
		return 0;
	iov_iter_init(&it, ITER_DEST, req->iov + req->out_cnt, req->in_cnt,
		      req->in_len);
	iov_iter_advance(&it, offset);
	return copy_to_iter(buf, len, &it);
}

/* ------------------------------------------------------------------ */
/* Virtqueue ioctls                                                    */
/* ------------------------------------------------------------------ */

/* Ring memory must be in user space for the configured size. */
static int vhc_vq_check_access(struct vhost_vq *vq)
{
	if (!access_ok(vq->desc, (size_t)vq->num * SQCQ_DESC_SIZE) ||
	    !access_ok(vq->avail, vhc_avail_bytes(vq->num)) ||
	    !access_ok(vq->used, vhc_used_bytes(vq->num)))
		return -EFAULT;
	return 0;
}

/* Stop the ring: the worker will not touch it again.  vq->mutex held. */
static void vhc_vq_stop(struct vhost_vq *vq)
{
	lockdep_assert_held(&vq->mutex);
	/* Lockless readers: vhc_dev_any_running(), the SQ/CQ setup. */
	WRITE_ONCE(vq->running, false);
	vhc_kick_unbind(vq);
	/*
	 * The pending bit stays: it may stand for completions the device
	 * still has to finish (complete_vq runs for stopped rings too), and
	 * the worker skips handle_vq() for a ring that is not running.
	 */
}

/* Start the ring with kick file @file.  vq->mutex held. */
static int vhc_vq_start(struct vhost_vq *vq, struct file *file)
{
	struct vhost_worker *w;
	__le16 raw;
	int ret;

	lockdep_assert_held(&vq->mutex);
	/*
	 * Its worker died with the owner (vhc_worker_killed()): a process
	 * that shares the owner's mm (CLONE_VM) still passes the owner check,
	 * but nothing may serve the ring any more until RESET_OWNER.
	 */
	w = rcu_dereference_protected(vq->worker, lockdep_is_held(&vq->mutex));
	if (w && READ_ONCE(w->killed)) {
		pr_warn_ratelimited("vq %u: ring start refused: the owner's worker was killed (RESET_OWNER first)\n",
				    vq->index);
		return -ESRCH;
	}
	if (!vq->num || !vq->addr_set) {
		pr_warn_ratelimited("vq %u: SET_VRING_KICK before SET_VRING_NUM/ADDR\n",
				    vq->index);
		return -EINVAL;
	}
	ret = vhc_vq_check_access(vq);
	if (ret)
		return ret;
	if (!vq->iov) {
		vq->iov = kvmalloc_array(SQCQ_MAX_IOV, sizeof(*vq->iov),
					 GFP_KERNEL_ACCOUNT);
		vq->iov_gpa = kvmalloc_array(SQCQ_MAX_IOV, sizeof(*vq->iov_gpa),
					     GFP_KERNEL_ACCOUNT);
		if (!vq->iov || !vq->iov_gpa) {
			kvfree(vq->iov);
			kvfree(vq->iov_gpa);
			vq->iov = NULL;
			vq->iov_gpa = NULL;
			return -ENOMEM;
		}
	}
	/* The ioctl runs in the owner's mm: the ring is readable here. */
	if (get_user(raw, vhost_used_idx(vq)))
		return -EFAULT;
	vq->last_used_idx = le16_to_cpu(raw);
	vq->signalled_used_valid = false;
	vq->broken = false;
	/* Completions of requests popped before this start are dropped. */
	vq->start_gen++;

	vhc_kick_unbind(vq);
	vhc_kick_bind(vq, file);
	WRITE_ONCE(vq->running, true);
	/* Serve whatever the driver queued before we were started. */
	vhc_vq_queue_work(vq);
	return 0;
}

static long vhc_vq_set_kick(struct vhost_vq *vq, int fd)
{
	struct eventfd_ctx *ctx;
	struct file *file;
	int ret;

	if (fd == VHOST_FILE_UNBIND) {
		vhc_vq_stop(vq);
		return 0;
	}
	if (fd < 0)
		return -EBADF;
	file = fget(fd);
	if (!file)
		return -EBADF;
	ctx = eventfd_ctx_fileget(file);
	if (IS_ERR(ctx)) {
		fput(file);
		return PTR_ERR(ctx);
	}
	eventfd_ctx_put(ctx);	/* only checked that it is an eventfd */
	if (vq->running) {
		/*
		 * A new kick file for a running ring: only the notification
		 * source changes.  Restarting would forget the requests in
		 * flight (their completions belong to this ring).
		 */
		vhc_kick_unbind(vq);
		vhc_kick_bind(vq, file);
		vhc_vq_queue_work(vq);
		return 0;
	}
	ret = vhc_vq_start(vq, file);
	if (ret)
		fput(file);
	return ret;
}

/*
 * VHOST_SET_VRING_ADDR.  While the ring runs only the logging of the used
 * ring may change (the VMM switches it at the start and end of a
 * migration, with the same ring addresses).  vq->mutex and dev->mutex held.
 */
static long vhc_vq_set_addr(struct vhost_vq *vq,
			    const struct vhost_vring_addr *a)
{
	bool log = a->flags & BIT(VHOST_VRING_F_LOG);
	u64 last;

	lockdep_assert_held(&vq->mutex);
	if (a->flags & ~BIT(VHOST_VRING_F_LOG))
		return -EINVAL;
	if (log &&
	    (check_add_overflow(a->log_guest_addr,
				(u64)vhc_used_bytes(SQCQ_VQ_MAX_NUM) - 1,
				&last) ||
	     !vhc_log_range_ok(vq->dev->log_base, a->log_guest_addr,
				 vhc_used_bytes(SQCQ_VQ_MAX_NUM)))) {
		vhost_dev_log(vq->dev, KERN_WARNING, "owner %d vq %u: used ring log address 0x%llx refused: outside the log\n",
			      vq->dev->owner_pid, vq->index, a->log_guest_addr);
		return -EFAULT;
	}
	if (vq->running) {
		if (u64_to_user_ptr(a->desc_user_addr) != vq->desc ||
		    u64_to_user_ptr(a->avail_user_addr) != vq->avail ||
		    u64_to_user_ptr(a->used_user_addr) != vq->used)
			return -EBUSY;
		vq->log_addr = a->log_guest_addr;
		vq->log_used = log;
		return 0;
	}
	if ((unsigned long)a->desc_user_addr != a->desc_user_addr ||
	    (unsigned long)a->avail_user_addr != a->avail_user_addr ||
	    (unsigned long)a->used_user_addr != a->used_user_addr)
		return -EFAULT;
	if (a->desc_user_addr & (SQCQ_DESC_ALIGN - 1) ||
	    a->avail_user_addr & (SQCQ_AVAIL_ALIGN - 1) ||
	    a->used_user_addr & (SQCQ_USED_ALIGN - 1))
		return -EINVAL;
	vq->desc = u64_to_user_ptr(a->desc_user_addr);
	vq->avail = u64_to_user_ptr(a->avail_user_addr);
	vq->used = u64_to_user_ptr(a->used_user_addr);
	vq->log_addr = a->log_guest_addr;
	vq->log_used = log;
	/* Checked again with the final size when the ring starts. */
	if (vq->num && vhc_vq_check_access(vq)) {
		vq->addr_set = false;
		return -EFAULT;
	}
	vq->addr_set = true;
	return 0;
}

/* The vring ioctls; every argument starts with the queue index. */
static long vhc_vring_ioctl(struct vhost_dev *dev, unsigned int cmd,
			    void __user *argp)
{
	struct vhost_vring_state s;
	struct vhost_vring_addr a;
	struct vhost_vring_file f;
	struct eventfd_ctx *ctx;
	struct vhost_vq *vq;
	unsigned int index;
	long ret = 0;

	if (get_user(index, (unsigned int __user *)argp))
		return -EFAULT;
	if (index >= dev->nvqs)
		return -ENOBUFS;
	vq = &dev->vqs[index];

	switch (cmd) {
	case VHOST_SET_VRING_NUM:
	case VHOST_SET_VRING_BASE:
	case VHOST_GET_VRING_BASE:
		if (copy_from_user(&s, argp, sizeof(s)))
			return -EFAULT;
		break;
	case VHOST_SET_VRING_ADDR:
		if (copy_from_user(&a, argp, sizeof(a)))
			return -EFAULT;
		break;
	default:
		if (copy_from_user(&f, argp, sizeof(f)))
			return -EFAULT;
		break;
	}

	/* Waits for the worker to leave this ring (see vhc_worker_serve()). */
	mutex_lock(&vq->mutex);
	switch (cmd) {
	case VHOST_SET_VRING_NUM:
		if (vq->running)
			ret = -EBUSY;
		else if (!s.num || s.num > SQCQ_VQ_MAX_NUM ||
			 !is_power_of_2(s.num))
			ret = -EINVAL;
		else
			vq->num = s.num;
		break;
	case VHOST_SET_VRING_BASE:
		if (vq->running) {
			ret = -EBUSY;
		} else if (s.num > 0xffff) {
			ret = -EINVAL;
		} else {
			vq->last_avail_idx = s.num;
			vq->avail_idx_cache = s.num;
			vq->signalled_used_valid = false;
		}
		break;
	case VHOST_GET_VRING_BASE:
		/* Stops the ring, as the VMM expects before it saves state. */
		vhc_vq_stop(vq);
		s.index = index;
		s.num = vq->last_avail_idx;
		if (copy_to_user(argp, &s, sizeof(s)))
			ret = -EFAULT;
		break;
	case VHOST_SET_VRING_ADDR:
		ret = vhc_vq_set_addr(vq, &a);
		break;
	case VHOST_SET_VRING_KICK:
		ret = vhc_vq_set_kick(vq, f.fd);
		break;
	case VHOST_SET_VRING_CALL:
	case VHOST_SET_VRING_ERR:
		ctx = vhc_eventfd_get(f.fd);
		if (IS_ERR(ctx)) {
			ret = PTR_ERR(ctx);
			break;
		}
		vhc_eventfd_swap(cmd == VHOST_SET_VRING_CALL ? &vq->call_ctx :
				  &vq->err_ctx, ctx);
		break;
	}
	mutex_unlock(&vq->mutex);
	/*
	 * A stopped ring ends SQ/CQ.  After the stop, not before: a setup
	 * request served in between sees the ring stopped and is refused,
	 * and one served before it is removed here (poll_lock orders the
	 * two; it is never taken under a vq->mutex).
	 */
	if (cmd == VHOST_GET_VRING_BASE ||
	    (cmd == VHOST_SET_VRING_KICK && f.fd == VHOST_FILE_UNBIND))
		vhc_dev_stop_doorbells(dev, "ring stopped");
	return ret;
}

/* ------------------------------------------------------------------ */
/* Device: ownership, features, lifetime                               */
/* ------------------------------------------------------------------ */

int vhc_dev_check_owner(struct vhost_dev *dev)
{
	lockdep_assert_held(&dev->mutex);
	return dev->mm && dev->mm == current->mm ? 0 : -EPERM;
}

/* Queries are answered for the owner, or anyone while there is none. */
static int vhc_dev_check_query(struct vhost_dev *dev)
{
	return !dev->mm || dev->mm == current->mm ? 0 : -EPERM;
}

bool vhc_dev_any_running(struct vhost_dev *dev)
{
	unsigned int i;

	for (i = 0; i < dev->nvqs; i++)
		if (READ_ONCE(dev->vqs[i].running))
			return true;
	return false;
}

/* Point every queue at @w.  dev->mutex held. */
static void vhc_dev_set_worker(struct vhost_dev *dev, struct vhost_worker *w)
{
	unsigned int i;

	lockdep_assert_held(&dev->mutex);
	mutex_lock(&dev->poll_lock);
	for (i = 0; i < dev->nvqs; i++) {
		mutex_lock(&dev->vqs[i].mutex);
		vhc_vq_set_worker(&dev->vqs[i], w);
		mutex_unlock(&dev->vqs[i].mutex);
	}
	mutex_unlock(&dev->poll_lock);
}

static long vhc_set_owner(struct vhost_dev *dev)
{
	struct vhost_worker *w;
	struct mm_struct *mm;

	lockdep_assert_held(&dev->mutex);
	if (dev->mm)
		return -EBUSY;
	mm = get_task_mm(current);
	if (!mm)
		return -EINVAL;
	dev->mm = mm;
	dev->owner_pid = current->tgid;
	get_task_struct(current);
	/* Read without dev->mutex by vhc_worker_unbound_cpus(). */
	WRITE_ONCE(dev->owner, current);
	/* The default worker: id 0, every queue, the poll thread. */
	w = vhc_worker_create(dev, 0);
	if (IS_ERR(w)) {
		dev->mm = NULL;
		dev->owner_pid = 0;
		mmput(mm);
		WRITE_ONCE(dev->owner, NULL);
		put_task_struct(current);
		return PTR_ERR(w);
	}
	vhc_dev_set_worker(dev, w);
	return 0;
}

void vhc_dev_stop_doorbells(struct vhost_dev *dev, const char *why)
{
	/* The poll thread holds poll_lock for a whole loop: we wait for it. */
	mutex_lock(&dev->poll_lock);
	dev->ops->sqcq->detach(dev, why);
	mutex_unlock(&dev->poll_lock);
}

/*
 * Stop every ring, then the SQ/CQ polling (@why names the cause in its log
 * line).  No kick can queue work once every wait entry is gone; each vq
 * mutex also waits for the worker to leave that ring.  With the control
 * ring stopped no setup request can attach the doorbells again: the host
 * never touches the area after this.
 */
static void vhc_dev_stop(struct vhost_dev *dev, const char *why)
{
	unsigned int i;

	for (i = 0; i < dev->nvqs; i++) {
		struct vhost_vq *vq = &dev->vqs[i];

		mutex_lock(&vq->mutex);
		vhc_vq_stop(vq);
		mutex_unlock(&vq->mutex);
	}
	vhc_dev_stop_doorbells(dev, why);
}

/*
 * Back to the state of a fresh open: rings stopped and forgotten,
 * eventfds dropped, features and table cleared, worker stopped, mm put.
 * dev->mutex held (or the file is being released).
 */
static void vhc_dev_reset(struct vhost_dev *dev)
{
	unsigned int i;

	lockdep_assert_held(&dev->mutex);
	vhc_dev_stop(dev, "device reset");
	/* The workers still run: they finish what the target core returns. */
	if (dev->ops->reset)
		dev->ops->reset(dev);
	/*
	 * No waker is left to race with the stops below: the rings are
	 * stopped, so no kick wakeup runs, and ops->reset waited for every
	 * command the target core had, and for a grace period.  Detach the
	 * queues all the same, so a stray waker finds no worker, and wait a
	 * grace period before stopping the threads.
	 */
	if (dev->mm) {
		vhc_dev_set_worker(dev, NULL);
		vhc_dev_free_workers(dev);
	}
	/* The reaper, if the owner was killed, has nothing left to do. */
	flush_work(&dev->reap_work);
	WRITE_ONCE(dev->owner_task, false);
	/* The worker is gone; the vq mutexes now only order with debugfs. */
	for (i = 0; i < dev->nvqs; i++) {
		struct vhost_vq *vq = &dev->vqs[i];

		mutex_lock(&vq->mutex);
		vhc_eventfd_swap(&vq->call_ctx, NULL);
		vhc_eventfd_swap(&vq->err_ctx, NULL);
		kvfree(vq->iov);
		vq->iov = NULL;
		kvfree(vq->iov_gpa);
		vq->iov_gpa = NULL;
		vq->umem = NULL;
		vq->log_base = 0;
		vq->log_used = false;
		vq->log_addr = 0;
		vq->log_ctx = NULL;
		vq->num = 0;
		vq->addr_set = false;
		vq->desc = NULL;
		vq->avail = NULL;
		vq->used = NULL;
		vq->broken = false;
		vq->last_avail_idx = 0;
		vq->avail_idx_cache = 0;
		vq->last_used_idx = 0;
		vq->signalled_used_valid = false;
		mutex_unlock(&vq->mutex);
	}
	kvfree(dev->umem);
	dev->umem = NULL;
	dev->features = 0;
	dev->log_base = 0;
	if (dev->log_ctx)
		eventfd_ctx_put(dev->log_ctx);
	dev->log_ctx = NULL;
	if (dev->mm)
		mmput(dev->mm);
	dev->mm = NULL;
	dev->owner_pid = 0;
	/* No worker is left to read it. */
	if (dev->owner)
		put_task_struct(dev->owner);
	WRITE_ONCE(dev->owner, NULL);
}

int vhc_dev_init(struct vhost_dev *dev, unsigned int nvqs,
		 const struct vhost_dev_ops *ops, void *priv)
{
	unsigned int i;

	memset(dev, 0, sizeof(*dev));
	/* Its share of vhost_lifecycle_rs (sqcq_vhost.h). */
	ratelimit_state_init(&dev->log_rs, 60 * HZ, 10);
	mutex_init(&dev->mutex);
	mutex_init(&dev->poll_lock);
	spin_lock_init(&dev->poll_own_lock);
	INIT_LIST_HEAD(&dev->pg_node);
	dev->ops = ops;
	dev->priv = priv;
	dev->nvqs = nvqs;
	INIT_WORK(&dev->reap_work, vhc_worker_reap);
	dev->vqs = kvcalloc(nvqs, sizeof(*dev->vqs), GFP_KERNEL_ACCOUNT);
	dev->workers = kcalloc(nvqs, sizeof(*dev->workers), GFP_KERNEL_ACCOUNT);
	if (!dev->vqs || !dev->workers ||
	    !zalloc_cpumask_var(&dev->poll_own, GFP_KERNEL_ACCOUNT)) {
		kvfree(dev->vqs);
		kfree(dev->workers);
		return -ENOMEM;
	}
	for (i = 0; i < nvqs; i++) {
		dev->vqs[i].dev = dev;
		dev->vqs[i].index = i;
		mutex_init(&dev->vqs[i].mutex);
	}
	return 0;
}

void vhc_dev_cleanup(struct vhost_dev *dev)
{
	mutex_lock(&dev->mutex);
	vhc_dev_reset(dev);
	mutex_unlock(&dev->mutex);
	kvfree(dev->vqs);
	kfree(dev->workers);
	free_cpumask_var(dev->poll_own);
	dev->vqs = NULL;
	dev->workers = NULL;
}

/*
 * Store the acked features.  VHOST_F_LOG_ALL may change while the rings
 * run (the VMM switches it at the start and the end of a migration), so
 * the value is written under poll_lock (the doorbell area's logger reads
 * it there) and each ring's mutex is taken once after: no worker batch
 * that began before this returns still writes without logging.
 */
static void vhc_dev_store_features(struct vhost_dev *dev, u64 features)
{
	unsigned int i;

	lockdep_assert_held(&dev->mutex);
	mutex_lock(&dev->poll_lock);
	WRITE_ONCE(dev->features, features);
	mutex_unlock(&dev->poll_lock);
	for (i = 0; i < dev->nvqs; i++) {
		mutex_lock(&dev->vqs[i].mutex);
		mutex_unlock(&dev->vqs[i].mutex);
	}
}

static long vhc_set_features(struct vhost_dev *dev, u64 features)
{
	/*
	 * Guest addresses behind a vIOMMU (or encrypted memory: SEV, TDX)
	 * are IOVAs that only the IOTLB messages, which this device does not
	 * take, could translate: refuse rather than use them as physical.
	 */
	if (features & BIT_ULL(VIRTIO_F_ACCESS_PLATFORM)) {
		pr_warn_ratelimited("owner %d: VIRTIO_F_ACCESS_PLATFORM refused: no IOTLB, IOVAs of a vIOMMU or SEV/TDX guest cannot be translated (start the device without iommu_platform=on)\n",
				    dev->owner_pid);
		return -EOPNOTSUPP;
	}
	if (features & ~vhost_dev_offered_features(dev)) {
		pr_warn_ratelimited("owner %d: unsupported features 0x%llx refused\n",
				    dev->owner_pid,
				    features & ~vhost_dev_offered_features(dev));
		return -EOPNOTSUPP;
	}
	if ((features & BIT_ULL(VHOST_F_LOG_ALL)) &&
	    !vhc_log_covers(dev, dev->umem, dev->log_base)) {
		vhost_dev_log(dev, KERN_WARNING, "owner %d: VHOST_F_LOG_ALL refused: the log base does not cover the memory table\n",
			      dev->owner_pid);
		return -EFAULT;
	}
	/*
	 * Anything but LOG_ALL changes only while the rings are stopped: the
	 * worker reads the other features only while running.
	 */
	if (((features ^ dev->features) & ~BIT_ULL(VHOST_F_LOG_ALL)) &&
	    vhc_dev_any_running(dev))
		return -EBUSY;
	vhc_dev_store_features(dev, features);
	return 0;
}

/*
 * VHOST_GET/SET_FEATURES_ARRAY: the features as @count 64-bit words, for
 * feature bits above 63.  None is offered there: every word after the
 * first reads 0, and a set bit in one is refused.  @count is bounded so a
 * hostile value cannot make us walk user memory for long.
 */
#define SQCQ_FEATURE_WORDS_MAX	64

static long vhc_get_features_array(struct vhost_dev *dev,
				   struct vhost_features_array __user *arr)
{
	u64 count, i;

	if (get_user(count, &arr->count))
		return -EFAULT;
	if (count > SQCQ_FEATURE_WORDS_MAX)
		return -EINVAL;
	for (i = 0; i < count; i++)
		if (put_user(i ? 0 : vhost_dev_offered_features(dev),
			     &arr->features[i]))
			return -EFAULT;
	return 0;
}

static long vhc_set_features_array(struct vhost_dev *dev,
				   struct vhost_features_array __user *arr)
{
	u64 count, i, word, features = 0;

	if (get_user(count, &arr->count))
		return -EFAULT;
	if (count > SQCQ_FEATURE_WORDS_MAX)
		return -EINVAL;
	for (i = 0; i < count; i++) {
		if (get_user(word, &arr->features[i]))
			return -EFAULT;
		if (!i) {
			features = word;
		} else if (word) {
			pr_warn_ratelimited("owner %d: feature bits above 63 refused (word %llu: 0x%llx)\n",
					    dev->owner_pid, i, word);
			return -EOPNOTSUPP;
		}
	}
	return vhc_set_features(dev, features);
}

/* ---- VHOST_NEW_WORKER and friends (docs/host-vhost-core.md) ---- */

/* The worker with id @id, or NULL.  dev->mutex held. */
static struct vhost_worker *vhc_worker_find(struct vhost_dev *dev,
					    unsigned int id)
{
	lockdep_assert_held(&dev->mutex);
	if (id >= dev->nvqs)
		return NULL;
	return dev->workers[array_index_nospec(id, dev->nvqs)];
}

/*
 * VHOST_NEW_WORKER: one more worker, in the lowest free slot (its id).
 * At most nvqs workers per device, the default one included: enough for a
 * worker per queue, and a bound on the threads a caller can make us start.
 */
static long vhc_new_worker(struct vhost_dev *dev,
			   struct vhost_worker_state __user *argp)
{
	struct vhost_worker_state st = {};
	struct vhost_worker *w;
	unsigned int id;

	lockdep_assert_held(&dev->mutex);
	for (id = 0; id < dev->nvqs && dev->workers[id]; id++)
		;
	if (id == dev->nvqs)
		return -ENOSPC;
	w = vhc_worker_create(dev, id);
	if (IS_ERR(w))
		return PTR_ERR(w);
	st.worker_id = w->id;
	if (copy_to_user(argp, &st, sizeof(st))) {
		/* The caller cannot name it: do not keep it. */
		vhc_worker_destroy(dev, w);
		return -EFAULT;
	}
	return 0;
}

/*
 * VHOST_FREE_WORKER: ENODEV for an id that names no worker, EBUSY while a
 * queue uses it, and for the default worker, which runs the SQ/CQ poll
 * loop and lives as long as the owner (upstream frees it too; QEMU never
 * asks).
 */
static long vhc_free_worker(struct vhost_dev *dev,
			    struct vhost_worker_state __user *argp)
{
	struct vhost_worker_state st;
	struct vhost_worker *w;

	lockdep_assert_held(&dev->mutex);
	if (copy_from_user(&st, argp, sizeof(st)))
		return -EFAULT;
	w = vhc_worker_find(dev, st.worker_id);
	if (!w)
		return -ENODEV;
	if (w->attached || w->poller)
		return -EBUSY;
	vhc_worker_destroy(dev, w);
	return 0;
}

/*
 * VHOST_ATTACH_VRING_WORKER: move a queue to a worker, stopped or running
 * (as upstream): under the queue's mutex, so the old worker is not inside
 * the ring, with its pending work handed over (vhc_vq_set_worker()).
 * Moving the control queue off the default worker ends SQ/CQ first.
 */
static long vhc_attach_vring_worker(struct vhost_dev *dev,
				    struct vhost_vring_worker __user *argp)
{
	struct vhost_vring_worker vw;
	struct vhost_worker *w;
	struct vhost_vq *vq;

	lockdep_assert_held(&dev->mutex);
	if (copy_from_user(&vw, argp, sizeof(vw)))
		return -EFAULT;
	if (vw.index >= dev->nvqs)
		return -ENOBUFS;
	vq = &dev->vqs[array_index_nospec(vw.index, dev->nvqs)];
	w = vhc_worker_find(dev, vw.worker_id);
	if (!w)
		return -ENODEV;
	mutex_lock(&dev->poll_lock);
	/*
	 * A polled queue may go to any worker: the poll thread hands it its
	 * doorbells.  Another queue (the control queue, which serves the
	 * setup and teardown requests under poll_lock) may not leave the
	 * poll thread while doorbells are installed.
	 */
	if (!w->poller && dev->db && !dev->ops->sqcq->cover(dev, vq))
		dev->ops->sqcq->detach(dev, "a ring that is not polled moved off the poll thread");
	mutex_lock(&vq->mutex);
	if (rcu_dereference_protected(vq->worker,
				      lockdep_is_held(&vq->mutex)) != w)
		vhc_vq_set_worker(vq, w);
	mutex_unlock(&vq->mutex);
	mutex_unlock(&dev->poll_lock);
	return 0;
}

/* VHOST_GET_VRING_WORKER: the id of the queue's worker. */
static long vhc_get_vring_worker(struct vhost_dev *dev,
				 struct vhost_vring_worker __user *argp)
{
	struct vhost_vring_worker vw;
	struct vhost_worker *w;
	unsigned int index;

	lockdep_assert_held(&dev->mutex);
	if (get_user(index, &argp->index))
		return -EFAULT;
	if (index >= dev->nvqs)
		return -ENOBUFS;
	index = array_index_nospec(index, dev->nvqs);
	/* Written with dev->mutex held (vhc_vq_set_worker()). */
	w = rcu_dereference_protected(dev->vqs[index].worker,
				      lockdep_is_held(&dev->mutex));
	if (!w)
		return -EINVAL;
	vw.index = index;
	vw.worker_id = w->id;
	return copy_to_user(argp, &vw, sizeof(vw)) ? -EFAULT : 0;
}

/*
 * The worker ioctls: EINVAL before SET_OWNER (as upstream), EPERM for
 * anyone but the owner.
 */
static long vhc_worker_ioctl(struct vhost_dev *dev, unsigned int cmd,
			     void __user *argp)
{
	long ret;

	lockdep_assert_held(&dev->mutex);
	if (!dev->mm)
		return -EINVAL;
	ret = vhc_dev_check_owner(dev);
	if (ret)
		return ret;
	switch (cmd) {
	case VHOST_NEW_WORKER:
		return vhc_new_worker(dev, argp);
	case VHOST_FREE_WORKER:
		return vhc_free_worker(dev, argp);
	case VHOST_ATTACH_VRING_WORKER:
		return vhc_attach_vring_worker(dev, argp);
	default:
		return vhc_get_vring_worker(dev, argp);
	}
}

long vhc_dev_ioctl(struct vhost_dev *dev, unsigned int cmd,
		   void __user *argp)
{
	u64 features, log_base;
	long ret;

	mutex_lock(&dev->mutex);
	switch (cmd) {
	case VHOST_SET_OWNER:
		ret = vhc_dev_check_query(dev);
		if (!ret)
			ret = vhc_set_owner(dev);
		break;
	case VHOST_GET_FEATURES:
		ret = vhc_dev_check_query(dev);
		features = vhost_dev_offered_features(dev);
		if (!ret && copy_to_user(argp, &features, sizeof(features)))
			ret = -EFAULT;
		break;
	case VHOST_GET_FEATURES_ARRAY:
		ret = vhc_dev_check_query(dev);
		if (!ret)
			ret = vhc_get_features_array(dev, argp);
		break;
	case VHOST_GET_BACKEND_FEATURES:
		/* No backend feature (IOTLB messages etc.) is implemented. */
		ret = vhc_dev_check_query(dev);
		features = 0;
		if (!ret && copy_to_user(argp, &features, sizeof(features)))
			ret = -EFAULT;
		break;
	case VHOST_NEW_WORKER:
	case VHOST_FREE_WORKER:
	case VHOST_ATTACH_VRING_WORKER:
	case VHOST_GET_VRING_WORKER:
		ret = vhc_worker_ioctl(dev, cmd, argp);
		break;
	case VHOST_RESET_OWNER:
	case VHOST_SET_FEATURES:
	case VHOST_SET_FEATURES_ARRAY:
	case VHOST_SET_BACKEND_FEATURES:
	case VHOST_SET_MEM_TABLE:
	case VHOST_SET_VRING_NUM:
	case VHOST_SET_VRING_BASE:
	case VHOST_GET_VRING_BASE:
	case VHOST_SET_VRING_ADDR:
	case VHOST_SET_VRING_KICK:
	case VHOST_SET_VRING_CALL:
	case VHOST_SET_VRING_ERR:
	case VHOST_SET_LOG_BASE:
	case VHOST_SET_LOG_FD:
		ret = vhc_dev_check_owner(dev);
		if (ret)
			break;
		switch (cmd) {
		case VHOST_RESET_OWNER:
			vhc_dev_reset(dev);
			break;
		case VHOST_SET_LOG_BASE:
			if (copy_from_user(&log_base, argp, sizeof(log_base)))
				ret = -EFAULT;
			else
				ret = vhc_dev_set_log_base(dev, log_base);
			break;
		case VHOST_SET_LOG_FD: {
			int fd;

			if (get_user(fd, (int __user *)argp))
				ret = -EFAULT;
			else
				ret = vhc_dev_set_log_fd(dev, fd);
			break;
		}
		case VHOST_SET_FEATURES:
		case VHOST_SET_BACKEND_FEATURES:
			if (copy_from_user(&features, argp, sizeof(features)))
				ret = -EFAULT;
			else if (cmd == VHOST_SET_FEATURES)
				ret = vhc_set_features(dev, features);
			else if (features)
				ret = -EOPNOTSUPP;
			break;
		case VHOST_SET_FEATURES_ARRAY:
			ret = vhc_set_features_array(dev, argp);
			break;
		case VHOST_SET_MEM_TABLE:
			ret = vhc_set_mem_table(dev, argp);
			break;
		default:
			ret = vhc_vring_ioctl(dev, cmd, argp);
			break;
		}
		break;
	default:
		ret = -ENOIOCTLCMD;
		break;
	}
	mutex_unlock(&dev->mutex);
	return ret;
}
