// SPDX-License-Identifier: GPL-2.0-only
/*
 * Userspace vhost client for the host module, run inside the test VM as
 * root: it plays both the VMM (ioctls, memory table, eventfds) and the guest
 * driver (it fills the rings itself), against /dev/vhost-scsi-sqcq.
 *
 * It checks every ioctl, with malformed input (the worker ioctls on a device
 * of their own: test_workers()), and the split ring engine:
 * without the TCM fabric the device is a SCSI host with no targets, so
 * commands come back BAD_TARGET, task management BAD_TARGET, SQ/CQ setup
 * FUNCTION_REJECTED and AN queries OK; broken rings must stop (err eventfd)
 * without hurting the kernel.
 *
 * With an LIO target (tests/host/inside.sh builds it on rd_mcp ramdisks:
 * tpgt_1 with LUNs 0 and 1, tpgt_2 with LUN 0, tpgt_3 with a nexus only),
 * mode "scsi" checks the SCSI data path: SET/CLEAR_ENDPOINT and what a
 * bound TPG refuses in configfs; INQUIRY, REPORT LUNS, READ CAPACITY,
 * TEST UNIT READY, missing LUNs and targets; READ/WRITE(10/16) of 512 B ..
 * 1 MiB on four request queues with six requests in flight each, in five
 * descriptor layouts (ANY_LAYOUT, pieces, indirect tables, split headers,
 * a buffer across two memory regions), every byte read compared with what
 * was written; the 8 MiB limit, residuals; malformed requests (short
 * header or response, CDB > 32 bytes, bidirectional, buffers whose memory
 * was unmapped); TMFs; hotplug events (through "$SQCQ_HOOK", which changes
 * configfs), EVENTS_MISSED and the event queue limit; CLEAR_ENDPOINT
 * with I/O in flight (what the queues publish then waits in the rings and
 * is served, good, at the next SET_ENDPOINT), a LUN reset and a LUN
 * unlink with I/O in flight, each request queue on a
 * worker of its own (VHOST_NEW_WORKER/ATTACH_VRING_WORKER, verified I/O,
 * moved back under I/O), a client SIGKILLed and a
 * device closed with I/O in flight.  Mode "hold" keeps a bound device busy
 * until it is killed; mode "io" is a short I/O check for other node names.
 *
 * Output: one "PASS: host <name>" or "FAIL: host <name> (...)" line per
 * check, "# ..." notes, then "host client: N passed, M failed".  Exit
 * status 0 only when nothing failed.
 *
 *   client [NODE]                          (default /dev/vhost-scsi-sqcq)
 *   client scsi NODE FABRIC WWPN LUN_MB    (SQCQ_HOOK: configfs helper)
 *   client hold NODE FABRIC WWPN READYFILE [idle]
 *   client io NODE FABRIC WWPN             (checks named takeover-*)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include <linux/vhost.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#include "../../common/sqcq_uapi.h"
#include "../../common/sqcq_vhost_abi.h"

#ifndef VHOST_F_LOG_ALL
#define VHOST_F_LOG_ALL 26
#endif
#define F_PACKED	34
#define F_ACCESS_PLATFORM	33
#define NVQS		130		/* control, event, 128 request queues */
#define MEM_SIZE	(64u << 20)
#define GBASE		0x100000ull	/* guest-physical address of mem */
#define QNUM		256u
#define VQ_AREA		(64u << 10)	/* per-vq ring area in mem */
#define BUF_OFF		(10u << 20)	/* request buffers start here */
#define BUF_END		(24u << 20)	/* ... and end here (then wrap) */
#define MEM_SPLIT	(12u << 20)	/* region boundary of the 2-region table */

#define REGION(g, s, u) ((struct vhost_memory_region){ \
	.guest_phys_addr = (g), .memory_size = (s), .userspace_addr = (u) })

static int passed, failed;
static const char *node = "/dev/vhost-scsi-sqcq";
static const char *name_prefix = "";	/* "takeover-" in io mode */
static uint8_t *mem;
static size_t buf_next = BUF_OFF;

static void result(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		printf("PASS: host %s%s\n", name_prefix, name);
		passed++;
		return;
	}
	printf("FAIL: host %s%s (", name_prefix, name);
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
	if (buf_next + len > BUF_END)
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
	result((f & (1ull << VHOST_F_LOG_ALL)) && !(f & (1ull << F_PACKED)),
	       "features-log-all-no-packed", "0x%llx",
	       (unsigned long long)f);
	{
		uint64_t base = (uintptr_t)mem;
		int lfd = -1;

		expect("set-log-base-before-owner-eperm",
		       ioctl(fd, VHOST_SET_LOG_BASE, &base), EPERM);
		expect("set-log-fd-before-owner-eperm",
		       ioctl(fd, VHOST_SET_LOG_FD, &lfd), EPERM);
	}
	expect("abi-version-before-owner",
	       ioctl(fd, VHOST_SCSI_GET_ABI_VERSION, &v), 0);
	result(v == 1, "abi-version-is-1", "got %d", v);
	expect("set-mem-table-before-owner-eperm", set_good_mem(fd), EPERM);
	expect("set-vring-num-before-owner-eperm",
	       vring_state(fd, VHOST_SET_VRING_NUM, 0, 128), EPERM);
	expect("set-features-before-owner-eperm",
	       ioctl(fd, VHOST_SET_FEATURES, &f), EPERM);
	{
		uint64_t a[2] = { 1, f };

		expect("set-features-array-before-owner-eperm",
		       ioctl(fd, 0x4008AF83ul, a), EPERM);
	}
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
		{ "set-vring-endian", 0x4008AF13 },
		{ "get-vring-endian", 0x4008AF14 },
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

/*
 * VHOST_GET/SET_FEATURES_ARRAY (QEMU 11 asks with them first): the
 * features as 64-bit words, nothing offered above bit 63, a count over 64
 * words refused, bad pointers EFAULT.
 */
#define GET_FEATURES_ARRAY	0x8008AF83ul
#define SET_FEATURES_ARRAY	0x4008AF83ul
static void test_features_array(int fd, uint64_t offered)
{
	uint64_t a[1 + 4] = { 3, 0, ~0ull, ~0ull, 0x5a5a };

	expect("get-features-array", ioctl(fd, GET_FEATURES_ARRAY, a), 0);
	result(a[1] == offered && !a[2] && !a[3] && a[4] == 0x5a5a,
	       "get-features-array-words",
	       "0x%llx 0x%llx 0x%llx (offered 0x%llx), past the count 0x%llx",
	       (unsigned long long)a[1], (unsigned long long)a[2],
	       (unsigned long long)a[3], (unsigned long long)offered,
	       (unsigned long long)a[4]);
	a[0] = 65;
	expect("get-features-array-count-too-big-einval",
	       ioctl(fd, GET_FEATURES_ARRAY, a), EINVAL);
	a[0] = ~0ull;
	expect("get-features-array-count-huge-einval",
	       ioctl(fd, GET_FEATURES_ARRAY, a), EINVAL);
	expect("get-features-array-bad-pointer-efault",
	       ioctl(fd, GET_FEATURES_ARRAY, (void *)8), EFAULT);
	a[0] = 2, a[1] = offered, a[2] = 1;
	expect("set-features-array-bit-64-refused",
	       ioctl(fd, SET_FEATURES_ARRAY, a), EOPNOTSUPP);
	a[0] = 2, a[1] = offered | (1ull << F_PACKED), a[2] = 0;
	expect("set-features-array-packed-refused",
	       ioctl(fd, SET_FEATURES_ARRAY, a), EOPNOTSUPP);
	a[0] = 2, a[1] = offered, a[2] = 0;
	expect("set-features-array-offered", ioctl(fd, SET_FEATURES_ARRAY, a),
	       0);
	expect("set-features-array-bad-pointer-efault",
	       ioctl(fd, SET_FEATURES_ARRAY, (void *)8), EFAULT);
}

static void test_features(int fd)
{
	uint64_t f, offered = 0;

	ioctl(fd, VHOST_GET_FEATURES, &offered);
	/* Dirty logging without a log base yet: QEMU's order at start. */
	f = offered | (1ull << VHOST_F_LOG_ALL);
	expect("set-features-log-all-without-base",
	       ioctl(fd, VHOST_SET_FEATURES, &f), 0);
	f = offered | (1ull << F_PACKED);
	expect("set-features-packed-refused",
	       ioctl(fd, VHOST_SET_FEATURES, &f), EOPNOTSUPP);
	/* No IOTLB: IOVAs of a vIOMMU guest are refused, never guessed. */
	result(!(offered & (1ull << F_ACCESS_PLATFORM)),
	       "access-platform-not-offered", "features 0x%llx",
	       (unsigned long long)offered);
	f = offered | (1ull << F_ACCESS_PLATFORM);
	expect("set-features-access-platform-refused",
	       ioctl(fd, VHOST_SET_FEATURES, &f), EOPNOTSUPP);
	test_features_array(fd, offered);
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
	a.log_guest_addr = ~0ull - 100;
	expect("vring-addr-log-address-wraps-efault",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), EFAULT);
	a.log_guest_addr = gpa(q.used);
	expect("vring-addr-log-ok", ioctl(fd, VHOST_SET_VRING_ADDR, &a), 0);
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
	{
		uint64_t f = 0;

		ioctl(fd, VHOST_GET_FEATURES, &f);
		f &= ~(1ull << VHOST_F_LOG_ALL);
		expect("set-features-before-start",
		       ioctl(fd, VHOST_SET_FEATURES, &f), 0);
	}
	expect("vring-kick-start", vring_file(fd, VHOST_SET_VRING_KICK, 9, efd),
	       0);
	/* Running: only the used ring's logging may change (QEMU migrating). */
	a.used_user_addr += 4096;
	expect("vring-addr-while-running-ebusy",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), EBUSY);
	a.used_user_addr -= 4096;
	a.flags = 1 << VHOST_VRING_F_LOG;
	expect("vring-addr-log-on-while-running",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), 0);
	a.flags = 0;
	expect("vring-addr-log-off-while-running",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), 0);
	expect("vring-num-while-running-ebusy",
	       vring_state(fd, VHOST_SET_VRING_NUM, 9, 32), EBUSY);
	expect("vring-base-while-running-ebusy",
	       vring_state(fd, VHOST_SET_VRING_BASE, 9, 0), EBUSY);
	{
		uint64_t f = 0;

		ioctl(fd, VHOST_GET_FEATURES, &f);
		f &= ~(1ull << VHOST_F_LOG_ALL | 1ull << VIRTIO_RING_F_INDIRECT_DESC);
		expect("set-features-while-running-ebusy",
		       ioctl(fd, VHOST_SET_FEATURES, &f), EBUSY);
		f |= 1ull << VIRTIO_RING_F_INDIRECT_DESC | 1ull << VHOST_F_LOG_ALL;
		expect("set-features-log-all-on-while-running",
		       ioctl(fd, VHOST_SET_FEATURES, &f), 0);
		f &= ~(1ull << VHOST_F_LOG_ALL);
		expect("set-features-log-all-off-while-running",
		       ioctl(fd, VHOST_SET_FEATURES, &f), 0);
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

/*
 * The dirty log's ioctls (live migration): the log base must hold the
 * bits of every guest address of the memory table and of every logged used
 * ring in user space, checked whenever the base, the table, the features or
 * a ring's log address change; the log eventfd must be an eventfd.
 */
static void test_log_ioctls(int fd)
{
	struct vhost_memory_region r[2] = {
		REGION(GBASE, MEM_SIZE, (uintptr_t)mem),
		/* Its bits lie 2^49 bytes past any base: not in user space. */
		REGION(0xfff0000000000000ull, 0x1000, (uintptr_t)mem),
	};
	struct vhost_vring_addr a;
	uint64_t base, f = 0;
	struct cvq q;
	int pfd[2], lfd, efd = eventfd(0, EFD_CLOEXEC);
	void *log = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	base = 0xffff888000000000ull;
	expect("log-base-kernel-address-efault",
	       ioctl(fd, VHOST_SET_LOG_BASE, &base), EFAULT);
	/* The good table's 2 KiB bitmap would run past the end of user space. */
	base = 0x7ffffffff000ull - 0x100;
	expect("log-base-bitmap-past-user-space-efault",
	       ioctl(fd, VHOST_SET_LOG_BASE, &base), EFAULT);
	expect("log-base-bad-pointer-efault",
	       ioctl(fd, VHOST_SET_LOG_BASE, (void *)8), EFAULT);
	base = (uintptr_t)log;
	expect("log-base-ok", ioctl(fd, VHOST_SET_LOG_BASE, &base), 0);
	ioctl(fd, VHOST_GET_FEATURES, &f);
	f &= ~(1ull << VIRTIO_F_NOTIFY_ON_EMPTY);
	expect("log-all-with-base-ok", ioctl(fd, VHOST_SET_FEATURES, &f), 0);
	expect("mem-table-outside-log-efault", set_mem(fd, 2, r, 0), EFAULT);
	/* No base (QEMU's 0 for an empty log): the table goes in ... */
	base = 0;
	expect("log-base-none-ok", ioctl(fd, VHOST_SET_LOG_BASE, &base), 0);
	expect("mem-table-far-region-without-log-ok", set_mem(fd, 2, r, 0), 0);
	/* ... and then no base can cover it. */
	base = (uintptr_t)log;
	expect("log-base-not-covering-table-efault",
	       ioctl(fd, VHOST_SET_LOG_BASE, &base), EFAULT);
	expect("mem-good-table-again", set_good_mem(fd), 0);
	expect("log-base-ok-again", ioctl(fd, VHOST_SET_LOG_BASE, &base), 0);

	/* A used ring whose bits would lie outside user space. */
	cvq_layout(&q, 10, 64);
	a = (struct vhost_vring_addr){ .index = 10,
		.flags = 1 << VHOST_VRING_F_LOG,
		.desc_user_addr = (uintptr_t)q.desc,
		.avail_user_addr = (uintptr_t)q.avail,
		.used_user_addr = (uintptr_t)q.used,
		.log_guest_addr = 0x7000000000000000ull };
	expect("vring-addr-log-outside-log-efault",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), EFAULT);
	a.log_guest_addr = gpa(q.used);
	expect("vring-addr-log-inside-log-ok",
	       ioctl(fd, VHOST_SET_VRING_ADDR, &a), 0);
	a.flags = 0;
	ioctl(fd, VHOST_SET_VRING_ADDR, &a);

	if (pipe(pfd) == 0) {
		expect("log-fd-not-eventfd-einval",
		       ioctl(fd, VHOST_SET_LOG_FD, &pfd[0]), EINVAL);
		close(pfd[0]);
		close(pfd[1]);
	}
	lfd = 9999;
	expect("log-fd-bad-fd-ebadf", ioctl(fd, VHOST_SET_LOG_FD, &lfd), EBADF);
	expect("log-fd-bad-pointer-efault",
	       ioctl(fd, VHOST_SET_LOG_FD, (void *)8), EFAULT);
	expect("log-fd-eventfd-ok", ioctl(fd, VHOST_SET_LOG_FD, &efd), 0);
	lfd = -1;
	expect("log-fd-none-ok", ioctl(fd, VHOST_SET_LOG_FD, &lfd), 0);

	f &= ~(1ull << VHOST_F_LOG_ALL);
	expect("log-all-off-ok", ioctl(fd, VHOST_SET_FEATURES, &f), 0);
	base = 0;
	ioctl(fd, VHOST_SET_LOG_BASE, &base);
	munmap(log, 8192);
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
	/* A flag, as in-tree vhost-scsi: any non-zero value reads back 1. */
	result(ev == 1, "events-missed-roundtrip", "got %u", ev);
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
	/* A zeroed setup payload: refused, with the setup response (cut to
	 * the buffer) saying why. */
	{
		const struct sqcq_setup_in *si = (const void *)setup_in;

		result(cvq_take_used(q, h1, SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE, why,
				     sizeof(why)) &&
		       si->response == SQCQ_VIRTIO_SCSI_S_FUNCTION_REJECTED &&
		       si->resp.magic == SQCQ_MAGIC &&
		       si->resp.status == SQCQ_S_BAD_MAGIC,
		       "ctrl-sqcq-setup-function-rejected",
		       "%s resp %u magic 0x%x status %u", why, si->response,
		       si->resp.magic, si->resp.status);
	}
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
		uint8_t *out = buf_alloc(8);
		struct virtio_scsi_cmd_resp *resp = buf_alloc(sizeof(*resp));
		uint16_t in = cvq_desc(q, gpa(resp), sizeof(*resp),
				       VRING_DESC_F_WRITE, 0);
		uint16_t h = cvq_desc(q, gpa(out), 8, VRING_DESC_F_NEXT, in);

		resp->response = 0xee;
		cvq_publish(q, h);
		cvq_kick(q);
		ok = cvq_wait_used(q, q->avail_idx, 5000);
		result(ok && cvq_take_used(q, h, sizeof(*resp), why,
					   sizeof(why)) &&
		       resp->response == VIRTIO_SCSI_S_FAILURE,
		       "req-short-request-failure", "ok %d %s resp %u", ok, why,
		       resp->response);
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

#define WRAP_VQ		24
#define WRAP_LOW_OFF	(9u << 20)		/* guest-physical 0 .. 64 KiB */
#define WRAP_HIGH_OFF	(WRAP_LOW_OFF + 65536)	/* the last 64 KiB of 2^64 */

/*
 * A descriptor running past guest-physical 2^64-1 must not go on at
 * guest-physical 0.  With one region ending at 2^64-1 and one starting at
 * 0, a request header split across the wrap would otherwise be read from
 * both and answered; the host must treat it as outside guest memory.
 */
static void test_gpa_wrap(int fd)
{
	const uint64_t top = 0ull - 65536;
	struct vhost_memory_region r[3] = {
		REGION(0, 65536, (uintptr_t)mem + WRAP_LOW_OFF),
		REGION(GBASE, MEM_SIZE, (uintptr_t)mem),
		REGION(top, 65536, (uintptr_t)mem + WRAP_HIGH_OFF),
	};
	struct virtio_scsi_cmd_req hdr = { .lun = { 1, 1, 0x40, 0 } };
	struct cvq *q = &vqs[WRAP_VQ];
	struct virtio_scsi_cmd_resp *rsp;
	uint16_t h;
	bool err;

	expect("gpa-wrap-table-with-region-at-2^64", set_mem(fd, 3, r, 0), 0);
	expect("gpa-wrap-start", cvq_start(fd, q, WRAP_VQ, true), 0);
	/* 16 bytes at the very top, the other 35 at guest-physical 0. */
	hdr.tag = 77;
	memcpy(mem + WRAP_HIGH_OFF + 65536 - 16, &hdr, 16);
	memcpy(mem + WRAP_LOW_OFF, (uint8_t *)&hdr + 16, sizeof(hdr) - 16);
	rsp = buf_alloc(sizeof(*rsp));
	h = cvq_desc(q, gpa(rsp), sizeof(*rsp), VRING_DESC_F_WRITE, 0);
	h = cvq_desc(q, 0ull - 16, sizeof(hdr), VRING_DESC_F_NEXT, h);
	cvq_publish(q, h);
	cvq_kick(q);
	err = efd_take(q->err, 5000) >= 1;
	result(err && load16(&q->used->idx) == 0,
	       "gpa-wrap-descriptor-refused",
	       "err %d used %u response %u", err, load16(&q->used->idx),
	       rsp->response);
	vring_state(fd, VHOST_GET_VRING_BASE, WRAP_VQ, 0);
	expect("gpa-wrap-good-table-again", set_good_mem(fd), 0);
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

/* ================================================================== */
/* With an LIO target: the SCSI data path (modes scsi, hold, io)       */
/* ================================================================== */

/*
 * Memory of these modes: rings and small buffers below DATA_OFF as above,
 * then the I/O engine's slots, then one area for single large buffers,
 * and at the top a range that the fault test unmaps.  The memory table
 * has two regions whose boundary cuts through one slot's data buffer.
 */
#define DATA_OFF	(24u << 20)	/* engine slots */
#define BIG_OFF		(50u << 20)	/* large single buffers (up to 9 MiB) */
#define HOLE_OFF	(62u << 20)	/* unmapped by the fault test */
#define HOLE_LEN	(64u << 10)
#define MEM_SPLIT2	(44u << 20)	/* region boundary, inside slot 19 */
#define NQ		4		/* request queues the engine drives */
#define NSLOT		6		/* requests in flight per queue */
#define DPS		32		/* ring descriptors each slot owns */
#define SLOT_SZ		((1u << 20) + (16u << 10))
#define WIN		(1u << 20)	/* disk bytes each slot owns */
#define SECT		512u
#define SYNC_VQ		6		/* one command at a time, main thread */
#define HDR_SZ		((uint32_t)sizeof(struct virtio_scsi_cmd_req))
#define RSP_SZ		((uint32_t)sizeof(struct virtio_scsi_cmd_resp))
#define HANG_MS		20000u		/* no answer this long: hung */
#define MAXDISKS	4
#define DBG_DIR		"/sys/kernel/debug/vhost_scsi_sqcq"
#define CFS_DIR		"/sys/kernel/config/target"

static const char *fabric = "vhost_sqcq";
static const char *wwpn = "";
static int scsi_fd = -1;
static uint64_t tag_seq = 1;

/* A LUN the engine reads and writes, with what it should hold. */
struct disk {
	uint8_t target;
	uint16_t lun;
	uint64_t bytes;
	uint8_t *shadow;	/* expected content */
	uint8_t *valid;		/* per sector: shadow is known */
};

static struct disk disks[MAXDISKS];
static unsigned int ndisks;

struct seg {
	uint64_t a;
	uint32_t len;
	bool w;
};

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void fill_random(uint8_t *p, size_t len, uint64_t *s)
{
	size_t i;
	uint64_t v;

	for (i = 0; i + 8 <= len; i += 8) {
		v = rnd(s);
		memcpy(p + i, &v, 8);
	}
	if (i < len) {
		v = rnd(s);
		memcpy(p + i, &v, len - i);
	}
}

static void put_be(uint8_t *p, uint64_t v, unsigned int bytes)
{
	while (bytes--) {
		p[bytes] = v & 0xff;
		v >>= 8;
	}
}

static uint64_t get_be(const uint8_t *p, unsigned int bytes)
{
	uint64_t v = 0;

	while (bytes--)
		v = v << 8 | *p++;
	return v;
}

static void lun_encode(uint8_t lun[8], uint8_t target, uint16_t l)
{
	memset(lun, 0, 8);
	lun[0] = 1;
	lun[1] = target;
	lun[2] = 0x40 | ((l >> 8) & 0x3f);
	lun[3] = l & 0xff;
}

static void cdb_rw(uint8_t *cdb, bool write, bool c16, uint64_t lba,
		   uint32_t nsec)
{
	memset(cdb, 0, VIRTIO_SCSI_CDB_SIZE);
	if (c16) {
		cdb[0] = write ? 0x8a : 0x88;
		put_be(cdb + 2, lba, 8);
		put_be(cdb + 10, nsec, 4);
	} else {
		cdb[0] = write ? 0x2a : 0x28;
		put_be(cdb + 2, lba, 4);
		put_be(cdb + 7, nsec, 2);
	}
}

/* Sense key and additional sense code, fixed or descriptor format. */
static void sense_of(const struct virtio_scsi_cmd_resp *r, uint8_t *key,
		     uint8_t *asc)
{
	const uint8_t *s = r->sense;

	if ((s[0] & 0x7f) >= 0x72) {
		*key = s[1] & 0xf;
		*asc = s[2];
	} else {
		*key = s[2] & 0xf;
		*asc = s[12];
	}
}

/* Write @n segments as one chain into @d, whose first entry is @base. */
static void chain_fill(struct vring_desc *d, unsigned int base,
		       const struct seg *sg, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		d[i].addr = sg[i].a;
		d[i].len = sg[i].len;
		d[i].flags = (sg[i].w ? VRING_DESC_F_WRITE : 0) |
			     (i + 1 < n ? VRING_DESC_F_NEXT : 0);
		d[i].next = base + i + 1;
	}
}

/* ---- helpers around the kernel: configfs, debugfs, /proc, hooks ---- */

struct tio {
	int fd;
	unsigned long cmd;
	void *arg;
	int ret, err;
};

static void *tio_run(void *a)
{
	struct tio *t = a;

	t->ret = ioctl(t->fd, t->cmd, t->arg);
	t->err = errno;
	return NULL;
}

/*
 * An ioctl that may block in the kernel (endpoint changes wait for the
 * requests in flight): a hang becomes a FAIL line and the end of the run.
 */
static int timed_ioctl(int fd, unsigned long cmd, void *arg, unsigned int ms,
		       const char *name)
{
	struct tio t = { .fd = fd, .cmd = cmd, .arg = arg, .ret = -1 };
	struct timespec dl;
	pthread_t th;

	if (pthread_create(&th, NULL, tio_run, &t)) {
		errno = EAGAIN;
		return -1;
	}
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	if (pthread_timedjoin_np(th, NULL, &dl)) {
		result(false, name, "ioctl still blocked after %u ms", ms);
		printf("host client: %d passed, %d failed (gave up: hung ioctl)\n",
		       passed, failed);
		fflush(stdout);
		_exit(1);
	}
	errno = t.err;
	return t.ret;
}

static struct vhost_scsi_target ep_target(const char *w)
{
	struct vhost_scsi_target t;

	memset(&t, 0, sizeof(t));
	snprintf(t.vhost_wwpn, sizeof(t.vhost_wwpn), "%s", w);
	return t;
}

static int set_endpoint(int fd, const char *w, const char *name)
{
	struct vhost_scsi_target t = ep_target(w);

	return timed_ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t, 30000, name);
}

