/* test_bootstrap.c - the pluggable node bootstrap: rank and world size from a launcher's
   environment (sfv_launcher_rank, sfv_node_desc.world_size 0), and sfv_node_connect_with over a
   caller's allgather (an in-memory one between threads, and the TCP exchange as one), on rxe0
   and rxe1. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "../safeverbs.h"
#include "harness.h"

#include <pthread.h>

static void clear_launchers(void) {
    static const char *const v[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                                    "SLURM_PROCID", "SLURM_NTASKS"};
    size_t i;
    for (i = 0; i < COUNT_OF(v); i++) unsetenv(v[i]);
}

static void t_launcher_rank_from_each_launcher(void) {
    size_t r = 9, n = 9;
    clear_launchers();
    CHECK_RESULT(sfv_launcher_rank(&r, &n), SFV_ERR_NOT_FOUND);
    CHECK(r == 0 && n == 0);
    CHECK(strstr(sfv_last_error()->message, "OMPI_COMM_WORLD_RANK"));
    setenv("SLURM_PROCID", "3", 1); setenv("SLURM_NTASKS", "8", 1);
    CHECK_OK(sfv_launcher_rank(&r, &n));
    CHECK(r == 3 && n == 8);
    setenv("PMI_RANK", "1", 1); setenv("PMI_SIZE", "4", 1);         /* PMI before Slurm */
    CHECK_OK(sfv_launcher_rank(&r, &n));
    CHECK(r == 1 && n == 4);
    setenv("OMPI_COMM_WORLD_RANK", "0", 1); setenv("OMPI_COMM_WORLD_SIZE", "2", 1); /* Open MPI first */
    CHECK_OK(sfv_launcher_rank(&r, &n));
    CHECK(r == 0 && n == 2);
    CHECK_RESULT(sfv_launcher_rank(NULL, &n), SFV_ERR_INVALID);
}

static void t_launcher_rank_refuses_nonsense(void) {
    size_t r = 9, n = 9;
    static const char *const bad[][2] = {{"2", "2"}, {"x", "2"}, {"1", ""}, {"-1", "4"}, {"0", "0"}, {"1", NULL}};
    size_t i;
    for (i = 0; i < COUNT_OF(bad); i++) {
        clear_launchers();
        setenv("OMPI_COMM_WORLD_RANK", bad[i][0], 1);
        if (bad[i][1]) setenv("OMPI_COMM_WORLD_SIZE", bad[i][1], 1);
        CHECK_RESULT(sfv_launcher_rank(&r, &n), SFV_ERR_INVALID);
        CHECK(r == 0 && n == 0);
        CHECK(strstr(sfv_last_error()->message, "OMPI_COMM_WORLD_SIZE="));
    }
}

