// SPDX-License-Identifier: GPL-2.0-only
/*
 * The host client's shared library (client-lib.h): results, guest memory,
 * the driver-side virtqueue, configfs/debugfs helpers, the device set up
 * as QEMU does, one request at a time, the I/O engine, events.
 */
#include "client-lib.h"

int passed, failed;
const char *node = "/dev/vhost-scsi-sqcq";
const char *name_prefix = "";	/* "takeover-" in io mode */
uint8_t *mem;
size_t buf_next = BUF_OFF;

void result(bool ok, const char *name, const char *fmt, ...)
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
void expect(const char *name, int ret, int err)
{
	int e = errno;

	if (err == 0)
		result(ret == 0, name, "ret %d errno %s", ret, strerror(e));
	else
		result(ret == -1 && e == err, name, "ret %d errno %s, wanted %s",
		       ret, ret ? strerror(e) : "-", strerror(err));
}

uint64_t gpa(const void *p)
{
	return GBASE + (uint64_t)((const uint8_t *)p - mem);
}

void *buf_alloc(size_t len)
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

int set_mem(int fd, uint32_t n, const struct vhost_memory_region *r,
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

int set_good_mem(int fd)
{
	struct vhost_memory_region r = {
		.guest_phys_addr = GBASE,
		.memory_size = MEM_SIZE,
		.userspace_addr = (uintptr_t)mem,
	};

	return set_mem(fd, 1, &r, 0);
}

int vring_state(int fd, unsigned long cmd, unsigned int idx,
		unsigned int num)
{
	struct vhost_vring_state s = { .index = idx, .num = num };

	return ioctl(fd, cmd, &s);
}

int vring_file(int fd, unsigned long cmd, unsigned int idx, int efd)
{
	struct vhost_vring_file f = { .index = idx, .fd = efd };

	return ioctl(fd, cmd, &f);
}

uint64_t elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 +
	       (t.tv_nsec - t0->tv_nsec) / 1000000;
}

struct cvq vqs[NVQS];

uint16_t *used_event(struct cvq *q)
{
	return &q->avail->ring[q->num];
}

uint16_t *avail_event(struct cvq *q)
{
	return (uint16_t *)&q->used->ring[q->num];
}