static int clear_endpoint(int fd, const char *w, const char *name)
{
	struct vhost_scsi_target t = ep_target(w);

	return timed_ioctl(fd, VHOST_SCSI_CLEAR_ENDPOINT, &t, 60000, name);
}

static void tpg_path(char *p, size_t len, unsigned int tpgt, const char *leaf)
{
	snprintf(p, len, CFS_DIR "/%s/%s/tpgt_%u%s%s", fabric, wwpn, tpgt,
		 leaf ? "/" : "", leaf ? leaf : "");
}

/* Write a configfs attribute in one write(2): 0, or -1 and errno. */
static int cfs_write(const char *path, const char *val)
{
	ssize_t n;
	int f, e;

	f = open(path, O_WRONLY);
	if (f < 0)
		return -1;
	n = write(f, val, strlen(val));
	e = errno;
	close(f);
	errno = e;
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

static bool read_file(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int f;

	f = open(path, O_RDONLY);
	if (f < 0)
		return false;
	n = read(f, buf, len - 1);
	close(f);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* Number of devN directories in debugfs, and the one @pid owns. */
static int dbg_devs(pid_t pid, char *dir, size_t dirlen)
{
	char path[512], buf[4096];
	struct dirent *de;
	int n = 0, owner;
	DIR *d;

	d = opendir(DBG_DIR);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "dev", 3))
			continue;
		n++;
		snprintf(path, sizeof(path), DBG_DIR "/%s/queues", de->d_name);
		if (dir && read_file(path, buf, sizeof(buf)) &&
		    sscanf(buf, "owner: %d", &owner) == 1 && owner == pid)
			snprintf(dir, dirlen, DBG_DIR "/%s", de->d_name);
	}
	closedir(d);
	return n;
}

/* Requests counted on vq @vq in the debugfs "queues" file of @dir. */
static unsigned long long dbg_vq_requests(const char *dir, unsigned int vq)
{
	char path[600], buf[16384], *line, *save = NULL;
	unsigned long long req = 0;
	unsigned int i, num;
	int run, brk;
	char mode[16];

	snprintf(path, sizeof(path), "%s/queues", dir);
	if (!read_file(path, buf, sizeof(buf)))
		return 0;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (sscanf(line, "%u %u %d %d %15s %llu", &i, &num, &run, &brk,
			   mode, &req) == 6 && i == vq)
			return req;
	return 0;
}

/*
 * The value of the line "@key: VALUE" in debugfs file @file ("queues",
 * "targets") of this device, into @val; false if there is no such line.
 */
static bool dbg_dev_str(const char *file, const char *key, char *val,
			size_t len)
{
	char dir[512] = "", path[600], buf[16384], *p;
	size_t n = strlen(key);

	dbg_devs(getpid(), dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (!dir[0] || !read_file(path, buf, sizeof(buf)))
		return false;
	for (p = buf; p; p = strchr(p, '\n'), p += !!p)
		if (!strncmp(p, key, n) && p[n] == ':' && p[n + 1] == ' ') {
			snprintf(val, len, "%.*s", (int)strcspn(p + n + 2, "\n"),
				 p + n + 2);
			return true;
		}
	return false;
}

/* A number of dbg_dev_str(), -1 without the line. */
static long long dbg_dev_key(const char *file, const char *key)
{
	char v[64];

	return dbg_dev_str(file, key, v, sizeof(v)) ? strtoll(v, NULL, 0) : -1;
}

/* How many tasks in directory @dir (/proc or /proc/N/task) are named @want. */
static int tasks_named(const char *dir, const char *want)
{
	char path[300], comm[32];
	struct dirent *de;
	int n = 0;
	DIR *d;

	d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "%s/%s/comm", dir, de->d_name);
		if (!read_file(path, comm, sizeof(comm)))
			continue;
		comm[strcspn(comm, "\n")] = '\0';
		n += !strcmp(comm, want);
	}
	closedir(d);
	return n;
}

/*
 * Is a worker thread of the device owned by @pid alive?  A kthread (listed
 * in /proc), or where the kernel has vhost_task a thread of @pid itself.
 */
static bool worker_alive(pid_t pid)
{
	char want[32], tasks[64];

	/* The name is cut to TASK_COMM_LEN - 1 characters. */
	snprintf(want, sizeof(want), "vhost-sqcq-%d", pid);
	want[15] = '\0';
	snprintf(tasks, sizeof(tasks), "/proc/%d/task", pid);
	return tasks_named("/proc", want) + tasks_named(tasks, want) > 0;
}

/*
 * Worker threads of the devices this process owns: *@own of them threads
 * of this process (vhost_task), *@kt kthreads.  Returns the sum.
 */
static int my_workers(int *own, int *kt)
{
	char want[32], tasks[64];
	int a, b;

	snprintf(want, sizeof(want), "vhost-sqcq-%d", getpid());
	want[15] = '\0';
	snprintf(tasks, sizeof(tasks), "/proc/%d/task", getpid());
	a = tasks_named(tasks, want);
	b = tasks_named("/proc", want);
	if (own)
		*own = a;
	if (kt)
		*kt = b;
	return a + b;
}

/* Wait up to 3 s until this process has @n workers; false if not. */
static bool my_workers_are(int n)
{
	int i;

	for (i = 0; i < 300; i++) {
		if (my_workers(NULL, NULL) == n)
			return true;
		usleep(10000);
	}
	return false;
}

static int new_worker(int fd, unsigned int *id)
{
	struct vhost_worker_state ws = { .worker_id = ~0u };
	int ret = ioctl(fd, VHOST_NEW_WORKER, &ws);

	*id = ws.worker_id;
	return ret;
}

static int free_worker(int fd, unsigned int id)
{
	struct vhost_worker_state ws = { .worker_id = id };

	return ioctl(fd, VHOST_FREE_WORKER, &ws);
}

static int attach_worker(int fd, unsigned int index, unsigned int id)
{
	struct vhost_vring_worker vw = { .index = index, .worker_id = id };

	return ioctl(fd, VHOST_ATTACH_VRING_WORKER, &vw);
}

/* The id of the worker of vq @index, or ~0u with errno set. */
static unsigned int vring_worker(int fd, unsigned int index)
{
	struct vhost_vring_worker vw = { .index = index, .worker_id = ~0u };

	if (ioctl(fd, VHOST_GET_VRING_WORKER, &vw))
		return ~0u;
	return vw.index == index ? vw.worker_id : ~0u - 1;
}

/* CPUs the kernel could bring up (/sys/devices/system/cpu/possible). */
static int possible_cpus(void)
{
	char buf[256], *p = buf;
	int n = 0, a, b, k;

	if (!read_file("/sys/devices/system/cpu/possible", buf, sizeof(buf)))
		return -1;
	while (sscanf(p, "%d%n", &a, &k) == 1) {
		p += k;
		b = a;
		if (*p == '-' && sscanf(p + 1, "%d%n", &b, &k) == 1)
			p += 1 + k;
		n += b - a + 1;
		if (*p != ',')
			break;
		p++;
	}
	return n;
}

/*
 * Kthread workers (kernels without vhost_task) count against no limit of
 * the owner's, so the module bounds them per owner, all its devices
 * together: NVQS + 2 x the possible CPUs.  This process has @have
 * workers (a device at its NVQS, the main device's default one): a second
 * device's SET_OWNER and NEW_WORKERs get to the bound, then EAGAIN; once
 * that device is closed its count is free again.
 */
static void test_owner_kthreads(int have)
{
	int cap = NVQS + 2 * possible_cpus(), fd2, got, err, kt;
	unsigned int id, n = 0;

	fd2 = open(node, O_RDWR | O_CLOEXEC);
	if (fd2 < 0 || ioctl(fd2, VHOST_SET_OWNER)) {
		result(false, "owner-kthreads-second-device", "%s", strerror(errno));
		if (fd2 >= 0)
			close(fd2);
		return;
	}
	while (n < NVQS && !new_worker(fd2, &id))
		n++;
	err = errno;
	my_workers(NULL, &kt);
	got = have + 1 + (int)n;
	printf("# owner kthreads: %d before, %u more on a second device, then %s (%d kthreads of ours)\n",
	       have, n + 1, strerror(err), kt);
	result(got == cap && kt == cap && err == EAGAIN,
	       "owner-kthreads-bounded-eagain",
	       "%d workers (%d kthreads), wanted %d (NVQS + 2 x %d CPUs), then %s",
	       got, kt, cap, possible_cpus(), strerror(err));
	close(fd2);
	result(my_workers_are(have), "owner-kthreads-closed-device-stops",
	       "%d workers, wanted %d", my_workers(NULL, NULL), have);
	fd2 = open(node, O_RDWR | O_CLOEXEC);
	expect("owner-kthreads-free-again-after-close",
	       fd2 >= 0 ? ioctl(fd2, VHOST_SET_OWNER) : -1, 0);
	if (fd2 >= 0)
		close(fd2);
	my_workers_are(have);
}

/*
 * The worker ioctls (upstream's VHOST_NEW_WORKER, FREE_WORKER,
 * ATTACH/GET_VRING_WORKER) on a device of its own: EINVAL before
 * SET_OWNER, EPERM for another process, distinct ids, threads like the
 * default worker's (of this process where the kernel has vhost_task),
 * attachments reported, FREE refused while attached (and for the default
 * worker and unknown ids), bad indices ENOBUFS, bad pointers EFAULT
 * without a thread left behind, at most NVQS workers, and RESET_OWNER and
 * close stop every one.
 */
static void test_workers(void)
{
	unsigned int id[3], extra[NVQS], i, n;
	int fd, base, own0, kt0, own, kt, status, err;
	char name[80];
	bool ok;
	pid_t pid;

	fd = open(node, O_RDWR | O_CLOEXEC);
	result(fd >= 0, "workers-open", "%s", strerror(errno));
	if (fd < 0)
		return;
	expect("new-worker-before-owner-einval",
	       new_worker(fd, &id[0]), EINVAL);
	expect("get-vring-worker-before-owner-einval",
	       vring_worker(fd, 0) == ~0u ? -1 : 0, EINVAL);
	expect("attach-vring-worker-before-owner-einval",
	       attach_worker(fd, 2, 0), EINVAL);
	expect("free-worker-before-owner-einval", free_worker(fd, 0), EINVAL);

	base = my_workers(&own0, &kt0);
	expect("workers-set-owner", ioctl(fd, VHOST_SET_OWNER), 0);
	result(my_workers_are(base + 1), "workers-default-started",
	       "%d workers, wanted %d", my_workers(NULL, NULL), base + 1);
	for (i = 0, ok = true; i < NVQS; i++)
		ok &= vring_worker(fd, i) == 0;
	result(ok, "get-vring-worker-every-vq-on-default-0", "vq %u", i);

	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "new-worker-%u", i);
		expect(name, new_worker(fd, &id[i]), 0);
	}
	result(id[0] != id[1] && id[1] != id[2] && id[0] != id[2] &&
	       id[0] && id[1] && id[2] && id[0] < NVQS && id[1] < NVQS &&
	       id[2] < NVQS, "new-worker-distinct-ids",
	       "ids %u %u %u", id[0], id[1], id[2]);
	result(my_workers_are(base + 4), "new-worker-threads-started",
	       "%d workers, wanted %d", my_workers(NULL, NULL), base + 4);
	/* The same kind of thread as the default worker. */
	my_workers(&own, &kt);
	result((own == own0 + 4 && kt == kt0) || (kt == kt0 + 4 && own == own0),
	       "new-worker-threads-like-default", "own %d->%d kthreads %d->%d",
	       own0, own, kt0, kt);
	printf("# workers are %s\n", own > own0 ? "threads of the owner (vhost_task)" :
	       "kthreads in the owner's cgroups");
	/* inside.sh says whether the kernel has vhost_task (kallsyms). */
	if (getenv("SQCQ_VHOST_TASK"))
		result(own == own0 + 4 && kt == kt0,
		       "new-worker-threads-of-the-owner",
		       "expected vhost_task threads: own %d->%d kthreads %d->%d",
		       own0, own, kt0, kt);

	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "attach-vring-worker-vq%u", 2 + i);
		expect(name, attach_worker(fd, 2 + i, id[i]), 0);
	}
	result(vring_worker(fd, 2) == id[0] && vring_worker(fd, 3) == id[1] &&
	       vring_worker(fd, 4) == id[2] && vring_worker(fd, 5) == 0 &&
	       vring_worker(fd, 0) == 0, "get-vring-worker-reports-attachment",
	       "vq2 %u vq3 %u vq4 %u vq5 %u", vring_worker(fd, 2),
	       vring_worker(fd, 3), vring_worker(fd, 4), vring_worker(fd, 5));
	expect("attach-vring-worker-same-again", attach_worker(fd, 2, id[0]), 0);

	expect("free-worker-attached-ebusy", free_worker(fd, id[0]), EBUSY);
	expect("free-worker-default-ebusy", free_worker(fd, 0), EBUSY);
	expect("free-worker-bogus-enodev", free_worker(fd, 12345), ENODEV);
	expect("free-worker-max-enodev", free_worker(fd, ~0u), ENODEV);
	expect("free-worker-unused-slot-enodev", free_worker(fd, NVQS - 1),
	       ENODEV);
	expect("attach-vring-worker-bad-index-enobufs",
	       attach_worker(fd, NVQS, id[0]), ENOBUFS);
	expect("attach-vring-worker-huge-index-enobufs",
	       attach_worker(fd, ~0u, id[0]), ENOBUFS);
	expect("attach-vring-worker-unknown-id-enodev",
	       attach_worker(fd, 5, 12345), ENODEV);
	expect("attach-vring-worker-unused-slot-enodev",
	       attach_worker(fd, 5, NVQS - 1), ENODEV);
	vring_worker(fd, NVQS);
	err = errno;
	result(vring_worker(fd, NVQS) == ~0u && err == ENOBUFS,
	       "get-vring-worker-bad-index-enobufs", "errno %s", strerror(err));
	expect("new-worker-bad-pointer-efault",
	       ioctl(fd, VHOST_NEW_WORKER, NULL), EFAULT);
	expect("free-worker-bad-pointer-efault",
	       ioctl(fd, VHOST_FREE_WORKER, NULL), EFAULT);
	expect("attach-vring-worker-bad-pointer-efault",
	       ioctl(fd, VHOST_ATTACH_VRING_WORKER, NULL), EFAULT);
	expect("get-vring-worker-bad-pointer-efault",
	       ioctl(fd, VHOST_GET_VRING_WORKER, NULL), EFAULT);
	result(my_workers_are(base + 4), "new-worker-efault-leaves-no-thread",
	       "%d workers, wanted %d", my_workers(NULL, NULL), base + 4);

	/* A forked child shares the fd but not the mm: not the owner. */
	pid = fork();
	if (pid == 0) {
		unsigned int x;
		int bad = 0;

		if (new_worker(fd, &x) != -1 || errno != EPERM)
			bad |= 1;
		if (free_worker(fd, id[2]) != -1 || errno != EPERM)
			bad |= 2;
		if (attach_worker(fd, 4, 0) != -1 || errno != EPERM)
			bad |= 4;
		if (vring_worker(fd, 4) != ~0u || errno != EPERM)
			bad |= 8;
		_exit(bad);
	}
	waitpid(pid, &status, 0);
	result(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "workers-non-owner-child-eperm", "child status 0x%x", status);
	result(vring_worker(fd, 4) == id[2], "workers-non-owner-changed-nothing",
	       "vq4 on %u", vring_worker(fd, 4));

	/* Moved back: the old worker is unused and can go, once. */
	expect("attach-vring-worker-back-to-default", attach_worker(fd, 2, 0), 0);
	result(vring_worker(fd, 2) == 0, "get-vring-worker-back-on-default",
	       "vq2 on %u", vring_worker(fd, 2));
	expect("free-worker-detached", free_worker(fd, id[0]), 0);
	expect("free-worker-twice-enodev", free_worker(fd, id[0]), ENODEV);
	result(my_workers_are(base + 3), "free-worker-thread-gone",
	       "%d workers, wanted %d", my_workers(NULL, NULL), base + 3);

	/* At most NVQS per device, the default one and id[1], id[2] included. */
	for (n = 0; n < NVQS; n++)
		if (new_worker(fd, &extra[n]))
			break;
	err = errno;
	result(n == NVQS - 3 && err == ENOSPC, "new-worker-limit-nvqs-enospc",
	       "%u more created (wanted %u), then %s", n, NVQS - 3,
	       strerror(err));
	result(my_workers_are(base + 3 + (int)n), "new-worker-limit-threads",
	       "%d workers, wanted %d", my_workers(NULL, NULL), base + 3 + n);
	for (i = 0, ok = true; i < n && i < 8; i++)
		ok &= attach_worker(fd, 6 + i, extra[i]) == 0;
	result(ok, "attach-vring-worker-extra", "%s", strerror(errno));
	if (kt > kt0)
		test_owner_kthreads(base + 3 + (int)n);

	expect("workers-reset-owner", ioctl(fd, VHOST_RESET_OWNER), 0);
	result(my_workers_are(base), "reset-owner-stops-every-worker",
	       "%d workers, wanted %d", my_workers(NULL, NULL), base);
	expect("workers-set-owner-again", ioctl(fd, VHOST_SET_OWNER), 0);
	result(vring_worker(fd, 3) == 0 && vring_worker(fd, 6) == 0,
	       "reset-owner-every-vq-back-on-default", "vq3 %u vq6 %u",
	       vring_worker(fd, 3), vring_worker(fd, 6));
	expect("new-worker-after-reset", new_worker(fd, &id[0]), 0);
	expect("attach-vring-worker-after-reset", attach_worker(fd, 3, id[0]), 0);
	close(fd);
	result(my_workers_are(base), "close-stops-every-worker",
	       "%d workers, wanted %d", my_workers(NULL, NULL), base);
}

