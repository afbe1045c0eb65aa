/* test_rev33d.c - hostile review 33d on the fake NIC: what the posted work requests carry (the
   elements, in order, remote regions, immediates, atomics' operands, inline and inject copies)
   and what comes back in sfv_work_completion. No bug was confirmed in this area: these are
   coverage tests (they held on the header as it was), kept so that a change there is caught. */
#include "fake_env.h"

static sfv_channel_desc r_desc(uint32_t inl) {
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    d.max_inline_data = inl;
    d.access = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_ATOMIC;
    d.timeout_ms = 2000;
    return d;
}
static void r_fill(unsigned char *p, size_t n, unsigned seed) {
    size_t i;
    for (i = 0; i < n; i++) p[i] = (unsigned char)(seed * 31u + i * 7u + 1u);
}

/* Coverage: a send's elements arrive in order across the receive's elements, inline (copied at
   the post) and not; one element over max_send_sge is refused. */
static void t_cover33_send(void) {
    int k;
    for (k = 0; k < 2; k++) {
        tf_env e;
        sfv_channel_desc d = r_desc(k ? SFV_INLINE_NONE : 0);
        sfv_channel *a, *b;
        sfv_gather_element g[5];
        sfv_scatter_element s[4];
        sfv_pending tx, rx;
        sfv_work_completion wc;
        unsigned char want[64];
        size_t lens[4] = {3, 5, 7, 11}, offs[4] = {700, 100, 400, 250}, at = 0;
        size_t i;
        tf_open(&e, 4096);
        tf_pair(&e, &d, &a, &b);
        for (i = 0; i < 4; i++) {
            r_fill(e.buf + offs[i], lens[i], (unsigned)i + 1);
            memcpy(want + at, e.buf + offs[i], lens[i]);
            at += lens[i];
            g[i] = sfv_mr_gather_element(e.mr, e.buf + offs[i], lens[i]);
        }
        g[4] = g[0];
        CHECK_RESULT(sfv_channel_post_send(a, g, 5, &tx), SFV_ERR_INVALID);
        CHECK_OK(sfv_channel_post_send(a, g, 4, &tx));
        /* inline: the source is the caller's again at once (the receive is not posted yet, so
           nothing has run); not inline, it stays the NIC's until the work is done */
        if (k == 0)
            for (i = 0; i < 4; i++) memset(e.buf + offs[i], 0xEE, lens[i]);
        s[0] = sfv_mr_scatter_element(e.mr, e.buf + 2000, 4);
        s[1] = sfv_mr_scatter_element(e.mr, e.buf + 1500, 4);
        s[2] = sfv_mr_scatter_element(e.mr, e.buf + 3000, 10);
        s[3] = sfv_mr_scatter_element(e.mr, e.buf + 2500, 8);
        CHECK_OK(sfv_channel_post_receive(b, s, 4, &rx));
        CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
        CHECK_EQ(wc.byte_len, 26);
        CHECK_EQ(wc.opcode, SFV_WC_OP_RECV);
        CHECK(!wc.has_imm);
        CHECK(memcmp(e.buf + 2000, want, 4) == 0);
        CHECK(memcmp(e.buf + 1500, want + 4, 4) == 0);
        CHECK(memcmp(e.buf + 3000, want + 8, 10) == 0);
        CHECK(memcmp(e.buf + 2500, want + 18, 8) == 0);
        CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
        CHECK_EQ(wc.opcode, SFV_WC_OP_SEND);
        CHECK_EQ(wc.byte_len, 0);
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        tf_close(&e);
    }
}

/* Coverage: write_imm, send_imm */
static void t_cover33_imm(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(SFV_INLINE_NONE);
    sfv_channel *a, *b;
    sfv_gather_element g[2];
    sfv_scatter_element s;
    sfv_pending tx, rx;
    sfv_work_completion wc;
    sfv_remote_mr rm;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    r_fill(e.buf, 100, 9);
    g[0] = sfv_mr_gather_element(e.mr, e.buf + 50, 10);
    g[1] = sfv_mr_gather_element(e.mr, e.buf, 5);
    s = sfv_mr_scatter_element(e.mr, e.buf + 1000, 64);
    CHECK_OK(sfv_remote_mr_slice(sfv_mr_remote(e.mr), 2048, 15, &rm));
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_OK(sfv_channel_post_write_imm(a, g, 2, rm, 0x11223344u, &tx));
    CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_RECV_IMM);
    CHECK(wc.has_imm);
    CHECK_EQ(wc.imm_data, 0x11223344u);
    CHECK_EQ(wc.byte_len, 15);
    CHECK(memcmp(e.buf + 2048, e.buf + 50, 10) == 0);
    CHECK(memcmp(e.buf + 2058, e.buf, 5) == 0);
    CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_WRITE);
    CHECK(!wc.has_imm);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_OK(sfv_channel_post_send_imm(a, g, 2, 0xA1B2C3D4u, &tx));
    CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_RECV);
    CHECK(wc.has_imm);
    CHECK_EQ(wc.imm_data, 0xA1B2C3D4u);
    CHECK_EQ(wc.byte_len, 15);
    CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* Coverage: batches */
