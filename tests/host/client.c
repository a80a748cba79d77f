// SPDX-License-Identifier: GPL-2.0-only
/*
 * Userspace vhost client for the host module, run inside the test VM as
 * root: it plays both the VMM (ioctls, memory table, eventfds) and the guest
 * driver (it fills the rings itself), against /dev/vhost-scsi-sqcq.
 *
 * It checks every ioctl, with malformed input, and the split ring engine:
 * without the TCM fabric the device is a SCSI host with no targets, so
 * commands come back BAD_TARGET, task management BAD_TARGET, SQ/CQ setup
 * FUNCTION_REJECTED and AN queries OK; broken rings must stop (err eventfd)
 * without hurting the kernel.
 *
 * Output: one "PASS: host <name>" or "FAIL: host <name> (...)" line per
 * check, then "host client: N passed, M failed".  Exit status 0 only when
 * nothing failed.
 *
 *   client [NODE]        (default /dev/vhost-scsi-sqcq)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/vhost.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#include "../../common/sqcq_uapi.h"

#ifndef VHOST_F_LOG_ALL
#define VHOST_F_LOG_ALL 26
#endif
#define F_PACKED	34
#define NVQS		130		/* control, event, 128 request queues */
#define MEM_SIZE	(16u << 20)
#define GBASE		0x100000ull	/* guest-physical address of mem */
#define QNUM		256u
#define VQ_AREA		(64u << 10)	/* per-vq ring area in mem */
#define BUF_OFF		(10u << 20)	/* request buffers start here */
#define MEM_SPLIT	(12u << 20)	/* region boundary of the 2-region table */

#define REGION(g, s, u) ((struct vhost_memory_region){ \
	.guest_phys_addr = (g), .memory_size = (s), .userspace_addr = (u) })

static int passed, failed;
static const char *node = "/dev/vhost-scsi-sqcq";
static uint8_t *mem;
static size_t buf_next = BUF_OFF;

static void result(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		printf("PASS: host %s\n", name);
		passed++;
		return;
	}
	printf("FAIL: host %s (", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(")\n");
	failed++;
}

/* Expect an ioctl to fail with @err (0: to succeed). */
static void expect(const char *name, int ret, int err)
{
	int e = errno;

	if (err == 0)
		result(ret == 0, name, "ret %d errno %s", ret, strerror(e));
	else
		result(ret == -1 && e == err, name, "ret %d errno %s, wanted %s",
		       ret, ret ? strerror(e) : "-", strerror(err));
}

static uint64_t gpa(const void *p)
{
	return GBASE + (uint64_t)((const uint8_t *)p - mem);
}

static void *buf_alloc(size_t len)
{
	void *p;

	buf_next = (buf_next + 7) & ~(size_t)7;
	if (buf_next + len > MEM_SIZE)
		buf_next = BUF_OFF;
	p = mem + buf_next;
	buf_next += len;
	memset(p, 0, len);
	return p;
}

static int set_mem(int fd, uint32_t n, const struct vhost_memory_region *r,
		   uint32_t padding)
{
	struct vhost_memory *m;
	int ret;

	m = calloc(1, sizeof(*m) + n * sizeof(*r));
	if (!m)
		abort();
	m->nregions = n;
	m->padding = padding;
	if (n)
		memcpy(m->regions, r, n * sizeof(*r));
	ret = ioctl(fd, VHOST_SET_MEM_TABLE, m);
	free(m);
	return ret;
}

static int set_good_mem(int fd)
{
	struct vhost_memory_region r = {
		.guest_phys_addr = GBASE,
		.memory_size = MEM_SIZE,
		.userspace_addr = (uintptr_t)mem,
	};

	return set_mem(fd, 1, &r, 0);
}

static int vring_state(int fd, unsigned long cmd, unsigned int idx,
		       unsigned int num)
{
	struct vhost_vring_state s = { .index = idx, .num = num };

	return ioctl(fd, cmd, &s);
}

static int vring_file(int fd, unsigned long cmd, unsigned int idx, int efd)
{
	struct vhost_vring_file f = { .index = idx, .fd = efd };

	return ioctl(fd, cmd, &f);
}

static uint64_t elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 +
	       (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* ---- a driver-side virtqueue ---- */

struct cvq {
	unsigned int idx, num;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	int kick, call, err;
	uint16_t avail_idx;	/* next avail index to publish */
	uint16_t used_seen;	/* used entries consumed */
	unsigned int next_desc;
};

static struct cvq vqs[NVQS];

static uint16_t *used_event(struct cvq *q)
{
	return &q->avail->ring[q->num];
}

static uint16_t *avail_event(struct cvq *q)
{
	return (uint16_t *)&q->used->ring[q->num];
}

static uint16_t load16(const uint16_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void cvq_layout(struct cvq *q, unsigned int idx, unsigned int num)
{
	uint8_t *base = mem + (size_t)idx * VQ_AREA;

	memset(base, 0, VQ_AREA);
	q->idx = idx;
	q->num = num;
	q->desc = (void *)base;
	q->avail = (void *)(base + 16 * num);
	q->used = (void *)(base + ((16 * num + 6 + 2 * num + 4095) & ~4095u));
	q->avail_idx = 0;
	q->used_seen = 0;
	q->next_desc = 0;
}

static int cvq_set_addr(int fd, struct cvq *q, unsigned int flags)
{
	struct vhost_vring_addr a = {
		.index = q->idx,
		.flags = flags,
		.desc_user_addr = (uintptr_t)q->desc,
		.avail_user_addr = (uintptr_t)q->avail,
		.used_user_addr = (uintptr_t)q->used,
	};

	return ioctl(fd, VHOST_SET_VRING_ADDR, &a);
}

/* NUM, BASE, ADDR, KICK, CALL, ERR as a VMM does; -1 and errno on error. */
static int cvq_start(int fd, struct cvq *q, unsigned int idx, bool fresh)
{
	if (fresh) {
		cvq_layout(q, idx, QNUM);
		q->kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		q->call = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		q->err = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	}
	if (vring_state(fd, VHOST_SET_VRING_NUM, idx, q->num) ||
	    vring_state(fd, VHOST_SET_VRING_BASE, idx, q->avail_idx) ||
	    cvq_set_addr(fd, q, 0) ||
	    vring_file(fd, VHOST_SET_VRING_KICK, idx, q->kick) ||
	    vring_file(fd, VHOST_SET_VRING_CALL, idx, q->call) ||
	    vring_file(fd, VHOST_SET_VRING_ERR, idx, q->err))
		return -1;
	return 0;
}

static uint16_t cvq_desc(struct cvq *q, uint64_t addr, uint32_t len,
			 uint16_t flags, uint16_t next)
{
	uint16_t i = q->next_desc++ % q->num;

	q->desc[i].addr = addr;
	q->desc[i].len = len;
	q->desc[i].flags = flags;
	q->desc[i].next = next;
	return i;
}

/* Put @head in the avail ring and publish it (no kick). */
static void cvq_publish(struct cvq *q, uint16_t head)
{
	q->avail->ring[q->avail_idx % q->num] = head;
	/* Entry before index (the device's rmb pairs with this). */
	__atomic_store_n(&q->avail->idx, (uint16_t)(q->avail_idx + 1),
			 __ATOMIC_RELEASE);
	q->avail_idx++;
}

static void cvq_kick(struct cvq *q)
{
	uint64_t one = 1;

	if (write(q->kick, &one, sizeof(one)) != sizeof(one))
		perror("kick");
}

/* Wait until used->idx reaches @target; false on timeout. */
static bool cvq_wait_used(struct cvq *q, uint16_t target, unsigned int ms)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (load16(&q->used->idx) != target) {
		if (elapsed_ms(&t0) > ms)
			return false;
		usleep(500);
	}
	return true;
}

/* Wait until *@p == @v (the worker writes it after used->idx). */
static bool wait16(const uint16_t *p, uint16_t v, unsigned int ms)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (load16(p) != v) {
		if (elapsed_ms(&t0) > ms)
			return false;
		usleep(500);
	}
	return true;
}

