// SPDX-License-Identifier: GPL-2.0
/*
 * Single-threaded unit tests of everything in common/sqcq_uapi.h: wire
 * layout, index arithmetic, setup-request and area-header validation, area
 * initialisation, status strings and the NEED_WAKEUP helpers' semantics.
 * The two-thread handshake stress test is in test_stress.c.
 */
#include "../../common/sqcq_uapi.h"
#include "../../common/sqcq_poll.h"
#include "t.h"

#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Layout                                                              */
/* ------------------------------------------------------------------ */

TEST(constants)
{
	__le32 m = cpu_to_le32(SQCQ_MAGIC);

	/* "SQCQ" as bytes in memory. */
	CHECK(memcmp(&m, "SQCQ", 4) == 0);
	CHECK_EQ(SQCQ_VERSION, 1);
	CHECK_EQ(SQCQ_LINE_SIZE, 64);
	CHECK_EQ(SQCQ_AREA_ALIGN, 4096);
	CHECK_EQ(SQCQ_MAX_QUEUES, 1024);
	/* Vendor subtypes must not collide with the spec's 0..7. */
	CHECK(SQCQ_TMF_SUBTYPE_SETUP > 7);
	CHECK(SQCQ_TMF_SUBTYPE_TEARDOWN > 7);
	CHECK(SQCQ_TMF_SUBTYPE_SETUP != SQCQ_TMF_SUBTYPE_TEARDOWN);
	/* virtio-scsi spec values. */
	CHECK_EQ(SQCQ_VIRTIO_SCSI_T_TMF, 0);
	CHECK_EQ(SQCQ_VIRTIO_SCSI_S_FUNCTION_COMPLETE, 0);
	CHECK_EQ(SQCQ_VIRTIO_SCSI_S_BAD_TARGET, 3);
	CHECK_EQ(SQCQ_VIRTIO_SCSI_S_FUNCTION_SUCCEEDED, 10);
	CHECK_EQ(SQCQ_VIRTIO_SCSI_S_FUNCTION_REJECTED, 11);
	CHECK_EQ(SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE, 108);
	/* Flag bits are distinct single bits. */
	CHECK_EQ(SQCQ_SQ_F_NEED_WAKEUP & SQCQ_SQ_F_STOPPED, 0);
	CHECK_EQ(SQCQ_CQ_F_NEED_WAKEUP & SQCQ_CQ_F_STOPPED, 0);
	CHECK_EQ(SQCQ_F_SQ_POLL & SQCQ_F_CQ_POLL, 0);
	CHECK_EQ(SQCQ_F_ALL, SQCQ_F_SQ_POLL | SQCQ_F_CQ_POLL);
	CHECK(SQCQ_SQ_F_NEED_WAKEUP <= 0xffff && SQCQ_SQ_F_STOPPED <= 0xffff);
	CHECK(SQCQ_CQ_F_NEED_WAKEUP <= 0xffff && SQCQ_CQ_F_STOPPED <= 0xffff);
}

TEST(layout_structs)
{
	/* Area header line. */
	CHECK_EQ(sizeof(struct sqcq_area_hdr), 64);
	CHECK_EQ(offsetof(struct sqcq_area_hdr, magic), 0);
	CHECK_EQ(offsetof(struct sqcq_area_hdr, version), 4);
	CHECK_EQ(offsetof(struct sqcq_area_hdr, nqueues), 6);
	CHECK_EQ(offsetof(struct sqcq_area_hdr, line_size), 8);
	CHECK_EQ(offsetof(struct sqcq_area_hdr, reserved0), 10);
	CHECK_EQ(offsetof(struct sqcq_area_hdr, reserved), 12);

	/* Doorbells. */
	CHECK_EQ(sizeof(struct sqcq_sq), 4);
	CHECK_EQ(offsetof(struct sqcq_sq, idx), 0);
	CHECK_EQ(offsetof(struct sqcq_sq, flags), 2);
	CHECK_EQ(sizeof(struct sqcq_cq), 4);
	CHECK_EQ(offsetof(struct sqcq_cq, idx), 0);
	CHECK_EQ(offsetof(struct sqcq_cq, flags), 2);

	/* Lines. */
	CHECK_EQ(sizeof(struct sqcq_sq_line), SQCQ_LINE_SIZE);
	CHECK_EQ(sizeof(struct sqcq_cq_line), SQCQ_LINE_SIZE);
	CHECK_EQ(_Alignof(struct sqcq_sq_line), 64);
	CHECK_EQ(_Alignof(struct sqcq_cq_line), 64);
	CHECK_EQ(_Alignof(struct sqcq_area), 64);
	CHECK_EQ(offsetof(struct sqcq_sq_line, sq), 0);
	CHECK_EQ(offsetof(struct sqcq_cq_line, cq), 0);
	CHECK_EQ(sizeof(struct sqcq_queue_lines), 128);
	CHECK_EQ(SQCQ_QUEUE_BYTES, 128);
	CHECK_EQ(offsetof(struct sqcq_queue_lines, sq_line), 0);
	CHECK_EQ(offsetof(struct sqcq_queue_lines, cq_line), 64);
	CHECK_EQ(SQCQ_AREA_HDR_BYTES, 64);
	CHECK_EQ(offsetof(struct sqcq_area, hdr), 0);
	CHECK_EQ(offsetof(struct sqcq_area, q), 64);
	CHECK_EQ(sizeof(struct sqcq_area), 64);

	/* Control-queue exchange. */
	CHECK_EQ(sizeof(struct sqcq_tmf_req), 24);
	CHECK_EQ(offsetof(struct sqcq_tmf_req, type), 0);
	CHECK_EQ(offsetof(struct sqcq_tmf_req, subtype), 4);
	CHECK_EQ(offsetof(struct sqcq_tmf_req, lun), 8);
	CHECK_EQ(offsetof(struct sqcq_tmf_req, tag), 16);

	CHECK_EQ(sizeof(struct sqcq_setup_req), 64);
	CHECK_EQ(offsetof(struct sqcq_setup_req, magic), 0);
	CHECK_EQ(offsetof(struct sqcq_setup_req, version), 4);
	CHECK_EQ(offsetof(struct sqcq_setup_req, nqueues), 6);
	CHECK_EQ(offsetof(struct sqcq_setup_req, area_gpa), 8);
	CHECK_EQ(offsetof(struct sqcq_setup_req, area_len), 16);
	CHECK_EQ(offsetof(struct sqcq_setup_req, flags), 20);
	CHECK_EQ(offsetof(struct sqcq_setup_req, poll_idle_us), 24);
	CHECK_EQ(offsetof(struct sqcq_setup_req, reserved), 28);

	CHECK_EQ(sizeof(struct sqcq_setup_resp), 32);
	CHECK_EQ(offsetof(struct sqcq_setup_resp, magic), 0);
	CHECK_EQ(offsetof(struct sqcq_setup_resp, version), 4);
	CHECK_EQ(offsetof(struct sqcq_setup_resp, status), 6);
	CHECK_EQ(offsetof(struct sqcq_setup_resp, nqueues), 8);
	CHECK_EQ(offsetof(struct sqcq_setup_resp, nthreads), 10);
	CHECK_EQ(offsetof(struct sqcq_setup_resp, flags), 12);
	CHECK_EQ(offsetof(struct sqcq_setup_resp, poll_idle_us), 16);
	CHECK_EQ(offsetof(struct sqcq_setup_resp, reserved), 20);

	CHECK_EQ(offsetof(struct sqcq_setup_in, response), 0);
	CHECK_EQ(offsetof(struct sqcq_setup_in, resp), 8);
	CHECK_EQ(sizeof(struct sqcq_setup_in), 128);
	/* docs/protocol.md section 3: the first device-writable buffer must hold a whole
	 * virtio_scsi_cmd_resp a stock host may write there.
	 */
	CHECK(sizeof(struct sqcq_setup_in) >= SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE);
}

