// SPDX-License-Identifier: GPL-2.0-only
/*
 * The fault phases: CLEAR_ENDPOINT and a LUN unlink with I/O in flight,
 * a client SIGKILLed (also as a CLONE_VM sibling), the per-device log
 * budget, a stalled tenant, a device closed with I/O in flight.
 */
#include "client-lib.h"

/* ---- fault cases ---- */

void t_clear_under_io(int fd)
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

void t_lun_unlink_under_io(void)
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

void t_sigkill(int fd)
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

/*
 * Lines a guest or VMM can trigger at will are rate limited per device:
 * one device that binds and clears its endpoint in a loop uses up its own
 * budget (10 lines a minute), and another device's line still shows.
 */
void t_log_budget(int fd)
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
void t_stall_cross_tenant(int fd)
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
void t_sigkill_clone(int fd)
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
void t_close_in_flight(int fd)
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
