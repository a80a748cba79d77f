// SPDX-License-Identifier: GPL-2.0-only
/*
 * Phases "commands", "data", "boundaries", "malformed", "tmf" and the
 * endpoint checks: the SCSI data path with an LIO target.
 */
#include "client-lib.h"

void t_endpoint(int fd)
{
	struct vhost_scsi_target bad = ep_target("naa.5001405000000bad");
	char p[512], dir[512] = "", buf[4096];
	int fd2;

	expect("scsi-set-endpoint", set_endpoint(fd, wwpn, "scsi-set-endpoint"),
	       0);
	expect("scsi-set-endpoint-again-eexist",
	       set_endpoint(fd, wwpn, "scsi-set-endpoint-again-eexist"), EEXIST);
	expect("scsi-clear-endpoint-wrong-wwpn-einval",
	       timed_ioctl(fd, VHOST_SCSI_CLEAR_ENDPOINT, &bad, 30000,
			   "scsi-clear-endpoint-wrong-wwpn-einval"), EINVAL);

	tpg_path(p, sizeof(p), 1, NULL);
	expect("scsi-bound-tpg-rmdir-ebusy", rmdir(p), EBUSY);
	tpg_path(p, sizeof(p), 3, NULL);
	expect("scsi-bound-empty-tpg-rmdir-ebusy", rmdir(p), EBUSY);
	tpg_path(p, sizeof(p), 3, "nexus");
	expect("scsi-bound-tpg-nexus-drop-ebusy", cfs_write(p, "NULL"), EBUSY);
	result(read_file(p, buf, sizeof(buf)) && !strncmp(buf, "naa.", 4),
	       "scsi-bound-tpg-nexus-kept", "nexus reads \"%s\"", buf);

	/* A TPG serves one device: a second one cannot bind it. */
	fd2 = open(node, O_RDWR | O_CLOEXEC);
	expect("scsi-second-device-set-owner",
	       fd2 >= 0 ? ioctl(fd2, VHOST_SET_OWNER) : -1, 0);
	expect("scsi-second-device-same-wwpn-ebusy",
	       set_endpoint(fd2, wwpn, "scsi-second-device-same-wwpn-ebusy"),
	       EBUSY);
	if (fd2 >= 0)
		close(fd2);

	dbg_devs(getpid(), dir, sizeof(dir));
	snprintf(p, sizeof(p), "%s/targets", dir);
	buf[0] = '\0';
	read_file(p, buf, sizeof(buf));
	{
		char want[300];

		snprintf(want, sizeof(want), "endpoint: %s\n", wwpn);
		result(strstr(buf, want) && strstr(buf, "target 1: ") &&
		       strstr(buf, "target 2: ") && strstr(buf, "target 3: ") &&
		       !strstr(buf, "target 0: "),
		       "scsi-debugfs-targets", "%s: \"%s\"", p, buf);
	}
}

