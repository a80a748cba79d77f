// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost-io: drive a vhost-scsi device node from userspace as a VMM and a
 * guest driver at once, with 4 KiB I/O against one LUN.  Works with the
 * in-tree /dev/vhost-scsi and with /dev/vhost-scsi-sqcq, so both are
 * measured by the same client in the same boot (bench/host.sh), and it
 * checks the host's SQ/CQ side (tests/host/sqcq-inside.sh).
 *
 *   vhost-io NODE WWPN [-q QUEUES] [-d DEPTH] [-t SECONDS | -n IOS]
 *            [-m read|write|verify] [-T TARGET] [-L LUN] [-s] [-i IDLE_US]
 *            [-p PAUSE_MS] [-g GAP_MS] [-W] [-O] [-D] [-C] [-1] [-M MS]
 *            [-Z MS | -z MS]
 *
 * DEPTH requests (1..85) stay in flight on each of QUEUES request queues
 * (1..16); each is a READ(10)/WRITE(10) of 4 KiB, three descriptors
 * (header, response, data), interrupts on (no EVENT_IDX).  read/write go to
 * random blocks of the first 64 MiB; verify gives every slot a block of its
 * own, writes a fresh pattern there and reads it back, comparing.
 *
 * -s asks for SQ/CQ doorbells on the control queue first (common/sqcq_uapi.h)
 * and then behaves as the guest driver does in SQ/CQ mode: it publishes SQ
 * indexes and kicks only when the host poller asked for it (SQ NEED_WAKEUP),
 * and polls the CQ indexes, sleeping on the call eventfds behind CQ
 * NEED_WAKEUP after IDLE_US (default 1000) without completions.
 * -p pauses submissions for PAUSE_MS halfway (the pollers fall asleep; the
 * next submission must wake the host).  -g waits GAP_MS before each
 * resubmission (sparse I/O at depth 1).  -W gives every request queue after
 * the first a worker of its own before anything else, as QEMU does with
 * worker_per_virtqueue=true (VHOST_NEW_WORKER, VHOST_ATTACH_VRING_WORKER;
 * the new workers' ids go to stderr).  -O leaves the first request queue
 * without requests: with -W, only queues on workers of their own are
 * busy.  -D prints this device's debugfs
 * "queues" file of vhost_scsi_sqcq before closing.  -1 publishes each
 * request on its own, as a driver whose requests come one at a time does
 * (the default publishes what a pass over the completions posted, once).
 * -M waits MS milliseconds once the first requests of every queue are
 * published and prints the kernel memory charged to this process's memory
 * cgroup then and before they were published (memory.stat, slab bytes),
 * with the requests completed by then: against a backstore slower than MS,
 * what the host allocated for the requests in flight shows as the
 * difference (tests/host/memcg-inside.sh).  -C runs the SQ/CQ setup
 * checks (good and malformed requests; PASS:/FAIL: lines) instead of I/O.
 * -Z MS ends the run with requests in flight and stops the device as QEMU
 * does when the guest resets it or the VM stops (quiet_after_stop()); -z MS
 * is its control, in classic mode: no stop, one more request kicked after
 * the comparison's start, whose completion must show.
 * SIGUSR1 ends the run as its time limit would (a test that needs the load
 * only until its checks are done).
 *
 * Prints one line:
 *   ios=N seconds=S iops=I kicks=K calls=C errors=E mode=M sleeps=Z
 * kicks: eventfd writes of this client; calls: signals it consumed (per
 * eventfd read, so coalesced signals count once); sleeps: times the client
 * poller slept.  Exit status 0 when no request failed and no check failed,
 * 3 when SQ/CQ was refused.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <linux/vhost.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#include "../../common/sqcq_uapi.h"
#include "../../common/sqcq_vhost_abi.h"

#define MAXQ		16
#define RING		256			/* descriptors per queue */
#define SLOTS		(RING / 3)		/* requests per queue at most */
#define GPA0		0x40000000ull
#define BS		4096u
#define SPAN_BLOCKS	(64u << 20) / 512u	/* 512-byte blocks addressed */
#define RING_BYTES	(64u << 10)		/* per queue, rings */
#define SLOT_BYTES	8192u			/* per request: hdr, resp, data */

struct slot {
	struct virtio_scsi_cmd_req req;
	uint8_t pad0[64 - sizeof(struct virtio_scsi_cmd_req) % 64];
	struct virtio_scsi_cmd_resp resp;
};

struct queue {
	unsigned int index;		/* vhost queue index */
	struct sqcq_sq *sq;		/* SQ/CQ doorbells, NULL: classic */
	struct sqcq_cq *cq;
	uint16_t cq_seen;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	int kick, call;
	uint16_t avail_idx, used_seen;
	unsigned int inflight;
};

enum io_mode { M_READ, M_WRITE, M_VERIFY };

/* Per slot: its block and pattern generation (verify mode). */
struct slot_state {
	uint32_t gen;
	int writing;			/* the request in flight is a write */
};

static uint8_t *mem;
static size_t mem_size;
static struct slot_state sst[MAXQ][SLOTS];
static enum io_mode mode = M_READ;
static int target = 1, lun;
static struct queue qs[MAXQ];
static struct queue ctrlq;
static struct sqcq_area *area;
static unsigned long long kicks, calls, errors, ios;

static double now(void);

static uint64_t gpa_of(const void *p)
{
	return GPA0 + (uint64_t)((const uint8_t *)p - mem);
}

static void die(const char *what)
{
	fprintf(stderr, "vhost-io: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void vring_set(int fd, unsigned long cmd, unsigned int idx,
		      unsigned int num)
{
	struct vhost_vring_state s = { .index = idx, .num = num };

	if (ioctl(fd, cmd, &s))
		die("vring state ioctl");
}

static void vring_fd(int fd, unsigned long cmd, unsigned int idx, int efd)
{
	struct vhost_vring_file f = { .index = idx, .fd = efd };

	if (ioctl(fd, cmd, &f))
		die("vring file ioctl");
}

static uint8_t *slot_base(unsigned int q, unsigned int s)
{
	return mem + (size_t)(MAXQ + 2) * RING_BYTES +
	       ((size_t)q * SLOTS + s) * SLOT_BYTES;
}

/* Set up vhost queue @index (rings in our memory) and start it. */
static void queue_start(int fd, struct queue *q, unsigned int qn,
			unsigned int index)
{
	uint8_t *base = mem + (size_t)qn * RING_BYTES;
	struct vhost_vring_addr a = { .index = index };

	/* A fresh ring (a device opened again reuses the memory). */
	memset(q, 0, sizeof(*q));
	memset(base, 0, RING_BYTES);
	q->index = index;
	q->desc = (struct vring_desc *)base;
	q->avail = (struct vring_avail *)(base + RING * 16);
	q->used = (struct vring_used *)(base + 16384);
	q->kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	q->call = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->kick < 0 || q->call < 0)
		die("eventfd");
	a.desc_user_addr = (uintptr_t)q->desc;
	a.avail_user_addr = (uintptr_t)q->avail;
	a.used_user_addr = (uintptr_t)q->used;
	vring_set(fd, VHOST_SET_VRING_NUM, index, RING);
	vring_set(fd, VHOST_SET_VRING_BASE, index, 0);
	if (ioctl(fd, VHOST_SET_VRING_ADDR, &a))
		die("VHOST_SET_VRING_ADDR");
	vring_fd(fd, VHOST_SET_VRING_KICK, index, q->kick);
	vring_fd(fd, VHOST_SET_VRING_CALL, index, q->call);
}

static uint64_t pattern(uint32_t block, uint32_t gen, unsigned int w)
{
	return ((uint64_t)block << 32 | gen) ^ (w * 0x9e3779b97f4a7c15ull);
}

static void pattern_fill(uint8_t *data, uint32_t block, uint32_t gen)
{
	uint64_t *p = (uint64_t *)data;
	unsigned int w;

	for (w = 0; w < BS / 8; w++)
		p[w] = pattern(block, gen, w);
}

static int pattern_check(const uint8_t *data, uint32_t block, uint32_t gen)
{
	const uint64_t *p = (const uint64_t *)data;
	unsigned int w;

	for (w = 0; w < BS / 8; w++)
		if (p[w] != pattern(block, gen, w))
			return 0;
	return 1;
}

/* Fill slot @s of queue @qn with its next 4 KiB read or write. */
static void slot_post(struct queue *q, unsigned int qn, unsigned int s)
{
	uint8_t *b = slot_base(qn, s);
	struct slot *sl = (struct slot *)b;
	uint8_t *data = b + 4096;
	struct vring_desc *d = &q->desc[s * 3];
	struct slot_state *st = &sst[qn][s];
	uint32_t lba;
	int write;

	if (mode == M_VERIFY) {
		/* Own block per slot: write a new pattern, then read it. */
		lba = (qn * SLOTS + s) * (BS / 512);
		write = st->writing = !st->writing;
		if (write) {
			st->gen++;
			pattern_fill(data, lba, st->gen);
		} else {
			memset(data, 0, BS);
		}
	} else {
		lba = (uint32_t)(random() % (SPAN_BLOCKS - BS / 512));
		write = mode == M_WRITE;
	}

	memset(&sl->req, 0, sizeof(sl->req));
	memset(&sl->resp, 0, sizeof(sl->resp));
	sl->req.lun[0] = 1;
	sl->req.lun[1] = target;
	sl->req.lun[2] = 0x40 | (lun >> 8);
	sl->req.lun[3] = lun & 0xff;
	sl->req.tag = s;
	sl->req.cdb[0] = write ? 0x2a : 0x28;
	sl->req.cdb[2] = lba >> 24;
	sl->req.cdb[3] = lba >> 16;
	sl->req.cdb[4] = lba >> 8;
	sl->req.cdb[5] = lba;
	sl->req.cdb[7] = (BS / 512) >> 8;
	sl->req.cdb[8] = (BS / 512) & 0xff;

	d[0].addr = gpa_of(&sl->req);
	d[0].len = sizeof(sl->req);
	d[0].flags = VRING_DESC_F_NEXT;
	d[0].next = s * 3 + 1;
	if (write) {
		d[1].addr = gpa_of(data);
		d[1].len = BS;
		d[1].flags = VRING_DESC_F_NEXT;
		d[1].next = s * 3 + 2;
		d[2].addr = gpa_of(&sl->resp);
		d[2].len = sizeof(sl->resp);
		d[2].flags = VRING_DESC_F_WRITE;
	} else {
		d[1].addr = gpa_of(&sl->resp);
		d[1].len = sizeof(sl->resp);
		d[1].flags = VRING_DESC_F_NEXT | VRING_DESC_F_WRITE;
		d[1].next = s * 3 + 2;
		d[2].addr = gpa_of(data);
		d[2].len = BS;
		d[2].flags = VRING_DESC_F_WRITE;
	}
	q->avail->ring[q->avail_idx % RING] = s * 3;
	q->avail_idx++;
	q->inflight++;
}

/* A request of slot @s came back with @len used bytes: check it. */
static void slot_done(unsigned int qn, unsigned int s, uint32_t len)
{
	struct slot *sl = (struct slot *)slot_base(qn, s);
	struct slot_state *st = &sst[qn][s];
	int bad = sl->resp.response != VIRTIO_SCSI_S_OK ||
		  sl->resp.status != 0;

	if (!bad && mode == M_VERIFY && !st->writing &&
	    (len != sizeof(sl->resp) + BS ||
	     !pattern_check(slot_base(qn, s) + 4096,
			    (qn * SLOTS + s) * (BS / 512), st->gen)))
		bad = 1;
	if (bad && errors < 5)
		fprintf(stderr, "vhost-io: queue %u slot %u: response %u status %u used %u%s\n",
			qn, s, sl->resp.response, sl->resp.status, len,
			mode == M_VERIFY && !st->writing ? " (read-back)" : "");
	errors += bad;
}

static void publish_and_kick(struct queue *q)
{
	uint64_t one = 1;

	/* Ring entries before the index (release), as a driver must. */
	__atomic_store_n(&q->avail->idx, q->avail_idx, __ATOMIC_RELEASE);
	if (q->sq) {
		/* SQ/CQ: the doorbell, full barrier, the host poller's flag. */
		if (!sqcq_publish(&q->sq->idx, q->avail_idx, &q->sq->flags,
				  SQCQ_SQ_F_NEED_WAKEUP))
			return;
		if (write(q->kick, &one, sizeof(one)) != sizeof(one))
			die("kick");
		kicks++;
		return;
	}
	/* The index before reading the device's flags (full barrier). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&q->used->flags, __ATOMIC_ACQUIRE) &
	    VRING_USED_F_NO_NOTIFY)
		return;
	if (write(q->kick, &one, sizeof(one)) != sizeof(one))
		die("kick");
	kicks++;
}

static struct sqcq_setup_in *ctrl_sqcq(uint32_t subtype, uint16_t nq,
				       uint64_t gpa, uint32_t len,
				       uint32_t out_len, uint32_t in_len,
				       void (*tweak)(struct sqcq_setup_req *));

/*
 * Ask for SQ/CQ for the first @nq request queues, the area at its place
 * in our memory; returns the setup status (SQCQ_S_*), or -1 when the
 * device gave another answer.
 */
static int sqcq_setup(unsigned int nq)
{
	struct sqcq_setup_in *in;

	sqcq_area_init(area, nq);
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, gpa_of(area), 4096,
		       24 + sizeof(struct sqcq_setup_req), sizeof(*in), NULL);
	if (in->response != VIRTIO_SCSI_S_FUNCTION_SUCCEEDED)
		return le32_to_cpu(in->resp.magic) == SQCQ_MAGIC ?
		       le16_to_cpu(in->resp.status) : -1;
	return le16_to_cpu(in->resp.status);
}

/* A userspace guest poller: CQ indexes moved since last time? */
static int cq_moved(unsigned int nq)
{
	unsigned int i;

	for (i = 0; i < nq; i++)
		if (sqcq_load16(&qs[i].cq->idx) != qs[i].cq_seen)
			return 1;
	return 0;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

#define DBG_DIR	"/sys/kernel/debug/vhost_scsi_sqcq"

/*
 * The debugfs "queues" file of the device this process owns, opened at its
 * start ("owner: PID" is its first line), or NULL.
 */
static FILE *open_my_queues(void)
{
	char path[512], line[64], want[32];
	struct dirent *de;
	FILE *f = NULL;
	DIR *d = opendir(DBG_DIR);

	if (!d)
		return NULL;
	snprintf(want, sizeof(want), "owner: %d\n", getpid());
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "dev", 3))
			continue;
		snprintf(path, sizeof(path), DBG_DIR "/%s/queues", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f) && !strcmp(line, want)) {
			rewind(f);
			break;
		}
		fclose(f);
		f = NULL;
	}
	closedir(d);
	return f;
}