/* Read (and reset) an eventfd's counter; 0 if it was not signalled. */
static uint64_t efd_take(int efd, unsigned int wait_ms)
{
	struct pollfd p = { .fd = efd, .events = POLLIN };
	uint64_t v = 0;

	if (poll(&p, 1, wait_ms) == 1 && read(efd, &v, sizeof(v)) != sizeof(v))
		v = 0;
	return v;
}

/* A SCSI command request: returns the head; *resp gets the response. */
static uint16_t cvq_cmd(struct cvq *q, struct virtio_scsi_cmd_resp **resp,
			bool indirect)
{
	struct virtio_scsi_cmd_req *req = buf_alloc(sizeof(*req));
	struct virtio_scsi_cmd_resp *rsp = buf_alloc(sizeof(*rsp));
	struct vring_desc *t;

	req->lun[0] = 1;
	req->cdb[0] = 0x00;	/* TEST UNIT READY */
	rsp->response = 0xff;
	*resp = rsp;
	if (!indirect) {
		uint16_t in = cvq_desc(q, gpa(rsp), sizeof(*rsp),
				       VRING_DESC_F_WRITE, 0);

		return cvq_desc(q, gpa(req), sizeof(*req), VRING_DESC_F_NEXT,
				in);
	}
	t = buf_alloc(2 * sizeof(*t));
	t[0].addr = gpa(req);
	t[0].len = sizeof(*req);
	t[0].flags = VRING_DESC_F_NEXT;
	t[0].next = 1;
	t[1].addr = gpa(rsp);
	t[1].len = sizeof(*rsp);
	t[1].flags = VRING_DESC_F_WRITE;
	return cvq_desc(q, gpa(t), 2 * sizeof(*t), VRING_DESC_F_INDIRECT, 0);
}

/* Check the next used entry: id @head, length @len. */
static bool cvq_take_used(struct cvq *q, uint16_t head, uint32_t len,
			  char *why, size_t whylen)
{
	struct vring_used_elem *e = &q->used->ring[q->used_seen % q->num];

	q->used_seen++;
	if (e->id != head || e->len != len) {
		snprintf(why, whylen, "used id %u len %u, wanted %u/%u",
			 e->id, e->len, head, len);
		return false;
	}
	return true;
}

/* ---- ioctl-level tests ---- */

static void test_before_owner(int fd)
{
	struct vhost_scsi_target t = { 0 };
	uint64_t f = 0;
	int v = 0;

	expect("get-features-before-owner",
	       ioctl(fd, VHOST_GET_FEATURES, &f), 0);
	result(f & (1ull << VIRTIO_F_VERSION_1) &&
	       f & (1ull << VIRTIO_RING_F_EVENT_IDX) &&
	       f & (1ull << VIRTIO_RING_F_INDIRECT_DESC) &&
	       f & (1ull << VIRTIO_F_NOTIFY_ON_EMPTY) &&
	       f & (1ull << VIRTIO_F_ANY_LAYOUT) &&
	       f & (1ull << VIRTIO_SCSI_F_HOTPLUG),
	       "features-offered", "0x%llx", (unsigned long long)f);
	result(!(f & (1ull << VHOST_F_LOG_ALL)) && !(f & (1ull << F_PACKED)),
	       "features-no-log-all-no-packed", "0x%llx",
	       (unsigned long long)f);
	expect("abi-version-before-owner",
	       ioctl(fd, VHOST_SCSI_GET_ABI_VERSION, &v), 0);
	result(v == 1, "abi-version-is-1", "got %d", v);
	expect("set-mem-table-before-owner-eperm", set_good_mem(fd), EPERM);
	expect("set-vring-num-before-owner-eperm",
	       vring_state(fd, VHOST_SET_VRING_NUM, 0, 128), EPERM);
	expect("set-features-before-owner-eperm",
	       ioctl(fd, VHOST_SET_FEATURES, &f), EPERM);
	expect("reset-owner-before-owner-eperm",
	       ioctl(fd, VHOST_RESET_OWNER), EPERM);
	expect("set-endpoint-before-owner-eperm",
	       ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t), EPERM);
}

static void test_unknown_ioctls(int fd)
{
	static const struct {
		const char *name;
		unsigned long cmd;
	} cmds[] = {
		{ "get-features-array", 0x8008AF83 },
		{ "set-features-array", 0x4008AF83 },
		{ "set-log-base", 0x4008AF04 },
		{ "set-log-fd", 0x4004AF07 },
		{ "new-worker", 0x8004AF08 },
		{ "free-worker", 0x4004AF09 },
		{ "set-vring-endian", 0x4008AF13 },
		{ "get-vring-endian", 0x4008AF14 },
		{ "attach-vring-worker", 0x4008AF15 },
		{ "set-busyloop", 0x4008AF23 },
		{ "net-set-backend", 0x4008AF30 },
		{ "set-fork-from-owner", 0x4001AF84 },
		{ "random", 0xdeadbeef },
		{ "vhost-type-nr-ff", 0xC008AFFF },
	};
	uint8_t buf[4096] = { 0 };
	char name[64];
	size_t i;

	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		snprintf(name, sizeof(name), "unknown-ioctl-%s-enotty",
			 cmds[i].name);
		expect(name, ioctl(fd, cmds[i].cmd, buf), ENOTTY);
	}
}

