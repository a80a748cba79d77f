// SPDX-License-Identifier: GPL-2.0-only
/*
 * Userspace vhost client for the host module, run inside the test VM as
 * root: it plays both the VMM (ioctls, memory table, eventfds) and the guest
 * driver (it fills the rings itself), against /dev/vhost-scsi-sqcq.
 *
 * It checks every ioctl, with malformed input (the worker ioctls on a device
 * of their own: test_workers()), and the split ring engine:
 * without the TCM fabric the device is a SCSI host with no targets, so
 * commands come back BAD_TARGET, task management BAD_TARGET, SQ/CQ setup
 * FUNCTION_REJECTED and AN queries OK; broken rings must stop (err eventfd)
 * without hurting the kernel.
 *
 * With an LIO target (tests/host/inside.sh builds it on rd_mcp ramdisks:
 * tpgt_1 with LUNs 0 and 1, tpgt_2 with LUN 0, tpgt_3 with a nexus only),
 * mode "scsi" checks the SCSI data path: SET/CLEAR_ENDPOINT and what a
 * bound TPG refuses in configfs; INQUIRY, REPORT LUNS, READ CAPACITY,
 * TEST UNIT READY, missing LUNs and targets; READ/WRITE(10/16) of 512 B ..
 * 1 MiB on four request queues with six requests in flight each, in five
 * descriptor layouts (ANY_LAYOUT, pieces, indirect tables, split headers,
 * a buffer across two memory regions), every byte read compared with what
 * was written; the 8 MiB limit, residuals; malformed requests (short
 * header or response, CDB > 32 bytes, bidirectional, buffers whose memory
 * was unmapped); TMFs; hotplug events (through "$SQCQ_HOOK", which changes
 * configfs), EVENTS_MISSED and the event queue limit; CLEAR_ENDPOINT
 * with I/O in flight (what the queues publish then waits in the rings and
 * is served, good, at the next SET_ENDPOINT), a LUN reset and a LUN
 * unlink with I/O in flight, each request queue on a
 * worker of its own (VHOST_NEW_WORKER/ATTACH_VRING_WORKER, verified I/O,
 * moved back under I/O), a client SIGKILLed and a
 * device closed with I/O in flight.  Mode "hold" keeps a bound device busy
 * until it is killed; mode "io" is a short I/O check for other node names.
 *
 * Output: one "PASS: host <name>" or "FAIL: host <name> (...)" line per
 * check, "# ..." notes, then "host client: N passed, M failed".  Exit
 * status 0 only when nothing failed.
 *
 *   client [NODE]                          (default /dev/vhost-scsi-sqcq)
 *   client scsi NODE FABRIC WWPN LUN_MB    (SQCQ_HOOK: configfs helper)
 *   client hold NODE FABRIC WWPN READYFILE [idle]
 *   client io NODE FABRIC WWPN             (checks named takeover-*)
 *
 * One binary from several files: this one (the modes and the phase table
 * of mode "scsi"), client-lib.c/.h (what the checks share) and phase-*.c
 * (the checks, a file per phase or group of phases).
 */
#include "client-lib.h"

/*
 * Start phase @name of the scsi checks; false when $SQCQ_CLIENT_ONLY (a
 * comma-separated list of phase names) leaves it out, so one check can
 * be run alone: SQCQ_CLIENT_ONLY=direction,tmf tests/host/run.sh ...
 */
static bool phase(const char *name)
{
	static struct timespec t0;
	const char *only = getenv("SQCQ_CLIENT_ONLY");
	size_t n = strlen(name);
	const char *p;

	if (!t0.tv_sec)
		clock_gettime(CLOCK_MONOTONIC, &t0);
	for (p = only; p && *p; p += strcspn(p, ","), p += *p == ',')
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			break;
	if (only && *only && !(p && *p)) {
		/* Counted by tests/run-all.sh, never as passed. */
		printf("SKIP: host %s%s phase (left out: SQCQ_CLIENT_ONLY=%s)\n",
		       name_prefix, name, only);
		return false;
	}
	printf("# %s at %.1f s\n", name, elapsed_ms(&t0) / 1000.0);
	return true;
}

