// SPDX-License-Identifier: GPL-2.0-only
/*
 * Phase "kick-swap": a new kick eventfd set (SET_VRING_KICK) on a running
 * ring with requests in flight: none of them is lost.
 */
#include "client-lib.h"

void t_kick_swap(int fd)
{
	struct cvq *q = &vqs[SYNC_VQ];
	unsigned int r, i, lost = 0, rounds = 60;
	struct virtio_scsi_cmd_req *req;
	struct virtio_scsi_cmd_resp *rsp;
	uint8_t *data;
	uint16_t h;
	int nk;

	for (r = 0; r < rounds; r++) {
		for (i = 0; i < 4; i++) {
			req = new_req(1, 0);
			cdb_rw(req->cdb, false, false, 2048 + 512 * i, 512);
			rsp = new_rsp();
			data = mem + BIG_OFF + (i << 18);
			h = cvq_desc(q, gpa(data), 256u << 10,
				     VRING_DESC_F_WRITE, 0);
			h = cvq_desc(q, gpa(rsp), RSP_SZ,
				     VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, h);
			h = cvq_desc(q, gpa(req), HDR_SZ, VRING_DESC_F_NEXT, h);
			cvq_publish(q, h);
		}
		cvq_kick(q);
		nk = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (vring_file(fd, VHOST_SET_VRING_KICK, q->idx, nk)) {
			result(false, "scsi-kick-swap-running-ring", "%s",
			       strerror(errno));
			close(nk);
			return;
		}
		close(q->kick);
		q->kick = nk;
		if (!cvq_wait_used(q, q->avail_idx, 10000)) {
			lost += (uint16_t)(q->avail_idx - load16(&q->used->idx));
			break;
		}
		q->used_seen = q->avail_idx;
	}
	result(!lost, "scsi-kick-swap-keeps-requests-in-flight",
	       "%u rounds, %u requests never answered", r, lost);
	if (lost) {
		vring_state(fd, VHOST_GET_VRING_BASE, q->idx, 0);
		cvq_start(fd, q, q->idx, true);
	}
}