static void test_owner(int fd)
{
	int status, fd2;
	pid_t pid;

	expect("set-owner", ioctl(fd, VHOST_SET_OWNER), 0);
	expect("set-owner-twice-ebusy", ioctl(fd, VHOST_SET_OWNER), EBUSY);

	/* A forked child shares the fd but not the mm: not the owner. */
	pid = fork();
	if (pid == 0) {
		uint64_t f;
		int bad = 0;

		if (ioctl(fd, VHOST_SET_OWNER) != -1 || errno != EPERM)
			bad |= 1;
		if (set_good_mem(fd) != -1 || errno != EPERM)
			bad |= 2;
		if (vring_state(fd, VHOST_SET_VRING_NUM, 0, 64) != -1 ||
		    errno != EPERM)
			bad |= 4;
		if (ioctl(fd, VHOST_GET_FEATURES, &f) != -1 || errno != EPERM)
			bad |= 8;
		if (ioctl(fd, VHOST_RESET_OWNER) != -1 || errno != EPERM)
			bad |= 16;
		if (vring_file(fd, VHOST_SET_VRING_CALL, 0, -1) != -1 ||
		    errno != EPERM)
			bad |= 32;
		_exit(bad);
	}
	waitpid(pid, &status, 0);
	result(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "non-owner-child-eperm", "child status 0x%x", status);

	/* A second open is a separate device with its own owner. */
	fd2 = open(node, O_RDWR);
	expect("second-open-own-owner", fd2 >= 0 ?
	       ioctl(fd2, VHOST_SET_OWNER) : -1, 0);
	if (fd2 >= 0)
		close(fd2);
}

static void test_features(int fd)
{
	uint64_t f, offered = 0;

	ioctl(fd, VHOST_GET_FEATURES, &offered);
	f = offered | (1ull << VHOST_F_LOG_ALL);
	expect("set-features-log-all-refused",
	       ioctl(fd, VHOST_SET_FEATURES, &f), EOPNOTSUPP);
	f = offered | (1ull << F_PACKED);
	expect("set-features-packed-refused",
	       ioctl(fd, VHOST_SET_FEATURES, &f), EOPNOTSUPP);
	f = 1ull << 60;
	expect("set-features-unknown-refused",
	       ioctl(fd, VHOST_SET_FEATURES, &f), EOPNOTSUPP);
	expect("set-features-bad-pointer-efault",
	       ioctl(fd, VHOST_SET_FEATURES, (void *)8), EFAULT);
	expect("set-features-offered", ioctl(fd, VHOST_SET_FEATURES, &offered),
	       0);

	f = ~0ull;
	expect("get-backend-features", ioctl(fd, VHOST_GET_BACKEND_FEATURES, &f),
	       0);
	result(f == 0, "backend-features-none", "0x%llx", (unsigned long long)f);
	f = 1;
	expect("set-backend-features-iotlb-refused",
	       ioctl(fd, VHOST_SET_BACKEND_FEATURES, &f), EOPNOTSUPP);
	f = 0;
	expect("set-backend-features-zero",
	       ioctl(fd, VHOST_SET_BACKEND_FEATURES, &f), 0);
}

static void test_mem_table(int fd)
{
	struct vhost_memory_region r[2], *many;
	unsigned int i;

	memset(r, 0, sizeof(r));
	r[0] = REGION(GBASE, 0x10000, (uintptr_t)mem);
	r[1] = REGION(GBASE + 0x8000, 0x10000, (uintptr_t)mem + 0x20000);
	expect("mem-overlap-einval", set_mem(fd, 2, r, 0), EINVAL);
	r[1].guest_phys_addr = GBASE - 0x100;	/* overlaps from below */
	expect("mem-overlap-below-einval", set_mem(fd, 2, r, 0), EINVAL);
	r[1].guest_phys_addr = GBASE;		/* identical start */
	expect("mem-overlap-same-einval", set_mem(fd, 2, r, 0), EINVAL);
	r[1].guest_phys_addr = GBASE + 0x10000;	/* adjacent: fine */
	expect("mem-adjacent-ok", set_mem(fd, 2, r, 0), 0);

	r[0] = REGION(~0ull - 0xfff, 0x2000, (uintptr_t)mem);
	expect("mem-gpa-overflow", set_mem(fd, 1, r, 0), EOVERFLOW);
	r[0] = REGION(GBASE, 0x2000, ~0ull - 0xfff);
	expect("mem-uaddr-overflow", set_mem(fd, 1, r, 0), EOVERFLOW);
	r[0] = REGION(GBASE, 0, (uintptr_t)mem);
	expect("mem-zero-size-einval", set_mem(fd, 1, r, 0), EINVAL);
	r[0] = REGION(GBASE, 0x1000, 0xffff888000000000ull);
	expect("mem-kernel-address-efault", set_mem(fd, 1, r, 0), EFAULT);
	r[0] = REGION(GBASE, 0x1000, (uintptr_t)mem);
	r[0].flags_padding = 1;
	expect("mem-flags-padding-einval", set_mem(fd, 1, r, 0), EINVAL);
	r[0].flags_padding = 0;
	expect("mem-header-padding-einval", set_mem(fd, 1, r, 7), EINVAL);
	expect("mem-bad-pointer-efault",
	       ioctl(fd, VHOST_SET_MEM_TABLE, (void *)16), EFAULT);
	expect("mem-empty-table-ok", set_mem(fd, 0, NULL, 0), 0);

	many = calloc(600, sizeof(*many));
	for (i = 0; i < 600; i++) {
		/* One page each, in reverse order: the module sorts them. */
		many[i].guest_phys_addr = GBASE + (uint64_t)(599 - i) * 0x1000;
		many[i].memory_size = 0x1000;
		many[i].userspace_addr = (uintptr_t)mem + (599 - i) * 0x1000;
	}
	expect("mem-513-regions-e2big", set_mem(fd, 513, many + 87, 0), E2BIG);
	expect("mem-512-regions-ok", set_mem(fd, 512, many + 88, 0), 0);
	expect("mem-64-regions-ok", set_mem(fd, 64, many, 0), 0);
	{
		/* nregions huge: refused before any allocation. */
		struct vhost_memory m = { .nregions = 0xffffffff };

		expect("mem-nregions-4g-e2big",
		       ioctl(fd, VHOST_SET_MEM_TABLE, &m), E2BIG);
	}
	free(many);
	expect("mem-good-table", set_good_mem(fd), 0);
}