/* Print the debugfs "queues" file of the device this process owns. */
static void dump_debugfs(void)
{
	char line[256];
	FILE *f = open_my_queues();

	if (!f) {
		printf("debugfs: no device of ours in %s\n", DBG_DIR);
		return;
	}
	while (fgets(line, sizeof(line), f))
		printf("debugfs: %s", line);
	fclose(f);
}

static int checks_failed;

static void check(int ok, const char *name, const char *fmt, int got)
{
	if (ok) {
		printf("PASS: sqcq setup %s\n", name);
		return;
	}
	printf("FAIL: sqcq setup %s (", name);
	printf(fmt, got);
	printf(")\n");
	checks_failed++;
}

/*
 * One setup or teardown request on the control queue; @tweak edits the
 * request first.  Returns the answer block.  @out_len / @in_len: bytes of
 * the two descriptors.
 */
static struct sqcq_setup_in *ctrl_sqcq_post(uint32_t subtype, uint16_t nq,
					    uint64_t gpa, uint32_t len,
					    uint32_t out_len, uint32_t in_len,
					    void (*tweak)(struct sqcq_setup_req *))
{
	uint8_t *buf = mem + (size_t)MAXQ * RING_BYTES + 32768;
	struct sqcq_tmf_req *tmf = (struct sqcq_tmf_req *)buf;
	struct sqcq_setup_req *req = (struct sqcq_setup_req *)(buf + 24);
	struct sqcq_setup_in *in = (struct sqcq_setup_in *)(buf + 256);

	memset(buf, 0, 512);
	memset(in, 0xee, sizeof(*in));
	tmf->type = cpu_to_le32(SQCQ_VIRTIO_SCSI_T_TMF);
	tmf->subtype = cpu_to_le32(subtype);
	tmf->lun[0] = 1;
	req->magic = cpu_to_le32(SQCQ_MAGIC);
	req->version = cpu_to_le16(SQCQ_VERSION);
	req->nqueues = cpu_to_le16(nq);
	req->area_gpa = cpu_to_le64(gpa);
	req->area_len = cpu_to_le32(len);
	req->flags = cpu_to_le32(SQCQ_F_SQ_POLL | SQCQ_F_CQ_POLL);
	req->poll_idle_us = cpu_to_le32(1000);
	if (tweak)
		tweak(req);
	ctrlq.desc[0].addr = gpa_of(tmf);
	ctrlq.desc[0].len = out_len;
	ctrlq.desc[0].flags = VRING_DESC_F_NEXT;
	ctrlq.desc[0].next = 1;
	ctrlq.desc[1].addr = gpa_of(in);
	ctrlq.desc[1].len = in_len;
	ctrlq.desc[1].flags = VRING_DESC_F_WRITE;
	ctrlq.avail->ring[ctrlq.avail_idx % RING] = 0;
	ctrlq.avail_idx++;
	publish_and_kick(&ctrlq);
	return in;
}

