// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test-only module, never packaged: it registers a virtio driver under the
 * guest module's driver name and matches no device.  While it is loaded,
 * virtio_scsi_sqcq's init fails in register_virtio_driver(), after it has
 * set up CPU hotplug and debugfs: tests/smoke/load-fail.sh checks that such
 * a failed load leaves nothing behind.
 */
#include <linux/module.h>
#include <linux/mod_devicetable.h>
#include <linux/virtio.h>

/* Only the terminator: the bus matches no device against it. */
static const struct virtio_device_id squat_ids[] = {
	{ 0 },
};

static int squat_probe(struct virtio_device *vdev)
{
	return -ENODEV;
}

static void squat_remove(struct virtio_device *vdev)
{
}

static struct virtio_driver squat_driver = {
	.driver.name	= "virtio_scsi_sqcq",
	.driver.owner	= THIS_MODULE,
	.id_table	= squat_ids,
	.probe		= squat_probe,
	.remove		= squat_remove,
};

module_virtio_driver(squat_driver);

MODULE_DESCRIPTION("virtio-sqcq test: holds the guest module's driver name");
MODULE_LICENSE("GPL");
