// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost-bench: drive a vhost-scsi device node from userspace as a VMM and a
 * guest driver at once, and measure 4 KiB random I/O against one LUN.
 * Works with the in-tree /dev/vhost-scsi and with /dev/vhost-scsi-sqcq, so
 * both are measured by the same client in the same boot.
 *
 *   vhost-bench NODE WWPN QUEUES DEPTH SECONDS read|write [TARGET [LUN [sqcq]]]
 *
 * DEPTH requests are kept in flight on each of QUEUES request queues, each
 * request a READ(10)/WRITE(10) of 4 KiB at a random block of the first
 * 64 MiB, three descriptors (header, response, data), interrupts on (no
 * EVENT_IDX).  One thread waits on all call eventfds and refills.
 *
 * With "sqcq" the client first asks for SQ/CQ doorbells on the control
 * queue (common/sqcq_uapi.h) and then behaves as the guest driver does in
 * SQ/CQ mode: it publishes SQ indexes and kicks only when the host poller
 * asked for it (SQ NEED_WAKEUP), and polls the CQ indexes, sleeping on the
 * call eventfds behind CQ NEED_WAKEUP after 1 ms without completions
 * ($SQCQ_CLIENT_IDLE_US overrides the 1 ms).
 *
 * Prints one line:
 *   ios=N seconds=S iops=I kicks=K calls=C errors=E mode=M
 * kicks: eventfd writes this client made; calls: signals it consumed
 * (counted per eventfd read, so coalesced signals count once).
 * Exit status 0 when no request failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

#include "../common/sqcq_uapi.h"

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
	struct vring_sq *sq;		/* SQ/CQ doorbells, NULL: classic */
	struct vring_cq *cq;
	uint16_t cq_seen;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	int kick, call;
	uint16_t avail_idx, used_seen;
	unsigned int inflight;
};

static uint8_t *mem;
static size_t mem_size;
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
	fprintf(stderr, "vhost-bench: %s: %s\n", what, strerror(errno));
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