static void t_cover33_batches(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(0);
    sfv_channel *a, *b;
    sfv_gather_element g[6];
    sfv_scatter_element s[6];
    sfv_pending tx, rx[3];
    sfv_work_completion wc, wcs[3];
    sfv_remote_mr rms[3];
    size_t i;
    tf_open(&e, 8192);
    tf_pair(&e, &d, &a, &b);
    r_fill(e.buf, 600, 3);
    for (i = 0; i < 6; i++) g[i] = sfv_mr_gather_element(e.mr, e.buf + 100 * i, 10 + i);
    for (i = 0; i < 3; i++) s[i] = sfv_mr_scatter_element(e.mr, e.buf + 4000 + 100 * i, 64);
    CHECK_OK(sfv_channel_post_receive_batch(b, s, 1, 3, rx));
    CHECK_OK(sfv_channel_post_send_batch(a, g, 2, 3, &tx));
    CHECK_OK(sfv_pending_wait_all(rx, 3, 1000, wcs));
    for (i = 0; i < 3; i++) {
        CHECK_EQ(wcs[i].byte_len, 10 + 2 * i + 11 + 2 * i);
        CHECK(memcmp(e.buf + 4000 + 100 * i, e.buf + 200 * i, 10 + 2 * i) == 0);
        CHECK(memcmp(e.buf + 4000 + 100 * i + 10 + 2 * i, e.buf + 200 * i + 100, 11 + 2 * i) == 0);
    }
    CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    /* write batch */
    for (i = 0; i < 3; i++) rms[i] = sfv_remote_mr_make(sfv_mr_addr(e.mr) + 5000 + 300 * i, 300, sfv_mr_rkey(e.mr));
    CHECK_OK(sfv_channel_post_write_batch(a, g, 2, 3, rms, &tx));
    CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    for (i = 0; i < 3; i++) {
        CHECK(memcmp(e.buf + 5000 + 300 * i, e.buf + 200 * i, 10 + 2 * i) == 0);
        CHECK(memcmp(e.buf + 5000 + 300 * i + 10 + 2 * i, e.buf + 200 * i + 100, 11 + 2 * i) == 0);
    }
    /* read batch */
    for (i = 0; i < 6; i++) s[i] = sfv_mr_scatter_element(e.mr, e.buf + 7000 + 150 * i, 7);
    CHECK_OK(sfv_channel_post_read_batch(a, s, 2, 3, rms, &tx));
    CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    CHECK_EQ(wc.byte_len, 42);
    CHECK_EQ(wc.opcode, SFV_WC_OP_READ);
    for (i = 0; i < 3; i++) {
        CHECK(memcmp(e.buf + 7000 + 300 * i, e.buf + 5000 + 300 * i, 7) == 0);
        CHECK(memcmp(e.buf + 7000 + 300 * i + 150, e.buf + 5000 + 300 * i + 7, 7) == 0);
    }
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* Coverage: request batches */
static void t_cover33_requests(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(0);
    sfv_channel *a, *b;
    sfv_gather_element g[6];
    sfv_scatter_element s[3];
    sfv_pending tx, rx[3];
    sfv_work_completion wc, wcs[3];
    sfv_send_request sr[3];
    sfv_write_request wr[3];
    sfv_read_request rr[2];
    size_t i;
    tf_open(&e, 8192);
    tf_pair(&e, &d, &a, &b);
    r_fill(e.buf, 600, 5);
    for (i = 0; i < 6; i++) g[i] = sfv_mr_gather_element(e.mr, e.buf + 100 * i, 10 + i);
    for (i = 0; i < 3; i++) s[i] = sfv_mr_scatter_element(e.mr, e.buf + 4000 + 100 * i, 64);
    CHECK_OK(sfv_channel_post_receive_batch(b, s, 1, 3, rx));
    memset(sr, 0, sizeof sr);
    sr[0].sges = g; sr[0].n = 1; sr[0].has_imm = true; sr[0].imm = 0x01020304;
    sr[1].sges = NULL; sr[1].n = 0;
    sr[2].sges = g + 1; sr[2].n = 4; sr[2].has_imm = true; sr[2].imm = 0xFFEEDDCC;
    CHECK_OK(sfv_channel_post_sends(a, sr, 3, &tx));
    CHECK_OK(sfv_pending_wait_all(rx, 3, 1000, wcs));
    CHECK_EQ(wcs[0].byte_len, 10);
    CHECK(wcs[0].has_imm);
    CHECK_EQ(wcs[0].imm_data, 0x01020304);
    CHECK_EQ(wcs[1].byte_len, 0);
    CHECK(!wcs[1].has_imm);
    CHECK_EQ(wcs[2].byte_len, 11 + 12 + 13 + 14);
    CHECK_EQ(wcs[2].imm_data, 0xFFEEDDCCu);
    CHECK(memcmp(e.buf + 4200, e.buf + 100, 11) == 0);
    CHECK(memcmp(e.buf + 4200 + 11, e.buf + 200, 12) == 0);
    CHECK(memcmp(e.buf + 4200 + 23, e.buf + 300, 13) == 0);
    CHECK(memcmp(e.buf + 4200 + 36, e.buf + 400, 14) == 0);
    CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    /* writes */
    CHECK_OK(sfv_channel_post_receive(b, s, 1, &rx[0]));
    memset(wr, 0, sizeof wr);
    for (i = 0; i < 3; i++) {
        wr[i].sges = g + i; wr[i].n = 2;
        wr[i].remote = sfv_remote_mr_make(sfv_mr_addr(e.mr) + 5000 + 300 * i, 100, sfv_mr_rkey(e.mr));
    }
    wr[1].has_imm = true; wr[1].imm = 77;
    CHECK_OK(sfv_channel_post_writes(a, wr, 3, &tx));
    CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    CHECK_OK(sfv_pending_wait(&rx[0], 1000, &wc));
    CHECK_EQ(wc.imm_data, 77);
    CHECK_EQ(wc.opcode, SFV_WC_OP_RECV_IMM);
    CHECK_EQ(wc.byte_len, 11 + 12);
    for (i = 0; i < 3; i++) {
        CHECK(memcmp(e.buf + 5000 + 300 * i, e.buf + 100 * i, 10 + i) == 0);
        CHECK(memcmp(e.buf + 5000 + 300 * i + 10 + i, e.buf + 100 * i + 100, 11 + i) == 0);
    }
    /* reads */
    memset(rr, 0, sizeof rr);
    s[0] = sfv_mr_scatter_element(e.mr, e.buf + 7000, 5);
    s[1] = sfv_mr_scatter_element(e.mr, e.buf + 7100, 6);
    s[2] = sfv_mr_scatter_element(e.mr, e.buf + 7200, 7);
    rr[0].sges = s; rr[0].n = 1; rr[0].remote = sfv_remote_mr_make(sfv_mr_addr(e.mr) + 5000, 5, sfv_mr_rkey(e.mr));
    rr[1].sges = s + 1; rr[1].n = 2; rr[1].remote = sfv_remote_mr_make(sfv_mr_addr(e.mr) + 5300, 13, sfv_mr_rkey(e.mr));
    CHECK_OK(sfv_channel_post_reads(a, rr, 2, &tx));
    CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    CHECK_EQ(wc.byte_len, 18);
    CHECK(memcmp(e.buf + 7000, e.buf + 5000, 5) == 0);
    CHECK(memcmp(e.buf + 7100, e.buf + 5300, 6) == 0);
    CHECK(memcmp(e.buf + 7200, e.buf + 5306, 7) == 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* Coverage: atomics */
static void t_cover33_atomics(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(0);
    sfv_channel *a, *b;
    sfv_scatter_element old;
    sfv_work_completion wc;
    uint64_t v;
    sfv_remote_mr word;
    tf_open(&e, 4096);
    sfv_dereg_mr(e.mr);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf, e.len, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_ATOMIC, &e.mr));
    tf_pair(&e, &d, &a, &b);
    v = 0x1122334455667788ull;
    memcpy(e.buf + 1024, &v, 8);
    old = sfv_mr_scatter_element(e.mr, e.buf + 16, 8);
    CHECK_OK(sfv_remote_mr_slice(sfv_mr_remote(e.mr), 1024, 8, &word));
    CHECK_OK(sfv_channel_compare_swap(a, &old, word, 0x1122334455667788ull, 0xCAFEBABEDEADBEEFull, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_COMP_SWAP);
    CHECK_EQ(wc.byte_len, 8);
    memcpy(&v, e.buf + 16, 8);
    CHECK(v == 0x1122334455667788ull);
    memcpy(&v, e.buf + 1024, 8);
    CHECK(v == 0xCAFEBABEDEADBEEFull);
    CHECK_OK(sfv_channel_fetch_add(a, &old, word, 0x10, &wc));
    CHECK_EQ(wc.opcode, SFV_WC_OP_FETCH_ADD);
    memcpy(&v, e.buf + 16, 8);
    CHECK(v == 0xCAFEBABEDEADBEEFull);
    memcpy(&v, e.buf + 1024, 8);
    CHECK(v == 0xCAFEBABEDEADBEFFull);
    CHECK_RESULT(sfv_channel_fetch_add(a, &old, sfv_remote_mr_make(word.addr + 4, 8, word.rkey), 1, &wc), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* Coverage: inject */
static void t_cover33_inject(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(64);
    sfv_channel *a, *b;
    sfv_scatter_element s;
    sfv_pending rx;
    sfv_work_completion wc;
    unsigned char buf[65], want[65];
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    r_fill(buf, 65, 4);
    memcpy(want, buf, 65);
    CHECK_RESULT(sfv_channel_inject(a, buf, 65), SFV_ERR_INVALID);
    CHECK_OK(sfv_channel_inject(a, buf, 64));
    memset(buf, 0, sizeof buf);
    s = sfv_mr_scatter_element(e.mr, e.buf + 100, 100);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
    CHECK_EQ(wc.byte_len, 64);
    CHECK(memcmp(e.buf + 100, want, 64) == 0);
    memcpy(buf, want, 64);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_OK(sfv_channel_inject_write_imm(a, buf, 33, tf_at(&e, 2000), 0xDEADBEEFu));
    memset(buf, 0, sizeof buf);
    CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
    CHECK_EQ(wc.imm_data, 0xDEADBEEFu);
    CHECK_EQ(wc.byte_len, 33);
    CHECK_EQ(wc.opcode, SFV_WC_OP_RECV_IMM);
    CHECK(memcmp(e.buf + 2000, want, 33) == 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}


/* Coverage: SRQ receives of send_imm / write_imm */
static void t_cover33_srq(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(0), ds;
    sfv_channel *a, *b;
    sfv_srq *srq;
    sfv_gather_element g[2];
    sfv_scatter_element s[2];
    sfv_pending tx, rx[2];
    sfv_work_completion wc, wcs[2];
    tf_open(&e, 8192);
    CHECK_OK(sfv_create_srq(e.pd, NULL, &srq));
    ds = d;
    ds.srq = srq;
    CHECK_OK(sfv_create_channel(e.pd, &d, &a));
    CHECK_OK(sfv_create_channel(e.pd, &ds, &b));
    tf_connect(a, b);
    r_fill(e.buf, 200, 11);
    g[0] = sfv_mr_gather_element(e.mr, e.buf + 10, 20);
    g[1] = sfv_mr_gather_element(e.mr, e.buf + 100, 9);
    s[0] = sfv_mr_scatter_element(e.mr, e.buf + 3000, 64);
    s[1] = sfv_mr_scatter_element(e.mr, e.buf + 3100, 64);
    CHECK_OK(sfv_srq_post_receive_batch(srq, s, 1, 2, rx));
    CHECK_OK(sfv_channel_post_send_imm(a, g, 2, 0x0A0B0C0Du, &tx));
    CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    CHECK_OK(sfv_channel_post_write_imm(a, g, 2, tf_at(&e, 5000), 0x10203040u, &tx));
    CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    CHECK_OK(sfv_pending_wait_all(rx, 2, 1000, wcs));
    CHECK_EQ(wcs[0].opcode, SFV_WC_OP_RECV);
    CHECK(wcs[0].has_imm);
    CHECK_EQ(wcs[0].imm_data, 0x0A0B0C0Du);
    CHECK_EQ(wcs[0].byte_len, 29);
    CHECK(wcs[0].channel == b);
    CHECK(memcmp(e.buf + 3000, e.buf + 10, 20) == 0 && memcmp(e.buf + 3020, e.buf + 100, 9) == 0);
    CHECK_EQ(wcs[1].opcode, SFV_WC_OP_RECV_IMM);
    CHECK_EQ(wcs[1].imm_data, 0x10203040u);
    CHECK_EQ(wcs[1].byte_len, 29);
    CHECK(memcmp(e.buf + 5000, e.buf + 10, 20) == 0 && memcmp(e.buf + 5020, e.buf + 100, 9) == 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_destroy_srq(srq));
    tf_close(&e);
}

/* Coverage: a scope's completions for each opcode */
typedef struct r_scope { tf_env *e; sfv_channel *b; sfv_work_completion wcs[16]; size_t n; } r_scope;
static void r_on_wc(const sfv_work_completion *wc, void *u) {
    r_scope *x = (r_scope *)u;
    if (x->n < 16) x->wcs[x->n] = *wc;
    x->n++;
}
static sfv_result r_fn(sfv_channel *ch, void *user) {
    r_scope *x = (r_scope *)user;
    tf_env *e = x->e;
    sfv_gather_element g[2];
    sfv_scatter_element s[4], old;
    sfv_remote_mr rm[2];
    sfv_result r;
    g[0] = sfv_mr_gather_element(e->mr, e->buf, 7);
    g[1] = sfv_mr_gather_element(e->mr, e->buf + 50, 9);
    s[0] = sfv_mr_scatter_element(e->mr, e->buf + 6000, 3);
    s[1] = sfv_mr_scatter_element(e->mr, e->buf + 6100, 4);
    s[2] = sfv_mr_scatter_element(e->mr, e->buf + 6200, 5);
    s[3] = sfv_mr_scatter_element(e->mr, e->buf + 6300, 6);
    old = sfv_mr_scatter_element(e->mr, e->buf + 6400, 8);
    rm[0] = tf_at(e, 2000);
    rm[1] = tf_at(e, 2100);
    if ((r = sfv_channel_post_write_imm(ch, g, 2, tf_at(e, 1000), 0x55667788u, NULL))) return r;
    if ((r = sfv_channel_post_read_batch(ch, s, 2, 2, rm, NULL))) return r;
    if ((r = sfv_channel_post_fetch_add(ch, &old, tf_at(e, 2048), 3, NULL))) return r;
    s[0] = sfv_mr_scatter_element(e->mr, e->buf + 6500, 3);
    if ((r = sfv_channel_post_read_unsignaled(ch, s, 1, tf_at(e, 2200)))) return r;
    if ((r = sfv_channel_post_send_imm(ch, g, 1, 0x99AABBCCu, NULL))) return r;
    return SFV_OK;
}
static void t_cover33_scope(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(0);
    sfv_channel *a, *b;
    sfv_scatter_element s[2];
    sfv_pending rx[2];
    sfv_work_completion wcs[2];
    sfv_scope_report rep;
    r_scope x;
    tf_open(&e, 8192);
    sfv_dereg_mr(e.mr);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf, e.len, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_ATOMIC, &e.mr));
    tf_pair(&e, &d, &a, &b);
    r_fill(e.buf, 4096, 2);
    s[0] = sfv_mr_scatter_element(e.mr, e.buf + 7000, 64);
    s[1] = sfv_mr_scatter_element(e.mr, e.buf + 7100, 64);
    CHECK_OK(sfv_channel_post_receive_batch(b, s, 1, 2, rx));
    memset(&x, 0, sizeof x);
    x.e = &e;
    CHECK_OK(sfv_channel_scope_wc(a, r_fn, &x, r_on_wc, &x, &rep));
    CHECK_EQ(x.n, 6);
    CHECK_EQ(x.wcs[0].opcode, SFV_WC_OP_WRITE);
    CHECK_EQ(x.wcs[0].byte_len, 0);
    CHECK_EQ(x.wcs[1].opcode, SFV_WC_OP_READ);
    CHECK_EQ(x.wcs[1].byte_len, 7);
    CHECK_EQ(x.wcs[2].opcode, SFV_WC_OP_READ);
    CHECK_EQ(x.wcs[2].byte_len, 11);
    CHECK_EQ(x.wcs[3].opcode, SFV_WC_OP_FETCH_ADD);
    CHECK_EQ(x.wcs[3].byte_len, 8);
    CHECK_EQ(x.wcs[4].opcode, SFV_WC_OP_READ);
    CHECK_EQ(x.wcs[4].byte_len, 3);
    CHECK_EQ(x.wcs[5].opcode, SFV_WC_OP_SEND);
    CHECK(x.wcs[0].wr_id != x.wcs[1].wr_id);
    CHECK_OK(sfv_pending_wait_all(rx, 2, 1000, wcs));
    CHECK_EQ(wcs[0].opcode, SFV_WC_OP_RECV_IMM);
    CHECK_EQ(wcs[0].imm_data, 0x55667788u);
    CHECK_EQ(wcs[0].byte_len, 16);
    CHECK_EQ(wcs[1].opcode, SFV_WC_OP_RECV);
    CHECK_EQ(wcs[1].imm_data, 0x99AABBCCu);
    CHECK_EQ(wcs[1].byte_len, 7);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* Coverage: multi-channel */
static void t_cover33_mc(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(0);
    sfv_multi_channel *m1, *m2;
    sfv_endpoint ep1[2], ep2[2];
    sfv_gather_element g[2];
    sfv_scatter_element s[4];
    sfv_peer_write pw[3];
    sfv_peer_read prd[2];
    sfv_work_completion wcs[4];
    size_t i;
    tf_open(&e, 8192);
    CHECK_OK(sfv_create_multi_channel(e.pd, 2, &d, &m1));
    CHECK_OK(sfv_create_multi_channel(e.pd, 2, &d, &m2));
    CHECK_OK(sfv_multi_channel_endpoints(m1, ep1, 2));
    CHECK_OK(sfv_multi_channel_endpoints(m2, ep2, 2));
    CHECK_OK(sfv_multi_channel_handshake(m1, ep2, 2));
    CHECK_OK(sfv_multi_channel_handshake(m2, ep1, 2));
    r_fill(e.buf, 300, 6);
    g[0] = sfv_mr_gather_element(e.mr, e.buf + 1, 10);
    g[1] = sfv_mr_gather_element(e.mr, e.buf + 200, 6);
    for (i = 0; i < 2; i++) s[i] = sfv_mr_scatter_element(e.mr, e.buf + 3000 + 100 * i, 64);
    memset(pw, 0, sizeof pw);
    pw[0].peer = 1; pw[0].sges = g; pw[0].n = 2; pw[0].remote = tf_at(&e, 4000); pw[0].has_imm = true; pw[0].imm = 0x01000002u;
    pw[1].peer = 0; pw[1].sges = g + 1; pw[1].n = 1; pw[1].remote = tf_at(&e, 4100);
    pw[2].peer = 1; pw[2].sges = g; pw[2].n = 1; pw[2].remote = tf_at(&e, 4200); pw[2].has_imm = true; pw[2].imm = 0x7u;
    {
        sfv_pending p0, p1;
        CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(m2, 1), &s[0], 1, &p0));
        CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(m2, 1), &s[1], 1, &p1));
        CHECK_OK(sfv_multi_channel_scatter_write(m1, pw, 3, wcs));
        CHECK_EQ(wcs[0].opcode, SFV_WC_OP_WRITE);
        CHECK_OK(sfv_pending_wait(&p0, 1000, &wcs[0]));
        CHECK_EQ(wcs[0].imm_data, 0x01000002u);
        CHECK_EQ(wcs[0].byte_len, 16);
        CHECK_OK(sfv_pending_wait(&p1, 1000, &wcs[0]));
        CHECK_EQ(wcs[0].imm_data, 7);
        CHECK_EQ(wcs[0].byte_len, 10);
    }
    CHECK(memcmp(e.buf + 4000, e.buf + 1, 10) == 0 && memcmp(e.buf + 4010, e.buf + 200, 6) == 0);
    CHECK(memcmp(e.buf + 4100, e.buf + 200, 6) == 0);
    CHECK(memcmp(e.buf + 4200, e.buf + 1, 10) == 0);
    memset(prd, 0, sizeof prd);
    s[1] = sfv_mr_scatter_element(e.mr, e.buf + 5000, 5);
    s[2] = sfv_mr_scatter_element(e.mr, e.buf + 5050, 6);
    s[3] = sfv_mr_scatter_element(e.mr, e.buf + 5100, 6);
    prd[0].peer = 1; prd[0].sges = s + 1; prd[0].n = 2; prd[0].remote = tf_at(&e, 4000);
    prd[1].peer = 0; prd[1].sges = s + 3; prd[1].n = 1; prd[1].remote = tf_at(&e, 4100);
    CHECK_OK(sfv_multi_channel_gather_read(m1, prd, 2, wcs));
    CHECK_EQ(wcs[0].byte_len, 11);
    CHECK_EQ(wcs[1].byte_len, 6);
    CHECK_EQ(wcs[0].opcode, SFV_WC_OP_READ);
    CHECK(memcmp(e.buf + 5000, e.buf + 4000, 5) == 0 && memcmp(e.buf + 5050, e.buf + 4005, 6) == 0 && memcmp(e.buf + 5100, e.buf + 4100, 6) == 0);
    CHECK_OK(sfv_destroy_multi_channel(m1));
    CHECK_OK(sfv_destroy_multi_channel(m2));
    tf_close(&e);
}


