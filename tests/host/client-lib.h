/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The host client (tests/host/client.c and phase-*.c, one binary): what its
 * files share.  client-lib.c holds the helpers; each phase-*.c holds
 * checks and exports only the entry points that client.c runs.
 */
#ifndef SQCQ_TESTS_HOST_CLIENT_LIB_H
#define SQCQ_TESTS_HOST_CLIENT_LIB_H

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include <linux/vhost.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#include "../../common/sqcq_uapi.h"
#include "../../common/sqcq_vhost_abi.h"

#ifndef VHOST_F_LOG_ALL
#define VHOST_F_LOG_ALL 26
#endif
#define F_PACKED	34
#define F_ACCESS_PLATFORM	33
#define NVQS		130		/* control, event, 128 request queues */
#define MEM_SIZE	(64u << 20)
#define GBASE		0x100000ull	/* guest-physical address of mem */
#define QNUM		256u
#define VQ_AREA		(64u << 10)	/* per-vq ring area in mem */
#define BUF_OFF		(10u << 20)	/* request buffers start here */
#define BUF_END		(24u << 20)	/* ... and end here (then wrap) */
#define MEM_SPLIT	(12u << 20)	/* region boundary of the 2-region table */

#define REGION(g, s, u) ((struct vhost_memory_region){ \
	.guest_phys_addr = (g), .memory_size = (s), .userspace_addr = (u) })

/* ---- a driver-side virtqueue ---- */

struct cvq {
	unsigned int idx, num;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	int kick, call, err;
	uint16_t avail_idx;	/* next avail index to publish */
	uint16_t used_seen;	/* used entries consumed */
	unsigned int next_desc;
};

enum bad_kind {
	BAD_LOOP, BAD_OUTSIDE, BAD_NESTED_INDIRECT, BAD_INDIRECT_LEN,
	BAD_HEAD, BAD_AVAIL_JUMP, BAD_READ_AFTER_WRITE, BAD_INDIRECT_LOOP,
	BAD_NEXT_RANGE, BAD_INDIRECT_NEXT, BAD_LEN_WRAP, BAD_KINDS
};
/* ================================================================== */
/* With an LIO target: the SCSI data path (modes scsi, hold, io)       */
/* ================================================================== */

/*
 * Memory of these modes: rings and small buffers below DATA_OFF as above,
 * then the I/O engine's slots, then one area for single large buffers,
 * and at the top a range that the fault test unmaps.  The memory table
 * has two regions whose boundary cuts through one slot's data buffer.
 */
#define DATA_OFF	(24u << 20)	/* engine slots */
#define BIG_OFF		(50u << 20)	/* large single buffers (up to 9 MiB) */
#define HOLE_OFF	(62u << 20)	/* unmapped by the fault test */
#define HOLE_LEN	(64u << 10)
#define MEM_SPLIT2	(44u << 20)	/* region boundary, inside slot 19 */
#define NQ		4		/* request queues the engine drives */
#define NSLOT		6		/* requests in flight per queue */
#define DPS		32		/* ring descriptors each slot owns */
#define SLOT_SZ		((1u << 20) + (16u << 10))
#define WIN		(1u << 20)	/* disk bytes each slot owns */
#define SECT		512u
#define SYNC_VQ		6		/* one command at a time, main thread */
#define HDR_SZ		((uint32_t)sizeof(struct virtio_scsi_cmd_req))
#define RSP_SZ		((uint32_t)sizeof(struct virtio_scsi_cmd_resp))
#define HANG_MS		20000u		/* no answer this long: hung */
#define MAXDISKS	4
#define DBG_DIR		"/sys/kernel/debug/vhost_scsi_sqcq"
#define CFS_DIR		"/sys/kernel/config/target"
/* A LUN the engine reads and writes, with what it should hold. */
struct disk {
	uint8_t target;
	uint16_t lun;
	uint64_t bytes;
	uint8_t *shadow;	/* expected content */
	uint8_t *valid;		/* per sector: shadow is known */
};

struct seg {
	uint64_t a;
	uint32_t len;
	bool w;
};
struct sres {
	struct virtio_scsi_cmd_resp r;
	uint32_t used;
	bool done;
};

enum {
	LAY_PLAIN,		/* header, data pieces, response */
	LAY_ANY,		/* header+data or response+data in one */
	LAY_INDIRECT,		/* LAY_PLAIN through an indirect table */
	LAY_SPLIT_HDR,		/* header and response cut in two */
	LAY_ANY_INDIRECT,	/* header/response + some data, rest in pieces */
	LAY_N
};

struct slot {
	uint8_t *base;
	bool busy, write, c16;
	unsigned int disk, layout;
	uint64_t off;
	uint32_t len;
	uint8_t *data;
	struct virtio_scsi_cmd_resp *rsp;
};

struct engine;

struct ioq {
	struct engine *e;
	struct cvq *q;
	unsigned int qi;
	pthread_t th;
	uint64_t rng;
	struct slot sl[NSLOT];
	unsigned long submitted, done, ok, reads_checked, bytes;
	unsigned long lay[LAY_N], c16;
	unsigned long bad_target, check, aborted, bad;
	bool hung;
	char why[240];
};