static void test_vring_config(int fd)
{
	struct vhost_vring_addr a;
	struct cvq q;
	int pfd[2];
	int efd = eventfd(0, EFD_CLOEXEC);

	expect("vring-num-0-einval", vring_state(fd, VHOST_SET_VRING_NUM, 2, 0),
	       EINVAL);
	expect("vring-num-3-einval", vring_state(fd, VHOST_SET_VRING_NUM, 2, 3),
	       EINVAL);
	expect("vring-num-65536-einval",
	       vring_state(fd, VHOST_SET_VRING_NUM, 2, 65536), EINVAL);
	expect("vring-num-32768-ok",
	       vring_state(fd, VHOST_SET_VRING_NUM, 2, 32768), 0);
	expect("vring-index-130-enobufs",
	       vring_state(fd, VHOST_SET_VRING_NUM, NVQS, 64), ENOBUFS);
	expect("vring-index-huge-enobufs",
	       vring_state(fd, VHOST_SET_VRING_NUM, 0xffffffffu, 64), ENOBUFS);
	expect("vring-base-65536-einval",
	       vring_state(fd, VHOST_SET_VRING_BASE, 2, 65536), EINVAL);
	expect("vring-kick-index-enobufs",
	       vring_file(fd, VHOST_SET_VRING_KICK, NVQS, efd), ENOBUFS);
	expect("vring-call-index-enobufs",
	       vring_file(fd, VHOST_SET_VRING_CALL, 1000, efd), ENOBUFS);
	expect("vring-bad-pointer-efault",
	       ioctl(fd, VHOST_SET_VRING_NUM, (void *)8), EFAULT);

	/* Queue 9: addresses. */
	cvq_layout(&q, 9, 64);
	expect("vring-kick-before-num-addr-einval",
	       vring_file(fd, VHOST_SET_VRING_KICK, 9, efd), EINVAL);
	expect("vring-num-64", vring_state(fd, VHOST_SET_VRING_NUM, 9, 64), 0);
	a = (struct vhost_vring_addr){ .index = 9,
		.desc_user_addr = (uintptr_t)q.desc + 8,
		.avail_user_addr = (uintptr_t)q.avail,
		.used_user_addr = (uintptr_t)q.used };
	expect("vring-addr-desc-misaligned-einval",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), EINVAL);
	a.desc_user_addr = (uintptr_t)q.desc;
	a.avail_user_addr++;
	expect("vring-addr-avail-misaligned-einval",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), EINVAL);
	a.avail_user_addr--;
	a.used_user_addr += 2;
	expect("vring-addr-used-misaligned-einval",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), EINVAL);
	a.used_user_addr -= 2;
	a.flags = 1 << VHOST_VRING_F_LOG;
	expect("vring-addr-log-eopnotsupp",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), EOPNOTSUPP);
	a.flags = 0x80;
	expect("vring-addr-unknown-flag-einval",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), EINVAL);
	a.flags = 0;
	a.used_user_addr = 0xffff888000000000ull;
	expect("vring-addr-kernel-efault",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), EFAULT);
	a.used_user_addr = (uintptr_t)q.used;
	expect("vring-addr-ok", ioctl(fd, VHOST_SET_VRING_ADDR, &a), 0);

	if (pipe(pfd) == 0) {
		expect("vring-kick-not-eventfd-einval",
		       vring_file(fd, VHOST_SET_VRING_KICK, 9, pfd[0]), EINVAL);
		expect("vring-call-not-eventfd-einval",
		       vring_file(fd, VHOST_SET_VRING_CALL, 9, pfd[0]), EINVAL);
		close(pfd[0]);
		close(pfd[1]);
	}
	expect("vring-kick-bad-fd-ebadf",
	       vring_file(fd, VHOST_SET_VRING_KICK, 9, 9999), EBADF);
	expect("vring-call-bad-fd-ebadf",
	       vring_file(fd, VHOST_SET_VRING_CALL, 9, 9999), EBADF);
	expect("vring-err-negative-fd-ebadf",
	       vring_file(fd, VHOST_SET_VRING_ERR, 9, -5), EBADF);
	expect("vring-call-unbind-ok",
	       vring_file(fd, VHOST_SET_VRING_CALL, 9, -1), 0);
	expect("vring-kick-start", vring_file(fd, VHOST_SET_VRING_KICK, 9, efd),
	       0);
	expect("vring-addr-while-running-ebusy",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), EBUSY);
	expect("vring-num-while-running-ebusy",
	       vring_state(fd, VHOST_SET_VRING_NUM, 9, 32), EBUSY);
	expect("vring-base-while-running-ebusy",
	       vring_state(fd, VHOST_SET_VRING_BASE, 9, 0), EBUSY);
	{
		uint64_t f = 0;

		ioctl(fd, VHOST_GET_FEATURES, &f);
		expect("set-features-while-running-ebusy",
		       ioctl(fd, VHOST_SET_FEATURES, &f), EBUSY);
	}
	{
		struct vhost_vring_state s = { .index = 9, .num = 77 };

		expect("get-vring-base-stops",
		       ioctl(fd, VHOST_GET_VRING_BASE, &s), 0);
		result(s.num == 0, "get-vring-base-value", "got %u", s.num);
	}
	expect("vring-addr-after-stop-ok", ioctl(fd, VHOST_SET_VRING_ADDR, &a),
	       0);
	expect("vring-kick-unbind-ok",
	       vring_file(fd, VHOST_SET_VRING_KICK, 9, -1), 0);
	close(efd);
}

static void test_scsi_ioctls(int fd)
{
	struct vhost_scsi_target t;
	uint32_t ev = 0;

	memset(&t, 'x', sizeof(t));
	t.abi_version = 0;
	t.reserved = 0;
	t.vhost_tpgt = 0;
	expect("set-endpoint-unterminated-wwpn-einval",
	       ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t), EINVAL);
	memset(&t, 0, sizeof(t));
	strcpy(t.vhost_wwpn, "naa.5001405000000001");
	t.abi_version = 7;
	expect("set-endpoint-bad-abi-einval",
	       ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t), EINVAL);
	t.abi_version = 1;
	t.reserved = 1;
	expect("set-endpoint-reserved-eopnotsupp",
	       ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t), EOPNOTSUPP);
	t.reserved = 0;
	expect("set-endpoint-no-target-enodev",
	       ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t), ENODEV);
	t.abi_version = 0;	/* what QEMU sends */
	expect("set-endpoint-abi0-no-target-enodev",
	       ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t), ENODEV);
	expect("clear-endpoint-nothing-bound-ok",
	       ioctl(fd, VHOST_SCSI_CLEAR_ENDPOINT, &t), 0);
	expect("set-endpoint-bad-pointer-efault",
	       ioctl(fd, VHOST_SCSI_SET_ENDPOINT, (void *)8), EFAULT);
	ev = 5;
	expect("set-events-missed", ioctl(fd, VHOST_SCSI_SET_EVENTS_MISSED, &ev),
	       0);
	ev = 0;
	expect("get-events-missed", ioctl(fd, VHOST_SCSI_GET_EVENTS_MISSED, &ev),
	       0);
	result(ev == 5, "events-missed-roundtrip", "got %u", ev);
}

