/* test_rev34e.c - hostile review 34e: SFV_TRACK_INFLIGHT (>>impl inflight) on the fake NIC.
   Every way work ends gives its scatter memory back to the program (ASan: not poisoned; valgrind:
   addressable, the bytes the completion says were written defined), and a posted receive's
   memory is the NIC's until its completion is consumed. Under valgrind the fake NIC's own copies
   into memory the NIC owns were reported as the program's errors: t_valgrind_sees_no_fake_dma
   runs the other tests under valgrind (where it is installed) to keep that so. */
#define _GNU_SOURCE
#include "fake_env.h"
#include <sys/wait.h>

#if defined(__SANITIZE_ADDRESS__)
#define RV_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RV_ASAN 1
#endif
#endif
#if RV_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* Valgrind's count of errors so far (0 outside valgrind). */
static unsigned rv_errors(void) {
#if SFV__VALGRIND
    return (unsigned)VALGRIND_COUNT_ERRORS;
#else
    return 0;
#endif
}
/* The program's own again: ASan and valgrind let it read and write [p, p + n), the first `defined`
   bytes defined (a branch on each reports nothing). */
static void rv_mine(unsigned char *p, size_t n, size_t defined) {
    volatile unsigned char *v = p;
    unsigned before = rv_errors();
    size_t i, z = 0;
#if RV_ASAN
    if (n) CHECK(__asan_region_is_poisoned(p, n) == NULL);
#endif
    for (i = 0; i < defined; i++)
        if (v[i] == 0) z++;
    for (i = 0; i < n; i++) v[i] = (unsigned char)(v[i] + 1);
    for (i = 0; i < n; i++) v[i] = (unsigned char)(v[i] - 1);
    (void)z;
    CHECK_EQ(rv_errors(), before);
}
/* The NIC's: ASan (aligned ends) and valgrind would report an access. */
static void rv_nics(unsigned char *p, size_t n) {
#if RV_ASAN
    CHECK(__asan_region_is_poisoned(p, n) != NULL);
#endif
#if SFV__VALGRIND
    if (RUNNING_ON_VALGRIND) {
        VALGRIND_DISABLE_ERROR_REPORTING; /* (the check's own report is no error of the test's) */
        CHECK(VALGRIND_CHECK_MEM_IS_ADDRESSABLE(p, n) != 0);
        VALGRIND_ENABLE_ERROR_REPORTING;
    }
#endif
    (void)p, (void)n;
}

/* a sends `len` bytes of buf + src to b (blocking). */
static void rv_send(tf_env *e, sfv_channel *a, size_t src, size_t len) {
    sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf + src, len);
    CHECK_OK(sfv_channel_send(a, &g, 1, NULL));
}