/* Lay out an area for nq queues in an exactly sized, page-aligned buffer
 * (so ASan catches any access past sqcq_area_bytes(nq)) and check every line.
 */
static void check_area_lines(__u32 nq)
{
	__u32 bytes = sqcq_area_bytes(nq);
	size_t alloc = (bytes + SQCQ_AREA_ALIGN - 1) & ~(size_t)(SQCQ_AREA_ALIGN - 1);
	unsigned char *buf = aligned_alloc(SQCQ_AREA_ALIGN, alloc);
	struct sqcq_area *a = (struct sqcq_area *)buf;
	unsigned char *lines_used;
	__u32 i;

	CHECK(buf != NULL);
	if (!buf)
		return;
	CHECK_EQ(bytes, SQCQ_AREA_HDR_BYTES + nq * 2 * SQCQ_LINE_SIZE);
	CHECK_EQ(bytes % SQCQ_LINE_SIZE, 0);
	lines_used = calloc(bytes / SQCQ_LINE_SIZE, 1);
	CHECK(lines_used != NULL);
	if (!lines_used) {
		free(buf);
		return;
	}
	lines_used[0] = 1;	/* header */
	for (i = 0; i < nq; i++) {
		size_t sq = (size_t)((unsigned char *)&a->q[i].sq_line.sq - buf);
		size_t cq = (size_t)((unsigned char *)&a->q[i].cq_line.cq - buf);

		if (sq != sqcq_sq_offset(i) || cq != sqcq_cq_offset(i) ||
		    sq % SQCQ_LINE_SIZE || cq % SQCQ_LINE_SIZE ||
		    cq + SQCQ_LINE_SIZE > bytes ||
		    lines_used[sq / SQCQ_LINE_SIZE] ||
		    lines_used[cq / SQCQ_LINE_SIZE]) {
			CHECK_EQ(sq, sqcq_sq_offset(i));
			CHECK_EQ(cq, sqcq_cq_offset(i));
			CHECK(sq % SQCQ_LINE_SIZE == 0);
			CHECK(cq % SQCQ_LINE_SIZE == 0);
			CHECK(cq + SQCQ_LINE_SIZE <= bytes);
			CHECK(!lines_used[sq / SQCQ_LINE_SIZE]);
			CHECK(!lines_used[cq / SQCQ_LINE_SIZE]);
			break;
		}
		lines_used[sq / SQCQ_LINE_SIZE] = 1;
		lines_used[cq / SQCQ_LINE_SIZE] = 1;
		/* idx and flags sit together at the start of their line. */
		CHECK_EQ((size_t)((unsigned char *)&a->q[i].sq_line.sq.flags - buf),
			 sq + 2);
		CHECK_EQ((size_t)((unsigned char *)&a->q[i].cq_line.cq.flags - buf),
			 cq + 2);
	}
	/* Every line is used exactly once: header + 2 per queue, no gap. */
	for (i = 0; i < bytes / SQCQ_LINE_SIZE; i++)
		if (!lines_used[i]) {
			CHECK(lines_used[i]);
			break;
		}
	/* The last queue's CQ line ends exactly at the area's end. */
	CHECK_EQ(sqcq_cq_offset(nq - 1) + SQCQ_LINE_SIZE, bytes);
	free(lines_used);
	free(buf);
}

TEST(layout_area)
{
	CHECK_EQ(sqcq_area_bytes(0), 64);
	CHECK_EQ(sqcq_area_bytes(1), 192);
	CHECK_EQ(sqcq_area_bytes(2), 320);
	CHECK_EQ(sqcq_area_bytes(SQCQ_MAX_QUEUES), 131136);
	CHECK_EQ(sqcq_sq_offset(0), 64);
	CHECK_EQ(sqcq_cq_offset(0), 128);
	CHECK_EQ(sqcq_sq_offset(1), 192);
	CHECK_EQ(sqcq_cq_offset(1), 256);
	CHECK_EQ(sqcq_sq_offset(SQCQ_MAX_QUEUES - 1), 131008);
	CHECK_EQ(sqcq_cq_offset(SQCQ_MAX_QUEUES - 1), 131072);
	/* The largest valid area, in whole pages. */
	CHECK_EQ(SQCQ_AREA_MAX_BYTES, 135168);
	CHECK_EQ(SQCQ_AREA_MAX_BYTES % SQCQ_AREA_ALIGN, 0);
	CHECK(SQCQ_AREA_MAX_BYTES >= sqcq_area_bytes(SQCQ_MAX_QUEUES));
	CHECK(SQCQ_AREA_MAX_BYTES - sqcq_area_bytes(SQCQ_MAX_QUEUES) <
	      SQCQ_AREA_ALIGN);
	check_area_lines(1);
	check_area_lines(2);
	check_area_lines(SQCQ_MAX_QUEUES);
}

