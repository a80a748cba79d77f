// SPDX-License-Identifier: GPL-2.0-only
/*
 * Phase "events": hotplug events, EVENTS_MISSED and the event queue limit.
 */
#include "client-lib.h"

void t_events(int fd)
{
	const uint32_t RESET = VIRTIO_SCSI_T_TRANSPORT_RESET;
	struct virtio_scsi_event ev;
	unsigned int luns[16], i;
	uint32_t len, one = 1;
	struct sres s;
	uint64_t bytes = 0;
	bool ok, seq;
	int n;

	ev_post(2, sizeof(ev));
	result(hook("sqcq_target_add_lun %s %s 1 2 8", fabric, wwpn),
	       "scsi-hotplug-add-lun", "hook failed");
	ok = ev_next(&ev, &len, 10000);
	result(ok && len == sizeof(ev) &&
	       ev_is(&ev, RESET, VIRTIO_SCSI_EVT_RESET_RESCAN, 1, 2),
	       "scsi-hotplug-rescan-event", "%s", ev_str(ok, len, &ev));
	result(clear_ua(1, 2) && capacity16(1, 2, &bytes, &s) &&
	       bytes == 8u << 20, "scsi-hotplug-new-lun-works",
	       "%llu bytes", (unsigned long long)bytes);
	n = report_luns(1, luns, 16, &s);
	result(n == 3 && has_lun(luns, n, 2), "scsi-hotplug-report-luns-three",
	       "%d luns", n);
	result(hook("sqcq_target_del_lun %s %s 1 2", fabric, wwpn),
	       "scsi-hotplug-del-lun", "hook failed");
	ok = ev_next(&ev, &len, 10000);
	result(ok && len == sizeof(ev) &&
	       ev_is(&ev, RESET, VIRTIO_SCSI_EVT_RESET_REMOVED, 1, 2),
	       "scsi-hotplug-removed-event", "%s", ev_str(ok, len, &ev));
	tur(1, 2, &s);
	result(check_illegal_lun(&s), "scsi-hotplug-removed-lun-gone", "%s",
	       sres_str(&s));

	/* No buffer posted: the event waits for one. */
	result(hook("sqcq_target_add_lun %s %s 1 3 8", fabric, wwpn),
	       "scsi-hotplug-add-lun-without-buffer", "hook failed");
	msleep(200);
	result(events_missed(fd) == 0, "scsi-event-pending-is-not-missed",
	       "events missed %u", events_missed(fd));
	/* A buffer too short for an event is returned empty first. */
	ev_post(1, 8);
	ev_post(1, sizeof(ev));
	ok = ev_next(&ev, &len, 10000);
	result(ok && len == 0, "scsi-event-short-buffer-returned-empty",
	       "%s", ev_str(ok, len, &ev));
	ok = ev_next(&ev, &len, 10000);
	result(ok && len == sizeof(ev) &&
	       ev_is(&ev, RESET, VIRTIO_SCSI_EVT_RESET_RESCAN, 1, 3),
	       "scsi-event-delivered-when-buffer-posted", "%s",
	       ev_str(ok, len, &ev));
	ev_post(1, sizeof(ev));
	result(hook("sqcq_target_del_lun %s %s 1 3", fabric, wwpn),
	       "scsi-hotplug-del-lun3", "hook failed");
	ok = ev_next(&ev, &len, 10000);
	result(ok && ev_is(&ev, RESET, VIRTIO_SCSI_EVT_RESET_REMOVED, 1, 3),
	       "scsi-hotplug-removed-event-lun3", "%s", ev_str(ok, len, &ev));

	/* VHOST_SCSI_SET_EVENTS_MISSED: reported on the next buffer. */
	expect("scsi-set-events-missed",
	       ioctl(fd, VHOST_SCSI_SET_EVENTS_MISSED, &one), 0);
	result(events_missed(fd) == 1, "scsi-get-events-missed-set",
	       "%u", events_missed(fd));
	ev_post(1, sizeof(ev));
	ok = ev_next(&ev, &len, 10000);
	result(ok && len == sizeof(ev) &&
	       ev.event == (VIRTIO_SCSI_T_NO_EVENT | VIRTIO_SCSI_T_EVENTS_MISSED),
	       "scsi-events-missed-delivered", "%s", ev_str(ok, len, &ev));
	result(events_missed(fd) == 0, "scsi-events-missed-cleared", "%u",
	       events_missed(fd));

	/* 66 events with no buffer: 64 are kept, then EVENTS_MISSED. */
	result(relink_lun(2, 0, 33), "scsi-relink-lun-33-times", "-");
	result(events_missed(fd) == 1, "scsi-event-queue-overflow-sets-missed",
	       "%u", events_missed(fd));
	ev_post(70, sizeof(ev));
	seq = true;
	for (i = 0; i < 64; i++) {
		ok = ev_next(&ev, &len, 10000);
		if (!ok)
			break;
		if (i == 0)
			result(ev.event == (RESET | VIRTIO_SCSI_T_EVENTS_MISSED),
			       "scsi-event-queue-first-carries-missed", "%s",
			       ev_str(ok, len, &ev));
		else
			seq &= ev.event == RESET;
		seq &= len == sizeof(ev) && ev.lun[1] == 2 &&
		       ev_lun_is(ev.lun, 0) &&
		       ev.reason == (i & 1 ? VIRTIO_SCSI_EVT_RESET_RESCAN :
				     VIRTIO_SCSI_EVT_RESET_REMOVED);
	}
	result(i == 64 && seq, "scsi-event-queue-64-in-order",
	       "%u events, in order %d", i, seq);
	ok = ev_next(&ev, &len, 500);
	result(!ok, "scsi-event-queue-nothing-more", "%s", ev_str(ok, len, &ev));
	result(events_missed(fd) == 0, "scsi-event-queue-missed-cleared", "%u",
	       events_missed(fd));
	result(clear_ua_all(), "scsi-unit-attention-cleared-after-hotplug", "-");
}