/*
 * Run "$SQCQ_HOOK ARGS" (inside.sh --hook: the configfs helpers of
 * tests/lib/target.sh); true when it exited 0.
 */
static bool hook(const char *fmt, ...)
{
	const char *h = getenv("SQCQ_HOOK");
	char args[512], cmd[1024];
	va_list ap;
	int st;

	if (!h)
		return false;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "%s %s", h, args);
	fflush(stdout);
	st = system(cmd);
	return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void msleep(unsigned int ms)
{
	usleep(ms * 1000);
}

/*
 * Unlink LUN @lun of TPG @tpgt from its backstore and link it again, @n
 * times: 2 @n hotplug events for a bound device.  Done here rather than
 * by a hook: rm and ln cost two execs a round, more than a second on the
 * sanitizer kernel.  configfs resolves a link's target from the caller's
 * working directory, so the target is made absolute first.
 */
static bool relink_lun(unsigned int tpgt, unsigned int lun, unsigned int n)
{
	const char *cfs = getenv("SQCQ_TARGET_CFS");
	char link[512], *target;
	unsigned int i;
	bool ok = true;

	snprintf(link, sizeof(link), "%s/%s/%s/tpgt_%u/lun/lun_%u/backstore",
		 cfs && *cfs ? cfs : "/sys/kernel/config/target", fabric, wwpn,
		 tpgt, lun);
	target = realpath(link, NULL);
	if (!target) {
		printf("# relink: %s: %s\n", link, strerror(errno));
		return false;
	}
	for (i = 0; i < n && ok; i++) {
		ok = !unlink(link) && !symlink(target, link);
		if (!ok)
			printf("# relink: round %u of %u: %s\n", i + 1, n,
			       strerror(errno));
	}
	free(target);
	return ok;
}

/* ---- the device, set up as QEMU does ---- */

/*
 * Open @path, become the owner, ack the offered features (HOTPLUG
 * included, NOTIFY_ON_EMPTY not), set the two-region memory table, start
 * the control, event and request queues 2..SYNC_VQ, and bind @bind_wwpn
 * (NULL: do not bind).  Returns the fd or -1 with @why filled in.
 */
static int scsi_dev_open(const char *path, const char *bind_wwpn, char *why,
			 size_t whylen)
{
	struct vhost_memory_region r[2] = {
		REGION(GBASE, MEM_SPLIT2, (uintptr_t)mem),
		REGION(GBASE + MEM_SPLIT2, MEM_SIZE - MEM_SPLIT2,
		       (uintptr_t)mem + MEM_SPLIT2),
	};
	uint64_t f = 0;
	unsigned int i;
	int fd;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, whylen, "open %s: %s", path, strerror(errno));
		return -1;
	}
	if (ioctl(fd, VHOST_SET_OWNER) || ioctl(fd, VHOST_GET_FEATURES, &f)) {
		snprintf(why, whylen, "owner/features: %s", strerror(errno));
		goto err;
	}
	if (!(f & (1ull << VIRTIO_SCSI_F_HOTPLUG))) {
		snprintf(why, whylen, "HOTPLUG not offered (0x%llx)",
			 (unsigned long long)f);
		goto err;
	}
	/* As QEMU: dirty logging only while it migrates. */
	f &= ~(1ull << VIRTIO_F_NOTIFY_ON_EMPTY | 1ull << VHOST_F_LOG_ALL);
	if (ioctl(fd, VHOST_SET_FEATURES, &f) || set_mem(fd, 2, r, 0)) {
		snprintf(why, whylen, "features/mem table: %s", strerror(errno));
		goto err;
	}
	for (i = 0; i <= SYNC_VQ; i++) {
		if (cvq_start(fd, &vqs[i], i, true)) {
			snprintf(why, whylen, "vq %u: %s", i, strerror(errno));
			goto err;
		}
	}
	if (bind_wwpn) {
		struct vhost_scsi_target t = ep_target(bind_wwpn);

		if (ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t)) {
			snprintf(why, whylen, "SET_ENDPOINT %s: %s", bind_wwpn,
				 strerror(errno));
			goto err;
		}
	}
	return fd;
err:
	close(fd);
	return -1;
}

/* ---- one request at a time (main thread, SYNC_VQ and the control vq) ---- */

/*
 * Submit @sg as one request on @q and wait for its used entry.  False on
 * timeout (the queue is restarted afresh) or a wrong used id.
 */
static bool sync_run(struct cvq *q, const struct seg *sg, unsigned int n,
		     bool indirect, uint32_t *ulen, unsigned int ms)
{
	struct vring_used_elem *e;
	uint16_t head = 0, next = 0;
	unsigned int i;

	if (indirect) {
		struct vring_desc *t = buf_alloc(n * sizeof(*t));

		chain_fill(t, 0, sg, n);
		head = cvq_desc(q, gpa(t), n * sizeof(*t),
				VRING_DESC_F_INDIRECT, 0);
	} else {
		for (i = n; i-- > 0;) {
			next = cvq_desc(q, sg[i].a, sg[i].len,
					(sg[i].w ? VRING_DESC_F_WRITE : 0) |
					(i + 1 < n ? VRING_DESC_F_NEXT : 0), next);
		}
		head = next;
	}
	cvq_publish(q, head);
	cvq_kick(q);
	*ulen = 0;
	if (!cvq_wait_used(q, q->avail_idx, ms)) {
		printf("# vq %u: no answer in %u ms, restarting it\n", q->idx,
		       ms);
		vring_state(scsi_fd, VHOST_GET_VRING_BASE, q->idx, 0);
		cvq_start(scsi_fd, q, q->idx, true);
		return false;
	}
	e = &q->used->ring[q->used_seen % q->num];
	q->used_seen++;
	*ulen = e->len;
	return e->id == head;
}

struct sres {
	struct virtio_scsi_cmd_resp r;
	uint32_t used;
	bool done;
};

/* A SCSI command with data at guest address @dgpa (@din: data-in). */
static bool scsi_cmd(uint8_t target, uint16_t lun, const uint8_t *cdb,
		     unsigned int cdblen, uint64_t dgpa, uint32_t dlen,
		     bool din, struct sres *res)
{
	struct virtio_scsi_cmd_req *req = buf_alloc(HDR_SZ);
	struct virtio_scsi_cmd_resp *rsp = buf_alloc(RSP_SZ);
	struct seg sg[4];
	unsigned int n = 0;

	lun_encode(req->lun, target, lun);
	req->tag = tag_seq++;
	memcpy(req->cdb, cdb, cdblen);
	memset(rsp, 0xee, RSP_SZ);
	sg[n++] = (struct seg){ gpa(req), HDR_SZ, false };
	if (dlen && !din)
		sg[n++] = (struct seg){ dgpa, dlen, false };
	sg[n++] = (struct seg){ gpa(rsp), RSP_SZ, true };
	if (dlen && din)
		sg[n++] = (struct seg){ dgpa, dlen, true };
	res->done = sync_run(&vqs[SYNC_VQ], sg, n, false, &res->used, 10000);
	memcpy(&res->r, rsp, RSP_SZ);
	return res->done;
}

static bool tur(uint8_t target, uint16_t lun, struct sres *res)
{
	static const uint8_t cdb[6] = { 0x00 };

	return scsi_cmd(target, lun, cdb, 6, 0, 0, false, res);
}

static bool good(const struct sres *s)
{
	return s->done && s->r.response == VIRTIO_SCSI_S_OK &&
	       s->r.status == 0;
}

static const char *sres_str(const struct sres *s)
{
	static char b[160];
	uint8_t key = 0, asc = 0;

	sense_of(&s->r, &key, &asc);
	snprintf(b, sizeof(b),
		 "done %d used %u response %u status 0x%x resid %u sense_len %u key 0x%x asc 0x%x",
		 s->done, s->used, s->r.response, s->r.status, s->r.resid,
		 s->r.sense_len, key, asc);
	return b;
}

/* TEST UNIT READY until GOOD (unit attentions are reported once each). */
static bool clear_ua(uint8_t target, uint16_t lun)
{
	struct sres s;
	int i;

	for (i = 0; i < 8; i++) {
		if (!tur(target, lun, &s))
			return false;
		if (good(&s))
			return true;
	}
	return false;
}

static unsigned int live_mask;	/* disks that still exist */

static bool clear_ua_all(void)
{
	bool ok = true;
	unsigned int i;

	for (i = 0; i < ndisks; i++)
		if (live_mask & (1u << i))
			ok &= clear_ua(disks[i].target, disks[i].lun);
	return ok;
}

/* READ CAPACITY(16): bytes of the LUN. */
static bool capacity16(uint8_t target, uint16_t lun, uint64_t *bytes,
		       struct sres *s)
{
	uint8_t cdb[16] = { 0x9e, 0x10 }, *d = buf_alloc(32);

	put_be(cdb + 10, 32, 4);
	if (!scsi_cmd(target, lun, cdb, 16, gpa(d), 32, true, s) || !good(s))
		return false;
	*bytes = (get_be(d, 8) + 1) * get_be(d + 8, 4);
	return true;
}

static bool disk_add(uint8_t target, uint16_t lun)
{
	struct disk *dk = &disks[ndisks];
	struct sres s;

	if (ndisks == MAXDISKS || !clear_ua(target, lun) ||
	    !capacity16(target, lun, &dk->bytes, &s))
		return false;
	dk->target = target;
	dk->lun = lun;
	dk->shadow = calloc(1, dk->bytes);
	dk->valid = calloc(1, dk->bytes / SECT);
	if (!dk->shadow || !dk->valid)
		abort();
	ndisks++;
	return true;
}

/* A task management function on the control queue: its response byte. */
static int tmf(uint8_t target, uint16_t lun, uint32_t subtype, uint64_t tag)
{
	struct virtio_scsi_ctrl_tmf_req *req = buf_alloc(sizeof(*req));
	struct virtio_scsi_ctrl_tmf_resp *rsp = buf_alloc(sizeof(*rsp));
	struct seg sg[2];
	uint32_t used;

	req->type = VIRTIO_SCSI_T_TMF;
	req->subtype = subtype;
	lun_encode(req->lun, target, lun);
	req->tag = tag;
	rsp->response = 0xee;
	sg[0] = (struct seg){ gpa(req), sizeof(*req), false };
	sg[1] = (struct seg){ gpa(rsp), sizeof(*rsp), true };
	if (!sync_run(&vqs[0], sg, 2, false, &used, 30000) ||
	    used != sizeof(*rsp))
		return -1;
	return rsp->response;
}

/* ---- the I/O engine: NQ threads, one per request queue ---- */

/*
 * Each queue thread keeps NSLOT requests in flight.  Slot s of queue q owns
 * DPS ring descriptors, a memory area and the disk window
 * [(q * NSLOT + s) MiB, +1 MiB) on every disk, so requests in flight never
 * overlap and the shadow copy tells what every read must return.  A
 * window's first request writes it whole.  Each request picks a disk, a
 * direction, READ/WRITE(10) or (16), a size of 512 B .. 1 MiB, a buffer
 * alignment and a descriptor layout.
 */
enum {
	LAY_PLAIN,		/* header, data pieces, response */
	LAY_ANY,		/* header+data or response+data in one */
	LAY_INDIRECT,		/* LAY_PLAIN through an indirect table */
	LAY_SPLIT_HDR,		/* header and response cut in two */
	LAY_ANY_INDIRECT,	/* header/response + some data, rest in pieces */
	LAY_N
};

static const char *const lay_names[LAY_N] = {
	"plain", "any-layout", "indirect", "split-headers",
	"any-layout-indirect",
};

struct slot {
	uint8_t *base;
	bool busy, write, c16;
	unsigned int disk, layout;
	uint64_t off;
	uint32_t len;
	uint8_t *data;
	struct virtio_scsi_cmd_resp *rsp;
};

struct engine;

struct ioq {
	struct engine *e;
	struct cvq *q;
	unsigned int qi;
	pthread_t th;
	uint64_t rng;
	struct slot sl[NSLOT];
	unsigned long submitted, done, ok, reads_checked, bytes;
	unsigned long lay[LAY_N], c16;
	unsigned long bad_target, check, aborted, bad;
	bool hung;
	char why[240];
};

struct engine {
	unsigned int nq;
	struct ioq q[NQ];
	volatile bool stop;	/* submit no more; finish what is in flight */
	volatile bool abandon;	/* leave at once (the device is gone) */
	unsigned long per_q;	/* requests per queue, 0: until stop */
	bool lenient;		/* fault phases: errors are expected */
	unsigned int disk_mask;
	unsigned long total_ok;	/* atomic */
	/* Sums after engine_join(). */
	unsigned long submitted, done, ok, reads_checked, bytes;
	unsigned long lay[LAY_N], c16;
	unsigned long bad_target, check, aborted, bad;
	bool hung;
	char why[240];
	double secs;
};