uint16_t load16(const uint16_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

void cvq_layout(struct cvq *q, unsigned int idx, unsigned int num)
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

int cvq_set_addr(int fd, struct cvq *q, unsigned int flags)
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
int cvq_start(int fd, struct cvq *q, unsigned int idx, bool fresh)
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

uint16_t cvq_desc(struct cvq *q, uint64_t addr, uint32_t len,
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
void cvq_publish(struct cvq *q, uint16_t head)
{
	q->avail->ring[q->avail_idx % q->num] = head;
	/* Entry before index (the device's rmb pairs with this). */
	__atomic_store_n(&q->avail->idx, (uint16_t)(q->avail_idx + 1),
			 __ATOMIC_RELEASE);
	q->avail_idx++;
}

void cvq_kick(struct cvq *q)
{
	uint64_t one = 1;

	if (write(q->kick, &one, sizeof(one)) != sizeof(one))
		perror("kick");
}

/* Wait until used->idx reaches @target; false on timeout. */
bool cvq_wait_used(struct cvq *q, uint16_t target, unsigned int ms)
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
bool wait16(const uint16_t *p, uint16_t v, unsigned int ms)
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
uint64_t efd_take(int efd, unsigned int wait_ms)
{
	struct pollfd p = { .fd = efd, .events = POLLIN };
	uint64_t v = 0;

	if (poll(&p, 1, wait_ms) == 1 && read(efd, &v, sizeof(v)) != sizeof(v))
		v = 0;
	return v;
}

/* A SCSI command request: returns the head; *resp gets the response. */
uint16_t cvq_cmd(struct cvq *q, struct virtio_scsi_cmd_resp **resp,
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
bool cvq_take_used(struct cvq *q, uint16_t head, uint32_t len,
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


const char *fabric = "vhost_sqcq";
const char *wwpn = "";
int scsi_fd = -1;
uint64_t tag_seq = 1;


struct disk disks[MAXDISKS];
unsigned int ndisks;

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

void fill_random(uint8_t *p, size_t len, uint64_t *s)
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

void put_be(uint8_t *p, uint64_t v, unsigned int bytes)
{
	while (bytes--) {
		p[bytes] = v & 0xff;
		v >>= 8;
	}
}

uint64_t get_be(const uint8_t *p, unsigned int bytes)
{
	uint64_t v = 0;

	while (bytes--)
		v = v << 8 | *p++;
	return v;
}

void lun_encode(uint8_t lun[8], uint8_t target, uint16_t l)
{
	memset(lun, 0, 8);
	lun[0] = 1;
	lun[1] = target;
	lun[2] = 0x40 | ((l >> 8) & 0x3f);
	lun[3] = l & 0xff;
}

void cdb_rw(uint8_t *cdb, bool write, bool c16, uint64_t lba,
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
void sense_of(const struct virtio_scsi_cmd_resp *r, uint8_t *key,
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
int timed_ioctl(int fd, unsigned long cmd, void *arg, unsigned int ms,
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

struct vhost_scsi_target ep_target(const char *w)
{
	struct vhost_scsi_target t;

	memset(&t, 0, sizeof(t));
	snprintf(t.vhost_wwpn, sizeof(t.vhost_wwpn), "%s", w);
	return t;
}

int set_endpoint(int fd, const char *w, const char *name)
{
	struct vhost_scsi_target t = ep_target(w);

	return timed_ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t, 30000, name);
}

int clear_endpoint(int fd, const char *w, const char *name)
{
	struct vhost_scsi_target t = ep_target(w);

	return timed_ioctl(fd, VHOST_SCSI_CLEAR_ENDPOINT, &t, 60000, name);
}

void tpg_path(char *p, size_t len, unsigned int tpgt, const char *leaf)
{
	snprintf(p, len, CFS_DIR "/%s/%s/tpgt_%u%s%s", fabric, wwpn, tpgt,
		 leaf ? "/" : "", leaf ? leaf : "");
}

/* Write a configfs attribute in one write(2): 0, or -1 and errno. */
int cfs_write(const char *path, const char *val)
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

bool read_file(const char *path, char *buf, size_t len)
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
int dbg_devs(pid_t pid, char *dir, size_t dirlen)
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
unsigned long long dbg_vq_requests(const char *dir, unsigned int vq)
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
bool dbg_dev_str(const char *file, const char *key, char *val,
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
long long dbg_dev_key(const char *file, const char *key)
{
	char v[64];

	return dbg_dev_str(file, key, v, sizeof(v)) ? strtoll(v, NULL, 0) : -1;
}

/* How many tasks in directory @dir (/proc or /proc/N/task) are named @want. */
int tasks_named(const char *dir, const char *want)
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
bool worker_alive(pid_t pid)
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
int my_workers(int *own, int *kt)
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
bool my_workers_are(int n)
{
	int i;

	for (i = 0; i < 300; i++) {
		if (my_workers(NULL, NULL) == n)
			return true;
		usleep(10000);
	}
	return false;
}

int new_worker(int fd, unsigned int *id)
{
	struct vhost_worker_state ws = { .worker_id = ~0u };
	int ret = ioctl(fd, VHOST_NEW_WORKER, &ws);

	*id = ws.worker_id;
	return ret;
}

int free_worker(int fd, unsigned int id)
{
	struct vhost_worker_state ws = { .worker_id = id };

	return ioctl(fd, VHOST_FREE_WORKER, &ws);
}

int attach_worker(int fd, unsigned int index, unsigned int id)
{
	struct vhost_vring_worker vw = { .index = index, .worker_id = id };

	return ioctl(fd, VHOST_ATTACH_VRING_WORKER, &vw);
}

/* The id of the worker of vq @index, or ~0u with errno set. */
unsigned int vring_worker(int fd, unsigned int index)
{
	struct vhost_vring_worker vw = { .index = index, .worker_id = ~0u };

	if (ioctl(fd, VHOST_GET_VRING_WORKER, &vw))
		return ~0u;
	return vw.index == index ? vw.worker_id : ~0u - 1;
}

/* CPUs the kernel could bring up (/sys/devices/system/cpu/possible). */
int possible_cpus(void)
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
 * Run "$SQCQ_HOOK ARGS" (inside.sh --hook: the configfs helpers of
 * tests/lib/target.sh); true when it exited 0.
 */
bool hook(const char *fmt, ...)
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

void msleep(unsigned int ms)
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
bool relink_lun(unsigned int tpgt, unsigned int lun, unsigned int n)
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
int scsi_dev_open(const char *path, const char *bind_wwpn, char *why,
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
bool sync_run(struct cvq *q, const struct seg *sg, unsigned int n,
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

/* A SCSI command with data at guest address @dgpa (@din: data-in). */
bool scsi_cmd(uint8_t target, uint16_t lun, const uint8_t *cdb,
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

bool tur(uint8_t target, uint16_t lun, struct sres *res)
{
	static const uint8_t cdb[6] = { 0x00 };

	return scsi_cmd(target, lun, cdb, 6, 0, 0, false, res);
}

bool good(const struct sres *s)
{
	return s->done && s->r.response == VIRTIO_SCSI_S_OK &&
	       s->r.status == 0;
}

const char *sres_str(const struct sres *s)
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
bool clear_ua(uint8_t target, uint16_t lun)
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

unsigned int live_mask;	/* disks that still exist */

bool clear_ua_all(void)
{
	bool ok = true;
	unsigned int i;

	for (i = 0; i < ndisks; i++)
		if (live_mask & (1u << i))
			ok &= clear_ua(disks[i].target, disks[i].lun);
	return ok;
}

/* READ CAPACITY(16): bytes of the LUN. */
bool capacity16(uint8_t target, uint16_t lun, uint64_t *bytes,
		struct sres *s)
{
	uint8_t cdb[16] = { 0x9e, 0x10 }, *d = buf_alloc(32);

	put_be(cdb + 10, 32, 4);
	if (!scsi_cmd(target, lun, cdb, 16, gpa(d), 32, true, s) || !good(s))
		return false;
	*bytes = (get_be(d, 8) + 1) * get_be(d + 8, 4);
	return true;
}

bool disk_add(uint8_t target, uint16_t lun)
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
int tmf(uint8_t target, uint16_t lun, uint32_t subtype, uint64_t tag)
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
static const char *const lay_names[LAY_N] = {
	"plain", "any-layout", "indirect", "split-headers",
	"any-layout-indirect",
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

void engine_start(struct engine *e, unsigned int nq,
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

void engine_join(struct engine *e, const struct timespec *t0)
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
bool engine_wait_ok(struct engine *e, unsigned long n, unsigned int ms)
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

struct engine fe;	/* engine of the fault phases */

struct engine *engine_strict_run(const char *name, unsigned int nq,
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


/* REPORT LUNS of @target: the LUN numbers, their count, or -1. */
int report_luns(uint8_t target, unsigned int *luns, int max,
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

bool has_lun(const unsigned int *luns, int n, unsigned int lun)
{
	int i;

	for (i = 0; i < n; i++)
		if (luns[i] == lun)
			return true;
	return false;
}

bool check_illegal_lun(const struct sres *s)
{
	uint8_t key = 0, asc = 0;

	sense_of(&s->r, &key, &asc);
	return s->done && s->r.response == VIRTIO_SCSI_S_OK &&
	       s->r.status == 0x02 && s->r.sense_len > 0 && key == 0x5 &&
	       asc == 0x25 && s->used == RSP_SZ;
}

bool unmap_hole(void)
{
	return munmap(mem + HOLE_OFF, HOLE_LEN) == 0;
}

bool remap_hole(void)
{
	return mmap(mem + HOLE_OFF, HOLE_LEN, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE,
		    -1, 0) == mem + HOLE_OFF;
}

/* A request from raw segments on the sync queue; the used length. */
bool raw_req(const struct seg *sg, unsigned int n, uint32_t *used)
{
	return sync_run(&vqs[SYNC_VQ], sg, n, false, used, 10000);
}

struct virtio_scsi_cmd_req *new_req(uint8_t target, uint16_t lun)
{
	struct virtio_scsi_cmd_req *req = buf_alloc(HDR_SZ);

	lun_encode(req->lun, target, lun);
	req->tag = tag_seq++;
	return req;
}

struct virtio_scsi_cmd_resp *new_rsp(void)
{
	struct virtio_scsi_cmd_resp *r = buf_alloc(RSP_SZ + 16);

	memset(r, 0xee, RSP_SZ + 16);
	return r;
}
/* ---- events ---- */

static struct virtio_scsi_event *evbuf[QNUM];

void ev_post(unsigned int n, uint32_t len)
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
bool ev_next(struct virtio_scsi_event *out, uint32_t *len,
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
bool ev_lun_is(const uint8_t lun[8], unsigned int l)
{
	static const uint8_t zero[4];

	return lun[2] == (l >= 256 ? (0x40 | (l >> 8)) : 0) &&
	       lun[3] == (l & 0xff) && !memcmp(lun + 4, zero, 4);
}

bool ev_is(const struct virtio_scsi_event *ev, uint32_t event,
	   uint32_t reason, uint8_t target, unsigned int lun)
{
	return ev->event == event && ev->reason == reason && ev->lun[0] == 1 &&
	       ev->lun[1] == target && ev_lun_is(ev->lun, lun);
}

const char *ev_str(bool ok, uint32_t len,
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

uint32_t events_missed(int fd)
{
	uint32_t v = 0xdead;

	if (ioctl(fd, VHOST_SCSI_GET_EVENTS_MISSED, &v))
		return 0xffffffff;
	return v;
}

/* How many times the kernel log holds @needle (0 when it cannot be read). */
int klog_count(const char *needle)
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