/* ---- ring-level tests ---- */

static void test_ctrl_queue(int fd)
{
	struct cvq *q = &vqs[0];
	struct sqcq_tmf_req *tmf;
	struct virtio_scsi_ctrl_tmf_req *abort_req;
	struct virtio_scsi_ctrl_an_req *an;
	struct virtio_scsi_ctrl_an_resp *anr;
	uint8_t *setup_in, *tmf_resp;
	uint16_t h1, h2, h3, in;
	char why[128] = "";
	bool ok;

	expect("ctrl-vq-start", cvq_start(fd, q, 0, true), 0);

	/* SQ/CQ setup (not implemented yet): FUNCTION_REJECTED. */
	tmf = buf_alloc(sizeof(*tmf) + 64);
	tmf->type = SQCQ_VIRTIO_SCSI_T_TMF;
	tmf->subtype = SQCQ_TMF_SUBTYPE_SETUP;
	setup_in = buf_alloc(SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE);
	memset(setup_in, 0xee, SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE);
	in = cvq_desc(q, gpa(setup_in), SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE,
		      VRING_DESC_F_WRITE, 0);
	h1 = cvq_desc(q, gpa(tmf), sizeof(*tmf) + 64, VRING_DESC_F_NEXT, in);
	cvq_publish(q, h1);

	/* A real TMF (abort task): no targets, BAD_TARGET. */
	abort_req = buf_alloc(sizeof(*abort_req));
	abort_req->type = VIRTIO_SCSI_T_TMF;
	abort_req->subtype = VIRTIO_SCSI_T_TMF_ABORT_TASK;
	abort_req->lun[0] = 1;
	tmf_resp = buf_alloc(1);
	*tmf_resp = 0xee;
	in = cvq_desc(q, gpa(tmf_resp), 1, VRING_DESC_F_WRITE, 0);
	h2 = cvq_desc(q, gpa(abort_req), sizeof(*abort_req), VRING_DESC_F_NEXT,
		      in);
	cvq_publish(q, h2);

	/* AN query: OK, no events. */
	an = buf_alloc(sizeof(*an));
	an->type = VIRTIO_SCSI_T_AN_QUERY;
	an->event_requested = 0xffffffff;
	anr = buf_alloc(sizeof(*anr));
	anr->event_actual = 0xdead;
	anr->response = 0xee;
	in = cvq_desc(q, gpa(anr), sizeof(*anr), VRING_DESC_F_WRITE, 0);
	h3 = cvq_desc(q, gpa(an), sizeof(*an), VRING_DESC_F_NEXT, in);
	cvq_publish(q, h3);
	cvq_kick(q);

	ok = cvq_wait_used(q, 3, 5000);
	result(ok, "ctrl-three-requests-completed", "used idx %u",
	       load16(&q->used->idx));
	if (!ok)
		return;
	result(cvq_take_used(q, h1, 1, why, sizeof(why)) &&
	       setup_in[0] == SQCQ_VIRTIO_SCSI_S_FUNCTION_REJECTED &&
	       setup_in[1] == 0xee,
	       "ctrl-sqcq-setup-function-rejected", "%s resp %u", why,
	       setup_in[0]);
	result(cvq_take_used(q, h2, 1, why, sizeof(why)) &&
	       *tmf_resp == VIRTIO_SCSI_S_BAD_TARGET,
	       "ctrl-tmf-abort-bad-target", "%s resp %u", why, *tmf_resp);
	result(cvq_take_used(q, h3, sizeof(*anr), why, sizeof(why)) &&
	       anr->response == VIRTIO_SCSI_S_OK && anr->event_actual == 0,
	       "ctrl-an-query-ok-no-events", "%s resp %u actual 0x%x", why,
	       anr->response, anr->event_actual);
	result(efd_take(q->call, 2000) >= 1, "ctrl-call-signalled", "no call");
}

