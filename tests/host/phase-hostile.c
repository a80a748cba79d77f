// SPDX-License-Identifier: GPL-2.0-only
/*
 * Hostile-guest phases: data direction, COMPARE AND WRITE, the bound on
 * requests in flight, event queue abuse.
 */
#include "client-lib.h"

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
void t_direction(void)
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
void t_compare_and_write(void)
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
void t_compare_and_write_ua(void)
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
void t_compare_and_write_split(void)
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
void t_inflight_cap(int fd)
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
void t_evt_abuse(int fd)
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
