/* mpi_allgather.c - a job launched by mpirun: the node takes its rank and world size from the
   launcher's environment (sfv_node_desc.world_size 0) and connects through MPI_Allgather (an
   sfv_allgather_fn); then every rank sends its rank to the next one around a ring over RDMA and
   they meet at an RDMA barrier. No host list, no TCP exchange of safeverbs' own.

       mpirun -np 4 build/mpi_allgather [-d DEVICE]    (default: rxe0 for even ranks, rxe1 for odd)

   Prints "rank R of N: got R-1 from rank R-1, all right" on every rank. Built only where Open
   MPI's headers are (make: with mpicc when it exists; Debian: libopenmpi-dev openmpi-bin). */
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"

#if defined(__has_include)
#if __has_include(<mpi.h>)
#define HAVE_MPI 1
#endif
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HAVE_MPI
int main(void) {
    fprintf(stderr, "mpi_allgather: built without <mpi.h> (install libopenmpi-dev and build with mpicc)\n");
    return 77;
}
#else
#include <mpi.h>

/* MPI_Allgather as an sfv_allgather_fn: size 0 is a barrier. */
static sfv_result mpi_allgather(void *user, const void *mine, void *all, size_t size) {
    MPI_Comm comm = *(MPI_Comm *)user;
    int rc;
    if (size > (size_t)0x7fffffff) return SFV_ERR_INVALID;
    rc = size ? MPI_Allgather(mine, (int)size, MPI_BYTE, all, (int)size, MPI_BYTE, comm) : MPI_Barrier(comm);
    return rc == MPI_SUCCESS ? SFV_OK : SFV_ERR_DRIVER;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((call) != SFV_OK) {                                                                    \
            fprintf(stderr, "rank %d: %s: %s\n", mpi_rank, #call, sfv_last_error()->message);      \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    int mpi_rank = 0, mpi_size = 0, i;
    const char *dev = NULL;
    char devname[32];
    size_t rank, world, next, prev;
    MPI_Comm comm = MPI_COMM_WORLD;
    static uint64_t box[2]; /* [0]: what we send, [1]: what arrives */
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_node *node;
    sfv_node_desc nd;
    sfv_pending rx;
    sfv_work_completion wc;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(comm, &mpi_rank);
    MPI_Comm_size(comm, &mpi_size);
    for (i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-d") && i + 1 < argc) dev = argv[++i];
    if (!dev) {
        snprintf(devname, sizeof devname, "rxe%d", mpi_rank % 2);
        dev = devname;
    }

    memset(&nd, 0, sizeof nd); /* world_size 0: rank and size from the launcher's environment */
    TRY(sfv_open_device(dev, &ctx));
    TRY(sfv_alloc_pd(ctx, &pd));
    TRY(sfv_reg_mr_local(pd, box, sizeof box, &mr));
    TRY(sfv_create_node(pd, &nd, &node));
    rank = sfv_node_rank(node);
    world = sfv_node_world_size(node);
    if (rank != (size_t)mpi_rank || world != (size_t)mpi_size) {
        fprintf(stderr, "rank %d: the environment says rank %zu of %zu, MPI says %d of %d\n", mpi_rank, rank, world,
                mpi_rank, mpi_size);
        MPI_Abort(comm, 1);
    }
    TRY(sfv_node_connect_with(node, mpi_allgather, &comm));

    /* A ring: receive from the previous rank, send our rank to the next one. */
    next = (rank + 1) % world;
    prev = (rank + world - 1) % world;
    box[0] = rank;
    box[1] = UINT64_MAX;
    {
        sfv_multi_channel *mc = sfv_node_multi_channel(node);
        sfv_scatter_element in = sfv_mr_scatter_element(mr, &box[1], sizeof box[1]);
        sfv_gather_element out = sfv_mr_gather_element(mr, &box[0], sizeof box[0]);
        TRY(sfv_channel_post_receive(sfv_multi_channel_peer(mc, prev), &in, 1, &rx));
        TRY(sfv_node_barrier(node, NULL, 0, 30000)); /* every receive is posted */
        TRY(sfv_channel_send(sfv_multi_channel_peer(mc, next), &out, 1, NULL));
        TRY(sfv_pending_wait(&rx, 30000, &wc));
    }
    TRY(sfv_node_barrier(node, NULL, 0, 30000));
    if (box[1] != prev) {
        fprintf(stderr, "rank %zu: got %llu, not %zu\n", rank, (unsigned long long)box[1], prev);
        MPI_Abort(comm, 1);
    }
    printf("rank %zu of %zu on %s: got %llu from rank %zu, all right\n", rank, world, dev,
           (unsigned long long)box[1], prev);
    TRY(sfv_destroy_node(node));
    TRY(sfv_dereg_mr(mr));
    TRY(sfv_dealloc_pd(pd));
    TRY(sfv_close_device(ctx));
    MPI_Finalize();
    return 0;
}
#endif
