// SPDX-License-Identifier: GPL-2.0-only
/*
 * The worker ioctls (VHOST_NEW_WORKER and friends) on a device of their
 * own, the per-owner bound of kthread workers, and phase "workers": each
 * request queue on a worker of its own under verified I/O.
 */
#include "client-lib.h"

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
void test_workers(void)
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
 * Each request queue of the engine on a worker of its own (QEMU's
 * worker_per_virtqueue=true), attached while the rings run: verified I/O
 * on every queue, each queue's requests counted; then every queue moved
 * back to the default worker while I/O runs (nothing lost), and the
 * workers freed.  (SQ/CQ with queues on workers of their own:
 * tests/host/vhost-io.c -W.)
 */
void t_workers(int fd)
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