/* Coverage: 16 elements inline at the limit; ring wrap with read batches; full batches */
static void t_cover33_edges(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(256);
    sfv_channel *a, *b;
    sfv_gather_element g[17];
    sfv_scatter_element s[64], rs[3];
    sfv_pending tx, rx, rxs[64];
    sfv_work_completion wc;
    unsigned char want[300];
    sfv_remote_mr rm[64];
    size_t i, k, at;
    d.max_send_sge = 16;
    d.max_recv_sge = 16;
    d.max_send_wr = 5;
    d.max_recv_wr = 64;
    tf_open(&e, 16384);
    tf_pair(&e, &d, &a, &b);
    for (k = 0; k < 2; k++) {
        r_fill(e.buf, 2000, (unsigned)k + 20);
        for (i = 0, at = 0; i < 16; i++) {
            const size_t len = i == 15 ? 16 + k : 16;
            g[i] = sfv_mr_gather_element(e.mr, e.buf + 1900 - 100 * i, len);
            memcpy(want + at, e.buf + 1900 - 100 * i, len);
            at += len;
        }
        g[16] = g[0];
        CHECK_RESULT(sfv_channel_post_send(a, g, 17, &tx), SFV_ERR_INVALID);
        CHECK_OK(sfv_channel_post_send(a, g, 16, &tx));
        if (k == 0) memset(e.buf, 0, 2000);
        s[0] = sfv_mr_scatter_element(e.mr, e.buf + 8000, 300);
        CHECK_OK(sfv_channel_post_receive(b, s, 1, &rx));
        CHECK_OK(sfv_pending_wait(&rx, 1000, &wc));
        CHECK_EQ(wc.byte_len, at);
        CHECK(memcmp(e.buf + 8000, want, at) == 0);
        CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    }
    /* read batches around the ring (5 places, 8 slots) */
    r_fill(e.buf + 4096, 4096, 77);
    for (k = 0; k < 12; k++) {
        const size_t cnt = 1 + k % 3;
        size_t sum = 0;
        for (i = 0; i < cnt; i++) {
            rs[i] = sfv_mr_scatter_element(e.mr, e.buf + 10000 + 200 * i, 1 + i + k);
            rm[i] = sfv_remote_mr_make(sfv_mr_addr(e.mr) + 4096 + 300 * i + k, 200, sfv_mr_rkey(e.mr));
            sum += 1 + i + k;
        }
        CHECK_OK(sfv_channel_post_read_batch(a, rs, 1, cnt, rm, &tx));
        CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
        CHECK_EQ(wc.byte_len, sum);
        for (i = 0; i < cnt; i++) CHECK(memcmp(e.buf + 10000 + 200 * i, e.buf + 4096 + 300 * i + k, 1 + i + k) == 0);
    }
    /* a batch of the queue's size, and one over */
    for (i = 0; i < 64; i++) {
        s[i] = sfv_mr_scatter_element(e.mr, e.buf + 12000 + 32 * i, 32);
        rm[i] = tf_at(&e, 200 * i);
    }
    CHECK_OK(sfv_channel_post_receive_batch(b, s, 1, 64, rxs));
    CHECK_RESULT(sfv_channel_post_receive(b, s, 1, &rx), SFV_ERR_RESOURCE);
    CHECK_OK(sfv_channel_post_send_batch(a, g, 1, 5, &tx));
    CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
    CHECK_RESULT(sfv_channel_post_send_batch(a, g, 1, 6, &tx), SFV_ERR_RESOURCE);
    CHECK_OK(sfv_pending_wait_all(rxs, 5, 1000, NULL));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}


