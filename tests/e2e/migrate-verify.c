// SPDX-License-Identifier: GPL-2.0-only
/*
 * migrate-verify DEV SECONDS: verified I/O on a disk while its guest is
 * live-migrated (tests/e2e/l2-migrate.sh runs it in the nested guest; it is
 * linked statically, as that guest has no root file system but its
 * initramfs).
 *
 * NTHR threads each own 64 KiB blocks of the disk's first 8 MiB.  A thread
 * writes a block with a pattern naming the block and a generation, then
 * reads a block of its own back into one of its read buffers and compares
 * it with the generation it wrote there last.  Reads go through O_DIRECT:
 * the host writes the data straight into the guest's buffer, the pages
 * only a dirty log makes a migration copy again.  A buffer the host filled
 * after the migration's last copy of it, and that the guest compares on
 * the destination, holds what the source had there before: a mismatch.
 *
 * Prints "verify: t=S ios=N bad=B errors=E" every 2 s and
 * "verify: done ios=N bad=B errors=E" at the end, where bad counts compare
 * mismatches (the first ones described) and errors failed reads or writes.
 * Exit status 0 only when both are 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NTHR	4
#define BLK	(64u << 10)
#define NBLK	128u			/* 8 MiB */
#define NRBUF	16u			/* read buffers per thread */

static int fd;
static double t_end;
static unsigned long ios, bad, errs;	/* atomic */

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void fill(uint64_t *p, unsigned int blk, uint32_t gen)
{
	unsigned int i;

	for (i = 0; i < BLK / 8; i++)
		p[i] = ((uint64_t)blk << 48) ^ ((uint64_t)gen << 20) ^ i ^
		       0x5a5a000000000000ull;
}

static void *run(void *arg)
{
	unsigned int t = (unsigned int)(uintptr_t)arg, k = 0, nb = NBLK / NTHR;
	uint32_t gen[NBLK / NTHR] = { 0 }, g = 0;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (t + 1);
	uint8_t *wbuf, *rbuf, *want;

	if (posix_memalign((void **)&wbuf, 4096, BLK) ||
	    posix_memalign((void **)&rbuf, 4096, (size_t)BLK * NRBUF) ||
	    posix_memalign((void **)&want, 4096, BLK))
		abort();
	while (now() < t_end) {
		unsigned int w, r;
		uint8_t *rb = rbuf + (size_t)(k++ % NRBUF) * BLK;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		w = (seed >> 33) % nb;
		fill((uint64_t *)wbuf, t * nb + w, ++g);
		if (pwrite(fd, wbuf, BLK, (off_t)(t * nb + w) * BLK) != BLK) {
			__atomic_add_fetch(&errs, 1, __ATOMIC_RELAXED);
			fprintf(stderr, "verify: write of block %u: %s\n",
				t * nb + w, strerror(errno));
			continue;
		}
		gen[w] = g;
		r = (seed >> 45) % nb;
		if (!gen[r])
			r = w;
		if (pread(fd, rb, BLK, (off_t)(t * nb + r) * BLK) != BLK) {
			__atomic_add_fetch(&errs, 1, __ATOMIC_RELAXED);
			fprintf(stderr, "verify: read of block %u: %s\n",
				t * nb + r, strerror(errno));
			continue;
		}
		fill((uint64_t *)want, t * nb + r, gen[r]);
		if (memcmp(rb, want, BLK)) {
			unsigned int i = 0;

			while (i < BLK && rb[i] == want[i])
				i++;
			if (__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED) <= 5)
				fprintf(stderr, "verify: block %u generation %u differs at byte %u (page %u of the buffer)\n",
					t * nb + r, gen[r], i, i / 4096);
		}
		__atomic_add_fetch(&ios, 2, __ATOMIC_RELAXED);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[NTHR];
	double next;
	unsigned int i;

	if (argc != 3) {
		fprintf(stderr, "usage: migrate-verify DEV SECONDS\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "verify: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	t_end = now() + atof(argv[2]);
	next = now() + 2;
	for (i = 0; i < NTHR; i++)
		if (pthread_create(&th[i], NULL, run, (void *)(uintptr_t)i))
			abort();
	while (now() < t_end) {
		usleep(100000);
		if (now() < next)
			continue;
		next += 2;
		printf("verify: t=%.0f ios=%lu bad=%lu errors=%lu\n",
		       atof(argv[2]) - (t_end - now()),
		       __atomic_load_n(&ios, __ATOMIC_RELAXED),
		       __atomic_load_n(&bad, __ATOMIC_RELAXED),
		       __atomic_load_n(&errs, __ATOMIC_RELAXED));
		fflush(stdout);
	}
	for (i = 0; i < NTHR; i++)
		pthread_join(th[i], NULL);
	printf("verify: done ios=%lu bad=%lu errors=%lu\n", ios, bad, errs);
	return bad || errs;
}
