# SPDX-License-Identifier: GPL-2.0-only
#
# Developer entry points.  The kernel build itself is described in Kbuild.
#
#   make                    build for the running kernel (or KDIR=...)
#   make KDIR=/path/build   build against another kernel's build dir
#   make check              the test suite (see README.md), within 60 minutes
#   make check-full         and what check leaves out as repeats (tests/README.md)
#   make matrix             W=1 -Werror build against every kernel of the matrix
#   make checkpatch         checkpatch.pl --strict, exceptions in scripts/checkpatch.sh
#   make unit | model | vmtest   one test stage
#   make deb | rpm | dkms-install | dkms-remove   packaging (scripts/pkg.mk)
#   make clean

KDIR ?= /lib/modules/$(shell uname -r)/build
PWD := $(shell pwd)

.PHONY: all modules clean check check-full matrix checkpatch unit model vmtest demo

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(PWD) W=1 modules

clean:
	-$(MAKE) -C $(KDIR) M=$(PWD) clean 2>/dev/null
	rm -rf out tests/unit/build tests/model/build
	find . -name '*.o' -o -name '*.ko' -o -name '*.mod' -o -name '*.mod.c' \
		-o -name '.*.cmd' -o -name modules.order -o -name Module.symvers \
		| xargs rm -f

check:
	tests/run-all.sh

check-full:
	SQCQ_FULL=1 tests/run-all.sh

matrix:
	tests/matrix.sh

checkpatch:
	scripts/checkpatch.sh

unit:
	tests/run-all.sh unit

model:
	tests/run-all.sh model

vmtest:
	tests/run-all.sh vm

demo:
	./demo.sh

include scripts/pkg.mk