/* ------------------------------------------------------------------ */
/* Index arithmetic                                                    */
/* ------------------------------------------------------------------ */

TEST(idx_pending)
{
	static const __u16 olds[] = { 0, 1, 255, 256, 32767, 32768,
				      65000, 65280, 65534, 65535 };
	unsigned int i, d;

	CHECK_EQ(sqcq_idx_pending(0, 0), 0);
	CHECK_EQ(sqcq_idx_pending(5, 2), 3);
	CHECK_EQ(sqcq_idx_pending(65535, 65535), 0);
	/* Across the wrap at 65535. */
	CHECK_EQ(sqcq_idx_pending(0, 65535), 1);
	CHECK_EQ(sqcq_idx_pending(2, 65534), 4);
	CHECK_EQ(sqcq_idx_pending(100, 65500), 136);
	CHECK_EQ(sqcq_idx_pending(65535, 0), 65535);
	/* Exhaustive over distances for a set of start points. */
	for (i = 0; i < sizeof(olds) / sizeof(olds[0]); i++)
		for (d = 0; d < 65536; d++) {
			__u16 n = (__u16)(olds[i] + d);

			if (sqcq_idx_pending(n, olds[i]) != d) {
				CHECK_EQ(sqcq_idx_pending(n, olds[i]), d);
				return;
			}
		}
}

TEST(idx_advance_ok)
{
	static const __u16 rings[] = { 1, 2, 128, 256, 1024, 32768 };
	static const __u16 olds[] = { 0, 1, 32768, 65535 - 300, 65534, 65535 };
	unsigned int r, o;

	CHECK(sqcq_idx_advance_ok(0, 0, 256));
	CHECK(sqcq_idx_advance_ok(256, 0, 256));
	CHECK(!sqcq_idx_advance_ok(257, 0, 256));
	/* Across the wrap: 65535 -> 255 is 256 entries. */
	CHECK(sqcq_idx_advance_ok(255, 65535, 256));
	CHECK(!sqcq_idx_advance_ok(256, 65535, 256));
	CHECK(sqcq_idx_advance_ok(0, 65280, 256));
	CHECK(!sqcq_idx_advance_ok(1, 65280, 256));
	/* Going backwards is a huge forward jump mod 2^16: rejected. */
	CHECK(!sqcq_idx_advance_ok(9, 10, 256));
	CHECK(!sqcq_idx_advance_ok(65535, 0, 256));
	CHECK(!sqcq_idx_advance_ok(65535, 0, 32768));
	for (r = 0; r < sizeof(rings) / sizeof(rings[0]); r++)
		for (o = 0; o < sizeof(olds) / sizeof(olds[0]); o++) {
			__u16 old = olds[o], num = rings[r];

			CHECK(sqcq_idx_advance_ok(old, old, num));
			CHECK(sqcq_idx_advance_ok((__u16)(old + 1), old, num));
			CHECK(sqcq_idx_advance_ok((__u16)(old + num), old, num));
			CHECK(!sqcq_idx_advance_ok((__u16)(old + num + 1), old, num));
			CHECK(!sqcq_idx_advance_ok((__u16)(old - 1), old, num));
		}
}

/* ------------------------------------------------------------------ */
/* Setup request validation                                            */
/* ------------------------------------------------------------------ */

#define DEV_QUEUES 4u	/* request queues of the pretend device */

static struct sqcq_setup_req valid_req(__u16 nq)
{
	struct sqcq_setup_req r;

	memset(&r, 0, sizeof(r));
	r.magic = cpu_to_le32(SQCQ_MAGIC);
	r.version = cpu_to_le16(SQCQ_VERSION);
	r.nqueues = cpu_to_le16(nq);
	r.area_gpa = cpu_to_le64(0x12345000ull);
	r.area_len = cpu_to_le32(4096);
	r.flags = cpu_to_le32(SQCQ_F_ALL);
	r.poll_idle_us = cpu_to_le32(50);
	return r;
}

TEST(setup_req_valid)
{
	struct sqcq_setup_req r = valid_req(1);
	__u32 f;

	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_OK);
	r = valid_req(DEV_QUEUES);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_OK);
	/* Every non-empty subset of the known flags. */
	for (f = 1; f <= SQCQ_F_ALL; f++) {
		r = valid_req(1);
		r.flags = cpu_to_le32(f);
		CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_OK);
	}
	/* Exactly the bytes needed, and the largest length allowed. */
	r = valid_req(3);
	r.area_len = cpu_to_le32(sqcq_area_bytes(3));
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_OK);
	r.area_len = cpu_to_le32(SQCQ_AREA_MAX_BYTES);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_OK);
	/* SQCQ_MAX_QUEUES queues on a device that has them. */
	r = valid_req(SQCQ_MAX_QUEUES);
	r.area_len = cpu_to_le32(sqcq_area_bytes(SQCQ_MAX_QUEUES));
	CHECK_EQ(sqcq_check_setup_req(&r, SQCQ_MAX_QUEUES), SQCQ_S_OK);
	r.area_len = cpu_to_le32(SQCQ_AREA_MAX_BYTES);
	CHECK_EQ(sqcq_check_setup_req(&r, 65535), SQCQ_S_OK);
	/* gpa 0 is aligned; a high gpa whose area does not wrap is fine. */
	r = valid_req(1);
	r.area_gpa = 0;
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_OK);
	r.area_gpa = cpu_to_le64(0ull - SQCQ_AREA_MAX_BYTES - SQCQ_AREA_ALIGN);
	r.area_len = cpu_to_le32(SQCQ_AREA_MAX_BYTES);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_OK);
	r.area_gpa = cpu_to_le64(0xfffffffffffff000ull);
	r.area_len = cpu_to_le32(sqcq_area_bytes(1));
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_OK);
	/* poll_idle_us is informational: any value. */
	r = valid_req(1);
	r.poll_idle_us = cpu_to_le32(0xffffffffu);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_OK);
}

