/* allgather.c - a job of N ranks, each its own process: they find each other and connect a
   node (sfv_node_connect, over TCP) (a channel to every rank, itself included), gather one block from every rank
   into every rank, and time their barriers.

   Each rank is started with its number and the job's size; rank r listens on port PORT + r of
   HOST (all on 127.0.0.1 by default, so one machine runs the whole job):

       build/allgather -n 3 -r 0 -d rxe0 &
       build/allgather -n 3 -r 1 -d rxe1 &
       build/allgather -n 3 -r 2 -d rxe0

   Every rank contributes 64 bytes ("rank R of N" and a pattern) and sends them to every rank
   with one sfv_multi_channel_multicast_send, after a barrier that says everyone's receives are
   posted. It checks each block it got, then runs -b barriers (default 200) with the algorithm
   of -a (tree, central or dissemination) and prints the mean time of one. Exits 0 only if every
   block was right. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { BLOCK = 64, MAX_RANKS = 64 };

static int fail(const char *what, sfv_result r) {
    fprintf(stderr, "allgather: %s: %s (%s)\n", what, sfv_result_str(r), sfv_last_error()->message);
    return 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void block_fill(unsigned char *b, size_t rank, size_t n) {
    size_t i;
    memset(b, 0, BLOCK);
    snprintf((char *)b, 32, "rank %zu of %zu", rank, n);
    for (i = 32; i < BLOCK; i++) b[i] = (unsigned char)(rank * 31 + i);
}

int main(int argc, char **argv) {
    const char *dev = NULL, *host = "127.0.0.1";
    size_t n = 0, rank = 0, r, barriers = 200;
    int port = 18700, c;
    sfv_barrier_kind kind = SFV_BARRIER_BINARY_TREE;
    static const struct option longopts[] = {{"host", required_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    sfv_net_node nodes[MAX_RANKS];
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_node *node;
    sfv_node_desc desc;
    sfv_multi_channel *mc;
    unsigned char *buf;
    sfv_pending rx[MAX_RANKS];
    sfv_gather_element out;
    size_t to[MAX_RANKS];
    sfv_result res;
    double t0;

    while ((c = getopt_long(argc, argv, "n:r:d:p:a:b:", longopts, NULL)) != -1) {
        if (c == 'n') n = strtoul(optarg, NULL, 10);
        else if (c == 'r') rank = strtoul(optarg, NULL, 10);
        else if (c == 'd') dev = optarg;
        else if (c == 'p') port = atoi(optarg);
        else if (c == 'b') barriers = strtoul(optarg, NULL, 10);
        else if (c == 'h') host = optarg;
        else if (c == 'a') kind = !strcmp(optarg, "central") ? SFV_BARRIER_CENTRALIZED
                                  : !strcmp(optarg, "dissemination") ? SFV_BARRIER_DISSEMINATION : SFV_BARRIER_BINARY_TREE;
        else return 2;
    }
    if (n < 1 || n > MAX_RANKS || rank >= n) {
        fprintf(stderr, "usage: allgather -n RANKS -r RANK [-d DEVICE] [-p PORT] [--host HOST] [-a tree|central|dissemination] [-b BARRIERS]\n");
        return 2;
    }
    for (r = 0; r < n; r++) {
        nodes[r].host = host;
        nodes[r].port = (uint16_t)(port + (int)r);
        nodes[r].rank = (uint32_t)r;
        nodes[r].device = dev;
    }

    /* the node: one channel per rank, and the barrier */
    if ((res = sfv_open_device(dev, &ctx)) != SFV_OK) return fail("open device", res);
    if ((res = sfv_alloc_pd(ctx, &pd)) != SFV_OK) return fail("alloc pd", res);
    memset(&desc, 0, sizeof desc);
    desc.rank = rank;
    desc.world_size = n;
    desc.barrier = kind;
    if ((res = sfv_create_node(pd, &desc, &node)) != SFV_OK) return fail("create node", res);
    mc = sfv_node_multi_channel(node);

    /* everyone's endpoints, the handshake, and a sync: when it returns, every rank is connected */
    if ((res = sfv_node_connect(node, nodes, 30000)) != SFV_OK) return fail("connect", res);

    /* the gather: block r of buf comes from rank r; ours goes out from the block after them */
    buf = (unsigned char *)calloc(n + 1, BLOCK);
    if (!buf) return 1;
    if ((res = sfv_reg_mr_local(pd, buf, (n + 1) * BLOCK, &mr)) != SFV_OK) return fail("register", res);
    for (r = 0; r < n; r++) {
        sfv_scatter_element in = sfv_mr_scatter_element(mr, buf + r * BLOCK, BLOCK);
        if ((res = sfv_channel_post_receive(sfv_multi_channel_peer(mc, r), &in, 1, &rx[r])) != SFV_OK) return fail("post receive", res);
        to[r] = r;
    }
    if ((res = sfv_node_barrier(node, NULL, 0, -1)) != SFV_OK) return fail("barrier", res); /* all receives posted */
    block_fill(buf + n * BLOCK, rank, n);
    out = sfv_mr_gather_element(mr, buf + n * BLOCK, BLOCK);
    if ((res = sfv_multi_channel_multicast_send(mc, to, n, &out, 1, NULL)) != SFV_OK) return fail("multicast", res);
    for (r = 0; r < n; r++) {
        unsigned char want[BLOCK];
        if ((res = sfv_pending_wait(&rx[r], -1, NULL)) != SFV_OK) return fail("receive", res);
        block_fill(want, r, n);
        if (memcmp(buf + r * BLOCK, want, BLOCK) != 0) {
            fprintf(stderr, "allgather: rank %zu: the block from rank %zu is wrong\n", rank, r);
            return 1;
        }
    }

    /* barriers, timed */
    t0 = now_s();
    for (r = 0; r < barriers; r++)
        if ((res = sfv_node_barrier(node, NULL, 0, -1)) != SFV_OK) return fail("barrier", res);
    printf("rank %zu of %zu on %s: gathered %zu blocks of %d bytes, all right; %zu barriers, %.1f us each\n", rank, n,
           sfv_context_name(ctx), n, BLOCK, barriers, barriers ? (now_s() - t0) * 1e6 / (double)barriers : 0.0);

    if ((res = sfv_destroy_node(node)) != SFV_OK) return fail("destroy node", res);
    sfv_dereg_mr(mr);
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
    free(buf);
    return 0;
}
