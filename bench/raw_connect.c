/* raw_connect.c - the floor under sfv_scale --test connect: the same queue pairs brought to RTS
   with libibverbs alone, no safeverbs (bench/run.sh's scaling stage, beside the node connect).

     raw_connect -w RANKS -r RANK -s DIR [-d DEV] [-x GID] [-n ROUNDS]

   One rank of RANKS, each a process, as sfv_scale's connect: RANKS RC queue pairs (one per rank,
   itself included, as a node's multi-channel has), each with its own CQ (16 send and 16 receive
   work requests), created and moved to INIT before the clock starts (sfv_create_node does that
   before sfv_node_connect too). Then, timed: RTR and RTS for every queue pair, to the queue pair
   of the other rank that faces this one, and a barrier. The exchange is the least there is: each
   rank writes its queue pair numbers and GID into memory all ranks map (a file in DIR, a tmpfs),
   and the barriers are a process-shared pthread barrier there (the waiting ranks sleep). So no
   TCP, no handshake protocol and no library: what is left is the kernel's work (two
   ibv_modify_qp system calls per queue pair) and the wait for the slowest rank.

   ROUNDS times (default 1), the queue pairs destroyed and made anew each time; per round N
   prints result,scale,connect,raw-rN,RANKS,raw,rts_ms_rankR,MS (from the barrier after INIT to
   the barrier after RTS), ...,create_ms_rankR,MS (the CQs and queue pairs, and INIT, before it)
   and ...,cpu_ms_rankR,MS (the process's user + system CPU time inside the timed part: the
   modify_qp system calls run in the calling process; the kernel counts it in ticks). */
#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { MAX_RANKS = 64 };