TEST(setup_req_bad_magic)
{
	struct sqcq_setup_req r = valid_req(1);

	r.magic = 0;
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_MAGIC);
	/* Byte-swapped magic (a big-endian writer) is not accepted. */
	r.magic = cpu_to_le32(0x53514351u);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_MAGIC);
	r.magic = cpu_to_le32(SQCQ_MAGIC ^ 1);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_MAGIC);
	/* Magic is checked first, whatever else is wrong. */
	memset(&r, 0xff, sizeof(r));
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_MAGIC);
}

TEST(setup_req_bad_version)
{
	struct sqcq_setup_req r = valid_req(1);

	r.version = 0;
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_VERSION);
	r.version = cpu_to_le16(SQCQ_VERSION + 1);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_VERSION);
	r.version = cpu_to_le16(0x0100);	/* byte-swapped 1 */
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_VERSION);
}

TEST(setup_req_reserved)
{
	unsigned int i;

	for (i = 0; i < sizeof(((struct sqcq_setup_req *)0)->reserved) /
			sizeof(__le32); i++) {
		struct sqcq_setup_req r = valid_req(1);

		r.reserved[i] = cpu_to_le32(1u << (i % 32));
		CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES),
			 SQCQ_S_BAD_REQUEST);
		r.reserved[i] = cpu_to_le32(0x80000000u);
		CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES),
			 SQCQ_S_BAD_REQUEST);
	}
}

TEST(setup_req_bad_flags)
{
	struct sqcq_setup_req r = valid_req(1);
	unsigned int b;

	for (b = 0; b < 32; b++) {
		if ((1u << b) & SQCQ_F_ALL)
			continue;
		r.flags = cpu_to_le32(SQCQ_F_ALL | (1u << b));
		CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_FLAGS);
		r.flags = cpu_to_le32(1u << b);
		CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_FLAGS);
	}
	/* Asking for no polling at all is not a setup. */
	r.flags = 0;
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_FLAGS);
}

TEST(setup_req_bad_queues)
{
	struct sqcq_setup_req r = valid_req(0);

	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_QUEUES);
	/* More than the device has. */
	r = valid_req(DEV_QUEUES + 1);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_QUEUES);
	/* More than SQCQ_MAX_QUEUES, even on a device claiming more. */
	r = valid_req(SQCQ_MAX_QUEUES + 1);
	r.area_len = cpu_to_le32(SQCQ_AREA_MAX_BYTES);
	CHECK_EQ(sqcq_check_setup_req(&r, 65535), SQCQ_S_BAD_QUEUES);
	r = valid_req(0xffff);
	CHECK_EQ(sqcq_check_setup_req(&r, 0xffffffffu), SQCQ_S_BAD_QUEUES);
	/* A device with no request queues accepts nothing. */
	r = valid_req(1);
	CHECK_EQ(sqcq_check_setup_req(&r, 0), SQCQ_S_BAD_QUEUES);
}

TEST(setup_req_bad_align)
{
	static const __u64 gpas[] = { 1, 8, 64, 0x800, 0xfff, 0x12345008ull,
				      0xffffffffffffffffull };
	unsigned int i;

	for (i = 0; i < sizeof(gpas) / sizeof(gpas[0]); i++) {
		struct sqcq_setup_req r = valid_req(1);

		r.area_gpa = cpu_to_le64(gpas[i]);
		CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_ALIGN);
	}
}

TEST(setup_req_bad_len)
{
	struct sqcq_setup_req r = valid_req(1);

	r.area_len = 0;
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_LEN);
	r.area_len = cpu_to_le32(sqcq_area_bytes(1) - 1);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_LEN);
	/* Long enough for 1 queue but not for the 4 asked for. */
	r = valid_req(4);
	r.area_len = cpu_to_le32(sqcq_area_bytes(3));
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_LEN);
	r.area_len = cpu_to_le32(sqcq_area_bytes(4) - 1);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_LEN);
	/* Overlong. */
	r = valid_req(1);
	r.area_len = cpu_to_le32(SQCQ_AREA_MAX_BYTES + 1);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_LEN);
	r.area_len = cpu_to_le32(SQCQ_AREA_MAX_BYTES + SQCQ_AREA_ALIGN);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_LEN);
	r.area_len = cpu_to_le32(0xffffffffu);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_LEN);
}

TEST(setup_req_gpa_overflow)
{
	struct sqcq_setup_req r = valid_req(1);

	/* Aligned, valid length, but gpa + len wraps past 2^64. */
	r.area_gpa = cpu_to_le64(0xfffffffffffff000ull);
	r.area_len = cpu_to_le32(8192);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_ADDR);
	r.area_gpa = cpu_to_le64(0ull - SQCQ_AREA_MAX_BYTES + SQCQ_AREA_ALIGN);
	r.area_len = cpu_to_le32(SQCQ_AREA_MAX_BYTES);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_ADDR);
	/* An area ending exactly at 2^64: end is not representable, and the
	 * header rejects it as an overflow (conservative, see the report).
	 */
	r.area_gpa = cpu_to_le64(0xfffffffffffff000ull);
	r.area_len = cpu_to_le32(4096);
	CHECK_EQ(sqcq_check_setup_req(&r, DEV_QUEUES), SQCQ_S_BAD_ADDR);
}

TEST(setup_req_status_reachable)
{
	/* Every status sqcq_check_setup_req() can return, each reached by a
	 * request that differs from a valid one in one field only.
	 */
	unsigned int seen = 0, s;
	struct sqcq_setup_req r;

#define REACH(mutate) do {						\
		r = valid_req(1);					\
		mutate;							\
		s = sqcq_check_setup_req(&r, DEV_QUEUES);		\
		CHECK(s < SQCQ_S_MAX);					\
		seen |= 1u << s;					\
	} while (0)
	REACH((void)0);
	REACH(r.magic = 0);
	REACH(r.version = 0);
	REACH(r.reserved[8] = 1);
	REACH(r.flags = cpu_to_le32(4));
	REACH(r.nqueues = 0);
	REACH(r.area_gpa = cpu_to_le64(0x10));
	REACH(r.area_len = cpu_to_le32(1));
	REACH(r.area_gpa = cpu_to_le64(~0xfffull));
