// SPDX-License-Identifier: GPL-2.0-only
/*
 * Modes "memcg" and "cpuset": what the device charges to and runs in its
 * owner's cgroups.
 */
#include "client-lib.h"

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
int cpuset_main(int argc, char **argv)
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

int memcg_main(int argc, char **argv)
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
