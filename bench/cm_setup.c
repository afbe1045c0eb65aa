/* cm_setup.c - connection set-up time through RDMA-CM: from the start of connecting to the first
   completed send, safeverbs (>>rdmacm: sfv_cm_connect, then sfv_channel_send) against the same
   steps written directly on librdmacm and libibverbs (rdma_resolve_addr, _route, a QP of our
   own, rdma_connect, RTR/RTS from rdma_init_qp_attr, rdma_establish, ibv_post_send, poll).
   Both sides in one process: the listener (a thread, on the server address) accepts and posts a
   receive; the client is timed. Rounds alternate A-B-B-A (sfv raw raw sfv, ...).

       build/cm_setup [-a server 192.0.2.1] [-I client 192.0.2.2] [-n rounds 40]

   Prints "result,setup,connect,cm,0,IMPL,median_us,V" and p90_us lines (bench/run.sh adds them
   to results.csv) and a human line with the ratio. */
#define _GNU_SOURCE
#define SAFEVERBS_RDMACM
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *SRV = "192.0.2.1", *CLI = "192.0.2.2";
static uint16_t port;
static int rounds = 40;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}
#define DIE(...) do { fprintf(stderr, "cm_setup: " __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define TRY(c) do { if ((c) != SFV_OK) DIE("%s: %s", #c, sfv_last_error()->message); } while (0)

/* The server: accepts 2 * rounds connections, receives one message on each, closes. */
static void *server(void *arg) {
    sfv_cm_listener *l = (sfv_cm_listener *)arg;
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    static char buf[64];
    int i;
    TRY(sfv_cm_open_device(SRV, &ctx));
    TRY(sfv_alloc_pd(ctx, &pd));
    TRY(sfv_reg_mr_local(pd, buf, sizeof buf, &mr));
    for (i = 0; i < 2 * rounds; i++) {
        sfv_cm_request *req;
        sfv_cm_conn *c;
        sfv_scatter_element in = sfv_mr_scatter_element(mr, buf, sizeof buf);
        TRY(sfv_cm_get_request(l, 30000, &req));
        TRY(sfv_cm_accept(req, pd, NULL, NULL, 0, 30000, &c));
        TRY(sfv_channel_receive(sfv_cm_channel(c), &in, 1, NULL));
        /* the client leaves first: closing now could take the QP down between the receive's
           completion and its ACK, and the client's send would fail after its retries */
        for (int k = 0; k < 100 && sfv_cm_events(c) == SFV_OK; k++) {
            struct pollfd p = {sfv_cm_fd(c), POLLIN, 0};
            (void)poll(&p, 1, 50);
        }
        TRY(sfv_cm_close(c, 0));
    }
    TRY(sfv_dereg_mr(mr));
    TRY(sfv_dealloc_pd(pd));
    TRY(sfv_close_device(ctx));
    return NULL;
}

static double one_sfv(sfv_pd *pd, sfv_mr *mr, char *buf) {
    sfv_cm_conn *c;
    sfv_gather_element out = sfv_mr_gather_element(mr, buf, 8);
    double t0 = now_us(), t;
    TRY(sfv_cm_connect(pd, CLI, SRV, port, NULL, NULL, 0, 30000, &c));
    TRY(sfv_channel_send(sfv_cm_channel(c), &out, 1, NULL));
    t = now_us() - t0;
    TRY(sfv_cm_close(c, 0));
    return t;
}

static struct rdma_cm_event *expect(struct rdma_event_channel *ec, enum rdma_cm_event_type want) {
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ec, &ev)) DIE("rdma_get_cm_event");
    if (ev->event != want) DIE("got %s, want %s", rdma_event_str(ev->event), rdma_event_str(want));
    return ev;
}