#undef REACH
	CHECK_EQ(seen, (1u << SQCQ_S_OK) | (1u << SQCQ_S_BAD_MAGIC) |
		 (1u << SQCQ_S_BAD_VERSION) | (1u << SQCQ_S_BAD_REQUEST) |
		 (1u << SQCQ_S_BAD_FLAGS) | (1u << SQCQ_S_BAD_QUEUES) |
		 (1u << SQCQ_S_BAD_ALIGN) | (1u << SQCQ_S_BAD_LEN) |
		 (1u << SQCQ_S_BAD_ADDR));
}

/* ------------------------------------------------------------------ */
/* Area header and initialisation                                      */
/* ------------------------------------------------------------------ */

static struct sqcq_area *new_area(__u32 nq, size_t *bytes)
{
	/* Exactly sized, so ASan flags any write past the area. */
	size_t b = sqcq_area_bytes(nq);
	struct sqcq_area *a = aligned_alloc(64, b);

	if (a)
		memset(a, 0, b);
	*bytes = b;
	return a;
}

TEST(area_init)
{
	static const __u32 nqs[] = { 1, 2, SQCQ_MAX_QUEUES };
	unsigned int k;

	for (k = 0; k < sizeof(nqs) / sizeof(nqs[0]); k++) {
		size_t bytes, off;
		struct sqcq_area *a = new_area(nqs[k], &bytes);
		const unsigned char *p = (const unsigned char *)a;
		__u32 i, bad = 0;

		CHECK(a != NULL);
		if (!a)
			return;
		sqcq_area_init(a, (__u16)nqs[k]);
		CHECK_EQ(le32_to_cpu(a->hdr.magic), SQCQ_MAGIC);
		CHECK(memcmp(p, "SQCQ", 4) == 0);
		CHECK_EQ(le16_to_cpu(a->hdr.version), SQCQ_VERSION);
		CHECK_EQ(le16_to_cpu(a->hdr.nqueues), nqs[k]);
		CHECK_EQ(le16_to_cpu(a->hdr.line_size), SQCQ_LINE_SIZE);
		CHECK_EQ(a->hdr.reserved0, 0);
		for (i = 0; i < nqs[k]; i++) {
			const struct sqcq_sq *sq = &a->q[i].sq_line.sq;
			const struct sqcq_cq *cq = &a->q[i].cq_line.cq;

			/* Both NEED_WAKEUP bits set: classic until a poller
			 * clears its own bit.
			 */
			if (le16_to_cpu(sq->idx) != 0 || le16_to_cpu(cq->idx) != 0 ||
			    le16_to_cpu(sq->flags) != SQCQ_SQ_F_NEED_WAKEUP ||
			    le16_to_cpu(cq->flags) != SQCQ_CQ_F_NEED_WAKEUP)
				bad++;
		}
		CHECK_EQ(bad, 0);
		/* Nothing else written: all bytes outside the header fields
		 * and the doorbells are still zero.
		 */
		for (off = 12; off < 64; off++)
			if (p[off])
				bad++;
		for (i = 0; i < nqs[k]; i++) {
			for (off = sqcq_sq_offset(i) + 4;
			     off < sqcq_sq_offset(i) + SQCQ_LINE_SIZE; off++)
				if (p[off])
					bad++;
			for (off = sqcq_cq_offset(i) + 4;
			     off < sqcq_cq_offset(i) + SQCQ_LINE_SIZE; off++)
				if (p[off])
					bad++;
		}
		CHECK_EQ(bad, 0);
		(void)bytes;
		free(a);
	}
}

TEST(area_hdr_check)
{
	size_t bytes;
	struct sqcq_area *a = new_area(2, &bytes);
	struct sqcq_setup_req r = valid_req(2);
	struct sqcq_area_hdr h;

	CHECK(a != NULL);
	if (!a)
		return;
	sqcq_area_init(a, 2);
	CHECK_EQ(sqcq_check_area_hdr(&a->hdr, &r), SQCQ_S_OK);

	h = a->hdr;
	h.magic = cpu_to_le32(0x51435154u);
	CHECK_EQ(sqcq_check_area_hdr(&h, &r), SQCQ_S_BAD_MAGIC);
	h = a->hdr;
	h.magic = 0;
	CHECK_EQ(sqcq_check_area_hdr(&h, &r), SQCQ_S_BAD_MAGIC);

	h = a->hdr;
	h.version = cpu_to_le16(2);
	CHECK_EQ(sqcq_check_area_hdr(&h, &r), SQCQ_S_BAD_VERSION);

	h = a->hdr;
	h.line_size = cpu_to_le16(128);
	CHECK_EQ(sqcq_check_area_hdr(&h, &r), SQCQ_S_BAD_LEN);
	h.line_size = 0;
	CHECK_EQ(sqcq_check_area_hdr(&h, &r), SQCQ_S_BAD_LEN);

	/* Header and request disagree on the queue count. */
	h = a->hdr;
	h.nqueues = cpu_to_le16(1);
	CHECK_EQ(sqcq_check_area_hdr(&h, &r), SQCQ_S_BAD_QUEUES);
	r = valid_req(3);
	CHECK_EQ(sqcq_check_area_hdr(&a->hdr, &r), SQCQ_S_BAD_QUEUES);

	/* A zeroed (never initialised) area is refused. */
	memset(&h, 0, sizeof(h));
	r = valid_req(2);
	CHECK_EQ(sqcq_check_area_hdr(&h, &r), SQCQ_S_BAD_MAGIC);
	free(a);
}

