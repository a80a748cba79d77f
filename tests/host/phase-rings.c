// SPDX-License-Identifier: GPL-2.0-only
/*
 * The ring-level checks without a target: the control and request
 * queues, EVENT_IDX off, malformed chains, guest addresses that wrap,
 * RESET_OWNER, owner exit, a submitter racing ring restarts.
 */
#include "client-lib.h"

/* ---- ring-level tests ---- */

void test_ctrl_queue(int fd)
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

void test_request_queue(int fd)
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
void test_no_event_idx(int fd)
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


static const char *const bad_names[] = {
	"loop", "outside-mem-table", "nested-indirect", "indirect-len",
	"head-out-of-range", "avail-idx-jump", "readable-after-writable",
	"indirect-loop", "next-out-of-range", "indirect-with-next",
	"length-wraps",
};

/* Each malformed ring on its own queue: broken, err signalled, no oops. */
void test_bad_ring(int fd, enum bad_kind kind)
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
void test_gpa_wrap(int fd)
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
void test_bad_ring_recovery(int fd)
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

void test_reset_owner(int fd)
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
void test_owner_exit(void)
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

void test_stress(int fd)
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