static void ioq_bad(struct ioq *io, const char *fmt, ...)
{
	va_list ap;

	io->bad++;
	if (io->why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(io->why, sizeof(io->why), fmt, ap);
	va_end(ap);
}

/* Append @len bytes at @a as 1..@maxp descriptors of random sizes. */
static unsigned int add_pieces(struct seg *sg, unsigned int n, uint64_t a,
			       uint32_t len, bool w, unsigned int maxp,
			       uint64_t *rng)
{
	unsigned int p = 1 + rnd(rng) % maxp, i;

	if (p > len)
		p = len;
	for (i = 0; i + 1 < p; i++) {
		uint32_t room = len - (p - 1 - i);	/* leave 1 byte each */
		uint32_t avg = len / (p - i);
		uint32_t piece = 1 + rnd(rng) % (2 * avg + 1);

		if (piece > room)
			piece = room;
		sg[n++] = (struct seg){ a, piece, w };
		a += piece;
		len -= piece;
	}
	sg[n++] = (struct seg){ a, len, w };
	return n;
}

static bool window_valid(const struct disk *dk, uint64_t off)
{
	return !memchr(dk->valid + off / SECT, 0, WIN / SECT);
}

static void slot_start(struct ioq *io, unsigned int si)
{
	struct engine *e = io->e;
	struct slot *sl = &io->sl[si];
	struct cvq *q = io->q;
	struct virtio_scsi_cmd_req *hdr;
	unsigned int cand[MAXDISKS], nc = 0, i, n = 0;
	uint64_t win = (uint64_t)(io->qi * NSLOT + si) * WIN, dg;
	uint16_t head = si * DPS;
	struct seg sg[DPS];
	bool any;
	uint32_t k;

	for (i = 0; i < ndisks; i++)
		if (e->disk_mask & (1u << i))
			cand[nc++] = i;
	sl->disk = cand[rnd(&io->rng) % nc];
	if (!window_valid(&disks[sl->disk], win)) {
		sl->write = true;
		sl->off = win;
		sl->len = WIN;
	} else {
		uint32_t nsec, maxs = WIN / SECT, r = rnd(&io->rng) % 100;

		if (r < 50)
			nsec = 1 + rnd(&io->rng) % 16;
		else if (r < 80)
			nsec = 17 + rnd(&io->rng) % 240;
		else
			nsec = 257 + rnd(&io->rng) % (maxs - 256);
		sl->write = rnd(&io->rng) & 1;
		sl->off = win + rnd(&io->rng) % (maxs - nsec + 1) * SECT;
		sl->len = nsec * SECT;
	}
	sl->c16 = rnd(&io->rng) & 1;
	sl->layout = rnd(&io->rng) % LAY_N;
	sl->data = sl->base + 8192 +
		   (rnd(&io->rng) % 4 ? rnd(&io->rng) % 4096 : 0);
	if (sl->write)
		fill_random(sl->data, sl->len, &io->rng);
	else
		memset(sl->data, 0xa5, sl->len + 64);
	any = sl->layout == LAY_ANY || sl->layout == LAY_ANY_INDIRECT;
	hdr = (void *)(any && sl->write ? sl->data - HDR_SZ : sl->base);
	sl->rsp = (void *)(any && !sl->write ? sl->data - RSP_SZ :
			   sl->base + 128);
	memset(hdr, 0, HDR_SZ);
	lun_encode(hdr->lun, disks[sl->disk].target, disks[sl->disk].lun);
	hdr->tag = (uint64_t)io->qi << 48 | (uint64_t)si << 40 | io->submitted;
	cdb_rw(hdr->cdb, sl->write, sl->c16, sl->off / SECT, sl->len / SECT);
	memset(sl->rsp, 0xee, RSP_SZ);

	dg = gpa(sl->data);
	switch (sl->layout) {
	case LAY_PLAIN:
	case LAY_INDIRECT:
	case LAY_SPLIT_HDR:
		if (sl->layout == LAY_SPLIT_HDR) {
			k = 1 + rnd(&io->rng) % (HDR_SZ - 1);
			sg[n++] = (struct seg){ gpa(hdr), k, false };
			sg[n++] = (struct seg){ gpa(hdr) + k, HDR_SZ - k, false };
		} else {
			sg[n++] = (struct seg){ gpa(hdr), HDR_SZ, false };
		}
		if (sl->write)
			n = add_pieces(sg, n, dg, sl->len, false,
				       sl->layout == LAY_INDIRECT ? 16 : 8,
				       &io->rng);
		if (sl->layout == LAY_SPLIT_HDR) {
			k = 1 + rnd(&io->rng) % (RSP_SZ - 1);
			sg[n++] = (struct seg){ gpa(sl->rsp), k, true };
			sg[n++] = (struct seg){ gpa(sl->rsp) + k, RSP_SZ - k,
						true };
		} else {
			sg[n++] = (struct seg){ gpa(sl->rsp), RSP_SZ, true };
		}
		if (!sl->write)
			n = add_pieces(sg, n, dg, sl->len, true,
				       sl->layout == LAY_INDIRECT ? 16 : 8,
				       &io->rng);
		break;
	case LAY_ANY:
		if (sl->write) {
			sg[n++] = (struct seg){ gpa(hdr), HDR_SZ + sl->len,
						false };
			sg[n++] = (struct seg){ gpa(sl->rsp), RSP_SZ, true };
		} else {
			sg[n++] = (struct seg){ gpa(hdr), HDR_SZ, false };
			sg[n++] = (struct seg){ gpa(sl->rsp), RSP_SZ + sl->len,
						true };
		}
		break;
	case LAY_ANY_INDIRECT:
		k = rnd(&io->rng) % (sl->len + 1);
		if (sl->write) {
			sg[n++] = (struct seg){ gpa(hdr), HDR_SZ + k, false };
			if (k < sl->len)
				n = add_pieces(sg, n, dg + k, sl->len - k, false,
					       16, &io->rng);
			sg[n++] = (struct seg){ gpa(sl->rsp), RSP_SZ, true };
		} else {
			sg[n++] = (struct seg){ gpa(hdr), HDR_SZ, false };
			sg[n++] = (struct seg){ gpa(sl->rsp), RSP_SZ + k, true };
			if (k < sl->len)
				n = add_pieces(sg, n, dg + k, sl->len - k, true,
					       16, &io->rng);
		}
		break;
	}
	if (sl->layout == LAY_INDIRECT || sl->layout == LAY_ANY_INDIRECT) {
		struct vring_desc *t = (void *)(sl->base + 512);

		chain_fill(t, 0, sg, n);
		q->desc[head] = (struct vring_desc){
			.addr = gpa(t), .len = n * sizeof(*t),
			.flags = VRING_DESC_F_INDIRECT,
		};
	} else {
		chain_fill(q->desc + head, head, sg, n);
	}
	sl->busy = true;
	io->submitted++;
	io->lay[sl->layout]++;
	io->c16 += sl->c16;
	cvq_publish(q, head);
}

static void slot_finish(struct ioq *io, struct slot *sl, uint32_t ulen)
{
	struct engine *e = io->e;
	struct disk *dk = &disks[sl->disk];
	struct virtio_scsi_cmd_resp *r = sl->rsp;
	uint64_t sec0 = sl->off / SECT;
	uint32_t ns = sl->len / SECT, i, want;
	uint8_t key = 0, asc = 0;
	const char *op = sl->write ? "write" : "read";

	sl->busy = false;
	io->done++;
	if (r->response != VIRTIO_SCSI_S_OK || r->status != 0) {
		/* Whatever a failed write did, the window is unknown now. */
		if (sl->write)
			memset(dk->valid + sec0, 0, ns);
		sense_of(r, &key, &asc);
		if (e->lenient && r->response == VIRTIO_SCSI_S_BAD_TARGET) {
			io->bad_target++;
		} else if (e->lenient && r->response == VIRTIO_SCSI_S_OK &&
			   ((r->status == 0x02 && r->sense_len) ||
			    r->status == 0x08)) {
			/*
			 * CHECK CONDITION with its sense, or BUSY: what the
			 * target core answers when the unit attention this
			 * command was to report (the LUN change) was taken
			 * by a command racing it (seen once in 3251 on the
			 * sanitizer kernel); the initiator retries.
			 */
			io->check++;
		} else if (e->lenient &&
			   (r->response == VIRTIO_SCSI_S_ABORTED ||
			    r->response == VIRTIO_SCSI_S_RESET ||
			    (r->response == VIRTIO_SCSI_S_OK &&
			     r->status == 0x40))) {
			io->aborted++;
		} else {
			ioq_bad(io, "q%u %s %u:%u off %llu len %u layout %s: response %u status 0x%x sense_len %u key 0x%x asc 0x%x used %u",
				io->qi, op, dk->target, dk->lun,
				(unsigned long long)sl->off, sl->len,
				lay_names[sl->layout], r->response, r->status,
				r->sense_len, key, asc, ulen);
		}
		return;
	}
	want = RSP_SZ + (sl->write ? 0 : sl->len);
	if (r->resid || r->sense_len || r->status_qualifier || ulen != want) {
		if (sl->write)
			memset(dk->valid + sec0, 0, ns);
		ioq_bad(io, "q%u %s %u:%u len %u layout %s: used %u (want %u) resid %u sense_len %u",
			io->qi, op, dk->target, dk->lun, sl->len,
			lay_names[sl->layout], ulen, want, r->resid,
			r->sense_len);
		return;
	}
	if (sl->write) {
		memcpy(dk->shadow + sl->off, sl->data, sl->len);
		memset(dk->valid + sec0, 1, ns);
	} else {
		bool checked = false;

		for (i = 0; i < ns; i++) {
			if (!dk->valid[sec0 + i])
				continue;
			checked = true;
			if (memcmp(sl->data + i * SECT,
				   dk->shadow + sl->off + i * SECT, SECT)) {
				ioq_bad(io, "q%u read %u:%u off %llu len %u layout %s: sector %u differs from what was written",
					io->qi, dk->target, dk->lun,
					(unsigned long long)sl->off, sl->len,
					lay_names[sl->layout], i);
				return;
			}
		}
		for (i = 0; i < 64; i++) {
			if (sl->data[sl->len + i] != 0xa5) {
				ioq_bad(io, "q%u read len %u layout %s: byte %u past the buffer written",
					io->qi, sl->len, lay_names[sl->layout],
					i);
				return;
			}
		}
		io->reads_checked += checked;
	}
	io->ok++;
	io->bytes += sl->len;
	__atomic_add_fetch(&e->total_ok, 1, __ATOMIC_RELAXED);
}

static void *ioq_run(void *arg)
{
	struct ioq *io = arg;
	struct engine *e = io->e;
	struct cvq *q = io->q;
	unsigned int inflight = 0, si, n;
	struct timespec last;

	clock_gettime(CLOCK_MONOTONIC, &last);
	for (;;) {
		bool more = !e->stop && (!e->per_q || io->submitted < e->per_q);
		bool kick = false;

		for (si = 0; more && si < NSLOT; si++) {
			if (io->sl[si].busy)
				continue;
			if (e->per_q && io->submitted >= e->per_q)
				break;
			slot_start(io, si);
			inflight++;
			kick = true;
		}
		if (kick)
			cvq_kick(q);
		/* Abandoned: leave with what was just submitted in flight. */
		if (e->abandon || !inflight)
			break;
		/* EVENT_IDX: a call for the next entry, then look. */
		__atomic_store_n(used_event(q), q->used_seen, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		n = 0;
		while (q->used_seen != load16(&q->used->idx)) {
			struct vring_used_elem *ue =
				&q->used->ring[q->used_seen % q->num];
			uint32_t id = ue->id, len = ue->len;

			q->used_seen++;
			si = id / DPS;
			if (id % DPS || si >= NSLOT || !io->sl[si].busy) {
				ioq_bad(io, "q%u: used id %u is no request in flight",
					io->qi, id);
				continue;
			}
			slot_finish(io, &io->sl[si], len);
			n++;
		}
		if (n) {
			inflight -= n;
			clock_gettime(CLOCK_MONOTONIC, &last);
			continue;
		}
		if (elapsed_ms(&last) > HANG_MS) {
			io->hung = true;
			snprintf(io->why, sizeof(io->why),
				 "q%u: %u requests without an answer for %u ms (used idx %u, avail idx %u)",
				 io->qi, inflight, HANG_MS,
				 load16(&q->used->idx), q->avail_idx);
			break;
		}
		efd_take(q->call, 20);
	}
	return NULL;
}

static void engine_start(struct engine *e, unsigned int nq,
			 unsigned long per_q, bool lenient,
			 unsigned int disk_mask, uint64_t seed)
{
	unsigned int qi, si;

	memset(e, 0, sizeof(*e));
	e->nq = nq;
	e->per_q = per_q;
	e->lenient = lenient;
	e->disk_mask = disk_mask;
	for (qi = 0; qi < nq; qi++) {
		struct ioq *io = &e->q[qi];

		io->e = e;
		io->qi = qi;
		io->q = &vqs[2 + qi];
		io->rng = seed * 0x9e3779b97f4a7c15ull + qi * 7919 + 1;
		for (si = 0; si < NSLOT; si++)
			io->sl[si].base = mem + DATA_OFF +
					  (size_t)(qi * NSLOT + si) * SLOT_SZ;
		if (pthread_create(&io->th, NULL, ioq_run, io))
			abort();
	}
}

static void engine_join(struct engine *e, const struct timespec *t0)
{
	unsigned int qi, l;

	for (qi = 0; qi < e->nq; qi++) {
		struct ioq *io = &e->q[qi];

		pthread_join(io->th, NULL);
		e->submitted += io->submitted;
		e->done += io->done;
		e->ok += io->ok;
		e->reads_checked += io->reads_checked;
		e->bytes += io->bytes;
		for (l = 0; l < LAY_N; l++)
			e->lay[l] += io->lay[l];
		e->c16 += io->c16;
		e->bad_target += io->bad_target;
		e->check += io->check;
		e->aborted += io->aborted;
		e->bad += io->bad;
		e->hung |= io->hung;
		if (!e->why[0] && io->why[0])
			snprintf(e->why, sizeof(e->why), "%s", io->why);
	}
	e->secs = elapsed_ms(t0) / 1000.0;
	printf("# io: %lu submitted, %lu answered, %lu good (%lu reads compared, %.1f MiB) in %.1f s; bad_target %lu check %lu aborted %lu bad %lu\n",
	       e->submitted, e->done, e->ok, e->reads_checked,
	       e->bytes / 1048576.0, e->secs, e->bad_target, e->check,
	       e->aborted, e->bad);
}

/* Wait until the engine answered @n requests well (false: timeout). */
static bool engine_wait_ok(struct engine *e, unsigned long n, unsigned int ms)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (__atomic_load_n(&e->total_ok, __ATOMIC_RELAXED) < n) {
		if (elapsed_ms(&t0) > ms)
			return false;
		msleep(10);
	}
	return true;
}

/* ---- the checks of mode "scsi" ---- */

static struct engine fe;	/* engine of the fault phases */

static struct engine *engine_strict_run(const char *name, unsigned int nq,
					unsigned long per_q,
					unsigned int disk_mask, uint64_t seed,
					unsigned long min_ok)
{
	struct timespec t0;
	char n2[96];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	engine_start(&fe, nq, per_q, false, disk_mask, seed);
	engine_join(&fe, &t0);
	snprintf(n2, sizeof(n2), "%s-no-hang", name);
	result(!fe.hung, n2, "%s", fe.why);
	snprintf(n2, sizeof(n2), "%s-all-good-and-verified", name);
	result(!fe.bad && fe.ok == fe.submitted && fe.ok >= min_ok, n2,
	       "%lu good of %lu (want >= %lu), %lu bad: %s", fe.ok,
	       fe.submitted, min_ok, fe.bad, fe.why);
	return &fe;
}

static void t_endpoint(int fd)
{
	struct vhost_scsi_target bad = ep_target("naa.5001405000000bad");
	char p[512], dir[512] = "", buf[4096];
	int fd2;

	expect("scsi-set-endpoint", set_endpoint(fd, wwpn, "scsi-set-endpoint"),
	       0);
	expect("scsi-set-endpoint-again-eexist",
	       set_endpoint(fd, wwpn, "scsi-set-endpoint-again-eexist"), EEXIST);
	expect("scsi-clear-endpoint-wrong-wwpn-einval",
	       timed_ioctl(fd, VHOST_SCSI_CLEAR_ENDPOINT, &bad, 30000,
			   "scsi-clear-endpoint-wrong-wwpn-einval"), EINVAL);

	tpg_path(p, sizeof(p), 1, NULL);
	expect("scsi-bound-tpg-rmdir-ebusy", rmdir(p), EBUSY);
	tpg_path(p, sizeof(p), 3, NULL);
	expect("scsi-bound-empty-tpg-rmdir-ebusy", rmdir(p), EBUSY);
	tpg_path(p, sizeof(p), 3, "nexus");
	expect("scsi-bound-tpg-nexus-drop-ebusy", cfs_write(p, "NULL"), EBUSY);
	result(read_file(p, buf, sizeof(buf)) && !strncmp(buf, "naa.", 4),
	       "scsi-bound-tpg-nexus-kept", "nexus reads \"%s\"", buf);

	/* A TPG serves one device: a second one cannot bind it. */
	fd2 = open(node, O_RDWR | O_CLOEXEC);
	expect("scsi-second-device-set-owner",
	       fd2 >= 0 ? ioctl(fd2, VHOST_SET_OWNER) : -1, 0);
	expect("scsi-second-device-same-wwpn-ebusy",
	       set_endpoint(fd2, wwpn, "scsi-second-device-same-wwpn-ebusy"),
	       EBUSY);
	if (fd2 >= 0)
		close(fd2);

	dbg_devs(getpid(), dir, sizeof(dir));
	snprintf(p, sizeof(p), "%s/targets", dir);
	buf[0] = '\0';
	read_file(p, buf, sizeof(buf));
	{
		char want[300];

		snprintf(want, sizeof(want), "endpoint: %s\n", wwpn);
		result(strstr(buf, want) && strstr(buf, "target 1: ") &&
		       strstr(buf, "target 2: ") && strstr(buf, "target 3: ") &&
		       !strstr(buf, "target 0: "),
		       "scsi-debugfs-targets", "%s: \"%s\"", p, buf);
	}
}

/* REPORT LUNS of @target: the LUN numbers, their count, or -1. */
static int report_luns(uint8_t target, unsigned int *luns, int max,
		       struct sres *s)
{
	uint8_t cdb[12] = { 0xa0 }, *d = buf_alloc(4096);
	uint32_t len;
	int i, n;

	put_be(cdb + 6, 4096, 4);
	if (!scsi_cmd(target, 0, cdb, 12, gpa(d), 4096, true, s) || !good(s))
		return -1;
	len = get_be(d, 4);
	if (s->used != RSP_SZ + 4096 - s->r.resid || len % 8 ||
	    8 + len != 4096 - s->r.resid)
		return -1;
	n = len / 8;
	for (i = 0; i < n && i < max; i++)
		luns[i] = get_be(d + 8 + 8 * i, 2) & 0x3fff;
	return n;
}

static bool has_lun(const unsigned int *luns, int n, unsigned int lun)
{
	int i;

	for (i = 0; i < n; i++)
		if (luns[i] == lun)
			return true;
	return false;
}

static bool check_illegal_lun(const struct sres *s)
{
	uint8_t key = 0, asc = 0;

	sense_of(&s->r, &key, &asc);
	return s->done && s->r.response == VIRTIO_SCSI_S_OK &&
	       s->r.status == 0x02 && s->r.sense_len > 0 && key == 0x5 &&
	       asc == 0x25 && s->used == RSP_SZ;
}

static void t_commands(uint64_t lun_bytes)
{
	uint8_t cdb[16], *d;
	unsigned int luns[16], i, want;
	char name[64];
	struct sres s;
	int n;

	for (i = 0; i < ndisks; i++) {
		snprintf(name, sizeof(name), "scsi-read-capacity16-t%u-l%u",
			 disks[i].target, disks[i].lun);
		result(disks[i].bytes == lun_bytes, name, "%llu bytes, want %llu",
		       (unsigned long long)disks[i].bytes,
		       (unsigned long long)lun_bytes);

		memset(cdb, 0, sizeof(cdb));
		cdb[0] = 0x25;
		d = buf_alloc(8);
		scsi_cmd(disks[i].target, disks[i].lun, cdb, 10, gpa(d), 8, true,
			 &s);
		snprintf(name, sizeof(name), "scsi-read-capacity10-t%u-l%u",
			 disks[i].target, disks[i].lun);
		result(good(&s) && s.used == RSP_SZ + 8 &&
		       get_be(d + 4, 4) == SECT &&
		       (get_be(d, 4) + 1) * SECT == lun_bytes, name,
		       "%s last lba %llu block %llu", sres_str(&s),
		       (unsigned long long)get_be(d, 4),
		       (unsigned long long)get_be(d + 4, 4));
	}

	memset(cdb, 0, sizeof(cdb));
	cdb[0] = 0x12;
	cdb[4] = 96;
	d = buf_alloc(96);
	memset(d, 0xee, 96);
	scsi_cmd(1, 0, cdb, 6, gpa(d), 96, true, &s);
	want = d[4] + 5u < 96 ? d[4] + 5u : 96;
	result(good(&s) && d[0] == 0 && s.r.resid == 96 - want &&
	       s.used == RSP_SZ + want && s.r.sense_len == 0, "scsi-inquiry",
	       "%s byte0 0x%x additional length %u", sres_str(&s), d[0], d[4]);
	printf("# inquiry: \"%.8s\" \"%.16s\" \"%.4s\"\n", d + 8, d + 16, d + 32);

	n = report_luns(1, luns, 16, &s);
	result(n == 2 && has_lun(luns, n, 0) && has_lun(luns, n, 1),
	       "scsi-report-luns-tpgt1-two", "%d luns, %s", n, sres_str(&s));
	n = report_luns(2, luns, 16, &s);
	result(n == 1 && luns[0] == 0, "scsi-report-luns-tpgt2-one",
	       "%d luns, %s", n, sres_str(&s));

	tur(1, 0, &s);
	result(good(&s) && s.used == RSP_SZ && s.r.sense_len == 0 &&
	       s.r.resid == 0, "scsi-test-unit-ready", "%s", sres_str(&s));
	tur(1, 9, &s);
	result(check_illegal_lun(&s), "scsi-no-such-lun-illegal-request", "%s",
	       sres_str(&s));
	d = buf_alloc(SECT);
	cdb_rw(cdb, false, false, 0, 1);
	scsi_cmd(1, 9, cdb, 10, gpa(d), SECT, true, &s);
	result(check_illegal_lun(&s), "scsi-read-no-such-lun-illegal-request",
	       "%s", sres_str(&s));
	tur(7, 0, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_BAD_TARGET &&
	       s.used == RSP_SZ, "scsi-no-such-target-bad-target", "%s",
	       sres_str(&s));
	/* A bound TPG without LUNs is a target: LIO answers, not us. */
	memset(cdb, 0, sizeof(cdb));
	cdb[0] = 0x12;
	cdb[4] = 36;
	d = buf_alloc(36);
	scsi_cmd(3, 0, cdb, 6, gpa(d), 36, true, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_OK,
	       "scsi-bound-tpg-without-luns-answers", "%s", sres_str(&s));
}

static void t_data(void)
{
	struct engine *e;
	char dir[512] = "", name[64];
	unsigned int l, q;
	bool all = true;

	e = engine_strict_run("scsi-io", NQ, 600, live_mask, 1, 2000);
	for (l = 0; l < LAY_N; l++)
		all &= e->lay[l] > 100;
	result(all, "scsi-io-every-layout",
	       "plain %lu any %lu indirect %lu split %lu any-indirect %lu",
	       e->lay[0], e->lay[1], e->lay[2], e->lay[3], e->lay[4]);
	result(e->c16 > 100 && e->submitted - e->c16 > 100,
	       "scsi-io-cdb10-and-cdb16", "%lu of %lu with 16-byte CDBs",
	       e->c16, e->submitted);
	result(e->reads_checked >= 500, "scsi-io-reads-compared",
	       "%lu reads compared", e->reads_checked);
	dbg_devs(getpid(), dir, sizeof(dir));
	for (q = 0; q < NQ; q++) {
		unsigned long long r = dbg_vq_requests(dir, 2 + q);

		snprintf(name, sizeof(name), "scsi-io-debugfs-vq%u-requests",
			 2 + q);
		result(r >= 600, name, "%llu requests", r);
	}
}

static void t_boundaries(void)
{
	uint8_t *big = mem + BIG_OFF, cdb[16];
	struct disk *dk = &disks[0];
	const uint32_t m8 = 8u << 20, m9 = 9u << 20;
	uint64_t seed = 77;
	struct sres s;
	uint32_t i;
	bool ok;

	/* 8 MiB, page aligned: the largest transfer; written, read back. */
	fill_random(big, m8, &seed);
	cdb_rw(cdb, true, true, 0, m8 / SECT);
	scsi_cmd(dk->target, dk->lun, cdb, 16, gpa(big), m8, false, &s);
	ok = good(&s) && s.used == RSP_SZ && !s.r.resid;
	memset(dk->valid, 0, m8 / SECT);
	if (ok) {
		memcpy(dk->shadow, big, m8);
		memset(dk->valid, 1, m8 / SECT);
	}
	result(ok, "scsi-write-8mib", "%s", sres_str(&s));
	memset(big, 0xa5, m8 + 4096);
	cdb_rw(cdb, false, true, 0, m8 / SECT);
	scsi_cmd(dk->target, dk->lun, cdb, 16, gpa(big), m8, true, &s);
	ok = good(&s) && s.used == RSP_SZ + m8 && !s.r.resid &&
	     !memcmp(big, dk->shadow, m8);
	for (i = 0; ok && i < 4096; i++)
		ok = big[m8 + i] == 0xa5;
	result(ok, "scsi-read-8mib-verified", "%s", sres_str(&s));

	/* Larger than the transfer limit: OVERRUN at once. */
	cdb_rw(cdb, false, false, 0, m9 / SECT);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big), m9, true, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_OVERRUN &&
	       s.used == RSP_SZ, "scsi-read-9mib-overrun", "%s", sres_str(&s));
	cdb_rw(cdb, true, false, 0, m9 / SECT);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big), m9, false, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_OVERRUN &&
	       s.used == RSP_SZ, "scsi-write-9mib-overrun", "%s", sres_str(&s));
	/* 8 MiB not page aligned: 2049 pages, one too many. */
	cdb_rw(cdb, false, false, 0, m8 / SECT);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big + 512), m8, true, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_OVERRUN &&
	       s.used == RSP_SZ, "scsi-read-8mib-unaligned-overrun", "%s",
	       sres_str(&s));

	/* Buffer larger than the CDB asks (underflow): resid, used length. */
	memset(big, 0xa5, 8192);
	cdb_rw(cdb, false, false, 100, 8);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big), 8192, true, &s);
	ok = good(&s) && s.r.resid == 4096 && s.used == RSP_SZ + 4096 &&
	     !memcmp(big, dk->shadow + 100 * SECT, 4096);
	for (i = 4096; ok && i < 8192; i++)
		ok = big[i] == 0xa5;
	result(ok, "scsi-read-underflow-resid", "%s", sres_str(&s));
	/*
	 * Buffer smaller than the CDB asks (overflow): LIO may read what fits
	 * (GOOD, resid) or refuse the CDB (CHECK CONDITION, nothing written);
	 * the used length must say which.
	 */
	memset(big, 0xa5, 4096);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big), 2048, true, &s);
	if (good(&s)) {
		ok = s.r.resid == 2048 && s.used == RSP_SZ + 2048 &&
		     !memcmp(big, dk->shadow + 100 * SECT, 2048);
		i = 2048;
	} else {
		ok = s.done && s.r.response == VIRTIO_SCSI_S_OK &&
		     s.r.status == 0x02 && s.r.sense_len && s.used == RSP_SZ;
		i = 0;
	}
	for (; ok && i < 4096; i++)
		ok = big[i] == 0xa5;
	result(ok, "scsi-read-short-buffer", "%s", sres_str(&s));
	/* A WRITE whose buffer does not match its CDB: LIO refuses it. */
	cdb_rw(cdb, true, false, 100, 8);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big), 2048, false, &s);
	memset(dk->valid + 100, 0, 8);
	result(s.done && s.r.response == VIRTIO_SCSI_S_OK &&
	       s.r.status == 0x02 && s.r.sense_len > 0,
	       "scsi-write-short-buffer-check-condition", "%s", sres_str(&s));
}

