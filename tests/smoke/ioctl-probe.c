// SPDX-License-Identifier: GPL-2.0-only
/*
 * ioctl-probe: open a device node and issue one ioctl, print the errno name.
 * Used by the VM smoke tests to check what the host module answers.
 *
 *   ioctl-probe /dev/vhost-scsi-sqcq 0x8008af00   -> "ENOTTY"
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned char buf[4096];
	unsigned long cmd;
	int fd, ret;

	if (argc != 3) {
		fprintf(stderr, "usage: %s NODE IOCTL-NUMBER\n", argv[0]);
		return 2;
	}
	cmd = strtoul(argv[2], NULL, 0);
	fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		printf("open:%s\n", strerror(errno));
		return 1;
	}
	memset(buf, 0, sizeof(buf));
	ret = ioctl(fd, cmd, buf);
	if (ret < 0) {
		switch (errno) {
		case ENOTTY: printf("ENOTTY\n"); break;
		case EINVAL: printf("EINVAL\n"); break;
		case EFAULT: printf("EFAULT\n"); break;
		case EPERM: printf("EPERM\n"); break;
		default: printf("errno%d\n", errno); break;
		}
	} else {
		printf("OK%d\n", ret);
	}
	close(fd);
	return 0;
}
