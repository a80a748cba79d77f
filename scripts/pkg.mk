# SPDX-License-Identifier: GPL-2.0-only
#
# Packaging targets, included from the top-level Makefile:
#
#   make deb                 out/pkg/virtio-sqcq-dkms_<VERSION>_all.deb
#   make rpm                 out/pkg/virtio-sqcq-dkms-<VERSION>-1.noarch.rpm
#   make dkms-install        dkms add/build/install of this working tree for
#                            $(KERNELRELEASE) (default: the running kernel)
#   make dkms-remove         undo dkms-install (all kernels)
#   make pkg-version-check   dkms.conf, debian/changelog, spec agree with VERSION
#   make pkg-version-sync    rewrite them from VERSION
#   make pkgtest             tests/pkg/run.sh
#
# Everything is built under out/pkg; the checkout is never written to.

# Wherever this is included, it does not change the default goal.
PKG_SAVED_GOAL := $(.DEFAULT_GOAL)
PKG_TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
PKG_OUT ?= $(PKG_TOP)/out/pkg
PKG_VERSION := $(shell cat $(PKG_TOP)/VERSION)
PKG_KVER := $(if $(KERNELRELEASE),$(KERNELRELEASE),$(shell uname -r))
PKG_DKMS_SRC := /usr/src/virtio-sqcq-$(PKG_VERSION)

.PHONY: deb rpm dkms-install dkms-remove pkg-version-check pkg-version-sync pkgtest

deb:
	$(PKG_TOP)/scripts/pkg-build.sh deb $(PKG_OUT)

rpm:
	$(PKG_TOP)/scripts/pkg-build.sh rpm $(PKG_OUT)

pkg-version-check:
	$(PKG_TOP)/scripts/pkg-version.sh check $(PKG_TOP)

pkg-version-sync:
	$(PKG_TOP)/scripts/pkg-version.sh sync $(PKG_TOP)

# A working-tree install replaces whatever DKMS has under this version.
dkms-install: pkg-version-check
	-dkms remove -m virtio-sqcq -v $(PKG_VERSION) --all >/dev/null 2>&1
	rm -rf $(PKG_DKMS_SRC)
	$(PKG_TOP)/scripts/pkg-build.sh dkms-src $(PKG_DKMS_SRC)
	dkms add -m virtio-sqcq -v $(PKG_VERSION)
	dkms build -m virtio-sqcq -v $(PKG_VERSION) -k $(PKG_KVER)
	dkms install -m virtio-sqcq -v $(PKG_VERSION) -k $(PKG_KVER) --force
	dkms status -m virtio-sqcq

dkms-remove:
	-dkms remove -m virtio-sqcq -v $(PKG_VERSION) --all
	rm -rf $(PKG_DKMS_SRC)

pkgtest:
	$(PKG_TOP)/tests/pkg/run.sh

.DEFAULT_GOAL := $(PKG_SAVED_GOAL)
