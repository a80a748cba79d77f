// SPDX-License-Identifier: GPL-2.0-only
/*
 * Adversarial fuzzer for the host module (stage "fuzz").  Run inside the
 * test VM as root by tests/fuzz/inside.sh; it plays a malicious VMM and
 * guest against /dev/vhost-scsi-sqcq bound to an LIO target, for a bounded
 * time, from a printed seed.
 *
 * Guest memory (the memory table) is six regions: a 32 MiB anonymous main
 * region (rings, the SQ/CQ doorbell area, buffers), a MAP_PRIVATE read-only
 * mapping of a file (--file), a read-only anonymous region backed by the
 * zero page, a "hole" that is unmapped and mapped again under I/O, and two
 * small regions at guest-physical 0 and at the very top of the 64-bit space
 * (ending at 2^64 - 1).  Host writes into pages pinned read-only would show
 * in the file's page cache or in the zero page: both are checked at the end.
 *
 * Four threads pick weighted random operations (see the ops[] table): SCSI
 * requests with random CDBs (emulated ones included) in direct and indirect
 * chains, with wrong data directions, zero/huge lengths and addresses at the
 * edges of regions; malformed chains (loops, bad next, nested indirect,
 * readable after writable, too many segments); one head published many
 * times with huge READs; avail index jumps; kicks; TMFs, AN requests and
 * SQ/CQ setup/teardown with random fields; doorbell storms; event queue
 * abuse; memory table churn; vring ioctls on running rings; stop and
 * restart; endpoint churn; RESET_OWNER, close with I/O in flight, setup
 * storms racing a reset; fork (the child touches the device, or outlives
 * the parent's close); worker processes with their own device SIGKILLed at
 * random points; raw ioctls with garbage.  The program keeps its own state
 * consistent enough to go on (rings restarted, the device rebuilt).
 *
 * A watchdog thread turns any operation (ioctl, close, wait) stuck for
 * --hang seconds into "FAIL: fuzz hang (seed S, ...)" with the kernel stack
 * of the stuck thread, and exits.
 *
 *   fuzz [--seed S] [--round K] [--seconds N] [--hang S] [--threads N]
 *        [--node PATH] [--wwpn W] [--wwpn2 W2] [--file PATH] [--kernel ID]
 *   fuzz --check-zero        (only: is the zero page still zero?)
 *
 * The operation stream of each thread is a function of (seed, round,
 * thread); the interleaving of threads is not, so a replay reproduces the
 * mix of operations, not their exact timing.
 *
 * Output: "fuzz seed: ..." first, "fuzz ops: kind=count ..." at the end,
 * PASS:/FAIL: lines ("PASS: fuzz <name>" / "FAIL: fuzz <name> (seed S...)").
 * Exit status 0 only when nothing failed.
 */
#define _GNU_SOURCE
#include <dirent.h>
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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/vhost.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#include "../../common/sqcq_uapi.h"
#include "../../common/sqcq_vhost_abi.h"

#define NVQ		6		/* control, event, 4 request queues */
#define NREQ		(NVQ - 2)
#define HOST_NVQS	130
#define MAX_THREADS	8

/* Guest-physical layout. */
#define G_LOW		0x0ull
#define LOW_SZ		(64u << 10)
#define G_MAIN		0x100000ull
#define MAIN_SZ		(32u << 20)
#define G_FILE		0x40000000ull
#define FILE_SZ		(1u << 20)
#define G_ZERO		0x50000000ull
#define ZERO_SZ		(1u << 20)
#define G_HOLE		0x60000000ull
#define HOLE_SZ		(1u << 20)
#define TOP_SZ		(64u << 10)
#define G_TOP		(0ull - TOP_SZ)	/* ends at 2^64 - 1 */
#define G_NOWHERE	0x70000000ull	/* in no region */

/* Offsets in the main region. */
#define RING_SZ		(64u << 10)	/* vq q's rings at q * RING_SZ */
#define NRINGS		12		/* ours, then a killed worker's */
#define AREA_OFF	(1u << 20)	/* SQ/CQ doorbell area */
#define ARENA_OFF	(2u << 20)	/* arena a at ARENA_OFF + a * ARENA_SZ */
#define ARENA_SZ	(2u << 20)
#define NARENAS		5		/* 4 threads, the child/probe one */
#define BIG_OFF		(12u << 20)	/* big data buffers, shared */
#define BIG_SZ		(MAIN_SZ - BIG_OFF)

#define HDR_SZ		51u		/* struct virtio_scsi_cmd_req */
#define RSP_SZ		108u		/* struct virtio_scsi_cmd_resp */

static const char *node = "/dev/vhost-scsi-sqcq";
static const char *wwpn = "naa.5001405000000f01";
static const char *wwpn2 = "naa.5001405000000f02";
static const char *file_path;
static const char *kernel_id = "...";
static unsigned long long seed;
static unsigned int round_no, seconds = 60, hang_s = 90, nthreads = 4;
static volatile int stop_flag;
static int failed;

static uint8_t *mem_main, *mem_file, *mem_zero, *mem_hole, *mem_low, *mem_top;
static uint8_t *file_orig;
static size_t file_len;

/* ---- output ---- */

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&out_lock);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

static void pass(const char *name, const char *fmt, ...)
{
	char why[512] = "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	say("PASS: fuzz %s%s%s%s\n", name, *why ? " (" : "", why, *why ? ")" : "");
}

static void fail(const char *name, const char *fmt, ...)
{
	char why[768] = "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	say("FAIL: fuzz %s (seed %llu round %u%s%s; replay: tests/fuzz/run.sh --kernel %s --seed %llu)\n",
	    name, seed, round_no, *why ? ": " : "", why, kernel_id, seed);
	__atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);
}

/* ---- randomness ---- */

