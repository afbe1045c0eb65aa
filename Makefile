# safeverbs: build, test and demo. `make check` and `make demo` work on a fresh Debian machine
# as root: they install what is missing (tools/deps.sh) and, where this host has no RDMA device,
# run on rxe in a QEMU guest (tests/vm/).

CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Wpedantic -Wshadow -Werror
LDLIBS  := -libverbs -lpthread
BUILD   := build

TESTS    := $(patsubst tests/%.c,$(BUILD)/%,$(wildcard tests/test_*.c))
ASAN_TESTS := $(patsubst tests/%.c,$(BUILD)/asan/%,$(wildcard tests/test_*.c))
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/%,$(wildcard examples/*.c))
BENCHES  := $(patsubst bench/%.c,$(BUILD)/%,$(wildcard bench/*.c))
# The device-free tier: tests/nodev/ on the fake NIC of tests/nodev/fake_verbs.c, without libibverbs.
NODEV    := $(patsubst tests/nodev/%.c,$(BUILD)/nodev/%,$(wildcard tests/nodev/test_*.c))
NODEV    += $(patsubst tests/nodev/%.c,$(BUILD)/nodev/asan/%,$(wildcard tests/nodev/test_*.c))
NODEV_DEPS := tests/nodev/fake_verbs.c tests/nodev/fake_verbs.h tests/nodev/fake_env.h tests/nodev/dead_handles.h tests/harness.h safeverbs.h
# The fake-NIC tests once more with SAFEVERBS_STATIC: the data path inlined into the callers.
NODEV    += $(BUILD)/nodev/test_fake_static
# The threaded one (another thread reads the events that break a channel) with ThreadSanitizer;
# test_race also runs that thread from inside a verb (linker-wrapped), at the exact moment a race needs.
NODEV    += $(BUILD)/nodev/tsan/test_race
# ... and the shared objects (PD, MRs, CQs, contexts, events) used by many threads at once, and
# the set of live handles that every handle made or destroyed on any thread goes through.
NODEV    += $(BUILD)/nodev/tsan/test_rev33c $(BUILD)/nodev/tsan/test_rev38a
# The widest of them once more with clang's unsigned-integer-overflow sanitizer, fatal: no size or
# offset sum in the header may wrap, even where it is then tested (a hash that wraps on purpose is
# marked SFV__WRAPS). No nodev test made the header wrap when this tier was added; these cover the most
# (and rev34a, whose wraps only this tier sees: a ticket lock's turn, a request batch of 0; rev38a,
# the set of live handles, whose hash wraps on purpose).
UIO_TESTS := review fake promises sweep inflight_fake rev30 rev31d rev33b rev33d cm_fake rev34a rev38a
NODEV    += $(patsubst %,$(BUILD)/nodev/uio/test_%,$(UIO_TESTS))
UIO_FLAGS := -O1 -g -fsanitize=unsigned-integer-overflow -fno-sanitize-recover=all
# The implementation in a C++ file (README: "one C or C++ file"), with UBSan, whose enum check
# C has not: in C++ an enum made from a value none of its names has is undefined behaviour.
CXX_TESTS := rev37e
NODEV    += $(patsubst %,$(BUILD)/nodev/cxx/test_%,$(CXX_TESTS))
RACE_WRAP := -Wl,--wrap=ibv_modify_qp -Wl,--wrap=ibv_destroy_qp
nodev_ld = $(if $(findstring test_race,$@),$(RACE_WRAP))
# Tests of the real build that need no device either: they join the device-free tier on the host
# (and still run in the guest with the rest). They link libibverbs, which tools/deps.sh installs.
HOST_TESTS := $(BUILD)/test_exchange $(BUILD)/asan/test_exchange
ON_RXE   := bash tools/on-rxe.sh
# make check builds with as many jobs as the host has cores (the rules are safe in parallel).
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps check check-nodev demo bench compile-matrix clean

all: $(TESTS) $(ASAN_TESTS) $(EXAMPLES) $(BENCHES)

$(BUILD):
	@mkdir -p $@

$(BUILD)/test_%: tests/test_%.c tests/harness.h tests/pair.h safeverbs.h | $(BUILD)
	$(CC) $(CFLAGS) $(WARN) -I. -o $@ $< $(LDLIBS)

# The same tests with AddressSanitizer and LeakSanitizer: no overflow, no leak, on any path.
$(BUILD)/asan/test_%: tests/test_%.c tests/harness.h tests/pair.h safeverbs.h
	@mkdir -p $(@D)
	$(CC) -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined $(WARN) -I. -o $@ $< $(LDLIBS)

$(BUILD)/nodev/test_%: tests/nodev/test_%.c $(NODEV_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -I. -Itests -o $@ $< tests/nodev/fake_verbs.c -lpthread $(nodev_ld)

$(BUILD)/nodev/test_fake_static: tests/nodev/test_fake.c $(NODEV_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DSAFEVERBS_STATIC $(WARN) -I. -Itests -o $@ $< tests/nodev/fake_verbs.c -lpthread

$(BUILD)/nodev/tsan/test_%: tests/nodev/test_%.c $(NODEV_DEPS)
	@mkdir -p $(@D)
	$(CC) -O1 -g -fsanitize=thread $(WARN) -I. -Itests -o $@ $< tests/nodev/fake_verbs.c -lpthread $(nodev_ld)

$(BUILD)/nodev/asan/test_%: tests/nodev/test_%.c $(NODEV_DEPS)
	@mkdir -p $(@D)
	$(CC) -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined $(WARN) -I. -Itests -o $@ $< tests/nodev/fake_verbs.c -lpthread $(nodev_ld)

$(BUILD)/nodev/uio/test_cm_%: tests/nodev/test_cm_%.c $(NODEV_DEPS) $(BUILD)/nodev/uio/fake_verbs.o $(BUILD)/nodev/uio/fake_rdmacm.o
	@mkdir -p $(@D)
	clang $(UIO_FLAGS) -I. -Itests -o $@ $< $(BUILD)/nodev/uio/fake_verbs.o $(BUILD)/nodev/uio/fake_rdmacm.o -lpthread

$(BUILD)/nodev/uio/test_%: tests/nodev/test_%.c $(NODEV_DEPS) $(BUILD)/nodev/uio/fake_verbs.o
	@mkdir -p $(@D)
	clang $(UIO_FLAGS) -I. -Itests -o $@ $< $(BUILD)/nodev/uio/fake_verbs.o -lpthread

# (the fake as C, the one of the uio tier: fake_verbs.h declares it extern "C")
$(BUILD)/nodev/cxx/test_%: tests/nodev/test_%.c $(NODEV_DEPS) $(BUILD)/nodev/uio/fake_verbs.o
	@mkdir -p $(@D)
	clang++ -x c++ -std=c++11 -O1 -g -fsanitize=undefined -fno-sanitize-recover=all $(WARN) -I. -Itests -o $@ $< -x none $(BUILD)/nodev/uio/fake_verbs.o -lpthread

# (the fakes, whose own arithmetic may wrap, without the sanitizer: only the header's is the point)
.SECONDARY: $(BUILD)/nodev/uio/fake_verbs.o $(BUILD)/nodev/uio/fake_rdmacm.o
$(BUILD)/nodev/uio/fake_%.o: tests/nodev/fake_%.c $(NODEV_DEPS) tests/nodev/fake_rdmacm.h
	@mkdir -p $(@D)
	clang -O1 -g -I. -Itests -c -o $@ $<

# test_rev34b runs two examples whole (included into it), on the fakes
$(BUILD)/nodev/test_rev34b $(BUILD)/nodev/asan/test_rev34b: tests/nodev/run_example.h examples/rc_pingpong.c examples/rping.c examples/tcp.h tests/nodev/fake_rdmacm.c tests/nodev/fake_rdmacm.h
$(BUILD)/nodev/test_rev37a $(BUILD)/nodev/asan/test_rev37a: tests/nodev/run_example.h examples/rc_pingpong.c examples/tcp.h

# tests/nodev/test_cm_*.c: the RDMA-CM part (SAFEVERBS_RDMACM) on the fake librdmacm of
# tests/nodev/fake_rdmacm.c as well (no librdmacm linked, only its header).
NODEV_CM := tests/nodev/fake_verbs.c tests/nodev/fake_rdmacm.c
$(BUILD)/nodev/test_cm_%: tests/nodev/test_cm_%.c $(NODEV_DEPS) tests/nodev/fake_rdmacm.c tests/nodev/fake_rdmacm.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -I. -Itests -o $@ $< $(NODEV_CM) -lpthread

$(BUILD)/nodev/asan/test_cm_%: tests/nodev/test_cm_%.c $(NODEV_DEPS) tests/nodev/fake_rdmacm.c tests/nodev/fake_rdmacm.h
	@mkdir -p $(@D)
	$(CC) -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined $(WARN) -I. -Itests -o $@ $< $(NODEV_CM) -lpthread

$(BUILD)/%: examples/%.c safeverbs.h $(wildcard examples/*.h) | $(BUILD)
	$(CC) $(CFLAGS) $(WARN) -I. -o $@ $< $(LDLIBS)

# The benchmarks measure a release build (NDEBUG: SFV_DEBUG 0), as a user would ship it.
$(BUILD)/%: bench/%.c safeverbs.h $(wildcard bench/*.h) examples/tcp.h | $(BUILD)
	$(CC) $(CFLAGS) -DNDEBUG $(WARN) -I. -o $@ $< $(LDLIBS)

# What the in-flight tracking costs (make bench, stage 5): the bench in a debug build (SFV_DEBUG,
# as a user's tests would run) with SFV_TRACK_INFLIGHT on and off.
$(BUILD)/sfv_bench_track: bench/sfv_bench.c safeverbs.h $(wildcard bench/*.h) examples/tcp.h | $(BUILD)
	$(CC) $(CFLAGS) $(WARN) -I. -o $@ $< $(LDLIBS)
$(BUILD)/sfv_bench_notrack: bench/sfv_bench.c safeverbs.h $(wildcard bench/*.h) examples/tcp.h | $(BUILD)
	$(CC) $(CFLAGS) -DSFV_TRACK_INFLIGHT=0 $(WARN) -I. -o $@ $< $(LDLIBS)
# The same release build with SAFEVERBS_STATIC (the data path inlined into the loop), for stage 5.
$(BUILD)/sfv_bench_static: bench/sfv_bench.c safeverbs.h $(wildcard bench/*.h) examples/tcp.h | $(BUILD)
	$(CC) $(CFLAGS) -DNDEBUG -DSAFEVERBS_STATIC $(WARN) -I. -o $@ $< $(LDLIBS)
all: $(BUILD)/sfv_bench_track $(BUILD)/sfv_bench_notrack $(BUILD)/sfv_bench_static
# The cost loop through libfabric's verbs provider (FI_EP_MSG over the RDMA-CM), for comparison:
# no safeverbs.h, linked with libfabric only (libfabric-dev, tools/deps.sh).
$(BUILD)/fi_cost: LDLIBS := -lfabric
$(BUILD)/fi_cost: bench/fi_cost.c | $(BUILD)
	$(CC) $(CFLAGS) -DNDEBUG $(WARN) -o $@ $< $(LDLIBS)
# UCX's uct am_short counted as the cost test counts safeverbs (make bench, stage 5).
$(BUILD)/uct_cost: LDLIBS = -luct -lucs
# The RDMA-CM part (SAFEVERBS_RDMACM) needs librdmacm as well.
$(BUILD)/test_rdmacm $(BUILD)/asan/test_rdmacm $(BUILD)/rping $(BUILD)/cm_setup $(BUILD)/fuzz/fuzz_cm_private $(BUILD)/fuzz/fuzz_ncm_signed: LDLIBS += -lrdmacm

deps:
	@bash tools/deps.sh

# The header alone and with its implementation, in two translation units, with gcc and clang
# (C99, C11) and g++ (C++11), SFV_DEBUG on and off, warnings as errors.
compile-matrix: deps
	@bash tests/compile_matrix.sh

# Fuzz targets (libFuzzer): tests/fuzz/fuzz_<name>.c, one per decoder of bytes from a peer,
# seeds in tests/fuzz/corpus/<name>/. On the host: decoding bytes needs no RDMA device.
# `make fuzz` runs each for FUZZ_SECONDS; `make check-fuzz` (part of `make check`) for
# FUZZ_CHECK_SECONDS. New inputs go under build/fuzz/, findings to build/fuzz/findings/.
# unsigned-integer-overflow: no size or offset sum may wrap, even where it is then tested (the
# header's SHA-256, whose sums are modulo 2^32 by definition, is exempt by an attribute).
FUZZ_CC            ?= clang
FUZZ_FLAGS         := -g -O1 -fsanitize=fuzzer,address,undefined,unsigned-integer-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_SECONDS       ?= 300
FUZZ_CHECK_SECONDS ?= 10
FUZZERS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
.PHONY: fuzzers fuzz check-fuzz fuzz-seeds

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c safeverbs.h $(wildcard tests/fuzz/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(WARN) -I. -o $@ $< $(LDLIBS)

fuzzers: $(FUZZERS)

check-fuzz: deps
	@$(MAKE) --no-print-directory -j$(JOBS) fuzzers
	@bash tests/fuzz/run.sh check $(FUZZ_CHECK_SECONDS)

fuzz: deps
	@$(MAKE) --no-print-directory fuzzers
	@bash tests/fuzz/run.sh fuzz $(FUZZ_SECONDS)

# Writes the seed corpora again (tests/fuzz/seeds.c); only needed when a format changes.
fuzz-seeds: tests/fuzz/seeds.c safeverbs.h
	@mkdir -p $(BUILD)/fuzz
	$(FUZZ_CC) -g $(WARN) -I. -o $(BUILD)/fuzz/seeds $< $(LDLIBS)
	$(BUILD)/fuzz/seeds

check: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@$(MAKE) --no-print-directory check-nodev
	@$(MAKE) --no-print-directory compile-matrix
	@$(MAKE) --no-print-directory check-fuzz
	@$(MAKE) --no-print-directory consumers
	@$(MAKE) --no-print-directory check-docs
	@SAFEVERBS_VM_KERNEL="$${SAFEVERBS_VM_KERNEL:-6.1 6.12}" $(ON_RXE) bash tests/run.sh

# On this host, no device needed (the fake-NIC tests need no libibverbs either): a failure shows in
# seconds, before the guest boots.
check-nodev:
	@$(MAKE) --no-print-directory -j$(JOBS) $(NODEV) $(HOST_TESTS)
	@bash tests/nodev/run.sh

# The demo builds only the two examples it runs.
demo: deps
	@$(MAKE) --no-print-directory $(BUILD)/devices $(BUILD)/pingpong
	@$(ON_RXE) bash examples/demo.sh

bench: deps
	@$(MAKE) --no-print-directory all
	@bash bench/run.sh

clean:
	rm -rf $(BUILD)

# ---- Install (header-only, like Debian's libstb-dev): the header, pkg-config files, a CMake
# package config and the man pages. `make install PREFIX=/usr/local DESTDIR=`; `make uninstall`.
PREFIX     ?= /usr/local
DESTDIR    ?=
INCDIR     := $(PREFIX)/include
PCDIR      := $(PREFIX)/share/pkgconfig
CMAKEDIR   := $(PREFIX)/share/cmake/safeverbs
MANDIR     := $(PREFIX)/share/man
VERSION := $(shell sed -n 's/^\#define SAFEVERBS_VERSION_STRING "\(.*\)"/\1/p' safeverbs.h)
MAJOR  := $(word 1,$(subst ., ,$(VERSION)))
MINOR  := $(word 2,$(subst ., ,$(VERSION)))
SUBST      = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' -e 's|@MAJOR@|$(MAJOR)|g' -e 's|@MINOR@|$(MINOR)|g'
MAN3       := $(wildcard docs/man/*.3)
MAN7       := $(wildcard docs/man/*.7)
.PHONY: install uninstall consumers

install:
	install -d $(DESTDIR)$(INCDIR) $(DESTDIR)$(PCDIR) $(DESTDIR)$(CMAKEDIR)
	install -m 644 safeverbs.h $(DESTDIR)$(INCDIR)/safeverbs.h
	$(SUBST) pkg/safeverbs.pc.in >$(DESTDIR)$(PCDIR)/safeverbs.pc
	$(SUBST) pkg/safeverbs-rdmacm.pc.in >$(DESTDIR)$(PCDIR)/safeverbs-rdmacm.pc
	install -m 644 pkg/safeverbs-config.cmake $(DESTDIR)$(CMAKEDIR)/safeverbs-config.cmake
	$(SUBST) pkg/safeverbs-config-version.cmake.in >$(DESTDIR)$(CMAKEDIR)/safeverbs-config-version.cmake
	$(if $(MAN3),install -d $(DESTDIR)$(MANDIR)/man3 && install -m 644 $(MAN3) $(DESTDIR)$(MANDIR)/man3/)
	$(if $(MAN7),install -d $(DESTDIR)$(MANDIR)/man7 && install -m 644 $(MAN7) $(DESTDIR)$(MANDIR)/man7/)

uninstall:
	rm -f $(DESTDIR)$(INCDIR)/safeverbs.h $(DESTDIR)$(PCDIR)/safeverbs.pc $(DESTDIR)$(PCDIR)/safeverbs-rdmacm.pc
	rm -f $(DESTDIR)$(CMAKEDIR)/safeverbs-config.cmake $(DESTDIR)$(CMAKEDIR)/safeverbs-config-version.cmake
	-rmdir $(DESTDIR)$(CMAKEDIR) 2>/dev/null
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(MAN3))) $(addprefix $(DESTDIR)$(MANDIR)/man7/,$(notdir $(MAN7)))

# The consumers of tests/consumers/ (CMake, Meson through pkg-config, Meson subproject, plain
# pkg-config), built on this host against a temporary install; tests/consumers.test.sh runs them
# on rxe. `make check` builds them before the guest starts.
consumers: deps
	@bash tests/consumers/build.sh

# The API reference (docs/API.md, docs/man/*.3, docs/man/safeverbs.7), generated from the header
# by tools/gen_api.py. `make docs` writes it; `make check-docs` (part of `make check`) fails when
# it is stale, when a public function has no entry, or when a comment promises a result the
# code cannot return.
.PHONY: docs check-docs
docs:
	@rm -f docs/man/*.3 docs/man/*.7
	@python3 tools/gen_api.py docs

check-docs:
	@python3 tools/gen_api.py --check

# tests/nodev/test_log.c runs the tests of tests/test_log.c on the fake NIC.
$(BUILD)/nodev/test_log $(BUILD)/nodev/asan/test_log: tests/test_log.c

# examples/mpi_allgather.c needs Open MPI's headers: built with mpicc where it exists (tools/deps.sh
# installs it); without, it builds to a program that says so and exits 77.
$(BUILD)/mpi_allgather: CC := $(if $(shell command -v mpicc 2>/dev/null),mpicc,$(CC))

# C++: examples/raii.cpp (handles in std::unique_ptr, a scope from a capturing lambda), warnings
# as errors; tests/cxx.test.sh runs it on rxe.
CXX ?= g++
all: $(BUILD)/raii
$(BUILD)/raii: examples/raii.cpp safeverbs.h | $(BUILD)
	$(CXX) -std=c++17 $(CFLAGS) $(WARN) -I. -o $@ $< $(LDLIBS)
all: $(BUILD)/readme_cxx.o
$(BUILD)/readme_cxx.o: tests/compile/readme_cxx.cpp safeverbs.h | $(BUILD)
	$(CXX) -std=c++11 $(WARN) -I. -c -o $@ $<