void t_commands(uint64_t lun_bytes)
{
	uint8_t cdb[16], *d;
	unsigned int luns[16], i, want;
	char name[64];
	struct sres s;
	int n;

	for (i = 0; i < ndisks; i++) {
		snprintf(name, sizeof(name), "scsi-read-capacity16-t%u-l%u",
			 disks[i].target, disks[i].lun);
		result(disks[i].bytes == lun_bytes, name, "%llu bytes, want %llu",
		       (unsigned long long)disks[i].bytes,
		       (unsigned long long)lun_bytes);

		memset(cdb, 0, sizeof(cdb));
		cdb[0] = 0x25;
		d = buf_alloc(8);
		scsi_cmd(disks[i].target, disks[i].lun, cdb, 10, gpa(d), 8, true,
			 &s);
		snprintf(name, sizeof(name), "scsi-read-capacity10-t%u-l%u",
			 disks[i].target, disks[i].lun);
		result(good(&s) && s.used == RSP_SZ + 8 &&
		       get_be(d + 4, 4) == SECT &&
		       (get_be(d, 4) + 1) * SECT == lun_bytes, name,
		       "%s last lba %llu block %llu", sres_str(&s),
		       (unsigned long long)get_be(d, 4),
		       (unsigned long long)get_be(d + 4, 4));
	}

	memset(cdb, 0, sizeof(cdb));
	cdb[0] = 0x12;
	cdb[4] = 96;
	d = buf_alloc(96);
	memset(d, 0xee, 96);
	scsi_cmd(1, 0, cdb, 6, gpa(d), 96, true, &s);
	want = d[4] + 5u < 96 ? d[4] + 5u : 96;
	result(good(&s) && d[0] == 0 && s.r.resid == 96 - want &&
	       s.used == RSP_SZ + want && s.r.sense_len == 0, "scsi-inquiry",
	       "%s byte0 0x%x additional length %u", sres_str(&s), d[0], d[4]);
	printf("# inquiry: \"%.8s\" \"%.16s\" \"%.4s\"\n", d + 8, d + 16, d + 32);

	n = report_luns(1, luns, 16, &s);
	result(n == 2 && has_lun(luns, n, 0) && has_lun(luns, n, 1),
	       "scsi-report-luns-tpgt1-two", "%d luns, %s", n, sres_str(&s));
	n = report_luns(2, luns, 16, &s);
	result(n == 1 && luns[0] == 0, "scsi-report-luns-tpgt2-one",
	       "%d luns, %s", n, sres_str(&s));

	tur(1, 0, &s);
	result(good(&s) && s.used == RSP_SZ && s.r.sense_len == 0 &&
	       s.r.resid == 0, "scsi-test-unit-ready", "%s", sres_str(&s));
	tur(1, 9, &s);
	result(check_illegal_lun(&s), "scsi-no-such-lun-illegal-request", "%s",
	       sres_str(&s));
	d = buf_alloc(SECT);
	cdb_rw(cdb, false, false, 0, 1);
	scsi_cmd(1, 9, cdb, 10, gpa(d), SECT, true, &s);
	result(check_illegal_lun(&s), "scsi-read-no-such-lun-illegal-request",
	       "%s", sres_str(&s));
	tur(7, 0, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_BAD_TARGET &&
	       s.used == RSP_SZ, "scsi-no-such-target-bad-target", "%s",
	       sres_str(&s));
	/* A bound TPG without LUNs is a target: LIO answers, not us. */
	memset(cdb, 0, sizeof(cdb));
	cdb[0] = 0x12;
	cdb[4] = 36;
	d = buf_alloc(36);
	scsi_cmd(3, 0, cdb, 6, gpa(d), 36, true, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_OK,
	       "scsi-bound-tpg-without-luns-answers", "%s", sres_str(&s));
}

void t_data(void)
{
	struct engine *e;
	char dir[512] = "", name[64];
	unsigned int l, q;
	bool all = true;

	e = engine_strict_run("scsi-io", NQ, 600, live_mask, 1, 2000);
	for (l = 0; l < LAY_N; l++)
		all &= e->lay[l] > 100;
	result(all, "scsi-io-every-layout",
	       "plain %lu any %lu indirect %lu split %lu any-indirect %lu",
	       e->lay[0], e->lay[1], e->lay[2], e->lay[3], e->lay[4]);
	result(e->c16 > 100 && e->submitted - e->c16 > 100,
	       "scsi-io-cdb10-and-cdb16", "%lu of %lu with 16-byte CDBs",
	       e->c16, e->submitted);
	result(e->reads_checked >= 500, "scsi-io-reads-compared",
	       "%lu reads compared", e->reads_checked);
	dbg_devs(getpid(), dir, sizeof(dir));
	for (q = 0; q < NQ; q++) {
		unsigned long long r = dbg_vq_requests(dir, 2 + q);

		snprintf(name, sizeof(name), "scsi-io-debugfs-vq%u-requests",
			 2 + q);
		result(r >= 600, name, "%llu requests", r);
	}
}