/* The same, waiting for the answer. */
static struct sqcq_setup_in *ctrl_sqcq(uint32_t subtype, uint16_t nq,
				       uint64_t gpa, uint32_t len,
				       uint32_t out_len, uint32_t in_len,
				       void (*tweak)(struct sqcq_setup_req *))
{
	uint16_t want = ctrlq.avail_idx + 1;
	struct sqcq_setup_in *in;
	double t0;

	in = ctrl_sqcq_post(subtype, nq, gpa, len, out_len, in_len, tweak);
	t0 = now();
	while (__atomic_load_n(&ctrlq.used->idx, __ATOMIC_ACQUIRE) != want)
		if (now() - t0 > 10) {
			fprintf(stderr, "vhost-io: no answer on the control queue\n");
			exit(2);
		}
	return in;
}

static int status_of(const struct sqcq_setup_in *in)
{
	return le16_to_cpu(in->resp.status);
}

static void tw_magic(struct sqcq_setup_req *r) { r->magic = 0x12345678; }
static void tw_version(struct sqcq_setup_req *r) { r->version = cpu_to_le16(9); }
static void tw_flags0(struct sqcq_setup_req *r) { r->flags = 0; }
static void tw_flagsx(struct sqcq_setup_req *r) { r->flags = cpu_to_le32(0x80); }
static void tw_reserved(struct sqcq_setup_req *r) { r->reserved[3] = 1; }

