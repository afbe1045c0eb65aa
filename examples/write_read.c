/* write_read.c - one-sided RDMA: write into a peer's memory and read it back, within bounds.

   The server registers a 4096-byte region for remote access (sfv_reg_mr_shared), fills it with
   0xEE and sends its endpoint and the region's remote descriptor (sfv_remote_mr_encode, 24 bytes)
   over TCP. The client narrows the region to bytes [1000, 1512) (sfv_remote_mr_slice), writes a
   pattern there (sfv_channel_write), reads it back into another buffer (sfv_channel_read),
   compares, and tells the server it is done. The server then checks that the pattern landed at
   offset 1000 and that every byte outside the slice is still 0xEE. The server's CPU takes no
   part in the transfers.

       build/write_read -d rxe0 [-p 18516]                    server
       build/write_read -d rxe1 [-p 18516] 127.0.0.1          client
       build/write_read -d rxe0 --loopback                    both in one process

   Each side exits 0 only if everything it checked was right. */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "tcp.h"

#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { REGION_SIZE = 4096, SLICE_OFFSET = 1000, SLICE_LEN = 512, UNTOUCHED = 0xEE };

/* What the client writes: letters, never UNTOUCHED. */
static uint8_t pattern(size_t j) { return (uint8_t)('a' + j % 26); }

static bool ok(sfv_result r, const char *what, const sfv_work_completion *wc) {
    if (r == SFV_OK) return true;
    if (r == SFV_ERR_WORK && wc)
        fprintf(stderr, "write_read: %s: %s (%s)\n", what, sfv_wc_status_str(wc->status), sfv_wc_status_hint(wc->status));
    else
        fprintf(stderr, "write_read: %s: %s\n", what, sfv_last_error()->message);
    return false;
}

/* ---- the two halves ------------------------------------------------------------------------- */
/* Client: write the pattern into the slice of the peer's region, read it back into `back`. */
static bool write_then_read(sfv_channel *ch, sfv_mr *mr, uint8_t *out, uint8_t *back, sfv_remote_mr region) {
    sfv_remote_mr slice, past_end;
    sfv_work_completion wc;
    for (size_t j = 0; j < SLICE_LEN; j++) out[j] = pattern(j);
    memset(back, 0, SLICE_LEN);
    /* The bounds travel with the descriptor: a slice that runs past the end is refused here,
       before anything reaches the NIC. */
    if (sfv_remote_mr_slice(region, region.length - 8, SLICE_LEN, &past_end) != SFV_ERR_SLICE_NOT_WITHIN_BOUNDS) {
        fprintf(stderr, "write_read: a slice past the region's end was not refused\n");
        return false;
    }
    if (!ok(sfv_remote_mr_slice(region, SLICE_OFFSET, SLICE_LEN, &slice), "sfv_remote_mr_slice", NULL)) return false;
    {
        sfv_gather_element src = sfv_mr_gather_element(mr, out, SLICE_LEN);
        sfv_scatter_element dst = sfv_mr_scatter_element(mr, back, SLICE_LEN);
        if (!ok(sfv_channel_write(ch, &src, 1, slice, &wc), "sfv_channel_write", &wc) ||
            !ok(sfv_channel_read(ch, &dst, 1, slice, &wc), "sfv_channel_read", &wc))
            return false;
    }
    if (memcmp(out, back, SLICE_LEN) != 0) {
        fprintf(stderr, "write_read: the bytes read back differ from the bytes written\n");
        return false;
    }
    printf("wrote %d bytes at offset %d of the peer's %llu-byte region (rkey 0x%x), read them back intact\n", SLICE_LEN,
           SLICE_OFFSET, (unsigned long long)region.length, (unsigned)region.rkey);
    return true;
}

/* Server: the slice holds the pattern, everything around it is untouched. */
static bool region_as_expected(const uint8_t *region) {
    for (size_t j = 0; j < REGION_SIZE; j++) {
        bool inside = j >= SLICE_OFFSET && j < SLICE_OFFSET + SLICE_LEN;
        uint8_t want = inside ? pattern(j - SLICE_OFFSET) : UNTOUCHED;
        if (region[j] != want) {
            fprintf(stderr, "write_read: region byte %zu is 0x%02x, expected 0x%02x\n", j, region[j], want);
            return false;
        }
    }
    printf("region checked: bytes [%d, %d) hold the pattern, the other %d are untouched\n", SLICE_OFFSET,
           SLICE_OFFSET + SLICE_LEN, REGION_SIZE - SLICE_LEN);
    return true;
}

/* Server side of the TCP exchange: endpoint in; handshake; endpoint and region out; then wait
   for the client's verdict ('D' = done and verified). */