/* Coverage: random differential */
static unsigned long r_seed = 12345;
SFV__WRAPS static unsigned r_rand(unsigned n) { r_seed = r_seed * 6364136223846793005ull + 1442695040888963407ull; return (unsigned)((r_seed >> 33) % n); }
#define R_SRC 0
#define R_DST 32768
#define R_RD 49152
static void r_check_bytes(const unsigned char *got, const unsigned char *want, size_t n, const char *what, unsigned it) {
    if (memcmp(got, want, n) != 0) FAIL("iteration %u: %s: bytes differ", it, what);
}
static void t_cover33_random(void) {
    unsigned round;
    for (round = 0; round < 40; round++) {
        tf_env e;
        sfv_channel_desc d;
        sfv_channel *a, *b;
        unsigned it, sge, cap;
        static const uint32_t inls[] = {SFV_INLINE_NONE, 0, 16, 64, 1};
        memset(&d, 0, sizeof d);
        sge = 1 + r_rand(16);
        cap = 2 + r_rand(8);
        d.max_send_sge = sge;
        d.max_recv_sge = 16;
        d.max_send_wr = cap;
        d.max_recv_wr = 64;
        d.max_inline_data = inls[r_rand(5)];
        d.access = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_ATOMIC;
        d.timeout_ms = 2000;
        tf_open(&e, 65536);
        sfv_dereg_mr(e.mr);
        CHECK_OK(sfv_reg_mr_access(e.pd, e.buf, e.len, d.access, &e.mr));
        tf_pair(&e, &d, &a, &b);
        for (it = 0; it < 300; it++) {
            const unsigned op = r_rand(6);
            unsigned count = 1 + r_rand(cap < 6 ? cap : 6), i, k;
            const unsigned form = r_rand(3); /* 0 single (count 1), 1 plain batch, 2 request batch */
            sfv_gather_element g[64 * 2];
            sfv_scatter_element s[64 * 2];
            sfv_remote_mr rm[64];
            size_t per[64], tot[64];
            unsigned char want[64][16 * 40];
            sfv_pending tx, rx[64];
            sfv_work_completion wc, wcs[64];
            uint32_t imm[64];
            bool has[64];
            size_t per_wr = r_rand(sge + 1);
            if (per_wr > 2) per_wr = 1 + r_rand(2); /* plain batches: at most 2 each, 64 * 2 elements */
            r_fill(e.buf + R_SRC, 16384, it + round * 1000);
            if (form == 0) count = 1;
            if (count > cap - sfv_channel_outstanding(a)) count = (unsigned)(cap - sfv_channel_outstanding(a)); /* places injects hold */
            if (count == 0) count = 1;
            for (i = 0; i < count; i++) {
                per[i] = form == 1 ? per_wr : r_rand(form == 0 ? sge + 1 : (sge < 2 ? sge + 1 : 3));
                if (per[i] > 2 && form != 0) per[i] = 2;
                tot[i] = 0;
                has[i] = r_rand(2);
                imm[i] = (uint32_t)r_rand(0xFFFFFFFFu) ^ ((uint32_t)r_rand(256) << 24);
                rm[i] = sfv_remote_mr_make(sfv_mr_addr(e.mr) + R_RD + 700 * i + r_rand(8) * 8, 650, sfv_mr_rkey(e.mr));
            }
            if (op <= 2) { /* send (0), write (1), read (2) */
                size_t at_g = 0;
                const sfv_gather_element *gs[64];
                const sfv_scatter_element *ss[64];
                for (i = 0; i < count; i++) {
                    gs[i] = &g[at_g];
                    ss[i] = &s[at_g];
                    for (k = 0; k < per[i]; k++) {
                        const size_t len = r_rand(41), off = r_rand(16000);
                        if (op == 2) {
                            s[at_g] = sfv_mr_scatter_element(e.mr, e.buf + R_DST + 200 * at_g + r_rand(50), len);
                        } else {
                            g[at_g] = sfv_mr_gather_element(e.mr, e.buf + R_SRC + off, len);
                            memcpy(want[i] + tot[i], e.buf + R_SRC + off, len);
                        }
                        tot[i] += len;
                        at_g++;
                    }
                    if (op == 2) memcpy(want[i], e.buf + (rm[i].addr - sfv_mr_addr(e.mr)), tot[i]);
                }
                if (op == 0) { /* the peer's receives: each one element of room enough, or two */
                    for (i = 0; i < count; i++) {
                        const size_t cut = tot[i] ? r_rand((unsigned)tot[i] + 1) : 0;
                        sfv_scatter_element rs[2];
                        rs[0] = sfv_mr_scatter_element(e.mr, e.buf + R_DST + 700 * i, cut);
                        rs[1] = sfv_mr_scatter_element(e.mr, e.buf + R_DST + 700 * i + 350, tot[i] - cut + r_rand(5));
                        memset(e.buf + R_DST + 700 * i, 0xAB, 700);
                        CHECK_OK(sfv_channel_post_receive(b, rs, 2, &rx[i]));
                    }
                }
                if (op == 1 && (form == 1 || r_rand(2))) for (i = 0; i < count; i++) has[i] = false;
                if (op == 1) { /* a receive for each write with immediate */
                    unsigned nimm = 0;
                    for (i = 0; i < count; i++)
                        if (has[i]) CHECK_OK(sfv_channel_post_receive(b, NULL, 0, &rx[nimm++]));
                }
                if (op == 2) for (i = 0; i < count; i++) has[i] = false;
                if (op == 0 && form == 1) for (i = 0; i < count; i++) has[i] = false;
                if (op == 1 && form == 1) for (i = 0; i < count; i++) has[i] = false;
                if (form == 0) {
                    sfv_result r;
                    if (op == 0) r = has[0] ? sfv_channel_post_send_imm(a, gs[0], per[0], imm[0], &tx) : sfv_channel_post_send(a, gs[0], per[0], &tx);
                    else if (op == 1) r = has[0] ? sfv_channel_post_write_imm(a, gs[0], per[0], rm[0], imm[0], &tx) : sfv_channel_post_write(a, gs[0], per[0], rm[0], &tx);
                    else r = sfv_channel_post_read(a, ss[0], per[0], rm[0], &tx);
                    CHECK_OK(r);
                } else if (form == 1) {
                    if (op == 0) CHECK_OK(sfv_channel_post_send_batch(a, g, per_wr, count, &tx));
                    else if (op == 1) CHECK_OK(sfv_channel_post_write_batch(a, g, per_wr, count, rm, &tx));
                    else CHECK_OK(sfv_channel_post_read_batch(a, s, per_wr, count, rm, &tx));
                } else {
                    sfv_send_request sr[64];
                    sfv_write_request wr[64];
                    sfv_read_request rr[64];
                    for (i = 0; i < count; i++) {
                        sr[i].sges = gs[i]; sr[i].n = per[i]; sr[i].has_imm = has[i]; sr[i].imm = imm[i];
                        wr[i].sges = gs[i]; wr[i].n = per[i]; wr[i].has_imm = has[i]; wr[i].imm = imm[i]; wr[i].remote = rm[i];
                        rr[i].sges = ss[i]; rr[i].n = per[i]; rr[i].remote = rm[i];
                    }
                    if (op == 0) CHECK_OK(sfv_channel_post_sends(a, sr, count, &tx));
                    else if (op == 1) CHECK_OK(sfv_channel_post_writes(a, wr, count, &tx));
                    else CHECK_OK(sfv_channel_post_reads(a, rr, count, &tx));
                }
                r_fill(e.buf + R_SRC, 16384, it + round * 1000 + 77); /* inline went at the post; the rest ran then too (the fake) */
                CHECK_OK(sfv_pending_wait(&tx, 1000, &wc));
                CHECK_EQ(wc.opcode, op == 0 ? SFV_WC_OP_SEND : op == 1 ? SFV_WC_OP_WRITE : SFV_WC_OP_READ);
                if (op == 2) {
                    size_t sum = 0;
                    for (i = 0; i < count; i++) sum += tot[i];
                    if (wc.byte_len != sum) FAIL("round %u it %u: read form %u count %u: byte_len %u, want %zu", round, it, form, count, wc.byte_len, sum);
                    for (i = 0; i < count; i++) {
                        size_t at = 0;
                        for (k = 0; k < per[i]; k++) {
                            r_check_bytes((const unsigned char *)(uintptr_t)ss[i][k].addr, want[i] + at, ss[i][k].length, "read", it);
                            at += ss[i][k].length;
                        }
                    }
                } else CHECK_EQ(wc.byte_len, 0);
                if (op == 0) {
                    CHECK_OK(sfv_pending_wait_all(rx, count, 1000, wcs));
                    for (i = 0; i < count; i++) {
                        if (wcs[i].byte_len != tot[i]) FAIL("round %u it %u: send form %u: receive %u byte_len %u want %zu", round, it, form, i, wcs[i].byte_len, tot[i]);
                        CHECK_EQ(wcs[i].opcode, SFV_WC_OP_RECV);
                        CHECK_EQ(wcs[i].has_imm, has[i]);
                        if (has[i]) CHECK_EQ(wcs[i].imm_data, imm[i]);
                    }
                }
                if (op == 1) {
                    for (i = 0; i < count; i++) r_check_bytes(e.buf + (rm[i].addr - sfv_mr_addr(e.mr)), want[i], tot[i], "write", it);
                }
                if (op == 1) {
                    unsigned nimm = 0;
                    for (i = 0; i < count; i++) {
                        if (!has[i]) continue;
                        CHECK_OK(sfv_pending_wait(&rx[nimm++], 1000, &wc));
                        CHECK_EQ(wc.opcode, SFV_WC_OP_RECV_IMM);
                        CHECK(wc.has_imm);
                        CHECK_EQ(wc.imm_data, imm[i]);
                        if (wc.byte_len != tot[i]) FAIL("round %u it %u: write_imm %u byte_len %u want %zu", round, it, i, wc.byte_len, tot[i]);
                    }
                }
                (void)wcs;
            } else if (op == 3) { /* atomics */
                sfv_scatter_element old = sfv_mr_scatter_element(e.mr, e.buf + R_DST + 8 * r_rand(100), 8);
                uint64_t w0 = ((uint64_t)r_rand(0xFFFFFFFFu) << 32) | r_rand(0xFFFFFFFFu), cmp, sw, got, now;
                const size_t woff = R_RD + 8 * r_rand(100);
                memcpy(e.buf + woff, &w0, 8);
                cmp = r_rand(2) ? w0 : w0 + 1;
                sw = ((uint64_t)r_rand(0xFFFFFFFFu) << 32) | r_rand(0xFFFFFFFFu);
                if (r_rand(2)) {
                    CHECK_OK(sfv_channel_compare_swap(a, &old, tf_at(&e, woff), cmp, sw, &wc));
                    CHECK_EQ(wc.opcode, SFV_WC_OP_COMP_SWAP);
                    memcpy(&now, e.buf + woff, 8);
                    CHECK(now == (cmp == w0 ? sw : w0));
                } else {
                    CHECK_OK(sfv_channel_fetch_add(a, &old, tf_at(&e, woff), sw, &wc));
                    CHECK_EQ(wc.opcode, SFV_WC_OP_FETCH_ADD);
                    memcpy(&now, e.buf + woff, 8);
                    CHECK(now == w0 + sw);
                }
                CHECK_EQ(wc.byte_len, 8);
                memcpy(&got, (void *)(uintptr_t)old.addr, 8);
                CHECK(got == w0);
            } else if (op == 4 && sfv_channel_get_desc(a)->max_inline_data != SFV_INLINE_NONE) { /* injects */
                const uint32_t lim = sfv_channel_get_desc(a)->max_inline_data;
                unsigned char buf[300], keep[300];
                const size_t len = r_rand(lim + 1);
                const unsigned kind = r_rand(3);
                sfv_scatter_element rs = sfv_mr_scatter_element(e.mr, e.buf + R_DST, 300);
                r_fill(buf, sizeof buf, it);
                memcpy(keep, buf, sizeof buf);
                if (kind != 1) CHECK_OK(sfv_channel_post_receive(b, &rs, 1, &rx[0]));
                if (kind == 0) CHECK_OK(sfv_channel_inject(a, buf, len));
                else if (kind == 1) CHECK_OK(sfv_channel_inject_write(a, buf, len, sfv_remote_mr_make(sfv_mr_addr(e.mr) + R_RD + 1000, 300, sfv_mr_rkey(e.mr))));
                else CHECK_OK(sfv_channel_inject_write_imm(a, buf, len, sfv_remote_mr_make(sfv_mr_addr(e.mr) + R_RD + 1000, 300, sfv_mr_rkey(e.mr)), imm[0]));
                memset(buf, 0, sizeof buf);
                if (kind != 1) {
                    CHECK_OK(sfv_pending_wait(&rx[0], 1000, &wc));
                    CHECK_EQ(wc.byte_len, len);
                    CHECK_EQ(wc.has_imm, kind == 2);
                    if (kind == 2) CHECK_EQ(wc.imm_data, imm[0]);
                }
                if (kind == 0) r_check_bytes(e.buf + R_DST, keep, len, "inject", it);
                else r_check_bytes(e.buf + R_RD + 1000, keep, len, "inject write", it);
            }
            if (sfv_channel_outstanding(b) != 0) FAIL("round %u it %u: %zu places taken", round, it, sfv_channel_outstanding(b));
        }
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        tf_close(&e);
    }
}