/* 1 when the host's debugfs says our device is in SQ/CQ mode, 0 classic. */
static int debugfs_mode_sqcq(void)
{
	char line[256];
	int mode = -1;
	FILE *f = open_my_queues();

	if (!f)
		return -1;
	while (mode < 0 && fgets(line, sizeof(line), f))
		if (!strncmp(line, "mode: ", 6))
			mode = !strcmp(line + 6, "sqcq\n");
	fclose(f);
	return mode;
}

static void set_one_region(int fd, uint64_t gpa)
{
	struct vhost_memory *m;

	m = calloc(1, sizeof(*m) + sizeof(m->regions[0]));
	if (!m)
		die("calloc");
	m->nregions = 1;
	m->regions[0].guest_phys_addr = gpa;
	m->regions[0].memory_size = mem_size;
	m->regions[0].userspace_addr = (uintptr_t)mem;
	if (ioctl(fd, VHOST_SET_MEM_TABLE, m))
		die("VHOST_SET_MEM_TABLE");
	free(m);
}

/*
 * The VMM maps new memory where the area was and sets the same table
 * again: same addresses, other pages.  The host must stop polling the
 * pages it pinned (the guest now writes the new ones), not keep them.
 */
static void check_remapped_area(int fd, unsigned int nq)
{
	const uint32_t full = 24 + sizeof(struct sqcq_setup_req);
	struct sqcq_setup_in *in;
	uint8_t copy[4096];
	void *p;

	set_one_region(fd, GPA0);
	sqcq_area_init(area, nq);
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, gpa_of(area), 4096, full,
		       sizeof(*in), NULL);
	check(status_of(in) == SQCQ_S_OK && debugfs_mode_sqcq() == 1,
	      "setup-before-remap", "status %d", status_of(in));
	memcpy(copy, area, sizeof(copy));
	p = mmap(area, 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE, -1, 0);
	if (p != (void *)area)
		die("mmap over the area");
	memcpy(area, copy, sizeof(copy));
	set_one_region(fd, GPA0);
	check(debugfs_mode_sqcq() == 0, "remapped-area-tears-down",
	      "mode sqcq %d", debugfs_mode_sqcq());
}

static int attach_worker(int fd, unsigned int index, unsigned int id)
{
	struct vhost_vring_worker vw = { .index = index, .worker_id = id };

	return ioctl(fd, VHOST_ATTACH_VRING_WORKER, &vw);
}

/*
 * Queues and workers (VHOST_NEW_WORKER, VHOST_ATTACH_VRING_WORKER):
 *  - a request queue on a worker of its own keeps SQ/CQ: setup accepted,
 *    and moving it back to the default worker and out again leaves the
 *    doorbells in place (the poll thread hands it its doorbells);
 *  - the control queue, which serves setup and teardown under the poll
 *    thread's lock, on a worker of its own: setup answers NO_RESOURCES;
 *    moved there while SQ/CQ runs, it ends SQ/CQ (classic again);
 *  - every queue back, the worker freed, setup accepted again.
 */
static void check_own_worker(int fd, unsigned int nq)
{
	const uint32_t full = 24 + sizeof(struct sqcq_setup_req);
	struct vhost_worker_state w = { 0 };
	struct sqcq_setup_in *in;

	sqcq_area_init(area, nq);
	if (ioctl(fd, VHOST_NEW_WORKER, &w)) {
		check(0, "own-worker-new", "errno %d", errno);
		return;
	}
	check(!attach_worker(fd, 2, w.worker_id), "own-worker-attach",
	      "errno %d", errno);
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, gpa_of(area), 4096, full,
		       sizeof(*in), NULL);
	check(status_of(in) == SQCQ_S_OK && debugfs_mode_sqcq() == 1,
	      "queue-on-own-worker-setup-accepted", "status %d",
	      status_of(in));
	check(!attach_worker(fd, 2, 0) && debugfs_mode_sqcq() == 1,
	      "queue-moved-back-keeps-sqcq", "mode sqcq %d",
	      debugfs_mode_sqcq());
	check(!attach_worker(fd, 2, w.worker_id) && debugfs_mode_sqcq() == 1,
	      "queue-moved-out-again-keeps-sqcq", "mode sqcq %d",
	      debugfs_mode_sqcq());
	check(!attach_worker(fd, 0, w.worker_id) && debugfs_mode_sqcq() == 0,
	      "control-queue-moved-out-ends-sqcq", "mode sqcq %d",
	      debugfs_mode_sqcq());
	sqcq_area_init(area, nq);
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, gpa_of(area), 4096, full,
		       sizeof(*in), NULL);
	check(status_of(in) == SQCQ_S_NO_RESOURCES &&
	      in->response == SQCQ_VIRTIO_SCSI_S_FUNCTION_REJECTED &&
	      debugfs_mode_sqcq() == 0,
	      "control-queue-on-own-worker-no-resources", "status %d",
	      status_of(in));
	check(!attach_worker(fd, 0, 0) && !attach_worker(fd, 2, 0) &&
	      !ioctl(fd, VHOST_FREE_WORKER, &w), "own-worker-back-and-freed",
	      "errno %d", errno);
	sqcq_area_init(area, nq);
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, gpa_of(area), 4096, full,
		       sizeof(*in), NULL);
	check(status_of(in) == SQCQ_S_OK && debugfs_mode_sqcq() == 1,
	      "setup-after-queues-back-on-default-worker", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_TEARDOWN, nq, 0, 0, full, sizeof(*in),
		       NULL);
	check(status_of(in) == SQCQ_S_OK, "teardown-after-worker-checks",
	      "status %d", status_of(in));
}

/*
 * Live migration: with dirty logging on, the host's last write to the
 * doorbell area -- SQ STOPPED, when the VMM stops a ring before its final
 * copy -- sets the area's page in the log, so the destination gets the
 * area as the source left it.  Cleared after the setup answer: only the
 * stop can set it.
 */
