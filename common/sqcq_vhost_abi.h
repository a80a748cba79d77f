/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The vhost ABI values newer than some of the kernels and distributions we
 * build on: the host module (through common/sqcq_compat.h) and the test
 * client (tests/host/client.c) take them from here, after <linux/vhost.h>.
 * Each is guarded by its own name, so the system's definition wins where
 * there is one; the numbers are the ABI's and the same on every kernel.
 */
#ifndef SQCQ_VHOST_ABI_H
#define SQCQ_VHOST_ABI_H

/*
 * Feature words beyond 64 bits (7.x UAPI; QEMU 11 asks with them first).
 * The same numbers on every kernel: they are the ABI, not the headers'.
 */
#ifndef VHOST_GET_FEATURES_ARRAY
struct vhost_features_array {
	__u64 count;
	__u64 features[];
};

#define VHOST_GET_FEATURES_ARRAY _IOR(VHOST_VIRTIO, 0x83, \
				      struct vhost_features_array)
#define VHOST_SET_FEATURES_ARRAY _IOW(VHOST_VIRTIO, 0x83, \
				      struct vhost_features_array)
#endif

/*
 * The worker ioctls (6.5 UAPI; QEMU 8.2+ uses them with
 * worker_per_virtqueue=true).  The same numbers on every kernel.
 */
#ifndef VHOST_NEW_WORKER
struct vhost_worker_state {
	unsigned int worker_id;
};

struct vhost_vring_worker {
	unsigned int index;
	unsigned int worker_id;
};

#define VHOST_NEW_WORKER	_IOR(VHOST_VIRTIO, 0x8, struct vhost_worker_state)
#define VHOST_FREE_WORKER	_IOW(VHOST_VIRTIO, 0x9, struct vhost_worker_state)
#define VHOST_ATTACH_VRING_WORKER _IOW(VHOST_VIRTIO, 0x15, \
				       struct vhost_vring_worker)
#define VHOST_GET_VRING_WORKER	_IOWR(VHOST_VIRTIO, 0x16, \
				      struct vhost_vring_worker)
#endif

/* Older UAPI headers lack these two values of the vhost ABI. */
#ifndef VHOST_FILE_UNBIND
#define VHOST_FILE_UNBIND	-1
#endif
#ifndef VHOST_SCSI_ABI_VERSION
#define VHOST_SCSI_ABI_VERSION	1
#endif

#endif /* SQCQ_VHOST_ABI_H */