/* Coverage: a scope's receives */
typedef struct r_rscope { tf_env *e; sfv_channel *a; sfv_pending tx[3]; sfv_work_completion wcs[8]; size_t n; } r_rscope;
static void r_on_wc2(const sfv_work_completion *wc, void *u) {
    r_rscope *x = (r_rscope *)u;
    if (x->n < 8) x->wcs[x->n] = *wc;
    x->n++;
}
static sfv_result r_fn2(sfv_channel *ch, void *user) {
    r_rscope *x = (r_rscope *)user;
    sfv_scatter_element s[3];
    sfv_gather_element g = sfv_mr_gather_element(x->e->mr, x->e->buf, 21);
    sfv_result r;
    size_t i;
    for (i = 0; i < 3; i++) s[i] = sfv_mr_scatter_element(x->e->mr, x->e->buf + 1000 + 100 * i, 64);
    if ((r = sfv_channel_post_receive_batch(ch, s, 1, 2, NULL))) return r;
    if ((r = sfv_channel_post_receive(ch, s + 2, 1, NULL))) return r;
    if ((r = sfv_channel_post_send_imm(x->a, &g, 1, 0xF00DFACEu, &x->tx[0]))) return r;
    if ((r = sfv_channel_post_write_imm(x->a, &g, 1, tf_at(x->e, 3000), 0x12345678u, &x->tx[1]))) return r;
    return sfv_channel_post_send(x->a, &g, 1, &x->tx[2]);
}
static void t_cover33_scope_recv(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(0);
    sfv_channel *a, *b;
    sfv_scope_report rep;
    r_rscope x;
    tf_open(&e, 8192);
    tf_pair(&e, &d, &a, &b);
    r_fill(e.buf, 100, 8);
    memset(&x, 0, sizeof x);
    x.e = &e;
    x.a = a;
    CHECK_OK(sfv_channel_scope_wc(b, r_fn2, &x, r_on_wc2, &x, &rep));
    CHECK_EQ(x.n, 3);
    CHECK_EQ(x.wcs[0].opcode, SFV_WC_OP_RECV);
    CHECK(x.wcs[0].has_imm);
    CHECK_EQ(x.wcs[0].imm_data, 0xF00DFACEu);
    CHECK_EQ(x.wcs[0].byte_len, 21);
    CHECK_EQ(x.wcs[1].opcode, SFV_WC_OP_RECV_IMM);
    CHECK_EQ(x.wcs[1].imm_data, 0x12345678u);
    CHECK_EQ(x.wcs[1].byte_len, 21);
    CHECK_EQ(x.wcs[2].opcode, SFV_WC_OP_RECV);
    CHECK(!x.wcs[2].has_imm);
    CHECK_EQ(x.wcs[2].imm_data, 0);
    CHECK_OK(sfv_pending_wait_all(x.tx, 3, 1000, NULL));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}