struct engine {
	unsigned int nq;
	struct ioq q[NQ];
	volatile bool stop;	/* submit no more; finish what is in flight */
	volatile bool abandon;	/* leave at once (the device is gone) */
	unsigned long per_q;	/* requests per queue, 0: until stop */
	bool lenient;		/* fault phases: errors are expected */
	unsigned int disk_mask;
	unsigned long total_ok;	/* atomic */
	/* Sums after engine_join(). */
	unsigned long submitted, done, ok, reads_checked, bytes;
	unsigned long lay[LAY_N], c16;
	unsigned long bad_target, check, aborted, bad;
	bool hung;
	char why[240];
	double secs;
};

/* ---- client-lib.c: the shared helpers ---- */

/* Results (PASS/FAIL lines, counted), guest memory, ioctl shorthands. */
extern int passed, failed;
extern const char *node;
extern const char *name_prefix;	/* "takeover-" in io mode */
extern uint8_t *mem;
extern size_t buf_next;
void result(bool ok, const char *name, const char *fmt, ...);
void expect(const char *name, int ret, int err);
uint64_t gpa(const void *p);
void *buf_alloc(size_t len);
int set_mem(int fd, uint32_t n, const struct vhost_memory_region *r,
	    uint32_t padding);
int set_good_mem(int fd);
int vring_state(int fd, unsigned long cmd, unsigned int idx,
		unsigned int num);
int vring_file(int fd, unsigned long cmd, unsigned int idx, int efd);
uint64_t elapsed_ms(const struct timespec *t0);

/* The driver-side virtqueues (one per vhost queue index). */
extern struct cvq vqs[NVQS];
uint16_t *used_event(struct cvq *q);
uint16_t *avail_event(struct cvq *q);
uint16_t load16(const uint16_t *p);
void cvq_layout(struct cvq *q, unsigned int idx, unsigned int num);
int cvq_set_addr(int fd, struct cvq *q, unsigned int flags);
int cvq_start(int fd, struct cvq *q, unsigned int idx, bool fresh);
uint16_t cvq_desc(struct cvq *q, uint64_t addr, uint32_t len,
		  uint16_t flags, uint16_t next);
void cvq_publish(struct cvq *q, uint16_t head);
void cvq_kick(struct cvq *q);
bool cvq_wait_used(struct cvq *q, uint16_t target, unsigned int ms);
bool wait16(const uint16_t *p, uint16_t v, unsigned int ms);
uint64_t efd_take(int efd, unsigned int wait_ms);
uint16_t cvq_cmd(struct cvq *q, struct virtio_scsi_cmd_resp **resp,
		 bool indirect);
bool cvq_take_used(struct cvq *q, uint16_t head, uint32_t len,
		   char *why, size_t whylen);

/* With an LIO target: the device, its LUNs, SCSI helpers. */
extern const char *fabric;
extern const char *wwpn;
extern int scsi_fd;
extern uint64_t tag_seq;
extern struct disk disks[MAXDISKS];
extern unsigned int ndisks;
void fill_random(uint8_t *p, size_t len, uint64_t *s);
void put_be(uint8_t *p, uint64_t v, unsigned int bytes);
uint64_t get_be(const uint8_t *p, unsigned int bytes);
void lun_encode(uint8_t lun[8], uint8_t target, uint16_t l);
void cdb_rw(uint8_t *cdb, bool write, bool c16, uint64_t lba,
	    uint32_t nsec);
void sense_of(const struct virtio_scsi_cmd_resp *r, uint8_t *key,
	      uint8_t *asc);

/* The kernel around the device: configfs, debugfs, /proc, workers. */
int timed_ioctl(int fd, unsigned long cmd, void *arg, unsigned int ms,
		const char *name);
struct vhost_scsi_target ep_target(const char *w);
int set_endpoint(int fd, const char *w, const char *name);
int clear_endpoint(int fd, const char *w, const char *name);
void tpg_path(char *p, size_t len, unsigned int tpgt, const char *leaf);
int cfs_write(const char *path, const char *val);
bool read_file(const char *path, char *buf, size_t len);
int dbg_devs(pid_t pid, char *dir, size_t dirlen);
unsigned long long dbg_vq_requests(const char *dir, unsigned int vq);
bool dbg_dev_str(const char *file, const char *key, char *val,
		 size_t len);
long long dbg_dev_key(const char *file, const char *key);
int tasks_named(const char *dir, const char *want);
bool worker_alive(pid_t pid);
int my_workers(int *own, int *kt);
bool my_workers_are(int n);
int new_worker(int fd, unsigned int *id);
int free_worker(int fd, unsigned int id);
int attach_worker(int fd, unsigned int index, unsigned int id);
unsigned int vring_worker(int fd, unsigned int index);
int possible_cpus(void);

