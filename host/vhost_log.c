// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost_scsi_sqcq: dirty logging for live migration (docs/host-vhost-core.md,
 * "Dirty logging").
 *
 * While the VMM migrates a guest it copies guest memory as the guest runs
 * and copies again every page written since; KVM tells it which pages the
 * guest wrote, and this file tells it which ones the host wrote.  Once the
 * VMM acked VHOST_F_LOG_ALL and gave a log base, each guest byte the host
 * writes is followed by setting the bit of its 4 KiB guest page in the
 * VMM's bitmap: bit (gpa >> 12) counted from the log base, little-endian
 * bit order.  What the host writes: the used rings (at the guest address
 * VHOST_SET_VRING_ADDR gave with VHOST_VRING_F_LOG), the device-writable
 * buffers of every request (data-in, response and sense, TMF and event
 * replies, SQ/CQ setup answers) and the SQ/CQ doorbell area.
 *
 * The bit is set after the write, never before: the VMM clears a word of
 * the bitmap (an atomic exchange) and then copies the pages it named, so a
 * bit set before our write could be cleared, and the page copied, before
 * the write lands.
 *
 * Hostile input: the bitmap's extent for every region of the memory table
 * and every logged used ring must lie in user space at the base
 * (checked when the base, the table, the features or a ring's log address
 * change); the bits themselves are set through a pin of the log page, which
 * only succeeds for memory the owner mapped writable.  A log page that is
 * not there fails the ring that wrote (its err eventfd): a page left out of
 * the log would reach the destination stale.
 */

#include <linux/highmem.h>

/* The log's page: VHOST_PAGE_SIZE of the UAPI, whatever PAGE_SIZE is. */
#define SQCQ_LOG_PAGE_SHIFT	12

bool vhc_log_range_ok(u64 base, u64 gpa, u64 len)
{
	u64 first, last, end;

	if (!base || !len)
		return true;
	if (check_add_overflow(gpa, len - 1, &last))
		return false;
	/* Byte offsets in the bitmap of the first and the last bit. */
	first = (gpa >> SQCQ_LOG_PAGE_SHIFT) / BITS_PER_BYTE;
	last = (last >> SQCQ_LOG_PAGE_SHIFT) / BITS_PER_BYTE;
	if (check_add_overflow(base, last, &end) ||
	    (unsigned long)end != end)
		return false;
	return access_ok(u64_to_user_ptr(base + first), last - first + 1);
}

bool vhc_log_covers(struct vhost_dev *dev, const struct vhost_umem *umem,
		    u64 base)
{
	unsigned int i;

	lockdep_assert_held(&dev->mutex);
	if (!base)
		return true;
	for (i = 0; umem && i < umem->nregions; i++)
		if (!vhc_log_range_ok(base, umem->r[i].gpa,
				      umem->r[i].last - umem->r[i].gpa + 1))
			return false;
	for (i = 0; i < dev->nvqs; i++) {
		const struct vhost_vq *vq = &dev->vqs[i];

		/* The largest ring: SET_VRING_NUM may come later. */
		if (vq->log_used &&
		    !vhc_log_range_ok(base, vq->log_addr,
					vhc_used_bytes(SQCQ_VQ_MAX_NUM)))
			return false;
	}
	return true;
}

/*
 * Set bits [@first, @last] (guest page numbers) of the bitmap at @base, in
 * the caller's mm: one pin of each log page they fall in.
 */
static int vhc_log_set_bits(u64 base, u64 first, u64 last)
{
	while (first <= last) {
		u64 ua = base + first / BITS_PER_BYTE;
		unsigned long page_ua = ua & PAGE_MASK;
		unsigned int bit = (ua - page_ua) * BITS_PER_BYTE +
				   first % BITS_PER_BYTE;
		unsigned int n = min_t(u64, last - first + 1,
				       PAGE_SIZE * BITS_PER_BYTE - bit);
		struct page *page;
		unsigned int i;
		void *va;

		if ((unsigned long)ua != ua ||
		    pin_user_pages_fast(page_ua, 1, FOLL_WRITE, &page) != 1)
			return -EFAULT;
		va = kmap_local_page(page);
		/*
		 * Our writes to the guest pages before the bits; pairs with
		 * the VMM's atomic exchange of the word, which comes before
		 * it copies the pages the word names.
		 */
		smp_mb__before_atomic();
		for (i = 0; i < n; i++)
			set_bit_le(bit + i, va);
		kunmap_local(va);
		unpin_user_pages_dirty_lock(&page, 1, true);
		first += n;
	}
	return 0;
}