/* Coverage: refusals and their messages */
static void t_cover33_refusals(void) {
    tf_env e;
    sfv_channel_desc d = r_desc(64);
    sfv_channel *a, *b;
    sfv_gather_element g[5];
    sfv_scatter_element s[70];
    sfv_send_request sr[66];
    sfv_read_request rr[2];
    sfv_pending tx, rx[70];
    sfv_work_completion wc;
    size_t i;
    unsigned char big[100];
    d.max_send_wr = 8;
    d.max_recv_wr = 8;
    tf_open(&e, 8192);
    tf_pair(&e, &d, &a, &b);
    for (i = 0; i < 5; i++) g[i] = sfv_mr_gather_element(e.mr, e.buf + 10 * i, 10);
    for (i = 0; i < 70; i++) s[i] = sfv_mr_scatter_element(e.mr, e.buf + 1000 + 40 * i, 40);
    memset(sr, 0, sizeof sr);
    for (i = 0; i < 66; i++) { sr[i].sges = g; sr[i].n = 1; }
    CHECK_RESULT(sfv_channel_post_sends(a, sr, 9, &tx), SFV_ERR_RESOURCE);
    CHECK_MSG("larger than the whole queue");
    CHECK_RESULT(sfv_channel_post_sends(a, sr, 65, &tx), SFV_ERR_INVALID);
    CHECK_MSG("batch of 65");
    sr[3].n = 5;
    CHECK_RESULT(sfv_channel_post_sends(a, sr, 8, &tx), SFV_ERR_INVALID);
    CHECK_MSG("5 elements");
    sr[3].n = 2; sr[3].sges = NULL;
    CHECK_RESULT(sfv_channel_post_sends(a, sr, 8, &tx), SFV_ERR_INVALID);
    CHECK_MSG("request 3");
    CHECK_RESULT(sfv_channel_post_receive_batch(b, s, 1, 9, rx), SFV_ERR_RESOURCE);
    CHECK_RESULT(sfv_channel_post_receive_batch(b, s, 1, 65, rx), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_send_batch(a, g, 5, 2, &tx), SFV_ERR_INVALID);
    memset(rr, 0, sizeof rr);
    rr[0].sges = s; rr[0].n = 1; rr[0].remote = tf_at(&e, 0);
    rr[1].sges = s + 1; rr[1].n = 2; rr[1].remote = tf_at(&e, 100);
    CHECK_RESULT(sfv_channel_post_reads(a, rr, 2, &tx), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_MSG("80 bytes do not fit the remote region's 64");
    memset(big, 1, sizeof big);
    CHECK_RESULT(sfv_channel_inject(a, big, 65), SFV_ERR_INVALID);
    CHECK_MSG("65 bytes over the channel's inline limit of 64");
    (void)wc;
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}


/* Coverage: the public CQ */
static struct ibv_qp *r_raw_qp(tf_env *e, sfv_cq *cq) {
    struct ibv_qp_init_attr ia;
    struct ibv_qp_attr qa;
    struct ibv_qp *qp;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = sfv_cq_raw(cq);
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
    qp = ibv_create_qp(sfv_pd_raw(e->pd), &ia);
    CHECK(qp);
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_INIT;
    qa.port_num = 1;
    qa.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
    return qp;
}
static void r_raw_connect(struct ibv_qp *qp, uint32_t peer) {
    struct ibv_qp_attr qa;
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTR;
    qa.path_mtu = IBV_MTU_1024;
    qa.dest_qp_num = peer;
    qa.rq_psn = 5;
    qa.max_dest_rd_atomic = 1;
    qa.min_rnr_timer = 12;
    qa.ah_attr.port_num = 1;
    qa.ah_attr.dlid = 1;
    CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTS;
    qa.timeout = 14;
    qa.retry_cnt = 6;
    qa.rnr_retry = 7;
    qa.sq_psn = 5;
    qa.max_rd_atomic = 1;
    CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}
static void t_cover33_public_cq(void) {
    tf_env e;
    sfv_cq *cq;
    struct ibv_qp *q1, *q2;
    struct ibv_sge sg, rg;
    struct ibv_send_wr wr, *bad;
    struct ibv_recv_wr rw, *rbad;
    sfv_work_completion wcs[8];
    size_t n;
    fk_set_link_layer(1);
    tf_open(&e, 8192);
    sfv_dereg_mr(e.mr);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf, e.len, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_ATOMIC, &e.mr));
    CHECK_OK(sfv_create_cq(e.ctx, 32, &cq));
    q1 = r_raw_qp(&e, cq);
    q2 = r_raw_qp(&e, cq);
    r_raw_connect(q1, q2->qp_num);
    r_raw_connect(q2, q1->qp_num);
    r_fill(e.buf, 100, 1);
    rg.addr = (uintptr_t)(e.buf + 1000); rg.length = 64; rg.lkey = sfv_mr_lkey(e.mr);
    memset(&rw, 0, sizeof rw);
    rw.wr_id = 0x5150; rw.sg_list = &rg; rw.num_sge = 1;
    CHECK(ibv_post_recv(q2, &rw, &rbad) == 0);
    rw.wr_id = 0x5151;
    CHECK(ibv_post_recv(q2, &rw, &rbad) == 0);
    sg.addr = (uintptr_t)e.buf; sg.length = 13; sg.lkey = sfv_mr_lkey(e.mr);
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 0xA1; wr.sg_list = &sg; wr.num_sge = 1; wr.opcode = IBV_WR_SEND_WITH_IMM; wr.send_flags = IBV_SEND_SIGNALED; wr.imm_data = htonl(0x01020304u);
    CHECK(ibv_post_send(q1, &wr, &bad) == 0);
    wr.wr_id = 0xA2; wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM; wr.wr.rdma.remote_addr = (uintptr_t)(e.buf + 2000); wr.wr.rdma.rkey = sfv_mr_rkey(e.mr); wr.imm_data = htonl(0xCAFEF00Du);
    CHECK(ibv_post_send(q1, &wr, &bad) == 0);
    rg.addr = (uintptr_t)(e.buf + 3000); rg.length = 9;
    wr.wr_id = 0xA3; wr.opcode = IBV_WR_RDMA_READ; wr.sg_list = &rg;
    CHECK(ibv_post_send(q1, &wr, &bad) == 0);
    CHECK_OK(sfv_poll_cq(cq, wcs, 8, &n));
    CHECK_EQ(n, 5);
    /* in the fake's order: each receive as its sender runs */
    CHECK(wcs[0].wr_id == 0x5150 && wcs[0].opcode == SFV_WC_OP_RECV && wcs[0].byte_len == 13 && wcs[0].has_imm && wcs[0].imm_data == 0x01020304u);
    CHECK(wcs[1].wr_id == 0xA1 && wcs[1].opcode == SFV_WC_OP_SEND && wcs[1].byte_len == 0 && !wcs[1].has_imm);
    CHECK(wcs[2].wr_id == 0x5151 && wcs[2].opcode == SFV_WC_OP_RECV_IMM && wcs[2].byte_len == 13 && wcs[2].imm_data == 0xCAFEF00Du);
    CHECK(wcs[3].wr_id == 0xA2 && wcs[3].opcode == SFV_WC_OP_WRITE);
    CHECK(wcs[4].wr_id == 0xA3 && wcs[4].opcode == SFV_WC_OP_READ && wcs[4].result == SFV_OK);
    CHECK(memcmp(e.buf + 2000, e.buf, 13) == 0 && memcmp(e.buf + 3000, e.buf + 2000, 9) == 0);
    CHECK(ibv_destroy_qp(q1) == 0);
    CHECK(ibv_destroy_qp(q2) == 0);
    CHECK_OK(sfv_destroy_cq(cq));
    tf_close(&e);
}

static const harness_test TESTS[] = {
    TEST(t_cover33_public_cq, 20),
    TEST(t_cover33_refusals, 20),
    TEST(t_cover33_scope_recv, 20),
    TEST(t_cover33_random, 60),
    TEST(t_cover33_edges, 20),
    TEST(t_cover33_srq, 20),
    TEST(t_cover33_scope, 20),
    TEST(t_cover33_mc, 20),
    TEST(t_cover33_send, 20),
    TEST(t_cover33_imm, 20),
    TEST(t_cover33_batches, 20),
    TEST(t_cover33_requests, 20),
    TEST(t_cover33_atomics, 20),
    TEST(t_cover33_inject, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
