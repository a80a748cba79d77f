// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test build of the guest driver, never packaged: the same source with the
 * fault hooks of common/sqcq_faults.h live, under a module name of its own
 * (virtio_scsi_sqcq_faults).  tests/guest/inside.sh loads it.
 */
#include <linux/moduleparam.h>

unsigned int fault_setup_unanswered;
module_param(fault_setup_unanswered, uint, 0644);
MODULE_PARM_DESC(fault_setup_unanswered, "Test only: the device's answers to the next N SQ/CQ setup requests are dropped (to the driver, a device that never answers)");

unsigned int fault_poll_hog_s;
module_param(fault_poll_hog_s, uint, 0644);
MODULE_PARM_DESC(fault_poll_hog_s, "Test only: the poll thread, once it finds work, spins this many seconds with preemption off (once)");

unsigned int fault_break_after;
module_param(fault_break_after, uint, 0644);
MODULE_PARM_DESC(fault_break_after, "Test only: the N-th command submitted from now on marks the device broken (virtio_break_device()), as a device that broke the ring protocol");

unsigned int fault_tmf_unanswered;
module_param(fault_tmf_unanswered, uint, 0644);
MODULE_PARM_DESC(fault_tmf_unanswered, "Test only: while set, the device is not notified of SCSI TMFs (ABORT TASK, LUN reset): they stay on the control queue unanswered until a reset or until it is cleared");

/* From guest/ (-I in Kbuild), or beside this file in a copy of the tree. */
#include "virtio_scsi_sqcq_main.c"