struct rng {
	uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t below(struct rng *r, uint32_t n)
{
	return n ? (uint32_t)(rnd(r) % n) : 0;
}

static bool chance(struct rng *r, unsigned int pct)
{
	return below(r, 100) < pct;
}

/* A length: mostly sensible, sometimes an edge. */
static uint32_t rnd_len(struct rng *r, uint32_t typical)
{
	static const uint32_t edge[] = { 0, 1, 2, 7, 15, 16, 17, 50, 51, 52,
		107, 108, 109, 511, 512, 513, 4095, 4096, 4097, 65536,
		1u << 20, (8u << 20) - 1, 8u << 20, (8u << 20) + 1, 16u << 20,
		0x7fffffffu, 0xfffffff0u, 0xffffffffu };

	if (chance(r, 75))
		return typical;
	return edge[below(r, sizeof(edge) / sizeof(edge[0]))];
}

/* ---- operation kinds, counters, watchdog ---- */

enum op {
	OP_CHAIN, OP_INDIRECT, OP_BADCHAIN, OP_WRONGDIR, OP_REUSE, OP_JUMP,
	OP_KICK, OP_TMF, OP_SQCQ, OP_DBSTORM, OP_EVT, OP_EVTMISSED, OP_MEMTABLE,
	OP_HOLE, OP_VRING, OP_STOP, OP_RESTART, OP_ALIAS, OP_ENDPOINT,
	OP_RESET, OP_CLOSE, OP_STORM, OP_FORK, OP_KILLWORKER, OP_IOCTL,
	OP_PROBE, OP_HARVEST, OP_EVTFLOOD, OP_WORKERS, OP_REBUILD, NOPS
};

static const struct {
	const char *name;
	unsigned int weight;
} ops[NOPS] = {
	[OP_CHAIN] = { "chain", 30 },
	[OP_INDIRECT] = { "indirect", 12 },
	[OP_BADCHAIN] = { "badchain", 10 },
	[OP_WRONGDIR] = { "wrongdir", 10 },
	[OP_REUSE] = { "reuse", 3 },
	[OP_JUMP] = { "availjump", 2 },
	[OP_KICK] = { "kick", 8 },
	[OP_TMF] = { "tmf", 6 },
	[OP_SQCQ] = { "sqcq", 6 },
	[OP_DBSTORM] = { "dbstorm", 3 },
	[OP_EVT] = { "evt", 4 },
	[OP_EVTMISSED] = { "evtmissed", 2 },
	[OP_MEMTABLE] = { "memtable", 5 },
	[OP_HOLE] = { "hole", 2 },
	[OP_VRING] = { "vring", 8 },
	[OP_STOP] = { "getbase", 4 },
	[OP_RESTART] = { "restart", 4 },
	[OP_ALIAS] = { "alias", 2 },
	[OP_ENDPOINT] = { "endpoint", 3 },
	[OP_RESET] = { "reset", 2 },
	[OP_CLOSE] = { "close", 2 },
	[OP_STORM] = { "storm", 2 },
	[OP_FORK] = { "fork", 2 },
	[OP_KILLWORKER] = { "killworker", 2 },
	[OP_IOCTL] = { "ioctl", 4 },
	[OP_PROBE] = { "probe", 3 },
	[OP_HARVEST] = { "harvest", 3 },
	[OP_EVTFLOOD] = { "evtflood", 1 },
	[OP_WORKERS] = { "workers", 4 },
	[OP_REBUILD] = { "rebuild", 0 },	/* only when needed */
};

static unsigned long op_count[NOPS];
/* The sample of the host's in-flight count furthest above its bound. */
static long long max_inflight = -1, inflight_bound, inflight_excess = INT64_MIN;
static char max_inflight_why[160];
static unsigned long probes_ok, probes_sent, used_seen_total, kills, rebuild_fails,
	evtflood_ok, reset_checks;
static double evtflood_max;

struct tctx {
	unsigned int id;
	pid_t tid;
	struct rng r;
	unsigned int arena;
	size_t aoff;
	uint64_t tag;
	/* watchdog */
	volatile const char *op;
	volatile int busy;
	struct timespec t0;
};

static struct tctx threads[MAX_THREADS + 1];	/* + the main thread */

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void op_begin(struct tctx *t, enum op o, const char *detail)
{
	__atomic_add_fetch(&op_count[o], 1, __ATOMIC_RELAXED);
	t->op = detail ? detail : ops[o].name;
	clock_gettime(CLOCK_MONOTONIC, &t->t0);
	__atomic_store_n(&t->busy, 1, __ATOMIC_RELEASE);
}

/* A named step inside an op (what the watchdog names when stuck). */
static void op_step(struct tctx *t, const char *what)
{
	t->op = what;
	clock_gettime(CLOCK_MONOTONIC, &t->t0);
}

static void op_end(struct tctx *t)
{
	__atomic_store_n(&t->busy, 0, __ATOMIC_RELEASE);
}

static void print_counts(void)
{
	char line[2048];
	size_t n = 0;
	unsigned long total = 0;
	unsigned int i;

	for (i = 0; i < NOPS; i++) {
		n += snprintf(line + n, sizeof(line) - n, " %s=%lu", ops[i].name,
			      op_count[i]);
		total += op_count[i];
	}
	say("fuzz ops:%s total=%lu\n", line, total);
	say("# fuzz: %lu used entries seen, probes %lu/%lu answered well, %lu workers killed, %lu rebuilds failed, %lu event floods let go (slowest %.1f s), %lu resets checked, max in flight %lld (bound %lld)\n",
	    used_seen_total, probes_ok, probes_sent, kills, rebuild_fails,
	    evtflood_ok, evtflood_max, reset_checks, max_inflight, inflight_bound);
}

static void dump_stack(pid_t tid)
{
	char path[64], buf[4096];
	ssize_t n;
	int f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stack", tid);
	f = open(path, O_RDONLY);
	if (f < 0)
		return;
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (n > 0) {
		buf[n] = 0;
		say("# kernel stack of thread %d:\n%s", tid, buf);
	}
}

static void *watchdog(void *arg)
{
	unsigned int i, nt = nthreads + 1;

	(void)arg;
	for (;;) {
		sleep(1);
		for (i = 0; i < nt; i++) {
			struct tctx *t = &threads[i];
			struct timespec now;
			double el;

			if (!__atomic_load_n(&t->busy, __ATOMIC_ACQUIRE))
				continue;
			clock_gettime(CLOCK_MONOTONIC, &now);
			el = (now.tv_sec - t->t0.tv_sec) +
			     (now.tv_nsec - t->t0.tv_nsec) / 1e9;
			if (el < hang_s)
				continue;
			fail("hang", "op %s, thread %u stuck for %.0f s",
			     (const char *)t->op, t->id, el);
			dump_stack(t->tid);
			print_counts();
			fflush(stdout);
			_exit(3);
		}
	}
	return NULL;
}

static void alarm_handler(int sig)
{
	char msg[256];
	int n;

	(void)sig;
	n = snprintf(msg, sizeof(msg),
		     "FAIL: fuzz hang (seed %llu round %u: op %s in the main thread; replay: tests/fuzz/run.sh --kernel %s --seed %llu)\n",
		     seed, round_no, (const char *)threads[nthreads].op,
		     kernel_id, seed);
	if (write(1, msg, n) < 0)
		_exit(4);
	_exit(3);
}

/* ---- guest memory ---- */

static uint64_t gpa_of(const void *p)
{
	return G_MAIN + (uint64_t)((const uint8_t *)p - mem_main);
}

static void *arena_alloc(struct tctx *t, size_t len)
{
	uint8_t *base = mem_main + ARENA_OFF + (size_t)t->arena * ARENA_SZ;
	void *p;

	len = (len + 15) & ~(size_t)15;
	if (len > ARENA_SZ)
		len = ARENA_SZ;
	if (t->aoff + len > ARENA_SZ)
		t->aoff = 0;
	p = base + t->aoff;
	t->aoff += len;
	return p;
}

static void *map_fixed_anon(void *at, size_t len, int prot)
{
	void *p = mmap(at, len, prot, MAP_PRIVATE | MAP_ANONYMOUS |
		       (at ? MAP_FIXED : 0), -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int mem_init(void)
{
	volatile uint8_t sink = 0;
	size_t i;
	int f;

	mem_main = map_fixed_anon(NULL, MAIN_SZ, PROT_READ | PROT_WRITE);
	mem_low = map_fixed_anon(NULL, LOW_SZ, PROT_READ | PROT_WRITE);
	mem_top = map_fixed_anon(NULL, TOP_SZ, PROT_READ | PROT_WRITE);
	mem_hole = map_fixed_anon(NULL, HOLE_SZ, PROT_READ | PROT_WRITE);
	mem_zero = map_fixed_anon(NULL, ZERO_SZ, PROT_READ);
	if (!mem_main || !mem_low || !mem_top || !mem_hole || !mem_zero)
		return -1;
	memset(mem_main, 0, MAIN_SZ);
	memset(mem_hole, 0xa5, HOLE_SZ);
	/* Read faults map the shared zero page into the read-only region. */
	for (i = 0; i < ZERO_SZ; i += 4096)
		sink += mem_zero[i];
	(void)sink;

	/* The file: its content now, then a private read-only mapping. */
	if (!file_path) {
		static char tmpl[] = "/tmp/sqcq-fuzz-file.XXXXXX";
		uint8_t *b = malloc(FILE_SZ);

		f = mkstemp(tmpl);
		if (f < 0 || !b)
			return -1;
		for (i = 0; i < FILE_SZ; i++)
			b[i] = (uint8_t)(i * 131 + (i >> 12));
		if (write(f, b, FILE_SZ) != FILE_SZ)
			return -1;
		free(b);
		close(f);
		file_path = strdup(tmpl);
	}
	f = open(file_path, O_RDONLY);
	if (f < 0)
		return -1;
	file_orig = malloc(FILE_SZ);
	if (!file_orig)
		return -1;
	memset(file_orig, 0, FILE_SZ);
	file_len = 0;
	while (file_len < FILE_SZ) {
		ssize_t n = read(f, file_orig + file_len, FILE_SZ - file_len);

		if (n <= 0)
			break;
		file_len += n;
	}
	if (file_len < 4096) {
		close(f);
		errno = EINVAL;
		return -1;
	}
	mem_file = mmap(NULL, FILE_SZ, PROT_READ, MAP_PRIVATE, f, 0);
	close(f);
	if (mem_file == MAP_FAILED)
		return -1;
	/* Fault it in: the mapping now points at the page cache. */
	for (i = 0; i < file_len; i += 4096)
		sink += mem_file[i];
	return 0;
}

/* ---- the memory table ---- */

#define REG(g, s, u) ((struct vhost_memory_region){ \
	.guest_phys_addr = (g), .memory_size = (s), .userspace_addr = (u) })

static int set_table(int fd, const struct vhost_memory_region *r, unsigned int n,
		     uint32_t padding)
{
	struct {
		struct vhost_memory m;
		struct vhost_memory_region r[16];
	} t;

	memset(&t, 0, sizeof(t));
	if (n > 16)
		n = 16;
	t.m.nregions = n;
	t.m.padding = padding;
	memcpy(t.r, r, n * sizeof(*r));
	return ioctl(fd, VHOST_SET_MEM_TABLE, &t);
}

static unsigned int full_table(struct vhost_memory_region *r)
{
	unsigned int n = 0;

	r[n++] = REG(G_LOW, LOW_SZ, (uintptr_t)mem_low);
	r[n++] = REG(G_MAIN, MAIN_SZ, (uintptr_t)mem_main);
	r[n++] = REG(G_FILE, FILE_SZ, (uintptr_t)mem_file);
	r[n++] = REG(G_ZERO, ZERO_SZ, (uintptr_t)mem_zero);
	r[n++] = REG(G_HOLE, HOLE_SZ, (uintptr_t)mem_hole);
	r[n++] = REG(G_TOP, TOP_SZ, (uintptr_t)mem_top);
	return n;
}

static int set_full_table(int fd)
{
	struct vhost_memory_region r[8];

	return set_table(fd, r, full_table(r), 0);
}

/* A random table: subsets, shifts, aliases, and invalid ones. */
static void random_table(struct rng *rg, int fd)
{
	struct vhost_memory_region r[16];
	unsigned int n = full_table(r), i, k;
	uint32_t pad = 0;

	switch (below(rg, 10)) {
	case 0:		/* a subset */
		k = below(rg, n + 1);
		for (i = 0; i < k; i++)
			r[i] = r[below(rg, n)];
		/* duplicates overlap: keep only distinct gpas */
		n = k;
		break;
	case 1:		/* the main region moved in guest-physical space */
		r[1].guest_phys_addr = 0x80000000ull + below(rg, 16) * 4096ull;
		break;
	case 2:		/* aliases: the main memory twice */
		r[n++] = REG(0x90000000ull, MAIN_SZ, (uintptr_t)mem_main);
		r[n++] = REG(0xa0000000ull, HOLE_SZ, (uintptr_t)mem_main + 4096);
		break;
	case 3:		/* overlapping */
		r[n++] = REG(G_MAIN + below(rg, MAIN_SZ), 4096,
			     (uintptr_t)mem_low);
		break;
	case 4:		/* zero size, overflowing, flags padding */
		k = below(rg, n);
		switch (below(rg, 4)) {
		case 0: r[k].memory_size = 0; break;
		case 1: r[k].guest_phys_addr = ~0ull - below(rg, 4096); break;
		case 2: r[k].userspace_addr = ~0ull - 4095; break;
		default: r[k].flags_padding = 1; break;
		}
		break;
	case 5:		/* kernel addresses, unmapped user addresses */
		r[n++] = REG(0xb0000000ull, 1 << 20,
			     chance(rg, 50) ? 0xffff888000000000ull : 0x1000ull);
		break;
	case 6:		/* header padding */
		pad = 1 + below(rg, 100);
		break;
	case 7:		/* empty table */
		n = 0;
		break;
	case 8:		/* unaligned, tiny regions */
		r[n++] = REG(0xc0000001ull, 1 + below(rg, 100),
			     (uintptr_t)mem_low + 1 + below(rg, 1000));
		break;
	default:	/* the good table */
		break;
	}
	set_table(fd, r, n, pad);
}

static void too_many_regions(int fd)
{
	size_t sz = sizeof(struct vhost_memory) +
		    600 * sizeof(struct vhost_memory_region);
	struct vhost_memory *m = calloc(1, sz);
	unsigned int i;

	if (!m)
		return;
	m->nregions = 600;
	for (i = 0; i < 600; i++)
		m->regions[i] = REG(0x100000000ull * (i + 1), 4096,
				    (uintptr_t)mem_low);
	ioctl(fd, VHOST_SET_MEM_TABLE, m);
	m->nregions = 512;	/* the most allowed: valid */
	ioctl(fd, VHOST_SET_MEM_TABLE, m);
	m->nregions = 0xffffffffu;
	ioctl(fd, VHOST_SET_MEM_TABLE, m);
	free(m);
}

/* ---- the device ---- */

struct gvq {
	pthread_mutex_t lk;
	unsigned int num;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	int kick, call, err;
	uint16_t avail_idx;
	uint16_t used_last;	/* used->idx at the last harvest */
	unsigned int next_desc;
	int started;
};

struct gdev {
	int fd;
	int ready;
	uint64_t features;
	struct gvq vq[NVQ];
};

static struct gdev D = { .fd = -1 };
/* Sizes of the host rings op_alias started (beyond ours); 0: none. */
static unsigned int alias_num[4];
static pthread_rwlock_t devlk;

static bool has_feature(const struct gdev *d, unsigned int bit)
{
	return d->features & (1ull << bit);
}

static void vq_layout(struct gvq *v, unsigned int ring, unsigned int num,
		      uint16_t base)
{
	uint8_t *b = mem_main + (size_t)ring * RING_SZ;

	memset(b, 0, RING_SZ);
	v->num = num;
	v->desc = (void *)b;
	v->avail = (void *)(b + 16 * num);
	v->used = (void *)(b + ((16 * num + 6 + 2 * num + 4095) & ~4095u));
	v->avail->idx = base;
	v->used->idx = base;
	v->avail_idx = base;
	v->used_last = base;
	v->next_desc = 0;
}

static int vstate(int fd, unsigned long cmd, unsigned int idx, unsigned int num)
{
	struct vhost_vring_state s = { .index = idx, .num = num };

	return ioctl(fd, cmd, &s);
}

static int vfile(int fd, unsigned long cmd, unsigned int idx, int efd)
{
	struct vhost_vring_file f = { .index = idx, .fd = efd };

	return ioctl(fd, cmd, &f);
}

static int vaddr(int fd, unsigned int idx, const struct gvq *v, unsigned int fl)
{
	struct vhost_vring_addr a = {
		.index = idx, .flags = fl,
		.desc_user_addr = (uintptr_t)v->desc,
		.avail_user_addr = (uintptr_t)v->avail,
		.used_user_addr = (uintptr_t)v->used,
	};

	return ioctl(fd, VHOST_SET_VRING_ADDR, &a);
}

static unsigned int rnd_num(struct rng *r)
{
	static const unsigned int nums[] = { 1, 2, 4, 8, 16, 64, 128, 256, 256,
		256, 512, 1024 };

	return nums[below(r, sizeof(nums) / sizeof(nums[0]))];
}

static int new_efd(int *slot)
{
	if (*slot < 0)
		*slot = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return *slot;
}

/* Lay out (in ring slot @ring) and start vq @q at index @base. */
static int vq_start(int fd, struct gvq *v, unsigned int q, unsigned int ring,
		    unsigned int num, uint16_t base)
{
	vq_layout(v, ring, num, base);
	if (new_efd(&v->kick) < 0 || new_efd(&v->call) < 0 ||
	    new_efd(&v->err) < 0)
		return -1;
	if (vstate(fd, VHOST_SET_VRING_NUM, q, num) ||
	    vstate(fd, VHOST_SET_VRING_BASE, q, base) ||
	    vaddr(fd, q, v, 0) ||
	    vfile(fd, VHOST_SET_VRING_CALL, q, v->call) ||
	    vfile(fd, VHOST_SET_VRING_ERR, q, v->err) ||
	    vfile(fd, VHOST_SET_VRING_KICK, q, v->kick))
		return -1;
	v->started = 1;
	return 0;
}

static void dev_close_files(struct gdev *d)
{
	unsigned int i;

	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	for (i = 0; i < NVQ; i++) {
		struct gvq *v = &d->vq[i];

		if (v->kick >= 0)
			close(v->kick);
		if (v->call >= 0)
			close(v->call);
		if (v->err >= 0)
			close(v->err);
		v->kick = v->call = v->err = -1;
		v->started = 0;
	}
	d->ready = 0;
}

static int set_endpoint(int fd, const char *w)
{
	struct vhost_scsi_target t;

	memset(&t, 0, sizeof(t));
	snprintf(t.vhost_wwpn, sizeof(t.vhost_wwpn), "%s", w);
	return ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t);
}

static int clear_endpoint(int fd, const char *w)
{
	struct vhost_scsi_target t;

	memset(&t, 0, sizeof(t));
	snprintf(t.vhost_wwpn, sizeof(t.vhost_wwpn), "%s", w);
	return ioctl(fd, VHOST_SCSI_CLEAR_ENDPOINT, &t);
}

/* ---- the host's debugfs view of our device ---- */

#define DBG_ROOT "/sys/kernel/debug/vhost_scsi_sqcq"

static bool read_text(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int f = open(path, O_RDONLY | O_CLOEXEC);

	if (f < 0)
		return false;
	n = read(f, buf, len - 1);
	close(f);
	if (n < 0)
		return false;
	buf[n] = 0;
	return true;
}

/* The debugfs directory of the device process @pid owns; false if none. */
static bool dbg_dir_of(pid_t pid, char *dir, size_t len)
{
	char path[320], buf[256], want[32];
	struct dirent *de;
	bool found = false;
	DIR *d = opendir(DBG_ROOT);

	if (!d)
		return false;
	snprintf(want, sizeof(want), "owner: %d\n", pid);
	while (!found && (de = readdir(d))) {
		if (strncmp(de->d_name, "dev", 3))
			continue;
		snprintf(path, sizeof(path), DBG_ROOT "/%s/queues", de->d_name);
		if (read_text(path, buf, sizeof(buf)) &&
		    !strncmp(buf, want, strlen(want))) {
			snprintf(dir, len, DBG_ROOT "/%.40s", de->d_name);
			found = true;
		}
	}
	closedir(d);
	return found;
}

/* A "key: value" number of a debugfs file; -1 if absent. */
static long long dbg_value(const char *dir, const char *file, const char *key)
{
	char path[160], buf[4096], *p;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (!read_text(path, buf, sizeof(buf)))
		return -1;
	p = strstr(buf, key);
	if (!p)
		return -1;
	return strtoll(p + strlen(key), NULL, 10);
}

/* Record the host's in-flight count of our device against what a guest
 * can legitimately have outstanding: one request per ring entry.
 */
static void sample_inflight(const char *when)
{
	char dir[96];
	long long n, bound = 0;
	unsigned int i;

	if (!dbg_dir_of(getpid(), dir, sizeof(dir)))
		return;
	n = dbg_value(dir, "targets", "inflight: ");
	for (i = 0; i < NVQ; i++)
		bound += __atomic_load_n(&D.vq[i].num, __ATOMIC_RELAXED);
	for (i = 0; i < 4; i++)
		bound += __atomic_load_n(&alias_num[i], __ATOMIC_RELAXED);
	/* Requests of a ring's earlier start may still finish after a
	 * restart: allow each ring twice over.
	 */
	bound *= 2;
	if (n < 0)
		return;
	pthread_mutex_lock(&out_lock);
	if (n - bound > inflight_excess) {
		inflight_excess = n - bound;
		max_inflight = n;
		inflight_bound = bound;
		snprintf(max_inflight_why, sizeof(max_inflight_why), "%s", when);
	}
	pthread_mutex_unlock(&out_lock);
}

/*
 * Bring @d up from nothing (or from a reset fd): owner, features, table,
 * rings, endpoint @w.  @ring0: first ring slot in the main region.  Fills
 * @why on failure.  No locks, no allocation: also used in forked children.
 */
