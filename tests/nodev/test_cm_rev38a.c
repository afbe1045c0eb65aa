/* test_cm_rev38a.c - a handle destroyed (released, revoked, closed, answered) twice, or never made:
   every kind the library hands out, on the fake NIC and the fake librdmacm. The second call read
   and freed freed memory (ASan: heap-use-after-free; a crash or a heap corruption in the plain
   build); now the library's set of live handles catches it before it reads the handle: the
   program's SFV_ASSERT (here it counts and returns), then SFV_ERR_INVALID naming the call and the
   kind, nothing done, nothing lost; the same for a dead parent given to a call that makes a
   child of it. And sfv_cm_accept of a request whose peer gave up first.
   Built as test_cm_fake is. */
#define SAFEVERBS_RDMACM
static int asserts; /* contracts broken so far */
#define SFV_ASSERT(c)                                                                        \
    do {                                                                                     \
        if (!(c)) asserts++;                                                                 \
    } while (0)
#include "fake_env.h"
#include "fake_rdmacm.h"

#define PORT 7538

/* The call was refused as a dead handle's, once, and said so. */
#define R8_DEAD(call, kind)                                                                  \
    do {                                                                                     \
        const int before_ = asserts;                                                         \
        CHECK_RESULT((call), SFV_ERR_INVALID);                                               \
        CHECK_EQ(asserts, before_ + 1);                                                      \
        CHECK(strstr(sfv_last_error()->message, "not a live " kind) != NULL);                \
    } while (0)

static void t_verbs_handles_twice(void) {
    tf_env e;
    sfv_device_list *list;
    sfv_context *ctx2;
    sfv_pd *pd2;
    sfv_cq *cq;
    sfv_mr *mr2;
    sfv_channel *a, *b, *c;
    sfv_srq *srq;
    sfv_srq_desc sd;
    sfv_lease *l;
    sfv_multi_channel *mc;
    sfv_node *node;
    sfv_node_desc nd;
    int before;
    fk_reset();
    fk_set_mw(true);
    tf_open(&e, 8192);
    CHECK_OK(sfv_get_device_list(&list));
    sfv_free_device_list(list);
    before = asserts;
    sfv_free_device_list(list); /* (void: the assert and the last error say it) */
    CHECK_EQ(asserts, before + 1);
    CHECK(strstr(sfv_last_error()->message, "not a live device list") != NULL);
    /* a context, a PD with no children: freed by their release, then released again */
    CHECK_OK(sfv_open_device(NULL, &ctx2));
    CHECK_OK(sfv_alloc_pd(ctx2, &pd2));
    CHECK_OK(sfv_dealloc_pd(pd2));
    R8_DEAD(sfv_dealloc_pd(pd2), "PD");
    CHECK_OK(sfv_close_device(ctx2));
    R8_DEAD(sfv_close_device(ctx2), "context");
    CHECK_OK(sfv_create_cq(e.ctx, 16, &cq));
    CHECK_OK(sfv_destroy_cq(cq));
    R8_DEAD(sfv_destroy_cq(cq), "CQ");
    CHECK_OK(sfv_reg_mr_shared(e.pd, e.buf + 4096, 1024, &mr2));
    CHECK_OK(sfv_dereg_mr(mr2));
    R8_DEAD(sfv_dereg_mr(mr2), "MR");
    /* a kind for another: a PD is no MR (nothing read of it as one) */
    R8_DEAD(sfv_dereg_mr((sfv_mr *)(void *)e.pd), "MR");
    CHECK_OK(sfv_create_channel(e.pd, NULL, &c));
    CHECK_OK(sfv_destroy_channel(c));
    R8_DEAD(sfv_destroy_channel(c), "channel");
    memset(&sd, 0, sizeof sd);
    sd.max_wr = 8;
    CHECK_OK(sfv_create_srq(e.pd, &sd, &srq));
    CHECK_OK(sfv_destroy_srq(srq));
    R8_DEAD(sfv_destroy_srq(srq), "SRQ");
    /* a lease: revoked, then revoked again */
    tf_pair(&e, NULL, &a, &b);
    {
        sfv_mr *m;
        CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 6144, 1024, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_MW_BIND, &m));
        CHECK_OK(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l));
        CHECK_OK(sfv_lease_revoke(l));
        R8_DEAD(sfv_lease_revoke(l), "lease");
        CHECK_OK(sfv_dereg_mr(m)); /* (its lease gone: nothing holds it) */
    }
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_create_multi_channel(e.pd, 2, NULL, &mc));
    CHECK_OK(sfv_destroy_multi_channel(mc));
    R8_DEAD(sfv_destroy_multi_channel(mc), "multi-channel");
    memset(&nd, 0, sizeof nd);
    nd.world_size = 1;
    CHECK_OK(sfv_create_node(e.pd, &nd, &node));
    CHECK_OK(sfv_destroy_node(node));
    R8_DEAD(sfv_destroy_node(node), "node");
    /* never made: an address the library never gave */
    {
        static char not_a_handle[512];
        R8_DEAD(sfv_destroy_channel((sfv_channel *)(void *)not_a_handle), "channel");
        R8_DEAD(sfv_close_device((sfv_context *)(void *)not_a_handle), "context");
    }
    tf_close(&e); /* nothing left: the set's own memory went with its last handle */
    CHECK_EQ(fk_live_total(), 0);
}