static bool unmap_hole(void)
{
	return munmap(mem + HOLE_OFF, HOLE_LEN) == 0;
}

static bool remap_hole(void)
{
	return mmap(mem + HOLE_OFF, HOLE_LEN, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE,
		    -1, 0) == mem + HOLE_OFF;
}

/* A request from raw segments on the sync queue; the used length. */
static bool raw_req(const struct seg *sg, unsigned int n, uint32_t *used)
{
	return sync_run(&vqs[SYNC_VQ], sg, n, false, used, 10000);
}

static struct virtio_scsi_cmd_req *new_req(uint8_t target, uint16_t lun)
{
	struct virtio_scsi_cmd_req *req = buf_alloc(HDR_SZ);

	lun_encode(req->lun, target, lun);
	req->tag = tag_seq++;
	return req;
}

static struct virtio_scsi_cmd_resp *new_rsp(void)
{
	struct virtio_scsi_cmd_resp *r = buf_alloc(RSP_SZ + 16);

	memset(r, 0xee, RSP_SZ + 16);
	return r;
}

static void t_malformed(void)
{
	struct virtio_scsi_cmd_req *req;
	struct virtio_scsi_cmd_resp *rsp;
	uint64_t hole = gpa(mem + HOLE_OFF);
	uint8_t *b, *half = mem + HOLE_OFF - 4096;
	struct seg sg[4];
	uint32_t used;
	struct sres s;
	bool ok;
	int i;

	/* Request header shorter than virtio_scsi_cmd_req. */
	req = new_req(1, 0);
	rsp = new_rsp();
	sg[0] = (struct seg){ gpa(req), 20, false };
	sg[1] = (struct seg){ gpa(rsp), RSP_SZ, true };
	ok = raw_req(sg, 2, &used);
	result(ok && used == RSP_SZ && rsp->response == VIRTIO_SCSI_S_FAILURE,
	       "scsi-bad-header-too-short-failure", "ok %d used %u response %u",
	       ok, used, rsp->response);
	/* Response buffer shorter than virtio_scsi_cmd_resp. */
	req = new_req(1, 0);
	rsp = new_rsp();
	sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
	sg[1] = (struct seg){ gpa(rsp), 50, true };
	ok = raw_req(sg, 2, &used);
	result(ok && used == 50 && rsp->response == VIRTIO_SCSI_S_FAILURE &&
	       ((uint8_t *)rsp)[50] == 0xee,
	       "scsi-bad-response-too-short-failure",
	       "ok %d used %u response %u", ok, used, rsp->response);
	req = new_req(1, 0);
	rsp = new_rsp();
	sg[1] = (struct seg){ gpa(rsp), 4, true };
	sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
	ok = raw_req(sg, 2, &used);
	result(ok && used <= 4 && ((uint8_t *)rsp)[4] == 0xee,
	       "scsi-bad-response-4-bytes-answered", "ok %d used %u", ok, used);
	/* Variable-length CDB claiming 248 bytes. */
	req = new_req(1, 0);
	req->cdb[0] = 0x7f;
	req->cdb[7] = 0xf0;
	rsp = new_rsp();
	sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
	sg[1] = (struct seg){ gpa(rsp), RSP_SZ, true };
	ok = raw_req(sg, 2, &used);
	result(ok && used == RSP_SZ && rsp->response == VIRTIO_SCSI_S_FAILURE,
	       "scsi-bad-cdb-longer-than-32-failure", "ok %d used %u response %u",
	       ok, used, rsp->response);
	/* Bidirectional: data-out and data-in in one request. */
	req = new_req(1, 0);
	cdb_rw(req->cdb, true, false, 200, 1);
	rsp = new_rsp();
	b = buf_alloc(2 * SECT);
	sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
	sg[1] = (struct seg){ gpa(b), SECT, false };
	sg[2] = (struct seg){ gpa(rsp), RSP_SZ, true };
	sg[3] = (struct seg){ gpa(b + SECT), SECT, true };
	ok = raw_req(sg, 4, &used);
	memset(disks[0].valid + 200, 0, 1);
	result(ok && used == RSP_SZ && rsp->response == VIRTIO_SCSI_S_FAILURE,
	       "scsi-bad-bidirectional-failure", "ok %d used %u response %u",
	       ok, used, rsp->response);

	/* Inside the memory table, but nothing mapped there any more. */
	result(unmap_hole(), "scsi-unmap-part-of-guest-memory", "%s",
	       strerror(errno));
	req = new_req(1, 0);
	rsp = new_rsp();
	sg[0] = (struct seg){ hole, HDR_SZ, false };
	sg[1] = (struct seg){ gpa(rsp), RSP_SZ, true };
	ok = raw_req(sg, 2, &used);
	result(ok && used == RSP_SZ && rsp->response == VIRTIO_SCSI_S_FAILURE,
	       "scsi-bad-header-unmapped-failure", "ok %d used %u response %u",
	       ok, used, rsp->response);
	cdb_rw(req->cdb, false, false, 0, 8);
	scsi_cmd(1, 0, req->cdb, 10, hole, 4096, true, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_FAILURE &&
	       s.used == RSP_SZ, "scsi-bad-read-into-unmapped-failure", "%s",
	       sres_str(&s));
	cdb_rw(req->cdb, true, false, 0, 8);
	scsi_cmd(1, 0, req->cdb, 10, hole, 4096, false, &s);
	memset(disks[0].valid, 0, 8);
	result(s.done && s.r.response == VIRTIO_SCSI_S_FAILURE &&
	       s.used == RSP_SZ, "scsi-bad-write-from-unmapped-failure", "%s",
	       sres_str(&s));
	/* Half mapped: the first page is pinned, the second fails. */
	memset(half, 0x5a, 4096);
	cdb_rw(req->cdb, false, false, 0, 16);
	scsi_cmd(1, 0, req->cdb, 10, gpa(half), 8192, true, &s);
	ok = s.done && s.r.response == VIRTIO_SCSI_S_FAILURE &&
	     s.used == RSP_SZ;
	for (i = 0; ok && i < 4096; i++)
		ok = half[i] == 0x5a;
	result(ok, "scsi-bad-read-half-unmapped-failure-untouched", "%s",
	       sres_str(&s));
	/* The response itself unmapped: answered anyway (nothing to see). */
	req = new_req(1, 0);
	sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
	sg[1] = (struct seg){ hole + 4096, RSP_SZ, true };
	ok = raw_req(sg, 2, &used);
	result(ok && used == 0, "scsi-bad-response-unmapped-answered",
	       "ok %d used %u", ok, used);
	result(remap_hole(), "scsi-remap-guest-memory", "%s", strerror(errno));

	tur(1, 0, &s);
	result(good(&s), "scsi-bad-requests-queue-still-works", "%s",
	       sres_str(&s));
}

static void t_tmf(void)
{
	static const struct {
		uint32_t subtype;
		const char *name;
	} rejected[] = {
		{ VIRTIO_SCSI_T_TMF_ABORT_TASK_SET, "abort-task-set" },
		{ VIRTIO_SCSI_T_TMF_CLEAR_ACA, "clear-aca" },
		{ VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET, "clear-task-set" },
		{ VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET, "i-t-nexus-reset" },
		{ VIRTIO_SCSI_T_TMF_QUERY_TASK, "query-task" },
		{ VIRTIO_SCSI_T_TMF_QUERY_TASK_SET, "query-task-set" },
	};
	struct sqcq_tmf_req *st;
	struct timespec t0;
	uint8_t *setup_in, key = 0, asc = 0;
	char name[80];
	struct seg sg[2];
	struct sres s;
	uint32_t used;
	size_t i;
	bool ok;
	int r;

	r = tmf(1, 0, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0);
	result(r == SQCQ_VIRTIO_SCSI_S_FUNCTION_COMPLETE,
	       "scsi-tmf-lun-reset-function-complete", "response %d", r);
	tur(1, 0, &s);
	sense_of(&s.r, &key, &asc);
	result(s.done && s.r.status == 0x02 && key == 0x6 && asc == 0x29,
	       "scsi-lun-reset-unit-attention", "%s", sres_str(&s));
	result(clear_ua(1, 0), "scsi-lun-reset-unit-attention-cleared", "-");
	r = tmf(1, 0, VIRTIO_SCSI_T_TMF_ABORT_TASK, 0xdeadbeefull);
	result(r == SQCQ_VIRTIO_SCSI_S_FUNCTION_COMPLETE,
	       "scsi-tmf-abort-unknown-tag-function-complete", "response %d", r);
	for (i = 0; i < sizeof(rejected) / sizeof(rejected[0]); i++) {
		r = tmf(1, 0, rejected[i].subtype, 0);
		snprintf(name, sizeof(name), "scsi-tmf-%s-rejected",
			 rejected[i].name);
		result(r == VIRTIO_SCSI_S_FUNCTION_REJECTED, name, "response %d",
		       r);
	}
	r = tmf(1, 9, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0);
	result(r == VIRTIO_SCSI_S_INCORRECT_LUN,
	       "scsi-tmf-lun-reset-no-such-lun-incorrect-lun", "response %d", r);
	r = tmf(7, 0, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0);
	result(r == VIRTIO_SCSI_S_BAD_TARGET, "scsi-tmf-no-such-target-bad-target",
	       "response %d", r);

	/* SQ/CQ setup with a target bound: still FUNCTION_REJECTED. */
	st = buf_alloc(sizeof(*st) + 64);
	st->type = SQCQ_VIRTIO_SCSI_T_TMF;
	st->subtype = SQCQ_TMF_SUBTYPE_SETUP;
	st->lun[0] = 1;
	st->lun[1] = 1;
	setup_in = buf_alloc(SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE);
	memset(setup_in, 0xee, SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE);
	sg[0] = (struct seg){ gpa(st), sizeof(*st) + 64, false };
	sg[1] = (struct seg){ gpa(setup_in), SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE,
			      true };
	ok = sync_run(&vqs[0], sg, 2, false, &used, 10000);
	result(ok && setup_in[0] == SQCQ_VIRTIO_SCSI_S_FUNCTION_REJECTED,
	       "scsi-tmf-sqcq-setup-bad-magic-rejected", "ok %d used %u response %u", ok,
	       used, setup_in[0]);
	/* A TMF request cut short. */
	st = buf_alloc(sizeof(*st));
	st->type = VIRTIO_SCSI_T_TMF;
	st->subtype = VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET;
	setup_in = buf_alloc(4);
	memset(setup_in, 0xee, 4);
	sg[0] = (struct seg){ gpa(st), 12, false };
	sg[1] = (struct seg){ gpa(setup_in), 1, true };
	ok = sync_run(&vqs[0], sg, 2, false, &used, 10000);
	result(ok && used == 1 && setup_in[0] == VIRTIO_SCSI_S_FAILURE,
	       "scsi-tmf-short-request-failure", "ok %d used %u response %u",
	       ok, used, setup_in[0]);

	/* LUN reset with I/O in flight on that LUN and on another one. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	engine_start(&fe, NQ, 0, true, live_mask & 3, 11);
	ok = engine_wait_ok(&fe, 100, 60000);
	r = tmf(1, 0, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0);
	msleep(300);
	fe.stop = true;
	engine_join(&fe, &t0);
	result(ok && r == SQCQ_VIRTIO_SCSI_S_FUNCTION_COMPLETE,
	       "scsi-tmf-lun-reset-under-io", "running %d response %d", ok, r);
	result(!fe.hung, "scsi-tmf-lun-reset-under-io-no-hang", "%s", fe.why);
	result(!fe.bad && fe.done == fe.submitted,
	       "scsi-tmf-lun-reset-under-io-all-answered",
	       "%lu bad, %lu of %lu answered: %s", fe.bad, fe.done,
	       fe.submitted, fe.why);
	result(clear_ua_all(), "scsi-unit-attention-cleared-after-reset", "-");
}

/* ---- events ---- */

static struct virtio_scsi_event *evbuf[QNUM];

static void ev_post(unsigned int n, uint32_t len)
{
	struct cvq *q = &vqs[1];

	while (n--) {
		struct virtio_scsi_event *ev = buf_alloc(sizeof(*ev) + 16);
		uint16_t h;

		memset(ev, 0xee, sizeof(*ev) + 16);
		h = cvq_desc(q, gpa(ev), len, VRING_DESC_F_WRITE, 0);
		evbuf[h] = ev;
		cvq_publish(q, h);
	}
	cvq_kick(q);
}

/* The next used event buffer (false: none within @ms). */
static bool ev_next(struct virtio_scsi_event *out, uint32_t *len,
		    unsigned int ms)
{
	struct cvq *q = &vqs[1];
	struct vring_used_elem *e;
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (load16(&q->used->idx) == q->used_seen) {
		if (elapsed_ms(&t0) > ms)
			return false;
		usleep(1000);
	}
	e = &q->used->ring[q->used_seen % q->num];
	q->used_seen++;
	*len = e->len;
	memcpy(out, evbuf[e->id % QNUM], sizeof(*out));
	return true;
}

/*
 * An event's LUN bytes, exactly as Linux guests read them ((lun[2] << 8) |
 * lun[3], unmasked) and QEMU writes them: flat space (0x40) only from 256.
 */
static bool ev_lun_is(const uint8_t lun[8], unsigned int l)
{
	static const uint8_t zero[4];

	return lun[2] == (l >= 256 ? (0x40 | (l >> 8)) : 0) &&
	       lun[3] == (l & 0xff) && !memcmp(lun + 4, zero, 4);
}

static bool ev_is(const struct virtio_scsi_event *ev, uint32_t event,
		  uint32_t reason, uint8_t target, unsigned int lun)
{
	return ev->event == event && ev->reason == reason && ev->lun[0] == 1 &&
	       ev->lun[1] == target && ev_lun_is(ev->lun, lun);
}

static const char *ev_str(bool ok, uint32_t len,
			  const struct virtio_scsi_event *ev)
{
	static char b[128];

	if (!ok)
		return "no event";
	snprintf(b, sizeof(b),
		 "len %u event 0x%x reason %u lun %02x %02x %02x %02x", len,
		 ev->event, ev->reason, ev->lun[0], ev->lun[1], ev->lun[2],
		 ev->lun[3]);
	return b;
}

static uint32_t events_missed(int fd)
{
	uint32_t v = 0xdead;

	if (ioctl(fd, VHOST_SCSI_GET_EVENTS_MISSED, &v))
		return 0xffffffff;
	return v;
}

static void t_events(int fd)
{
	const uint32_t RESET = VIRTIO_SCSI_T_TRANSPORT_RESET;
	struct virtio_scsi_event ev;
	unsigned int luns[16], i;
	uint32_t len, one = 1;
	struct sres s;
	uint64_t bytes = 0;
	bool ok, seq;
	int n;

	ev_post(2, sizeof(ev));
	result(hook("sqcq_target_add_lun %s %s 1 2 8", fabric, wwpn),
	       "scsi-hotplug-add-lun", "hook failed");
	ok = ev_next(&ev, &len, 10000);
	result(ok && len == sizeof(ev) &&
	       ev_is(&ev, RESET, VIRTIO_SCSI_EVT_RESET_RESCAN, 1, 2),
	       "scsi-hotplug-rescan-event", "%s", ev_str(ok, len, &ev));
	result(clear_ua(1, 2) && capacity16(1, 2, &bytes, &s) &&
	       bytes == 8u << 20, "scsi-hotplug-new-lun-works",
	       "%llu bytes", (unsigned long long)bytes);
	n = report_luns(1, luns, 16, &s);
	result(n == 3 && has_lun(luns, n, 2), "scsi-hotplug-report-luns-three",
	       "%d luns", n);
	result(hook("sqcq_target_del_lun %s %s 1 2", fabric, wwpn),
	       "scsi-hotplug-del-lun", "hook failed");
	ok = ev_next(&ev, &len, 10000);
	result(ok && len == sizeof(ev) &&
	       ev_is(&ev, RESET, VIRTIO_SCSI_EVT_RESET_REMOVED, 1, 2),
	       "scsi-hotplug-removed-event", "%s", ev_str(ok, len, &ev));
	tur(1, 2, &s);
	result(check_illegal_lun(&s), "scsi-hotplug-removed-lun-gone", "%s",
	       sres_str(&s));

	/* No buffer posted: the event waits for one. */
	result(hook("sqcq_target_add_lun %s %s 1 3 8", fabric, wwpn),
	       "scsi-hotplug-add-lun-without-buffer", "hook failed");
	msleep(200);
	result(events_missed(fd) == 0, "scsi-event-pending-is-not-missed",
	       "events missed %u", events_missed(fd));
	/* A buffer too short for an event is returned empty first. */
	ev_post(1, 8);
	ev_post(1, sizeof(ev));
	ok = ev_next(&ev, &len, 10000);
	result(ok && len == 0, "scsi-event-short-buffer-returned-empty",
	       "%s", ev_str(ok, len, &ev));
	ok = ev_next(&ev, &len, 10000);
	result(ok && len == sizeof(ev) &&
	       ev_is(&ev, RESET, VIRTIO_SCSI_EVT_RESET_RESCAN, 1, 3),
	       "scsi-event-delivered-when-buffer-posted", "%s",
	       ev_str(ok, len, &ev));
	ev_post(1, sizeof(ev));
	result(hook("sqcq_target_del_lun %s %s 1 3", fabric, wwpn),
	       "scsi-hotplug-del-lun3", "hook failed");
	ok = ev_next(&ev, &len, 10000);
	result(ok && ev_is(&ev, RESET, VIRTIO_SCSI_EVT_RESET_REMOVED, 1, 3),
	       "scsi-hotplug-removed-event-lun3", "%s", ev_str(ok, len, &ev));

	/* VHOST_SCSI_SET_EVENTS_MISSED: reported on the next buffer. */
	expect("scsi-set-events-missed",
	       ioctl(fd, VHOST_SCSI_SET_EVENTS_MISSED, &one), 0);
	result(events_missed(fd) == 1, "scsi-get-events-missed-set",
	       "%u", events_missed(fd));
	ev_post(1, sizeof(ev));
	ok = ev_next(&ev, &len, 10000);
	result(ok && len == sizeof(ev) &&
	       ev.event == (VIRTIO_SCSI_T_NO_EVENT | VIRTIO_SCSI_T_EVENTS_MISSED),
	       "scsi-events-missed-delivered", "%s", ev_str(ok, len, &ev));
	result(events_missed(fd) == 0, "scsi-events-missed-cleared", "%u",
	       events_missed(fd));

	/* 66 events with no buffer: 64 are kept, then EVENTS_MISSED. */
	result(relink_lun(2, 0, 33), "scsi-relink-lun-33-times", "-");
	result(events_missed(fd) == 1, "scsi-event-queue-overflow-sets-missed",
	       "%u", events_missed(fd));
	ev_post(70, sizeof(ev));
	seq = true;
	for (i = 0; i < 64; i++) {
		ok = ev_next(&ev, &len, 10000);
		if (!ok)
			break;
		if (i == 0)
			result(ev.event == (RESET | VIRTIO_SCSI_T_EVENTS_MISSED),
			       "scsi-event-queue-first-carries-missed", "%s",
			       ev_str(ok, len, &ev));
		else
			seq &= ev.event == RESET;
		seq &= len == sizeof(ev) && ev.lun[1] == 2 &&
		       ev_lun_is(ev.lun, 0) &&
		       ev.reason == (i & 1 ? VIRTIO_SCSI_EVT_RESET_RESCAN :
				     VIRTIO_SCSI_EVT_RESET_REMOVED);
	}
	result(i == 64 && seq, "scsi-event-queue-64-in-order",
	       "%u events, in order %d", i, seq);
	ok = ev_next(&ev, &len, 500);
	result(!ok, "scsi-event-queue-nothing-more", "%s", ev_str(ok, len, &ev));
	result(events_missed(fd) == 0, "scsi-event-queue-missed-cleared", "%u",
	       events_missed(fd));
	result(clear_ua_all(), "scsi-unit-attention-cleared-after-hotplug", "-");
}

/* ---- fault cases ---- */

static void t_clear_under_io(int fd)
{
	unsigned long ok0, ok1;
	struct timespec t0;
	char p[512];
	struct sres s;
	bool ok;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	engine_start(&fe, NQ, 0, true, live_mask, 21);
	ok = engine_wait_ok(&fe, 100, 60000);
	result(ok, "scsi-clear-under-io-running", "engine did not get going");
	expect("scsi-clear-endpoint-under-io",
	       clear_endpoint(fd, wwpn, "scsi-clear-endpoint-under-io"), 0);
	/*
	 * What was in flight finished before CLEAR_ENDPOINT returned; what
	 * the queues publish now stays in the rings (QEMU's stop and cont
	 * carry it to the next SET_ENDPOINT), never answered BAD_TARGET.
	 */
	msleep(200);
	ok0 = __atomic_load_n(&fe.total_ok, __ATOMIC_RELAXED);
	msleep(1000);
	ok1 = __atomic_load_n(&fe.total_ok, __ATOMIC_RELAXED);
	result(ok1 == ok0, "scsi-clear-under-io-requests-wait-in-ring",
	       "%lu answered in the second after the clear", ok1 - ok0);
	fe.stop = true;
	expect("scsi-set-endpoint-under-waiting-io",
	       set_endpoint(fd, wwpn, "scsi-set-endpoint-under-waiting-io"), 0);
	engine_join(&fe, &t0);
	result(!fe.hung, "scsi-clear-under-io-no-hang", "%s", fe.why);
	result(!fe.bad && !fe.check && !fe.aborted && !fe.bad_target &&
	       fe.done == fe.submitted && fe.ok == fe.submitted,
	       "scsi-clear-under-io-waiting-requests-served-good",
	       "%lu bad, %lu check, %lu aborted, %lu bad_target, %lu good of %lu, %lu answered: %s",
	       fe.bad, fe.check, fe.aborted, fe.bad_target, fe.ok,
	       fe.submitted, fe.done, fe.why);

	/* Unbound: the empty TPG's nexus can go, and then the TPG. */
	expect("scsi-clear-endpoint-again",
	       clear_endpoint(fd, wwpn, "scsi-clear-endpoint-again"), 0);
	tpg_path(p, sizeof(p), 3, "nexus");
	expect("scsi-unbound-tpg-nexus-drop", cfs_write(p, "NULL"), 0);
	tpg_path(p, sizeof(p), 3, NULL);
	expect("scsi-unbound-tpg-rmdir", rmdir(p), 0);

	expect("scsi-set-endpoint-after-clear",
	       set_endpoint(fd, wwpn, "scsi-set-endpoint-after-clear"), 0);
	tur(3, 0, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_BAD_TARGET,
	       "scsi-removed-tpg-bad-target", "%s", sres_str(&s));
	result(clear_ua_all(), "scsi-unit-attention-cleared-after-rebind", "-");
	engine_strict_run("scsi-io-after-rebind", NQ, 100, live_mask, 22, 400);
}

static void t_lun_unlink_under_io(void)
{
	struct virtio_scsi_event ev;
	struct timespec t0;
	struct sres s;
	uint32_t len;
	bool ok;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	engine_start(&fe, NQ, 0, true, live_mask & 3, 31);
	ok = engine_wait_ok(&fe, 100, 60000);
	result(ok, "scsi-lun-unlink-under-io-running", "engine did not get going");
	result(hook("sqcq_target_del_lun %s %s 1 1", fabric, wwpn),
	       "scsi-lun-unlink-under-io", "hook failed");
	msleep(500);
	fe.stop = true;
	engine_join(&fe, &t0);
	live_mask &= ~2u;
	result(!fe.hung, "scsi-lun-unlink-under-io-no-hang", "%s", fe.why);
	result(!fe.bad && fe.done == fe.submitted,
	       "scsi-lun-unlink-under-io-all-answered",
	       "%lu bad, %lu of %lu answered: %s", fe.bad, fe.done,
	       fe.submitted, fe.why);
	result(fe.check > 0, "scsi-lun-unlink-under-io-errors-after",
	       "%lu check conditions", fe.check);
	/* Six event buffers are left from the overflow check. */
	ok = ev_next(&ev, &len, 10000);
	result(ok && ev_is(&ev, VIRTIO_SCSI_T_TRANSPORT_RESET,
			   VIRTIO_SCSI_EVT_RESET_REMOVED, 1, 1),
	       "scsi-lun-unlink-removed-event", "%s", ev_str(ok, len, &ev));
	tur(1, 1, &s);
	result(check_illegal_lun(&s), "scsi-unlinked-lun-illegal-request", "%s",
	       sres_str(&s));
	result(clear_ua_all(), "scsi-unit-attention-cleared-after-unlink", "-");
}

/* Wait up to @ms for @pid to end; its status in *@status. */
static bool wait_child(pid_t pid, int *status, unsigned int ms)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (waitpid(pid, status, WNOHANG) != pid) {
		if (elapsed_ms(&t0) > ms)
			return false;
		msleep(20);
	}
	return true;
}

