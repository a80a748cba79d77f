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
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cgroup.h>
#include <linux/file.h>
#include <linux/kthread.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/uaccess.h>

#include "sqcq_compat.h"
#include "sqcq_vhost.h"

#ifndef VHOST_FILE_UNBIND
#define VHOST_FILE_UNBIND	-1
#endif

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

struct sqcq_desc {
	__le64 addr;
	__le32 len;
	__le16 flags;
	__le16 next;
};

struct sqcq_used_elem {
	__le32 id;
	__le32 len;
};

static size_t sqcq_avail_bytes(unsigned int num)
{
	return 4 + 2 * (size_t)num + 2;
}

static size_t sqcq_used_bytes(unsigned int num)
{
	return 4 + sizeof(struct sqcq_used_elem) * (size_t)num + 2;
}

static __le16 __user *sqcq_avail_flags(struct sqcq_vq *vq)
{
	return vq->avail;
}

static __le16 __user *sqcq_avail_idx(struct sqcq_vq *vq)
{
	return vq->avail + 2;
}

static __le16 __user *sqcq_avail_entry(struct sqcq_vq *vq, u16 idx)
{
	return vq->avail + 4 + 2 * (idx & (vq->num - 1));
}

static __le16 __user *sqcq_used_event(struct sqcq_vq *vq)
{
	return vq->avail + 4 + 2 * vq->num;
}

static __le16 __user *sqcq_used_flags(struct sqcq_vq *vq)
{
	return vq->used;
}

static __le16 __user *sqcq_used_idx(struct sqcq_vq *vq)
{
	return vq->used + 2;
}

static void __user *sqcq_used_entry(struct sqcq_vq *vq, u16 idx)
{
	return vq->used + 4 +
	       sizeof(struct sqcq_used_elem) * (idx & (vq->num - 1));
}

static __le16 __user *sqcq_avail_event(struct sqcq_vq *vq)
{
	return vq->used + 4 + sizeof(struct sqcq_used_elem) * vq->num;
}

u64 sqcq_vdev_offered_features(const struct sqcq_vdev *dev)
{
	return SQCQ_RING_FEATURES | dev->ops->features;
}

/* ------------------------------------------------------------------ */
/* Memory table                                                        */
/* ------------------------------------------------------------------ */