static fkcm_event r8_ev(int type) {
    fkcm_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    return ev;
}

/* A request answered (rejected, accepted), then answered again; a connection closed twice; a
   listener destroyed twice. */
static void t_cm_handles_twice(void) {
    tf_env e;
    sfv_cm_listener *l;
    sfv_cm_request *q;
    sfv_cm_conn *c = NULL, *c2 = NULL;
    fkcm_event ev = r8_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
    fk_reset();
    fkcm_reset();
    tf_open(&e, 4096);
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    ev.qpn = 0x77;
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    CHECK_OK(sfv_cm_reject(q, NULL, 0));
    R8_DEAD(sfv_cm_reject(q, NULL, 0), "CM request");
    R8_DEAD(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, &c2), "CM request");
    CHECK(c2 == NULL);
    R8_DEAD(sfv_cm_accept_channel(q, NULL, NULL, 0, 1000, &c2), "CM request");
    R8_DEAD(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, NULL), "CM request"); /* (its out NULL too: nothing rejected twice) */
    /* accepted: the connection closed, then closed again */
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    CHECK_OK(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, &c));
    R8_DEAD(sfv_cm_reject(q, NULL, 0), "CM request");
    CHECK_OK(sfv_cm_close(c, 0));
    R8_DEAD(sfv_cm_close(c, 0), "CM connection");
    CHECK_OK(sfv_cm_destroy_listener(l));
    R8_DEAD(sfv_cm_destroy_listener(l), "CM listener");
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fkcm_unacked(), 0);
    tf_close(&e);
    CHECK_EQ(fk_live_total(), 0);
}

/* A request whose side gave up before our answer: rdma_accept says EINVAL (the kernel's CM no
   longer waits for an answer). It said SFV_ERR_INVALID, the result of a caller's mistake; now
   SFV_ERR_UNREACHABLE, as the same peer giving up after the answer says. */
static void t_cm_accept_after_peer_gave_up(void) {
    tf_env e;
    sfv_cm_listener *l;
    sfv_cm_request *q;
    sfv_cm_conn *c = (sfv_cm_conn *)1;
    fkcm_event ev = r8_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
    fk_reset();
    fkcm_reset();
    tf_open(&e, 4096);
    CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &l));
    ev.qpn = 0x78;
    fkcm_push(sfv_cm_listener_fd(l), &ev);
    CHECK_OK(sfv_cm_get_request(l, 1000, &q));
    fkcm_fail(FKCM_ACCEPT, 1, EINVAL, 0);
    CHECK_RESULT(sfv_cm_accept(q, e.pd, NULL, NULL, 0, 1000, &c), SFV_ERR_UNREACHABLE);
    CHECK(c == NULL);
    CHECK(strstr(sfv_last_error()->message, "gave up") != NULL);
    CHECK_EQ(sfv_last_error()->errnum, EINVAL);
    CHECK_OK(sfv_cm_destroy_listener(l)); /* (the request was freed: nothing taken is left) */
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_live_channels(), 0);
    CHECK_EQ(fkcm_unacked(), 0);
    tf_close(&e);
    CHECK_EQ(fk_live_total(), 0);
}

