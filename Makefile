# ucfs — one non-recursive Makefile, out-of-tree build in $(BUILD)/.
#
# Layout is by convention, so adding a file never means editing this file:
#   blockdev/*.c            -> $(BUILD)/libbd.a
#   lockmgr/*.c             -> $(BUILD)/liblk.a
#   fusefs/*.c and fusefs/*/*.c (one folder per layer) but main.c
#                           -> $(BUILD)/libfs.a;  fusefs/main.c -> $(BUILD)/ucfs
#   tools/NAME.c            -> $(BUILD)/NAME        (one file per tool)
#   tools/NAME.sh           -> $(BUILD)/NAME        (shell tools, copied;
#                              tools/demo.sh is run by `make demo` only)
#   tests/unit/test_*.c     -> $(BUILD)/tests/test_*   (run by tests/run.sh)
#   tests/progs/NAME.c      -> $(BUILD)/tests/NAME     (helpers for scripts)
#   tests/integration/*.sh  run by tests/run.sh against $(BUILD)
#   tests/fuzz/fuzz_NAME.c  -> $(BUILD)/tests/test_fuzz_NAME (+ replay.c:
#                              replays tests/fuzz/NAME/{seeds,regress});
#                              make fuzz: build-fuzz/fuzz/fuzz_NAME
#                              (libFuzzer), see tests/fuzz/FUZZING.md
#
# Targets: all (default) | test | check (ASan+UBSan) | fuzz (libFuzzer,
#          FUZZ_S seconds per harness) | fuzz-afl (AFL++ build) | deps |
#          install | clean | format-check | demo

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
SAN     ?=
FUZZ    ?=
FUZZ_S  ?= 60
FUZZ_CC ?= clang

PKGS    := fuse3 jansson liburcu libsodium liburing libnbd
# Debian packages the build, the tests and the benchmarks need.
DEB_BUILD := build-essential pkg-config libfuse3-dev fuse3 libaio-dev \
	libjansson-dev liburcu-dev libsodium-dev liburing-dev libnbd-dev
DEB_TEST  := e2fsprogs attr acl libcap2-bin util-linux procps psmisc tmux xz-utils jq \
	python3 diffutils tar coreutils nbdkit nbd-server
# make fuzz: clang with its libFuzzer runtime (libclang_rt.fuzzer);
# make fuzz-afl: AFL++ (afl-clang-fast, libAFLDriver).
DEB_FUZZ  := clang libclang-rt-14-dev afl++
DEB_BENCH := fio bonnie++ gnuplot-nox linux-source-6.1 libfuse3-dev time \
	hyperfine

CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
	-DFUSE_USE_VERSION=314 -pthread -MMD -MP \
	-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wmissing-declarations -Wwrite-strings \
	-Wpointer-arith -Wformat=2 -Wundef -Wvla \
	-I. $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -laio -lpthread -lm
ifneq ($(SAN),)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined -DUCFS_DEBUG
LDFLAGS += -fsanitize=address,undefined
endif
ifneq ($(FUZZ),)
# (clang-only warnings on code gcc takes: a GNU extension, vfprintf)
CFLAGS  += -fsanitize=fuzzer-no-link \
	-Wno-gnu-variable-sized-type-not-at-end -Wno-format-nonliteral
endif

BD_SRC  := $(wildcard blockdev/*.c)
LK_SRC  := $(wildcard lockmgr/*.c)
FS_SRC  := $(filter-out fusefs/main.c,$(wildcard fusefs/*.c fusefs/*/*.c))
LIBS    := $(BUILD)/libfs.a $(BUILD)/liblk.a $(BUILD)/libbd.a

TOOL_C  := $(wildcard tools/*.c)
TOOL_SH := $(filter-out tools/demo.sh,$(wildcard tools/*.sh))
TOOLS   := $(patsubst tools/%.c,$(BUILD)/%,$(TOOL_C)) \
	   $(patsubst tools/%.sh,$(BUILD)/%,$(TOOL_SH))
DAEMON  := $(if $(wildcard fusefs/main.c),$(BUILD)/ucfs)
UNIT    := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,\
	     $(wildcard tests/unit/test_*.c))
PROGS   := $(patsubst tests/progs/%.c,$(BUILD)/tests/%,\
	     $(wildcard tests/progs/*.c))
FUZZ_C  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_RP := $(patsubst tests/fuzz/fuzz_%.c,$(BUILD)/tests/test_fuzz_%,$(FUZZ_C))
FUZZ_BIN := $(patsubst tests/fuzz/fuzz_%.c,$(BUILD)/fuzz/fuzz_%,$(FUZZ_C))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

.PHONY: all test check fuzz fuzz-bin fuzz-afl deps install clean format-check demo
all: $(LIBS) $(DAEMON) $(TOOLS) $(UNIT) $(PROGS) $(FUZZ_RP)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/libbd.a: $(call obj,$(BD_SRC))
$(BUILD)/liblk.a: $(call obj,$(LK_SRC))
$(BUILD)/libfs.a: $(call obj,$(FS_SRC))
$(LIBS):
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/ucfs: $(call obj,fusefs/main.c) $(LIBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/%: $(BUILD)/obj/tools/%.o $(LIBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/%: tools/%.sh
	@mkdir -p $(dir $@)
	install -m 0755 $< $@
$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/%: $(BUILD)/obj/tests/progs/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/test_fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o \
		$(BUILD)/obj/tests/fuzz/replay.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

# The README's test command. tests/run.sh ends with "N passed, N failed".
# It builds on every core (a plain "make test" used to build with one:
# about a minute of the suite's time on 2 cores); TEST_BUILD_JOBS to
# change.
TEST_BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test:
	$(MAKE) -j$(TEST_BUILD_JOBS) all
	sh tests/run.sh $(BUILD)

check:
	$(MAKE) BUILD=build-san SAN=1 test

# Coverage-guided fuzzing (tests/fuzz/FUZZING.md): every harness built
# with clang's libFuzzer + ASan + UBSan, then run FUZZ_S seconds each.
fuzz-bin: $(FUZZ_BIN)
fuzz:
	$(MAKE) BUILD=build-fuzz CC=$(FUZZ_CC) SAN=1 FUZZ=1 fuzz-bin
	sh tests/fuzz/campaign.sh build-fuzz $(FUZZ_S)
# The same harnesses for AFL++ (built only; afl-fuzz usage in FUZZING.md).
fuzz-afl:
	$(MAKE) BUILD=build-afl CC=afl-clang-fast SAN=1 FUZZ=1 fuzz-bin

deps:
	@if ! dpkg -s $(DEB_BUILD) $(DEB_TEST) $(DEB_FUZZ) $(DEB_BENCH) \
			>/dev/null 2>&1; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y --no-install-recommends \
			$(DEB_BUILD) $(DEB_TEST) $(DEB_FUZZ) $(DEB_BENCH); \
	fi
	@modprobe fuse 2>/dev/null || true

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin
	install -m 0755 $(DAEMON) $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(filter-out $(BUILD)/mkfs.% $(BUILD)/fsck.%,$(TOOLS)) \
		$(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(filter $(BUILD)/mkfs.% $(BUILD)/fsck.%,$(TOOLS)) \
		$(DESTDIR)$(PREFIX)/sbin/
	@# mount -t fuse.ucfs runs "ucfs" through fuse3's mount helper.

demo: deps all
	sh tools/demo.sh $(BUILD)

format-check:
	clang-format --dry-run --Werror $(wildcard */*.c */*.h */*/*.c */*/*.h)

clean:
	rm -rf build build-san build-fuzz build-afl

.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