/* client scsi NODE FABRIC WWPN LUN_MB: see the file comment. */
static int scsi_main(int argc, char **argv)
{
	uint64_t lun_bytes;
	char why[256] = "";
	int fd;

	if (argc < 4) {
		fprintf(stderr, "usage: client scsi NODE FABRIC WWPN LUN_MB\n");
		return 2;
	}
	node = argv[0];
	fabric = argv[1];
	wwpn = argv[2];
	lun_bytes = strtoull(argv[3], NULL, 0) << 20;

	fd = scsi_dev_open(node, NULL, why, sizeof(why));
	result(fd >= 0, "scsi-device-setup", "%s", why);
	if (fd < 0)
		goto out;
	scsi_fd = fd;
	t_endpoint(fd);
	result(disk_add(1, 0) && disk_add(1, 1) && disk_add(2, 0),
	       "scsi-luns-answer", "%u of 3 LUNs answered READ CAPACITY",
	       ndisks);
	if (ndisks < 3)
		goto out;
	live_mask = 7;
	/*
	 * The phase table: one line per phase, in order (tests/check reads the
	 * names from these lines).  A new phase: its t_NAME() in a phase-*.c,
	 * declared in client-lib.h, and a line here.
	 */
	if (phase("commands"))
		t_commands(lun_bytes);
	if (phase("data"))
		t_data();
	if (phase("boundaries"))
		t_boundaries();
	if (phase("malformed"))
		t_malformed();
	if (phase("direction"))
		t_direction();
	if (phase("compare-and-write"))
		t_compare_and_write();
	if (phase("compare-and-write-unit-attention"))
		t_compare_and_write_ua();
	if (phase("compare-and-write-split-descriptors"))
		t_compare_and_write_split();
	if (phase("inflight-cap"))
		t_inflight_cap(fd);
	if (phase("tmf"))
		t_tmf();
	if (phase("workers"))
		t_workers(fd);
	if (phase("kick-swap"))
		t_kick_swap(fd);
	if (phase("dirty-log"))
		t_dirty_log(fd);
	if (phase("events"))
		t_events(fd);
	if (phase("evt-abuse"))
		t_evt_abuse(fd);
	if (phase("clear-under-io"))
		t_clear_under_io(fd);
	if (phase("lun-unlink-under-io"))
		t_lun_unlink_under_io();
	if (phase("sigkill"))
		t_sigkill(fd);
	if (phase("sigkill-clone"))
		t_sigkill_clone(fd);
	if (phase("log-budget"))
		t_log_budget(fd);
	if (phase("stall-cross-tenant"))
		t_stall_cross_tenant(fd);
	if (phase("close-in-flight"))
		t_close_in_flight(fd);
	phase("end");
out:
	printf("host client: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/*
 * client hold NODE FABRIC WWPN READY [idle]: bind, keep I/O running on
 * tpgt_1 and tpgt_2 LUN 0, create READY once it runs; then wait to be
 * killed.  With "idle": bound, tpgt_1 LUN 0 answers, no I/O kept running
 * (a VM that holds its TPG and does nothing).
 */
static int hold_main(int argc, char **argv)
{
	char why[256] = "";
	bool idle = argc > 4 && !strcmp(argv[4], "idle");
	int fd, rf;

	if (argc < 4) {
		fprintf(stderr, "usage: client hold NODE FABRIC WWPN READY [idle]\n");
		return 2;
	}
	node = argv[0];
	fabric = argv[1];
	wwpn = argv[2];
	fd = scsi_dev_open(node, wwpn, why, sizeof(why));
	if (fd < 0) {
		printf("# hold: %s\n", why);
		return 1;
	}
	scsi_fd = fd;
	if (!disk_add(1, 0) || (!idle && !disk_add(2, 0))) {
		printf("# hold: LUNs do not answer\n");
		return 1;
	}
	if (!idle)
		engine_start(&fe, NQ, 0, true, 3, 61);
	if (!idle && !engine_wait_ok(&fe, 100, 120000)) {
		printf("# hold: no I/O\n");
		return 1;
	}
	rf = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (rf < 0)
		return 1;
	close(rf);
	alarm(600);	/* a bound on the life of a forgotten holder */
	for (;;)
		pause();
}

/*
 * client io NODE FABRIC WWPN: a short I/O check through another node (the
 * takeover names): bind, INQUIRY, verified I/O on tpgt_1 LUN 0, unbind.
 */
static int io_main(int argc, char **argv)
{
	char why[256] = "";
	uint8_t cdb[6] = { 0x12, 0, 0, 0, 36, 0 }, *d;
	struct sres s;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: client io NODE FABRIC WWPN [PREFIX]\n");
		return 2;
	}
	node = argv[0];
	fabric = argv[1];
	wwpn = argv[2];
	/* The result names' prefix: who built the target. */
	name_prefix = argc > 3 ? argv[3] : "takeover-";
	fd = scsi_dev_open(node, NULL, why, sizeof(why));
	result(fd >= 0, "device-setup", "%s", why);
	if (fd < 0)
		goto out;
	scsi_fd = fd;
	expect("set-endpoint", set_endpoint(fd, wwpn, "set-endpoint"), 0);
	result(disk_add(1, 0) && disks[0].bytes >= 2 * NSLOT * WIN,
	       "lun-answers", "%u LUNs, %llu bytes", ndisks,
	       (unsigned long long)disks[0].bytes);
	if (!ndisks)
		goto out;
	d = buf_alloc(36);
	scsi_cmd(1, 0, cdb, 6, gpa(d), 36, true, &s);
	result(good(&s) && d[0] == 0, "inquiry", "%s", sres_str(&s));
	engine_strict_run("io", 2, 150, 1, 71, 300);
	expect("clear-endpoint", clear_endpoint(fd, wwpn, "clear-endpoint"), 0);
	result(close(fd) == 0, "close", "%s", strerror(errno));
out:
	printf("host client: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	unsigned int k;
	uint64_t f = 0;
	int fd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	if (argc > 1 && !strcmp(argv[1], "scsi"))
		return scsi_main(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "hold"))
		return hold_main(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "io"))
		return io_main(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "memcg"))
		return memcg_main(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "cpuset"))
		return cpuset_main(argc - 2, argv + 2);
	/* client workers NODE: the worker ioctls alone (tests/host/limits-inside.sh). */
	if (argc > 2 && !strcmp(argv[1], "workers")) {
		node = argv[2];
		test_workers();
		printf("host client: %d passed, %d failed\n", passed, failed);
		return failed ? 1 : 0;
	}
	if (argc > 1)
		node = argv[1];
	fd = open(node, O_RDWR | O_CLOEXEC);
	result(fd >= 0, "open", "%s: %s", node, strerror(errno));
	if (fd < 0)
		return 1;

	test_before_owner(fd);
	test_unknown_ioctls(fd);
	test_owner(fd);
	test_workers();
	test_features(fd);
	test_mem_table(fd);
	test_vring_config(fd);
	test_log_ioctls(fd);
	test_scsi_ioctls(fd);

	/*
	 * Ring features on for the ring tests, except NOTIFY_ON_EMPTY (no
	 * Linux driver acks it; it would defeat call suppression), which
	 * test_no_event_idx() covers.
	 */
	ioctl(fd, VHOST_GET_FEATURES, &f);
	f &= ~(1ull << VIRTIO_F_NOTIFY_ON_EMPTY);
	expect("set-features-all", ioctl(fd, VHOST_SET_FEATURES, &f), 0);
	test_ctrl_queue(fd);
	test_request_queue(fd);
	for (k = 0; k < BAD_KINDS; k++)
		test_bad_ring(fd, k);
	test_bad_ring_recovery(fd);
	test_gpa_wrap(fd);
	test_stress(fd);
	test_unknown_ioctls(fd);	/* still ENOTTY with rings running */

	/* Stop every ring (the feature change needs it), then no EVENT_IDX. */
	for (k = 0; k < NVQS; k++)
		vring_state(fd, VHOST_GET_VRING_BASE, k, 0);
	test_no_event_idx(fd);
	test_reset_owner(fd);

	/* Close with rings running and kicks pending. */
	cvq_publish(&vqs[3], cvq_cmd(&vqs[3], &(struct virtio_scsi_cmd_resp *){ 0 }, false));
	cvq_kick(&vqs[3]);
	result(close(fd) == 0, "close-with-running-rings", "%s",
	       strerror(errno));
	test_owner_exit();

	printf("host client: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
