// SPDX-License-Identifier: GPL-2.0-only
/*
 * Phase "dirty-log": dirty logging for live migration.
 */
#include "client-lib.h"

/* ---- dirty logging (live migration) ---- */

static uint8_t *dlog;		/* the VMM's bitmap: bit per 4 KiB guest page */
#define DLOG_LEN	8192u	/* holds the bits of the whole table */
#define DLOG_DATA	(BIG_OFF)		/* data-in buffer (2 pages) */
#define DLOG_QUIET	(BIG_OFF + (64u << 10))	/* a page nothing writes */
#define DLOG_OUT	(BIG_OFF + (128u << 10))	/* data-out buffer */

static bool dlog_bit(uint64_t g)
{
	uint64_t pg = g >> 12;

	return __atomic_load_n(&dlog[pg / 8], __ATOMIC_ACQUIRE) &
	       (1u << (pg % 8));
}

static unsigned int dlog_count(void)
{
	unsigned int i, n = 0;

	for (i = 0; i < DLOG_LEN; i++)
		n += __builtin_popcount(__atomic_load_n(&dlog[i],
							__ATOMIC_ACQUIRE));
	return n;
}

static int log_all(int fd, bool on)
{
	uint64_t f = 0;

	if (ioctl(fd, VHOST_GET_FEATURES, &f))
		return -1;
	f &= ~(1ull << VIRTIO_F_NOTIFY_ON_EMPTY | 1ull << VHOST_F_LOG_ALL);
	if (on)
		f |= 1ull << VHOST_F_LOG_ALL;
	return ioctl(fd, VHOST_SET_FEATURES, &f);
}

/* As QEMU at a migration's start and end: each ring's used ring logged. */
static int log_rings(int fd, unsigned int first, unsigned int n, bool on)
{
	unsigned int i;

	for (i = first; i < first + n; i++) {
		struct vhost_vring_addr a = {
			.index = i,
			.flags = on ? 1 << VHOST_VRING_F_LOG : 0,
			.desc_user_addr = (uintptr_t)vqs[i].desc,
			.avail_user_addr = (uintptr_t)vqs[i].avail,
			.used_user_addr = (uintptr_t)vqs[i].used,
			.log_guest_addr = gpa(vqs[i].used),
		};

		if (ioctl(fd, VHOST_SET_VRING_ADDR, &a))
			return -1;
	}
	return 0;
}

/* Sum of the log_writes column over the queues, -1 if not shown. */
static long long dbg_log_writes(void)
{
	char dir[512] = "", path[600], buf[16384], *line, *save = NULL;
	long long sum = -1;

	dbg_devs(getpid(), dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/queues", dir);
	if (!dir[0] || !read_file(path, buf, sizeof(buf)))
		return -1;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned long long v[7], w;
		unsigned int i;
		int a, b, c;
		char mode[16];

		if (sscanf(line, "%u %llu %d %d %15s %llu %llu %llu %llu %llu %d %llu %llu",
			   &i, &v[0], &a, &b, mode, &v[1], &v[2], &v[3], &v[4],
			   &v[5], &c, &v[6], &w) == 13)
			sum = (sum < 0 ? 0 : sum) + (long long)w;
	}
	return sum;
}

/* One READ (@din) or WRITE of @len bytes at guest address @g on disk 0. */
static bool dlog_io(bool din, uint64_t g, uint32_t len, struct sres *res)
{
	uint8_t cdb[VIRTIO_SCSI_CDB_SIZE];

	cdb_rw(cdb, !din, false, 0, len / SECT);
	return scsi_cmd(disks[0].target, disks[0].lun, cdb, 10, g, len, din,
			res) && good(res);
}

static void *dlog_toggle_run(void *arg)
{
	int fd = *(int *)arg;
	unsigned int i;

	for (i = 0; !fe.stop && i < 60; i++) {
		if (log_all(fd, i % 2 == 0) ||
		    log_rings(fd, 2, NQ, i % 2 == 0))
			return (void *)1;
		msleep(50);
	}
	return NULL;
}

/*
 * What the host writes into guest memory reaches the VMM's dirty log: the
 * data-in pages and response of a READ, the used ring, not the data-out
 * pages of a WRITE (the host only reads them), nothing once logging is
 * off.  A log page that is not mapped stops the ring (no page left out
 * silently).  Logging switched on and off under I/O loses nothing.
 */