TEST(status_str)
{
	unsigned int s, t;

	for (s = 0; s < SQCQ_S_MAX; s++) {
		const char *str = sqcq_status_str(s);

		CHECK(str != NULL);
		if (!str)
			continue;
		CHECK(str[0] != '\0');
		CHECK(strcmp(str, "unknown status") != 0);
		for (t = 0; t < s; t++)
			CHECK(strcmp(str, sqcq_status_str(t)) != 0);
	}
	CHECK_STR_EQ(sqcq_status_str(SQCQ_S_OK), "ok");
	CHECK_STR_EQ(sqcq_status_str(SQCQ_S_MAX), "unknown status");
	CHECK_STR_EQ(sqcq_status_str(1000), "unknown status");
	CHECK_STR_EQ(sqcq_status_str(0xffffffffu), "unknown status");
	CHECK_EQ(SQCQ_S_MAX, 13);
}

/* ------------------------------------------------------------------ */
/* Handshake helpers, single-threaded semantics                        */
/* ------------------------------------------------------------------ */

static __u16 rd(const __le16 *p)
{
	return le16_to_cpu(*p);
}

TEST(publish)
{
	struct sqcq_sq sq = { 0, 0 };
	struct sqcq_cq cq = { 0, 0 };
	__u16 flags[] = { 0, SQCQ_SQ_F_NEED_WAKEUP, SQCQ_SQ_F_STOPPED,
			  SQCQ_SQ_F_NEED_WAKEUP | SQCQ_SQ_F_STOPPED, 0xfffe,
			  0xffff };
	unsigned int i;

	/* Returns true iff the peer's NEED_WAKEUP bit is set; other bits
	 * (STOPPED alone, unknown bits) do not ask for a notification.
	 */
	for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		__u16 v = (__u16)(0x1234 + i);

		sq.flags = cpu_to_le16(flags[i]);
		CHECK_EQ(sqcq_publish(&sq.idx, v, &sq.flags,
				      SQCQ_SQ_F_NEED_WAKEUP),
			 !!(flags[i] & SQCQ_SQ_F_NEED_WAKEUP));
		CHECK_EQ(rd(&sq.idx), v);
		/* The producer never writes the peer's flags. */
		CHECK_EQ(rd(&sq.flags), flags[i]);
	}
	/* Little-endian on the wire. */
	sq.flags = 0;
	sqcq_publish(&sq.idx, 0xabcd, &sq.flags, SQCQ_SQ_F_NEED_WAKEUP);
	CHECK_EQ(((unsigned char *)&sq.idx)[0], 0xcd);
	CHECK_EQ(((unsigned char *)&sq.idx)[1], 0xab);
	/* Index wraps. */
	sqcq_publish(&sq.idx, 65535, &sq.flags, SQCQ_SQ_F_NEED_WAKEUP);
	CHECK_EQ(rd(&sq.idx), 65535);
	sqcq_publish(&sq.idx, 0, &sq.flags, SQCQ_SQ_F_NEED_WAKEUP);
	CHECK_EQ(rd(&sq.idx), 0);
	/* CQ direction: the host publishes, the guest's bit decides. */
	cq.flags = cpu_to_le16(SQCQ_CQ_F_NEED_WAKEUP);
	CHECK(sqcq_publish(&cq.idx, 7, &cq.flags, SQCQ_CQ_F_NEED_WAKEUP));
	CHECK_EQ(rd(&cq.idx), 7);
	cq.flags = 0;
	CHECK(!sqcq_publish(&cq.idx, 8, &cq.flags, SQCQ_CQ_F_NEED_WAKEUP));
	CHECK_EQ(rd(&cq.idx), 8);
}

TEST(prepare_sleep)
{
	struct sqcq_sq sq;
	const __u16 need = SQCQ_SQ_F_NEED_WAKEUP;

	/* Index has not moved: may sleep, flag left set. */
	sq.idx = cpu_to_le16(42);
	sq.flags = 0;
	CHECK(sqcq_prepare_sleep(&sq.flags, need, &sq.idx, 42));
	CHECK_EQ(rd(&sq.flags), need);
	CHECK_EQ(rd(&sq.idx), 42);
	/* Already set: stays set. */
	CHECK(sqcq_prepare_sleep(&sq.flags, need, &sq.idx, 42));
	CHECK_EQ(rd(&sq.flags), need);

	/* Index moved: keep polling, flag cleared again. */
	sq.flags = 0;
	CHECK(!sqcq_prepare_sleep(&sq.flags, need, &sq.idx, 41));
	CHECK_EQ(rd(&sq.flags), 0);
	/* ... also when it was set before. */
	sq.flags = cpu_to_le16(need);
	CHECK(!sqcq_prepare_sleep(&sq.flags, need, &sq.idx, 41));
	CHECK_EQ(rd(&sq.flags), 0);
	/* Moved across the wrap. */
	sq.idx = cpu_to_le16(0);
	CHECK(!sqcq_prepare_sleep(&sq.flags, need, &sq.idx, 65535));
	CHECK_EQ(rd(&sq.flags), 0);
	sq.idx = cpu_to_le16(65535);
	CHECK(sqcq_prepare_sleep(&sq.flags, need, &sq.idx, 65535));
	CHECK_EQ(rd(&sq.flags), need);

	/* Other bits of the own flags word are preserved either way. */
	sq.idx = cpu_to_le16(5);
	sq.flags = cpu_to_le16(0x8000);
	CHECK(sqcq_prepare_sleep(&sq.flags, need, &sq.idx, 5));
	CHECK_EQ(rd(&sq.flags), 0x8000 | need);
	sq.flags = cpu_to_le16(0x8000);
	CHECK(!sqcq_prepare_sleep(&sq.flags, need, &sq.idx, 4));
	CHECK_EQ(rd(&sq.flags), 0x8000);
	/* The consumer never writes the index. */
	CHECK_EQ(rd(&sq.idx), 5);

	/* CQ direction. */
	{
		struct sqcq_cq cq = { 0, 0 };

		cq.idx = cpu_to_le16(3);
		CHECK(sqcq_prepare_sleep(&cq.flags, SQCQ_CQ_F_NEED_WAKEUP,
					 &cq.idx, 3));
		CHECK_EQ(rd(&cq.flags), SQCQ_CQ_F_NEED_WAKEUP);
		CHECK(!sqcq_prepare_sleep(&cq.flags, SQCQ_CQ_F_NEED_WAKEUP,
					  &cq.idx, 2));
		CHECK_EQ(rd(&cq.flags), 0);
	}
}