/* Fill slot @s of queue @qn with a random 4 KiB read or write. */
static void slot_post(struct queue *q, unsigned int qn, unsigned int s,
		      int target, int lun, int write)
{
	uint8_t *b = slot_base(qn, s);
	struct slot *sl = (struct slot *)b;
	uint8_t *data = b + 4096;
	uint32_t lba = (uint32_t)(random() % (SPAN_BLOCKS - BS / 512));
	struct vring_desc *d = &q->desc[s * 3];

	memset(&sl->req, 0, sizeof(sl->req));
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

static void publish_and_kick(struct queue *q)
{
	uint64_t one = 1;

	/* Ring entries before the index (release), as a driver must. */
	__atomic_store_n(&q->avail->idx, q->avail_idx, __ATOMIC_RELEASE);
	if (q->sq) {
		/* SQ/CQ: the doorbell, full barrier, the host poller's flag. */
		if (!sqcq_publish(&q->sq->idx, q->avail_idx, &q->sq->flags,
				  VRING_SQ_F_NEED_WAKEUP))
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

/*
 * Ask for SQ/CQ on the control queue (vhost queue 0, started here) for
 * the first @nq request queues; returns the setup status (SQCQ_S_*), or
 * -1 when the device gave another answer.
 */
static int sqcq_setup(int fd, unsigned int nq)
{
	size_t area_off = (size_t)(MAXQ + 1) * RING_BYTES;
	uint8_t *buf = mem + (size_t)MAXQ * RING_BYTES + 32768;
	struct sqcq_tmf_req *tmf = (struct sqcq_tmf_req *)buf;
	struct sqcq_setup_req *req = (struct sqcq_setup_req *)(buf + 24);
	struct sqcq_setup_in *in = (struct sqcq_setup_in *)(buf + 256);
	double t0;

	queue_start(fd, &ctrlq, MAXQ, 0);
	area = (struct sqcq_area *)(mem + area_off);
	sqcq_area_init(area, nq);
	memset(buf, 0, 512);
	tmf->type = cpu_to_le32(SQCQ_VIRTIO_SCSI_T_TMF);
	tmf->subtype = cpu_to_le32(SQCQ_TMF_SUBTYPE_SETUP);
	tmf->lun[0] = 1;
	req->magic = cpu_to_le32(SQCQ_MAGIC);
	req->version = cpu_to_le16(SQCQ_VERSION);
	req->nqueues = cpu_to_le16(nq);
	req->area_gpa = cpu_to_le64(gpa_of(area));
	req->area_len = cpu_to_le32(4096);
	req->flags = cpu_to_le32(SQCQ_F_SQ_POLL | SQCQ_F_CQ_POLL);
	req->poll_idle_us = cpu_to_le32(1000);
	ctrlq.desc[0].addr = gpa_of(tmf);
	ctrlq.desc[0].len = 24 + sizeof(*req);
	ctrlq.desc[0].flags = VRING_DESC_F_NEXT;
	ctrlq.desc[0].next = 1;
	ctrlq.desc[1].addr = gpa_of(in);
	ctrlq.desc[1].len = sizeof(*in);
	ctrlq.desc[1].flags = VRING_DESC_F_WRITE;
	ctrlq.avail->ring[0] = 0;
	ctrlq.avail_idx = 1;
	publish_and_kick(&ctrlq);
	t0 = now();
	while (__atomic_load_n(&ctrlq.used->idx, __ATOMIC_ACQUIRE) != 1)
		if (now() - t0 > 10) {
			fprintf(stderr, "vhost-bench: no answer to the SQ/CQ setup\n");
			exit(2);
		}
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

int main(int argc, char **argv)
{
	struct vhost_scsi_target t = { 0 };
	struct pollfd pfd[MAXQ];
	struct vhost_memory *m;
	unsigned int nq, depth, i, s;
	int fd, target = 1, lun = 0, write_io, use_sqcq = 0;
	double secs, t0, t1, idle_since = 0, client_idle = 0.001;
	unsigned long long sleeps = 0;
	uint64_t features;

	if (argc < 7) {
		fprintf(stderr, "usage: vhost-bench NODE WWPN QUEUES DEPTH SECONDS read|write [TARGET [LUN]]\n");
		return 2;
	}
	nq = atoi(argv[3]);
	depth = atoi(argv[4]);
	secs = atof(argv[5]);
	write_io = !strcmp(argv[6], "write");
	if (argc > 7)
		target = atoi(argv[7]);
	if (argc > 8)
		lun = atoi(argv[8]);
	use_sqcq = argc > 9 && !strcmp(argv[9], "sqcq");
	if (getenv("SQCQ_CLIENT_IDLE_US"))
		client_idle = atof(getenv("SQCQ_CLIENT_IDLE_US")) / 1e6;
	if (!nq || nq > MAXQ || !depth || depth > SLOTS || secs <= 0) {
		fprintf(stderr, "vhost-bench: QUEUES 1..%d, DEPTH 1..%d\n",
			MAXQ, SLOTS);
		return 2;
	}

	mem_size = (size_t)(MAXQ + 2) * RING_BYTES +
		   (size_t)MAXQ * SLOTS * SLOT_BYTES;
	mem = mmap(NULL, mem_size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap");
	fd = open(argv[1], O_RDWR);
	if (fd < 0)
		die(argv[1]);
	if (ioctl(fd, VHOST_SET_OWNER))
		die("VHOST_SET_OWNER");
	if (ioctl(fd, VHOST_GET_FEATURES, &features))
		die("VHOST_GET_FEATURES");
	features &= 1ull << VIRTIO_F_VERSION_1;
	if (ioctl(fd, VHOST_SET_FEATURES, &features))
		die("VHOST_SET_FEATURES");
	m = calloc(1, sizeof(*m) + sizeof(m->regions[0]));
	if (!m)
		die("calloc");
	m->nregions = 1;
	m->regions[0].guest_phys_addr = GPA0;
	m->regions[0].memory_size = mem_size;
	m->regions[0].userspace_addr = (uintptr_t)mem;
	if (ioctl(fd, VHOST_SET_MEM_TABLE, m))
		die("VHOST_SET_MEM_TABLE");
	for (i = 0; i < nq; i++)
		queue_start(fd, &qs[i], i, 2 + i);
	snprintf(t.vhost_wwpn, sizeof(t.vhost_wwpn), "%s", argv[2]);
	if (ioctl(fd, VHOST_SCSI_SET_ENDPOINT, &t))
		die("VHOST_SCSI_SET_ENDPOINT");
	if (use_sqcq) {
		int st = sqcq_setup(fd, nq);

		if (st != SQCQ_S_OK) {
			fprintf(stderr, "vhost-bench: SQ/CQ refused: %s\n",
				st < 0 ? "not supported" : sqcq_status_str(st));
			return 3;
		}
		for (i = 0; i < nq; i++) {
			qs[i].sq = &area->q[i].sq_line.sq;
			qs[i].cq = &area->q[i].cq_line.cq;
			/* We poll: no interrupts until we say so. */
			sqcq_clear_need_wakeup(&qs[i].cq->flags,
					       VRING_CQ_F_NEED_WAKEUP);
		}
	}

	srandom(1);
	for (i = 0; i < nq; i++) {
		for (s = 0; s < depth; s++)
			slot_post(&qs[i], i, s, target, lun, write_io);
		publish_and_kick(&qs[i]);
		pfd[i].fd = qs[i].call;
		pfd[i].events = POLLIN;
	}

	t0 = now();
	t1 = t0 + secs;
	for (;;) {
		int done = now() >= t1;

		if (use_sqcq) {
			/* Spin on the CQ doorbells; after 1 ms idle, sleep. */
			if (!cq_moved(nq)) {
				if (!idle_since)
					idle_since = now();
				if (now() - idle_since < client_idle)
					continue;
				for (i = 0; i < nq; i++)
					if (!sqcq_prepare_sleep(&qs[i].cq->flags,
								VRING_CQ_F_NEED_WAKEUP,
								&qs[i].cq->idx,
								qs[i].cq_seen))
						break;
				if (i == nq) {
					sleeps++;
					if (poll(pfd, nq, 1000) < 0 &&
					    errno != EINTR)
						die("poll");
				}
				for (i = 0; i < nq; i++)
					sqcq_clear_need_wakeup(&qs[i].cq->flags,
							       VRING_CQ_F_NEED_WAKEUP);
			}
			idle_since = 0;
			for (i = 0; i < nq; i++)
				qs[i].cq_seen = sqcq_consume_idx(&qs[i].cq->idx);
		} else if (poll(pfd, nq, 1000) < 0 && errno != EINTR) {
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
				struct slot *p = (struct slot *)slot_base(i, sl);

				q->used_seen++;
				q->inflight--;
				ios++;
				if (p->resp.response != VIRTIO_SCSI_S_OK ||
				    p->resp.status != 0)
					errors++;
				if (!done) {
					slot_post(q, i, sl, target, lun,
						  write_io);
					posted++;
				}
			}
			if (posted)
				publish_and_kick(q);
		}
		if (done) {
			unsigned int left = 0;

			for (i = 0; i < nq; i++)
				left += qs[i].inflight;
			if (!left || now() > t1 + 10)
				break;
		}
	}
	t1 = now();
	memset(&t, 0, sizeof(t));
	snprintf(t.vhost_wwpn, sizeof(t.vhost_wwpn), "%s", argv[2]);
	if (ioctl(fd, VHOST_SCSI_CLEAR_ENDPOINT, &t))
		die("VHOST_SCSI_CLEAR_ENDPOINT");
	printf("ios=%llu seconds=%.2f iops=%.0f kicks=%llu calls=%llu errors=%llu mode=%s sleeps=%llu\n",
	       ios, t1 - t0, ios / (t1 - t0), kicks, calls, errors,
	       use_sqcq ? "sqcq" : "classic", sleeps);
	close(fd);
	return errors ? 1 : 0;
}