static void test_request_queue(int fd)
{
	struct virtio_scsi_cmd_resp *rsp[64];
	struct cvq *q = &vqs[2];
	uint16_t heads[64];
	char why[128] = "";
	unsigned int i, b, bad = 0, total = 0;
	bool ok;

	expect("req-vq-start", cvq_start(fd, q, 2, true), 0);

	heads[0] = cvq_cmd(q, &rsp[0], false);
	cvq_publish(q, heads[0]);
	cvq_kick(q);
	ok = cvq_wait_used(q, 1, 5000);
	result(ok && cvq_take_used(q, heads[0], sizeof(*rsp[0]), why,
				   sizeof(why)) &&
	       rsp[0]->response == VIRTIO_SCSI_S_BAD_TARGET,
	       "req-cmd-bad-target", "ok %d %s resp %u", ok, why,
	       rsp[0]->response);
	result(efd_take(q->call, 2000) >= 1, "req-call-signalled", "no call");

	heads[0] = cvq_cmd(q, &rsp[0], true);
	cvq_publish(q, heads[0]);
	cvq_kick(q);
	ok = cvq_wait_used(q, 2, 5000);
	result(ok && cvq_take_used(q, heads[0], sizeof(*rsp[0]), why,
				   sizeof(why)) &&
	       rsp[0]->response == VIRTIO_SCSI_S_BAD_TARGET,
	       "req-cmd-indirect-bad-target", "ok %d %s resp %u", ok, why,
	       rsp[0]->response);
	efd_take(q->call, 0);

	/* 2000 requests in batches of 64, one kick per batch. */
	for (b = 0; b < 2000 / 64 + 1; b++) {
		for (i = 0; i < 64; i++) {
			heads[i] = cvq_cmd(q, &rsp[i], i & 1);
			cvq_publish(q, heads[i]);
		}
		cvq_kick(q);
		if (!cvq_wait_used(q, q->avail_idx, 10000)) {
			bad++;
			break;
		}
		for (i = 0; i < 64; i++) {
			if (!cvq_take_used(q, heads[i], sizeof(*rsp[i]), why,
					   sizeof(why)) ||
			    rsp[i]->response != VIRTIO_SCSI_S_BAD_TARGET)
				bad++;
			total++;
		}
	}
	result(!bad, "req-batches-2000", "%u bad of %u (%s)", bad, total, why);
	/* EVENT_IDX: the device asks for a kick at the next entry. */
	result(wait16(avail_event(q), q->avail_idx, 2000),
	       "req-avail-event-published", "avail_event %u avail idx %u",
	       load16(avail_event(q)), q->avail_idx);
	result(load16(&q->used->idx) == q->avail_idx, "req-used-idx-wraps-ok",
	       "used %u avail %u", load16(&q->used->idx), q->avail_idx);

	/* used_event far away: completion without a call. */
	efd_take(q->call, 0);
	*used_event(q) = (uint16_t)(q->avail_idx + 100);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	heads[0] = cvq_cmd(q, &rsp[0], false);
	cvq_publish(q, heads[0]);
	cvq_kick(q);
	ok = cvq_wait_used(q, q->avail_idx, 5000);
	q->used_seen++;
	result(ok && efd_take(q->call, 300) == 0, "req-event-idx-suppresses-call",
	       "ok %d", ok);
	/* used_event == the entry about to complete: call. */
	*used_event(q) = q->avail_idx;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	heads[0] = cvq_cmd(q, &rsp[0], false);
	cvq_publish(q, heads[0]);
	cvq_kick(q);
	ok = cvq_wait_used(q, q->avail_idx, 5000);
	q->used_seen++;
	result(ok && efd_take(q->call, 2000) >= 1, "req-event-idx-calls",
	       "ok %d", ok);

	/* Short request: answered with an error, ring keeps working. */
	{
		uint8_t *out = buf_alloc(8), *resp = buf_alloc(8);
		uint16_t in = cvq_desc(q, gpa(resp), 8, VRING_DESC_F_WRITE, 0);
		uint16_t h = cvq_desc(q, gpa(out), 8, VRING_DESC_F_NEXT, in);

		cvq_publish(q, h);
		cvq_kick(q);
		ok = cvq_wait_used(q, q->avail_idx, 5000);
		result(ok && cvq_take_used(q, h, 1, why, sizeof(why)) &&
		       resp[0] == VIRTIO_SCSI_S_FAILURE,
		       "req-short-request-failure", "ok %d %s resp %u", ok, why,
		       resp[0]);
	}

	/* Memory table swapped while running: translations follow. */
	{
		struct vhost_memory_region r[2] = {
			{ GBASE, MEM_SPLIT, (uintptr_t)mem, 0 },
			{ GBASE + MEM_SPLIT, MEM_SIZE - MEM_SPLIT,
			  (uintptr_t)mem + MEM_SPLIT, 0 },
		};

		expect("mem-table-swap-while-running", set_mem(fd, 2, r, 0), 0);
		/* A buffer straddling the two regions. */
		buf_next = MEM_SPLIT - 24;
		heads[0] = cvq_cmd(q, &rsp[0], false);
		cvq_publish(q, heads[0]);
		cvq_kick(q);
		ok = cvq_wait_used(q, q->avail_idx, 5000);
		result(ok && cvq_take_used(q, heads[0], sizeof(*rsp[0]), why,
					   sizeof(why)) &&
		       rsp[0]->response == VIRTIO_SCSI_S_BAD_TARGET,
		       "req-across-regions", "ok %d %s", ok, why);
	}

	/* Stop and restart: GET_VRING_BASE returns the consumed index. */
	{
		struct vhost_vring_state s = { .index = 2 };

		expect("req-get-vring-base", ioctl(fd, VHOST_GET_VRING_BASE, &s),
		       0);
		result(s.num == q->avail_idx, "req-vring-base-value",
		       "got %u wanted %u", s.num, q->avail_idx);
		heads[0] = cvq_cmd(q, &rsp[0], false);
		cvq_publish(q, heads[0]);
		cvq_kick(q);
		usleep(200000);
		result(load16(&q->used->idx) == (uint16_t)(q->avail_idx - 1),
		       "req-stopped-ring-untouched", "used %u",
		       load16(&q->used->idx));
		/* Restart from the saved base: the pending entry is served. */
		q->avail_idx--;
		expect("req-restart", cvq_start(fd, q, 2, false), 0);
		q->avail_idx++;
		ok = cvq_wait_used(q, q->avail_idx, 5000);
		result(ok && cvq_take_used(q, heads[0], sizeof(*rsp[0]), why,
					   sizeof(why)),
		       "req-restart-serves-pending", "ok %d %s", ok, why);
	}
}

/* Without EVENT_IDX: VRING_AVAIL_F_NO_INTERRUPT and NOTIFY_ON_EMPTY. */
static void test_no_event_idx(int fd)
{
	uint64_t f = (1ull << VIRTIO_F_VERSION_1) |
		     (1ull << VIRTIO_RING_F_INDIRECT_DESC);
	struct virtio_scsi_cmd_resp *rsp;
	struct cvq *q = &vqs[4];
	char why[128] = "";
	uint16_t h;
	bool ok;

	expect("set-features-no-event-idx", ioctl(fd, VHOST_SET_FEATURES, &f),
	       0);
	expect("noevt-vq-start", cvq_start(fd, q, 4, true), 0);
	q->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
	h = cvq_cmd(q, &rsp, false);
	cvq_publish(q, h);
	cvq_kick(q);
	ok = cvq_wait_used(q, 1, 5000);
	result(ok && cvq_take_used(q, h, sizeof(*rsp), why, sizeof(why)) &&
	       efd_take(q->call, 300) == 0, "noevt-no-interrupt-flag-honoured",
	       "ok %d %s", ok, why);
	result(wait16(&q->used->flags, 0, 2000), "noevt-kicks-reenabled",
	       "used flags %u", load16(&q->used->flags));
	q->avail->flags = 0;
	h = cvq_cmd(q, &rsp, false);
	cvq_publish(q, h);
	cvq_kick(q);
	ok = cvq_wait_used(q, 2, 5000);
	result(ok && efd_take(q->call, 2000) >= 1, "noevt-call-when-allowed",
	       "ok %d", ok);
	q->used_seen++;

	/* NOTIFY_ON_EMPTY: a call when the ring runs empty, flag or not. */
	vring_state(fd, VHOST_GET_VRING_BASE, 4, 0);
	f |= 1ull << VIRTIO_F_NOTIFY_ON_EMPTY;
	expect("set-features-notify-on-empty",
	       ioctl(fd, VHOST_SET_FEATURES, &f), 0);
	expect("noevt-restart", cvq_start(fd, q, 4, false), 0);
	q->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
	h = cvq_cmd(q, &rsp, false);
	cvq_publish(q, h);
	cvq_kick(q);
	ok = cvq_wait_used(q, 3, 5000);
	result(ok && efd_take(q->call, 2000) >= 1, "notify-on-empty-calls",
	       "ok %d", ok);
	q->used_seen++;
	vring_state(fd, VHOST_GET_VRING_BASE, 4, 0);
}