/* Receives into unaligned neighbours, consumed in every order by wait, poll and wait_all. */
static void t_recv_neighbours(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_scatter_element s[4];
    sfv_pending p[4];
    sfv_work_completion wc;
    static const size_t off[5] = {1000, 1005, 1013, 1030, 1031};
    int i;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    memset(e.buf, 9, 512);
    for (i = 0; i < 4; i++) s[i] = sfv_mr_scatter_element(e.mr, e.buf + off[i], off[i + 1] - off[i]);
    for (i = 0; i < 4; i++) CHECK_OK(sfv_channel_post_receive(b, &s[i], 1, &p[i]));
    rv_nics(e.buf + 1016, 8);
    for (i = 0; i < 4; i++) rv_send(&e, a, 0, off[i + 1] - off[i]);
    CHECK_OK(sfv_pending_wait(&p[2], 100, &wc));
    rv_mine(e.buf + off[2], off[3] - off[2], off[3] - off[2]);
    CHECK_OK(sfv_pending_poll(&p[0], &wc));
    rv_mine(e.buf + off[0], off[1] - off[0], off[1] - off[0]);
    CHECK_OK(sfv_pending_wait_all(&p[3], 1, 100, NULL));
    CHECK_OK(sfv_pending_wait(&p[1], 100, NULL));
    rv_mine(e.buf + 1000, 31, 31);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* A receive batch, a read batch and read requests, taken by their handles. */
static void t_batches(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_scatter_element s[3];
    sfv_pending p[3], rb;
    sfv_remote_mr rm[3];
    sfv_read_request rq[2];
    int i;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    memset(e.buf, 3, 512);
    for (i = 0; i < 3; i++) s[i] = sfv_mr_scatter_element(e.mr, e.buf + 1001 + 10 * i, 10);
    CHECK_OK(sfv_channel_post_receive_batch(b, s, 1, 3, p));
    rv_nics(e.buf + 1008, 8);
    for (i = 0; i < 3; i++) rv_send(&e, a, 0, 10);
    CHECK_OK(sfv_pending_wait_all(p, 3, 100, NULL));
    rv_mine(e.buf + 1001, 30, 30);
    for (i = 0; i < 3; i++) {
        s[i] = sfv_mr_scatter_element(e.mr, e.buf + 2003 + 7 * i, 7);
        rm[i] = sfv_remote_mr_make((uint64_t)(uintptr_t)e.buf, 7, sfv_mr_rkey(e.mr));
    }
    CHECK_OK(sfv_channel_post_read_batch(a, s, 1, 3, rm, &rb));
    CHECK_OK(sfv_pending_wait(&rb, 100, NULL));
    rv_mine(e.buf + 2003, 21, 21);
    rq[0].sges = &s[0]; rq[0].n = 1; rq[0].remote = rm[0];
    rq[1].sges = &s[1]; rq[1].n = 2; rq[1].remote = sfv_remote_mr_make((uint64_t)(uintptr_t)e.buf, 14, sfv_mr_rkey(e.mr));
    CHECK_OK(sfv_channel_post_reads(a, rq, 2, &rb));
    CHECK_OK(sfv_pending_wait(&rb, 100, NULL));
    rv_mine(e.buf + 2003, 21, 21);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static unsigned char *rv_scope_buf;
static sfv_mr *rv_scope_mr;
static sfv_result rv_scope_recv(sfv_channel *ch, void *user) {
    sfv_scatter_element s[2];
    (void)user;
    s[0] = sfv_mr_scatter_element(rv_scope_mr, rv_scope_buf + 1001, 13);
    s[1] = sfv_mr_scatter_element(rv_scope_mr, rv_scope_buf + 1014, 0);
    CHECK_OK(sfv_channel_post_receive(ch, s, 2, NULL));
    s[0] = sfv_mr_scatter_element(rv_scope_mr, rv_scope_buf + 1014, 13);
    CHECK_OK(sfv_channel_post_receive(ch, s, 1, NULL));
    rv_nics(rv_scope_buf + 1008, 8);
    return SFV_OK;
}
static sfv_result rv_scope_read(sfv_channel *ch, void *user) {
    sfv_scatter_element s = sfv_mr_scatter_element(rv_scope_mr, rv_scope_buf + 2001, 13);
    sfv_remote_mr r = sfv_remote_mr_make((uint64_t)(uintptr_t)rv_scope_buf, 13, sfv_mr_rkey(rv_scope_mr));
    sfv_pending p;
    (void)user;
    CHECK_OK(sfv_channel_post_read(ch, &s, 1, r, NULL));
    s = sfv_mr_scatter_element(rv_scope_mr, rv_scope_buf + 2014, 13);
    CHECK_OK(sfv_channel_post_read(ch, &s, 1, r, &p)); /* its handle left to the scope */
    return SFV_OK;
}
static int rv_wcs;
static void rv_on_wc(const sfv_work_completion *wc, void *user) {
    (void)user;
    CHECK_EQ(wc->result, SFV_OK);
    rv_wcs++;
    if (wc->opcode == SFV_WC_OP_RECV) rv_mine(rv_scope_buf + (wc->byte_len == 13 && rv_wcs == 1 ? 1001 : 1014), 13, 13);
}
/* Scopes: auto-poll (a deadline's flush, then completions), on_wc. */
static void t_scopes(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scope_report rep;
    sfv_gather_element g;
    sfv_pending p1, p2;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.timeout_ms = 100;
    tf_pair(&e, &d, &a, &b);
    rv_scope_buf = e.buf;
    rv_scope_mr = e.mr;
    memset(e.buf, 5, 512);
    CHECK_RESULT(sfv_channel_scope(b, rv_scope_recv, NULL, &rep), SFV_ERR_SCOPE_AUTOPOLL); /* nobody sends: flushed */
    rv_mine(e.buf + 1001, 26, 0);
    CHECK_OK(sfv_channel_reset(b));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_create_channel(e.pd, &d, &a));
    tf_connect(a, b);
    g = sfv_mr_gather_element(e.mr, e.buf, 13);
    CHECK_OK(sfv_channel_post_send(a, &g, 1, &p1));
    CHECK_OK(sfv_channel_post_send(a, &g, 1, &p2));
    rv_wcs = 0;
    CHECK_OK(sfv_channel_scope_wc(b, rv_scope_recv, NULL, rv_on_wc, NULL, &rep));
    CHECK_EQ(rv_wcs, 2);
    rv_mine(e.buf + 1001, 26, 26);
    CHECK_OK(sfv_pending_wait(&p1, 100, NULL));
    CHECK_OK(sfv_pending_wait(&p2, 100, NULL));
    CHECK_OK(sfv_channel_scope(a, rv_scope_read, NULL, &rep));
    rv_mine(e.buf + 2001, 26, 26);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* A fresh pair in place of *a, *b. */
static void rv_repair(tf_env *e, const sfv_channel_desc *d, sfv_channel **a, sfv_channel **b) {
    CHECK_OK(sfv_destroy_channel(*a));
    CHECK_OK(sfv_destroy_channel(*b));
    tf_pair(e, d, a, b);
}

/* Flushes: a reset, a destroy, a blocking call's deadline, an async event. */
static void t_flushes(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scatter_element s;
    sfv_pending p;
    sfv_work_completion wc;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.timeout_ms = 100;
    tf_pair(&e, &d, &a, &b);
    s = sfv_mr_scatter_element(e.mr, e.buf + 1003, 29);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &p));
    rv_nics(e.buf + 1008, 16);
    CHECK_OK(sfv_channel_reset(b));
    rv_mine(e.buf + 1003, 29, 0);
    CHECK_RESULT(sfv_pending_wait(&p, 100, &wc), SFV_ERR_WORK);
    rv_mine(e.buf + 1003, 29, 0);
    rv_repair(&e, &d, &a, &b);
    CHECK_RESULT(sfv_channel_receive(b, &s, 1, &wc), SFV_ERR_TIMEOUT);
    rv_mine(e.buf + 1003, 29, 0);
    rv_repair(&e, &d, &a, &b);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &p));
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_QP_FATAL, sfv_channel_raw_qp(b), 0);
    CHECK_RESULT(sfv_pending_wait(&p, 100, &wc), SFV_ERR_WORK);
    rv_mine(e.buf + 1003, 29, 0);
    rv_repair(&e, &d, &a, &b);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &p));
    CHECK_OK(sfv_destroy_channel(b));
    rv_mine(e.buf + 1003, 29, 0);
    CHECK_OK(sfv_destroy_channel(a));
    tf_close(&e);
}