/* world_size 0: the node takes its place from the launcher; none: SFV_ERR_INVALID (a world of 0). */
static void t_node_from_launcher(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_node *node;
    sfv_node_desc nd;
    memset(&nd, 0, sizeof nd);
    CHECK_OK(sfv_open_device(test_device(0), &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    clear_launchers();
    CHECK_RESULT(sfv_create_node(pd, &nd, &node), SFV_ERR_INVALID);
    CHECK(node == NULL);
    CHECK(strstr(sfv_last_error()->message, "world_size = 0 and no launcher"));
    setenv("SLURM_PROCID", "5", 1); setenv("SLURM_NTASKS", "5", 1);    /* nonsense: said as such */
    CHECK_RESULT(sfv_create_node(pd, &nd, &node), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "SLURM_PROCID=5"));
    clear_launchers();
    setenv("PMI_RANK", "2", 1); setenv("PMI_SIZE", "3", 1);
    CHECK_OK(sfv_create_node(pd, &nd, &node));
    CHECK_EQ(sfv_node_rank(node), 2);
    CHECK_EQ(sfv_node_world_size(node), 3);
    CHECK_OK(sfv_destroy_node(node));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
}

/* An allgather between threads of one process: each rank's bytes into a shared table. */
#define RANKS 3
typedef struct shared_ag {
    pthread_barrier_t bar;
    unsigned char table[RANKS][4096];
    int calls[RANKS];
} shared_ag;
typedef struct rank_arg { shared_ag *ag; size_t rank; sfv_result result; } rank_arg;
static sfv_result mem_allgather(void *user, const void *mine, void *all, size_t size) {
    rank_arg *a = (rank_arg *)user;
    size_t r;
    if (size > sizeof a->ag->table[0]) return SFV_ERR_INVALID;
    a->ag->calls[a->rank]++;
    if (size) memcpy(a->ag->table[a->rank], mine, size);
    pthread_barrier_wait(&a->ag->bar);
    for (r = 0; r < RANKS && size; r++) memcpy((unsigned char *)all + r * size, a->ag->table[r], size);
    pthread_barrier_wait(&a->ag->bar);
    return SFV_OK;
}
static void *rank_main(void *p) {
    rank_arg *a = (rank_arg *)p;
    sfv_context *ctx = NULL;
    sfv_pd *pd = NULL;
    sfv_node *node = NULL;
    sfv_node_desc nd;
    memset(&nd, 0, sizeof nd);
    nd.rank = a->rank;
    nd.world_size = RANKS;
    a->result = sfv_open_device(test_device((int)(a->rank % 2)), &ctx);
    if (!a->result) a->result = sfv_alloc_pd(ctx, &pd);
    if (!a->result) a->result = sfv_create_node(pd, &nd, &node);
    if (!a->result) a->result = sfv_node_connect_with(node, mem_allgather, a);
    if (!a->result) a->result = sfv_node_barrier(node, NULL, 0, 20000);
    if (a->result) fprintf(stderr, "    rank %zu: %s\n", a->rank, sfv_last_error()->message);
    sfv_destroy_node(node);
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
    return NULL;
}
static void t_connect_with_an_allgather_of_threads(void) {
    shared_ag ag;
    rank_arg args[RANKS];
    pthread_t th[RANKS];
    size_t r;
    memset(&ag, 0, sizeof ag);
    CHECK(pthread_barrier_init(&ag.bar, NULL, RANKS) == 0);
    for (r = 0; r < RANKS; r++) {
        args[r].ag = &ag; args[r].rank = r; args[r].result = SFV_ERR_DRIVER;
        CHECK(pthread_create(&th[r], NULL, rank_main, &args[r]) == 0);
    }
    for (r = 0; r < RANKS; r++) CHECK(pthread_join(th[r], NULL) == 0);
    for (r = 0; r < RANKS; r++) {
        CHECK_OK(args[r].result);
        CHECK_EQ(ag.calls[r], 2); /* the endpoints, then the sync */
    }
}

/* The TCP exchange through the same door (sfv_exchange_allgather), two ranks on loopback. */
typedef struct tcp_arg { sfv_exchange_allgather_ctx x; sfv_result result; } tcp_arg;
static void *tcp_rank(void *p) {
    tcp_arg *a = (tcp_arg *)p;
    sfv_context *ctx = NULL;
    sfv_pd *pd = NULL;
    sfv_node *node = NULL;
    sfv_node_desc nd;
    memset(&nd, 0, sizeof nd);
    nd.rank = a->x.rank;
    nd.world_size = a->x.n;
    a->result = sfv_open_device(test_device((int)a->x.rank), &ctx);
    if (!a->result) a->result = sfv_alloc_pd(ctx, &pd);
    if (!a->result) a->result = sfv_create_node(pd, &nd, &node);
    if (!a->result) a->result = sfv_node_connect_with(node, sfv_exchange_allgather, &a->x);
    if (!a->result) a->result = sfv_node_barrier(node, NULL, 0, 20000);
    if (a->result) fprintf(stderr, "    rank %zu: %s\n", a->x.rank, sfv_last_error()->message);
    sfv_destroy_node(node);
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
    return NULL;
}
static void t_connect_with_the_tcp_exchange(void) {
    sfv_net_node nodes[2] = {{"127.0.0.1", 18931, 0, NULL}, {"127.0.0.1", 18932, 1, NULL}};
    tcp_arg a[2];
    pthread_t th[2];
    int r;
    unsetenv("SAFEVERBS_JOB_KEY");
    for (r = 0; r < 2; r++) {
        memset(&a[r], 0, sizeof a[r]);
        a[r].x.nodes = nodes; a[r].x.n = 2; a[r].x.rank = (size_t)r; a[r].x.timeout_ms = 20000;
        CHECK(pthread_create(&th[r], NULL, tcp_rank, &a[r]) == 0);
    }
    for (r = 0; r < 2; r++) CHECK(pthread_join(th[r], NULL) == 0);
    CHECK_OK(a[0].result);
    CHECK_OK(a[1].result);
    CHECK_RESULT(sfv_exchange_allgather(NULL, NULL, NULL, 0), SFV_ERR_INVALID);
}

/* A failing allgather: its result comes back, with an error recorded when it set none. */
static sfv_result failing(void *user, const void *mine, void *all, size_t size) {
    (void)mine; (void)all; (void)size;
    return (sfv_result)(intptr_t)user;
}
static void t_connect_with_a_failing_allgather(void) {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_node *node;
    sfv_node_desc nd;
    memset(&nd, 0, sizeof nd);
    nd.world_size = 1;
    CHECK_OK(sfv_open_device(test_device(0), &ctx));
    CHECK_OK(sfv_alloc_pd(ctx, &pd));
    CHECK_OK(sfv_create_node(pd, &nd, &node));
    CHECK_RESULT(sfv_node_connect_with(node, NULL, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_connect_with(node, failing, (void *)(intptr_t)SFV_ERR_TIMEOUT), SFV_ERR_TIMEOUT);
    CHECK(strstr(sfv_last_error()->message, "the allgather of the endpoints failed"));
    CHECK_RESULT(sfv_node_connect_with(node, failing, (void *)(intptr_t)7), SFV_ERR_DRIVER);
    CHECK_OK(sfv_destroy_node(node));
    CHECK_OK(sfv_dealloc_pd(pd));
    CHECK_OK(sfv_close_device(ctx));
}

static const harness_test TESTS[] = {
    TEST(t_launcher_rank_from_each_launcher, 10),
    TEST(t_launcher_rank_refuses_nonsense, 10),
    TEST(t_node_from_launcher, 30),
    TEST(t_connect_with_an_allgather_of_threads, 60),
    TEST(t_connect_with_the_tcp_exchange, 60),
    TEST(t_connect_with_a_failing_allgather, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