/* The same on librdmacm and libibverbs, blocking, without the checks. */
static double one_raw(struct ibv_pd *pd, struct ibv_mr *mr, char *buf) {
    struct rdma_event_channel *ec = rdma_create_event_channel();
    struct rdma_cm_id *id;
    struct sockaddr_in src, dst;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_qp_init_attr qi;
    struct ibv_qp_attr qa;
    struct rdma_conn_param p;
    struct ibv_sge sge;
    struct ibv_send_wr wr, *bad;
    struct ibv_wc wc;
    int mask, n;
    double t0 = now_us(), t;
    memset(&src, 0, sizeof src);
    memset(&dst, 0, sizeof dst);
    src.sin_family = dst.sin_family = AF_INET;
    inet_pton(AF_INET, CLI, &src.sin_addr);
    inet_pton(AF_INET, SRV, &dst.sin_addr);
    dst.sin_port = htons(port);
    if (!ec || rdma_create_id(ec, &id, NULL, RDMA_PS_TCP)) DIE("rdma_create_id");
    if (rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 5000)) DIE("rdma_resolve_addr");
    rdma_ack_cm_event(expect(ec, RDMA_CM_EVENT_ADDR_RESOLVED));
    if (rdma_resolve_route(id, 5000)) DIE("rdma_resolve_route");
    rdma_ack_cm_event(expect(ec, RDMA_CM_EVENT_ROUTE_RESOLVED));
    cq = ibv_create_cq(pd->context, 256, NULL, NULL, 0);
    memset(&qi, 0, sizeof qi);
    qi.send_cq = qi.recv_cq = cq;
    qi.qp_type = IBV_QPT_RC;
    qi.cap.max_send_wr = qi.cap.max_recv_wr = 128;
    qi.cap.max_send_sge = qi.cap.max_recv_sge = 4;
    qp = cq ? ibv_create_qp(pd, &qi) : NULL;
    if (!qp) DIE("ibv_create_qp");
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_INIT;
    if (rdma_init_qp_attr(id, &qa, &mask) || ibv_modify_qp(qp, &qa, mask)) DIE("INIT");
    memset(&p, 0, sizeof p);
    p.responder_resources = p.initiator_depth = 1;
    p.retry_count = 6;
    p.rnr_retry_count = 7;
    p.qp_num = qp->qp_num;
    if (rdma_connect(id, &p)) DIE("rdma_connect");
    rdma_ack_cm_event(expect(ec, RDMA_CM_EVENT_CONNECT_RESPONSE));
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTR;
    if (rdma_init_qp_attr(id, &qa, &mask) || ibv_modify_qp(qp, &qa, mask)) DIE("RTR");
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTS;
    if (rdma_init_qp_attr(id, &qa, &mask) || ibv_modify_qp(qp, &qa, mask)) DIE("RTS");
    if (rdma_establish(id)) DIE("rdma_establish");
    sge.addr = (uintptr_t)buf;
    sge.length = 8;
    sge.lkey = mr->lkey;
    memset(&wr, 0, sizeof wr);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(qp, &wr, &bad)) DIE("ibv_post_send");
    while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {}
    if (n < 0 || wc.status != IBV_WC_SUCCESS) DIE("send failed: %s", n < 0 ? "ibv_poll_cq failed" : ibv_wc_status_str(wc.status));
    t = now_us() - t0;
    rdma_disconnect(id);
    ibv_destroy_qp(qp);
    ibv_destroy_cq(cq);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ec);
    return t;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    sfv_cm_listener *l;
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    static char buf[64];
    double *ts, *tr, ms, mr_;
    pthread_t t;
    int opt, i, ns = 0, nr = 0;
    while ((opt = getopt(argc, argv, "a:I:n:")) != -1) {
        if (opt == 'a') SRV = optarg;
        else if (opt == 'I') CLI = optarg;
        else if (opt == 'n') rounds = atoi(optarg);
        else DIE("usage: cm_setup [-a server] [-I client] [-n rounds]");
    }
    if (rounds < 2) rounds = 2;
    rounds &= ~1; /* A-B-B-A comes in pairs */
    ts = (double *)calloc((size_t)rounds, sizeof *ts);
    tr = (double *)calloc((size_t)rounds, sizeof *tr);
    if (!ts || !tr) DIE("calloc");
    TRY(sfv_cm_listen(SRV, 0, 64, &l));
    port = sfv_cm_listener_port(l);
    if (pthread_create(&t, NULL, server, l)) DIE("pthread_create");
    TRY(sfv_cm_open_device(CLI, &ctx));
    TRY(sfv_alloc_pd(ctx, &pd));
    TRY(sfv_reg_mr_local(pd, buf, sizeof buf, &mr));
    for (i = 0; i < rounds; i++) { /* sfv raw | raw sfv | sfv raw | ... */
        if (i % 2 == 0) { ts[ns++] = one_sfv(pd, mr, buf); tr[nr++] = one_raw(sfv_pd_raw(pd), sfv_mr_raw(mr), buf); }
        else { tr[nr++] = one_raw(sfv_pd_raw(pd), sfv_mr_raw(mr), buf); ts[ns++] = one_sfv(pd, mr, buf); }
    }
    pthread_join(t, NULL);
    qsort(ts, (size_t)ns, sizeof *ts, cmp);
    qsort(tr, (size_t)nr, sizeof *tr, cmp);
    ms = ts[ns / 2];
    mr_ = tr[nr / 2];
    printf("result,setup,connect,cm,0,sfv,median_us,%.6g\n", ms);
    printf("result,setup,connect,cm,0,sfv,p90_us,%.6g\n", ts[ns * 9 / 10]);
    printf("result,setup,connect,cm,0,raw,median_us,%.6g\n", mr_);
    printf("result,setup,connect,cm,0,raw,p90_us,%.6g\n", tr[nr * 9 / 10]);
    printf("connection set-up (connect to first completed send), %d each, A-B-B-A: safeverbs median %.0f us, raw librdmacm %.0f us, ratio %.2f\n",
           ns, ms, mr_, ms / mr_);
    TRY(sfv_dereg_mr(mr));
    TRY(sfv_dealloc_pd(pd));
    TRY(sfv_close_device(ctx));
    TRY(sfv_cm_destroy_listener(l));
    free(ts);
    free(tr);
    return 0;
}