enum bad_kind {
	BAD_LOOP, BAD_OUTSIDE, BAD_NESTED_INDIRECT, BAD_INDIRECT_LEN,
	BAD_HEAD, BAD_AVAIL_JUMP, BAD_READ_AFTER_WRITE, BAD_INDIRECT_LOOP,
	BAD_NEXT_RANGE, BAD_INDIRECT_NEXT, BAD_LEN_WRAP, BAD_KINDS
};

static const char *const bad_names[] = {
	"loop", "outside-mem-table", "nested-indirect", "indirect-len",
	"head-out-of-range", "avail-idx-jump", "readable-after-writable",
	"indirect-loop", "next-out-of-range", "indirect-with-next",
	"length-wraps",
};

/* Each malformed ring on its own queue: broken, err signalled, no oops. */
static void test_bad_ring(int fd, enum bad_kind kind)
{
	struct cvq *q = &vqs[10 + kind];
	struct vring_desc *t;
	uint8_t *b = buf_alloc(256);
	char name[80];
	uint16_t h = 0;
	bool ok;

	snprintf(name, sizeof(name), "bad-ring-%s-start", bad_names[kind]);
	expect(name, cvq_start(fd, q, q - vqs, true), 0);

	switch (kind) {
	case BAD_LOOP:
		cvq_desc(q, gpa(b), 16, VRING_DESC_F_NEXT, 1);
		cvq_desc(q, gpa(b), 16, VRING_DESC_F_NEXT, 0);
		break;
	case BAD_OUTSIDE:
		cvq_desc(q, GBASE + MEM_SIZE + 4096, 64, 0, 0);
		break;
	case BAD_NESTED_INDIRECT:
		t = buf_alloc(32);
		t[0] = (struct vring_desc){ gpa(t), 32, VRING_DESC_F_INDIRECT, 0 };
		cvq_desc(q, gpa(t), 32, VRING_DESC_F_INDIRECT, 0);
		break;
	case BAD_INDIRECT_LEN:
		t = buf_alloc(32);
		cvq_desc(q, gpa(t), 24, VRING_DESC_F_INDIRECT, 0);
		break;
	case BAD_HEAD:
		break;	/* head = num below */
	case BAD_AVAIL_JUMP:
		break;
	case BAD_READ_AFTER_WRITE:
		cvq_desc(q, gpa(b), 16, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
		cvq_desc(q, gpa(b), 16, 0, 0);
		break;
	case BAD_INDIRECT_LOOP:
		t = buf_alloc(48);
		t[0] = (struct vring_desc){ gpa(b), 16, VRING_DESC_F_NEXT, 1 };
		t[1] = (struct vring_desc){ gpa(b), 16, VRING_DESC_F_NEXT, 2 };
		t[2] = (struct vring_desc){ gpa(b), 16, VRING_DESC_F_NEXT, 0 };
		cvq_desc(q, gpa(t), 48, VRING_DESC_F_INDIRECT, 0);
		break;
	case BAD_NEXT_RANGE:
		cvq_desc(q, gpa(b), 16, VRING_DESC_F_NEXT, 5000);
		break;
	case BAD_INDIRECT_NEXT:
		t = buf_alloc(16);
		t[0] = (struct vring_desc){ gpa(b), 16, 0, 0 };
		cvq_desc(q, gpa(t), 16, VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT,
			 1);
		cvq_desc(q, gpa(b), 16, 0, 0);
		break;
	case BAD_LEN_WRAP:
		cvq_desc(q, GBASE + MEM_SIZE - 16, 0xffffffff, 0, 0);
		break;
	case BAD_KINDS:
		break;
	}
	if (kind == BAD_HEAD) {
		cvq_publish(q, q->num);
	} else if (kind == BAD_AVAIL_JUMP) {
		q->avail->ring[0] = 0;
		cvq_desc(q, gpa(b), 16, 0, 0);
		__atomic_store_n(&q->avail->idx, (uint16_t)(q->num + 1),
				 __ATOMIC_RELEASE);
	} else {
		cvq_publish(q, h);
	}
	cvq_kick(q);
	ok = efd_take(q->err, 5000) >= 1;
	usleep(20000);
	snprintf(name, sizeof(name), "bad-ring-%s-err-signalled",
		 bad_names[kind]);
	result(ok && load16(&q->used->idx) == 0, name, "err %d used %u", ok,
	       load16(&q->used->idx));
	/* Further kicks are ignored: still nothing used, no second err. */
	cvq_kick(q);
	usleep(50000);
	snprintf(name, sizeof(name), "bad-ring-%s-stays-stopped",
		 bad_names[kind]);
	result(load16(&q->used->idx) == 0 && efd_take(q->err, 0) == 0, name,
	       "used %u", load16(&q->used->idx));
}

/* A broken ring restarted with sane content works again. */
static void test_bad_ring_recovery(int fd)
{
	struct virtio_scsi_cmd_resp *rsp;
	struct cvq *q = &vqs[10 + BAD_LOOP];
	struct vhost_vring_state s = { .index = q->idx };
	char why[128] = "";
	uint16_t h;
	bool ok;

	expect("bad-ring-recovery-stop", ioctl(fd, VHOST_GET_VRING_BASE, &s), 0);
	result(s.num == 0, "bad-ring-recovery-base-not-consumed", "base %u",
	       s.num);
	/* Replace the looping entry by a good request at the same slot. */
	q->avail_idx = 0;
	q->next_desc = 4;
	h = cvq_cmd(q, &rsp, false);
	q->avail->ring[0] = h;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	expect("bad-ring-recovery-restart", cvq_start(fd, q, q->idx, false), 0);
	q->avail_idx = 1;
	cvq_kick(q);
	ok = cvq_wait_used(q, 1, 5000);
	result(ok && cvq_take_used(q, h, sizeof(*rsp), why, sizeof(why)) &&
	       rsp->response == VIRTIO_SCSI_S_BAD_TARGET,
	       "bad-ring-recovery-works", "ok %d %s", ok, why);
}

static void test_reset_owner(int fd)
{
	uint64_t f = 0;

	expect("reset-owner", ioctl(fd, VHOST_RESET_OWNER), 0);
	expect("after-reset-vring-eperm",
	       vring_state(fd, VHOST_SET_VRING_NUM, 2, 64), EPERM);
	expect("after-reset-set-owner", ioctl(fd, VHOST_SET_OWNER), 0);
	ioctl(fd, VHOST_GET_FEATURES, &f);
	expect("after-reset-set-features", ioctl(fd, VHOST_SET_FEATURES, &f), 0);
	expect("after-reset-mem-table", set_good_mem(fd), 0);
	/* Old ring state is gone: a fresh start works from scratch. */
	expect("after-reset-ring-start", cvq_start(fd, &vqs[3], 3, true), 0);
	{
		struct virtio_scsi_cmd_resp *rsp;
		uint16_t h = cvq_cmd(&vqs[3], &rsp, false);
		bool ok;

		cvq_publish(&vqs[3], h);
		cvq_kick(&vqs[3]);
		ok = cvq_wait_used(&vqs[3], 1, 5000);
		result(ok && rsp->response == VIRTIO_SCSI_S_BAD_TARGET,
		       "after-reset-ring-works", "ok %d", ok);
	}
}

/* The owner dies with rings running and requests pending: no leak, no oops. */
static void test_owner_exit(void)
{
	int status;
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		int fd = open(node, O_RDWR);
		uint64_t f = 0;
		struct virtio_scsi_cmd_resp *rsp;
		unsigned int i;

		if (fd < 0 || ioctl(fd, VHOST_SET_OWNER) ||
		    ioctl(fd, VHOST_GET_FEATURES, &f) ||
		    ioctl(fd, VHOST_SET_FEATURES, &f) || set_good_mem(fd) ||
		    cvq_start(fd, &vqs[2], 2, true))
			_exit(1);
		for (i = 0; i < 100; i++)
			cvq_publish(&vqs[2], cvq_cmd(&vqs[2], &rsp, false));
		cvq_kick(&vqs[2]);
		/* Exit without closing: the kernel cleans up at fd release. */
		_exit(0);
	}
	waitpid(pid, &status, 0);
	result(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "owner-exit-with-running-rings", "status 0x%x", status);
}