int vhc_log_mark(u64 base, u64 gpa, u64 len)
{
	u64 last;

	if (!len)
		return 0;
	if (check_add_overflow(gpa, len - 1, &last))
		return -EFAULT;
	return vhc_log_set_bits(base, gpa >> SQCQ_LOG_PAGE_SHIFT,
				  last >> SQCQ_LOG_PAGE_SHIFT);
}

bool vhc_dev_logging(const struct vhost_dev *dev)
{
	return READ_ONCE(dev->log_base) &&
	       (READ_ONCE(dev->features) & BIT_ULL(VHOST_F_LOG_ALL));
}

unsigned int vhc_req_in_ranges(const struct vhost_req *req,
			       struct vhost_log_range *out)
{
	unsigned int i, n = 0;

	for (i = req->out_cnt; i < req->out_cnt + req->in_cnt; i++) {
		u64 gpa = req->gpa[i], len = req->iov[i].iov_len;

		if (n && out[n - 1].gpa + out[n - 1].len == gpa) {
			out[n - 1].len += len;
			continue;
		}
		out[n].gpa = gpa;
		out[n].len = len;
		n++;
	}
	return n;
}

void vhc_dev_log_area(struct vhost_dev *dev, u64 gpa, u64 len)
{
	u64 base;

	lockdep_assert_held(&dev->poll_lock);
	base = dev->log_base;
	/*
	 * A release may run in any process: without the owner's mm there
	 * is no log to write, and no migration to write it for.
	 */
	if (!len || !vhc_dev_logging(dev) || current->mm != dev->mm)
		return;
	if (vhc_log_mark(base, gpa, len)) {
		WRITE_ONCE(dev->stat_log_failures, dev->stat_log_failures + 1);
		vhost_dev_log(dev, KERN_WARNING, "owner %d: cannot set the SQ/CQ doorbell area in the dirty log\n",
			      dev->owner_pid);
	}
}

/*
 * VHOST_SET_LOG_BASE: may come while the rings run (the VMM moves to a
 * bigger log when memory grows during a migration).  Each ring takes the
 * new base under its mutex, so once this returns no worker writes to the
 * old bitmap, which the VMM then reads one last time and frees.
 */
long vhc_dev_set_log_base(struct vhost_dev *dev, u64 base)
{
	unsigned int i;

	lockdep_assert_held(&dev->mutex);
	if ((unsigned long)base != base)
		return -EFAULT;
	if (!vhc_log_covers(dev, dev->umem, base)) {
		vhost_dev_log(dev, KERN_WARNING, "owner %d: log base 0x%llx refused: the bitmap for the memory table or a used ring is not in user space\n",
			      dev->owner_pid, base);
		return -EFAULT;
	}
	/* The doorbell area's logger reads it under poll_lock. */
	mutex_lock(&dev->poll_lock);
	dev->log_base = base;
	mutex_unlock(&dev->poll_lock);
	for (i = 0; i < dev->nvqs; i++) {
		struct vhost_vq *vq = &dev->vqs[i];

		mutex_lock(&vq->mutex);
		vq->log_base = base;
		mutex_unlock(&vq->mutex);
	}
	return 0;
}

/* VHOST_SET_LOG_FD: signalled after the host set bits (-1: none). */
long vhc_dev_set_log_fd(struct vhost_dev *dev, int fd)
{
	struct eventfd_ctx *ctx = NULL, *old;
	unsigned int i;

	lockdep_assert_held(&dev->mutex);
	if (fd != -1) {
		ctx = eventfd_ctx_fdget(fd);
		if (IS_ERR(ctx))
			return PTR_ERR(ctx);
	}
	old = dev->log_ctx;
	dev->log_ctx = ctx;
	/* Each ring's copy changes under its mutex: no worker signals old. */
	for (i = 0; i < dev->nvqs; i++) {
		struct vhost_vq *vq = &dev->vqs[i];

		mutex_lock(&vq->mutex);
		vq->log_ctx = ctx;
		mutex_unlock(&vq->mutex);
	}
	if (old)
		eventfd_ctx_put(old);
	return 0;
}