/* $SQCQ_HOOK (configfs helpers of tests/lib/target.sh), LUN relinks. */
bool hook(const char *fmt, ...);
void msleep(unsigned int ms);
bool relink_lun(unsigned int tpgt, unsigned int lun, unsigned int n);

/* The device set up as QEMU does; one request at a time (SYNC_VQ). */
int scsi_dev_open(const char *path, const char *bind_wwpn, char *why,
		  size_t whylen);
bool sync_run(struct cvq *q, const struct seg *sg, unsigned int n,
	      bool indirect, uint32_t *ulen, unsigned int ms);
bool scsi_cmd(uint8_t target, uint16_t lun, const uint8_t *cdb,
	      unsigned int cdblen, uint64_t dgpa, uint32_t dlen,
	      bool din, struct sres *res);
bool tur(uint8_t target, uint16_t lun, struct sres *res);
bool good(const struct sres *s);
const char *sres_str(const struct sres *s);
bool clear_ua(uint8_t target, uint16_t lun);
extern unsigned int live_mask;	/* disks that still exist */
bool clear_ua_all(void);
bool capacity16(uint8_t target, uint16_t lun, uint64_t *bytes,
		struct sres *s);
bool disk_add(uint8_t target, uint16_t lun);
int tmf(uint8_t target, uint16_t lun, uint32_t subtype, uint64_t tag);

/* The I/O engine: NQ threads keep verified requests in flight. */
void engine_start(struct engine *e, unsigned int nq,
		  unsigned long per_q, bool lenient,
		  unsigned int disk_mask, uint64_t seed);
void engine_join(struct engine *e, const struct timespec *t0);
bool engine_wait_ok(struct engine *e, unsigned long n, unsigned int ms);
extern struct engine fe;	/* engine of the fault phases */
struct engine *engine_strict_run(const char *name, unsigned int nq,
				 unsigned long per_q,
				 unsigned int disk_mask, uint64_t seed,
				 unsigned long min_ok);

/* Requests built by hand, LUN lists, the unmapped hole. */
int report_luns(uint8_t target, unsigned int *luns, int max,
		struct sres *s);
bool has_lun(const unsigned int *luns, int n, unsigned int lun);
bool check_illegal_lun(const struct sres *s);
bool unmap_hole(void);
bool remap_hole(void);
bool raw_req(const struct seg *sg, unsigned int n, uint32_t *used);
struct virtio_scsi_cmd_req *new_req(uint8_t target, uint16_t lun);
struct virtio_scsi_cmd_resp *new_rsp(void);

/* The event queue. */
void ev_post(unsigned int n, uint32_t len);
bool ev_next(struct virtio_scsi_event *out, uint32_t *len,
	     unsigned int ms);
bool ev_lun_is(const uint8_t lun[8], unsigned int l);
bool ev_is(const struct virtio_scsi_event *ev, uint32_t event,
	   uint32_t reason, uint8_t target, unsigned int lun);
const char *ev_str(bool ok, uint32_t len,
		   const struct virtio_scsi_event *ev);
uint32_t events_missed(int fd);

/* The kernel log. */
int klog_count(const char *needle);

/*
 * ---- the phases: entry points that client.c runs ----
 */

/* ---- phase-ioctls.c ---- */

void test_before_owner(int fd);
void test_unknown_ioctls(int fd);
void test_owner(int fd);
void test_features(int fd);
void test_mem_table(int fd);
void test_vring_config(int fd);
void test_log_ioctls(int fd);
void test_scsi_ioctls(int fd);

/* ---- phase-rings.c ---- */

void test_ctrl_queue(int fd);
void test_request_queue(int fd);
void test_no_event_idx(int fd);
void test_bad_ring(int fd, enum bad_kind kind);
void test_gpa_wrap(int fd);
void test_bad_ring_recovery(int fd);
void test_reset_owner(int fd);
void test_owner_exit(void);
void test_stress(int fd);

/* ---- phase-workers.c ---- */

void test_workers(void);
void t_workers(int fd);

/* ---- phase-scsi.c ---- */

void t_endpoint(int fd);
void t_commands(uint64_t lun_bytes);
void t_data(void);
void t_boundaries(void);
void t_malformed(void);
void t_tmf(void);

/* ---- phase-events.c ---- */

void t_events(int fd);

/* ---- phase-faults.c ---- */

void t_clear_under_io(int fd);
void t_lun_unlink_under_io(void);
void t_sigkill(int fd);
void t_log_budget(int fd);
void t_stall_cross_tenant(int fd);
void t_sigkill_clone(int fd);
void t_close_in_flight(int fd);

/* ---- phase-hostile.c ---- */

void t_direction(void);
void t_compare_and_write(void);
void t_compare_and_write_ua(void);
void t_compare_and_write_split(void);
void t_inflight_cap(int fd);
void t_evt_abuse(int fd);

/* ---- phase-dirty-log.c ---- */

void t_dirty_log(int fd);

/* ---- phase-kick-swap.c ---- */

void t_kick_swap(int fd);

/* ---- phase-cgroup.c ---- */

int cpuset_main(int argc, char **argv);
int memcg_main(int argc, char **argv);

#endif