static bool serve(sfv_channel *ch, sfv_mr *region_mr, int port) {
    uint8_t in[SFV_ENDPOINT_ENCODED_SIZE], out[SFV_ENDPOINT_ENCODED_SIZE + SFV_REMOTE_MR_ENCODED_SIZE];
    sfv_endpoint me, peer;
    char verdict = 0;
    bool good;
    int fd = tcp_accept(port);
    if (fd < 0) {
        perror("write_read: accept");
        return false;
    }
    good = ok(sfv_channel_endpoint(ch, &me), "sfv_channel_endpoint", NULL) && read_all(fd, in, sizeof in) &&
           ok(sfv_endpoint_decode(in, sizeof in, &peer), "sfv_endpoint_decode", NULL) &&
           ok(sfv_channel_handshake(ch, &peer), "sfv_channel_handshake", NULL);
    if (good) {
        sfv_endpoint_encode(&me, out);
        sfv_remote_mr_encode(sfv_mr_remote(region_mr), out + SFV_ENDPOINT_ENCODED_SIZE);
        good = write_all(fd, out, sizeof out) && read_all(fd, &verdict, 1);
    }
    close(fd);
    if (good && verdict != 'D') fprintf(stderr, "write_read: the client reported a failure\n");
    return good && verdict == 'D';
}

/* Client side: endpoint out; endpoint and region in; handshake; work; verdict out. */
static bool visit(sfv_channel *ch, sfv_mr *mr, uint8_t *local, const char *host, int port) {
    uint8_t out[SFV_ENDPOINT_ENCODED_SIZE], in[SFV_ENDPOINT_ENCODED_SIZE + SFV_REMOTE_MR_ENCODED_SIZE];
    sfv_endpoint me, peer;
    sfv_remote_mr region;
    bool good;
    char verdict;
    int fd = tcp_connect(host, port);
    if (fd < 0) {
        fprintf(stderr, "write_read: could not connect to %s:%d\n", host, port);
        return false;
    }
    good = ok(sfv_channel_endpoint(ch, &me), "sfv_channel_endpoint", NULL);
    sfv_endpoint_encode(&me, out);
    good = good && write_all(fd, out, sizeof out) && read_all(fd, in, sizeof in) &&
           ok(sfv_endpoint_decode(in, SFV_ENDPOINT_ENCODED_SIZE, &peer), "sfv_endpoint_decode", NULL) &&
           ok(sfv_remote_mr_decode(in + SFV_ENDPOINT_ENCODED_SIZE, SFV_REMOTE_MR_ENCODED_SIZE, &region), "sfv_remote_mr_decode", NULL) &&
           ok(sfv_channel_handshake(ch, &peer), "sfv_channel_handshake", NULL) &&
           write_then_read(ch, mr, local, local + SLICE_LEN, region);
    verdict = good ? 'D' : 'F';
    good = write_all(fd, &verdict, 1) && good;
    close(fd);
    return good;
}

static void usage(void) {
    fprintf(stderr, "usage: write_read [-d device] [-p port] [--loopback | server-host]\n");
    exit(2);
}

int main(int argc, char **argv) {
    static const struct option longs[] = {{"loopback", no_argument, NULL, 'L'}, {NULL, 0, NULL, 0}};
    static uint8_t region[REGION_SIZE], local[2 * SLICE_LEN]; /* local: what is written, what is read back */
    const char *device = NULL, *servername = NULL;
    int port = 18516, c;
    bool loopback = false, good = false;
    sfv_context *ctx = NULL;
    sfv_pd *pd = NULL;
    sfv_mr *region_mr = NULL, *local_mr = NULL;
    sfv_channel *ch = NULL;
    while ((c = getopt_long(argc, argv, "d:p:", longs, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 'L': loopback = true; break;
        default: usage();
        }
    }
    if (optind < argc) servername = argv[optind++];
    if (optind < argc || (loopback && servername)) usage();

    memset(region, UNTOUCHED, sizeof region);
    if (!ok(sfv_open_device(device, &ctx), "sfv_open_device", NULL) || !ok(sfv_alloc_pd(ctx, &pd), "sfv_alloc_pd", NULL) ||
        !ok(sfv_create_channel(pd, NULL, &ch), "sfv_create_channel", NULL))
        goto out;
    /* Only the side whose memory is written registers it for remote access. */
    if (!servername && !ok(sfv_reg_mr_shared(pd, region, sizeof region, &region_mr), "sfv_reg_mr_shared", NULL)) goto out;
    if ((servername || loopback) && !ok(sfv_reg_mr_local(pd, local, sizeof local, &local_mr), "sfv_reg_mr_local", NULL)) goto out;

    if (loopback) {
        sfv_endpoint me;
        good = ok(sfv_channel_endpoint(ch, &me), "sfv_channel_endpoint", NULL) &&
               ok(sfv_channel_handshake(ch, &me), "sfv_channel_handshake", NULL) &&
               write_then_read(ch, local_mr, local, local + SLICE_LEN, sfv_mr_remote(region_mr)) && region_as_expected(region);
    } else if (servername) {
        good = visit(ch, local_mr, local, servername, port);
    } else {
        good = serve(ch, region_mr, port) && region_as_expected(region);
    }
out:
    sfv_destroy_channel(ch);
    sfv_dereg_mr(local_mr);
    sfv_dereg_mr(region_mr);
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
    return good ? 0 : 1;
}