static void check_dirty_log_area(int fd, unsigned int nq)
{
	const uint32_t full = 24 + sizeof(struct sqcq_setup_req);
	uint64_t pg = gpa_of(area) >> 12, base, f;
	size_t len = ((GPA0 + mem_size) / 4096 / 8 + 4096) & ~(size_t)4095;
	struct sqcq_setup_in *in;
	uint8_t *log;
	int on;

	log = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (log == MAP_FAILED)
		die("mmap (log)");
	set_one_region(fd, GPA0);
	base = (uintptr_t)log;
	f = 1ull << VIRTIO_F_VERSION_1 | 1ull << VHOST_F_LOG_ALL;
	check(!ioctl(fd, VHOST_SET_LOG_BASE, &base) &&
	      !ioctl(fd, VHOST_SET_FEATURES, &f), "dirty-log-on", "errno %d",
	      errno);
	sqcq_area_init(area, nq);
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, gpa_of(area), 4096, full,
		       sizeof(*in), NULL);
	check(status_of(in) == SQCQ_S_OK, "dirty-log-setup-accepted",
	      "status %d", status_of(in));
	memset(log, 0, len);
	vring_set(fd, VHOST_GET_VRING_BASE, 2, 0);	/* the VMM stops */
	on = __atomic_load_n(&log[pg / 8], __ATOMIC_ACQUIRE) & (1u << (pg % 8));
	check(on && (le16_to_cpu(area->q[0].sq_line.sq.flags) &
		     SQCQ_SQ_F_STOPPED), "dirty-log-doorbell-area-at-stop",
	      "log byte 0x%x", log[pg / 8]);
	queue_start(fd, &qs[0], 0, 2);
	f = 1ull << VIRTIO_F_VERSION_1;
	base = 0;
	check(!ioctl(fd, VHOST_SET_FEATURES, &f) &&
	      !ioctl(fd, VHOST_SET_LOG_BASE, &base), "dirty-log-off",
	      "errno %d", errno);
	munmap(log, len);
}

/* -W: request queues 2.. of @nq on a worker each, as QEMU does. */
static void own_workers(int fd, unsigned int nq)
{
	struct vhost_worker_state w;
	unsigned int i;

	for (i = 1; i < nq; i++) {
		memset(&w, 0, sizeof(w));
		if (ioctl(fd, VHOST_NEW_WORKER, &w))
			die("VHOST_NEW_WORKER");
		if (attach_worker(fd, 2 + i, w.worker_id))
			die("VHOST_ATTACH_VRING_WORKER");
		fprintf(stderr, "vhost-io: vq %u on worker %u\n", 2 + i,
			w.worker_id);
	}
}

/*
 * The setup checks: the memory table has two regions split at the page
 * after the area (region A ends there), so an area over that boundary is
 * "outside one region" although the user memory behind is contiguous.
 */
static void run_checks(int fd, unsigned int nq)
{
	uint64_t good = gpa_of(area);
	uint64_t split = good + 4096;	/* region boundary */
	const uint32_t full = 24 + sizeof(struct sqcq_setup_req);
	const uint32_t inl = sizeof(struct sqcq_setup_in);
	struct vhost_memory *m;
	struct sqcq_setup_in *in;
	int st;

	m = calloc(1, sizeof(*m) + 2 * sizeof(m->regions[0]));
	if (!m)
		die("calloc");
	m->nregions = 2;
	m->regions[0].guest_phys_addr = GPA0;
	m->regions[0].memory_size = split - GPA0;
	m->regions[0].userspace_addr = (uintptr_t)mem;
	m->regions[1].guest_phys_addr = split;
	m->regions[1].memory_size = mem_size - (split - GPA0);
	m->regions[1].userspace_addr = (uintptr_t)mem + (split - GPA0);
	if (ioctl(fd, VHOST_SET_MEM_TABLE, m))
		die("VHOST_SET_MEM_TABLE (2 regions)");
	free(m);

	sqcq_area_init(area, nq);
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 4096, full, inl, tw_magic);
	check(status_of(in) == SQCQ_S_BAD_MAGIC &&
	      in->response == SQCQ_VIRTIO_SCSI_S_FUNCTION_REJECTED,
	      "bad-magic", "status %d", status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 4096, full, inl, tw_version);
	check(status_of(in) == SQCQ_S_BAD_VERSION, "bad-version", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good + 64, 4096, full, inl, NULL);
	check(status_of(in) == SQCQ_S_BAD_ALIGN, "misaligned", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 64, full, inl, NULL);
	check(status_of(in) == SQCQ_S_BAD_LEN, "too-short", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 1u << 20, full, inl, NULL);
	check(status_of(in) == SQCQ_S_BAD_LEN, "too-long", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, GPA0 + (1ull << 36), 4096,
		       full, inl, NULL);
	check(status_of(in) == SQCQ_S_BAD_ADDR, "outside-memory", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, GPA0 - 4096, 8192, full, inl,
		       NULL);
	check(status_of(in) == SQCQ_S_BAD_ADDR, "before-memory", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 8192, full, inl, NULL);
	check(status_of(in) == SQCQ_S_BAD_ADDR, "straddles-regions",
	      "status %d", status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq + 1, good, 4096, full, inl, NULL);
	check(status_of(in) == SQCQ_S_BAD_QUEUES, "too-many-queues",
	      "status %d", status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, 0, good, 4096, full, inl, NULL);
	check(status_of(in) == SQCQ_S_BAD_QUEUES, "zero-queues", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 4096, full, inl, tw_flags0);
	check(status_of(in) == SQCQ_S_BAD_FLAGS, "no-flags", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 4096, full, inl, tw_flagsx);
	check(status_of(in) == SQCQ_S_BAD_FLAGS, "unknown-flags", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 4096, full, inl,
		       tw_reserved);
	check(status_of(in) == SQCQ_S_BAD_REQUEST, "reserved-set", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 4096, 24 + 16, inl, NULL);
	check(status_of(in) == SQCQ_S_BAD_REQUEST, "truncated", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 4096, full, 8, NULL);
	check(in->response == SQCQ_VIRTIO_SCSI_S_FUNCTION_REJECTED,
	      "short-answer-buffer", "response %d", in->response);
	area->hdr.magic = 0;
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 4096, full, inl, NULL);
	check(status_of(in) == SQCQ_S_BAD_MAGIC, "bad-area-header",
	      "status %d", status_of(in));
	sqcq_area_init(area, nq);
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_TEARDOWN, nq, 0, 0, full, inl, NULL);
	check(status_of(in) == SQCQ_S_NOT_SETUP, "teardown-without-setup",
	      "status %d", status_of(in));

	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 4096, full, inl, NULL);
	st = status_of(in);
	check(st == SQCQ_S_OK &&
	      in->response == SQCQ_VIRTIO_SCSI_S_FUNCTION_SUCCEEDED &&
	      le32_to_cpu(in->resp.magic) == SQCQ_MAGIC &&
	      le16_to_cpu(in->resp.nqueues) == nq &&
	      le16_to_cpu(in->resp.nthreads) >= 1,
	      "accepted", "status %d", st);
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 4096, full, inl, NULL);
	check(status_of(in) == SQCQ_S_BUSY, "repeated", "status %d",
	      status_of(in));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_TEARDOWN, nq, 0, 0, full, inl, NULL);
	check(status_of(in) == SQCQ_S_OK &&
	      in->response == SQCQ_VIRTIO_SCSI_S_FUNCTION_SUCCEEDED,
	      "teardown", "status %d", status_of(in));
	check((le16_to_cpu(area->q[0].sq_line.sq.flags) &
	       (SQCQ_SQ_F_NEED_WAKEUP | SQCQ_SQ_F_STOPPED)) ==
	      (SQCQ_SQ_F_NEED_WAKEUP | SQCQ_SQ_F_STOPPED),
	      "teardown-leaves-need-wakeup", "flags 0x%x",
	      le16_to_cpu(area->q[0].sq_line.sq.flags));
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_TEARDOWN, nq, 0, 0, full, inl, NULL);
	check(status_of(in) == SQCQ_S_NOT_SETUP, "teardown-twice", "status %d",
	      status_of(in));
	/* Set up again, then a memory table that moves the area: torn down. */
	sqcq_area_init(area, nq);
	in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, good, 4096, full, inl, NULL);
	check(status_of(in) == SQCQ_S_OK, "setup-after-teardown", "status %d",
	      status_of(in));
	m = calloc(1, sizeof(*m) + sizeof(m->regions[0]));
	if (!m)
		die("calloc");
	m->nregions = 1;
	m->regions[0].guest_phys_addr = GPA0 + (1ull << 30);
	m->regions[0].memory_size = mem_size;
	m->regions[0].userspace_addr = (uintptr_t)mem;
	if (ioctl(fd, VHOST_SET_MEM_TABLE, m))
		die("VHOST_SET_MEM_TABLE (moved)");
	free(m);
	check((le16_to_cpu(area->q[0].sq_line.sq.flags) & SQCQ_SQ_F_STOPPED) != 0,
	      "mem-table-change-tears-down", "flags 0x%x",
	      le16_to_cpu(area->q[0].sq_line.sq.flags));
	check_remapped_area(fd, nq);
	check_own_worker(fd, nq);
	check_dirty_log_area(fd, nq);
}