/* An SRQ's receives: consumed, flushed by its destroy. */
static void t_srq(void) {
    tf_env e;
    sfv_srq *srq;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scatter_element s[2];
    sfv_pending p[2];
    tf_open(&e, 4096);
    memset(e.buf, 4, 512);
    CHECK_OK(sfv_create_srq(e.pd, NULL, &srq));
    memset(&d, 0, sizeof d);
    d.timeout_ms = 100;
    d.srq = srq;
    CHECK_OK(sfv_create_channel(e.pd, &d, &b));
    d.srq = NULL;
    CHECK_OK(sfv_create_channel(e.pd, &d, &a));
    tf_connect(a, b);
    s[0] = sfv_mr_scatter_element(e.mr, e.buf + 1001, 21);
    s[1] = sfv_mr_scatter_element(e.mr, e.buf + 1022, 21);
    CHECK_OK(sfv_srq_post_receive_batch(srq, s, 1, 2, p));
    rv_nics(e.buf + 1008, 32);
    rv_send(&e, a, 0, 21);
    CHECK_OK(sfv_pending_wait(&p[0], 100, NULL));
    rv_mine(e.buf + 1001, 21, 21);
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_destroy_channel(a));
    rv_nics(e.buf + 1024, 16);
    CHECK_OK(sfv_destroy_srq(srq));
    rv_mine(e.buf + 1022, 21, 0);
    tf_close(&e);
}