/* A child's end: say "ready" on @fd, then wait to be killed (5 min at most). */
static void __attribute__((noreturn)) child_ready_then_wait(int fd)
{
	if (write(fd, "r", 1) != 1)
		_exit(5);
	alarm(300);
	for (;;)
		pause();
}

static void t_sigkill(int fd)
{
	struct pollfd pfd;
	int p[2], n0, status = 0;
	unsigned int i;
	char c = 0;
	struct sres s;
	pid_t pid;
	bool ok;

	expect("scsi-sigkill-parent-clear-endpoint",
	       clear_endpoint(fd, wwpn, "scsi-sigkill-parent-clear-endpoint"), 0);
	n0 = dbg_devs(0, NULL, 0);
	if (pipe(p)) {
		result(false, "scsi-sigkill-pipe", "%s", strerror(errno));
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char why[200];
		int cfd;

		close(p[0]);
		cfd = scsi_dev_open(node, wwpn, why, sizeof(why));
		if (cfd < 0) {
			dprintf(2, "sigkill child: %s\n", why);
			_exit(3);
		}
		scsi_fd = cfd;
		engine_start(&fe, NQ, 0, true, live_mask, 41);
		if (!engine_wait_ok(&fe, 200, 60000))
			_exit(4);
		child_ready_then_wait(p[1]);
	}
	close(p[1]);
	pfd = (struct pollfd){ .fd = p[0], .events = POLLIN };
	ok = pid > 0 && poll(&pfd, 1, 120000) == 1 && read(p[0], &c, 1) == 1 &&
	     c == 'r';
	close(p[0]);
	result(ok, "scsi-sigkill-client-running", "child not ready (pid %d)",
	       pid);
	if (pid <= 0)
		return;
	result(worker_alive(pid), "scsi-sigkill-worker-seen", "pid %d", pid);
	result(dbg_devs(0, NULL, 0) == n0 + 1, "scsi-sigkill-debugfs-seen",
	       "%d devices, before %d", dbg_devs(0, NULL, 0), n0);
	kill(pid, SIGKILL);
	ok = wait_child(pid, &status, 60000);
	result(ok && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	       "scsi-sigkill-device-released", "reaped %d status 0x%x", ok,
	       status);
	if (!ok)
		return;
	result(!worker_alive(pid), "scsi-sigkill-no-worker-left", "pid %d", pid);
	result(dbg_devs(0, NULL, 0) == n0, "scsi-sigkill-debugfs-gone",
	       "%d devices, before %d", dbg_devs(0, NULL, 0), n0);
	/* The TPGs are free again: this device binds them. */
	expect("scsi-sigkill-tpg-released",
	       set_endpoint(fd, wwpn, "scsi-sigkill-tpg-released"), 0);
	/* The child wrote the disks: what they hold is unknown now. */
	for (i = 0; i < ndisks; i++)
		memset(disks[i].valid, 0, disks[i].bytes / SECT);
	ok = clear_ua(1, 0);
	tur(1, 0, &s);
	result(ok && good(&s), "scsi-sigkill-io-after", "%s", sres_str(&s));
}

/* How many times the kernel log holds @needle (0 when it cannot be read). */
static int klog_count(const char *needle)
{
	int len = klogctl(10, NULL, 0), n = 0;	/* SYSLOG_ACTION_SIZE_BUFFER */
	char *buf, *p;

	if (len <= 0)
		return 0;
	buf = malloc(len + 1);
	if (!buf)
		return 0;
	len = klogctl(3, buf, len);		/* SYSLOG_ACTION_READ_ALL */
	if (len > 0) {
		buf[len] = '\0';
		for (p = strstr(buf, needle); p; p = strstr(p + 1, needle))
			n++;
	}
	free(buf);
	return n;
}

/*
 * Lines a guest or VMM can trigger at will are rate limited per device:
 * one device that binds and clears its endpoint in a loop uses up its own
 * budget (10 lines a minute), and another device's line still shows.
 */
static void t_log_budget(int fd)
{
	char needle[160], why[200];
	int i, n0, fd2, status = 0;
	bool ok = false;
	pid_t pid;

	snprintf(needle, sizeof(needle), "endpoint %s bound", wwpn);
	for (i = 0; i < 12; i++)
		if (clear_endpoint(fd, wwpn, "scsi-log-budget-clear") ||
		    set_endpoint(fd, wwpn, "scsi-log-budget-set"))
			break;
	result(i == 12, "scsi-log-budget-flood", "%d of 12 cycles", i);
	expect("scsi-log-budget-clear-endpoint",
	       clear_endpoint(fd, wwpn, "scsi-log-budget-clear-endpoint"), 0);
	n0 = klog_count(needle);
	/* Device B in a child: scsi_dev_open() lays out the rings anew. */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		fd2 = scsi_dev_open(node, wwpn, why, sizeof(why));
		if (fd2 < 0)
			dprintf(2, "log-budget device B: %s\n", why);
		_exit(fd2 < 0 ? 3 : 0);
	}
	ok = pid > 0 && wait_child(pid, &status, 60000) &&
	     WIFEXITED(status) && !WEXITSTATUS(status);
	result(ok, "scsi-log-budget-second-device", "status 0x%x", status);
	result(klog_count(needle) == n0 + 1,
	       "scsi-log-budget-second-device-line-shown",
	       "\"%s\" lines %d -> %d", needle, n0, klog_count(needle));
	/* Its release unbinds the TPGs: wait for them to be free again. */
	for (i = 0; i < 400; i++) {
		ok = !set_endpoint(fd, wwpn, "scsi-log-budget-rebind");
		if (ok || errno != EBUSY)
			break;
		msleep(100);
	}
	result(ok, "scsi-log-budget-rebind", "%s", ok ? "ok" : strerror(errno));
}

/* Whether a thread of this process sleeps uninterruptibly (state D). */
static bool my_thread_in_d(void)
{
	char path[300], buf[512], *p;
	struct dirent *de;
	bool d_state = false;
	DIR *d;

	d = opendir("/proc/self/task");
	if (!d)
		return false;
	while ((de = readdir(d)) && !d_state) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat",
			 de->d_name);
		p = read_file(path, buf, sizeof(buf)) ? strrchr(buf, ')') : NULL;
		d_state = p && p[1] == ' ' && p[2] == 'D';
	}
	closedir(d);
	return d_state;
}

struct clear_arg {
	int fd, ret;
};

static void *clear_run(void *a)
{
	struct clear_arg *c = a;

	c->ret = clear_endpoint(c->fd, wwpn, "scsi-stall-clear-endpoint");
	return NULL;
}

/*
 * One guest's stall stays its own: device A's worker is held in a page
 * fault on guest memory (a userfaultfd page whose fault this test answers
 * only at the end, as FUSE or a migration's postcopy can keep one), A's
 * CLEAR_ENDPOINT waits for that worker; meanwhile another device's
 * SET_ENDPOINT must come back (here refused, EBUSY: the targets are still
 * A's), not wait for A's fault with the global endpoint lock held.
 */
static void t_stall_cross_tenant(int fd)
{
	uint8_t *page = mem + HOLE_OFF, cdb[16];
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_zeropage zp = { .mode = 0 };
	struct clear_arg ca = { .fd = fd, .ret = -1 };
	struct virtio_scsi_cmd_req *req;
	struct virtio_scsi_cmd_resp *rsp;
	struct cvq *q = &vqs[SYNC_VQ];
	bool faulted = false, cleared = false, b_back = false, thread = false;
	struct uffd_msg msg;
	struct pollfd pfd;
	uint16_t head;
	int uffd, status = 0, i;
	pthread_t th;
	pid_t pid = 0;

	uffd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0 && errno == ENOSYS) {
		/* The sanitizer kernel (tests/debug/debug.config) has none. */
		printf("SKIP: host %sscsi-stall-cross-tenant not run: this kernel has no userfaultfd (CONFIG_USERFAULTFD); the stock kernels run it\n",
		       name_prefix);
		return;
	}
	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) || !unmap_hole() ||
	    mmap(page, HOLE_LEN, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != page) {
		result(false, "scsi-stall-userfaultfd", "%s", strerror(errno));
		goto out;
	}
	reg.range.start = (uintptr_t)page;
	reg.range.len = 4096;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg)) {
		result(false, "scsi-stall-userfaultfd", "register: %s",
		       strerror(errno));
		goto out;
	}
	/* A WRITE(10) of 8 blocks whose data is that page, not waited for. */
	req = buf_alloc(HDR_SZ);
	rsp = buf_alloc(RSP_SZ);
	cdb_rw(cdb, true, false, 600, 8);
	lun_encode(req->lun, 1, 0);
	req->tag = tag_seq++;
	memcpy(req->cdb, cdb, 10);
	memset(disks[0].valid + 600, 0, 8);	/* zeros, if written */
	head = cvq_desc(q, gpa(rsp), RSP_SZ, VRING_DESC_F_WRITE, 0);
	head = cvq_desc(q, gpa(page), 4096, VRING_DESC_F_NEXT, head);
	head = cvq_desc(q, gpa(req), HDR_SZ, VRING_DESC_F_NEXT, head);
	cvq_publish(q, head);
	cvq_kick(q);
	pfd = (struct pollfd){ .fd = uffd, .events = POLLIN };
	faulted = poll(&pfd, 1, 30000) == 1 &&
		  read(uffd, &msg, sizeof(msg)) == sizeof(msg) &&
		  msg.event == UFFD_EVENT_PAGEFAULT;
	result(faulted, "scsi-stall-worker-held-in-fault", "%s",
	       faulted ? "fault seen" : "no fault within 30 s");
	if (!faulted)
		goto resolve;
	/* A's CLEAR_ENDPOINT now waits for its worker. */
	thread = !pthread_create(&th, NULL, clear_run, &ca);
	if (!thread) {
		result(false, "scsi-stall-clear-thread", "%s", strerror(errno));
		goto resolve;
	}
	for (i = 0; i < 100 && !my_thread_in_d(); i++)
		msleep(50);
	msleep(500);
	result(my_thread_in_d(), "scsi-stall-clear-endpoint-waits",
	       "no thread of ours in state D");
	/* Device B, in a child process of its own memory. */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char why[200];
		int bfd = scsi_dev_open(node, wwpn, why, sizeof(why));

		_exit(bfd < 0 && errno == EBUSY ? 0 : bfd < 0 ? 3 : 4);
	}
	b_back = pid > 0 && wait_child(pid, &status, 10000);
	result(b_back && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "scsi-stall-other-device-set-endpoint-returns",
	       "%s (status 0x%x)", b_back ? "returned" :
	       "still blocked 10 s, while A's worker is held", status);
resolve:
	zp.range.start = (uintptr_t)page;
	zp.range.len = 4096;
	if (faulted && ioctl(uffd, UFFDIO_ZEROPAGE, &zp))
		result(false, "scsi-stall-fault-answered", "%s",
		       strerror(errno));
	if (thread) {
		pthread_join(th, NULL);
		cleared = ca.ret == 0;
		result(cleared, "scsi-stall-clear-endpoint-after-fault",
		       "ret %d", ca.ret);
		if (pid > 0 && !b_back)
			wait_child(pid, &status, 60000);
	}
	/* The command ends once A's worker runs again. */
	result(cvq_wait_used(q, q->avail_idx, 30000),
	       "scsi-stall-command-ends", "no used entry");
	q->used_seen = q->avail_idx;
out:
	if (uffd >= 0)
		close(uffd);
	result(remap_hole(), "scsi-stall-remap-guest-memory", "%s",
	       strerror(errno));
	/* B may have bound the targets after A let go: wait for its release. */
	for (i = 0; i < 400; i++) {
		cleared = !set_endpoint(fd, wwpn, "scsi-stall-rebind");
		if (cleared || errno != EBUSY)
			break;
		msleep(100);
	}
	result(cleared || errno == EEXIST, "scsi-stall-rebind", "%s",
	       cleared ? "ok" : strerror(errno));
}

/* The CLONE_VM sibling of t_sigkill_clone(): pipes and the device. */
struct sibling {
	int fd, go, res;
};

/*
 * Runs in the owner's mm and fd table (CLONE_VM | CLONE_FILES) and outlives
 * the owner: once told to, start ring 2 again with a fresh kick eventfd
 * and kick it; report the ioctl's errno (0: started).  Raw calls only: the
 * owner's stdio is shared.
 */
static int sibling_run(void *arg)
{
	struct sibling *sb = arg;
	uint64_t one = 1;
	int efd, err = 0;
	char c;

	if (read(sb->go, &c, 1) != 1)
		_exit(1);
	efd = eventfd(0, EFD_NONBLOCK);
	if (efd < 0 || vring_file(sb->fd, VHOST_SET_VRING_KICK, 2, efd))
		err = efd < 0 ? EBADF : errno;
	else if (write(efd, &one, sizeof(one)) != sizeof(one))
		err = EIO;
	/* Long enough for whoever would serve the kick to do it. */
	if (!err)
		msleep(1000);
	if (write(sb->res, &err, sizeof(err)) != sizeof(err))
		_exit(2);
	_exit(0);
}

/*
 * The owner is killed while a process sharing its mm and its fd table
 * (CLONE_VM, without CLONE_THREAD: not of its thread group) survives and
 * starts a ring again.  Where workers are vhost_tasks they died with the
 * owner, and the ring must not start: a ring served by the reaper, a
 * kworker, would read and pin memory of whatever mm that CPU has.  Where
 * workers are kthreads they live on with the mm, and the ring starts.
 */
static void t_sigkill_clone(int fd)
{
	int ready[2], go[2], res[2], n0, status = 0, err = -1;
	bool ok, vtask = false;
	struct pollfd pfd;
	char c = 0;
	pid_t pid;

	expect("scsi-clone-parent-clear-endpoint",
	       clear_endpoint(fd, wwpn, "scsi-clone-parent-clear-endpoint"), 0);
	n0 = dbg_devs(0, NULL, 0);
	if (pipe(ready) || pipe(go) || pipe(res)) {
		result(false, "scsi-clone-pipes", "%s", strerror(errno));
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		static struct sibling sb;
		size_t stack_len = 256 << 10;
		char why[200], *stack;

		sb.fd = scsi_dev_open(node, wwpn, why, sizeof(why));
		if (sb.fd < 0) {
			dprintf(2, "clone owner: %s\n", why);
			_exit(3);
		}
		sb.go = go[0];
		sb.res = res[1];
		stack = malloc(stack_len);
		if (!stack || clone(sibling_run, stack + stack_len,
				    CLONE_VM | CLONE_FILES | SIGCHLD, &sb) < 0)
			_exit(4);
		child_ready_then_wait(ready[1]);
	}
	pfd = (struct pollfd){ .fd = ready[0], .events = POLLIN };
	ok = pid > 0 && poll(&pfd, 1, 120000) == 1 &&
	     read(ready[0], &c, 1) == 1 && c == 'r';
	result(ok, "scsi-clone-owner-and-sibling-running", "owner pid %d", pid);
	if (ok) {
		char want[32], tasks[64];

		snprintf(want, sizeof(want), "vhost-sqcq-%d", pid);
		want[15] = '\0';
		snprintf(tasks, sizeof(tasks), "/proc/%d/task", pid);
		vtask = tasks_named(tasks, want) > 0;
		kill(pid, SIGKILL);
		ok = wait_child(pid, &status, 60000);
	}
	result(ok, "scsi-clone-owner-killed", "owner pid %d status 0x%x",
	       pid, status);
	if (ok && write(go[1], "g", 1) == 1) {
		pfd = (struct pollfd){ .fd = res[0], .events = POLLIN };
		if (poll(&pfd, 1, 60000) != 1 ||
		    read(res[0], &err, sizeof(err)) != sizeof(err))
			err = -1;
	}
	if (vtask)
		result(err == ESRCH, "scsi-clone-ring-start-refused-after-owner-killed",
		       "workers die with the owner: %s, want ESRCH",
		       err > 0 ? strerror(err) : err ? "no answer" : "started");
	else
		result(err == 0, "scsi-clone-ring-starts-with-kthread-worker",
		       "the worker keeps the mm: %s, want started",
		       err > 0 ? strerror(err) : err ? "no answer" : "started");
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	close(res[0]);
	close(res[1]);
	/*
	 * The sibling's exit (init reaps it) drops the last file reference;
	 * the release removes the debugfs entry, then unbinds the TPGs.
	 */
	for (status = 0; status < 300 && dbg_devs(0, NULL, 0) != n0; status++)
		msleep(100);
	result(dbg_devs(0, NULL, 0) == n0, "scsi-clone-device-released",
	       "%d devices, before %d", dbg_devs(0, NULL, 0), n0);
	do {
		ok = !set_endpoint(fd, wwpn, "scsi-clone-tpg-released");
		if (ok || errno != EBUSY)
			break;
		msleep(100);
	} while (++status < 400);
	result(ok, "scsi-clone-tpg-released", "SET_ENDPOINT: %s",
	       ok ? "ok" : strerror(errno));
}

