/* sfv_scale.c - how safeverbs' costs grow with the work: ranks, channels, peers, depth
   (bench/run.sh's scaling stage; bench_report turns its lines into RESULTS.md's tables and
   plot.gp into scaling.png). Results are lines on stdout: result,scale,WHAT,VARIANT,X,sfv,METRIC,VALUE.

     --test connect -w RANKS -r RANK [-d DEV] [-p PORT] [--variant phases]
         one rank of a node of RANKS (sfv_create_node, sfv_node_connect over 127.0.0.1 ports
         PORT.., one barrier): prints the rank's time from before the connect to after the barrier.
         --variant phases: sfv_node_connect's own steps called one by one instead (the endpoint
         exchange over TCP, sfv_node_handshake, the sync exchange; then the barrier), each timed,
         and the process's CPU time over them, after an untimed exchange of nothing that waits
         for every rank to be up (its time: start_ms). The raw floor: bench/raw_connect.c.
     --test mem [-d DEV] --channels LIST
         one process: a multi-channel of n channels (the default channel desc) for each n of LIST;
         the heap it took (mallinfo2: safeverbs' tracking and libibverbs' bookkeeping) and the
         address space it mapped (the provider's queue buffers) per channel.
     --test rate [-d DEV] [-p PORT] --channels C --depth D -n N [--variant NAME] [HOST]
         two processes (no HOST: the server), one multi-channel of C channels each side, the
         channels connected pairwise: the client sends N 64-byte messages round-robin over the
         channels, D in flight in all; the server re-posts receives. Messages per second.
     --test cost [-d DEV] --channels C -n N [--settle-us US]
         one process, two multi-channels of C channels connected to each other: post a receive,
         post a send, let them arrive, wait for both; each step a function cost_sfv_<step> for
         callgrind (as sfv_bench --test cost), the channel rotating over all C. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"

#include <getopt.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#if defined(__GNUC__) && !defined(__clang__)
#define NOINLINE __attribute__((noinline, noclone))
#else
#define NOINLINE __attribute__((noinline))
#endif
enum { MAX_CH = 256, SIZE = 64 };

static void die(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "sfv_scale: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}
static void must(sfv_result r, const char *what) {
    if (r != SFV_OK) die("%s: %s (%s)", what, sfv_result_str(r), sfv_last_error()->message);
}
static double cpu_ms(void) { /* the process's user + system CPU time */
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct opts {
    const char *test, *dev, *host, *variant, *channels_list;
    int port, world, rank, channels, depth, iters, settle_us, gid;
} opts;

static sfv_channel_desc chan_desc(const opts *o, uint32_t sq, uint32_t rq) {
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    d.max_send_wr = sq;
    d.max_recv_wr = rq;
    d.gid_index_set = true;
    d.gid_index = (uint8_t)o->gid;
    d.timeout_ms = 60000;
    return d;
}