/* Inline sends, injects, atomics, a write with immediate into a receive. */
static void t_inline_inject_atomic(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_scatter_element s;
    sfv_gather_element g;
    sfv_pending p;
    sfv_work_completion wc;
    sfv_remote_mr r;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    memset(e.buf, 6, 512);
    s = sfv_mr_scatter_element(e.mr, e.buf + 1001, 40);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &p));
    g = sfv_mr_gather_element(e.mr, e.buf + 3, 17);
    CHECK_OK(sfv_channel_send(a, &g, 1, NULL)); /* inline */
    CHECK_OK(sfv_pending_wait(&p, 100, &wc));
    CHECK_EQ(wc.byte_len, 17);
    rv_mine(e.buf + 1001, 17, 17);
    rv_mine(e.buf + 1001, 40, 0);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &p));
    CHECK_OK(sfv_channel_inject(a, e.buf + 5, 9));
    CHECK_OK(sfv_pending_wait(&p, 100, &wc));
    rv_mine(e.buf + 1001, 9, 9);
    rv_mine(e.buf + 5, 9, 9);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &p));
    r = sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 2000), 64, sfv_mr_rkey(e.mr));
    CHECK_OK(sfv_channel_write_imm(a, &g, 1, r, 7, NULL));
    CHECK_OK(sfv_pending_wait(&p, 100, &wc));
    rv_mine(e.buf + 1001, 40, 0);
    rv_mine(e.buf + 2000, 17, 17);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    {
        sfv_channel_desc d;
        sfv_mr *am;
        memset(&d, 0, sizeof d);
        d.access = SFV_ACCESS_REMOTE_ATOMIC | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ;
        tf_pair(&e, &d, &a, &b);
        CHECK_OK(sfv_reg_mr_access(e.pd, e.buf, 4096, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_ATOMIC | SFV_ACCESS_REMOTE_WRITE, &am));
        s = sfv_mr_scatter_element(am, e.buf + 1512, 8);
        r = sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 8), 8, sfv_mr_rkey(am));
        CHECK_OK(sfv_channel_fetch_add(a, &s, r, 1, NULL));
        rv_mine(e.buf + 1512, 8, 8);
        CHECK_OK(sfv_channel_compare_swap(a, &s, r, 0, 1, NULL));
        rv_mine(e.buf + 1512, 8, 8);
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        CHECK_OK(sfv_dereg_mr(am));
    }
    tf_close(&e);
}

