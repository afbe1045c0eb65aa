/* pingpong.c - message latency over a safeverbs channel, with every payload checked.

   Two processes swap their endpoints (sfv_endpoint_encode: 32 bytes) over TCP, connect their
   channels, then ping-pong: the client sends a message, the server checks it and echoes it back,
   the client checks the echo. Each side posts its receive before the send it answers, so no
   message ever waits for a buffer. The client prints the round-trip latency.

       build/pingpong -d rxe0 [-p 18515]                       server
       build/pingpong -d rxe1 [-p 18515] 127.0.0.1             client
       build/pingpong -d rxe0 --loopback                       one channel connected to itself

   Options: -d device (default: the first), -p TCP port (18515), -s message size (64),
   -n round trips (1000), -e sleep on completion events instead of spinning (SFV_WAIT_EVENT).
   Exits 0 only if every message arrived intact. */
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
#include <time.h>
#include <unistd.h>

struct options {
    const char *device, *servername; /* servername: the host to connect to; NULL = be the server */
    int port, iters;
    size_t size;
    bool events, loopback;
};

/* Prints why a call failed: a failed completion's status, else the library's last error. */
static bool ok(sfv_result r, const char *what, const sfv_work_completion *wc) {
    if (r == SFV_OK) return true;
    if (r == SFV_ERR_WORK && wc)
        fprintf(stderr, "pingpong: %s: %s (%s)\n", what, sfv_wc_status_str(wc->status), sfv_wc_status_hint(wc->status));
    else
        fprintf(stderr, "pingpong: %s: %s\n", what, sfv_last_error()->message);
    return false;
}

/* Swaps endpoints and connects. The server connects its channel before it answers, so the
   client's first message cannot arrive at a queue pair that is not ready. */
static bool connect_to_peer(sfv_channel *ch, const struct options *o) {
    uint8_t mine[SFV_ENDPOINT_ENCODED_SIZE], theirs[SFV_ENDPOINT_ENCODED_SIZE];
    sfv_endpoint me, peer;
    bool done = false;
    int fd;
    if (!ok(sfv_channel_endpoint(ch, &me), "sfv_channel_endpoint", NULL)) return false;
    sfv_endpoint_encode(&me, mine);
    fd = o->servername ? tcp_connect(o->servername, o->port) : tcp_accept(o->port);
    if (fd < 0) {
        perror(o->servername ? "pingpong: connect" : "pingpong: accept");
        return false;
    }
    if (o->servername) {
        done = write_all(fd, mine, sizeof mine) && read_all(fd, theirs, sizeof theirs) &&
               ok(sfv_endpoint_decode(theirs, sizeof theirs, &peer), "sfv_endpoint_decode", NULL) &&
               ok(sfv_channel_handshake(ch, &peer), "sfv_channel_handshake", NULL);
    } else {
        done = read_all(fd, theirs, sizeof theirs) &&
               ok(sfv_endpoint_decode(theirs, sizeof theirs, &peer), "sfv_endpoint_decode", NULL) &&
               ok(sfv_channel_handshake(ch, &peer), "sfv_channel_handshake", NULL) &&
               write_all(fd, mine, sizeof mine);
    }
    if (!done) fprintf(stderr, "pingpong: endpoint exchange with the peer failed\n");
    close(fd);
    return done;
}

/* ---- the ping-pong -------------------------------------------------------------------------- */
/* Byte j of message i: every byte depends on i, so a stale or misplaced buffer shows. */
static uint8_t pattern(int i, size_t j) { return (uint8_t)(i * 31 + (int)j); }

static void fill(uint8_t *p, size_t n, int i) {
    for (size_t j = 0; j < n; j++) p[j] = pattern(i, j);
}

