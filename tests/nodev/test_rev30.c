/* test_rev30.c - session 25's fixes on the fake NIC. Each test failed on the header before its fix. */
#include "fake_env.h"

/* ---- a receive batch inside a scope, with no handles ---- */
/* Promise (>>pending: "`pending` may be NULL only inside a scope (the scope then polls it)", and
   >>batches: a receive batch's `pendings` likewise): a receive batch posted with NULL handles
   inside a scope was refused ("pending handles (NULL)"), though a single receive's NULL handle is
   taken there. Now the scope consumes the batch, its on_wc seeing each receive's bytes. */
typedef struct tr_rb { tf_env *e; sfv_channel *peer; sfv_result post; } tr_rb;
static sfv_result tr_rb_fn(sfv_channel *ch, void *user) {
    tr_rb *u = (tr_rb *)user;
    sfv_scatter_element sc[4];
    sfv_gather_element g[4];
    sfv_pending tx;
    int i;
    for (i = 0; i < 4; i++) {
        sc[i] = sfv_mr_scatter_element(u->e->mr, u->e->buf + 1024 + 64 * i, 64);
        u->e->buf[64 * i] = (unsigned char)(0xa0 + i);
        g[i] = sfv_mr_gather_element(u->e->mr, u->e->buf + 64 * i, 8 + i);
    }
    u->post = sfv_channel_post_receive_batch(ch, sc, 1, 4, NULL);
    if (u->post) return u->post;
    CHECK_OK(sfv_channel_post_send_batch(u->peer, g, 1, 4, &tx));
    CHECK_OK(sfv_pending_wait(&tx, 2000, NULL));
    return SFV_OK;
}
typedef struct tr_rb_seen { int n; uint32_t len[8]; } tr_rb_seen;
static void tr_rb_wc(const sfv_work_completion *wc, void *user) {
    tr_rb_seen *s = (tr_rb_seen *)user;
    if (s->n < 8 && wc->opcode == SFV_WC_OP_RECV && wc->result == SFV_OK) s->len[s->n] = wc->byte_len;
    s->n++;
}
static void t_recv_batch_null_in_scope(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_scope_report rep;
    sfv_scatter_element sc;
    tr_rb u;
    tr_rb_seen seen;
    int i;
    memset(&d, 0, sizeof d);
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    memset(&u, 0, sizeof u);
    memset(&seen, 0, sizeof seen);
    u.e = &e;
    u.peer = a;
    CHECK_OK(sfv_channel_scope_wc(b, tr_rb_fn, &u, tr_rb_wc, &seen, &rep));
    CHECK_OK(u.post);
    CHECK_EQ(rep.auto_polled, 4);
    CHECK_EQ(rep.failed, 0);
    CHECK_EQ(seen.n, 4);
    for (i = 0; i < 4; i++) {
        CHECK_EQ(seen.len[i], (uint32_t)(8 + i));
        CHECK_EQ(e.buf[1024 + 64 * i], 0xa0 + i);
    }
    CHECK_EQ(sfv_channel_outstanding(b), 0);
    /* outside a scope, still refused, with the rule's own message */
    sc = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_RESULT(sfv_channel_post_receive_batch(b, &sc, 1, 1, NULL), SFV_ERR_INVALID);
    CHECK_MSG("only inside a scope");
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* ---- the exchange's outgoing sockets and a later rank's port ---- */
/* Promise (>>exchange: a rank that starts late still joins, until the deadline): a connection the
   exchange made and closed first left its local port, which the kernel picked and which can be a
   rank's not listening yet, in TIME_WAIT for a minute, and Linux lets a listener bind that port
   then only if the closed socket had SO_REUSEADDR too: the late rank could not listen ("Address
   already in use"). Now every exchange socket has it: the port binds at once. */
static void t_exchange_port_after_time_wait(void) {
    struct sockaddr_in at;
    socklen_t len = sizeof at;
    sfv_net_node peer;
    int l, s, fd = -1, n, one = 1, reuse = 0;
    uint16_t local;
    l = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(l >= 0);
    memset(&at, 0, sizeof at);
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
    CHECK(bind(l, (struct sockaddr *)&at, sizeof at) == 0 && listen(l, 1) == 0);
    CHECK(getsockname(l, (struct sockaddr *)&at, &len) == 0);
    memset(&peer, 0, sizeof peer);
    peer.host = "127.0.0.1";
    peer.port = ntohs(at.sin_port);
    peer.rank = 1;
    CHECK_OK(sfv__ex_connect(&peer, true, sfv__now_ns() + 2000000000ull, &fd));
    len = sizeof reuse;
    CHECK(getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, &len) == 0);
    CHECK(reuse != 0);
    s = accept(l, NULL, NULL);
    CHECK(s >= 0);
    len = sizeof at;
    CHECK(getsockname(fd, (struct sockaddr *)&at, &len) == 0);
    local = ntohs(at.sin_port);
    close(fd); /* ours first: TIME_WAIT on its port */
    usleep(20000);
    close(s);
    close(l);
    usleep(50000);
    n = socket(AF_INET, SOCK_STREAM, 0); /* a rank that listens on that port now, as the exchange does */
    CHECK(n >= 0);
    CHECK(setsockopt(n, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
    at.sin_port = htons(local);
    if (bind(n, (struct sockaddr *)&at, sizeof at) != 0) FAIL("port %u of a closed exchange connection: bind: %s", (unsigned)local, strerror(errno));
    close(n);
}

/* ---- garbage counts and flags ---- */
/* Promise (sfv_pending_wait_all: pendings NULL with count > 0 is SFV_ERR_INVALID, "never a
   crash"): a garbage count with NULL handles wrote count wcs (SFV_NOT_DONE) past the caller's
   array until it crashed, as the many-peer calls did (test_rev30c). Now no wc is written for a
   count no array holds; a plausible count still has its wcs filled. */
static void t_wait_all_garbage_count(void) {
    sfv_work_completion wcs[2];
    memset(wcs, 0x5a, sizeof wcs);
    CHECK_RESULT(sfv_pending_wait_all(NULL, SIZE_MAX, 0, wcs), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_pending_wait_all(NULL, (size_t)PTRDIFF_MAX, 0, wcs), SFV_ERR_INVALID);
    CHECK_EQ(wcs[0].byte_len, 0x5a5a5a5au); /* untouched */
    CHECK_RESULT(sfv_pending_wait_all(NULL, 2, 0, wcs), SFV_ERR_INVALID);
    CHECK_RESULT(wcs[0].result, SFV_NOT_DONE);
    CHECK_RESULT(wcs[1].result, SFV_NOT_DONE);
}
/* Promise (>>elements, >>remote regions: an MR's elements and remote regions address it by its
   addresses): SFV_ACCESS_ZERO_BASED was passed on to the verb, and a provider that honours it
   addresses the MR by offsets from 0, where every element and remote region of it points at
   host addresses. Now refused, saying why. */
static void t_reg_mr_zero_based_refused(void) {
    tf_env e;
    sfv_mr *mr = (sfv_mr *)1;
    tf_open(&e, 4096);
    CHECK_RESULT(sfv_reg_mr_access(e.pd, e.buf, 4096, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_ZERO_BASED, &mr), SFV_ERR_INVALID);
    CHECK(mr == NULL);
    CHECK_MSG("ZERO_BASED");
    tf_close(&e);
}

/* ---- a create's cleanup whose destroy is refused ---- */
/* Promise ("nothing is lost or leaked"): sfv_create_multi_channel and sfv_create_node that fail
   part-way destroy the channels they made; where a verb refused one of those destroys
   (ibv_destroy_qp), the rest of the multi-channel's channels were never destroyed and all were
   lost with the freed multi-channel, holding the PD and device for good; and a channel's own
   create, failing after its QP was made, lost that QP with its CQ the same way. Now each refused
   one is left to its PD, whose sfv_dealloc_pd destroys it again: after the PD and the device are
   closed, the fake holds nothing, at every point of failure of each create. */
static void t_create_cleanup_refused_destroy(void) {
    long at;
    int kind;
    static const char *const names[] = {"sfv_create_multi_channel", "sfv_create_node", "sfv_create_channel"};
    for (kind = 0; kind < 3; kind++) {
        bool made = false;
        for (at = 1; !made && at < 400; at++) {
            sfv_context *ctx;
            sfv_pd *pd;
            sfv_multi_channel *mc = NULL;
            sfv_node *node = NULL;
            sfv_channel *ch = NULL;
            sfv_node_desc nd;
            sfv_result r;
            fk_reset();
            CHECK_OK(sfv_open_device(NULL, &ctx));
            CHECK_OK(sfv_alloc_pd(ctx, &pd));
            memset(&nd, 0, sizeof nd);
            nd.world_size = 3;
            fk_fail_name("ibv_destroy_qp", 1);
            fk_fail_nth(at);
            r = kind == 0 ? sfv_create_multi_channel(pd, 3, NULL, &mc) : kind == 1 ? sfv_create_node(pd, &nd, &node) : sfv_create_channel(pd, NULL, &ch);
            fk_fail_nth(0);
            fk_fail_name("ibv_destroy_qp", 0);
            if (r == SFV_OK) {
                made = true;
                if (kind == 0) CHECK_OK(sfv_destroy_multi_channel(mc));
                else if (kind == 1) CHECK_OK(sfv_destroy_node(node));
                else CHECK_OK(sfv_destroy_channel(ch));
            }
            CHECK_OK(sfv_close_device(ctx));
            r = sfv_dealloc_pd(pd);
            if (r) FAIL("%s failing at call %ld: sfv_dealloc_pd: %s", names[kind], at, sfv_last_error()->message);
            if (fk_live_total() != 0) FAIL("%s failing at call %ld: %ld fake objects left", names[kind], at, fk_live_total());
        }
        CHECK(made);
    }
}

/* Promise (every failure's last error says it): a post to a NULL SRQ said "invalid channel",
   naming nothing the caller passed (review 31b). Now it names the SRQ, and the handle is zeroed
   as any refused post's. */
static void t_srq_post_null_names_srq(void) {
    sfv_pending p;
    sfv_scatter_element sc;
    memset(&p, 0x5a, sizeof p);
    memset(&sc, 0, sizeof sc);
    CHECK_RESULT(sfv_srq_post_receive(NULL, &sc, 1, &p), SFV_ERR_INVALID);
    CHECK_MSG("SRQ");
    CHECK_EQ(p.state_, 0);
    memset(&p, 0x5a, sizeof p);
    CHECK_RESULT(sfv_srq_post_receive_batch(NULL, &sc, 1, 1, &p), SFV_ERR_INVALID);
    CHECK_MSG("SRQ");
    CHECK_EQ(p.state_, 0);
}

static const harness_test TESTS[] = {
    TEST(t_recv_batch_null_in_scope, 30),
    TEST(t_exchange_port_after_time_wait, 30),
    TEST(t_wait_all_garbage_count, 10),
    TEST(t_reg_mr_zero_based_refused, 10),
    TEST(t_create_cleanup_refused_destroy, 60),
    TEST(t_srq_post_null_names_srq, 10),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