/*
 * Open @node and set it up as QEMU does: owner, VERSION_1, the memory
 * table, @nq request queues, endpoint @wwpn, the control queue.
 */
static int dev_open(const char *node, const char *wwpn, unsigned int nq)
{
	struct vhost_scsi_target t = { 0 };
	uint64_t features;
	unsigned int i;
	int fd;

	fd = open(node, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die(node);
	if (ioctl(fd, VHOST_SET_OWNER))
		die("VHOST_SET_OWNER");
	if (ioctl(fd, VHOST_GET_FEATURES, &features))
		die("VHOST_GET_FEATURES");
	features &= 1ull << VIRTIO_F_VERSION_1;
	if (ioctl(fd, VHOST_SET_FEATURES, &features))
		die("VHOST_SET_FEATURES");
	set_one_region(fd, GPA0);
	for (i = 0; i < nq; i++)
		queue_start(fd, &qs[i], i, 2 + i);
	snprintf(t.vhost_wwpn, sizeof(t.vhost_wwpn), "%s", wwpn);
	if (ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t))
		die("VHOST_SCSI_SET_ENDPOINT");
	queue_start(fd, &ctrlq, MAXQ, 0);
	return fd;
}

static void queue_close(struct queue *q)
{
	close(q->kick);
	close(q->call);
}

/*
 * -R: @n devices, each asking for SQ/CQ and closed at once -- every other
 * one without waiting for the answer, so the close races the worker
 * attaching the doorbells.  Whatever the order, nothing may stay pinned
 * or mapped (sqcq-inside.sh looks at the kernel's counters afterwards).
 */
static int setup_close_cycles(const char *node, const char *wwpn,
			      unsigned int nq, unsigned int n)
{
	const uint32_t full = 24 + sizeof(struct sqcq_setup_req);
	unsigned int c, i, accepted = 0;
	struct sqcq_setup_in *in;
	int fd;

	for (c = 0; c < n; c++) {
		fd = dev_open(node, wwpn, nq);
		sqcq_area_init(area, nq);
		if (c % 2) {
			ctrl_sqcq_post(SQCQ_TMF_SUBTYPE_SETUP, nq, gpa_of(area),
				       4096, full, sizeof(*in), NULL);
		} else {
			in = ctrl_sqcq(SQCQ_TMF_SUBTYPE_SETUP, nq, gpa_of(area),
				       4096, full, sizeof(*in), NULL);
			accepted += status_of(in) == SQCQ_S_OK;
		}
		close(fd);
		for (i = 0; i < nq; i++)
			queue_close(&qs[i]);
		queue_close(&ctrlq);
	}
	printf("cycles=%u accepted=%u\n", n, accepted);
	return accepted == (n + 1) / 2 ? 0 : 1;
}

/*
 * Slab bytes charged to this process's memory cgroup (cgroup v2), from
 * memory.stat; -1 when there is none.
 */
static long long memcg_slab(void)
{
	char line[512], path[600];
	long long r = -1, v;
	FILE *f;

	f = fopen("/proc/self/cgroup", "r");
	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f) || strncmp(line, "0::", 3)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.stat",
		 strcmp(line + 3, "/") ? line + 3 : "");
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "slab %lld", &v) == 1)
			r = v;
	fclose(f);
	return r;
}

/* SIGUSR1: end the run as at its time limit (drain, check, print). */
/* The part of our memory at byte @off, for a report. */
static const char *region_of(size_t off)
{
	if (off >= (size_t)(MAXQ + 2) * RING_BYTES)
		return "request data";
	if (off >= (size_t)(MAXQ + 1) * RING_BYTES)
		return "SQ/CQ area";
	return off >= (size_t)MAXQ * RING_BYTES ? "control queue" :
						 "request queue rings";
}

/* Offset of the first byte of our memory that differs from @ref, or -1. */
static long first_change(const uint8_t *ref)
{
	size_t i;

	for (i = 0; i < mem_size; i++)
		if (__atomic_load_n(&mem[i], __ATOMIC_RELAXED) != ref[i])
			return (long)i;
	return -1;
}