static int dev_build(struct gdev *d, struct rng *r, const char *w,
		     unsigned int ring0, bool random_features, char *why,
		     size_t whylen)
{
	uint64_t f = 0;
	unsigned int i, tries;

	if (d->fd < 0) {
		d->fd = open(node, O_RDWR | O_CLOEXEC);
		if (d->fd < 0) {
			snprintf(why, whylen, "open %s: %s", node, strerror(errno));
			return -1;
		}
	}
	if (ioctl(d->fd, VHOST_SET_OWNER) || ioctl(d->fd, VHOST_GET_FEATURES, &f)) {
		snprintf(why, whylen, "owner/get features: %s", strerror(errno));
		return -1;
	}
	f &= ~(1ull << VIRTIO_F_NOTIFY_ON_EMPTY);
	if (random_features) {
		if (chance(r, 20))
			f &= ~(1ull << VIRTIO_RING_F_INDIRECT_DESC);
		if (chance(r, 50))
			f &= ~(1ull << VIRTIO_RING_F_EVENT_IDX);
		if (chance(r, 10))
			f &= ~(1ull << VIRTIO_SCSI_F_HOTPLUG);
		if (chance(r, 10))
			f |= 1ull << VIRTIO_F_NOTIFY_ON_EMPTY;
	}
	d->features = f;
	if (ioctl(d->fd, VHOST_SET_FEATURES, &f) || set_full_table(d->fd)) {
		snprintf(why, whylen, "features/table: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < NVQ; i++) {
		unsigned int num = random_features ? rnd_num(r) : 256;

		if (i == 0 && num < 4)
			num = 4;
		if (vq_start(d->fd, &d->vq[i], i, ring0 + i, num, 0)) {
			snprintf(why, whylen, "vq %u: %s", i, strerror(errno));
			return -1;
		}
		d->vq[i].started = 1;
	}
	/* A device released by a process that has not exited yet (a forked
	 * child) may still hold the TPGs for a moment.
	 */
	for (tries = 0;; tries++) {
		if (!set_endpoint(d->fd, w))
			break;
		if (errno != EBUSY || tries > 300) {
			snprintf(why, whylen, "SET_ENDPOINT %s: %s", w,
				 strerror(errno));
			return -1;
		}
		usleep(20000);
	}
	sqcq_area_init((void *)(mem_main + AREA_OFF), NREQ);
	if (d == &D)
		memset(alias_num, 0, sizeof(alias_num));
	d->ready = 1;
	return 0;
}

/* ---- rings, from the guest side ---- */

static bool restart_vq(struct rng *r, unsigned int q, bool new_num);

struct seg {
	uint64_t a;
	uint32_t len;
	bool w;
};

static uint16_t ld16(const volatile uint16_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Entries the guest may still add without passing the host by > num. */
static int vq_room(const struct gdev *d, const struct gvq *v)
{
	uint16_t pos = ld16(&v->used->idx);

	if (has_feature(d, VIRTIO_RING_F_EVENT_IDX)) {
		uint16_t ae = ld16((uint16_t *)&v->used->ring[v->num]);

		/* avail_event: where the host's pops were; the newer one */
		if ((uint16_t)(v->avail_idx - ae) < (uint16_t)(v->avail_idx - pos))
			pos = ae;
	}
	return (int)v->num - (int)(uint16_t)(v->avail_idx - pos);
}

static void vq_kick(struct gvq *v)
{
	uint64_t one = 1;

	if (v->kick >= 0 && write(v->kick, &one, sizeof(one)) < 0)
		(void)0;
}

static struct sqcq_area *area(void)
{
	return (void *)(mem_main + AREA_OFF);
}

/* Publish @head (vq lock held); kick and/or ring the SQ doorbell. */
static void vq_publish(struct rng *r, unsigned int q, struct gvq *v,
		       uint16_t head, bool kick)
{
	v->avail->ring[v->avail_idx % v->num] = head;
	v->avail_idx++;
	__atomic_store_n(&v->avail->idx, v->avail_idx, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (q >= 2 && q < 2 + NREQ)
		sqcq_store16(&area()->q[q - 2].sq_line.sq.idx, v->avail_idx);
	if (kick || chance(r, 90))
		vq_kick(v);
}

static uint16_t vq_desc(struct gvq *v, uint64_t a, uint32_t len, uint16_t fl,
			uint16_t next)
{
	uint16_t i = v->next_desc++ % v->num;

	v->desc[i].addr = a;
	v->desc[i].len = len;
	v->desc[i].flags = fl;
	v->desc[i].next = next;
	return i;
}

/* Build @sg as a chain (direct or indirect); returns the head. */
static uint16_t vq_chain(struct tctx *t, struct gvq *v, const struct seg *sg,
			 unsigned int n, bool indirect)
{
	uint16_t next = 0, head = 0;
	unsigned int i;

	if (indirect) {
		struct vring_desc *tb = arena_alloc(t, (n ? n : 1) * 16);

		for (i = 0; i < n; i++) {
			tb[i].addr = sg[i].a;
			tb[i].len = sg[i].len;
			tb[i].flags = (sg[i].w ? VRING_DESC_F_WRITE : 0) |
				      (i + 1 < n ? VRING_DESC_F_NEXT : 0);
			tb[i].next = i + 1;
		}
		return vq_desc(v, gpa_of(tb), n * 16, VRING_DESC_F_INDIRECT, 0);
	}
	if (!n)
		return vq_desc(v, 0, 0, 0, 0);
	/* Reserve n consecutive slots so that next links are exact. */
	for (i = n; i-- > 0;) {
		head = vq_desc(v, sg[i].a, sg[i].len,
			       (sg[i].w ? VRING_DESC_F_WRITE : 0) |
			       (i + 1 < n ? VRING_DESC_F_NEXT : 0), next);
		next = head;
	}
	return head;
}

/* Count completions (and drain the call eventfd) of one ring. */
static void vq_harvest(struct gvq *v)
{
	uint16_t cur = ld16(&v->used->idx);
	uint64_t x;

	if (v->call >= 0 && read(v->call, &x, sizeof(x)) < 0)
		(void)0;
	__atomic_add_fetch(&used_seen_total, (uint16_t)(cur - v->used_last),
			   __ATOMIC_RELAXED);
	v->used_last = cur;
}

/* Submit under the vq lock; false when the ring is full or stopped. */
static bool submit(struct tctx *t, unsigned int q, const struct seg *sg,
		   unsigned int n, bool indirect)
{
	struct gvq *v = &D.vq[q];
	bool ok = false;

	pthread_mutex_lock(&v->lk);
	if (v->started && v->num && vq_room(&D, v) > 0 &&
	    (indirect || n <= v->num)) {
		vq_publish(&t->r, q, v, vq_chain(t, v, sg, n, indirect), false);
		ok = true;
	}
	pthread_mutex_unlock(&v->lk);
	return ok;
}

/* ---- SCSI requests ---- */

static void put_be(uint8_t *p, uint64_t v, unsigned int bytes)
{
	while (bytes--) {
		p[bytes] = v & 0xff;
		v >>= 8;
	}
}

enum { DIR_NONE, DIR_IN, DIR_OUT };

struct cmdspec {
	uint8_t cdb[32];
	int dir;		/* what the CDB implies */
	uint32_t len;		/* the transfer length it implies */
};

/* A random CDB (emulated ones included) and what it implies. */
static void make_cdb(struct rng *r, struct cmdspec *c)
{
	uint64_t lba = chance(r, 90) ? below(r, 32768) : rnd(r);
	uint32_t blocks = chance(r, 80) ? 1 + below(r, 64) :
			  below(r, 20000);
	uint8_t *b = c->cdb;

	memset(c, 0, sizeof(*c));
	switch (below(r, 30)) {
	case 0: case 1:			/* TEST UNIT READY */
		break;
	case 2: case 3:			/* INQUIRY, VPD pages */
		b[0] = 0x12;
		if (chance(r, 50)) {
			static const uint8_t pg[] = { 0, 0x80, 0x83, 0x86,
				0xb0, 0xb1, 0xb2, 0xb3, 0x55 };
			b[1] = 1;
			b[2] = pg[below(r, sizeof(pg))];
		}
		c->len = chance(r, 70) ? 96 + below(r, 160) : below(r, 65536);
		put_be(b + 3, c->len, 2);
		c->dir = DIR_IN;
		break;
	case 4:				/* REPORT LUNS */
		b[0] = 0xa0;
		c->len = chance(r, 80) ? 256 : below(r, 65536);
		put_be(b + 6, c->len, 4);
		c->dir = DIR_IN;
		break;
	case 5:				/* READ CAPACITY (10) */
		b[0] = 0x25;
		c->len = 8;
		c->dir = DIR_IN;
		break;
	case 6:				/* SERVICE ACTION IN: READ CAPACITY (16) */
		b[0] = 0x9e;
		b[1] = 0x10;
		c->len = 32;
		put_be(b + 10, c->len, 4);
		c->dir = DIR_IN;
		break;
	case 7:				/* MODE SENSE (6) */
		b[0] = 0x1a;
		b[2] = chance(r, 50) ? 0x3f : below(r, 64);
		c->len = 255;
		b[4] = 255;
		c->dir = DIR_IN;
		break;
	case 8:				/* MODE SENSE (10) */
		b[0] = 0x5a;
		b[2] = below(r, 64) | (below(r, 4) << 6);
		c->len = chance(r, 70) ? 512 : below(r, 65536);
		put_be(b + 7, c->len, 2);
		c->dir = DIR_IN;
		break;
	case 9:				/* REQUEST SENSE */
		b[0] = 0x03;
		c->len = 96;
		b[4] = 96;
		c->dir = DIR_IN;
		break;
	case 10: case 11: case 12:	/* READ (10) */
		b[0] = 0x28;
		put_be(b + 2, lba, 4);
		put_be(b + 7, blocks, 2);
		c->len = (blocks & 0xffff) * 512;
		c->dir = DIR_IN;
		break;
	case 13: case 14: case 15:	/* WRITE (10) */
		b[0] = 0x2a;
		put_be(b + 2, lba, 4);
		put_be(b + 7, blocks, 2);
		c->len = (blocks & 0xffff) * 512;
		c->dir = DIR_OUT;
		break;
	case 16:			/* READ (16) */
		b[0] = 0x88;
		put_be(b + 2, lba, 8);
		put_be(b + 10, blocks, 4);
		c->len = blocks * 512;
		c->dir = DIR_IN;
		break;
	case 17:			/* WRITE (16) */
		b[0] = 0x8a;
		put_be(b + 2, lba, 8);
		put_be(b + 10, blocks, 4);
		c->len = blocks * 512;
		c->dir = DIR_OUT;
		break;
	case 18:			/* SYNCHRONIZE CACHE, VERIFY */
		b[0] = chance(r, 50) ? 0x35 : 0x2f;
		put_be(b + 2, lba, 4);
		put_be(b + 7, blocks, 2);
		break;
	case 19:			/* WRITE SAME (10/16), maybe UNMAP */
		b[0] = chance(r, 50) ? 0x41 : 0x93;
		b[1] = chance(r, 50) ? 0x08 : 0;
		if (b[0] == 0x41) {
			put_be(b + 2, lba, 4);
			put_be(b + 7, blocks, 2);
		} else {
			put_be(b + 2, lba, 8);
			put_be(b + 10, blocks, 4);
		}
		c->len = 512;
		c->dir = DIR_OUT;
		break;
	case 20:			/* UNMAP */
		b[0] = 0x42;
		c->len = 24;
		put_be(b + 7, c->len, 2);
		c->dir = DIR_OUT;
		break;
	case 21:			/* COMPARE AND WRITE */
		b[0] = 0x89;
		put_be(b + 2, lba, 8);
		b[13] = 1;
		c->len = 1024;
		c->dir = DIR_OUT;
		break;
	case 22:			/* PERSISTENT RESERVE IN / OUT */
		if (chance(r, 50)) {
			b[0] = 0x5e;
			b[1] = below(r, 4);
			c->len = 1024;
			put_be(b + 7, c->len, 2);
			c->dir = DIR_IN;
		} else {
			b[0] = 0x5f;
			b[1] = below(r, 8);
			b[2] = below(r, 8);
			c->len = 24;
			put_be(b + 5, c->len, 4);
			c->dir = DIR_OUT;
		}
		break;
	case 23:			/* MAINTENANCE IN: RTPG, opcodes */
		b[0] = 0xa3;
		b[1] = chance(r, 50) ? 0x0a : 0x0c;
		b[2] = below(r, 3);
		b[3] = below(r, 256);
		c->len = chance(r, 70) ? 4096 : below(r, 65536);
		put_be(b + 6, c->len, 4);
		c->dir = DIR_IN;
		break;
	case 24:			/* LOG SENSE, RECEIVE DIAGNOSTIC */
		b[0] = chance(r, 50) ? 0x4d : 0x1c;
		b[2] = below(r, 64);
		c->len = 1024;
		if (b[0] == 0x4d)
			put_be(b + 7, c->len, 2);
		else
			put_be(b + 3, c->len, 2);
		c->dir = DIR_IN;
		break;
	case 25:			/* EXTENDED COPY / RECEIVE COPY RESULTS */
		if (chance(r, 50)) {
			b[0] = 0x83;
			c->len = 64 + below(r, 512);
			put_be(b + 10, c->len, 4);
			c->dir = DIR_OUT;
		} else {
			b[0] = 0x84;
			b[1] = below(r, 4);
			c->len = 1024;
			put_be(b + 10, c->len, 4);
			c->dir = DIR_IN;
		}
		break;
	case 26:			/* START STOP, PREVENT ALLOW, reserve */
		b[0] = (const uint8_t[]){ 0x1b, 0x1e, 0x16, 0x17 }[below(r, 4)];
		b[4] = below(r, 4);
		break;
	case 27:			/* variable length (32-byte) CDB */
		b[0] = 0x7f;
		b[7] = 0x18;
		put_be(b + 8, below(r, 65536), 2);
		put_be(b + 12, lba, 8);
		put_be(b + 28, blocks, 4);
		c->len = blocks * 512;
		c->dir = chance(r, 50) ? DIR_IN : DIR_OUT;
		break;
	default:			/* random bytes */
		for (unsigned int i = 0; i < 32; i++)
			b[i] = rnd(r);
		c->len = below(r, 1 << 16);
		c->dir = below(r, 3);
		break;
	}
}

static void lun_bytes(struct rng *r, uint8_t lun[8])
{
	memset(lun, 0, 8);
	lun[0] = chance(r, 97) ? 1 : rnd(r);
	lun[1] = chance(r, 70) ? 1 : chance(r, 50) ? 2 : rnd(r);
	lun[2] = 0x40;
	lun[3] = chance(r, 60) ? 0 : chance(r, 70) ? 1 : rnd(r);
	if (chance(r, 3))
		for (unsigned int i = 2; i < 8; i++)
			lun[i] = rnd(r);
}

enum loc { L_ARENA, L_BIG, L_FILE, L_ZERO, L_HOLE, L_TOP, L_LOW, L_NOWHERE,
	   L_EDGE, L_RINGS, NLOCS };

/* A guest address for a @len-byte buffer at a (weighted) random place. */
static uint64_t place(struct tctx *t, enum loc l, uint32_t len)
{
	struct rng *r = &t->r;

	switch (l) {
	case L_ARENA:
		if (len <= 64 << 10)
			return gpa_of(arena_alloc(t, len));
		/* fall through */
	case L_BIG:
		if (len >= BIG_SZ)
			return G_MAIN + BIG_OFF;
		return G_MAIN + BIG_OFF + (below(r, BIG_SZ - len) & ~511u);
	case L_FILE:
		return G_FILE + (len < FILE_SZ ? below(r, FILE_SZ - len) : 0);
	case L_ZERO:
		return G_ZERO + (len < ZERO_SZ ? below(r, ZERO_SZ - len) : 0);
	case L_HOLE:
		return G_HOLE + (len < HOLE_SZ ? below(r, HOLE_SZ - len) : 0);
	case L_TOP:	/* ending at 2^64 - 1, or running past it */
		return chance(r, 50) ? 0ull - len : 0ull - below(r, TOP_SZ);
	case L_LOW:
		return below(r, LOW_SZ);
	case L_NOWHERE:
		return chance(r, 50) ? G_NOWHERE : rnd(r);
	case L_EDGE: {	/* across the end of a region */
		static const uint64_t ends[] = { G_LOW + LOW_SZ,
			G_MAIN + MAIN_SZ, G_FILE + FILE_SZ, G_ZERO + ZERO_SZ,
			G_HOLE + HOLE_SZ, G_MAIN };
		return ends[below(r, 6)] - below(r, len ? len : 1);
	}
	case L_RINGS:
	default:
		return G_MAIN + below(r, NRINGS * RING_SZ);
	}
}

static enum loc rnd_loc(struct rng *r)
{
	unsigned int x = below(r, 100);

	if (x < 55)
		return L_ARENA;
	if (x < 70)
		return L_BIG;
	if (x < 76)
		return L_FILE;
	if (x < 82)
		return L_ZERO;
	if (x < 86)
		return L_HOLE;
	if (x < 89)
		return L_TOP;
	if (x < 91)
		return L_LOW;
	if (x < 94)
		return L_NOWHERE;
	if (x < 98)
		return L_EDGE;
	return L_RINGS;
}

/* Split [a, a+len) into @k pieces (the pieces may be empty). */
static unsigned int split(struct rng *r, struct seg *sg, unsigned int max,
			  uint64_t a, uint32_t len, bool w, unsigned int k)
{
	unsigned int n = 0;

	while (k > 1 && n + 1 < max && len) {
		uint32_t c = below(r, len + 1);

		sg[n++] = (struct seg){ a, c, w };
		a += c;
		len -= c;
		k--;
	}
	if (n < max)
		sg[n++] = (struct seg){ a, len, w };
	return n;
}

static uint8_t *new_req(struct tctx *t, const struct cmdspec *c)
{
	uint8_t *h = arena_alloc(t, 64);

	memset(h, 0, 64);
	lun_bytes(&t->r, h);
	put_be(h + 8, ++t->tag, 8);	/* (tag byte order does not matter) */
	h[16] = chance(&t->r, 90) ? 0 : below(&t->r, 5);
	memcpy(h + 19, c->cdb, 32);
	return h;
}

static unsigned int rnd_req_vq(struct rng *r)
{
	return 2 + below(r, NREQ);
}

/* A SCSI request with a random CDB; mostly well-formed. */
static void op_chain(struct tctx *t, bool indirect, bool wrongdir)
{
	struct rng *r = &t->r;
	struct seg sg[40];
	struct cmdspec c;
	unsigned int n = 0, k, q = rnd_req_vq(r);
	uint32_t dlen, hlen = HDR_SZ, rlen = RSP_SZ;
	uint8_t *rsp;
	int dir;
	enum loc l;
	uint64_t da;

	if (wrongdir) {
		/* A data-in command with device-readable data buffers
		 * (often in read-only memory), or a WRITE with writable.
		 */
		static const uint8_t din[][6] = {
			{ 0x12, 0, 0, 0, 255, 0 },	/* INQUIRY */
			{ 0x1a, 0, 0x3f, 0, 255, 0 },	/* MODE SENSE (6) */
			{ 0x03, 0, 0, 0, 96, 0 },	/* REQUEST SENSE */
		};
		memset(&c, 0, sizeof(c));
		switch (below(r, 6)) {
		case 0: case 1: case 2:
			memcpy(c.cdb, din[below(r, 3)], 6);
			c.len = c.cdb[4];
			break;
		case 3:
			c.cdb[0] = 0xa0;	/* REPORT LUNS */
			c.len = 256;
			put_be(c.cdb + 6, c.len, 4);
			break;
		case 4:
			c.cdb[0] = 0x28;	/* READ (10) */
			put_be(c.cdb + 2, below(r, 30000), 4);
			put_be(c.cdb + 7, 8, 2);
			c.len = 4096;
			break;
		default:
			c.cdb[0] = 0x2a;	/* WRITE (10): writable buffer */
			put_be(c.cdb + 7, 8, 2);
			c.len = 4096;
			c.dir = DIR_IN;		/* (inverted below) */
			break;
		}
		dir = c.dir == DIR_IN ? DIR_IN : DIR_OUT;
		c.dir = DIR_IN;
		dlen = c.len;
		l = (enum loc[]){ L_FILE, L_FILE, L_FILE, L_ZERO, L_ZERO,
				  L_ARENA, L_BIG }[below(r, 7)];
	} else {
		make_cdb(r, &c);
		dir = c.dir;
		if (chance(r, 10))
			dir = below(r, 3);	/* direction vs CDB */
		dlen = rnd_len(r, c.len);
		if (!dlen)
			dir = DIR_NONE;
		l = rnd_loc(r);
		if (chance(r, 5))
			hlen = below(r, HDR_SZ + 20);
		if (chance(r, 5))
			rlen = below(r, RSP_SZ + 20);
	}
	da = place(t, l, dlen);
	k = chance(r, 70) ? 1 : 1 + below(r, 8);
	if (indirect && chance(r, 10))
		k = 1 + below(r, 36);

	/* header (maybe split), data-out, response, data-in */
	n = split(r, sg, 4, gpa_of(new_req(t, &c)), hlen, false,
		  chance(r, 90) ? 1 : 2);
	if (dir == DIR_OUT || (dir != DIR_NONE && chance(r, 3)))
		n += split(r, sg + n, 36 - n, da, dlen, false, k);
	rsp = arena_alloc(t, RSP_SZ + 32);
	memset(rsp, 0xee, RSP_SZ);
	n += split(r, sg + n, 38 - n, gpa_of(rsp), rlen, true,
		   chance(r, 90) ? 1 : 2);
	if (dir == DIR_IN)
		n += split(r, sg + n, 40 - n, da, dlen, true, k);
	if (wrongdir && dir == DIR_IN && chance(r, 50)) {
		/* the data-in buffer as readable data-out instead */
		for (unsigned int i = 0; i < n; i++)
			if (sg[i].a == da)
				sg[i].w = false;
	}
	submit(t, q, sg, n, indirect);
}

/* Chains the host must refuse (or survive). */
static void op_badchain(struct tctx *t)
{
	struct rng *r = &t->r;
	unsigned int q = chance(r, 85) ? rnd_req_vq(r) : below(r, 2);
	struct gvq *v = &D.vq[q];
	struct cmdspec c;
	uint8_t *h;
	uint8_t *rsp = arena_alloc(t, RSP_SZ);
	unsigned int kind = below(r, 12), i, n;
	struct vring_desc *tb;
	uint16_t head;

	make_cdb(r, &c);
	h = new_req(t, &c);
	pthread_mutex_lock(&v->lk);
	if (!v->started || !v->num || vq_room(&D, v) <= 0) {
		pthread_mutex_unlock(&v->lk);
		return;
	}
	n = v->num;
	switch (kind) {
	case 0:		/* a loop in the ring */
		head = v->next_desc % n;
		v->desc[head] = (struct vring_desc){ gpa_of(h), HDR_SZ,
			VRING_DESC_F_NEXT, (uint16_t)((head + 1) % n) };
		v->desc[(head + 1) % n] = (struct vring_desc){ gpa_of(rsp),
			RSP_SZ, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, head };
		v->next_desc += 2;
		break;
	case 1:		/* next out of range */
		head = vq_desc(v, gpa_of(h), HDR_SZ, VRING_DESC_F_NEXT,
			       (uint16_t)(n + below(r, 65536 - n)));
		break;
	case 2:		/* indirect with NEXT, or bad lengths */
		tb = arena_alloc(t, 64);
		tb[0] = (struct vring_desc){ gpa_of(h), HDR_SZ, VRING_DESC_F_NEXT, 1 };
		tb[1] = (struct vring_desc){ gpa_of(rsp), RSP_SZ, VRING_DESC_F_WRITE, 0 };
		head = vq_desc(v, gpa_of(tb), (const uint32_t[]){ 0, 1, 17, 31,
			32 * 16, 0xfffffff0u, 65536 * 16 }[below(r, 7)],
			VRING_DESC_F_INDIRECT | (chance(r, 50) ? VRING_DESC_F_NEXT : 0),
			0);
		break;
	case 3:		/* nested indirect, loop in a table */
		tb = arena_alloc(t, 64);
		tb[0] = (struct vring_desc){ gpa_of(h), HDR_SZ, VRING_DESC_F_NEXT, 1 };
		if (chance(r, 50))
			tb[1] = (struct vring_desc){ gpa_of(tb), 32,
				VRING_DESC_F_INDIRECT, 0 };
		else
			tb[1] = (struct vring_desc){ gpa_of(rsp), RSP_SZ,
				VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 0 };
		head = vq_desc(v, gpa_of(tb), 32, VRING_DESC_F_INDIRECT, 0);
		break;
	case 4:		/* readable after writable */
		i = vq_desc(v, gpa_of(h), HDR_SZ, 0, 0);
		i = vq_desc(v, gpa_of(rsp), RSP_SZ,
			    VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, i);
		head = vq_desc(v, gpa_of(h), HDR_SZ, VRING_DESC_F_NEXT, i);
		break;
	case 5:		/* too many segments: 1100 one-byte pieces */
		tb = arena_alloc(t, 1100 * 16);
		for (i = 0; i < 1100; i++)
			tb[i] = (struct vring_desc){ gpa_of(h) + (i % 50), 1,
				VRING_DESC_F_NEXT | (i >= 60 ? VRING_DESC_F_WRITE : 0),
				(uint16_t)(i + 1) };
		tb[1099].flags &= ~VRING_DESC_F_NEXT;
		head = vq_desc(v, gpa_of(tb), 1100 * 16, VRING_DESC_F_INDIRECT, 0);
		break;
	case 6:		/* addresses near 2^64 and length wrapping */
		i = vq_desc(v, 0ull - below(r, 64), 0xffffffffu,
			    VRING_DESC_F_WRITE, 0);
		i = vq_desc(v, gpa_of(rsp), RSP_SZ,
			    VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, i);
		head = vq_desc(v, G_TOP + TOP_SZ - 20, 60, VRING_DESC_F_NEXT, i);
		break;
	case 7:		/* zero-length descriptors everywhere */
		i = vq_desc(v, 0, 0, VRING_DESC_F_WRITE, 0);
		i = vq_desc(v, gpa_of(rsp), 0, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, i);
		head = vq_desc(v, gpa_of(h), 0, VRING_DESC_F_NEXT, i);
		break;
	case 8:		/* indirect table outside memory or in the hole */
		head = vq_desc(v, chance(r, 50) ? G_NOWHERE : G_HOLE + 4096,
			       16 * (1 + below(r, 8)), VRING_DESC_F_INDIRECT, 0);
		break;
	case 9:		/* random descriptor bytes */
		head = v->next_desc++ % n;
		v->desc[head].addr = rnd(r);
		v->desc[head].len = rnd(r);
		v->desc[head].flags = rnd(r);
		v->desc[head].next = rnd(r);
		break;
	case 10:	/* a chain longer than the ring (wraps onto itself) */
		head = 0;
		for (i = 0; i < n + 3; i++)
			head = vq_desc(v, gpa_of(h), 8, VRING_DESC_F_NEXT,
				       (uint16_t)((v->next_desc) % n));
		break;
	default:	/* an avail entry >= num */
		head = (uint16_t)(n + below(r, 65536 - n));
		break;
	}
	vq_publish(r, q, v, head, true);
	pthread_mutex_unlock(&v->lk);
}

/* One head published many times: huge READs into one buffer, as fast as
 * the host pops them (avail_event), for a few seconds.
 */
static void op_reuse(struct tctx *t)
{
	struct rng *r = &t->r;
	unsigned int q = rnd_req_vq(r), i, rounds = 1 + below(r, 2000);
	double end = now_s() + 0.5 + below(r, 6000) / 1000.0;
	struct gvq *v = &D.vq[q];
	struct cmdspec c;
	struct seg sg[3];
	uint8_t *h, *rsp = arena_alloc(t, RSP_SZ);
	uint32_t blocks = chance(r, 80) ? 16384 : 1 + below(r, 16384);
	uint16_t head;

	memset(&c, 0, sizeof(c));
	c.cdb[0] = 0x88;			/* READ (16) */
	put_be(c.cdb + 10, blocks, 4);
	h = new_req(t, &c);
	h[0] = 1; h[1] = 1; h[2] = 0x40; h[3] = 0;	/* target 1 LUN 0 */
	sg[0] = (struct seg){ gpa_of(h), HDR_SZ, false };
	sg[1] = (struct seg){ gpa_of(rsp), RSP_SZ, true };
	sg[2] = (struct seg){ G_MAIN + BIG_OFF, blocks * 512, true };
	pthread_mutex_lock(&v->lk);
	if (!v->started || !v->num) {
		pthread_mutex_unlock(&v->lk);
		return;
	}
	head = vq_chain(t, v, sg, 3 <= v->num ? 3 : 0, 3 > v->num);
	for (i = 0; i < rounds && !stop_flag && now_s() < end; i++) {
		int room = vq_room(&D, v), k;

		for (k = 0; k < room; k++)
			vq_publish(r, q, v, head, k + 1 == room);
		pthread_mutex_unlock(&v->lk);
		if (i % 16 == 15)
			sample_inflight("one head reused with 8 MiB READs");
		usleep(below(r, 2000));
		pthread_mutex_lock(&v->lk);
		if (!v->started)
			break;
	}
	pthread_mutex_unlock(&v->lk);
	sample_inflight("one head reused with 8 MiB READs");
}

/* avail->idx jumps past the ring size (the host must stop the ring). */
static void op_jump(struct tctx *t)
{
	struct rng *r = &t->r;
	unsigned int q = below(r, NVQ);
	struct gvq *v = &D.vq[q];

	pthread_mutex_lock(&v->lk);
	if (v->started && v->num) {
		v->avail_idx += v->num + 1 + below(r, 40000);
		__atomic_store_n(&v->avail->idx, v->avail_idx, __ATOMIC_RELEASE);
		vq_kick(v);
	}
	pthread_mutex_unlock(&v->lk);
}

static void op_kick(struct tctx *t)
{
	struct rng *r = &t->r;
	unsigned int n = 1 + below(r, 200), i;

	for (i = 0; i < n && !stop_flag; i++) {
		struct gvq *v = &D.vq[below(r, NVQ)];

		pthread_mutex_lock(&v->lk);
		vq_kick(v);
		if (chance(r, 20))
			v->avail->flags = below(r, 2);
		if (chance(r, 10) && v->num)	/* used_event games */
			v->avail->ring[v->num] = rnd(r);
		pthread_mutex_unlock(&v->lk);
	}
}

/* Control queue: TMFs and AN requests with random fields. */
static void op_tmf(struct tctx *t)
{
	struct rng *r = &t->r;
	uint8_t *req = arena_alloc(t, 64), *rsp = arena_alloc(t, 128);
	uint32_t rl = 24, wl = 1;
	struct seg sg[4];
	unsigned int n = 0;

	memset(req, 0, 64);
	memset(rsp, 0xee, 128);
	switch (below(r, 10)) {
	case 0: case 1: case 2: case 3: case 4: case 5:	/* TMF */
		put_be(req, 0, 4);
		req[4] = chance(r, 85) ? below(r, 8) : rnd(r);
		if (chance(r, 5))
			memcpy(req + 4, (uint8_t[]){ rnd(r), rnd(r), rnd(r), rnd(r) }, 4);
		lun_bytes(r, req + 8);
		memcpy(req + 16, &(uint64_t){ chance(r, 60) ? t->tag - below(r, 8) :
				   rnd(r) }, 8);
		break;
	case 6: case 7:					/* AN query/subscribe */
		req[0] = 1 + below(r, 2);
		lun_bytes(r, req + 4);
		put_be(req + 12, rnd(r), 4);
		rl = 16;
		wl = 8;
		break;
	default:					/* unknown type */
		put_be(req, rnd(r), 4);
		break;
	}
	rl = rnd_len(r, rl);
	wl = rnd_len(r, wl);
	if (rl > 64)
		rl = 64;
	if (wl > 128)
		wl = 128;
	sg[n++] = (struct seg){ gpa_of(req), rl, false };
	if (chance(r, 10))
		sg[n++] = (struct seg){ place(t, rnd_loc(r), 16), 16, false };
	sg[n++] = (struct seg){ chance(r, 90) ? gpa_of(rsp) :
				place(t, rnd_loc(r), wl), wl, true };
	submit(t, 0, sg, n, chance(r, 30));
}

/* SQ/CQ setup and teardown requests, mostly valid, some not. */
static void op_sqcq_v(struct tctx *t, bool force_valid)
{
	struct rng *r = &t->r;
	struct {
		struct sqcq_tmf_req tmf;
		struct sqcq_setup_req setup;
	} *rq = arena_alloc(t, sizeof(*rq));
	struct sqcq_setup_in *in = arena_alloc(t, sizeof(*in));
	uint16_t nq = force_valid || chance(r, 70) ? 1 + below(r, NREQ) :
		      below(r, 300);
	struct seg sg[4];
	unsigned int n = 0;
	uint32_t wl = sizeof(*in);
	bool valid = force_valid || chance(r, 60);

	memset(rq, 0, sizeof(*rq));
	memset(in, 0xee, sizeof(*in));
	rq->tmf.type = 0;
	rq->tmf.subtype = cpu_to_le32(chance(r, 70) ? SQCQ_TMF_SUBTYPE_SETUP :
				      SQCQ_TMF_SUBTYPE_TEARDOWN);
	lun_bytes(r, rq->tmf.lun);
	rq->setup.magic = cpu_to_le32(SQCQ_MAGIC);
	rq->setup.version = cpu_to_le16(SQCQ_VERSION);
	rq->setup.nqueues = cpu_to_le16(nq);
	rq->setup.area_gpa = cpu_to_le64(G_MAIN + AREA_OFF);
	rq->setup.area_len = cpu_to_le32(4096);
	rq->setup.flags = cpu_to_le32(1 + below(r, 3));
	rq->setup.poll_idle_us = cpu_to_le32(below(r, 200));
	if (valid && nq <= NREQ) {
		sqcq_area_init(area(), nq);
	} else {
		switch (below(r, 9)) {
		case 0: rq->setup.magic = rnd(r); break;
		case 1: rq->setup.version = rnd(r); break;
		case 2: rq->setup.reserved[below(r, 9)] = rnd(r); break;
		case 3: rq->setup.flags = rnd(r); break;
		case 4: rq->setup.area_len = rnd_len(r, 0); break;
		case 5: area()->hdr.magic = rnd(r); break;
		case 6: area()->hdr.nqueues = rnd(r); break;
		case 7: area()->hdr.line_size = rnd(r); break;
		default: break;
		}
		/* area placement */
		const uint64_t where[] = {
			G_MAIN + AREA_OFF + below(r, 4096), G_FILE, G_ZERO,
			G_HOLE, G_TOP, G_TOP + TOP_SZ - 4096, G_NOWHERE,
			G_MAIN + MAIN_SZ - 4096, 0, ~0ull & ~4095ull,
			G_MAIN + AREA_OFF };

		rq->setup.area_gpa = cpu_to_le64(where[below(r, 11)]);
	}
	if (!force_valid && chance(r, 10))
		wl = below(r, sizeof(*in));
	if (!force_valid && chance(r, 15)) {	/* split over two descriptors */
		uint32_t cut = below(r, sizeof(*rq));

		sg[n++] = (struct seg){ gpa_of(rq), cut, false };
		sg[n++] = (struct seg){ gpa_of(rq) + cut, sizeof(*rq) - cut, false };
	} else {
		sg[n++] = (struct seg){ gpa_of(rq), force_valid || chance(r, 95) ?
					sizeof(*rq) : below(r, sizeof(*rq)), false };
	}
	sg[n++] = (struct seg){ gpa_of(in), wl, true };
	submit(t, 0, sg, n, chance(r, 20));
}

static void op_sqcq(struct tctx *t)
{
	op_sqcq_v(t, false);
}

/* Doorbell storm: random SQ indexes and flags while the poller may run. */
static void op_dbstorm(struct tctx *t)
{
	struct rng *r = &t->r;
	unsigned int i, n = 100 + below(r, 5000);
	struct sqcq_area *a = area();

	for (i = 0; i < n && !stop_flag; i++) {
		unsigned int k = below(r, NREQ);

		switch (below(r, 4)) {
		case 0:
			sqcq_store16(&a->q[k].sq_line.sq.idx, rnd(r));
			break;
		case 1:
			sqcq_store16(&a->q[k].cq_line.cq.flags, below(r, 4));
			break;
		case 2:
			sqcq_store16(&a->q[k].sq_line.sq.idx,
				     D.vq[2 + k].avail_idx);
			break;
		default:
			vq_kick(&D.vq[2 + k]);
			break;
		}
	}
}

/* Event queue: tiny buffers, floods, EVENTS_MISSED. */
static void op_evt(struct tctx *t, bool flood)
{
	struct rng *r = &t->r;
	struct gvq *v = &D.vq[1];
	double end = now_s() + (!flood ? 0 : chance(r, 70) ?
				0.2 + below(r, 3000) / 1000.0 :
				3 + below(r, 22000) / 1000.0);
	unsigned int posted = 0;

	do {
		int room, k;

		pthread_mutex_lock(&v->lk);
		if (!v->started || !v->num) {
			pthread_mutex_unlock(&v->lk);
			break;
		}
		room = vq_room(&D, v);
		for (k = 0; k < room && k < 64; k++) {
			uint32_t len = (const uint32_t[]){ 0, 1, 4, 8, 15, 15, 16,
				16, 64 }[below(r, 9)];
			uint8_t *b = arena_alloc(t, 64);
			struct seg sg = { gpa_of(b), len, !chance(r, 10) };

			if (chance(r, 5))
				sg.a = place(t, rnd_loc(r), len);
			vq_publish(r, 1, v, vq_chain(t, v, &sg, 1, false),
				   k + 1 == room);
			posted++;
		}
		pthread_mutex_unlock(&v->lk);
		if (chance(r, 30))
			ioctl(D.fd, VHOST_SCSI_SET_EVENTS_MISSED, &(uint32_t){ 1 });
		if (flood)
			sched_yield();
	} while (flood && now_s() < end && !stop_flag);
	(void)posted;
}

struct flood_arg {
	struct tctx t;
	volatile int stop;
	double deadline;
};

/*
 * Keep the event ring full of too-short buffers until told to stop: one
 * head, reused for every entry, whose chain is up to 1000 descriptors
 * (8 writable bytes in all), so each costs the host a long walk and the
 * guest one avail entry; published in bulk, one kick per batch.
 */
static void *evt_flood_run(void *a)
{
	struct flood_arg *f = a;
	struct tctx *t = &f->t;
	struct gvq *v = &D.vq[1];
	uint64_t buf = gpa_of(arena_alloc(t, 16));
	uint16_t head = 0;
	unsigned int i, len;

	pthread_mutex_lock(&v->lk);
	if (v->num && has_feature(&D, VIRTIO_RING_F_INDIRECT_DESC) &&
	    chance(&t->r, 50)) {
		struct vring_desc *tb = arena_alloc(t, 1000 * 16);

		for (i = 0; i < 1000; i++)
			tb[i] = (struct vring_desc){ buf, i == 999 ? 8 : 0,
				VRING_DESC_F_WRITE | (i < 999 ? VRING_DESC_F_NEXT : 0),
				(uint16_t)(i + 1) };
		head = vq_desc(v, gpa_of(tb), 1000 * 16, VRING_DESC_F_INDIRECT, 0);
	} else if (v->num) {
		len = v->num < 1000 ? v->num : 1000;
		for (i = 0; i < len; i++)
			v->desc[i] = (struct vring_desc){ buf, i + 1 == len ? 8 : 0,
				VRING_DESC_F_WRITE | (i + 1 < len ? VRING_DESC_F_NEXT : 0),
				(uint16_t)(i + 1) };
		head = 0;
		v->next_desc = len;
	}
	pthread_mutex_unlock(&v->lk);
	while (!f->stop && now_s() < f->deadline) {
		int room, k;

		pthread_mutex_lock(&v->lk);
		room = v->started ? vq_room(&D, v) : 0;
		for (k = 0; k < room; k++)
			v->avail->ring[(uint16_t)(v->avail_idx + k) % v->num] = head;
		if (room > 0) {
			v->avail_idx += room;
			__atomic_store_n(&v->avail->idx, v->avail_idx,
					 __ATOMIC_RELEASE);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			vq_kick(v);
		}
		pthread_mutex_unlock(&v->lk);
		if (room <= 0)
			sched_yield();
	}
	return NULL;
}

/*
 * A guest that keeps posting event buffers too short for an event must
 * not keep the host's worker (and the ring) for itself: the VMM's
 * GET_VRING_BASE on that ring has to get through while the flood goes on.
 */
static void op_evtflood(struct tctx *t)
{
	struct rng *r = &t->r;
	struct flood_arg *f = calloc(1, sizeof(*f));
	struct vhost_vring_state s = { .index = 1 };
	struct gvq *v = &D.vq[1];
	pthread_t th;
	double t0, took;
	int ret;

	if (!f)
		return;
	pthread_mutex_lock(&v->lk);
	restart_vq(r, 1, false);
	if (v->num < 256 && v->started) {	/* a big ring: never empty */
		struct vhost_vring_state g = { .index = 1 };

		if (!ioctl(D.fd, VHOST_GET_VRING_BASE, &g))
			vq_start(D.fd, v, 1, 1, 1024, (uint16_t)g.num);
	}
	pthread_mutex_unlock(&v->lk);
	ioctl(D.fd, VHOST_SCSI_SET_EVENTS_MISSED, &(uint32_t){ 1 });
	f->t = *t;
	/* The flood ends by itself after 30 s: a host that never lets go
	 * shows as a GET_VRING_BASE that returns only then.
	 */
	f->deadline = now_s() + 30;
	f->t.r.s ^= 0xf100d;
	f->t.arena = NARENAS - 1;
	f->t.aoff = 0;
	if (pthread_create(&th, NULL, evt_flood_run, f)) {
		free(f);
		return;
	}
	usleep(300000 + below(r, 700000));
	op_step(t, "evtflood: GET_VRING_BASE on the flooded event ring");
	t0 = now_s();
	ret = ioctl(D.fd, VHOST_GET_VRING_BASE, &s);
	took = now_s() - t0;
	f->stop = 1;
	pthread_join(th, NULL);
	free(f);
	pthread_mutex_lock(&v->lk);
	if (!ret)
		v->started = 0;
	restart_vq(r, 1, false);
	pthread_mutex_unlock(&v->lk);
	if (took > 15)
		fail("evt-flood-blocks-ring-ioctl",
		     "GET_VRING_BASE on the event ring took %.1f s while the guest kept posting too-short event buffers",
		     took);
	else
		__atomic_add_fetch(&evtflood_ok, 1, __ATOMIC_RELAXED);
	if (took > evtflood_max)
		evtflood_max = took;
}

static void op_evtmissed(struct tctx *t)
{
	uint32_t v = below(&t->r, 3) ? 1 : 0;

	ioctl(D.fd, VHOST_SCSI_SET_EVENTS_MISSED, &v);
	ioctl(D.fd, VHOST_SCSI_GET_EVENTS_MISSED, &v);
	if (chance(&t->r, 20))
		ioctl(D.fd, VHOST_SCSI_SET_EVENTS_MISSED, (void *)16);
}

/* Memory table churn while I/O flies; mostly ends on the good table. */
static void op_memtable(struct tctx *t)
{
	struct rng *r = &t->r;
	unsigned int i, n = 1 + below(r, 20);

	for (i = 0; i < n && !stop_flag; i++) {
		if (chance(r, 3))
			too_many_regions(D.fd);
		else
			random_table(r, D.fd);
		if (chance(r, 30))
			usleep(below(r, 3000));
	}
	if (chance(r, 85))
		set_full_table(D.fd);
}

/* The hole region goes away and comes back (same address). */
static void op_hole(struct tctx *t)
{
	static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;

	pthread_mutex_lock(&lk);
	munmap(mem_hole, HOLE_SZ);
	usleep(below(&t->r, 20000));
	if (!map_fixed_anon(mem_hole, HOLE_SZ, PROT_READ | PROT_WRITE)) {
		fail("hole-remap", "mmap: %s", strerror(errno));
		pthread_mutex_unlock(&lk);
		return;
	}
	if (chance(&t->r, 50))
		memset(mem_hole, 0x5a, HOLE_SZ);
	pthread_mutex_unlock(&lk);
}

static int bad_fd(struct rng *r)
{
	switch (below(r, 4)) {
	case 0: return D.fd;
	case 1: return 0;
	case 2: return 9999;
	default: return -2 - (int)below(r, 100);
	}
}

/* vring ioctls on running rings, with good and bad values. */
static void op_vring(struct tctx *t)
{
	struct rng *r = &t->r;
	unsigned int q = chance(r, 85) ? below(r, NVQ) :
			 (const unsigned int[]){ NVQ, 129, 130, 0x10000,
				 0xffffffffu }[below(r, 5)];
	struct gvq *v = q < NVQ ? &D.vq[q] : NULL;
	int fd = D.fd, e;

	if (v)
		pthread_mutex_lock(&v->lk);
	switch (below(r, 9)) {
	case 0:
		vstate(fd, VHOST_SET_VRING_NUM, q, chance(r, 50) ? rnd_num(r) :
		       (const unsigned int[]){ 0, 3, 32768, 65536, 0xffffffffu }
		       [below(r, 5)]);
		break;
	case 1:
		vstate(fd, VHOST_SET_VRING_BASE, q, chance(r, 50) ? below(r, 65536) :
		       rnd(r));
		break;
	case 2: {
		struct vhost_vring_addr a = { .index = q };

		if (v) {
			a.desc_user_addr = (uintptr_t)v->desc;
			a.avail_user_addr = (uintptr_t)v->avail;
			a.used_user_addr = (uintptr_t)v->used;
		}
		switch (below(r, 5)) {
		case 0: a.flags = 1; break;
		case 1: a.desc_user_addr += 1 + below(r, 15); break;
		case 2: a.used_user_addr = 0xffff888000000000ull; break;
		case 3: a.avail_user_addr = ~0ull - 1; break;
		default: break;
		}
		ioctl(fd, VHOST_SET_VRING_ADDR, &a);
		break;
	}
	case 3:		/* a new kick eventfd: restarts a running ring */
		if (v) {
			e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
			if (e >= 0 && !vfile(fd, VHOST_SET_VRING_KICK, q, e)) {
				close(v->kick);
				v->kick = e;
				v->started = 1;
			} else if (e >= 0) {
				close(e);
			}
		} else {
			vfile(fd, VHOST_SET_VRING_KICK, q, bad_fd(r));
		}
		break;
	case 4:		/* a bad kick fd */
		if (!vfile(fd, VHOST_SET_VRING_KICK, q, bad_fd(r)) && v)
			v->started = 0;
		break;
	case 5:		/* call/err: a new eventfd, none, or a bad fd */
	case 6: {
		unsigned long cmd = chance(r, 50) ? VHOST_SET_VRING_CALL :
				    VHOST_SET_VRING_ERR;
		int *slot = v ? (cmd == VHOST_SET_VRING_CALL ? &v->call : &v->err) :
			    NULL;

		switch (below(r, 3)) {
		case 0:
			e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
			if (e >= 0 && slot && !vfile(fd, cmd, q, e)) {
				close(*slot);
				*slot = e;
			} else if (e >= 0) {
				close(e);
			}
			break;
		case 1:
			vfile(fd, cmd, q, -1);
			if (slot)	/* re-arm ours */
				vfile(fd, cmd, q, *slot);
			break;
		default:
			vfile(fd, cmd, q, bad_fd(r));
			break;
		}
		break;
	}
	case 7:		/* KICK -1: stop */
		if (!vfile(fd, VHOST_SET_VRING_KICK, q, -1) && v)
			v->started = 0;
		break;
	default:	/* the same ring set up again while running */
		if (v)
			vaddr(fd, q, v, 0);
		break;
	}
	if (v)
		pthread_mutex_unlock(&v->lk);
}

/* Stop and restart a ring (GET_VRING_BASE, then set up again). */
static bool restart_vq(struct rng *r, unsigned int q, bool new_num)
{
	struct gvq *v = &D.vq[q];
	struct vhost_vring_state s = { .index = q };
	unsigned int num = v->num;
	bool ok;

	if (ioctl(D.fd, VHOST_GET_VRING_BASE, &s))
		return false;
	v->started = 0;
	if (new_num || !num)
		num = rnd_num(r);
	if (q == 0 && num < 4)
		num = 4;
	ok = !vq_start(D.fd, v, q, q, num, (uint16_t)s.num);
	return ok;
}

static void op_stop(struct tctx *t)
{
	unsigned int q = below(&t->r, NVQ);
	struct gvq *v = &D.vq[q];
	struct vhost_vring_state s = { .index = q };

	pthread_mutex_lock(&v->lk);
	if (!ioctl(D.fd, VHOST_GET_VRING_BASE, &s))
		v->started = 0;
	if (chance(&t->r, 60))
		restart_vq(&t->r, q, chance(&t->r, 30));
	pthread_mutex_unlock(&v->lk);
}

/* Restart rings that are stopped or broken (err eventfd signalled). */
static void op_restart(struct tctx *t, bool all)
{
	unsigned int q;

	for (q = 0; q < NVQ; q++) {
		struct gvq *v = &D.vq[q];
		uint64_t x = 0;
		bool broken;

		pthread_mutex_lock(&v->lk);
		broken = v->err >= 0 && read(v->err, &x, sizeof(x)) == sizeof(x);
		if (!v->started || broken || (all && vq_room(&D, v) <= 0))
			restart_vq(&t->r, q, chance(&t->r, 20));
		vq_harvest(v);
		pthread_mutex_unlock(&v->lk);
	}
}

/* Start an unused host ring on the memory of one of ours (aliasing). */
static void op_alias(struct tctx *t)
{
	struct rng *r = &t->r;
	unsigned int q = NVQ + below(r, 4), src = below(r, NVQ);
	struct gvq *v = &D.vq[src];
	int e;

	pthread_mutex_lock(&v->lk);
	if (v->num) {
		if (v->num > __atomic_load_n(&alias_num[q - NVQ], __ATOMIC_RELAXED))
			__atomic_store_n(&alias_num[q - NVQ], v->num,
					 __ATOMIC_RELAXED);
		e = v->kick;
		vstate(D.fd, VHOST_SET_VRING_NUM, q, v->num);
		vstate(D.fd, VHOST_SET_VRING_BASE, q, below(r, 65536));
		vaddr(D.fd, q, v, 0);
		vfile(D.fd, VHOST_SET_VRING_CALL, q, v->call);
		vfile(D.fd, VHOST_SET_VRING_KICK, q, e);
		vq_kick(v);
	}
	pthread_mutex_unlock(&v->lk);
	if (chance(r, 50)) {
		struct vhost_vring_state s = { .index = q };

		ioctl(D.fd, VHOST_GET_VRING_BASE, &s);
	}
}

static void op_endpoint(struct tctx *t)
{
	struct rng *r = &t->r;
	struct vhost_scsi_target tg;

	switch (below(r, 6)) {
	case 0: case 1:		/* clear and bind again */
		clear_endpoint(D.fd, wwpn);
		usleep(below(r, 10000));
		set_endpoint(D.fd, wwpn);
		break;
	case 2:
		set_endpoint(D.fd, wwpn);	/* again: EEXIST */
		break;
	case 3:
		set_endpoint(D.fd, chance(r, 50) ? wwpn2 : "naa.0000000000000000");
		break;
	case 4:
		clear_endpoint(D.fd, wwpn2);	/* the wrong one */
		break;
	default:
		memset(&tg, 0, sizeof(tg));
		memset(tg.vhost_wwpn, 'a', sizeof(tg.vhost_wwpn));
		tg.abi_version = rnd(r);
		tg.reserved = rnd(r);
		tg.vhost_tpgt = rnd(r);
		ioctl(D.fd, chance(r, 50) ? VHOST_SCSI_SET_ENDPOINT :
		      VHOST_SCSI_CLEAR_ENDPOINT, &tg);
		ioctl(D.fd, VHOST_SCSI_GET_ABI_VERSION, &(int){ 0 });
		break;
	}
}

/* Requests in flight on every request queue (before a reset/close). */
static void burst(struct tctx *t)
{
	unsigned int i, n = below(&t->r, 40);

	for (i = 0; i < n; i++)
		op_chain(t, chance(&t->r, 30), chance(&t->r, 10));
}

static void rebuild(struct tctx *t, bool reopen)
{
	char why[256];

	op_step(t, reopen ? "rebuild (open)" : "rebuild");
	if (reopen || D.fd < 0)
		dev_close_files(&D);
	else
		D.ready = 0;
	if (!reopen && D.fd >= 0) {
		/* after RESET_OWNER: same fd, fresh eventfds */
		int fd = D.fd;

		D.fd = -1;
		dev_close_files(&D);
		D.fd = fd;
	}
	if (dev_build(&D, &t->r, wwpn, 0, true, why, sizeof(why))) {
		say("# thread %u: rebuild failed: %s\n", t->id, why);
		__atomic_add_fetch(&rebuild_fails, 1, __ATOMIC_RELAXED);
		dev_close_files(&D);
	}
}

struct storm_arg {
	struct tctx t;
	volatile int *stop;
};

/*
 * The control ring full of valid SQ/CQ setups (one area, one queue), all
 * the same head: a chain of 1000 empty readable descriptors, the setup
 * request, the answer buffer.  Each costs the host a long walk, so it is
 * still taking them one after the other when the device is reset.
 */
static void storm_fill(struct tctx *t)
{
	struct gvq *v = &D.vq[0];
	struct {
		struct sqcq_tmf_req tmf;
		struct sqcq_setup_req setup;
	} *rq = arena_alloc(t, sizeof(*rq));
	struct sqcq_setup_in *in = arena_alloc(t, sizeof(*in));
	unsigned int i, len;
	uint16_t head;
	int room, k;

	memset(rq, 0, sizeof(*rq));
	rq->tmf.subtype = cpu_to_le32(SQCQ_TMF_SUBTYPE_SETUP);
	rq->tmf.lun[0] = 1;
	rq->tmf.lun[1] = 1;
	rq->setup.magic = cpu_to_le32(SQCQ_MAGIC);
	rq->setup.version = cpu_to_le16(SQCQ_VERSION);
	rq->setup.nqueues = cpu_to_le16(1);
	rq->setup.area_gpa = cpu_to_le64(G_MAIN + AREA_OFF);
	rq->setup.area_len = cpu_to_le32(4096);
	rq->setup.flags = cpu_to_le32(SQCQ_F_ALL);
	sqcq_area_init(area(), 1);
	pthread_mutex_lock(&v->lk);
	if (!v->started || v->num < 4) {
		pthread_mutex_unlock(&v->lk);
		return;
	}
	if (has_feature(&D, VIRTIO_RING_F_INDIRECT_DESC)) {
		struct vring_desc *tb = arena_alloc(t, 1002 * 16);

		for (i = 0; i < 1000; i++)
			tb[i] = (struct vring_desc){ gpa_of(rq), 0,
				VRING_DESC_F_NEXT, (uint16_t)(i + 1) };
		tb[1000] = (struct vring_desc){ gpa_of(rq), sizeof(*rq),
			VRING_DESC_F_NEXT, 1001 };
		tb[1001] = (struct vring_desc){ gpa_of(in), sizeof(*in),
			VRING_DESC_F_WRITE, 0 };
		head = vq_desc(v, gpa_of(tb), 1002 * 16, VRING_DESC_F_INDIRECT, 0);
	} else {
		len = v->num < 1000 ? v->num : 1000;
		for (i = 0; i + 2 < len; i++)
			v->desc[i] = (struct vring_desc){ gpa_of(rq), 0,
				VRING_DESC_F_NEXT, (uint16_t)(i + 1) };
		v->desc[i] = (struct vring_desc){ gpa_of(rq), sizeof(*rq),
			VRING_DESC_F_NEXT, (uint16_t)(i + 1) };
		v->desc[i + 1] = (struct vring_desc){ gpa_of(in), sizeof(*in),
			VRING_DESC_F_WRITE, 0 };
		head = 0;
		v->next_desc = len;
	}
	room = vq_room(&D, v);
	for (k = 0; k < room; k++)
		v->avail->ring[(uint16_t)(v->avail_idx + k) % v->num] = head;
	if (room > 0) {
		v->avail_idx += room;
		__atomic_store_n(&v->avail->idx, v->avail_idx, __ATOMIC_RELEASE);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
	vq_kick(v);
	pthread_mutex_unlock(&v->lk);
}

static void *storm_run(void *a)
{
	struct storm_arg *s = a;

	storm_fill(&s->t);
	while (!*s->stop) {
		op_sqcq_v(&s->t, chance(&s->t.r, 80));
		if (chance(&s->t.r, 30))
			op_dbstorm(&s->t);
		if (chance(&s->t.r, 5))
			op_chain(&s->t, false, false);
	}
	return NULL;
}

/* Teardown ops (device write-locked): reset, close, or either racing a
 * storm of SQ/CQ setups and doorbells from a second thread.
 */
static void op_teardown(struct tctx *t, enum op o)
{
	struct rng *r = &t->r;
	volatile int stop = 0;
	struct storm_arg sa;
	pthread_t th;
	bool storm = o == OP_STORM, started = false, have_dir;
	char dir[96];

	have_dir = D.ready && dbg_dir_of(getpid(), dir, sizeof(dir));
	if (D.ready && !storm)
		burst(t);
	if (storm && have_dir) {
		/* SQ/CQ setup needs a device with nothing in flight */
		double end = now_s() + 3;

		op_step(t, "storm: waiting for in-flight requests");
		while (dbg_value(dir, "targets", "inflight: ") > 0 && now_s() < end)
			usleep(10000);
	}
	if (storm && D.ready) {
		sa.t = *t;
		sa.t.r.s ^= 0x5eed;
		sa.t.arena = NARENAS - 1;
		sa.t.aoff = 0;
		sa.stop = &stop;
		started = !pthread_create(&th, NULL, storm_run, &sa);
		usleep(below(r, 20000));
	}
	if (storm && D.ready && chance(r, 33)) {
		char path[128], buf[512];

		/* CLEAR_ENDPOINT ends SQ/CQ; setups racing it must not
		 * bring the doorbells back on a device without targets.
		 */
		op_step(t, "storm: CLEAR_ENDPOINT");
		clear_endpoint(D.fd, wwpn);
		usleep(20000);
		if (started) {
			stop = 1;
			pthread_join(th, NULL);
		}
		usleep(200000);	/* what the host had taken, done */
		snprintf(path, sizeof(path), "%s/queues", dir);
		if (have_dir && read_text(path, buf, sizeof(buf))) {
			if (strstr(buf, "mode: sqcq"))
				fail("doorbells-after-clear-endpoint",
				     "%s says SQ/CQ after CLEAR_ENDPOINT returned (setup requests raced it)",
				     dir);
			else
				__atomic_add_fetch(&reset_checks, 1, __ATOMIC_RELAXED);
		}
		op_step(t, "storm: SET_ENDPOINT again");
		if (set_endpoint(D.fd, wwpn) && errno != EEXIST)
			rebuild(t, true);
	} else if (o == OP_CLOSE || (storm && chance(r, 50))) {
		op_step(t, storm ? "storm: close with I/O in flight" :
			"close with I/O in flight");
		if (D.fd >= 0)
			close(D.fd);
		D.fd = -1;
		if (started) {
			stop = 1;
			pthread_join(th, NULL);
		}
		rebuild(t, true);
	} else {
		op_step(t, storm ? "storm: RESET_OWNER" : "RESET_OWNER");
		ioctl(D.fd, VHOST_RESET_OWNER);
		if (started) {
			stop = 1;
			pthread_join(th, NULL);
		}
		/* A reset ends SQ/CQ for good: no doorbell area may stay. */
		if (have_dir) {
			char path[128], buf[512];

			snprintf(path, sizeof(path), "%s/queues", dir);
			if (read_text(path, buf, sizeof(buf))) {
				if (strstr(buf, "mode: sqcq"))
					fail("doorbells-after-reset",
					     "%s still says SQ/CQ after RESET_OWNER returned%s",
					     dir, storm ? " (setup requests raced the reset)" : "");
				else
					__atomic_add_fetch(&reset_checks, 1,
							   __ATOMIC_RELAXED);
			}
		}
		rebuild(t, false);
	}
}

/* fork(): the child touches the device (it must not own it) and exits. */
static void op_fork(struct tctx *t, bool writer)
{
	struct rng *r = &t->r;
	int kind = writer ? 2 : below(r, 2), st = 0, fd = D.fd;
	unsigned int delay = below(r, 100000);
	pid_t pid;

	op_step(t, "fork");
	pid = fork();
	if (pid < 0)
		return;
	if (!pid) {
		uint64_t f;
		int bad = 0;
		struct gvq *v = &D.vq[2];

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (kind == 0) {
			/* Every owner-only ioctl must fail with EPERM. */
			if (!ioctl(fd, VHOST_GET_FEATURES, &f))
				bad |= 1;
			if (!ioctl(fd, VHOST_SET_OWNER))
				bad |= 2;
			if (!set_full_table(fd))
				bad |= 4;
			if (!vstate(fd, VHOST_SET_VRING_NUM, 7, 8))
				bad |= 8;
			if (!ioctl(fd, VHOST_RESET_OWNER))
				bad |= 16;
			if (!set_endpoint(fd, wwpn2))
				bad |= 32;
			if (!vfile(fd, VHOST_SET_VRING_CALL, 2, -1))
				bad |= 64;
			vq_kick(v);
		} else if (kind == 1) {
			usleep(delay);
		}
		close(fd);
		_exit(bad);
	}
	if (kind == 2) {
		/* The child outlives our close: its exit releases it. */
		close(D.fd);
		D.fd = -1;
		rebuild(t, true);
	}
	op_step(t, "fork: waitpid");
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st))
		fail("non-owner-ioctl", "a forked child's ioctls succeeded on the parent's device (mask 0x%x)",
		     WEXITSTATUS(st));
}

/* A worker process with its own device on the second target, killed. */
static void op_killworker(struct tctx *t)
{
	struct rng *r = &t->r;
	unsigned int when = below(r, 400000), steps = below(r, 10);
	uint64_t cseed = rnd(r);
	int st;
	pid_t pid;

	op_step(t, "killworker: fork");
	pid = fork();
	if (pid < 0)
		return;
	if (!pid) {
		struct gdev d;
		struct tctx c;
		char why[128];
		unsigned int i;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		memset(&d, 0, sizeof(d));
		d.fd = -1;
		for (i = 0; i < NVQ; i++)
			d.vq[i].kick = d.vq[i].call = d.vq[i].err = -1;
		memset(&c, 0, sizeof(c));
		c.r.s = cseed;
		c.arena = NARENAS - 1;
		if (steps < 2) {	/* killed while half set up */
			d.fd = open(node, O_RDWR);
			ioctl(d.fd, VHOST_SET_OWNER);
			if (steps)
				set_full_table(d.fd);
			pause();
		}
		if (dev_build(&d, &c.r, wwpn2, NVQ, true, why, sizeof(why)))
			pause();
		/* I/O until killed, on rings 6..11 of the main region. */
		for (;;) {
			unsigned int q = 2 + below(&c.r, NREQ);
			struct gvq *v = &d.vq[q];
			struct cmdspec cs;
			struct seg sg[3];
			uint8_t *h, *rsp;
			uint32_t blocks = 1 + below(&c.r, 2048);

			if (vq_room(&d, v) <= 0) {
				vq_kick(v);
				usleep(100);
				continue;
			}
			memset(&cs, 0, sizeof(cs));
			cs.cdb[0] = chance(&c.r, 50) ? 0x28 : 0x2a;
			put_be(cs.cdb + 2, below(&c.r, 30000), 4);
			put_be(cs.cdb + 7, blocks, 2);
			h = arena_alloc(&c, 64);
			memset(h, 0, 64);
			h[0] = 1; h[1] = 1; h[2] = 0x40;
			memcpy(h + 19, cs.cdb, 32);
			rsp = arena_alloc(&c, RSP_SZ);
			sg[0] = (struct seg){ gpa_of(h), HDR_SZ, false };
			if (cs.cdb[0] == 0x2a) {
				sg[1] = (struct seg){ place(&c, L_BIG, blocks * 512),
						      blocks * 512, false };
				sg[2] = (struct seg){ gpa_of(rsp), RSP_SZ, true };
			} else {
				sg[1] = (struct seg){ gpa_of(rsp), RSP_SZ, true };
				sg[2] = (struct seg){ place(&c, L_BIG, blocks * 512),
						      blocks * 512, true };
			}
			vq_publish(&c.r, q, v, vq_chain(&c, v, sg, 3, v->num < 3),
				   true);
		}
	}
	usleep(when);
	kill(pid, SIGKILL);
	op_step(t, "killworker: waitpid after SIGKILL");
	waitpid(pid, &st, 0);
	__atomic_add_fetch(&kills, 1, __ATOMIC_RELAXED);
}

/* Raw ioctls: unknown numbers, bad pointers, queries, repeated setup. */
/*
 * The worker ioctls: a new worker now and then; any queue (the control
 * queue too, and bogus indices) moved to one of the first four workers
 * or to a bogus id while the rings run, SQ/CQ on or off; a worker freed
 * (refused while a queue is on it).
 */
static void op_workers(struct tctx *t)
{
	struct vhost_worker_state ws = { 0 };
	struct vhost_vring_worker vw;
	struct rng *r = &t->r;

	if (chance(r, 30))
		ioctl(D.fd, VHOST_NEW_WORKER, &ws);
	vw.index = chance(r, 90) ? below(r, NVQ) : (unsigned int)rnd(r);
	vw.worker_id = chance(r, 90) ? below(r, 4) : (unsigned int)rnd(r);
	ioctl(D.fd, VHOST_ATTACH_VRING_WORKER, &vw);
	vw.index = below(r, NVQ);
	ioctl(D.fd, VHOST_GET_VRING_WORKER, &vw);
	if (chance(r, 20)) {
		ws.worker_id = below(r, 4);
		ioctl(D.fd, VHOST_FREE_WORKER, &ws);
	}
}

/*
 * Dirty logging while the rings run, as a VMM migrating (or a hostile
 * one): a log base that is good, too small (its last page only), none or
 * anything; LOG_ALL on and off; a ring's used-ring logging at its own
 * address or anywhere, with stray flag bits; a log eventfd or garbage.
 */
#define FZ_LOG_LEN	(1u << 20)	/* bits for 32 GiB of guest addresses */
static uint8_t *fz_log;

static void op_dirty_log(struct tctx *t)
{
	struct rng *r = &t->r;
	unsigned int q = below(r, NVQ);
	struct gvq *v = &D.vq[q];
	uint64_t base, f = 0;
	int fd;

	if (!fz_log) {
		void *p = mmap(NULL, FZ_LOG_LEN, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p == MAP_FAILED)
			return;
		/* Another thread may have mapped one meanwhile: keep it. */
		if (!__atomic_compare_exchange_n(&fz_log, &(uint8_t *){ NULL },
						 p, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			munmap(p, FZ_LOG_LEN);
	}
	switch (below(r, 4)) {
	case 0:
		base = (const uint64_t[]){ (uintptr_t)fz_log,
			(uintptr_t)fz_log + FZ_LOG_LEN - 4096, 0,
			rnd(r) }[below(r, 4)];
		ioctl(D.fd, VHOST_SET_LOG_BASE, &base);
		break;
	case 1:
		f = D.features & ~(1ull << VHOST_F_LOG_ALL);
		if (chance(r, 50))
			f |= 1ull << VHOST_F_LOG_ALL;
		ioctl(D.fd, VHOST_SET_FEATURES, &f);
		break;
	case 2:
		pthread_mutex_lock(&v->lk);
		{
			struct vhost_vring_addr a = {
				.index = q,
				.flags = (chance(r, 70) ? 1u << VHOST_VRING_F_LOG : 0) |
					 (chance(r, 5) ? 1u << below(r, 32) : 0),
				.desc_user_addr = (uintptr_t)v->desc,
				.avail_user_addr = (uintptr_t)v->avail,
				.used_user_addr = (uintptr_t)v->used,
				.log_guest_addr = chance(r, 70) ?
					gpa_of(v->used) : rnd(r),
			};

			ioctl(D.fd, VHOST_SET_VRING_ADDR, &a);
		}
		pthread_mutex_unlock(&v->lk);
		break;
	default:
		if (chance(r, 50)) {
			fd = eventfd(0, EFD_CLOEXEC);
			ioctl(D.fd, VHOST_SET_LOG_FD, &fd);
			if (fd >= 0)
				close(fd);	/* the device holds its own */
		} else {
			/* Any number, ours or not: only read by the device. */
			fd = (int)(rnd(r) % 4096) - 1;
			ioctl(D.fd, VHOST_SET_LOG_FD, &fd);
		}
		break;
	}
}

static void op_ioctl(struct tctx *t)
{
	struct rng *r = &t->r;
	uint64_t f = 0;
	unsigned long cmd;
	unsigned int i;

	switch (below(r, 10)) {
	case 0:
		ioctl(D.fd, VHOST_GET_FEATURES, &f);
		f |= 1ull << below(r, 64);
		ioctl(D.fd, VHOST_SET_FEATURES, &f);	/* while running */
		break;
	case 1:
		ioctl(D.fd, VHOST_SET_OWNER);		/* EBUSY */
		ioctl(D.fd, VHOST_GET_BACKEND_FEATURES, &f);
		f = rnd(r);
		ioctl(D.fd, VHOST_SET_BACKEND_FEATURES, &f);
		break;
	case 2:		/* bad pointers */
		cmd = (const unsigned long[]){ VHOST_SET_MEM_TABLE,
			VHOST_SET_VRING_ADDR, VHOST_SET_VRING_NUM,
			VHOST_GET_VRING_BASE, VHOST_SCSI_SET_ENDPOINT,
			VHOST_GET_FEATURES, VHOST_SET_VRING_KICK }[below(r, 7)];
		ioctl(D.fd, cmd, chance(r, 50) ? (void *)8 :
		      (void *)0xffff888000000000ull);
		break;
	case 3:		/* unknown numbers, vhost and not */
		for (i = 0; i < 8; i++)
			ioctl(D.fd, _IOC(below(r, 4), VHOST_VIRTIO, below(r, 256),
					 below(r, 64)), mem_low);
		ioctl(D.fd, rnd(r) & 0xffffffff, mem_low);
		break;
	case 4:		/* the vring ioctls on a stopped, unused ring */
		vstate(D.fd, VHOST_SET_VRING_NUM, 20 + below(r, 100), rnd_num(r));
		vfile(D.fd, VHOST_SET_VRING_KICK, 20 + below(r, 100),
		      D.vq[0].kick);
		break;
	case 5:
		ioctl(D.fd, VHOST_SCSI_GET_ABI_VERSION, &(int){ 0 });
		ioctl(D.fd, VHOST_SCSI_GET_EVENTS_MISSED, &(uint32_t){ 0 });
		break;
	case 6:		/* read/write/poll/mmap on the node */
		if (read(D.fd, mem_low, 16) < 0 || write(D.fd, mem_low, 16) < 0)
			(void)0;
		{
			struct pollfd p = { .fd = D.fd, .events = POLLIN | POLLOUT };

			poll(&p, 1, 0);
		}
		{
			void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, D.fd, 0);

			if (m != MAP_FAILED)
				munmap(m, 4096);
		}
		break;
	case 7:		/* concurrent GET_VRING_BASE + SET_VRING_KICK on one ring */
		{
			unsigned int q = 2 + below(r, NREQ);
			struct gvq *v = &D.vq[q];

			pthread_mutex_lock(&v->lk);
			restart_vq(r, q, false);
			pthread_mutex_unlock(&v->lk);
		}
		break;
	case 8:
		op_dirty_log(t);
		break;
	default:	/* a second open of the node, dropped at once */
		{
			int fd2 = open(node, O_RDWR);

			if (fd2 >= 0) {
				ioctl(fd2, VHOST_SET_OWNER);
				if (chance(r, 50))
					set_full_table(fd2);
				close(fd2);
			}
		}
		break;
	}
}

/* A well-formed INQUIRY on target 1 LUN 0, waited for. */
static bool probe(struct tctx *t, unsigned int q, unsigned int ms,
		  char *why, size_t whylen)
{
	struct gvq *v = &D.vq[q];
	uint8_t *h = arena_alloc(t, 64), *rsp = arena_alloc(t, RSP_SZ),
		*data = arena_alloc(t, 96);
	struct seg sg[3];
	uint16_t want, head;
	double end = now_s() + ms / 1000.0;

	memset(h, 0, 64);
	h[0] = 1; h[1] = 1; h[2] = 0x40;
	h[19] = 0x12;
	h[23] = 96;
	memset(rsp, 0xee, RSP_SZ);
	memset(data, 0, 96);
	sg[0] = (struct seg){ gpa_of(h), HDR_SZ, false };
	sg[1] = (struct seg){ gpa_of(rsp), RSP_SZ, true };
	sg[2] = (struct seg){ gpa_of(data), 96, true };
	pthread_mutex_lock(&v->lk);
	if (!v->started || vq_room(&D, v) <= 0 || v->num < 3) {
		pthread_mutex_unlock(&v->lk);
		snprintf(why, whylen, "ring %u stopped or full", q);
		return false;
	}
	/* Only this probe on the ring: wait for our own entry. */
	head = vq_chain(t, v, sg, 3, false);
	want = v->avail_idx + 1;
	vq_publish(&t->r, q, v, head, true);
	__atomic_add_fetch(&probes_sent, 1, __ATOMIC_RELAXED);
	while ((int16_t)(ld16(&v->used->idx) - want) < 0) {
		if (now_s() > end) {
			pthread_mutex_unlock(&v->lk);
			snprintf(why, whylen, "no answer in %u ms (used %u, want %u)",
				 ms, ld16(&v->used->idx), want);
			return false;
		}
		usleep(1000);
		vq_kick(v);
	}
	pthread_mutex_unlock(&v->lk);
	if (rsp[10] != 0 || rsp[11] != 0 || (data[0] & 0x1f) != 0) {
		snprintf(why, whylen, "response %u status 0x%x type 0x%x", rsp[11],
			 rsp[10], data[0]);
		return false;
	}
	__atomic_add_fetch(&probes_ok, 1, __ATOMIC_RELAXED);
	return true;
}

static void op_harvest(struct tctx *t)
{
	unsigned int q;

	(void)t;
	for (q = 0; q < NVQ; q++) {
		struct gvq *v = &D.vq[q];

		pthread_mutex_lock(&v->lk);
		vq_harvest(v);
		pthread_mutex_unlock(&v->lk);
	}
}

/* ---- the threads ---- */

static unsigned int total_weight;

static enum op pick(struct rng *r)
{
	uint32_t x = below(r, total_weight);
	unsigned int i;

	for (i = 0; i < NOPS; i++) {
		if (x < ops[i].weight)
			return i;
		x -= ops[i].weight;
	}
	return OP_CHAIN;
}

static double t_end;

static void *fuzz_thread(void *arg)
{
	struct tctx *t = arg;
	char why[256];

	t->tid = syscall(SYS_gettid);
	while (!stop_flag && now_s() < t_end) {
		enum op o = pick(&t->r);
		bool writer = o == OP_RESET || o == OP_CLOSE || o == OP_STORM ||
			      o == OP_EVTFLOOD ||
			      (o == OP_FORK && chance(&t->r, 30)) ||
			      o == OP_REBUILD;

		if (writer) {
			pthread_rwlock_wrlock(&devlk);
			op_begin(t, o, NULL);
			if (o == OP_FORK)
				op_fork(t, true);
			else if (o == OP_EVTFLOOD)
				D.ready ? op_evtflood(t) : (void)0;
			else
				op_teardown(t, o);
			op_end(t);
			pthread_rwlock_unlock(&devlk);
			continue;
		}
		pthread_rwlock_rdlock(&devlk);
		if (!D.ready) {
			pthread_rwlock_unlock(&devlk);
			pthread_rwlock_wrlock(&devlk);
			if (!D.ready) {
				op_begin(t, OP_REBUILD, NULL);
				rebuild(t, true);
				op_end(t);
			}
			pthread_rwlock_unlock(&devlk);
			if (!D.ready)
				usleep(200000);
			continue;
		}
		op_begin(t, o, NULL);
		switch (o) {
		case OP_CHAIN: op_chain(t, false, false); break;
		case OP_INDIRECT: op_chain(t, true, false); break;
		case OP_BADCHAIN: op_badchain(t); break;
		case OP_WRONGDIR: op_chain(t, chance(&t->r, 30), true); break;
		case OP_REUSE: op_reuse(t); break;
		case OP_JUMP: op_jump(t); break;
		case OP_KICK: op_kick(t); break;
		case OP_TMF: op_tmf(t); break;
		case OP_SQCQ: op_sqcq(t); break;
		case OP_DBSTORM: op_dbstorm(t); break;
		case OP_EVT: op_evt(t, chance(&t->r, 30)); break;
		case OP_EVTMISSED: op_evtmissed(t); break;
		case OP_MEMTABLE: op_memtable(t); break;
		case OP_HOLE: op_hole(t); break;
		case OP_VRING: op_vring(t); break;
		case OP_STOP: op_stop(t); break;
		case OP_RESTART: op_restart(t, chance(&t->r, 30)); break;
		case OP_ALIAS: op_alias(t); break;
		case OP_ENDPOINT: op_endpoint(t); break;
		case OP_FORK: op_fork(t, false); break;
		case OP_KILLWORKER: op_killworker(t); break;
		case OP_WORKERS: op_workers(t); break;
		case OP_IOCTL: op_ioctl(t); break;
		case OP_PROBE:
			probe(t, rnd_req_vq(&t->r), 3000, why, sizeof(why));
			break;
		case OP_HARVEST: op_harvest(t); break;
		case OP_EVTFLOOD: op_evtflood(t); break;
		default: break;
		}
		op_end(t);
		pthread_rwlock_unlock(&devlk);
	}
	return NULL;
}

/* ---- end-of-run checks ---- */

static void check_file(void)
{
	uint8_t *now = malloc(FILE_SZ);
	size_t n = 0, i;
	int f = open(file_path, O_RDONLY);

	if (!now || f < 0) {
		fail("mapped-file-unchanged", "cannot read %s back: %s", file_path,
		     strerror(errno));
		free(now);
		if (f >= 0)
			close(f);
		return;
	}
	while (n < file_len) {
		ssize_t k = read(f, now + n, file_len - n);

		if (k <= 0)
			break;
		n += k;
	}
	close(f);
	if (n != file_len) {
		fail("mapped-file-unchanged", "%s: read %zu of %zu bytes", file_path,
		     n, file_len);
	} else if (memcmp(now, file_orig, n) || memcmp(mem_file, file_orig, n)) {
		char hex[3 * 40 + 1] = "", asc[41] = "";
		const uint8_t *src = memcmp(now, file_orig, n) ? now : mem_file;
		size_t diff = 0;

		for (i = 0; i < n; i++)
			if (src[i] != file_orig[i])
				break;
		for (size_t j = i; j < n; j++)
			diff += src[j] != file_orig[j];
		for (size_t j = 0; j < 40 && i + j < n; j++) {
			snprintf(hex + 3 * j, 4, "%02x ", src[i + j]);
			asc[j] = src[i + j] >= 32 && src[i + j] < 127 ? src[i + j] : '.';
		}
		fail("mapped-file-unchanged",
		     "%s (MAP_PRIVATE, read-only) changed by the host: %zu bytes differ, first at offset %zu: %s|%s|",
		     src == now ? "the file on disk" : "the mapping", diff, i, hex,
		     asc);
	} else {
		pass("mapped-file-unchanged", "%zu bytes of %s, mapped MAP_PRIVATE read-only as guest memory",
		     n, file_path);
	}
	free(now);
}

static bool zero_page_ok(char *why, size_t whylen)
{
	uint8_t *p = mmap(NULL, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	size_t i;

	if (p == MAP_FAILED) {
		snprintf(why, whylen, "mmap: %s", strerror(errno));
		return false;
	}
	for (i = 0; i < (1u << 20); i++)
		if (p[i])
			break;
	if (i < (1u << 20)) {
		snprintf(why, whylen, "a fresh anonymous mapping reads 0x%02x at offset %zu",
			 p[i], i);
		munmap(p, 1 << 20);
		return false;
	}
	munmap(p, 1 << 20);
	if (mem_zero) {
		for (i = 0; i < ZERO_SZ; i++)
			if (mem_zero[i])
				break;
		if (i < ZERO_SZ) {
			snprintf(why, whylen, "the zero-page region reads 0x%02x at offset %zu",
				 mem_zero[i], i);
			return false;
		}
	}
	return true;
}

/* ---- main ---- */

static void usage(void)
{
	fprintf(stderr,
		"usage: fuzz [--seed S] [--round K] [--seconds N] [--hang S] [--threads N]\n"
		"            [--node PATH] [--wwpn W] [--wwpn2 W] [--file PATH] [--kernel ID]\n"
		"       fuzz --check-zero\n");
	exit(2);
}

int main(int argc, char **argv)
{
	bool have_seed = false;
	struct sigaction sa;
	pthread_t th[MAX_THREADS], wd;
	pthread_rwlockattr_t ra;
	struct tctx *mt;
	char why[256];
	double t0;
	unsigned int i;
	int a;

	for (a = 1; a < argc; a++) {
		const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;

		if (!strcmp(o, "--check-zero")) {
			if (zero_page_ok(why, sizeof(why))) {
				pass("zero-page-intact", "");
				return 0;
			}
			printf("FAIL: fuzz zero-page-intact (%s)\n", why);
			return 1;
		}
		if (!v)
			usage();
		if (!strcmp(o, "--seed")) {
			seed = strtoull(v, NULL, 0);
			have_seed = true;
		} else if (!strcmp(o, "--round")) {
			round_no = strtoul(v, NULL, 0);
		} else if (!strcmp(o, "--seconds")) {
			seconds = strtoul(v, NULL, 0);
		} else if (!strcmp(o, "--hang")) {
			hang_s = strtoul(v, NULL, 0);
		} else if (!strcmp(o, "--threads")) {
			nthreads = strtoul(v, NULL, 0);
		} else if (!strcmp(o, "--node")) {
			node = v;
		} else if (!strcmp(o, "--wwpn")) {
			wwpn = v;
		} else if (!strcmp(o, "--wwpn2")) {
			wwpn2 = v;
		} else if (!strcmp(o, "--file")) {
			file_path = v;
		} else if (!strcmp(o, "--kernel")) {
			kernel_id = v;
		} else {
			usage();
		}
		a++;
	}
	if (!have_seed) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (unsigned long long)ts.tv_sec * 1000003ull ^ ts.tv_nsec ^
		       getpid();
		seed %= 1000000000ull;
	}
	if (nthreads < 1 || nthreads > MAX_THREADS || !hang_s)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("fuzz seed: %llu (replay: tests/fuzz/run.sh --seed %llu --kernel %s; this is round %u, %u s, %u threads)\n",
	       seed, seed, kernel_id, round_no, seconds, nthreads);

	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = alarm_handler;
	sigaction(SIGALRM, &sa, NULL);
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra,
				      PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&devlk, &ra);
	for (i = 0; i < NOPS; i++)
		total_weight += ops[i].weight;
	for (i = 0; i < NVQ; i++) {
		pthread_mutex_init(&D.vq[i].lk, NULL);
		D.vq[i].kick = D.vq[i].call = D.vq[i].err = -1;
	}
	for (i = 0; i <= nthreads; i++) {
		threads[i].id = i;
		threads[i].r.s = seed * 0x100000001b3ull ^ (round_no + 1) * 0x9e37ull ^
				 (i + 1) * 0x51ed27ull;
		threads[i].arena = i < NARENAS - 1 ? i : i % (NARENAS - 1);
	}
	mt = &threads[nthreads];
	mt->tid = syscall(SYS_gettid);
	mt->op = "setup";

	if (mem_init()) {
		fail("setup", "guest memory: %s", strerror(errno));
		return 1;
	}
	if (pthread_create(&wd, NULL, watchdog, NULL)) {
		fail("setup", "watchdog thread");
		return 1;
	}
	op_begin(mt, OP_REBUILD, "initial setup");
	if (dev_build(&D, &mt->r, wwpn, 0, false, why, sizeof(why))) {
		op_end(mt);
		fail("setup", "%s", why);
		return 1;
	}
	op_step(mt, "first probe");
	if (!probe(mt, 2, 30000, why, sizeof(why))) {
		op_end(mt);
		fail("setup", "INQUIRY before fuzzing: %s", why);
		return 1;
	}
	op_end(mt);
	pass("setup", "%s bound, %s", wwpn, node);

	t0 = now_s();
	t_end = t0 + seconds;
	for (i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, fuzz_thread, &threads[i])) {
			fail("setup", "thread %u", i);
			return 1;
		}
	for (i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	stop_flag = 1;

	/* The chaos is over: release the device with whatever is in flight,
	 * then a fresh device must work.
	 */
	op_begin(mt, OP_CLOSE, "final close with I/O in flight");
	alarm(hang_s + 5);
	dev_close_files(&D);
	op_step(mt, "final rebuild");
	if (dev_build(&D, &mt->r, wwpn, 0, false, why, sizeof(why))) {
		fail("device-works-after", "fresh device: %s", why);
	} else {
		bool ok = false;

		op_step(mt, "final probe");
		for (i = 0; i < 3 && !ok; i++)	/* unit attentions first */
			ok = probe(mt, 2 + i, 20000, why, sizeof(why));
		if (ok)
			pass("device-works-after", "INQUIRY on a fresh device after the run");
		else
			fail("device-works-after", "INQUIRY on a fresh device: %s", why);
		/* A round too short for any op that samples (op_reuse) still
		 * reads the count once, so "no sample" means debugfs failed.
		 */
		sample_inflight("the fresh device after the run");
	}
	op_step(mt, "final close");
	dev_close_files(&D);
	alarm(0);
	op_end(mt);

	print_counts();
	if (max_inflight < 0)
		fail("inflight-bounded",
		     "no in-flight sample was taken (debugfs not mounted?): the bound went unchecked");
	else if (max_inflight > inflight_bound)
		fail("inflight-bounded",
		     "the host held %lld requests in flight, more than the %lld ring entries the guest had (%s)",
		     max_inflight, inflight_bound, max_inflight_why);
	else
		pass("inflight-bounded", "at most %lld in flight, %lld ring entries",
		     max_inflight, inflight_bound);
	check_file();
	if (zero_page_ok(why, sizeof(why)))
		pass("zero-page-intact", "");
	else
		fail("zero-page-intact", "%s", why);
	if (failed)
		fail("run", "%d failure(s) in %.0f s", failed, now_s() - t0);
	else
		pass("run", "seed %llu round %u: %.0f s, %u threads", seed, round_no,
		     now_s() - t0, nthreads);
	return failed ? 1 : 0;
}