TEST(clear_need_wakeup)
{
	__le16 f = cpu_to_le16(SQCQ_SQ_F_NEED_WAKEUP | SQCQ_SQ_F_STOPPED);

	sqcq_clear_need_wakeup(&f, SQCQ_SQ_F_NEED_WAKEUP);
	CHECK_EQ(rd(&f), SQCQ_SQ_F_STOPPED);
	sqcq_clear_need_wakeup(&f, SQCQ_SQ_F_NEED_WAKEUP);
	CHECK_EQ(rd(&f), SQCQ_SQ_F_STOPPED);
	f = cpu_to_le16(SQCQ_CQ_F_NEED_WAKEUP);
	sqcq_clear_need_wakeup(&f, SQCQ_CQ_F_NEED_WAKEUP);
	CHECK_EQ(rd(&f), 0);
}

TEST(stop_polling)
{
	struct sqcq_sq sq = { 0, 0 };
	struct sqcq_cq cq = { 0, 0 };

	sqcq_stop_polling(&sq.flags, SQCQ_SQ_F_NEED_WAKEUP, SQCQ_SQ_F_STOPPED);
	CHECK_EQ(rd(&sq.flags), SQCQ_SQ_F_NEED_WAKEUP | SQCQ_SQ_F_STOPPED);
	/* Idempotent. */
	sqcq_stop_polling(&sq.flags, SQCQ_SQ_F_NEED_WAKEUP, SQCQ_SQ_F_STOPPED);
	CHECK_EQ(rd(&sq.flags), SQCQ_SQ_F_NEED_WAKEUP | SQCQ_SQ_F_STOPPED);
	/* Other bits preserved. */
	cq.flags = cpu_to_le16(0x4000);
	sqcq_stop_polling(&cq.flags, SQCQ_CQ_F_NEED_WAKEUP, SQCQ_CQ_F_STOPPED);
	CHECK_EQ(rd(&cq.flags),
		 0x4000 | SQCQ_CQ_F_NEED_WAKEUP | SQCQ_CQ_F_STOPPED);
	/* Graceful degradation: the peer now notifies on every publish. */
	CHECK(sqcq_publish(&sq.idx, 1, &sq.flags, SQCQ_SQ_F_NEED_WAKEUP));
	CHECK(sqcq_publish(&sq.idx, 2, &sq.flags, SQCQ_SQ_F_NEED_WAKEUP));
	CHECK(sqcq_publish(&cq.idx, 1, &cq.flags, SQCQ_CQ_F_NEED_WAKEUP));
	CHECK_EQ(rd(&sq.idx), 2);
}

TEST(handshake_sequence)
{
	/* One poller life cycle on a freshly initialised area, single
	 * threaded: classic start, poller clears its bit, producer stops
	 * notifying, poller prepares to sleep, producer notifies again.
	 */
	size_t bytes;
	struct sqcq_area *a = new_area(1, &bytes);
	struct sqcq_sq *sq;
	__u16 seen = 0;

	CHECK(a != NULL);
	if (!a)
		return;
	sqcq_area_init(a, 1);
	sq = &a->q[0].sq_line.sq;
	/* Before any poller runs: every publish notifies (classic). */
	CHECK(sqcq_publish(&sq->idx, 1, &sq->flags, SQCQ_SQ_F_NEED_WAKEUP));
	/* Poller starts. */
	sqcq_clear_need_wakeup(&sq->flags, SQCQ_SQ_F_NEED_WAKEUP);
	CHECK(!sqcq_publish(&sq->idx, 2, &sq->flags, SQCQ_SQ_F_NEED_WAKEUP));
	/* Poller idles but has only seen 1: must not sleep. */
	seen = 1;
	CHECK(!sqcq_prepare_sleep(&sq->flags, SQCQ_SQ_F_NEED_WAKEUP, &sq->idx,
				  seen));
	CHECK(!sqcq_publish(&sq->idx, 3, &sq->flags, SQCQ_SQ_F_NEED_WAKEUP));
	seen = 3;
	CHECK(sqcq_prepare_sleep(&sq->flags, SQCQ_SQ_F_NEED_WAKEUP, &sq->idx,
				 seen));
	/* Asleep: the next publish notifies. */
	CHECK(sqcq_publish(&sq->idx, 4, &sq->flags, SQCQ_SQ_F_NEED_WAKEUP));
	sqcq_clear_need_wakeup(&sq->flags, SQCQ_SQ_F_NEED_WAKEUP);
	CHECK(!sqcq_publish(&sq->idx, 5, &sq->flags, SQCQ_SQ_F_NEED_WAKEUP));
	/* The CQ line of the same queue is untouched by all this. */
	CHECK_EQ(rd(&a->q[0].cq_line.cq.flags), SQCQ_CQ_F_NEED_WAKEUP);
	CHECK_EQ(rd(&a->q[0].cq_line.cq.idx), 0);
	free(a);
}

/* The adaptive idle window (common/sqcq_poll.h), ceiling 1 ms. */
#define CEIL 1000000ULL
#define MIN_W SQCQ_POLL_WINDOW_MIN_NS

TEST(poll_window_rules)
{
	/* Caught inside the window: unchanged. */
	CHECK_EQ(sqcq_poll_window_next(40000, 30000, CEIL), 40000ULL);
	CHECK_EQ(sqcq_poll_window_next(40000, 40000, CEIL), 40000ULL);
	CHECK_EQ(sqcq_poll_window_next(0, 0, CEIL), 0ULL);
	/* Missed, but within the ceiling: doubles, from the minimum. */
	CHECK_EQ(sqcq_poll_window_next(40000, 50000, CEIL), 80000ULL);
	CHECK_EQ(sqcq_poll_window_next(0, 5000, CEIL), MIN_W);
	CHECK_EQ(sqcq_poll_window_next(600000, 900000, CEIL), CEIL);
	CHECK_EQ(sqcq_poll_window_next(CEIL, CEIL, CEIL), CEIL);
	/* Longer than the ceiling: halves, to 0 below the minimum. */
	CHECK_EQ(sqcq_poll_window_next(80000, CEIL + 1, CEIL), 40000ULL);
	CHECK_EQ(sqcq_poll_window_next(MIN_W, 5 * CEIL, CEIL), 0ULL);
	CHECK_EQ(sqcq_poll_window_next(0, 5 * CEIL, CEIL), 0ULL);
	/* A lowered ceiling clamps the window first. */
	CHECK_EQ(sqcq_poll_window_next(CEIL, 100, 50000), 50000ULL);
	CHECK_EQ(sqcq_poll_window_next(CEIL, 60000, 50000), 25000ULL);
	/* Ceiling 0 (poll_idle_us=0): never spin. */
	CHECK_EQ(sqcq_poll_window_next(CEIL, 100, 0), 0ULL);
	CHECK_EQ(sqcq_poll_window_next(0, 0, 0), 0ULL);
}