/* ---- connect: one rank of a node ------------------------------------------------------------ */
static int run_connect(const opts *o) {
    sfv_net_node nodes[64];
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_node *node;
    sfv_node_desc d;
    double t0, t1;
    if (o->world < 1 || o->world > 64 || o->rank < 0 || o->rank >= o->world) die("-w 1..64, -r 0..w-1");
    for (int r = 0; r < o->world; r++) {
        nodes[r].host = "127.0.0.1";
        nodes[r].port = (uint16_t)(o->port + r);
        nodes[r].rank = (uint32_t)r;
        nodes[r].device = o->dev;
    }
    must(sfv_open_device(o->dev, &ctx), "open device");
    must(sfv_alloc_pd(ctx, &pd), "alloc pd");
    memset(&d, 0, sizeof d);
    d.rank = (size_t)o->rank;
    d.world_size = (size_t)o->world;
    d.channel = chan_desc(o, 16, 16);
    must(sfv_create_node(pd, &d, &node), "create node");
    if (o->variant && !strcmp(o->variant, "phases")) { /* sfv_node_connect's steps one by one, timed */
        const size_t each = SFV_NODE_ENDPOINT_SIZE((size_t)o->world);
        uint8_t *mine = malloc(each), *all = malloc(each * (size_t)o->world);
        double t[6], c0, s0;
        static const char *const step[] = {"exchange", "handshake", "sync", "barrier"};
        if (!mine || !all) die("malloc");
        /* first an exchange of nothing, outside the steps: every rank is up (processes start
           seconds apart under emulation) before the clock starts */
        s0 = now_s();
        must(sfv_exchange_all_keyed(nodes, (size_t)o->world, (size_t)o->rank, NULL, 0, NULL, NULL, 120000), "start");
        printf("result,scale,connect,phases,%d,sfv,start_ms_rank%d,%.3f\n", o->world, o->rank, (now_s() - s0) * 1e3);
        c0 = cpu_ms();
        t[0] = now_s();
        must(sfv_node_endpoint(node, mine, each), "node endpoint");
        must(sfv_exchange_all_keyed(nodes, (size_t)o->world, (size_t)o->rank, mine, each, all, NULL, 120000), "exchange");
        t[1] = now_s();
        must(sfv_node_handshake(node, all, each * (size_t)o->world), "handshake");
        t[2] = now_s();
        must(sfv_exchange_all_keyed(nodes, (size_t)o->world, (size_t)o->rank, NULL, 0, NULL, NULL, 120000), "sync");
        t[3] = now_s();
        must(sfv_node_barrier(node, NULL, 0, 120000), "barrier");
        t[4] = now_s();
        for (int i = 0; i < 4; i++)
            printf("result,scale,connect,phases,%d,sfv,%s_ms_rank%d,%.3f\n", o->world, step[i], o->rank, (t[i + 1] - t[i]) * 1e3);
        printf("result,scale,connect,phases,%d,sfv,connect_ms_rank%d,%.3f\n", o->world, o->rank, (t[4] - t[0]) * 1e3);
        printf("result,scale,connect,phases,%d,sfv,cpu_ms_rank%d,%.3f\n", o->world, o->rank, cpu_ms() - c0);
        free(mine);
        free(all);
    } else {
        const double c0 = cpu_ms();
        t0 = now_s();
        must(sfv_node_connect(node, nodes, 120000), "node connect");
        must(sfv_node_barrier(node, NULL, 0, 120000), "barrier");
        t1 = now_s();
        printf("result,scale,connect,%s,%d,sfv,connect_ms_rank%d,%.3f\n", o->variant ? o->variant : "tree", o->world, o->rank,
               (t1 - t0) * 1e3);
        printf("result,scale,connect,%s,%d,sfv,cpu_ms_rank%d,%.3f\n", o->variant ? o->variant : "tree", o->world, o->rank, cpu_ms() - c0);
    }
    must(sfv_destroy_node(node), "destroy node");
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
    return 0;
}

/* ---- mem: per-channel memory of a multi-channel ---------------------------------------------- */
static size_t vm_bytes(void) { /* the address space (statm's first field) */
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    return pages * (size_t)sysconf(_SC_PAGESIZE);
}
static int run_mem(const opts *o) {
    sfv_context *ctx;
    sfv_pd *pd;
    char list[256], *tok, *save = NULL;
    sfv_channel_desc d = chan_desc(o, 0, 0); /* the defaults: 128 + 128 work requests */
    must(sfv_open_device(o->dev, &ctx), "open device");
    must(sfv_alloc_pd(ctx, &pd), "alloc pd");
    snprintf(list, sizeof list, "%s", o->channels_list ? o->channels_list : "1,2,4,8,16,32,64");
    for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int n = atoi(tok);
        sfv_multi_channel *mc;
        struct mallinfo2 m0, m1;
        size_t v0, v1;
        if (n < 1 || n > MAX_CH) die("channels 1..%d", MAX_CH);
        m0 = mallinfo2();
        v0 = vm_bytes();
        must(sfv_create_multi_channel(pd, (size_t)n, &d, &mc), "create multi-channel");
        m1 = mallinfo2();
        v1 = vm_bytes();
        printf("result,scale,mem,default,%d,sfv,heap_per_channel,%.0f\n", n, (double)(m1.uordblks - m0.uordblks) / n);
        printf("result,scale,mem,default,%d,sfv,mapped_per_channel,%.0f\n", n, (double)(v1 - v0) / n);
        must(sfv_destroy_multi_channel(mc), "destroy multi-channel");
    }
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
    return 0;
}