/*
 * -Z (@stop): with requests still in flight and the host's pollers running,
 * stop the device as QEMU does when the guest resets it or the VM stops:
 * VHOST_SCSI_CLEAR_ENDPOINT, then VHOST_GET_VRING_BASE on every queue.
 * Once those returned the guest owns its memory again (it frees the rings
 * and the doorbell area after a reset): the host may not write one more
 * byte of it.  Our memory must stay as it was for @ms, and then, filled
 * with a pattern, for @ms more.  Returns 0 when it did.
 *
 * -z (!@stop), the control, classic mode, nothing in flight: a read
 * published without a kick, the kick once the copy to compare with is
 * taken.  The host's completion must show; returns 0 when it did.
 */
static int quiet_after_stop(int fd, const char *wwpn, unsigned int nq,
			    unsigned int ms, int stop)
{
	struct vhost_scsi_target t = { 0 };
	struct vhost_vring_state st;
	unsigned int i, pass;
	uint64_t one = 1;
	uint8_t *ref;
	long off;

	snprintf(t.vhost_wwpn, sizeof(t.vhost_wwpn), "%s", wwpn);
	if (stop && ioctl(fd, VHOST_SCSI_CLEAR_ENDPOINT, &t))
		die("VHOST_SCSI_CLEAR_ENDPOINT");
	for (i = 0; stop && i <= nq; i++) {
		st.index = i ? 1 + i : 0;
		st.num = 0;
		if (ioctl(fd, VHOST_GET_VRING_BASE, &st))
			die("VHOST_GET_VRING_BASE");
	}
	ref = malloc(mem_size);
	if (!ref)
		die("malloc");
	if (!stop) {
		/* The worker idle first: the read goes only when kicked. */
		usleep(100000);
		slot_post(&qs[0], 0, 0);
		__atomic_store_n(&qs[0].avail->idx, qs[0].avail_idx,
				 __ATOMIC_RELEASE);
		usleep(50000);
		memcpy(ref, mem, mem_size);
		if (write(qs[0].kick, &one, sizeof(one)) != sizeof(one))
			die("kick");
		usleep(ms * 1000);
		off = first_change(ref);
		if (off >= 0)
			printf("quiet-control: the host's completion seen at byte %ld (%s)\n",
			       off, region_of(off));
		else
			printf("quiet-control: FAIL: no write seen in %u ms after the kick\n",
			       ms);
		free(ref);
		return off < 0;
	}
	for (pass = 0; pass < 2; pass++) {
		if (pass)
			memset(mem, 0x5a, mem_size);
		memcpy(ref, mem, mem_size);
		usleep(ms * 1000);
		off = first_change(ref);
		if (off >= 0)
			break;
	}
	if (off >= 0)
		printf("quiet-after-stop: FAIL: the host wrote byte %ld (%s: 0x%02x -> 0x%02x) %s the stop\n",
		       off, region_of(off), ref[off], mem[off],
		       pass ? "more than" : "within");
	else
		printf("quiet-after-stop: ok (%zu bytes unchanged for 2 x %u ms after the stop)\n",
		       mem_size, ms);
	free(ref);
	return off >= 0;
}

static volatile sig_atomic_t stop_now;