/* Many peers: gather_receive, gather_read. */
static void t_many(void) {
    tf_env e;
    sfv_multi_channel *m;
    sfv_channel *b;
    sfv_channel_desc d;
    sfv_endpoint em, eb;
    sfv_peer_receive req;
    sfv_peer_read rd;
    sfv_scatter_element s;
    sfv_work_completion wc;
    tf_open(&e, 4096);
    memset(e.buf, 8, 512);
    memset(&d, 0, sizeof d);
    d.timeout_ms = 100;
    CHECK_OK(sfv_create_multi_channel(e.pd, 1, &d, &m));
    CHECK_OK(sfv_create_channel(e.pd, &d, &b));
    CHECK_OK(sfv_multi_channel_endpoints(m, &em, 1));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_channel_handshake(b, &em));
    CHECK_OK(sfv_multi_channel_handshake(m, &eb, 1));
    s = sfv_mr_scatter_element(e.mr, e.buf + 1001, 33);
    req.peer = 0;
    req.sges = &s;
    req.n = 1;
    CHECK_RESULT(sfv_multi_channel_gather_receive(m, &req, 1, &wc), SFV_ERR_WORK);
    rv_mine(e.buf + 1001, 33, 0);
    rd.peer = 0;
    rd.sges = &s;
    rd.n = 1;
    rd.remote = sfv_remote_mr_make((uint64_t)(uintptr_t)e.buf, 33, sfv_mr_rkey(e.mr));
    CHECK_OK(sfv_destroy_multi_channel(m));
    CHECK_OK(sfv_create_multi_channel(e.pd, 1, &d, &m));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_create_channel(e.pd, &d, &b));
    CHECK_OK(sfv_multi_channel_endpoints(m, &em, 1));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_channel_handshake(b, &em));
    CHECK_OK(sfv_multi_channel_handshake(m, &eb, 1));
    CHECK_OK(sfv_multi_channel_gather_read(m, &rd, 1, &wc));
    rv_mine(e.buf + 1001, 33, 33);
    CHECK_OK(sfv_destroy_multi_channel(m));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* A buffer of an odd size, an MR over exactly it: elements at its very end, zero-length ones. */
static void t_mr_end(void) {
    tf_env e;
    sfv_channel *a, *b;
    unsigned char *odd = (unsigned char *)malloc(1001);
    sfv_mr *om;
    sfv_scatter_element s[3];
    sfv_pending p[2];
    sfv_work_completion wc;
    CHECK(odd);
    memset(odd, 1, 1001);
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    memset(e.buf, 2, 512);
    CHECK_OK(sfv_reg_mr_local(e.pd, odd, 1001, &om));
    s[0] = sfv_mr_scatter_element(om, odd + 990, 0);
    s[1] = sfv_mr_scatter_element(om, odd + 990, 11);
    s[2] = sfv_mr_scatter_element(om, odd + 1001, 0);
    CHECK_OK(sfv_channel_post_receive(b, s, 3, &p[0]));
    rv_nics(odd + 992, 9);
    s[0] = sfv_mr_scatter_element(om, odd + 985, 5);
    CHECK_OK(sfv_channel_post_receive(b, s, 1, &p[1]));
    rv_send(&e, a, 0, 11);
    rv_send(&e, a, 0, 5);
    CHECK_OK(sfv_pending_wait(&p[0], 100, &wc));
    rv_mine(odd + 990, 11, 11);
    CHECK_OK(sfv_pending_wait(&p[1], 100, &wc));
    rv_mine(odd + 985, 16, 16);
    s[0] = sfv_mr_scatter_element(om, odd + 995, 6);
    CHECK_OK(sfv_channel_post_receive(b, s, 1, &p[0]));
    rv_nics(odd + 995, 6);
    CHECK_OK(sfv_destroy_channel(b));
    rv_mine(odd + 995, 6, 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_dereg_mr(om));
    free(odd);
    tf_close(&e);
}

