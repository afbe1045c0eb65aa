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
ON_RXE   := bash tools/on-rxe.sh

.PHONY: all deps check demo bench compile-matrix clean

all: $(TESTS) $(ASAN_TESTS) $(EXAMPLES) $(BENCHES)

$(BUILD):
	@mkdir -p $@

$(BUILD)/test_%: tests/test_%.c tests/sfv_test.h safeverbs.h | $(BUILD)
	$(CC) $(CFLAGS) $(WARN) -I. -o $@ $< $(LDLIBS)

# The same tests with AddressSanitizer and LeakSanitizer: no overflow, no leak, on any path.
$(BUILD)/asan/test_%: tests/test_%.c tests/sfv_test.h safeverbs.h
	@mkdir -p $(@D)
	$(CC) -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined $(WARN) -I. -o $@ $< $(LDLIBS)

$(BUILD)/%: examples/%.c safeverbs.h $(wildcard examples/*.h) | $(BUILD)
	$(CC) $(CFLAGS) $(WARN) -I. -o $@ $< $(LDLIBS)

$(BUILD)/%: bench/%.c safeverbs.h $(wildcard bench/*.h) examples/tcp.h | $(BUILD)
	$(CC) $(CFLAGS) $(WARN) -I. -o $@ $< $(LDLIBS)

deps:
	@bash tools/deps.sh

# The header alone and with its implementation, in two translation units, with gcc and clang
# (C99, C11) and g++ (C++11), SFV_DEBUG on and off, warnings as errors.
compile-matrix: deps
	@bash tests/compile_matrix.sh

check: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory compile-matrix
	@SAFEVERBS_VM_KERNEL="$${SAFEVERBS_VM_KERNEL:-6.1 6.12}" $(ON_RXE) bash tests/run.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@$(ON_RXE) bash examples/demo.sh

bench: deps
	@$(MAKE) --no-print-directory all
	@bash bench/run.sh

clean:
	rm -rf $(BUILD)