/*
 * Races: a driver thread keeps submitting and kicking queue 5 while the
 * main thread stops and restarts the ring and swaps the memory table.
 * Every request must complete exactly once in the end.
 */
struct stress {
	struct cvq *q;
	volatile bool stop;
	unsigned int submitted;
};

static void *stress_driver(void *arg)
{
	struct stress *st = arg;
	struct cvq *q = st->q;
	struct virtio_scsi_cmd_resp *rsp;

	while (!st->stop) {
		uint16_t inflight = q->avail_idx - load16(&q->used->idx);

		if (inflight < q->num / 2) {
			cvq_publish(q, cvq_cmd(q, &rsp, st->submitted & 1));
			st->submitted++;
		}
		cvq_kick(q);
		if (!(st->submitted & 7))
			usleep(100);
	}
	return NULL;
}

static void test_stress(int fd)
{
	struct vhost_memory_region one = REGION(GBASE, MEM_SIZE, (uintptr_t)mem);
	struct vhost_memory_region two[2] = {
		REGION(GBASE, MEM_SPLIT, (uintptr_t)mem),
		REGION(GBASE + MEM_SPLIT, MEM_SIZE - MEM_SPLIT,
		       (uintptr_t)mem + MEM_SPLIT),
	};
	struct stress st = { .q = &vqs[5] };
	struct cvq *q = &vqs[5];
	unsigned int i, restarts = 0, bad = 0;
	struct timespec t0;
	pthread_t th;
	bool ok;

	expect("stress-vq-start", cvq_start(fd, q, 5, true), 0);
	if (pthread_create(&th, NULL, stress_driver, &st)) {
		result(false, "stress-thread", "pthread_create");
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (elapsed_ms(&t0) < 3000) {
		struct vhost_vring_state s = { .index = 5 };

		if (ioctl(fd, VHOST_GET_VRING_BASE, &s))
			bad++;
		usleep(restarts % 3 * 200);
		if (set_mem(fd, restarts & 1 ? 2 : 1, restarts & 1 ? two : &one,
			    0))
			bad++;
		if (vring_state(fd, VHOST_SET_VRING_NUM, 5, q->num) ||
		    vring_state(fd, VHOST_SET_VRING_BASE, 5, s.num) ||
		    cvq_set_addr(fd, q, 0) ||
		    vring_file(fd, VHOST_SET_VRING_KICK, 5, q->kick))
			bad++;
		restarts++;
		usleep(500);
	}
	st.stop = true;
	pthread_join(th, NULL);
	result(!bad, "stress-stop-start-under-kicks", "%u failed ioctls", bad);
	cvq_kick(q);
	ok = cvq_wait_used(q, q->avail_idx, 10000);
	for (i = 0; ok && i < st.submitted; i++) {
		struct vring_used_elem *e = &q->used->ring[i % q->num];

		if (i + q->num >= st.submitted && e->len != 108)
			bad++;
	}
	result(ok && !bad, "stress-every-request-completed-once",
	       "submitted %u used %u avail %u restarts %u bad %u",
	       st.submitted, load16(&q->used->idx), q->avail_idx, restarts,
	       bad);
	printf("# stress: %u requests, %u ring restarts, %u table swaps\n",
	       st.submitted, restarts, restarts);
	expect("stress-good-table-back", set_good_mem(fd), 0);
}

int main(int argc, char **argv)
{
	unsigned int k;
	uint64_t f = 0;
	int fd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1)
		node = argv[1];
	mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	fd = open(node, O_RDWR | O_CLOEXEC);
	result(fd >= 0, "open", "%s: %s", node, strerror(errno));
	if (fd < 0)
		return 1;

	test_before_owner(fd);
	test_unknown_ioctls(fd);
	test_owner(fd);
	test_features(fd);
	test_mem_table(fd);
	test_vring_config(fd);
	test_scsi_ioctls(fd);

	/*
	 * Ring features on for the ring tests, except NOTIFY_ON_EMPTY (no
	 * Linux driver acks it; it would defeat call suppression), which
	 * test_no_event_idx() covers.
	 */
	ioctl(fd, VHOST_GET_FEATURES, &f);
	f &= ~(1ull << VIRTIO_F_NOTIFY_ON_EMPTY);
	expect("set-features-all", ioctl(fd, VHOST_SET_FEATURES, &f), 0);
	test_ctrl_queue(fd);
	test_request_queue(fd);
	for (k = 0; k < BAD_KINDS; k++)
		test_bad_ring(fd, k);
	test_bad_ring_recovery(fd);
	test_stress(fd);
	test_unknown_ioctls(fd);	/* still ENOTTY with rings running */

	/* Stop every ring (the feature change needs it), then no EVENT_IDX. */
	for (k = 0; k < NVQS; k++)
		vring_state(fd, VHOST_GET_VRING_BASE, k, 0);
	test_no_event_idx(fd);
	test_reset_owner(fd);

	/* Close with rings running and kicks pending. */
	cvq_publish(&vqs[3], cvq_cmd(&vqs[3], &(struct virtio_scsi_cmd_resp *){ 0 }, false));
	cvq_kick(&vqs[3]);
	result(close(fd) == 0, "close-with-running-rings", "%s",
	       strerror(errno));
	test_owner_exit();

	printf("host client: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