static sfv_result rv_unsig(sfv_channel *ch, void *user) {
    sfv_scatter_element s = sfv_mr_scatter_element(rv_scope_mr, rv_scope_buf + 2001, 13);
    sfv_remote_mr r = sfv_remote_mr_make((uint64_t)(uintptr_t)rv_scope_buf, 13, sfv_mr_rkey(rv_scope_mr));
    (void)user;
    CHECK_OK(sfv_channel_post_read_unsignaled(ch, &s, 1, r));
    s = sfv_mr_scatter_element(rv_scope_mr, rv_scope_buf + 2014, 13);
    CHECK_OK(sfv_channel_post_read_unsignaled(ch, &s, 1, r));
    rv_nics(rv_scope_buf + 2016, 8);
    CHECK_OK(sfv_channel_inject_write(ch, rv_scope_buf + 100, 4, sfv_remote_mr_make((uint64_t)(uintptr_t)(rv_scope_buf + 3000), 4, sfv_mr_rkey(rv_scope_mr))));
    return SFV_OK;
}
static sfv_result rv_manual(sfv_channel *ch, void *user) {
    sfv_scatter_element s = sfv_mr_scatter_element(rv_scope_mr, rv_scope_buf + 2001, 13);
    sfv_remote_mr r = sfv_remote_mr_make((uint64_t)(uintptr_t)rv_scope_buf, 13, sfv_mr_rkey(rv_scope_mr));
    sfv_pending p[2];
    (void)user;
    CHECK_OK(sfv_channel_post_read(ch, &s, 1, r, &p[0]));
    s = sfv_mr_scatter_element(rv_scope_mr, rv_scope_buf + 2014, 13);
    CHECK_OK(sfv_channel_post_read(ch, &s, 1, r, &p[1]));
    CHECK_OK(sfv_pending_wait_all(p, 2, 100, NULL));
    rv_mine(rv_scope_buf + 2001, 26, 26);
    return SFV_OK;
}
/* Unsignaled reads and an inject in a scope (fenced), a manual scope's own waits. */
static void t_unsignaled_manual(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_scope_report rep;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    rv_scope_buf = e.buf;
    rv_scope_mr = e.mr;
    memset(e.buf, 5, 512);
    CHECK_OK(sfv_channel_scope(a, rv_unsig, NULL, &rep));
    rv_mine(e.buf + 2001, 26, 26);
    CHECK_OK(sfv_channel_manual_scope(a, rv_manual, NULL));
    rv_mine(e.buf + 2001, 26, 26);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* DMA-BUF elements are never host memory: nothing poisoned, a host buffer at the same number untouched. */
static void t_dmabuf_never_poisoned(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_mr *dm;
    sfv_scatter_element s;
    sfv_pending p;
    uint64_t iova;
    fk_set_dmabuf(true);
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    iova = (uint64_t)(uintptr_t)e.buf;
    CHECK_OK(sfv_reg_dmabuf_mr_local(e.pd, 3, iova & 4095, 256, iova, &dm));
    CHECK_OK(sfv_mr_scatter_element_checked(dm, e.buf + 16, 64, &s));
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &p));
    rv_mine(e.buf + 16, 64, 0);
    CHECK_OK(sfv_destroy_channel(b));
    rv_mine(e.buf + 16, 64, 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_dereg_mr(dm));
    fk_set_dmabuf(false);
    tf_close(&e);
}


/* The promise (>>impl inflight): valgrind sees the NIC's ownership, and a correct program gets no
   report. The fake NIC's DMA (fk_dma) wrote into the memory safeverbs had made NOACCESS for the
   NIC, and valgrind reported each received byte as an invalid write of the program's: every
   fake-NIC test that receives data failed under valgrind. Runs this file's other tests under
   valgrind (skipped where it is not installed, or already running under it). */
/* Whether valgrind holds [p, p + n) all defined (true outside valgrind: nothing to ask). */
static bool rv_defined(const unsigned char *p, size_t n) {
#if SFV__VALGRIND
    unsigned char bits[256];
    size_t i;
    if (!RUNNING_ON_VALGRIND) return true;
    CHECK(n <= sizeof bits);
    CHECK_EQ(VALGRIND_GET_VBITS(p, bits, n), 1);
    for (i = 0; i < n; i++)
        if (bits[i]) return false;
#endif
    (void)p; (void)n;
    return true;
}