struct tclose {
	int fd, ret, err;
};

static void *tclose_run(void *a)
{
	struct tclose *t = a;

	t->ret = close(t->fd);
	t->err = errno;
	return NULL;
}

/* Close the bound device with requests in flight (nobody waits for them). */
static void t_close_in_flight(int fd)
{
	struct tclose tc = { .fd = fd, .ret = -1 };
	struct timespec t0, dl;
	char dir[512] = "";
	unsigned long inflight;
	pthread_t th;
	bool ok;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	engine_start(&fe, NQ, 0, true, live_mask, 51);
	ok = engine_wait_ok(&fe, 100, 60000);
	fe.abandon = true;
	engine_join(&fe, &t0);
	inflight = fe.submitted - fe.done;
	result(ok && inflight > 0, "scsi-close-with-io-in-flight-running",
	       "running %d, %lu in flight", ok, inflight);
	if (pthread_create(&th, NULL, tclose_run, &tc)) {
		result(false, "scsi-close-with-io-in-flight", "pthread_create");
		return;
	}
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 60;
	if (pthread_timedjoin_np(th, NULL, &dl)) {
		result(false, "scsi-close-with-io-in-flight", "close blocked > 60 s");
		printf("host client: %d passed, %d failed (gave up: hung close)\n",
		       passed, failed);
		fflush(stdout);
		_exit(1);
	}
	result(tc.ret == 0, "scsi-close-with-io-in-flight", "%s",
	       strerror(tc.err));
	result(!worker_alive(getpid()), "scsi-close-no-worker-left", "-");
	dbg_devs(getpid(), dir, sizeof(dir));
	result(!dir[0], "scsi-close-debugfs-gone", "%s", dir);
}

/* ---- hostile-guest checks (each one a hole a review found) ---- */

/* A "key: value" number of the debugfs "targets" file of our device. */
static bool check_bad_cdb(const struct sres *s)
{
	uint8_t key = 0, asc = 0;

	sense_of(&s->r, &key, &asc);
	return s->done && s->r.response == VIRTIO_SCSI_S_OK &&
	       s->r.status == 0x02 && key == 0x5 && asc == 0x24 &&
	       s->used == RSP_SZ;
}

/*
 * Data buffers whose direction contradicts the CDB.  The target core's
 * emulated commands write their answer into whatever buffer they get: a
 * device-readable page (pinned read-only) backed by a private file mapping
 * is the page cache itself, so a host that wrote into it would change the
 * file.  Each such command must be answered CHECK CONDITION instead.
 */
static void t_direction(void)
{
	static const char path[] = "/tmp/sqcq-direction-test";
	uint8_t *page = mem + HOLE_OFF, cdb[16], *b, want[4096], got[4096];
	bool mapped, same_file, same_map;
	struct sres s;
	int ffd;

	memset(want, 0xa5, sizeof(want));
	ffd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	mapped = ffd >= 0 && pwrite(ffd, want, sizeof(want), 0) == 4096 &&
		 mmap(page, 4096, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_FIXED, ffd, 0) == page;
	result(mapped, "scsi-direction-private-file-mapped", "%s",
	       strerror(errno));
	if (!mapped)
		goto out;
	/* Read fault only: the mapping shows the page cache page. */
	result(page[0] == 0xa5, "scsi-direction-private-file-readable",
	       "0x%x", page[0]);

	memset(cdb, 0, sizeof(cdb));
	cdb[0] = 0x12;			/* INQUIRY */
	cdb[4] = 96;
	scsi_cmd(1, 0, cdb, 6, gpa(page), 96, false, &s);
	result(check_bad_cdb(&s), "scsi-inquiry-readable-buffer-check-condition",
	       "%s", sres_str(&s));
	memset(cdb, 0, sizeof(cdb));
	cdb[0] = 0x1a;			/* MODE SENSE(6) */
	cdb[2] = 0x3f;
	cdb[4] = 192;
	scsi_cmd(1, 0, cdb, 6, gpa(page), 192, false, &s);
	result(check_bad_cdb(&s), "scsi-mode-sense-readable-buffer-check-condition",
	       "%s", sres_str(&s));
	cdb_rw(cdb, false, false, 0, 8);	/* READ(10) into it */
	scsi_cmd(1, 0, cdb, 10, gpa(page), 4096, false, &s);
	result(check_bad_cdb(&s), "scsi-read-readable-buffer-check-condition",
	       "%s", sres_str(&s));
	memset(cdb, 0, sizeof(cdb));
	cdb[0] = 0xa0;			/* REPORT LUNS */
	put_be(cdb + 6, 256, 4);
	scsi_cmd(1, 0, cdb, 12, gpa(page), 256, false, &s);
	result(check_bad_cdb(&s), "scsi-report-luns-readable-buffer-check-condition",
	       "%s", sres_str(&s));

	/*
	 * Data either way (ATA PASS-THROUGH, here IDENTIFY DEVICE "from
	 * device"; a passthrough backstore hands the CDB to a real HBA,
	 * which follows the CDB, not the descriptors): a device-readable
	 * buffer is pinned for writing too, so on a page mapped read-only
	 * the pin fails and the request is refused before any backstore
	 * sees it.
	 */
	memset(cdb, 0, sizeof(cdb));
	cdb[0] = 0x85;			/* ATA PASS-THROUGH(16) */
	cdb[1] = 4 << 1;		/* PIO data-in */
	cdb[2] = 0x0e;			/* T_DIR from device, blocks, count */
	cdb[6] = 1;
	cdb[14] = 0xec;			/* IDENTIFY DEVICE */
	if (mprotect(page, 4096, PROT_READ)) {
		result(false, "scsi-ata-readable-buffer-read-only-map", "%s",
		       strerror(errno));
	} else {
		scsi_cmd(1, 0, cdb, 16, gpa(page), SECT, false, &s);
		result(s.done && s.r.response == VIRTIO_SCSI_S_FAILURE,
		       "scsi-ata-readable-buffer-on-read-only-page-refused",
		       "%s", sres_str(&s));
		mprotect(page, 4096, PROT_READ | PROT_WRITE);
	}
	same_file = pread(ffd, got, sizeof(got), 0) == 4096 &&
		    !memcmp(got, want, sizeof(got));
	same_map = !memcmp(page, want, 4096);
	result(same_file && same_map, "scsi-direction-private-file-unchanged",
	       "file %s, mapping %s", same_file ? "same" : "CHANGED",
	       same_map ? "same" : "CHANGED");

	/* The other way: a WRITE whose data buffer is device-writable. */
	b = buf_alloc(SECT);
	memset(b, 0x3c, SECT);
	cdb_rw(cdb, true, false, 300, 1);
	scsi_cmd(1, 0, cdb, 10, gpa(b), SECT, true, &s);
	disks[0].valid[300] = 0;	/* whatever happened, stop trusting it */
	result(check_bad_cdb(&s), "scsi-write-writable-buffer-check-condition",
	       "%s", sres_str(&s));
	result(dbg_dev_key("targets", "bad_direction") >= 5,
	       "scsi-direction-debugfs-counted", "%lld",
	       dbg_dev_key("targets", "bad_direction"));
	tur(1, 0, &s);
	result(good(&s), "scsi-direction-queue-still-works", "%s",
	       sres_str(&s));
out:
	if (ffd >= 0)
		close(ffd);
	unlink(path);
	result(remap_hole(), "scsi-direction-remap-guest-memory", "%s",
	       strerror(errno));
}

/*
 * COMPARE AND WRITE of one block (compare data, then write data): answered
 * GOOD or MISCOMPARE, and the command ends once (a fabric that dropped its
 * reference twice trips the kernel's refcount check, which fails the VM).
 */
static void t_compare_and_write(void)
{
	uint8_t cdb[16] = { 0x89 }, *b = buf_alloc(2 * SECT);
	struct sres s;
	uint8_t key = 0, asc = 0;
	int i;

	put_be(cdb + 2, 400, 8);
	cdb[13] = 1;
	for (i = 0; i < 2; i++) {
		memset(b, 0, 2 * SECT);
		scsi_cmd(1, 0, cdb, 16, gpa(b), 2 * SECT, false, &s);
		sense_of(&s.r, &key, &asc);
		result(s.done && s.r.response == VIRTIO_SCSI_S_OK &&
		       (s.r.status == 0 || s.r.status == 0x02),
		       i ? "scsi-compare-and-write-again" : "scsi-compare-and-write",
		       "%s", sres_str(&s));
	}
	disks[0].valid[400] = 0;
	tur(1, 0, &s);
	result(good(&s), "scsi-compare-and-write-queue-still-works", "%s",
	       sres_str(&s));
}

/*
 * COMPARE AND WRITE that fails before it runs -- here because a LUN reset
 * left a unit attention pending -- must be answered CHECK CONDITION, UNIT
 * ATTENTION, write nothing, and end once.  The compare data is zeros (what
 * the target core's never-filled read buffer holds with pages zeroed on
 * allocation) and differs from the block on disk, so the command could not
 * write even had it run.  6.1's core ran the compare and the write from
 * its failure path on such a command and then failed it a second time
 * (refcount underflow in the kernel log, the block overwritten).
 */
static void t_compare_and_write_ua(void)
{
	uint8_t cdb[16] = { 0x89 }, rw[16], *b = buf_alloc(2 * SECT);
	uint8_t *d = buf_alloc(SECT), key = 0, asc = 0;
	struct sres s;
	unsigned int i;
	int r;

	memset(d, 0x5a, SECT);
	cdb_rw(rw, true, false, 401, 1);
	scsi_cmd(1, 0, rw, 10, gpa(d), SECT, false, &s);
	disks[0].valid[401] = 0;
	result(good(&s), "scsi-caw-ua-setup-write", "%s", sres_str(&s));
	r = tmf(1, 0, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0);
	result(r == SQCQ_VIRTIO_SCSI_S_FUNCTION_COMPLETE,
	       "scsi-caw-ua-lun-reset", "response %d", r);

	memset(b, 0, SECT);
	memset(b + SECT, 0xc3, SECT);
	put_be(cdb + 2, 401, 8);
	cdb[13] = 1;
	scsi_cmd(1, 0, cdb, 16, gpa(b), 2 * SECT, false, &s);
	sense_of(&s.r, &key, &asc);
	result(s.done && s.r.response == VIRTIO_SCSI_S_OK &&
	       s.r.status == 0x02 && key == 0x6 && asc == 0x29,
	       "scsi-compare-and-write-unit-attention", "%s", sres_str(&s));

	result(clear_ua_all(), "scsi-caw-ua-cleared", "-");
	memset(d, 0, SECT);
	cdb_rw(rw, false, false, 401, 1);
	scsi_cmd(1, 0, rw, 10, gpa(d), SECT, true, &s);
	for (i = 0; i < SECT && d[i] == 0x5a; i++)
		;
	result(good(&s) && i == SECT,
	       "scsi-compare-and-write-unit-attention-wrote-nothing",
	       "%s; block differs at byte %u (0x%02x)", sres_str(&s), i,
	       i < SECT ? d[i] : 0);
}

/*
 * COMPARE AND WRITE whose data-out comes in two descriptors: the compare
 * block is the last 512 bytes of a page (the rest of the page after it
 * holds 0xee), the write block a buffer elsewhere.  The target core looks
 * for the write block right after the compare block in the first page it
 * gets; the block on disk must still be the write block as sent.
 */
static void t_compare_and_write_split(void)
{
	struct virtio_scsi_cmd_req *req = buf_alloc(HDR_SZ);
	struct virtio_scsi_cmd_resp *rsp = buf_alloc(RSP_SZ);
	uint8_t *area = buf_alloc(3 * 4096), *d = buf_alloc(SECT);
	uint8_t *w = buf_alloc(SECT), rw[16], *b;
	struct seg sg[4];
	struct sres s;
	unsigned int i;

	/* b: the last block of a page of area; the next page is filler. */
	b = area + (4096 - ((uintptr_t)area & 4095)) % 4096 + 4096 - SECT;
	memset(b + SECT, 0xee, 4096);
	memset(d, 0x11, SECT);
	cdb_rw(rw, true, false, 402, 1);
	scsi_cmd(1, 0, rw, 10, gpa(d), SECT, false, &s);
	disks[0].valid[402] = 0;
	result(good(&s), "scsi-caw-split-setup-write", "%s", sres_str(&s));

	memset(b, 0x11, SECT);
	memset(w, 0x77, SECT);
	lun_encode(req->lun, 1, 0);
	req->tag = tag_seq++;
	req->cdb[0] = 0x89;
	put_be(req->cdb + 2, 402, 8);
	req->cdb[13] = 1;
	memset(rsp, 0xee, RSP_SZ);
	sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
	sg[1] = (struct seg){ gpa(b), SECT, false };
	sg[2] = (struct seg){ gpa(w), SECT, false };
	sg[3] = (struct seg){ gpa(rsp), RSP_SZ, true };
	s.done = sync_run(&vqs[SYNC_VQ], sg, 4, false, &s.used, 10000);
	memcpy(&s.r, rsp, RSP_SZ);
	result(good(&s), "scsi-compare-and-write-split-descriptors", "%s",
	       sres_str(&s));

	memset(d, 0, SECT);
	cdb_rw(rw, false, false, 402, 1);
	scsi_cmd(1, 0, rw, 10, gpa(d), SECT, true, &s);
	for (i = 0; i < SECT && d[i] == 0x77; i++)
		;
	result(good(&s) && i == SECT,
	       "scsi-compare-and-write-split-descriptors-wrote-write-block",
	       "%s; block differs at byte %u (0x%02x)", sres_str(&s), i,
	       i < SECT ? d[i] : 0);
}

#define FLOOD_VQ	7
#define FLOOD_NUM	16u
#define FLOOD_ROUNDS	40u

/*
 * A guest that reuses one head: it publishes the same 8 MiB READ again as
 * soon as the host has popped the last batch (avail_event, EVENT_IDX),
 * without waiting for completions.  The host must answer BUSY beyond the
 * ring size instead of pinning and allocating without end.
 */
static void t_inflight_cap(int fd)
{
	struct cvq *q = &vqs[FLOOD_VQ];
	const uint32_t big = 8u << 20;
	struct virtio_scsi_cmd_req *req;
	struct virtio_scsi_cmd_resp *rsp;
	long long busy0, busy, hiwat;
	unsigned int r, i, total = 0;
	bool popped = true, drained;
	uint16_t h;

	cvq_layout(q, FLOOD_VQ, FLOOD_NUM);
	q->kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	q->call = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	q->err = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	expect("scsi-flood-queue-start", cvq_start(fd, q, FLOOD_VQ, false), 0);
	busy0 = dbg_dev_key("targets", "busy");

	req = new_req(1, 0);
	cdb_rw(req->cdb, false, false, 0, big / SECT);
	rsp = new_rsp();
	h = cvq_desc(q, gpa(mem + BIG_OFF), big, VRING_DESC_F_WRITE, 0);
	h = cvq_desc(q, gpa(rsp), RSP_SZ, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, h);
	h = cvq_desc(q, gpa(req), HDR_SZ, VRING_DESC_F_NEXT, h);
	for (r = 0; r < FLOOD_ROUNDS && popped; r++) {
		for (i = 0; i < FLOOD_NUM; i++)
			cvq_publish(q, h);
		total += FLOOD_NUM;
		cvq_kick(q);
		/* The host says where it stopped popping: all of them. */
		popped = wait16(avail_event(q), q->avail_idx, 5000);
	}
	result(popped, "scsi-flood-reused-head-popped", "%u of %u requests",
	       total, FLOOD_ROUNDS * FLOOD_NUM);
	/* Every request is answered exactly once: BUSY or its data. */
	drained = wait16(&q->used->idx, (uint16_t)total, 120000);
	busy = dbg_dev_key("targets", "busy") - busy0;
	hiwat = dbg_dev_key("targets", "inflight_max");
	result(drained, "scsi-flood-all-answered", "used %u of %u",
	       load16(&q->used->idx), total);
	result(busy > 0 && hiwat >= 0 && hiwat <= FLOOD_NUM,
	       "scsi-flood-inflight-capped-at-ring-size",
	       "%lld answered BUSY, at most %lld in flight on one queue (ring %u)",
	       busy, hiwat, FLOOD_NUM);
	vring_state(fd, VHOST_GET_VRING_BASE, FLOOD_VQ, 0);
}

struct evt_abuse {
	atomic_bool stop;
	uint16_t head;
	unsigned long posted;
};

/*
 * Keep the event ring full of 4-byte buffers: every entry names the same
 * head, so refilling is one store of avail->idx, done as soon as used->idx
 * moves -- no kick needed while the host is in the ring.
 */
static void *evt_abuse_run(void *a)
{
	struct evt_abuse *ea = a;
	struct cvq *q = &vqs[1];
	uint16_t used, last = load16(&q->used->idx);
	struct timespec t0, tk;
	unsigned int i;

	for (i = 0; i < q->num; i++)
		q->avail->ring[i] = ea->head;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	tk = t0;
	/* Bounded: a host that never lets go is seen as a slow ioctl. */
	while (!atomic_load(&ea->stop) && elapsed_ms(&t0) < 15000) {
		used = load16(&q->used->idx);
		if (used != last || (uint16_t)(q->avail_idx - used) < q->num) {
			ea->posted += (uint16_t)(used + q->num - q->avail_idx);
			q->avail_idx = used + q->num;
			__atomic_store_n(&q->avail->idx, q->avail_idx,
					 __ATOMIC_RELEASE);
			last = used;
		}
		/* A kick now and then, for a host that left the ring. */
		if (elapsed_ms(&tk) >= 5) {
			cvq_kick(q);
			clock_gettime(CLOCK_MONOTONIC, &tk);
		}
	}
	return NULL;
}

/*
 * Event buffers too small for an event, posted as fast as the host uses
 * them, while hotplug events are pending: the worker must not stay in the
 * event queue (holding its mutex) for ever.  GET_VRING_BASE of that queue
 * returns within 2 s.
 */
static void t_evt_abuse(int fd)
{
	struct evt_abuse ea = { .posted = 0 };
	struct vhost_vring_state st = { .index = 1 };
	struct virtio_scsi_event ev;
	unsigned int delivered = 0;
	uint32_t len;
	struct timespec t0;
	pthread_t th;
	int ret;

	atomic_init(&ea.stop, false);
	/*
	 * A ring of 1024 entries: the host has more to chew on per refill,
	 * so a guest that refills in time keeps it there.
	 */
	vring_state(fd, VHOST_GET_VRING_BASE, 1, 0);
	cvq_layout(&vqs[1], 1, 1024);
	expect("scsi-evt-abuse-big-ring", cvq_start(fd, &vqs[1], 1, false), 0);
	ea.head = cvq_desc(&vqs[1], gpa(buf_alloc(64)), 4, VRING_DESC_F_WRITE, 0);
	if (pthread_create(&th, NULL, evt_abuse_run, &ea)) {
		result(false, "scsi-evt-abuse", "pthread_create");
		return;
	}
	result(relink_lun(2, 0, 4), "scsi-evt-abuse-hotplug-pending", "-");
	msleep(100);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = timed_ioctl(fd, VHOST_GET_VRING_BASE, &st, 20000,
			  "scsi-evt-abuse-get-vring-base");
	printf("# evt-abuse: GET_VRING_BASE returned %d after %llu ms, %lu short buffers posted, used %u, base %u\n",
	       ret, (unsigned long long)elapsed_ms(&t0), ea.posted,
	       load16(&vqs[1].used->idx), st.num);
	result(efd_take(vqs[1].err, 0) == 0, "scsi-evt-abuse-ring-not-broken",
	       "err signalled");
	result(ret == 0 && elapsed_ms(&t0) < 2000,
	       "scsi-evt-abuse-get-vring-base-within-2s",
	       "ret %d after %llu ms, %lu buffers posted", ret,
	       (unsigned long long)elapsed_ms(&t0), ea.posted);
	atomic_store(&ea.stop, true);
	pthread_join(th, NULL);
	/* Start it afresh, with proper buffers, for whoever comes next. */
	expect("scsi-evt-abuse-restart", cvq_start(fd, &vqs[1], 1, true), 0);
	ev_post(16, sizeof(struct virtio_scsi_event));
	while (ev_next(&ev, &len, 1000))
		delivered++;
	/*
	 * 8 events; the 6 buffers t_events() left took the first ones, the
	 * short buffers none: the rest wait for real buffers.
	 */
	result(delivered >= 1 && delivered <= 8, "scsi-evt-abuse-events-kept",
	       "%u hotplug events delivered afterwards", delivered);
	/* What t_lun_unlink_under_io() expects to find. */
	ev_post(6, sizeof(struct virtio_scsi_event));
	clear_ua_all();
}

/*
 * A new kick eventfd for a running ring (a VMM moving its ioeventfd) must
 * not lose the requests in flight: every one is still answered.
 */
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
static void t_dirty_log(int fd)
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

