// SPDX-License-Identifier: GPL-2.0-only
/*
 * The ioctl-level checks (no rings running): before and after SET_OWNER,
 * unknown ioctls, features, the memory table, vring configuration, the
 * log and SCSI ioctls.
 */
#include "client-lib.h"

/* ---- ioctl-level tests ---- */

void test_before_owner(int fd)
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

void test_unknown_ioctls(int fd)
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

void test_owner(int fd)
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
	/*
	 * Its worker ends with it, though its thread may stay listed in /proc
	 * a moment after close(): wait for it, so that test_workers() counts
	 * from the first device's worker alone.
	 */
	result(my_workers_are(1), "second-open-worker-gone-after-close",
	       "%d workers, wanted 1 (the first device's)", my_workers(NULL, NULL));
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

void test_features(int fd)
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

void test_mem_table(int fd)
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

void test_vring_config(int fd)
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
void test_log_ioctls(int fd)
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

void test_scsi_ioctls(int fd)
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