void t_boundaries(void)
{
	uint8_t *big = mem + BIG_OFF, cdb[16];
	struct disk *dk = &disks[0];
	const uint32_t m8 = 8u << 20, m9 = 9u << 20;
	uint64_t seed = 77;
	struct sres s;
	uint32_t i;
	bool ok;

	/* 8 MiB, page aligned: the largest transfer; written, read back. */
	fill_random(big, m8, &seed);
	cdb_rw(cdb, true, true, 0, m8 / SECT);
	scsi_cmd(dk->target, dk->lun, cdb, 16, gpa(big), m8, false, &s);
	ok = good(&s) && s.used == RSP_SZ && !s.r.resid;
	memset(dk->valid, 0, m8 / SECT);
	if (ok) {
		memcpy(dk->shadow, big, m8);
		memset(dk->valid, 1, m8 / SECT);
	}
	result(ok, "scsi-write-8mib", "%s", sres_str(&s));
	memset(big, 0xa5, m8 + 4096);
	cdb_rw(cdb, false, true, 0, m8 / SECT);
	scsi_cmd(dk->target, dk->lun, cdb, 16, gpa(big), m8, true, &s);
	ok = good(&s) && s.used == RSP_SZ + m8 && !s.r.resid &&
	     !memcmp(big, dk->shadow, m8);
	for (i = 0; ok && i < 4096; i++)
		ok = big[m8 + i] == 0xa5;
	result(ok, "scsi-read-8mib-verified", "%s", sres_str(&s));

	/* Larger than the transfer limit: OVERRUN at once. */
	cdb_rw(cdb, false, false, 0, m9 / SECT);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big), m9, true, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_OVERRUN &&
	       s.used == RSP_SZ, "scsi-read-9mib-overrun", "%s", sres_str(&s));
	cdb_rw(cdb, true, false, 0, m9 / SECT);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big), m9, false, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_OVERRUN &&
	       s.used == RSP_SZ, "scsi-write-9mib-overrun", "%s", sres_str(&s));
	/* 8 MiB not page aligned: 2049 pages, one too many. */
	cdb_rw(cdb, false, false, 0, m8 / SECT);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big + 512), m8, true, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_OVERRUN &&
	       s.used == RSP_SZ, "scsi-read-8mib-unaligned-overrun", "%s",
	       sres_str(&s));

	/* Buffer larger than the CDB asks (underflow): resid, used length. */
	memset(big, 0xa5, 8192);
	cdb_rw(cdb, false, false, 100, 8);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big), 8192, true, &s);
	ok = good(&s) && s.r.resid == 4096 && s.used == RSP_SZ + 4096 &&
	     !memcmp(big, dk->shadow + 100 * SECT, 4096);
	for (i = 4096; ok && i < 8192; i++)
		ok = big[i] == 0xa5;
	result(ok, "scsi-read-underflow-resid", "%s", sres_str(&s));
	/*
	 * Buffer smaller than the CDB asks (overflow): LIO may read what fits
	 * (GOOD, resid) or refuse the CDB (CHECK CONDITION, nothing written);
	 * the used length must say which.
	 */
	memset(big, 0xa5, 4096);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big), 2048, true, &s);
	if (good(&s)) {
		ok = s.r.resid == 2048 && s.used == RSP_SZ + 2048 &&
		     !memcmp(big, dk->shadow + 100 * SECT, 2048);
		i = 2048;
	} else {
		ok = s.done && s.r.response == VIRTIO_SCSI_S_OK &&
		     s.r.status == 0x02 && s.r.sense_len && s.used == RSP_SZ;
		i = 0;
	}
	for (; ok && i < 4096; i++)
		ok = big[i] == 0xa5;
	result(ok, "scsi-read-short-buffer", "%s", sres_str(&s));
	/* A WRITE whose buffer does not match its CDB: LIO refuses it. */
	cdb_rw(cdb, true, false, 100, 8);
	scsi_cmd(dk->target, dk->lun, cdb, 10, gpa(big), 2048, false, &s);
	memset(dk->valid + 100, 0, 8);
	result(s.done && s.r.response == VIRTIO_SCSI_S_OK &&
	       s.r.status == 0x02 && s.r.sense_len > 0,
	       "scsi-write-short-buffer-check-condition", "%s", sres_str(&s));
}