/* ---- a multi-channel connected to its twin in another process ------------------------------- */
static sfv_multi_channel *mc_connect(const opts *o, sfv_pd *pd, int channels, uint32_t sq, uint32_t rq, int rank) {
    sfv_net_node nodes[2];
    sfv_multi_channel *mc;
    sfv_channel_desc d = chan_desc(o, sq, rq);
    sfv_endpoint eps[MAX_CH];
    static uint8_t mine[MAX_CH * SFV_ENDPOINT_ENCODED_SIZE], all[2 * MAX_CH * SFV_ENDPOINT_ENCODED_SIZE];
    size_t size = (size_t)channels * SFV_ENDPOINT_ENCODED_SIZE;
    for (int r = 0; r < 2; r++) {
        nodes[r].host = o->host ? o->host : "127.0.0.1";
        nodes[r].port = (uint16_t)(o->port + r);
        nodes[r].rank = (uint32_t)r;
        nodes[r].device = NULL;
    }
    must(sfv_create_multi_channel(pd, (size_t)channels, &d, &mc), "create multi-channel");
    must(sfv_multi_channel_endpoints(mc, eps, (size_t)channels), "endpoints");
    for (int i = 0; i < channels; i++) sfv_endpoint_encode(&eps[i], mine + i * SFV_ENDPOINT_ENCODED_SIZE);
    must(sfv_exchange_all(nodes, 2, (size_t)rank, mine, size, all, 60000), "exchange");
    for (int i = 0; i < channels; i++)
        must(sfv_endpoint_decode(all + (size_t)(1 - rank) * size + (size_t)i * SFV_ENDPOINT_ENCODED_SIZE,
                                 SFV_ENDPOINT_ENCODED_SIZE, &eps[i]),
             "endpoint decode");
    must(sfv_multi_channel_handshake(mc, eps, (size_t)channels), "handshake");
    return mc;
}