static bool intact(const uint8_t *p, size_t n, int i, const sfv_work_completion *wc) {
    if (wc->byte_len != n) {
        fprintf(stderr, "pingpong: message %d has %u bytes, not %zu\n", i, (unsigned)wc->byte_len, n);
        return false;
    }
    for (size_t j = 0; j < n; j++) {
        if (p[j] != pattern(i, j)) {
            fprintf(stderr, "pingpong: message %d is corrupt at byte %zu\n", i, j);
            return false;
        }
    }
    return true;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Client (and loopback): receive posted, send, wait for the echo, check it. */
static bool ping(sfv_channel *ch, sfv_mr *mr, uint8_t *tx, uint8_t *rx, const struct options *o) {
    double *lat = calloc((size_t)o->iters, sizeof *lat), sum = 0;
    bool good = lat != NULL;
    if (!lat) perror("pingpong: calloc");
    for (int i = 0; good && i < o->iters; i++) {
        sfv_scatter_element in = sfv_mr_scatter_element(mr, rx, o->size);
        sfv_gather_element out = sfv_mr_gather_element(mr, tx, o->size);
        sfv_work_completion wc;
        sfv_pending echo;
        double t0;
        fill(tx, o->size, i);
        memset(rx, 0, o->size);
        t0 = now_us();
        good = ok(sfv_channel_post_receive(ch, &in, 1, &echo), "post receive", NULL) &&
               ok(sfv_channel_send(ch, &out, 1, &wc), "send", &wc) &&
               ok(sfv_pending_wait(&echo, -1, &wc), "receive", &wc);
        lat[i] = now_us() - t0;
        good = good && intact(rx, o->size, i, &wc);
    }
    if (good) {
        for (int i = 0; i < o->iters; i++) sum += lat[i];
        qsort(lat, (size_t)o->iters, sizeof *lat, by_value);
        printf("%d round trips of %zu bytes, all intact: median %.1f us, p99 %.1f us, mean %.1f us\n", o->iters,
               o->size, lat[o->iters / 2], lat[(o->iters * 99) / 100], sum / o->iters);
    }
    free(lat);
    return good;
}

/* Server: check each message, post the next receive, then echo the message back. `next` is
   the first receive, posted before the endpoints were swapped; each round reuses it. */
static bool pong(sfv_channel *ch, sfv_mr *mr, uint8_t *rx[2], sfv_pending *next, const struct options *o) {
    bool good = true;
    for (int i = 0; good && i < o->iters; i++) {
        uint8_t *msg = rx[i % 2], *spare = rx[(i + 1) % 2];
        sfv_scatter_element in = sfv_mr_scatter_element(mr, spare, o->size);
        sfv_gather_element out = sfv_mr_gather_element(mr, msg, o->size);
        sfv_work_completion wc;
        good = ok(sfv_pending_wait(next, -1, &wc), "receive", &wc) && intact(msg, o->size, i, &wc) &&
               (i + 1 == o->iters || ok(sfv_channel_post_receive(ch, &in, 1, next), "post receive", NULL)) &&
               ok(sfv_channel_send(ch, &out, 1, &wc), "send", &wc);
    }
    if (good) printf("echoed %d messages of %zu bytes, all intact\n", o->iters, o->size);
    return good;
}

static void usage(void) {
    fprintf(stderr, "usage: pingpong [-d device] [-p port] [-s size] [-n iters] [-e] [--loopback | server-host]\n");
    exit(2);
}

int main(int argc, char **argv) {
    static const struct option longs[] = {{"loopback", no_argument, NULL, 'L'}, {NULL, 0, NULL, 0}};
    struct options o = {NULL, NULL, 18515, 1000, 64, false, false};
    sfv_context *ctx = NULL;
    sfv_pd *pd = NULL;
    sfv_mr *mr = NULL;
    sfv_channel *ch = NULL;
    sfv_channel_desc desc = {0};
    sfv_pending first;
    uint8_t *buf = NULL, *rx[2];
    bool good = false;
    int c;
    while ((c = getopt_long(argc, argv, "d:p:s:n:e", longs, NULL)) != -1) {
        switch (c) {
        case 'd': o.device = optarg; break;
        case 'p': o.port = atoi(optarg); break;
        case 's': o.size = strtoul(optarg, NULL, 0); break;
        case 'n': o.iters = atoi(optarg); break;
        case 'e': o.events = true; break;
        case 'L': o.loopback = true; break;
        default: usage();
        }
    }
    if (optind < argc) o.servername = argv[optind++];
    if (optind < argc || (o.loopback && o.servername) || o.size == 0 || o.size > (1u << 30) || o.iters < 1) usage();

    /* One buffer in three slots: the client's message, then two receive slots. */
    buf = calloc(3, o.size);
    if (!buf) {
        perror("pingpong: calloc");
        return 1;
    }
    rx[0] = buf + o.size;
    rx[1] = buf + 2 * o.size;
    desc.wait_mode = o.events ? SFV_WAIT_EVENT : SFV_WAIT_BUSY;
    if (!ok(sfv_open_device(o.device, &ctx), "sfv_open_device", NULL) || !ok(sfv_alloc_pd(ctx, &pd), "sfv_alloc_pd", NULL) ||
        !ok(sfv_reg_mr_local(pd, buf, 3 * o.size, &mr), "sfv_reg_mr_local", NULL) ||
        !ok(sfv_create_channel(pd, &desc, &ch), "sfv_create_channel", NULL))
        goto out;

    if (o.loopback) {
        sfv_endpoint me;
        good = ok(sfv_channel_endpoint(ch, &me), "sfv_channel_endpoint", NULL) &&
               ok(sfv_channel_handshake(ch, &me), "sfv_channel_handshake", NULL) && ping(ch, mr, buf, rx[0], &o);
    } else if (o.servername) {
        good = connect_to_peer(ch, &o) && ping(ch, mr, buf, rx[0], &o);
    } else {
        sfv_scatter_element in = sfv_mr_scatter_element(mr, rx[0], o.size);
        good = ok(sfv_channel_post_receive(ch, &in, 1, &first), "post receive", NULL) && connect_to_peer(ch, &o) &&
               pong(ch, mr, rx, &first, &o);
    }
out:
    /* Destroying the channel first flushes anything still posted, so the buffer is free after. */
    sfv_destroy_channel(ch);
    sfv_dereg_mr(mr);
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
    free(buf);
    return good ? 0 : 1;
}