static void die(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "raw_connect: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno));
    exit(1);
}
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
static double cpu_ms(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

/* A rank's published state: its GID and the number of its queue pair for every rank. */
typedef struct card {
    union ibv_gid gid;
    uint32_t qpn[MAX_RANKS];
} card;

/* What the ranks share: a file in DIR mapped by every rank, made whole by rank 0 (a
   process-shared barrier: the waiting ranks sleep in the kernel, none spins beside the work). */
typedef struct shared {
    pthread_barrier_t barrier;
    card cards[MAX_RANKS];
} shared;

static shared *map_shared(const char *dir, int w, int rank) {
    char tmp[512], path[512];
    int fd;
    shared *sh;
    snprintf(path, sizeof path, "%s/ranks", dir);
    if (rank == 0) {
        pthread_barrierattr_t ba;
        snprintf(tmp, sizeof tmp, "%s/.ranks", dir);
        if ((fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0600)) < 0 || ftruncate(fd, sizeof *sh)) die("create %s", tmp);
        if ((sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) die("mmap");
        pthread_barrierattr_init(&ba);
        pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
        if (pthread_barrier_init(&sh->barrier, &ba, (unsigned)w)) die("pthread_barrier_init");
        if (rename(tmp, path)) die("rename %s", tmp); /* whole before anyone maps it */
    } else {
        for (int tries = 0; (fd = open(path, O_RDWR)) < 0; tries++) { /* before the clock starts */
            if (tries > 120000) die("rank 0 never made %s", path);
            usleep(1000);
        }
        if ((sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) die("mmap");
    }
    close(fd);
    return sh;
}

int main(int argc, char **argv) {
    const char *dev = "rxe0", *dir = NULL;
    int w = 0, rank = -1, gid_index = 1, rounds = 1, c;
    struct ibv_device **list;
    struct ibv_context *ctx = NULL;
    struct ibv_pd *pd;
    struct ibv_port_attr port;
    struct ibv_cq *cq[MAX_RANKS];
    struct ibv_qp *qp[MAX_RANKS];
    static card mine;
    card *peer;
    shared *sh;
    double t0, t1, t2, c1, c2;
    while ((c = getopt(argc, argv, "w:r:s:d:x:n:")) != -1) {
        switch (c) {
        case 'w': w = atoi(optarg); break;
        case 'r': rank = atoi(optarg); break;
        case 's': dir = optarg; break;
        case 'd': dev = optarg; break;
        case 'x': gid_index = atoi(optarg); break;
        case 'n': rounds = atoi(optarg); break;
        default: return 2;
        }
    }
    if (w < 1 || w > MAX_RANKS || rank < 0 || rank >= w || !dir || rounds < 1) {
        fprintf(stderr, "usage: raw_connect -w RANKS(1..%d) -r RANK -s DIR [-d DEV] [-x GID] [-n ROUNDS]\n", MAX_RANKS);
        return 2;
    }
    if (!(list = ibv_get_device_list(NULL))) die("ibv_get_device_list");
    for (int i = 0; list[i] && !ctx; i++)
        if (!strcmp(ibv_get_device_name(list[i]), dev)) ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    if (!ctx) die("no device %s", dev);
    if (!(pd = ibv_alloc_pd(ctx))) die("ibv_alloc_pd");
    if (ibv_query_port(ctx, 1, &port)) die("ibv_query_port");
    if (ibv_query_gid(ctx, 1, gid_index, &mine.gid)) die("ibv_query_gid %d", gid_index);

    sh = map_shared(dir, w, rank);
    for (int round = 1; round <= rounds; round++) {
        t0 = now_ms();
        for (int d = 0; d < w; d++) {
            struct ibv_qp_init_attr qi;
            struct ibv_qp_attr a;
            if (!(cq[d] = ibv_create_cq(ctx, 32, NULL, NULL, 0))) die("ibv_create_cq");
            memset(&qi, 0, sizeof qi);
            qi.send_cq = qi.recv_cq = cq[d];
            qi.qp_type = IBV_QPT_RC;
            qi.cap.max_send_wr = qi.cap.max_recv_wr = 16;
            qi.cap.max_send_sge = qi.cap.max_recv_sge = 1;
            if (!(qp[d] = ibv_create_qp(pd, &qi))) die("ibv_create_qp");
            memset(&a, 0, sizeof a);
            a.qp_state = IBV_QPS_INIT;
            a.port_num = 1;
            a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
            if (ibv_modify_qp(qp[d], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) die("INIT");
            mine.qpn[d] = qp[d]->qp_num;
        }
        t1 = now_ms();
        /* (every rank read the last round's cards before that round's second barrier) */
        sh->cards[rank] = mine;
        pthread_barrier_wait(&sh->barrier); /* every rank's queue pairs exist: the clock starts */
        peer = sh->cards;
        {
            double start = now_ms();
            c1 = cpu_ms();
            for (int d = 0; d < w; d++) {
                struct ibv_qp_attr a;
                memset(&a, 0, sizeof a);
                a.qp_state = IBV_QPS_RTR;
                a.path_mtu = port.active_mtu;
                a.dest_qp_num = peer[d].qpn[rank]; /* rank d's queue pair that faces this rank */
                a.rq_psn = 0;
                a.max_dest_rd_atomic = 1;
                a.min_rnr_timer = 12;
                a.ah_attr.is_global = 1;
                a.ah_attr.grh.dgid = peer[d].gid;
                a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
                a.ah_attr.grh.hop_limit = 1;
                a.ah_attr.port_num = 1;
                if (ibv_modify_qp(qp[d], &a,
                                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
                    die("RTR (queue pair %d)", d);
                memset(&a, 0, sizeof a);
                a.qp_state = IBV_QPS_RTS;
                a.timeout = 14;
                a.retry_cnt = 7;
                a.rnr_retry = 7;
                a.sq_psn = 0;
                a.max_rd_atomic = 1;
                if (ibv_modify_qp(qp[d], &a,
                                  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                      IBV_QP_MAX_QP_RD_ATOMIC))
                    die("RTS (queue pair %d)", d);
            }
            c2 = cpu_ms();
            pthread_barrier_wait(&sh->barrier);
            t2 = now_ms() - start;
        }
        printf("result,scale,connect,raw-r%d,%d,raw,rts_ms_rank%d,%.3f\n", round, w, rank, t2);
        printf("result,scale,connect,raw-r%d,%d,raw,create_ms_rank%d,%.3f\n", round, w, rank, t1 - t0);
        printf("result,scale,connect,raw-r%d,%d,raw,cpu_ms_rank%d,%.3f\n", round, w, rank, c2 - c1);
        /* nobody destroys a queue pair before every rank is done with the wait above */
        for (int d = 0; d < w; d++) {
            ibv_destroy_qp(qp[d]);
            ibv_destroy_cq(cq[d]);
        }
    }
    fflush(stdout);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    return 0;
}