/* The region holding @gpa, or NULL.  Binary search over the sorted table. */
static const struct sqcq_mem_region *
sqcq_umem_find(const struct sqcq_umem *umem, u64 gpa)
{
	unsigned int lo = 0, hi;

	if (!umem)
		return NULL;
	hi = umem->nregions;
	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;
		const struct sqcq_mem_region *r = &umem->r[mid];

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
static bool sqcq_gpa_wraps(u64 gpa, u64 len)
{
	u64 last;

	return len && check_add_overflow(gpa, len - 1, &last);
}

/* Copy @len bytes of guest memory at @gpa, across regions if need be. */
static int sqcq_copy_from_guest(struct sqcq_vq *vq, void *buf, u64 gpa,
				size_t len)
{
	if (sqcq_gpa_wraps(gpa, len))
		return -EFAULT;
	while (len) {
		const struct sqcq_mem_region *r = sqcq_umem_find(vq->umem, gpa);
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

const struct sqcq_mem_region *sqcq_umem_lookup(const struct sqcq_umem *umem,
					       u64 gpa)
{
	return sqcq_umem_find(umem, gpa);
}

static int sqcq_region_cmp(const void *a, const void *b)
{
	const struct sqcq_mem_region *ra = a, *rb = b;

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
static struct sqcq_umem *sqcq_umem_build(void __user *argp)
{
	struct vhost_memory_region *in = NULL;
	struct vhost_memory hdr;
	struct sqcq_umem *umem;
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

	sort(umem->r, umem->nregions, sizeof(umem->r[0]), sqcq_region_cmp,
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

static long sqcq_set_mem_table(struct sqcq_vdev *dev, void __user *argp)
{
	const struct sqcq_umem *old = dev->umem;
	struct sqcq_umem *umem;
	unsigned int i;

	umem = sqcq_umem_build(argp);
	if (IS_ERR(umem))
		return PTR_ERR(umem);
	/*
	 * Each queue switches under its own mutex, so the worker sees either
	 * table for a whole batch and never the old one after this loop.
	 */
	for (i = 0; i < dev->nvqs; i++) {
		struct sqcq_vq *vq = &dev->vqs[i];

		mutex_lock(&vq->mutex);
		vq->umem = umem;
		mutex_unlock(&vq->mutex);
	}
	/*
	 * A doorbell area stays only where the new table maps it the same.
	 * After the switch: an attach racing with it used either table.
	 */
	sqcq_doorbells_revalidate(dev, umem);
	dev->umem = umem;
	kvfree(old);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Worker                                                              */
/* ------------------------------------------------------------------ */

/*
 * Mark @vq pending and wake the worker.  Any context (kick wakeups run
 * under the eventfd's wait-queue lock).  test_and_set_bit() is a full
 * barrier when it sets the bit, so the worker, which sets its task state
 * before testing the bits, either sees the bit or is woken.
 */
void sqcq_vq_queue_work(struct sqcq_vq *vq)
{
	struct sqcq_vdev *dev = vq->dev;
	struct task_struct *worker;

	if (test_and_set_bit(vq->index, dev->pending))
		return;
	/* Pairs with the WRITE_ONCE()s in sqcq_owner_set()/_drop(). */
	worker = READ_ONCE(dev->worker);
	if (worker)
		wake_up_process(worker);
}

void sqcq_worker_serve(struct sqcq_vq *vq)
{
	/* Excludes the vring ioctls: they see the ring idle or not running. */
	mutex_lock(&vq->mutex);
	if (vq->dev->ops->complete_vq)
		vq->dev->ops->complete_vq(vq);
	if (vq->running && !vq->broken)
		vq->dev->ops->handle_vq(vq);
	mutex_unlock(&vq->mutex);
}

bool sqcq_worker_serve_pending(struct sqcq_vdev *dev)
{
	bool served = false;
	unsigned int i;

	lockdep_assert_held(&dev->poll_lock);
	for_each_set_bit(i, dev->pending, dev->nvqs) {
		if (!test_and_clear_bit(i, dev->pending))
			continue;
		__set_current_state(TASK_RUNNING);
		served = true;
		sqcq_worker_serve(&dev->vqs[i]);
		/* 130 queues of a busy guest: not in one go. */
		cond_resched();
	}
	return served;
}

bool sqcq_worker_has_pending(struct sqcq_vdev *dev)
{
	return !bitmap_empty(dev->pending, dev->nvqs);
}

/*
 * The worker: serves the queues marked pending (kicks, completions) and
 * sleeps when none is.  While doorbells with SQ polling are installed it
 * runs the poll loop instead (sqcq_poll_run(), host/vhost_sqcq.c), which
 * returns here when they go.
 */
static int sqcq_worker_fn(void *data)
{
	struct sqcq_vdev *dev = data;
	bool served, polling;

	/* dev->mm is set before the thread is woken and put after it stops. */
	kthread_use_mm(dev->mm);
	for (;;) {
		/* Excludes doorbell removal while queues are served. */
		mutex_lock(&dev->poll_lock);
		/* Task state before the bit tests: see sqcq_vq_queue_work(). */
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop()) {
			__set_current_state(TASK_RUNNING);
			mutex_unlock(&dev->poll_lock);
			break;
		}
		served = sqcq_worker_serve_pending(dev);
		polling = dev->db && dev->db->sq_poll;
		mutex_unlock(&dev->poll_lock);
		if (polling) {
			__set_current_state(TASK_RUNNING);
			sqcq_poll_run(dev);
		} else if (served) {
			__set_current_state(TASK_RUNNING);
			cond_resched();
		} else {
			schedule();
		}
	}
	kthread_unuse_mm(dev->mm);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Eventfds                                                            */
/* ------------------------------------------------------------------ */

static int sqcq_kick_wake(wait_queue_entry_t *wait, unsigned int mode,
			  int sync, void *key)
{
	struct sqcq_vq *vq = container_of(wait, struct sqcq_vq, kick_wait);

	if (!(key_to_poll(key) & EPOLLIN))
		return 0;
	/* Wakeups of one eventfd are serialised by its wait-queue lock. */
	WRITE_ONCE(vq->stat_kicks, vq->stat_kicks + 1);
	sqcq_vq_queue_work(vq);
	return 0;
}

static void sqcq_kick_queue_proc(struct file *file, wait_queue_head_t *wqh,
				 poll_table *pt)
{
	struct sqcq_vq *vq = container_of(pt, struct sqcq_vq, kick_pt);

	vq->kick_wqh = wqh;
	add_wait_queue(wqh, &vq->kick_wait);
}

/* Stop polling the kick eventfd.  vq->mutex held. */
static void sqcq_kick_unbind(struct sqcq_vq *vq)
{
	lockdep_assert_held(&vq->mutex);
	/*
	 * remove_wait_queue() takes the eventfd's wait-queue lock, under
	 * which sqcq_kick_wake() runs: once it returns no wakeup is running
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
static bool sqcq_kick_bind(struct sqcq_vq *vq, struct file *file)
{
	__poll_t mask;

	vq->kick_file = file;
	vq->kick_wqh = NULL;
	init_waitqueue_func_entry(&vq->kick_wait, sqcq_kick_wake);
	init_poll_funcptr(&vq->kick_pt, sqcq_kick_queue_proc);
	mask = vfs_poll(file, &vq->kick_pt);
	return mask & EPOLLIN;
}

/* Resolve an eventfd number; NULL for VHOST_FILE_UNBIND. */
static struct eventfd_ctx *sqcq_eventfd_get(int fd)
{
	if (fd == VHOST_FILE_UNBIND)
		return NULL;
	if (fd < 0)
		return ERR_PTR(-EBADF);
	return eventfd_ctx_fdget(fd);
}

static void sqcq_eventfd_swap(struct eventfd_ctx **slot,
			      struct eventfd_ctx *ctx)
{
	if (*slot)
		eventfd_ctx_put(*slot);
	*slot = ctx;
}

/* ------------------------------------------------------------------ */
/* Split ring engine                                                   */
/* ------------------------------------------------------------------ */

void sqcq_vq_fail(struct sqcq_vq *vq, const char *why)
{
	if (!vq->broken)
		pr_warn_ratelimited("owner %d vq %u: %s; queue stopped until restarted\n",
				    vq->dev->owner_pid, vq->index, why);
	vq->broken = true;
	if (vq->err_ctx)
		sqcq_eventfd_signal(vq->err_ctx);
}

/* Add guest range [gpa, gpa + len) to @req, split by memory region. */
static int sqcq_req_add(struct sqcq_vq *vq, struct sqcq_req *req, u64 gpa,
			u32 len, bool writable)
{
	/* Refused before any segment is added. */
	if (sqcq_gpa_wraps(gpa, len))
		return -EFAULT;
	if (!writable && req->in_cnt)
		return -EINVAL;	/* readable after writable */
	if (writable)
		req->in_len += len;
	else
		req->out_len += len;

	while (len) {
		const struct sqcq_mem_region *r = sqcq_umem_find(vq->umem, gpa);
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
static int sqcq_chain_step(struct sqcq_vq *vq, struct sqcq_req *req,
			   const struct sqcq_desc *d, unsigned int count,
			   unsigned int *next)
{
	u16 flags = le16_to_cpu(d->flags);
	int ret;

	ret = sqcq_req_add(vq, req, le64_to_cpu(d->addr), le32_to_cpu(d->len),
			   flags & VRING_DESC_F_WRITE);
	if (ret)
		return ret;
	if (!(flags & VRING_DESC_F_NEXT))
		return 0;
	*next = le16_to_cpu(d->next);
	return *next < count ? 1 : -EINVAL;
}

/* Walk an indirect table (the descriptor @ind points at). */
static int sqcq_walk_indirect(struct sqcq_vq *vq, struct sqcq_req *req,
			      const struct sqcq_desc *ind)
{
	u64 base = le64_to_cpu(ind->addr);
	u32 len = le32_to_cpu(ind->len);
	unsigned int count, left, i = 0;
	struct sqcq_desc d;
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
		ret = sqcq_copy_from_guest(vq, &d, base + (u64)i * SQCQ_DESC_SIZE,
					   sizeof(d));
		if (ret)
			return ret;
		if (le16_to_cpu(d.flags) & VRING_DESC_F_INDIRECT)
			return -EINVAL;	/* nested indirect */
		ret = sqcq_chain_step(vq, req, &d, count, &i);
		if (ret <= 0)
			return ret;
	}
}

/*
 * Walk the chain at @head.  Each descriptor of the ring may be visited at
 * most once per chain (num visits), each of an indirect table at most once
 * (count visits), so loops end with -ELOOP.
 */
static int sqcq_walk_chain(struct sqcq_vq *vq, struct sqcq_req *req, u16 head)
{
	unsigned int left, i = head;
	struct sqcq_desc d;
	int ret;

	req->head = head;
	req->out_cnt = 0;
	req->in_cnt = 0;
	req->out_len = 0;
	req->in_len = 0;
	req->iov = vq->iov;
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
			if (!sqcq_vdev_has_feature(vq->dev,
						   VIRTIO_RING_F_INDIRECT_DESC) ||
			    (flags & VRING_DESC_F_NEXT))
				return -EINVAL;
			return sqcq_walk_indirect(vq, req, &d);
		}
		ret = sqcq_chain_step(vq, req, &d, vq->num, &i);
		if (ret <= 0)
			return ret;
	}
}

static const char *sqcq_chain_error(int err)
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

int sqcq_vq_pop(struct sqcq_vq *vq, struct sqcq_req *req)
{
	__le16 raw;
	u16 head;
	int ret;

	lockdep_assert_held(&vq->mutex);
	if (vq->avail_idx_cache == vq->last_avail_idx) {
		u16 idx;

		if (get_user(raw, sqcq_avail_idx(vq))) {
			sqcq_vq_fail(vq, "cannot read avail->idx");
			return -EFAULT;
		}
		idx = le16_to_cpu(raw);
		if ((u16)(idx - vq->last_avail_idx) > vq->num) {
			sqcq_vq_fail(vq, "avail->idx moved by more than the ring size");
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

	if (get_user(raw, sqcq_avail_entry(vq, vq->last_avail_idx))) {
		sqcq_vq_fail(vq, "cannot read avail->ring");
		return -EFAULT;
	}
	head = le16_to_cpu(raw);
	if (head >= vq->num) {
		sqcq_vq_fail(vq, "avail head index out of range");
		return -EINVAL;
	}
	ret = sqcq_walk_chain(vq, req, head);
	if (ret) {
		sqcq_vq_fail(vq, sqcq_chain_error(ret));
		return ret;
	}
	vq->last_avail_idx++;
	WRITE_ONCE(vq->stat_requests, vq->stat_requests + 1);
	return 1;
}

int sqcq_vq_push_used(struct sqcq_vq *vq, u16 head, u32 len)
{
	struct sqcq_used_elem e = {
		.id = cpu_to_le32(head),
		.len = cpu_to_le32(len),
	};

	lockdep_assert_held(&vq->mutex);
	if (copy_to_user(sqcq_used_entry(vq, vq->last_used_idx), &e,
			 sizeof(e))) {
		sqcq_vq_fail(vq, "cannot write used->ring");
		return -EFAULT;
	}
	/*
	 * The entry before the index that publishes it; pairs with the
	 * driver's read barrier between reading used->idx and the entries.
	 */
	smp_wmb();
	if (put_user(cpu_to_le16(vq->last_used_idx + 1), sqcq_used_idx(vq))) {
		sqcq_vq_fail(vq, "cannot write used->idx");
		return -EFAULT;
	}
	vq->last_used_idx++;
	/* 65536 entries since the last signal: the old mark is ambiguous. */
	if (vq->last_used_idx == vq->signalled_used)
		vq->signalled_used_valid = false;
	return 0;
}

/*
 * Classic interrupt suppression (flags / used_event).  sqcq_vq_notify() is
 * the one place that decides whether the driver gets an interrupt: it uses
 * this, or the CQ doorbell handshake when the queue is in SQ/CQ mode.
 */
static bool sqcq_vq_should_signal(struct sqcq_vq *vq)
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

	if (sqcq_vdev_has_feature(vq->dev, VIRTIO_F_NOTIFY_ON_EMPTY)) {
		if (get_user(raw, sqcq_avail_idx(vq)))
			return true;
		if (le16_to_cpu(raw) == vq->last_avail_idx)
			return true;
	}

	if (!sqcq_vdev_has_feature(vq->dev, VIRTIO_RING_F_EVENT_IDX)) {
		if (get_user(raw, sqcq_avail_flags(vq)))
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
	if (get_user(raw, sqcq_used_event(vq)))
		return true;
	event = le16_to_cpu(raw);
	/* Signal when used_event lies in (old, new]: virtio 1.x 2.7.10. */
	return (u16)(new - event - 1) < (u16)(new - old);
}

void sqcq_vq_notify(struct sqcq_vq *vq)
{
	lockdep_assert_held(&vq->mutex);
	/* Worker only: vq->cq cannot change under us (poll_lock). */
	if (vq->cq) {
		if (!sqcq_doorbells_publish_cq(vq)) {
			WRITE_ONCE(vq->stat_calls_saved, vq->stat_calls_saved + 1);
			return;
		}
	} else if (!sqcq_vq_should_signal(vq)) {
		return;
	}
	if (vq->call_ctx) {
		sqcq_eventfd_signal(vq->call_ctx);
		WRITE_ONCE(vq->stat_calls, vq->stat_calls + 1);
	}
}

void sqcq_vq_disable_kicks(struct sqcq_vq *vq)
{
	/* With EVENT_IDX, an avail_event left behind suppresses kicks. */
	if (sqcq_vdev_has_feature(vq->dev, VIRTIO_RING_F_EVENT_IDX))
		return;
	if (put_user(cpu_to_le16(VRING_USED_F_NO_NOTIFY), sqcq_used_flags(vq)))
		sqcq_vq_fail(vq, "cannot write used->flags");
}

bool sqcq_vq_enable_kicks(struct sqcq_vq *vq)
{
	__le16 raw;
	int ret;

	if (sqcq_vdev_has_feature(vq->dev, VIRTIO_RING_F_EVENT_IDX))
		ret = put_user(cpu_to_le16(vq->last_avail_idx),
			       sqcq_avail_event(vq));
	else
		ret = put_user(cpu_to_le16(0), sqcq_used_flags(vq));
	if (ret) {
		sqcq_vq_fail(vq, "cannot write the kick suppression field");
		return false;
	}
	/*
	 * Publish "kick me" before re-reading avail->idx; pairs with the
	 * driver's full barrier between publishing avail->idx and reading
	 * our flags/avail_event.  Either it sees our request and kicks, or we
	 * see its new entries here.
	 */
	smp_mb();
	if (get_user(raw, sqcq_avail_idx(vq))) {
		sqcq_vq_fail(vq, "cannot read avail->idx");
		return false;
	}
	return le16_to_cpu(raw) != vq->last_avail_idx;
}

void sqcq_vq_serve_sync(struct sqcq_vq *vq,
			u32 (*one)(struct sqcq_vq *vq, struct sqcq_req *req))
{
	unsigned int served = 0, pushed = 0;
	struct sqcq_req req;
	u32 len;
	int ret;

	sqcq_vq_disable_kicks(vq);
	while (!vq->broken) {
		ret = sqcq_vq_pop(vq, &req);
		if (ret < 0)
			break;
		if (!ret) {
			if (!sqcq_vq_enable_kicks(vq))
				break;
			sqcq_vq_disable_kicks(vq);
			continue;
		}
		len = one(vq, &req);
		if (len != SQCQ_REQ_ASYNC) {
			if (sqcq_vq_push_used(vq, req.head, len))
				break;
			pushed++;
		}
		if (++served >= SQCQ_VQ_WEIGHT) {
			/* Let other queues run; come back for the rest. */
			sqcq_vq_queue_work(vq);
			break;
		}
	}
	if (pushed && !vq->broken)
		sqcq_vq_notify(vq);
}

size_t sqcq_req_copy_from(const struct sqcq_req *req, void *buf, size_t len)
{
	struct iov_iter it;

	iov_iter_init(&it, ITER_SOURCE, req->iov, req->out_cnt, req->out_len);
	return copy_from_iter(buf, len, &it);
}

size_t sqcq_req_copy_to(const struct sqcq_req *req, size_t offset,
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
static int sqcq_vq_check_access(struct sqcq_vq *vq)
{
	if (!access_ok(vq->desc, (size_t)vq->num * SQCQ_DESC_SIZE) ||
	    !access_ok(vq->avail, sqcq_avail_bytes(vq->num)) ||
	    !access_ok(vq->used, sqcq_used_bytes(vq->num)))
		return -EFAULT;
	return 0;
}

/* Stop the ring: the worker will not touch it again.  vq->mutex held. */
static void sqcq_vq_stop(struct sqcq_vq *vq)
{
	lockdep_assert_held(&vq->mutex);
	/* Lockless readers: sqcq_vdev_any_running(), the SQ/CQ setup. */
	WRITE_ONCE(vq->running, false);
	sqcq_kick_unbind(vq);
	/*
	 * The pending bit stays: it may stand for completions the device
	 * still has to finish (complete_vq runs for stopped rings too), and
	 * the worker skips handle_vq() for a ring that is not running.
	 */
}

/* Start the ring with kick file @file.  vq->mutex held. */
static int sqcq_vq_start(struct sqcq_vq *vq, struct file *file)
{
	__le16 raw;
	int ret;

	lockdep_assert_held(&vq->mutex);
	if (!vq->num || !vq->addr_set) {
		pr_warn_ratelimited("vq %u: SET_VRING_KICK before SET_VRING_NUM/ADDR\n",
				    vq->index);
		return -EINVAL;
	}
	ret = sqcq_vq_check_access(vq);
	if (ret)
		return ret;
	if (!vq->iov) {
		vq->iov = kvmalloc_array(SQCQ_MAX_IOV, sizeof(*vq->iov),
					 GFP_KERNEL_ACCOUNT);
		if (!vq->iov)
			return -ENOMEM;
	}
	/* The ioctl runs in the owner's mm: the ring is readable here. */
	if (get_user(raw, sqcq_used_idx(vq)))
		return -EFAULT;
	vq->last_used_idx = le16_to_cpu(raw);
	vq->signalled_used_valid = false;
	vq->broken = false;
	/* Completions of requests popped before this start are dropped. */
	vq->start_gen++;

	sqcq_kick_unbind(vq);
	sqcq_kick_bind(vq, file);
	WRITE_ONCE(vq->running, true);
	/* Serve whatever the driver queued before we were started. */
	sqcq_vq_queue_work(vq);
	return 0;
}

static long sqcq_vq_set_kick(struct sqcq_vq *vq, int fd)
{
	struct eventfd_ctx *ctx;
	struct file *file;
	int ret;

	if (fd == VHOST_FILE_UNBIND) {
		sqcq_vq_stop(vq);
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
		sqcq_kick_unbind(vq);
		sqcq_kick_bind(vq, file);
		sqcq_vq_queue_work(vq);
		return 0;
	}
	ret = sqcq_vq_start(vq, file);
	if (ret)
		fput(file);
	return ret;
}

static long sqcq_vq_set_addr(struct sqcq_vq *vq,
			     const struct vhost_vring_addr *a)
{
	if (a->flags & BIT(VHOST_VRING_F_LOG))
		return -EOPNOTSUPP;	/* no dirty logging */
	if (a->flags)
		return -EINVAL;
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
	/* Checked again with the final size when the ring starts. */
	if (vq->num && sqcq_vq_check_access(vq)) {
		vq->addr_set = false;
		return -EFAULT;
	}
	vq->addr_set = true;
	return 0;
}

/* The vring ioctls; every argument starts with the queue index. */
static long sqcq_vring_ioctl(struct sqcq_vdev *dev, unsigned int cmd,
			     void __user *argp)
{
	struct vhost_vring_state s;
	struct vhost_vring_addr a;
	struct vhost_vring_file f;
	struct eventfd_ctx *ctx;
	struct sqcq_vq *vq;
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

	/* Waits for the worker to leave this ring (see sqcq_worker_serve()). */
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
		sqcq_vq_stop(vq);
		s.index = index;
		s.num = vq->last_avail_idx;
		if (copy_to_user(argp, &s, sizeof(s)))
			ret = -EFAULT;
		break;
	case VHOST_SET_VRING_ADDR:
		ret = vq->running ? -EBUSY : sqcq_vq_set_addr(vq, &a);
		break;
	case VHOST_SET_VRING_KICK:
		ret = sqcq_vq_set_kick(vq, f.fd);
		break;
	case VHOST_SET_VRING_CALL:
	case VHOST_SET_VRING_ERR:
		ctx = sqcq_eventfd_get(f.fd);
		if (IS_ERR(ctx)) {
			ret = PTR_ERR(ctx);
			break;
		}
		sqcq_eventfd_swap(cmd == VHOST_SET_VRING_CALL ? &vq->call_ctx :
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
		sqcq_doorbells_detach(dev, "ring stopped");
	return ret;
}

/* ------------------------------------------------------------------ */
/* Device: ownership, features, lifetime                               */
/* ------------------------------------------------------------------ */

int sqcq_vdev_check_owner(struct sqcq_vdev *dev)
{
	lockdep_assert_held(&dev->mutex);
	return dev->mm && dev->mm == current->mm ? 0 : -EPERM;
}

/* Queries are answered for the owner, or anyone while there is none. */
static int sqcq_vdev_check_query(struct sqcq_vdev *dev)
{
	return !dev->mm || dev->mm == current->mm ? 0 : -EPERM;
}

bool sqcq_vdev_any_running(struct sqcq_vdev *dev)
{
	unsigned int i;

	for (i = 0; i < dev->nvqs; i++)
		if (READ_ONCE(dev->vqs[i].running))
			return true;
	return false;
}

static long sqcq_set_owner(struct sqcq_vdev *dev)
{
	struct task_struct *worker;
	struct mm_struct *mm;
	int ret;

	if (dev->mm)
		return -EBUSY;
	mm = get_task_mm(current);
	if (!mm)
		return -EINVAL;
	worker = kthread_create(sqcq_worker_fn, dev, "vhost-sqcq-%d",
				current->tgid);
	if (IS_ERR(worker)) {
		mmput(mm);
		return PTR_ERR(worker);
	}
	/*
	 * The worker works for the owner: put it in the owner's cgroups, so
	 * its CPU time and the memory it allocates for the guest
	 * (GFP_KERNEL_ACCOUNT) are charged to the VM, not to the host.
	 */
	ret = cgroup_attach_task_all(current, worker);
	if (ret) {
		kthread_stop(worker);
		mmput(mm);
		return ret;
	}
	dev->mm = mm;
	dev->owner_pid = current->tgid;
	/* Pairs with READ_ONCE() in sqcq_vq_queue_work(). */
	WRITE_ONCE(dev->worker, worker);
	wake_up_process(worker);
	return 0;
}

/*
 * Back to the state of a fresh open: rings stopped and forgotten,
 * eventfds dropped, features and table cleared, worker stopped, mm put.
 * dev->mutex held (or the file is being released).
 */
static void sqcq_vdev_reset(struct sqcq_vdev *dev)
{
	struct task_struct *worker = dev->worker;
	unsigned int i;

	lockdep_assert_held(&dev->mutex);
	/*
	 * No kick can queue work once every wait entry is gone; each vq
	 * mutex also waits for the worker to leave that ring.
	 */
	for (i = 0; i < dev->nvqs; i++) {
		struct sqcq_vq *vq = &dev->vqs[i];

		mutex_lock(&vq->mutex);
		sqcq_vq_stop(vq);
		mutex_unlock(&vq->mutex);
	}
	/*
	 * With the control ring stopped no setup request can attach the
	 * doorbells again: the host never touches the area after this.
	 */
	sqcq_doorbells_detach(dev, "device reset");
	if (dev->ops->reset)
		dev->ops->reset(dev);
	if (worker) {
		/* Pairs with READ_ONCE() in sqcq_vq_queue_work(). */
		WRITE_ONCE(dev->worker, NULL);
		kthread_stop(worker);
	}
	/* The worker is gone; the vq mutexes now only order with debugfs. */
	for (i = 0; i < dev->nvqs; i++) {
		struct sqcq_vq *vq = &dev->vqs[i];

		mutex_lock(&vq->mutex);
		sqcq_eventfd_swap(&vq->call_ctx, NULL);
		sqcq_eventfd_swap(&vq->err_ctx, NULL);
		kvfree(vq->iov);
		vq->iov = NULL;
		vq->umem = NULL;
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
	bitmap_zero(dev->pending, dev->nvqs);
	kvfree(dev->umem);
	dev->umem = NULL;
	dev->features = 0;
	if (dev->mm)
		mmput(dev->mm);
	dev->mm = NULL;
	dev->owner_pid = 0;
}

int sqcq_vdev_init(struct sqcq_vdev *dev, unsigned int nvqs,
		   const struct sqcq_vdev_ops *ops, void *priv)
{
	unsigned int i;

	memset(dev, 0, sizeof(*dev));
	mutex_init(&dev->mutex);
	mutex_init(&dev->poll_lock);
	dev->ops = ops;
	dev->priv = priv;
	dev->nvqs = nvqs;
	dev->vqs = kvcalloc(nvqs, sizeof(*dev->vqs), GFP_KERNEL_ACCOUNT);
	dev->pending = bitmap_zalloc(nvqs, GFP_KERNEL_ACCOUNT);
	if (!dev->vqs || !dev->pending) {
		kvfree(dev->vqs);
		bitmap_free(dev->pending);
		return -ENOMEM;
	}
	for (i = 0; i < nvqs; i++) {
		dev->vqs[i].dev = dev;
		dev->vqs[i].index = i;
		mutex_init(&dev->vqs[i].mutex);
	}
	return 0;
}

void sqcq_vdev_cleanup(struct sqcq_vdev *dev)
{
	mutex_lock(&dev->mutex);
	sqcq_vdev_reset(dev);
	mutex_unlock(&dev->mutex);
	kvfree(dev->vqs);
	bitmap_free(dev->pending);
	dev->vqs = NULL;
	dev->pending = NULL;
}

static long sqcq_set_features(struct sqcq_vdev *dev, u64 features)
{
	if (features & BIT_ULL(VHOST_F_LOG_ALL)) {
		pr_warn_ratelimited("owner %d: VHOST_F_LOG_ALL refused: no dirty logging (vhost-scsi cannot migrate)\n",
				    dev->owner_pid);
		return -EOPNOTSUPP;
	}
	if (features & ~sqcq_vdev_offered_features(dev)) {
		pr_warn_ratelimited("owner %d: unsupported features 0x%llx refused\n",
				    dev->owner_pid,
				    features & ~sqcq_vdev_offered_features(dev));
		return -EOPNOTSUPP;
	}
	if (sqcq_vdev_any_running(dev))
		return -EBUSY;
	/* Rings are stopped: the worker reads features only while running. */
	WRITE_ONCE(dev->features, features);
	return 0;
}

long sqcq_vdev_ioctl(struct sqcq_vdev *dev, unsigned int cmd,
		     void __user *argp)
{
	u64 features;
	long ret;

	mutex_lock(&dev->mutex);
	switch (cmd) {
	case VHOST_SET_OWNER:
		ret = sqcq_vdev_check_query(dev);
		if (!ret)
			ret = sqcq_set_owner(dev);
		break;
	case VHOST_GET_FEATURES:
		ret = sqcq_vdev_check_query(dev);
		features = sqcq_vdev_offered_features(dev);
		if (!ret && copy_to_user(argp, &features, sizeof(features)))
			ret = -EFAULT;
		break;
	case VHOST_GET_BACKEND_FEATURES:
		/* No backend feature (IOTLB messages etc.) is implemented. */
		ret = sqcq_vdev_check_query(dev);
		features = 0;
		if (!ret && copy_to_user(argp, &features, sizeof(features)))
			ret = -EFAULT;
		break;
	case VHOST_RESET_OWNER:
	case VHOST_SET_FEATURES:
	case VHOST_SET_BACKEND_FEATURES:
	case VHOST_SET_MEM_TABLE:
	case VHOST_SET_VRING_NUM:
	case VHOST_SET_VRING_BASE:
	case VHOST_GET_VRING_BASE:
	case VHOST_SET_VRING_ADDR:
	case VHOST_SET_VRING_KICK:
	case VHOST_SET_VRING_CALL:
	case VHOST_SET_VRING_ERR:
		ret = sqcq_vdev_check_owner(dev);
		if (ret)
			break;
		switch (cmd) {
		case VHOST_RESET_OWNER:
			sqcq_vdev_reset(dev);
			break;
		case VHOST_SET_FEATURES:
		case VHOST_SET_BACKEND_FEATURES:
			if (copy_from_user(&features, argp, sizeof(features)))
				ret = -EFAULT;
			else if (cmd == VHOST_SET_FEATURES)
				ret = sqcq_set_features(dev, features);
			else if (features)
				ret = -EOPNOTSUPP;
			break;
		case VHOST_SET_MEM_TABLE:
			ret = sqcq_set_mem_table(dev, argp);
			break;
		default:
			ret = sqcq_vring_ioctl(dev, cmd, argp);
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