void t_malformed(void)
{
	struct virtio_scsi_cmd_req *req;
	struct virtio_scsi_cmd_resp *rsp;
	uint64_t hole = gpa(mem + HOLE_OFF);
	uint8_t *b, *half = mem + HOLE_OFF - 4096;
	struct seg sg[4];
	uint32_t used;
	struct sres s;
	bool ok;
	int i;

	/* Request header shorter than virtio_scsi_cmd_req. */
	req = new_req(1, 0);
	rsp = new_rsp();
	sg[0] = (struct seg){ gpa(req), 20, false };
	sg[1] = (struct seg){ gpa(rsp), RSP_SZ, true };
	ok = raw_req(sg, 2, &used);
	result(ok && used == RSP_SZ && rsp->response == VIRTIO_SCSI_S_FAILURE,
	       "scsi-bad-header-too-short-failure", "ok %d used %u response %u",
	       ok, used, rsp->response);
	/* Response buffer shorter than virtio_scsi_cmd_resp. */
	req = new_req(1, 0);
	rsp = new_rsp();
	sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
	sg[1] = (struct seg){ gpa(rsp), 50, true };
	ok = raw_req(sg, 2, &used);
	result(ok && used == 50 && rsp->response == VIRTIO_SCSI_S_FAILURE &&
	       ((uint8_t *)rsp)[50] == 0xee,
	       "scsi-bad-response-too-short-failure",
	       "ok %d used %u response %u", ok, used, rsp->response);
	req = new_req(1, 0);
	rsp = new_rsp();
	sg[1] = (struct seg){ gpa(rsp), 4, true };
	sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
	ok = raw_req(sg, 2, &used);
	result(ok && used <= 4 && ((uint8_t *)rsp)[4] == 0xee,
	       "scsi-bad-response-4-bytes-answered", "ok %d used %u", ok, used);
	/* Variable-length CDB claiming 248 bytes. */
	req = new_req(1, 0);
	req->cdb[0] = 0x7f;
	req->cdb[7] = 0xf0;
	rsp = new_rsp();
	sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
	sg[1] = (struct seg){ gpa(rsp), RSP_SZ, true };
	ok = raw_req(sg, 2, &used);
	result(ok && used == RSP_SZ && rsp->response == VIRTIO_SCSI_S_FAILURE,
	       "scsi-bad-cdb-longer-than-32-failure", "ok %d used %u response %u",
	       ok, used, rsp->response);
	/* Bidirectional: data-out and data-in in one request. */
	req = new_req(1, 0);
	cdb_rw(req->cdb, true, false, 200, 1);
	rsp = new_rsp();
	b = buf_alloc(2 * SECT);
	sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
	sg[1] = (struct seg){ gpa(b), SECT, false };
	sg[2] = (struct seg){ gpa(rsp), RSP_SZ, true };
	sg[3] = (struct seg){ gpa(b + SECT), SECT, true };
	ok = raw_req(sg, 4, &used);
	memset(disks[0].valid + 200, 0, 1);
	result(ok && used == RSP_SZ && rsp->response == VIRTIO_SCSI_S_FAILURE,
	       "scsi-bad-bidirectional-failure", "ok %d used %u response %u",
	       ok, used, rsp->response);

	/* Inside the memory table, but nothing mapped there any more. */
	result(unmap_hole(), "scsi-unmap-part-of-guest-memory", "%s",
	       strerror(errno));
	req = new_req(1, 0);
	rsp = new_rsp();
	sg[0] = (struct seg){ hole, HDR_SZ, false };
	sg[1] = (struct seg){ gpa(rsp), RSP_SZ, true };
	ok = raw_req(sg, 2, &used);
	result(ok && used == RSP_SZ && rsp->response == VIRTIO_SCSI_S_FAILURE,
	       "scsi-bad-header-unmapped-failure", "ok %d used %u response %u",
	       ok, used, rsp->response);
	cdb_rw(req->cdb, false, false, 0, 8);
	scsi_cmd(1, 0, req->cdb, 10, hole, 4096, true, &s);
	result(s.done && s.r.response == VIRTIO_SCSI_S_FAILURE &&
	       s.used == RSP_SZ, "scsi-bad-read-into-unmapped-failure", "%s",
	       sres_str(&s));
	cdb_rw(req->cdb, true, false, 0, 8);
	scsi_cmd(1, 0, req->cdb, 10, hole, 4096, false, &s);
	memset(disks[0].valid, 0, 8);
	result(s.done && s.r.response == VIRTIO_SCSI_S_FAILURE &&
	       s.used == RSP_SZ, "scsi-bad-write-from-unmapped-failure", "%s",
	       sres_str(&s));
	/* Half mapped: the first page is pinned, the second fails. */
	memset(half, 0x5a, 4096);
	cdb_rw(req->cdb, false, false, 0, 16);
	scsi_cmd(1, 0, req->cdb, 10, gpa(half), 8192, true, &s);
	ok = s.done && s.r.response == VIRTIO_SCSI_S_FAILURE &&
	     s.used == RSP_SZ;
	for (i = 0; ok && i < 4096; i++)
		ok = half[i] == 0x5a;
	result(ok, "scsi-bad-read-half-unmapped-failure-untouched", "%s",
	       sres_str(&s));
	/* The response itself unmapped: answered anyway (nothing to see). */
	req = new_req(1, 0);
	sg[0] = (struct seg){ gpa(req), HDR_SZ, false };
	sg[1] = (struct seg){ hole + 4096, RSP_SZ, true };
	ok = raw_req(sg, 2, &used);
	result(ok && used == 0, "scsi-bad-response-unmapped-answered",
	       "ok %d used %u", ok, used);
	result(remap_hole(), "scsi-remap-guest-memory", "%s", strerror(errno));

	tur(1, 0, &s);
	result(good(&s), "scsi-bad-requests-queue-still-works", "%s",
	       sres_str(&s));
}