static void t_kick_swap(int fd)
{
	struct cvq *q = &vqs[SYNC_VQ];
	unsigned int r, i, lost = 0, rounds = 60;
	struct virtio_scsi_cmd_req *req;
	struct virtio_scsi_cmd_resp *rsp;
	uint8_t *data;
	uint16_t h;
	int nk;

	for (r = 0; r < rounds; r++) {
		for (i = 0; i < 4; i++) {
			req = new_req(1, 0);
			cdb_rw(req->cdb, false, false, 2048 + 512 * i, 512);
			rsp = new_rsp();
			data = mem + BIG_OFF + (i << 18);
			h = cvq_desc(q, gpa(data), 256u << 10,
				     VRING_DESC_F_WRITE, 0);
			h = cvq_desc(q, gpa(rsp), RSP_SZ,
				     VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, h);
			h = cvq_desc(q, gpa(req), HDR_SZ, VRING_DESC_F_NEXT, h);
			cvq_publish(q, h);
		}
		cvq_kick(q);
		nk = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (vring_file(fd, VHOST_SET_VRING_KICK, q->idx, nk)) {
			result(false, "scsi-kick-swap-running-ring", "%s",
			       strerror(errno));
			close(nk);
			return;
		}
		close(q->kick);
		q->kick = nk;
		if (!cvq_wait_used(q, q->avail_idx, 10000)) {
			lost += (uint16_t)(q->avail_idx - load16(&q->used->idx));
			break;
		}
		q->used_seen = q->avail_idx;
	}
	result(!lost, "scsi-kick-swap-keeps-requests-in-flight",
	       "%u rounds, %u requests never answered", r, lost);
	if (lost) {
		vring_state(fd, VHOST_GET_VRING_BASE, q->idx, 0);
		cvq_start(fd, q, q->idx, true);
	}
}

/*
 * Each request queue of the engine on a worker of its own (QEMU's
 * worker_per_virtqueue=true), attached while the rings run: verified I/O
 * on every queue, each queue's requests counted; then every queue moved
 * back to the default worker while I/O runs (nothing lost), and the
 * workers freed.  (SQ/CQ with queues on workers of their own:
 * tests/host/vhost-io.c -W.)
 */
static void t_workers(int fd)
{
	unsigned long long before[NQ], r;
	unsigned int id[NQ], q, bad = 0;
	char dir[512] = "", name[80];
	struct timespec t0;
	int base = my_workers(NULL, NULL);

	dbg_devs(getpid(), dir, sizeof(dir));
	for (q = 0; q < NQ; q++) {
		before[q] = dbg_vq_requests(dir, 2 + q);
		if (new_worker(fd, &id[q]) || attach_worker(fd, 2 + q, id[q])) {
			result(false, "scsi-workers-attach-running-rings",
			       "vq %u: %s", 2 + q, strerror(errno));
			return;
		}
	}
	result(true, "scsi-workers-attach-running-rings", "-");
	for (q = 0; q < NQ; q++)
		bad += vring_worker(fd, 2 + q) != id[q];
	result(!bad && vring_worker(fd, 0) == 0, "scsi-workers-get-vring-worker",
	       "%u queues not on their worker", bad);
	result(my_workers_are(base + NQ), "scsi-workers-threads",
	       "%d workers, wanted %d", my_workers(NULL, NULL), base + NQ);
	engine_strict_run("scsi-workers-io", NQ, 300, live_mask, 17, 1000);
	for (q = 0; q < NQ; q++) {
		r = dbg_vq_requests(dir, 2 + q);
		snprintf(name, sizeof(name), "scsi-workers-vq%u-served", 2 + q);
		result(r >= before[q] + 300, name, "%llu requests, %llu before",
		       r, before[q]);
	}

	/* Back to the default worker with requests in flight. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	engine_start(&fe, NQ, 400, false, live_mask, 19);
	msleep(50);
	for (q = 0, bad = 0; q < NQ; q++) {
		bad += attach_worker(fd, 2 + q, 0) != 0;
		msleep(20);
	}
	engine_join(&fe, &t0);
	result(!bad, "scsi-workers-move-back-under-io", "%u refused", bad);
	result(!fe.hung, "scsi-workers-move-back-under-io-no-hang", "%s",
	       fe.why);
	result(!fe.bad && fe.ok == fe.submitted && fe.ok >= 800,
	       "scsi-workers-move-back-under-io-all-good-and-verified",
	       "%lu good of %lu, %lu bad: %s", fe.ok, fe.submitted, fe.bad,
	       fe.why);
	for (q = 0, bad = 0; q < NQ; q++)
		bad += free_worker(fd, id[q]) != 0;
	result(!bad, "scsi-workers-free", "%u refused", bad);
	result(my_workers_are(base), "scsi-workers-threads-gone",
	       "%d workers, wanted %d", my_workers(NULL, NULL), base);
}

/*
 * Start phase @name of the scsi checks; false when $SQCQ_CLIENT_ONLY (a
 * comma-separated list of phase names) leaves it out, so one check can
 * be run alone: SQCQ_CLIENT_ONLY=direction,tmf tests/host/run.sh ...
 */
static bool phase(const char *name)
{
	static struct timespec t0;
	const char *only = getenv("SQCQ_CLIENT_ONLY");
	size_t n = strlen(name);
	const char *p;

	if (!t0.tv_sec)
		clock_gettime(CLOCK_MONOTONIC, &t0);
	for (p = only; p && *p; p += strcspn(p, ","), p += *p == ',')
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			break;
	if (only && *only && !(p && *p)) {
		/* Counted by tests/run-all.sh, never as passed. */
		printf("SKIP: host %s%s phase (left out: SQCQ_CLIENT_ONLY=%s)\n",
		       name_prefix, name, only);
		return false;
	}
	printf("# %s at %.1f s\n", name, elapsed_ms(&t0) / 1000.0);
	return true;
}

/* client scsi NODE FABRIC WWPN LUN_MB: see the file comment. */
static int scsi_main(int argc, char **argv)
{
	uint64_t lun_bytes;
	char why[256] = "";
	int fd;

	if (argc < 4) {
		fprintf(stderr, "usage: client scsi NODE FABRIC WWPN LUN_MB\n");
		return 2;
	}
	node = argv[0];
	fabric = argv[1];
	wwpn = argv[2];
	lun_bytes = strtoull(argv[3], NULL, 0) << 20;

	fd = scsi_dev_open(node, NULL, why, sizeof(why));
	result(fd >= 0, "scsi-device-setup", "%s", why);
	if (fd < 0)
		goto out;
	scsi_fd = fd;
	t_endpoint(fd);
	result(disk_add(1, 0) && disk_add(1, 1) && disk_add(2, 0),
	       "scsi-luns-answer", "%u of 3 LUNs answered READ CAPACITY",
	       ndisks);
	if (ndisks < 3)
		goto out;
	live_mask = 7;
	if (phase("commands"))
		t_commands(lun_bytes);
	if (phase("data"))
		t_data();
	if (phase("boundaries"))
		t_boundaries();
	if (phase("malformed"))
		t_malformed();
	if (phase("direction"))
		t_direction();
	if (phase("compare-and-write"))
		t_compare_and_write();
	if (phase("compare-and-write-unit-attention"))
		t_compare_and_write_ua();
	if (phase("compare-and-write-split-descriptors"))
		t_compare_and_write_split();
	if (phase("inflight-cap"))
		t_inflight_cap(fd);
	if (phase("tmf"))
		t_tmf();
	if (phase("workers"))
		t_workers(fd);
	if (phase("kick-swap"))
		t_kick_swap(fd);
	if (phase("dirty-log"))
		t_dirty_log(fd);
	if (phase("events"))
		t_events(fd);
	if (phase("evt-abuse"))
		t_evt_abuse(fd);
	if (phase("clear-under-io"))
		t_clear_under_io(fd);
	if (phase("lun-unlink-under-io"))
		t_lun_unlink_under_io();
	if (phase("sigkill"))
		t_sigkill(fd);
	if (phase("sigkill-clone"))
		t_sigkill_clone(fd);
	if (phase("log-budget"))
		t_log_budget(fd);
	if (phase("stall-cross-tenant"))
		t_stall_cross_tenant(fd);
	if (phase("close-in-flight"))
		t_close_in_flight(fd);
	phase("end");
out:
	printf("host client: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/*
 * client hold NODE FABRIC WWPN READY [idle]: bind, keep I/O running on
 * tpgt_1 and tpgt_2 LUN 0, create READY once it runs; then wait to be
 * killed.  With "idle": bound, tpgt_1 LUN 0 answers, no I/O kept running
 * (a VM that holds its TPG and does nothing).
 */
static int hold_main(int argc, char **argv)
{
	char why[256] = "";
	bool idle = argc > 4 && !strcmp(argv[4], "idle");
	int fd, rf;

	if (argc < 4) {
		fprintf(stderr, "usage: client hold NODE FABRIC WWPN READY [idle]\n");
		return 2;
	}
	node = argv[0];
	fabric = argv[1];
	wwpn = argv[2];
	fd = scsi_dev_open(node, wwpn, why, sizeof(why));
	if (fd < 0) {
		printf("# hold: %s\n", why);
		return 1;
	}
	scsi_fd = fd;
	if (!disk_add(1, 0) || (!idle && !disk_add(2, 0))) {
		printf("# hold: LUNs do not answer\n");
		return 1;
	}
	if (!idle)
		engine_start(&fe, NQ, 0, true, 3, 61);
	if (!idle && !engine_wait_ok(&fe, 100, 120000)) {
		printf("# hold: no I/O\n");
		return 1;
	}
	rf = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (rf < 0)
		return 1;
	close(rf);
	alarm(600);	/* a bound on the life of a forgotten holder */
	for (;;)
		pause();
}

/*
 * client memcg NODE: the device's memory is charged to its owner's memory
 * cgroup (inside.sh runs this in a cgroup of its own).  Every queue is laid
 * out and configured first; then only the queue starts (SET_VRING_KICK),
 * each of which allocates the queue's iovec array (SQCQ_MAX_IOV entries of
 * 16 bytes, GFP_KERNEL_ACCOUNT), run between two readings of the cgroup's
 * memory.current: 130 queues make about 2 MiB.  The guest memory was
 * populated at start, so nothing else of ours is charged in between; the
 * per-CPU charge stock (64 pages each) is the slack.  After close the
 * charge must go again.
 */
#define IOV_ARRAY_BYTES	(1024u * 16u)	/* SQCQ_MAX_IOV struct iovecs */
#define CHARGE_SLACK	(2u * 64u * 4096u)

static bool own_memcg_file(const char *leaf, char *path, size_t len)
{
	char line[512], *nl;

	if (!read_file("/proc/self/cgroup", line, sizeof(line)) ||
	    strncmp(line, "0::", 3))
		return false;
	nl = strchr(line, '\n');
	if (nl)
		*nl = '\0';
	snprintf(path, len, "/sys/fs/cgroup%s/%s",
		 strcmp(line + 3, "/") ? line + 3 : "", leaf);
	return access(path, R_OK) == 0;
}

static long long memcg_current(const char *path)
{
	char buf[64];

	return read_file(path, buf, sizeof(buf)) ? atoll(buf) : -1;
}

/*
 * The start of a client run in a cgroup of its own (client memcg, client
 * cpuset): NODE from @argc/@argv, the path of this process's cgroup file
 * @leaf into @path, the device opened and owned.  The fd, or -1 after a
 * FAIL line (or 2 for a usage error, in *@rc).
 */
static int cgroup_client_open(int argc, char **argv, const char *what,
			      const char *leaf, char *path, size_t len, int *rc)
{
	char name[64];
	int fd;

	*rc = 1;
	if (argc < 1) {
		fprintf(stderr, "usage: client %s NODE\n", what);
		*rc = 2;
		return -1;
	}
	node = argv[0];
	if (!own_memcg_file(leaf, path, len)) {
		snprintf(name, sizeof(name), "%s-own-cgroup", what);
		result(false, name, "no %s for this process", leaf);
		return -1;
	}
	fd = open(node, O_RDWR | O_CLOEXEC);
	snprintf(name, sizeof(name), "%s-open", what);
	result(fd >= 0, name, "%s: %s", node, strerror(errno));
	if (fd < 0)
		return -1;
	snprintf(name, sizeof(name), "%s-set-owner", what);
	expect(name, ioctl(fd, VHOST_SET_OWNER), 0);
	return fd;
}

/*
 * Workers of the devices this process owns (threads of ours or kthreads,
 * named vhost-sqcq-PID) whose Cpus_allowed_list is not @want; *@n: how
 * many workers were seen.
 */
static int workers_not_on(const char *want, int *n, char *seen, size_t len)
{
	char name[32], path[300], buf[2048], *p;
	const char *dirs[2] = { "/proc/self/task", "/proc" };
	struct dirent *de;
	int bad = 0, k;
	DIR *d;

	snprintf(name, sizeof(name), "vhost-sqcq-%d", getpid());
	name[15] = '\0';
	*n = 0;
	seen[0] = '\0';
	for (k = 0; k < 2; k++) {
		d = opendir(dirs[k]);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			snprintf(path, sizeof(path), "%s/%s/comm", dirs[k],
				 de->d_name);
			if (!read_file(path, buf, sizeof(buf)))
				continue;
			buf[strcspn(buf, "\n")] = '\0';
			if (strcmp(buf, name))
				continue;
			snprintf(path, sizeof(path), "%s/%s/status", dirs[k],
				 de->d_name);
			p = read_file(path, buf, sizeof(buf)) ?
			    strstr(buf, "Cpus_allowed_list:") : NULL;
			if (!p)
				continue;
			p += strlen("Cpus_allowed_list:");
			p += strspn(p, " \t");
			p[strcspn(p, "\n")] = '\0';
			(*n)++;
			bad += strcmp(p, want) != 0;
			snprintf(seen + strlen(seen), len - strlen(seen), "%s%s",
				 seen[0] ? "," : "", p);
		}
		closedir(d);
	}
	return bad;
}

/*
 * client cpuset NODE: run in a cgroup whose cpuset is CPUs 0-1 (inside.sh
 * puts us there).  SET_OWNER; then the cpuset narrows to CPU 0 and
 * poll_cpu becomes 0, and a new worker is placed off the poll CPU within
 * the owner's CPUs: those of the cpuset as it is now (CPU 0, nothing left
 * but the poll CPU itself), never the CPUs the owner had at SET_OWNER.
 */
static int cpuset_main(int argc, char **argv)
{
	static const char poll_cpu[] = "/sys/module/vhost_scsi_sqcq/parameters/poll_cpu";
	char cpus[600], seen[256] = "";
	int fd, i, n = 0, bad = -1, pfd, rc;
	unsigned int id = 0;

	fd = cgroup_client_open(argc, argv, "cpuset", "cpuset.cpus", cpus,
				sizeof(cpus), &rc);
	if (fd < 0)
		return rc;
	pfd = open(cpus, O_WRONLY);
	result(pfd >= 0 && write(pfd, "0", 1) == 1, "cpuset-narrowed-to-cpu-0",
	       "%s: %s", cpus, strerror(errno));
	if (pfd >= 0)
		close(pfd);
	pfd = open(poll_cpu, O_WRONLY);
	result(pfd >= 0 && write(pfd, "0", 1) == 1, "cpuset-poll-cpu-0", "%s",
	       strerror(errno));
	if (pfd >= 0)
		close(pfd);
	expect("cpuset-new-worker", new_worker(fd, &id), 0);
	/* The new worker places itself at its first pass. */
	for (i = 0; i < 100; i++) {
		bad = workers_not_on("0", &n, seen, sizeof(seen));
		if (!bad && n >= 2)
			break;
		msleep(50);
	}
	result(!bad && n >= 2, "cpuset-workers-within-the-cpuset-now",
	       "%d workers, CPUs %s, want all 0", n, seen);
	pfd = open(poll_cpu, O_WRONLY);
	if (pfd < 0 || write(pfd, "\n", 1) != 1)
		result(false, "cpuset-poll-cpu-cleared", "%s", strerror(errno));
	if (pfd >= 0)
		close(pfd);
	close(fd);
	printf("host client: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

static int memcg_main(int argc, char **argv)
{
	long long m0, m1, m2 = -1, want = NVQS * (long long)IOV_ARRAY_BYTES;
	char path[600];
	unsigned int i, started = 0;
	int fd, k, rc;

	fd = cgroup_client_open(argc, argv, "memcg", "memory.current", path,
				sizeof(path), &rc);
	if (fd < 0)
		return rc;
	expect("memcg-set-mem-table", set_good_mem(fd), 0);
	for (i = 0; i < NVQS; i++) {
		struct cvq *q = &vqs[i];

		cvq_layout(q, i, QNUM);
		q->kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		q->call = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (q->kick < 0 || q->call < 0 ||
		    vring_state(fd, VHOST_SET_VRING_NUM, i, q->num) ||
		    vring_state(fd, VHOST_SET_VRING_BASE, i, 0) ||
		    cvq_set_addr(fd, q, 0) ||
		    vring_file(fd, VHOST_SET_VRING_CALL, i, q->call))
			break;
	}
	result(i == NVQS, "memcg-queues-configured", "queue %u: %s", i,
	       strerror(errno));
	m0 = memcg_current(path);
	for (i = 0; i < NVQS; i++)
		if (!vring_file(fd, VHOST_SET_VRING_KICK, i, vqs[i].kick))
			started++;
	m1 = memcg_current(path);
	printf("# memcg %s: %lld before the queue starts, %lld after %u starts (+%lld, %lld expected)\n",
	       path, m0, m1, started, m1 - m0, want);
	result(started == NVQS, "memcg-queues-started", "%u of %u", started, NVQS);
	result(m0 >= 0 && m1 - m0 + CHARGE_SLACK >= want,
	       "memcg-queue-memory-charged-to-the-owner",
	       "+%lld bytes for %u iovec arrays of %u bytes", m1 - m0, started,
	       IOV_ARRAY_BYTES);
	close(fd);
	for (i = 0; i < NVQS; i++) {
		close(vqs[i].kick);
		close(vqs[i].call);
	}
	/* The release may finish in the worker's reaper: give it a moment. */
	for (k = 0; k < 50; k++) {
		m2 = memcg_current(path);
		if (m1 - m2 + CHARGE_SLACK >= want)
			break;
		msleep(100);
	}
	printf("# memcg: %lld after close (-%lld)\n", m2, m1 - m2);
	result(m1 - m2 + CHARGE_SLACK >= want, "memcg-charge-gone-after-close",
	       "-%lld bytes", m1 - m2);
	printf("host client: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/*
 * client io NODE FABRIC WWPN: a short I/O check through another node (the
 * takeover names): bind, INQUIRY, verified I/O on tpgt_1 LUN 0, unbind.
 */
static int io_main(int argc, char **argv)
{
	char why[256] = "";
	uint8_t cdb[6] = { 0x12, 0, 0, 0, 36, 0 }, *d;
	struct sres s;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: client io NODE FABRIC WWPN [PREFIX]\n");
		return 2;
	}
	node = argv[0];
	fabric = argv[1];
	wwpn = argv[2];
	/* The result names' prefix: who built the target. */
	name_prefix = argc > 3 ? argv[3] : "takeover-";
	fd = scsi_dev_open(node, NULL, why, sizeof(why));
	result(fd >= 0, "device-setup", "%s", why);
	if (fd < 0)
		goto out;
	scsi_fd = fd;
	expect("set-endpoint", set_endpoint(fd, wwpn, "set-endpoint"), 0);
	result(disk_add(1, 0) && disks[0].bytes >= 2 * NSLOT * WIN,
	       "lun-answers", "%u LUNs, %llu bytes", ndisks,
	       (unsigned long long)disks[0].bytes);
	if (!ndisks)
		goto out;
	d = buf_alloc(36);
	scsi_cmd(1, 0, cdb, 6, gpa(d), 36, true, &s);
	result(good(&s) && d[0] == 0, "inquiry", "%s", sres_str(&s));
	engine_strict_run("io", 2, 150, 1, 71, 300);
	expect("clear-endpoint", clear_endpoint(fd, wwpn, "clear-endpoint"), 0);
	result(close(fd) == 0, "close", "%s", strerror(errno));
out:
	printf("host client: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	unsigned int k;
	uint64_t f = 0;
	int fd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	if (argc > 1 && !strcmp(argv[1], "scsi"))
		return scsi_main(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "hold"))
		return hold_main(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "io"))
		return io_main(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "memcg"))
		return memcg_main(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "cpuset"))
		return cpuset_main(argc - 2, argv + 2);
	/* client workers NODE: the worker ioctls alone (tests/host/limits-inside.sh). */
	if (argc > 2 && !strcmp(argv[1], "workers")) {
		node = argv[2];
		test_workers();
		printf("host client: %d passed, %d failed\n", passed, failed);
		return failed ? 1 : 0;
	}
	if (argc > 1)
		node = argv[1];
	fd = open(node, O_RDWR | O_CLOEXEC);
	result(fd >= 0, "open", "%s: %s", node, strerror(errno));
	if (fd < 0)
		return 1;

	test_before_owner(fd);
	test_unknown_ioctls(fd);
	test_owner(fd);
	test_workers();
	test_features(fd);
	test_mem_table(fd);
	test_vring_config(fd);
	test_log_ioctls(fd);
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
	test_gpa_wrap(fd);
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
