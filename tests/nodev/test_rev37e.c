/* test_rev37e.c - review 37e: building safeverbs.h in a user's project. Two promises: the header
   builds without a warning under the strict flags a user turns on ("drop the header in ... it
   builds warning-free"), and its implementation has no undefined behaviour, in a C++ file too
   ("In exactly one C or C++ file, define SAFEVERBS_IMPLEMENTATION").

   The first is checked as this file compiles: the header is included with -Wundef, -Wconversion
   and -Wsign-conversion as errors (before the fix: #if on SFV__ASAN / SFV__VALGRIND never
   defined; CPU_SET and ibv_reg_mr given an int where rdma-core and glibc's macros take it
   unsigned; clang's -Wstring-conversion on SFV_ASSERT(!"...")). The configurations that need a
   flag of their own (gcc -Og, an old _POSIX_C_SOURCE) are in tests/compile_matrix.sh.
   The second: this file is also built as C++ with UBSan (build/nodev/cxx/test_rev37e, clang++
   -fsanitize=undefined, whose enum check C does not have), so it may use nothing C++ refuses. */
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wundef"
#pragma GCC diagnostic error "-Wconversion"
#pragma GCC diagnostic error "-Wsign-conversion"
#include "fake_env.h"
#pragma GCC diagnostic pop

#include <string.h>

static unsigned r7_wcs, r7_bad_opcodes;
/* on_wc: every completion handed out names an opcode of the enum */
static void r7_on_wc(const sfv_work_completion *wc, void *user) {
    (void)user;
    r7_wcs++;
    if ((unsigned)wc->opcode > (unsigned)SFV_WC_OP_FETCH_ADD) r7_bad_opcodes++;
}
/* fn: an unsignaled send last (the scope fences it with its own zero-length write) */
static sfv_result r7_unsignaled_fn(sfv_channel *ch, void *user) {
    const tf_env *e = (const tf_env *)user;
    sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf + 1024, 8);
    return sfv_channel_post_send_unsignaled(ch, &g, 1);
}
/* fn: a signaled write with no handle, left to the scope, then an inject */
static sfv_result r7_write_inject_fn(sfv_channel *ch, void *user) {
    const tf_env *e = (const tf_env *)user;
    sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf + 1024, 8);
    sfv_result r = sfv_channel_post_write(ch, &g, 1, tf_at(e, 2048), NULL);
    return r ? r : sfv_channel_inject(ch, "ping", 4);
}

/* No undefined behaviour in the implementation, C or C++: the ops of a channel's own work (a
   scope's fence, the three injects, an abort's mark) were made sfv_wc_opcode values by a cast
   ((sfv_wc_opcode)0x7F and 0x7C-0x7E), which in C++ is undefined (the enum's values are 0-7):
   UBSan stopped the C++ build at the first inject or fence. The completions handed out still
   name only opcodes of the enum. */
static void t_own_ops_are_no_opcode(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scatter_element s[4];
    sfv_pending rx[4];
    sfv_work_completion wc;
    sfv_scope_report rep;
    size_t i;
    memset(&d, 0, sizeof d);
    d.max_send_wr = 8;
    d.timeout_ms = 5000;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    for (i = 0; i < 4; i++) {
        s[i] = sfv_mr_scatter_element(e.mr, e.buf + 64 * i, 64);
        CHECK_OK(sfv_channel_post_receive(b, &s[i], 1, &rx[i]));
    }
    /* the three injects, each tracked under its own op */
    CHECK_OK(sfv_channel_inject(a, "abcd", 4));
    CHECK_OK(sfv_channel_inject_write(a, "efgh", 4, tf_at(&e, 3072)));
    CHECK_OK(sfv_channel_inject_write_imm(a, "ijkl", 4, tf_at(&e, 3072), 7));
    CHECK_OK(sfv_pending_wait(&rx[0], 1000, &wc));
    CHECK(wc.opcode == SFV_WC_OP_RECV && wc.byte_len == 4);
    CHECK_OK(sfv_pending_wait(&rx[1], 1000, &wc));
    CHECK(wc.opcode == SFV_WC_OP_RECV_IMM && wc.imm_data == 7);
    /* a scope's fence, taken by the scope (a success: handed to no one; the send is) */
    r7_wcs = r7_bad_opcodes = 0;
    CHECK_OK(sfv_channel_scope_wc(a, r7_unsignaled_fn, &e, r7_on_wc, NULL, &rep));
    CHECK_EQ(rep.auto_polled, 1);
    CHECK_EQ(r7_wcs, 1);
    CHECK_OK(sfv_pending_wait(&rx[2], 1000, &wc));
    CHECK(wc.opcode == SFV_WC_OP_RECV && wc.byte_len == 8);
    /* a scope's own write and an inject after it */
    CHECK_OK(sfv_channel_scope_wc(a, r7_write_inject_fn, &e, r7_on_wc, NULL, &rep));
    CHECK_EQ(rep.auto_polled, 1);
    CHECK_EQ(r7_wcs, 2);
    CHECK_EQ(r7_bad_opcodes, 0);
    /* work in flight at destroy (the last receive): the abort's own write, and the flush */
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_destroy_channel(a));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_own_ops_are_no_opcode, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