void t_tmf(void)
{
	static const struct {
		uint32_t subtype;
		const char *name;
	} rejected[] = {
		{ VIRTIO_SCSI_T_TMF_ABORT_TASK_SET, "abort-task-set" },
		{ VIRTIO_SCSI_T_TMF_CLEAR_ACA, "clear-aca" },
		{ VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET, "clear-task-set" },
		{ VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET, "i-t-nexus-reset" },
		{ VIRTIO_SCSI_T_TMF_QUERY_TASK, "query-task" },
		{ VIRTIO_SCSI_T_TMF_QUERY_TASK_SET, "query-task-set" },
	};
	struct sqcq_tmf_req *st;
	struct timespec t0;
	uint8_t *setup_in, key = 0, asc = 0;
	char name[80];
	struct seg sg[2];
	struct sres s;
	uint32_t used;
	size_t i;
	bool ok;
	int r;

	r = tmf(1, 0, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0);
	result(r == SQCQ_VIRTIO_SCSI_S_FUNCTION_COMPLETE,
	       "scsi-tmf-lun-reset-function-complete", "response %d", r);
	tur(1, 0, &s);
	sense_of(&s.r, &key, &asc);
	result(s.done && s.r.status == 0x02 && key == 0x6 && asc == 0x29,
	       "scsi-lun-reset-unit-attention", "%s", sres_str(&s));
	result(clear_ua(1, 0), "scsi-lun-reset-unit-attention-cleared", "-");
	r = tmf(1, 0, VIRTIO_SCSI_T_TMF_ABORT_TASK, 0xdeadbeefull);
	result(r == SQCQ_VIRTIO_SCSI_S_FUNCTION_COMPLETE,
	       "scsi-tmf-abort-unknown-tag-function-complete", "response %d", r);
	for (i = 0; i < sizeof(rejected) / sizeof(rejected[0]); i++) {
		r = tmf(1, 0, rejected[i].subtype, 0);
		snprintf(name, sizeof(name), "scsi-tmf-%s-rejected",
			 rejected[i].name);
		result(r == VIRTIO_SCSI_S_FUNCTION_REJECTED, name, "response %d",
		       r);
	}
	r = tmf(1, 9, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0);
	result(r == VIRTIO_SCSI_S_INCORRECT_LUN,
	       "scsi-tmf-lun-reset-no-such-lun-incorrect-lun", "response %d", r);
	r = tmf(7, 0, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0);
	result(r == VIRTIO_SCSI_S_BAD_TARGET, "scsi-tmf-no-such-target-bad-target",
	       "response %d", r);

	/* SQ/CQ setup with a target bound: still FUNCTION_REJECTED. */
	st = buf_alloc(sizeof(*st) + 64);
	st->type = SQCQ_VIRTIO_SCSI_T_TMF;
	st->subtype = SQCQ_TMF_SUBTYPE_SETUP;
	st->lun[0] = 1;
	st->lun[1] = 1;
	setup_in = buf_alloc(SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE);
	memset(setup_in, 0xee, SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE);
	sg[0] = (struct seg){ gpa(st), sizeof(*st) + 64, false };
	sg[1] = (struct seg){ gpa(setup_in), SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE,
			      true };
	ok = sync_run(&vqs[0], sg, 2, false, &used, 10000);
	result(ok && setup_in[0] == SQCQ_VIRTIO_SCSI_S_FUNCTION_REJECTED,
	       "scsi-tmf-sqcq-setup-bad-magic-rejected", "ok %d used %u response %u", ok,
	       used, setup_in[0]);
	/* A TMF request cut short. */
	st = buf_alloc(sizeof(*st));
	st->type = VIRTIO_SCSI_T_TMF;
	st->subtype = VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET;
	setup_in = buf_alloc(4);
	memset(setup_in, 0xee, 4);
	sg[0] = (struct seg){ gpa(st), 12, false };
	sg[1] = (struct seg){ gpa(setup_in), 1, true };
	ok = sync_run(&vqs[0], sg, 2, false, &used, 10000);
	result(ok && used == 1 && setup_in[0] == VIRTIO_SCSI_S_FAILURE,
	       "scsi-tmf-short-request-failure", "ok %d used %u response %u",
	       ok, used, setup_in[0]);

	/* LUN reset with I/O in flight on that LUN and on another one. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	engine_start(&fe, NQ, 0, true, live_mask & 3, 11);
	ok = engine_wait_ok(&fe, 100, 60000);
	r = tmf(1, 0, VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0);
	msleep(300);
	fe.stop = true;
	engine_join(&fe, &t0);
	result(ok && r == SQCQ_VIRTIO_SCSI_S_FUNCTION_COMPLETE,
	       "scsi-tmf-lun-reset-under-io", "running %d response %d", ok, r);
	result(!fe.hung, "scsi-tmf-lun-reset-under-io-no-hang", "%s", fe.why);
	result(!fe.bad && fe.done == fe.submitted,
	       "scsi-tmf-lun-reset-under-io-all-answered",
	       "%lu bad, %lu of %lu answered: %s", fe.bad, fe.done,
	       fe.submitted, fe.why);
	result(clear_ua_all(), "scsi-unit-attention-cleared-after-reset", "-");
}