static void on_sigusr1(int sig)
{
	(void)sig;
	stop_now = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: vhost-io NODE WWPN [-q QUEUES] [-d DEPTH] [-t SECONDS | -n IOS] [-m read|write|verify] [-T TARGET] [-L LUN] [-s] [-i IDLE_US] [-p PAUSE_MS] [-g GAP_MS] [-W] [-O] [-D] [-C] [-1] [-M MS] [-Z MS | -z MS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct vhost_scsi_target t = { 0 };
	unsigned int nq = 1, depth = 1, i, s;
	static unsigned int held[MAXQ][SLOTS], nheld[MAXQ];
	double secs = 5, t0, t1, idle_since = 0, client_idle = 0.001;
	double pause_ms = 0, pause_at, pause_end = 0;
	useconds_t gap_us = 0;	/* -g: think time before each resubmission */
	int one_by_one = 0;	/* -1: publish (and kick) each request alone */
	unsigned long long sleeps = 0, max_ios = 0;
	int fd, use_sqcq = 0, dump = 0, checks = 0, paused = 0, c, own = 0;
	unsigned int first = 0;	/* -O: the first request queue stays idle */
	unsigned int cycles = 0;
	struct pollfd pfd[MAXQ];
	double memcg_wait_ms = 0;	/* -M */
	unsigned int quiet_ms = 0;	/* -Z, -z */
	int quiet_stop = 1;		/* -z: 0 */
	long long slab0 = 0;

	while ((c = getopt(argc, argv, "q:d:t:n:m:T:L:si:p:g:WODCR:1M:Z:z:")) != -1) {
		switch (c) {
		case 'q': nq = atoi(optarg); break;
		case 'd': depth = atoi(optarg); break;
		case 't': secs = atof(optarg); break;
		case 'n': max_ios = strtoull(optarg, NULL, 0); secs = 3600; break;
		case 'm':
			mode = !strcmp(optarg, "write") ? M_WRITE :
			       !strcmp(optarg, "verify") ? M_VERIFY : M_READ;
			break;
		case 'T': target = atoi(optarg); break;
		case 'L': lun = atoi(optarg); break;
		case 's': use_sqcq = 1; break;
		case 'i': client_idle = atof(optarg) / 1e6; break;
		case 'p': pause_ms = atof(optarg); break;
		case 'g': gap_us = (useconds_t)(atof(optarg) * 1000); break;
		case 'W': own = 1; break;
		case 'O': first = 1; break;
		case 'D': dump = 1; break;
		case 'C': checks = 1; use_sqcq = 1; break;
		case 'R': cycles = strtoul(optarg, NULL, 0); break;
		case '1': one_by_one = 1; break;
		case 'M': memcg_wait_ms = atof(optarg); break;
		case 'Z': quiet_ms = strtoul(optarg, NULL, 0); break;
		case 'z':
			quiet_ms = strtoul(optarg, NULL, 0);
			quiet_stop = 0;
			break;
		default: usage();
		}
	}
	if (argc - optind != 2)
		usage();
	if (!nq || nq > MAXQ || !depth || depth > SLOTS || secs <= 0 ||
	    first >= nq) {
		fprintf(stderr, "vhost-io: QUEUES 1..%d, DEPTH 1..%d\n",
			MAXQ, SLOTS);
		return 2;
	}

	mem_size = (size_t)(MAXQ + 2) * RING_BYTES +
		   (size_t)MAXQ * SLOTS * SLOT_BYTES;
	mem = mmap(NULL, mem_size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap");
	area = (struct sqcq_area *)(mem + (size_t)(MAXQ + 1) * RING_BYTES);
	if (cycles)
		return setup_close_cycles(argv[optind], argv[optind + 1], nq,
					  cycles);
	fd = dev_open(argv[optind], argv[optind + 1], nq);
	if (own)
		own_workers(fd, nq);
	snprintf(t.vhost_wwpn, sizeof(t.vhost_wwpn), "%s", argv[optind + 1]);
	if (checks) {
		run_checks(fd, nq);
		printf("sqcq setup checks: %d failed\n", checks_failed);
		return checks_failed ? 1 : 0;
	}
	if (use_sqcq) {
		int st = sqcq_setup(nq);

		if (st != SQCQ_S_OK) {
			fprintf(stderr, "vhost-io: SQ/CQ refused: %s\n",
				st < 0 ? "not supported" : sqcq_status_str(st));
			return 3;
		}
		for (i = 0; i < nq; i++) {
			qs[i].sq = &area->q[i].sq_line.sq;
			qs[i].cq = &area->q[i].cq_line.cq;
			/* We poll: no interrupts until we say so. */
			sqcq_clear_need_wakeup(&qs[i].cq->flags,
					       SQCQ_CQ_F_NEED_WAKEUP);
		}
	}

	srandom(1);
	if (memcg_wait_ms)
		slab0 = memcg_slab();
	for (i = 0; i < nq; i++) {
		pfd[i].fd = qs[i].call;
		pfd[i].events = POLLIN;
		if (i < first)
			continue;
		for (s = 0; s < depth; s++) {
			slot_post(&qs[i], i, s);
			if (one_by_one)
				publish_and_kick(&qs[i]);
		}
		if (!one_by_one)
			publish_and_kick(&qs[i]);
	}
	if (memcg_wait_ms) {
		unsigned int completed = 0;

		usleep((useconds_t)(memcg_wait_ms * 1000));
		for (i = 0; i < nq; i++)
			completed += (uint16_t)(__atomic_load_n(&qs[i].used->idx,
							       __ATOMIC_ACQUIRE) -
						qs[i].used_seen);
		printf("memcg slab_before=%lld slab_inflight=%lld posted=%u completed=%u\n",
		       slab0, memcg_slab(), (nq - first) * depth, completed);
		fflush(stdout);
	}

	signal(SIGUSR1, on_sigusr1);
	t0 = now();
	t1 = t0 + secs;
	pause_at = pause_ms ? t0 + secs / 2 : 0;
	for (;;) {
		int done = stop_now || now() >= t1 || (max_ios && ios >= max_ios);

		if (pause_at && !paused && (now() >= pause_at ||
					    (max_ios && ios >= max_ios / 2))) {
			paused = 1;
			pause_end = now() + pause_ms / 1000;
		}
		if (paused == 1 && now() >= pause_end) {
			/* Resume: what the pause held back goes out now. */
			paused = 2;
			for (i = 0; i < nq; i++) {
				for (s = 0; s < nheld[i]; s++)
					slot_post(&qs[i], i, held[i][s]);
				if (nheld[i])
					publish_and_kick(&qs[i]);
				nheld[i] = 0;
			}
		}
		if (use_sqcq) {
			/* Spin on the CQ doorbells; after the idle time, sleep. */
			if (!cq_moved(nq)) {
				if (!idle_since)
					idle_since = now();
				if (now() - idle_since < client_idle)
					continue;
				for (i = 0; i < nq; i++)
					if (!sqcq_prepare_sleep(&qs[i].cq->flags,
								SQCQ_CQ_F_NEED_WAKEUP,
								&qs[i].cq->idx,
								qs[i].cq_seen))
						break;
				if (i == nq) {
					sleeps++;
					if (poll(pfd, nq, paused == 1 ? 50 : 1000) < 0 &&
					    errno != EINTR)
						die("poll");
				}
				for (i = 0; i < nq; i++)
					sqcq_clear_need_wakeup(&qs[i].cq->flags,
							       SQCQ_CQ_F_NEED_WAKEUP);
			}
			idle_since = 0;
			for (i = 0; i < nq; i++)
				qs[i].cq_seen = sqcq_consume_idx(&qs[i].cq->idx);
		} else if (poll(pfd, nq, paused == 1 ? 50 : 1000) < 0 &&
			   errno != EINTR) {
			die("poll");
		}
		for (i = 0; i < nq; i++) {
			struct queue *q = &qs[i];
			uint16_t used_idx;
			uint64_t v;
			int posted = 0;

			if (read(q->call, &v, sizeof(v)) == sizeof(v))
				calls++;
			used_idx = __atomic_load_n(&q->used->idx,
						   __ATOMIC_ACQUIRE);
			while (q->used_seen != used_idx) {
				struct vring_used_elem *e =
					&q->used->ring[q->used_seen % RING];
				unsigned int sl = e->id / 3;

				q->used_seen++;
				q->inflight--;
				ios++;
				slot_done(i, sl, e->len);
				if (!done && paused != 1) {
					if (gap_us)
						usleep(gap_us);
					slot_post(q, i, sl);
					if (one_by_one)
						publish_and_kick(q);
					else
						posted++;
				} else if (!done) {
					held[i][nheld[i]++] = sl;
				}
			}
			if (posted)
				publish_and_kick(q);
		}
		if (done) {
			unsigned int left = 0;

			for (i = 0; i < nq; i++)
				left += qs[i].inflight;
			/* -Z stops the device under them. */
			if (!left || (quiet_ms && quiet_stop) ||
			    now() > t1 + 10)
				break;
		}
	}
	t1 = now();
	if (dump)
		dump_debugfs();
	if (quiet_ms) {
		if (quiet_after_stop(fd, argv[optind + 1], nq, quiet_ms,
				     quiet_stop))
			errors++;
	} else {
		memset(&t, 0, sizeof(t));
		snprintf(t.vhost_wwpn, sizeof(t.vhost_wwpn), "%s",
			 argv[optind + 1]);
		if (ioctl(fd, VHOST_SCSI_CLEAR_ENDPOINT, &t))
			die("VHOST_SCSI_CLEAR_ENDPOINT");
	}
	printf("ios=%llu seconds=%.2f iops=%.0f kicks=%llu calls=%llu errors=%llu mode=%s sleeps=%llu\n",
	       ios, t1 - t0, ios / (t1 - t0), kicks, calls, errors,
	       use_sqcq ? "sqcq" : "classic", sleeps);
	close(fd);
	return errors ? 1 : 0;
}