/* Session 26: the bytes of a receive's element past byte_len were UNDEFINED for valgrind after
   consumption: a program that checks they are untouched (as the NIC left them) was told it read
   uninitialised memory. Where they were all defined when posted, a success gives them back
   defined; a flush does not (the NIC may have written part), nor does a buffer the program never
   wrote past what the NIC wrote (still told). */
static void t_untouched_bytes_stay_defined(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_scatter_element s;
    sfv_pending p;
    sfv_work_completion wc;
    unsigned char *raw = (unsigned char *)malloc(4096);
    sfv_mr *mr;
    size_t i;
    CHECK(raw != NULL);
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    memset(e.buf, 5, 16);
    memset(e.buf + 1024, 0x77, 64);
    s = sfv_mr_scatter_element(e.mr, e.buf + 1024, 64);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &p));
    rv_send(&e, a, 0, 16);
    CHECK_OK(sfv_pending_wait(&p, 100, &wc));
    CHECK_EQ(wc.byte_len, 16);
    CHECK(rv_defined(e.buf + 1024, 64));
    for (i = 16; i < 64; i++) CHECK_EQ(e.buf[1024 + i], 0x77); /* untouched, and read without a report */
    /* a flushed receive: the NIC may have written part of it (the work it was running when the QP
       failed completes flushed too): undefined */
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &p));
    CHECK_OK(sfv_channel_reset(b));
    CHECK_RESULT(sfv_pending_wait(&p, 100, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
#if SFV__VALGRIND
    if (RUNNING_ON_VALGRIND) CHECK(!rv_defined(e.buf + 1024, 64));
#endif
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* memory the program never wrote: only what the NIC wrote is defined */
    tf_pair(&e, NULL, &a, &b);
    CHECK_OK(sfv_reg_mr_local(e.pd, raw, 4096, &mr));
    s = sfv_mr_scatter_element(mr, raw, 64);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &p));
    rv_send(&e, a, 0, 16);
    CHECK_OK(sfv_pending_wait(&p, 100, &wc));
    CHECK(rv_defined(raw, 16));
#if SFV__VALGRIND
    if (RUNNING_ON_VALGRIND) CHECK(!rv_defined(raw + 16, 48));
#endif
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dereg_mr(mr));
    free(raw);
    tf_close(&e);
}

static void t_valgrind_sees_no_fake_dma(void) {
    static const char *const names[] = {"t_recv_neighbours", "t_batches", "t_srq", "t_inline_inject_atomic", "t_mr_end",
                                        "t_untouched_bytes_stay_defined"};
    char self[4096];
    ssize_t len;
    size_t i;
#if RV_ASAN
    SKIP("an ASan build does not run under valgrind (the plain build does this)");
#endif
#if SFV__VALGRIND
    if (RUNNING_ON_VALGRIND) SKIP("already under valgrind");
#endif
    if (system("command -v valgrind >/dev/null 2>&1") != 0) SKIP("valgrind not installed");
    len = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(len > 0);
    self[len] = 0;
    for (i = 0; i < COUNT_OF(names); i++) {
        int st = 0;
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            freopen("/dev/null", "w", stdout);
            execlp("valgrind", "valgrind", "-q", "--error-exitcode=3", self, names[i], (char *)NULL);
            _exit(127);
        }
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) FAIL("%s under valgrind: %s %d", names[i], WIFEXITED(st) ? "exit" : "signal",
                                                         WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
}

static const harness_test TESTS[] = {
    TEST(t_recv_neighbours, 10),
    TEST(t_batches, 10),
    TEST(t_scopes, 10),
    TEST(t_flushes, 10),
    TEST(t_srq, 10),
    TEST(t_inline_inject_atomic, 10),
    TEST(t_many, 10),
    TEST(t_mr_end, 10),
    TEST(t_unsignaled_manual, 10),
    TEST(t_dmabuf_never_poisoned, 10),
    TEST(t_untouched_bytes_stay_defined, 10),
    TEST(t_valgrind_sees_no_fake_dma, 60),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