void t_dirty_log(int fd)
{
	uint64_t data = GBASE + DLOG_DATA, base, n = 0;
	struct cvq *q = &vqs[SYNC_VQ];
	long long w0, w1;
	struct timespec t0;
	pthread_t th;
	void *thr = NULL;
	struct sres res;
	uint8_t *bad;
	int lfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	dlog = mmap(NULL, DLOG_LEN, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	base = (uintptr_t)dlog;
	/* QEMU's order: the base, then the features, then each ring. */
	expect("dirty-log-base-under-io", ioctl(fd, VHOST_SET_LOG_BASE, &base),
	       0);
	expect("dirty-log-fd", ioctl(fd, VHOST_SET_LOG_FD, &lfd), 0);
	expect("dirty-log-all-on-running", log_all(fd, true), 0);
	expect("dirty-log-rings-on-running", log_rings(fd, 0, SYNC_VQ + 1, true),
	       0);
	{
		char v[64] = "";

		result(dbg_dev_str("queues", "dirty_log", v, sizeof(v)) &&
		       !strcmp(v, "on"), "dirty-log-debugfs-on", "'%s'", v);
	}

	memset(dlog, 0, DLOG_LEN);
	result(dlog_io(true, data, 8192, &res), "dirty-log-read",
	       "%s", sres_str(&res));
	result(dlog_bit(data) && dlog_bit(data + 4096),
	       "dirty-log-data-in-pages-logged", "bits %d %d",
	       dlog_bit(data), dlog_bit(data + 4096));
	result(dlog_bit(gpa(q->used)), "dirty-log-used-ring-logged",
	       "used ring page bit clear");
	result(!dlog_bit(GBASE + DLOG_QUIET), "dirty-log-quiet-page-clear",
	       "a page nothing wrote is logged");
	result(read(lfd, &n, sizeof(n)) == sizeof(n) && n > 0,
	       "dirty-log-fd-signalled", "eventfd count %llu",
	       (unsigned long long)n);

	memset(dlog, 0, DLOG_LEN);
	result(dlog_io(false, GBASE + DLOG_OUT, 8192, &res), "dirty-log-write",
	       "%s", sres_str(&res));
	memset(disks[0].valid, 0, 16);	/* the engine's window 0 changed */
	result(!dlog_bit(GBASE + DLOG_OUT) && !dlog_bit(GBASE + DLOG_OUT + 4096),
	       "dirty-log-data-out-pages-not-logged", "bits %d %d",
	       dlog_bit(GBASE + DLOG_OUT), dlog_bit(GBASE + DLOG_OUT + 4096));
	result(dlog_count() >= 2, "dirty-log-write-response-logged",
	       "%u bits", dlog_count());

	/* Off again: nothing is logged. */
	expect("dirty-log-all-off-running", log_all(fd, false), 0);
	memset(dlog, 0, DLOG_LEN);
	result(dlog_io(true, data, 8192, &res) && !dlog_count(),
	       "dirty-log-off-nothing-logged", "%s, %u bits", sres_str(&res),
	       dlog_count());

	/*
	 * A log too small: its second page is not mapped, and the data
	 * page's bit falls in it (byte (data >> 12) / 8 = 0x660; the other
	 * bits, below byte 0x600, land in the first page).
	 */
	bad = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(bad + 4096, 4096);
	base = (uintptr_t)bad + 4096 - 0x600;
	w0 = dbg_dev_key("queues", "log_failures");
	expect("dirty-log-base-small-accepted",
	       ioctl(fd, VHOST_SET_LOG_BASE, &base), 0);
	log_all(fd, true);
	efd_take(q->err, 0);
	{
		struct seg sg[3];
		struct virtio_scsi_cmd_req *req = buf_alloc(HDR_SZ);
		struct virtio_scsi_cmd_resp *rsp = buf_alloc(RSP_SZ);
		uint32_t ulen;

		lun_encode(req->lun, disks[0].target, disks[0].lun);
		req->tag = tag_seq++;
		cdb_rw(req->cdb, false, false, 0, 16);
		sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
		sg[1] = (struct seg){ gpa(rsp), RSP_SZ, true };
		sg[2] = (struct seg){ data, 8192, true };
		result(!sync_run(q, sg, 3, false, &ulen, 3000),
		       "dirty-log-small-log-no-answer",
		       "answered although its page could not be logged");
	}
	w1 = dbg_dev_key("queues", "log_failures");
	result(w1 > w0 && w0 >= 0, "dirty-log-small-log-counted",
	       "log_failures %lld -> %lld", w0, w1);
	result(klog_count("cannot set guest pages in the dirty log") > 0,
	       "dirty-log-small-log-kernel-line", "no line");
	/* sync_run restarted the ring; a good log makes it work again. */
	base = (uintptr_t)dlog;
	expect("dirty-log-base-good-again", ioctl(fd, VHOST_SET_LOG_BASE, &base),
	       0);
	log_rings(fd, SYNC_VQ, 1, true);
	memset(dlog, 0, DLOG_LEN);
	result(dlog_io(true, data, 8192, &res) && dlog_bit(data),
	       "dirty-log-ring-restarted-logs", "%s", sres_str(&res));
	munmap(bad, 4096);

	/* On and off every 50 ms under verified I/O on NQ queues. */
	w0 = dbg_log_writes();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	engine_start(&fe, NQ, 0, false, live_mask, 31);
	result(engine_wait_ok(&fe, 50, 60000), "dirty-log-toggle-io-running",
	       "engine did not get going");
	if (pthread_create(&th, NULL, dlog_toggle_run, &fd))
		abort();
	pthread_join(th, &thr);
	fe.stop = true;
	engine_join(&fe, &t0);
	result(!thr, "dirty-log-toggle-ioctls", "an ioctl failed: %s",
	       strerror(errno));
	result(!fe.hung && !fe.bad && fe.ok == fe.submitted && fe.ok >= 100,
	       "dirty-log-toggle-io-verified",
	       "%lu good of %lu, %lu bad, hung %d: %s", fe.ok, fe.submitted,
	       fe.bad, fe.hung, fe.why);
	w1 = dbg_log_writes();
	result(w1 > w0 && w0 >= 0, "dirty-log-toggle-logged",
	       "log_writes %lld -> %lld", w0, w1);
	log_all(fd, false);
	log_rings(fd, 0, SYNC_VQ + 1, false);
	lfd = -1;
	ioctl(fd, VHOST_SET_LOG_FD, &lfd);
	munmap(dlog, DLOG_LEN);
}