static int run_rate(const opts *o) {
    const int C = o->channels, D = o->depth, N = o->iters;
    const bool client = o->host != NULL;
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_multi_channel *mc;
    uint8_t *buf;
    int per = (D + C - 1) / C;         /* in flight per channel, at most */
    int rq = per + 8 < 16 ? 16 : per + 8; /* receives kept posted per channel */
    sfv_pending *p;
    sfv_net_node nodes[2];
    uint8_t b = 0, bs[2];
    if (C < 1 || C > MAX_CH || D < 1 || D > 4096 || N < 1) die("--channels 1..%d, --depth 1..4096, -n >= 1", MAX_CH);
    buf = calloc(1, (size_t)SIZE * 2);
    p = calloc((size_t)(client ? D : C * rq), sizeof *p);
    if (!buf || !p) die("out of memory");
    must(sfv_open_device(o->dev, &ctx), "open device");
    must(sfv_alloc_pd(ctx, &pd), "alloc pd");
    must(sfv_reg_mr_local(pd, buf, (size_t)SIZE * 2, &mr), "register");
    mc = mc_connect(o, pd, C, (uint32_t)(per + 1), (uint32_t)rq, client ? 1 : 0);
    if (!client) {
        sfv_scatter_element e = sfv_mr_scatter_element(mr, buf + SIZE, SIZE);
        for (int c = 0; c < C; c++)
            for (int j = 0; j < rq; j++) must(sfv_channel_post_receive(sfv_multi_channel_peer(mc, (size_t)c), &e, 1, &p[c * rq + j]), "post receive");
    }
    for (int r = 0; r < 2; r++) { /* every receive is posted before the first send */
        nodes[r].host = o->host ? o->host : "127.0.0.1";
        nodes[r].port = (uint16_t)(o->port + 2 + r);
        nodes[r].rank = (uint32_t)r;
        nodes[r].device = NULL;
    }
    must(sfv_exchange_all(nodes, 2, client ? 1 : 0, &b, 1, bs, 60000), "sync");
    if (client) {
        sfv_gather_element g = sfv_mr_gather_element(mr, buf, SIZE);
        double t0 = now_s(), t1;
        for (int k = 0; k < N; k++) {
            sfv_pending *slot = &p[k % D];
            if (k >= D) must(sfv_pending_wait(slot, -1, NULL), "wait send");
            must(sfv_channel_post_send(sfv_multi_channel_peer(mc, (size_t)(k % C)), &g, 1, slot), "post send");
        }
        for (int k = N - (N < D ? N : D); k < N; k++) must(sfv_pending_wait(&p[k % D], -1, NULL), "wait send");
        t1 = now_s();
        printf("result,scale,rate,%s,%d,sfv,kmsg_s,%.3f\n", o->variant ? o->variant : "rate", o->variant && !strncmp(o->variant, "depth", 5) ? D : C,
               (double)N / (t1 - t0) / 1e3);
    } else {
        sfv_scatter_element e = sfv_mr_scatter_element(mr, buf + SIZE, SIZE);
        for (int k = 0; k < N; k++) {
            int c = k % C, j = (k / C) % rq;
            sfv_pending *slot = &p[c * rq + j];
            must(sfv_pending_wait(slot, -1, NULL), "wait receive");
            if (k + C * rq < N) must(sfv_channel_post_receive(sfv_multi_channel_peer(mc, (size_t)c), &e, 1, slot), "post receive");
        }
    }
    must(sfv_exchange_all(nodes, 2, client ? 1 : 0, &b, 1, bs, 60000), "sync at the end");
    must(sfv_destroy_multi_channel(mc), "destroy");
    sfv_dereg_mr(mr);
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
    free(p);
    free(buf);
    return 0;
}