/* A parent handle no longer live, given to a call that makes a child from it: refused before
   anything reads it (the call read the freed parent: ASan's heap-use-after-free), nothing made. */
static void t_child_of_dead_parent(void) {
    tf_env e;
    sfv_context *ctx2;
    sfv_pd *pd2, *pd3 = NULL;
    sfv_mr *m = NULL;
    sfv_cq *cq = NULL;
    sfv_channel *ch = NULL, *a, *b;
    sfv_srq *srq = NULL;
    sfv_multi_channel *mc = NULL;
    sfv_node *node = NULL;
    sfv_node_desc nd;
    sfv_lease *l = NULL;
    sfv_cm_conn *c = NULL;
    fk_reset();
    fkcm_reset();
    fk_set_mw(true);
    tf_open(&e, 8192);
    CHECK_OK(sfv_open_device(NULL, &ctx2));
    CHECK_OK(sfv_alloc_pd(ctx2, &pd2));
    CHECK_OK(sfv_dealloc_pd(pd2));
    CHECK_OK(sfv_close_device(ctx2));
    R8_DEAD(sfv_alloc_pd(ctx2, &pd3), "context");
    CHECK(pd3 == NULL);
    R8_DEAD(sfv_create_cq(ctx2, 16, &cq), "context");
    CHECK(cq == NULL);
    R8_DEAD(sfv_reg_mr_shared(pd2, e.buf, 64, &m), "PD");
    CHECK(m == NULL);
    R8_DEAD(sfv_create_channel(pd2, NULL, &ch), "PD");
    CHECK(ch == NULL);
    R8_DEAD(sfv_create_srq(pd2, NULL, &srq), "PD");
    CHECK(srq == NULL);
    R8_DEAD(sfv_create_multi_channel(pd2, 2, NULL, &mc), "PD");
    CHECK(mc == NULL);
    memset(&nd, 0, sizeof nd);
    nd.world_size = 1;
    R8_DEAD(sfv_create_node(pd2, &nd, &node), "PD");
    CHECK(node == NULL);
    R8_DEAD(sfv_cm_connect(pd2, NULL, FKCM_ADDR0, PORT, NULL, NULL, 0, 1000, &c), "PD");
    CHECK(c == NULL);
    /* a lease on a destroyed channel, or of a deregistered MR */
    tf_pair(&e, NULL, &a, &b);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 6144, 1024, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_MW_BIND, &m));
    CHECK_OK(sfv_dereg_mr(m));
    R8_DEAD(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), "MR");
    CHECK(l == NULL);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 6144, 1024, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_MW_BIND, &m));
    CHECK_OK(sfv_destroy_channel(b));
    R8_DEAD(sfv_lease_grant(b, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), "channel");
    CHECK(l == NULL);
    CHECK_OK(sfv_dereg_mr(m));
    CHECK_OK(sfv_destroy_channel(a));
    /* a request accepted onto a dead PD: rejected (answered, freed), the PD not read */
    {
        sfv_cm_listener *ls;
        sfv_cm_request *q;
        fkcm_event ev = r8_ev(RDMA_CM_EVENT_CONNECT_REQUEST);
        CHECK_OK(sfv_cm_listen(FKCM_ADDR0, PORT, 0, &ls));
        ev.qpn = 0x79;
        fkcm_push(sfv_cm_listener_fd(ls), &ev);
        CHECK_OK(sfv_cm_get_request(ls, 1000, &q));
        R8_DEAD(sfv_cm_accept(q, pd2, NULL, NULL, 0, 1000, &c), "PD");
        CHECK(c == NULL);
        CHECK_EQ(fkcm_calls(FKCM_REJECT), 1);
        R8_DEAD(sfv_cm_reject(q, NULL, 0), "CM request"); /* (answered: freed) */
        CHECK_OK(sfv_cm_destroy_listener(ls));
    }
    CHECK_EQ(fkcm_live_ids(), 0);
    CHECK_EQ(fkcm_unacked(), 0);
    tf_close(&e);
    CHECK_EQ(fk_live_total(), 0);
}

static const harness_test TESTS[] = {
    TEST(t_verbs_handles_twice, 10),
    TEST(t_cm_handles_twice, 10),
    TEST(t_cm_accept_after_peer_gave_up, 10),
    TEST(t_child_of_dead_parent, 10),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