/* Steady gaps grow the window to cover them, sparse ones shrink it to 0. */
TEST(poll_window_converges)
{
	unsigned long long w = MIN_W, prev;
	int i, steps = 0;

	for (i = 0; i < 100; i++) {
		prev = w;
		w = sqcq_poll_window_next(w, 150000, CEIL);
		if (w != prev)
			steps++;
		CHECK(w <= CEIL);
	}
	/* 10 us doubling to >= 150 us: 160 us after four steps, then stable. */
	CHECK_EQ(w, 160000ULL);
	CHECK_EQ(steps, 4);
	for (i = 0; i < 100; i++)
		w = sqcq_poll_window_next(w, 3 * CEIL, CEIL);
	CHECK_EQ(w, 0ULL);
	/* Gaps beyond the ceiling never make it grow. */
	for (i = 0; i < 10; i++)
		w = sqcq_poll_window_next(w, CEIL + 1, CEIL);
	CHECK_EQ(w, 0ULL);
}

/* Which interrupts wake a sleeping poller (sqcq_poll_wake_pays()). */
TEST(poll_wake_pays)
{
	unsigned long long next = 1;

	/* A window: always, the window unchanged. */
	CHECK(sqcq_poll_wake_pays(40000, 5 * CEIL, CEIL, &next));
	CHECK_EQ(next, 40000ULL);
	/* Window 0, work later than the ceiling: asleep, still 0. */
	CHECK(!sqcq_poll_wake_pays(0, CEIL + 1, CEIL, &next));
	CHECK_EQ(next, 0ULL);
	/* Window 0, work within the ceiling: woken, from the minimum. */
	CHECK(sqcq_poll_wake_pays(0, CEIL, CEIL, &next));
	CHECK_EQ(next, MIN_W);
	CHECK(sqcq_poll_wake_pays(0, 0, CEIL, &next));
	CHECK_EQ(next, MIN_W);
	/* A ceiling below the minimum caps the new window. */
	CHECK(sqcq_poll_wake_pays(0, 100, 5000, &next));
	CHECK_EQ(next, 5000ULL);
	/* Ceiling 0 (poll_idle_us=0): never. */
	CHECK(!sqcq_poll_wake_pays(0, 0, 0, &next));
	CHECK_EQ(next, 0ULL);
	/* Sparse completions keep a poller at 0 asleep; then steady ones
	 * within the ceiling wake it and its window grows again. */
	next = 0;
	for (int i = 0; i < 10; i++)
		CHECK(!sqcq_poll_wake_pays(next, 3 * CEIL, CEIL, &next));
	CHECK(sqcq_poll_wake_pays(next, 150000, CEIL, &next));
	CHECK_EQ(sqcq_poll_window_next(next, 150000, CEIL), 2 * MIN_W);
}

/* The step after a pass (sqcq_poll_decide()), every input combination. */
TEST(poll_decide)
{
	enum sqcq_sleep_reason why;
	int work, cont, yielded, stolen, over;

	for (work = 0; work < 2; work++)
	for (cont = 0; cont < 2; cont++)
	for (yielded = 0; yielded < 2; yielded++)
	for (stolen = 0; stolen < 2; stolen++)
	for (over = 0; over < 2; over++) {
		enum sqcq_poll_step st;

		why = SQCQ_SLEEP_NR;
		st = sqcq_poll_decide(work, cont, yielded, stolen, over, &why);
		if (cont) {
			/* Contended: yield first, sleep when still so and idle. */
			if (work || !yielded)
				CHECK_EQ(st, SQCQ_POLL_YIELD);
			else
				CHECK(st == SQCQ_POLL_SLEEP &&
				      why == SQCQ_SLEEP_CONTENDED);
		} else if (work) {
			CHECK_EQ(st, SQCQ_POLL_SPIN);
		} else if (stolen) {
			CHECK(st == SQCQ_POLL_SLEEP && why == SQCQ_SLEEP_STOLEN);
		} else if (over) {
			CHECK(st == SQCQ_POLL_SLEEP && why == SQCQ_SLEEP_IDLE);
		} else {
			CHECK_EQ(st, SQCQ_POLL_SPIN);
		}
		/* The reason is written only with a sleep. */
		if (st != SQCQ_POLL_SLEEP)
			CHECK_EQ(why, SQCQ_SLEEP_NR);
	}
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	RUN(constants);
	RUN(layout_structs);
	RUN(layout_area);
	RUN(idx_pending);
	RUN(idx_advance_ok);
	RUN(setup_req_valid);
	RUN(setup_req_bad_magic);
	RUN(setup_req_bad_version);
	RUN(setup_req_reserved);
	RUN(setup_req_bad_flags);
	RUN(setup_req_bad_queues);
	RUN(setup_req_bad_align);
	RUN(setup_req_bad_len);
	RUN(setup_req_gpa_overflow);
	RUN(setup_req_status_reachable);
	RUN(area_init);
	RUN(area_hdr_check);
	RUN(status_str);
	RUN(publish);
	RUN(prepare_sleep);
	RUN(clear_need_wakeup);
	RUN(stop_polling);
	RUN(handshake_sequence);
	RUN(poll_window_rules);
	RUN(poll_window_converges);
	RUN(poll_wake_pays);
	RUN(poll_decide);
	return t_done();
}