/* ---- cost: instructions per operation against the number of peers --------------------------- */
typedef struct cost {
    sfv_multi_channel *a, *b;
    sfv_gather_element g;
    sfv_scatter_element e;
    sfv_pending tx, rx;
} cost;
NOINLINE void cost_sfv_post_recv(cost *c, size_t i);
NOINLINE void cost_sfv_post_send(cost *c, size_t i);
NOINLINE void cost_sfv_poll_send(cost *c);
NOINLINE void cost_sfv_poll_recv(cost *c);
NOINLINE void cost_sfv_post_recv(cost *c, size_t i) {
    sfv_result r = sfv_channel_post_receive(sfv_multi_channel_peer(c->b, i), &c->e, 1, &c->rx);
    if (__builtin_expect(r != SFV_OK, 0)) must(r, "post receive");
}
NOINLINE void cost_sfv_post_send(cost *c, size_t i) {
    sfv_result r = sfv_channel_post_send(sfv_multi_channel_peer(c->a, i), &c->g, 1, &c->tx);
    if (__builtin_expect(r != SFV_OK, 0)) must(r, "post send");
}
NOINLINE void cost_sfv_poll_send(cost *c) {
    sfv_result r = sfv_pending_wait(&c->tx, -1, NULL);
    if (__builtin_expect(r != SFV_OK, 0)) must(r, "wait send");
}
NOINLINE void cost_sfv_poll_recv(cost *c) {
    sfv_result r = sfv_pending_wait(&c->rx, -1, NULL);
    if (__builtin_expect(r != SFV_OK, 0)) must(r, "wait receive");
}
static int run_cost(const opts *o) {
    const int C = o->channels;
    static cost c;
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_endpoint ea[MAX_CH], eb[MAX_CH];
    sfv_channel_desc d = chan_desc(o, 16, 16);
    uint8_t *buf = calloc(1, 2 * SIZE);
    if (C < 1 || C > MAX_CH || !buf) die("--channels 1..%d", MAX_CH);
    must(sfv_open_device(o->dev, &ctx), "open device");
    must(sfv_alloc_pd(ctx, &pd), "alloc pd");
    must(sfv_reg_mr_local(pd, buf, 2 * SIZE, &mr), "register");
    must(sfv_create_multi_channel(pd, (size_t)C, &d, &c.a), "create multi-channel");
    must(sfv_create_multi_channel(pd, (size_t)C, &d, &c.b), "create multi-channel");
    must(sfv_multi_channel_endpoints(c.a, ea, (size_t)C), "endpoints");
    must(sfv_multi_channel_endpoints(c.b, eb, (size_t)C), "endpoints");
    must(sfv_multi_channel_handshake(c.a, eb, (size_t)C), "handshake");
    must(sfv_multi_channel_handshake(c.b, ea, (size_t)C), "handshake");
    c.g = sfv_mr_gather_element(mr, buf, SIZE);
    c.e = sfv_mr_scatter_element(mr, buf + SIZE, SIZE);
    for (int k = 0; k < o->iters; k++) {
        size_t i = (size_t)(k % C);
        cost_sfv_post_recv(&c, i);
        cost_sfv_post_send(&c, i);
        if (o->settle_us > 0) usleep((useconds_t)o->settle_us);
        cost_sfv_poll_send(&c);
        cost_sfv_poll_recv(&c);
    }
    printf("result,scale,cost,peers%d,%d,sfv,ops,%d\n", C, C, o->iters);
    must(sfv_destroy_multi_channel(c.a), "destroy");
    must(sfv_destroy_multi_channel(c.b), "destroy");
    sfv_dereg_mr(mr);
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    static const struct option longs[] = {{"test", 1, 0, 'T'},     {"channels", 1, 0, 'c'}, {"depth", 1, 0, 'D'},
                                          {"variant", 1, 0, 'v'},  {"settle-us", 1, 0, 'S'}, {0, 0, 0, 0}};
    opts o;
    int ch;
    memset(&o, 0, sizeof o);
    o.test = "";
    o.port = 19300;
    o.channels = 1;
    o.depth = 64;
    o.iters = 1000;
    o.settle_us = 1000;
    o.gid = 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while ((ch = getopt_long(argc, argv, "d:p:w:r:n:x:", longs, NULL)) != -1) {
        switch (ch) {
        case 'd': o.dev = optarg; break;
        case 'p': o.port = atoi(optarg); break;
        case 'w': o.world = atoi(optarg); break;
        case 'r': o.rank = atoi(optarg); break;
        case 'n': o.iters = atoi(optarg); break;
        case 'x': o.gid = atoi(optarg); break;
        case 'T': o.test = optarg; break;
        case 'c':
            o.channels_list = optarg;
            o.channels = atoi(optarg);
            break;
        case 'D': o.depth = atoi(optarg); break;
        case 'v': o.variant = optarg; break;
        case 'S': o.settle_us = atoi(optarg); break;
        default: die("usage: see the comment at the top of bench/sfv_scale.c");
        }
    }
    if (optind < argc) o.host = argv[optind];
    if (!strcmp(o.test, "connect")) return run_connect(&o);
    if (!strcmp(o.test, "mem")) return run_mem(&o);
    if (!strcmp(o.test, "rate")) return run_rate(&o);
    if (!strcmp(o.test, "cost")) return run_cost(&o);
    die("--test connect|mem|rate|cost");
    return 2;
}
