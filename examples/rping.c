/* rping.c - a safeverbs channel connected through RDMA-CM (>>rdmacm), talking to rdma-core's
   own rping (rdmacm-utils) in either role.

   It speaks rping's protocol. Each side's control message is 16 bytes: a buffer's address
   (big-endian 64 bits), its rkey and its size (big-endian 32 bits each). For each ping:
   - the client fills its start buffer with "rdma-ping-N: " and then letters (A..z, starting one
     later each ping; the last byte 0) and sends the start buffer's address;
   - the server RDMA-reads it into its own buffer and sends a go-ahead (16 bytes);
   - the client sends the address of its second buffer; the server RDMA-writes what it read
     there (strlen + 1 bytes) and sends another 16 bytes: done;
   - the client, with -V, checks that the second buffer now equals the start buffer.
   After -C pings the client disconnects; the server serves one client and exits (-P: one client
   after another, until it is killed).

       build/rping -s -a 192.0.2.1 -C 10 -V &      rping -c -a 192.0.2.1 -I 192.0.2.2 -C 10 -V
       rping -s -a 192.0.2.1 -C 10 -V &            build/rping -c -a 192.0.2.1 -I 192.0.2.2 -C 10 -V

   Options (rping's): -s server, -c client, -a address (server: to listen on, 0.0.0.0 or :: for
   every address, 0.0.0.0 without -a as rping; client: to connect to), -I source address
   (client; without it, the address routing picks for -a, as rping), -p port (7174), -S size (64; 23 .. 65535), -C count (0: for ever), -v print each
   ping's data, -V validate, -P persistent server, -d and -q (accepted, ignored). The server opens the device each request
   came to (sfv_cm_request_open_device), so a listener on every address serves any device. Exits
   0 when every ping went through (and validated). Build: needs -lrdmacm (make build/rping). */
#define _GNU_SOURCE
#define SAFEVERBS_RDMACM
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"

#include <arpa/inet.h>
#include <endian.h>
#include <netdb.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TRY(call)                                                                      \
    do {                                                                               \
        sfv_result r_ = (call);                                                        \
        if (r_ != SFV_OK) {                                                            \
            fprintf(stderr, "rping: %s: %s\n", #call, sfv_last_error()->message);       \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

enum { INFO = 16, MIN_SIZE = 23, MAX_SIZE = 65535 }; /* rping's own bounds */

typedef struct state {
    sfv_pd *pd;
    sfv_cm_conn *conn;
    sfv_channel *ch;
    sfv_mr *ctl;                   /* recv (0..15) and send (16..31) control buffers */
    uint8_t ctlbuf[2 * INFO];
    int verbose;
} state;

static void put_info(uint8_t *out, const void *addr, uint32_t rkey, uint32_t size) {
    uint64_t a = htobe64((uint64_t)(uintptr_t)addr);
    uint32_t k = htobe32(rkey), s = htobe32(size);
    memcpy(out, &a, 8); memcpy(out + 8, &k, 4); memcpy(out + 12, &s, 4);
}
static sfv_remote_mr get_info(const uint8_t *in) {
    uint64_t a; uint32_t k, s;
    memcpy(&a, in, 8); memcpy(&k, in + 8, 4); memcpy(&s, in + 12, 4);
    return sfv_remote_mr_make(be64toh(a), be32toh(s), be32toh(k));
}

/* Waits for a posted receive, up to the channel's deadline (desc.timeout_ms): a peer that
   stays connected and silent is an error, not a wait for ever. A disconnect ends it at once
   (the wait watches the CM fd): its work is flushed, SFV_ERR_WORK. */
static sfv_result wait_recv(sfv_pending *rx) {
    return sfv_pending_wait(rx, -1, NULL);
}

/* Whether the client disconnected (its CM said so: read now, if not yet). */
static bool client_gone(state *st) { return sfv_cm_events(st->conn) == SFV_ERR_BROKEN; }

/* A step of the server's pings. A failure once the client disconnected ends the pings, not an
   error, wherever it came (as rping's server: state DISCONNECTED is 0): the client leaves once it
   has the last go-ahead, and that may be before the server's send of it completed (the client's
   QP, in error, drops the ACK: the send is flushed) or before the server's next post (refused,
   SFV_ERR_BROKEN), not only while it waits for the next ping. */
#define STEP(call)                                                                          \
    do {                                                                                    \
        sfv_result r_ = (call);                                                             \
        if (r_ != SFV_OK) {                                                                 \
            char why_[512];                                                                 \
            snprintf(why_, sizeof why_, "%s", sfv_last_error()->message); /* (kept over client_gone) */ \
            if (client_gone(st)) return 0;                                                  \
            fprintf(stderr, "rping: %s: %s\n", #call, why_);                                \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)

/* The server's pings, into buf (its MR mr), until the client leaves: 0, else 1. */
static int serve_pings(state *st, sfv_mr *mr, uint8_t *buf, uint32_t size) {
    sfv_scatter_element in = sfv_mr_scatter_element(st->ctl, st->ctlbuf, INFO);
    sfv_gather_element go = sfv_mr_gather_element(st->ctl, st->ctlbuf + INFO, INFO);
    for (;;) {
        sfv_pending rx;
        sfv_remote_mr remote;
        sfv_scatter_element into;
        sfv_gather_element from;
        STEP(sfv_channel_post_receive(st->ch, &in, 1, &rx));
        STEP(wait_recv(&rx)); /* (flushed: the client is gone, done) */
        remote = get_info(st->ctlbuf);
        if (sfv_remote_mr_length(remote) > size) {
            fprintf(stderr, "rping: the client's buffer (%llu bytes) is larger than -S %u\n",
                    (unsigned long long)sfv_remote_mr_length(remote), size);
            return 1;
        }
        into = sfv_mr_scatter_element(mr, buf, (size_t)sfv_remote_mr_length(remote));
        STEP(sfv_channel_read(st->ch, &into, 1, remote, NULL));
        buf[size - 1] = 0;
        if (st->verbose) printf("server ping data: %s\n", (char *)buf);
        STEP(sfv_channel_post_receive(st->ch, &in, 1, &rx));
        STEP(sfv_channel_send(st->ch, &go, 1, NULL));
        STEP(wait_recv(&rx));
        remote = get_info(st->ctlbuf);
        from = sfv_mr_gather_element(mr, buf, strlen((char *)buf) + 1);
        STEP(sfv_channel_write(st->ch, &from, 1, remote, NULL));
        STEP(sfv_channel_send(st->ch, &go, 1, NULL));
    }
}

/* The buffer and its MR around serve_pings, freed however it ends (a -P server goes on). */
static int serve(state *st, uint32_t size) {
    uint8_t *buf = (uint8_t *)calloc(1, size);
    sfv_mr *mr;
    int rc;
    if (!buf) return 1;
    if (sfv_reg_mr_local(st->pd, buf, size, &mr) != SFV_OK) {
        fprintf(stderr, "rping: %s\n", sfv_last_error()->message);
        free(buf);
        return 1;
    }
    rc = serve_pings(st, mr, buf, size);
    /* (every work request on buf is over: each call above consumed its own, and a failed one
       flushed the channel's) */
    if (sfv_dereg_mr(mr) != SFV_OK) {
        fprintf(stderr, "rping: %s\n", sfv_last_error()->message);
        return 1; /* (buf stays: the NIC may still own it) */
    }
    free(buf);
    return rc;
}

/* One client: a PD on the device its request came to, the connection, the pings, all freed. A
   step that fails before the answer rejects the request. */
static int serve_request(sfv_cm_request *req, const sfv_channel_desc *desc, uint32_t size, int verbose) {
    sfv_context *ctx = NULL;
    state st;
    int rc;
    memset(&st, 0, sizeof st);
    st.verbose = verbose;
    if (sfv_cm_request_open_device(req, &ctx) != SFV_OK || sfv_alloc_pd(ctx, &st.pd) != SFV_OK ||
        sfv_reg_mr_local(st.pd, st.ctlbuf, sizeof st.ctlbuf, &st.ctl) != SFV_OK) {
        fprintf(stderr, "rping: %s\n", sfv_last_error()->message);
        (void)!sfv_cm_reject(req, NULL, 0);
        (void)!sfv_dealloc_pd(st.pd);
        (void)!sfv_close_device(ctx);
        return 1;
    }
    rc = 1; /* (every step below runs however the one before ended: a -P server goes on) */
    if (sfv_cm_accept(req, st.pd, desc, NULL, 0, 30000, &st.conn) != SFV_OK) {
        fprintf(stderr, "rping: sfv_cm_accept: %s\n", sfv_last_error()->message);
    } else {
        st.ch = sfv_cm_channel(st.conn);
        rc = serve(&st, size);
        if (sfv_cm_close(st.conn, 2000) != SFV_OK) {
            fprintf(stderr, "rping: sfv_cm_close: %s\n", sfv_last_error()->message);
            rc = 1;
        }
    }
    if (sfv_dereg_mr(st.ctl) != SFV_OK || sfv_dealloc_pd(st.pd) != SFV_OK || sfv_close_device(ctx) != SFV_OK) {
        fprintf(stderr, "rping: %s\n", sfv_last_error()->message);
        rc = 1;
    }
    return rc;
}

/* The local address routing picks for addr (numeric), as rping's client lets it pick (no -I):
   the device that owns it is the one the connection leaves from. NULL: no route. */
static const char *route_source(const char *addr, uint16_t port, char *out, size_t len) {
    struct addrinfo hints, *ai = NULL;
    struct sockaddr_storage me;
    socklen_t n = sizeof me;
    char service[8];
    const char *found = NULL;
    int fd;
    memset(&hints, 0, sizeof hints);
    hints.ai_flags = AI_NUMERICHOST;
    hints.ai_socktype = SOCK_DGRAM;
    snprintf(service, sizeof service, "%u", (unsigned)port);
    if (getaddrinfo(addr, service, &hints, &ai) != 0) return NULL;
    fd = socket(ai->ai_family, SOCK_DGRAM, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 && getsockname(fd, (struct sockaddr *)&me, &n) == 0)
        found = inet_ntop(me.ss_family, me.ss_family == AF_INET ? (void *)&((struct sockaddr_in *)&me)->sin_addr
                                                                : (void *)&((struct sockaddr_in6 *)&me)->sin6_addr, out, (socklen_t)len);
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
    return found;
}

static int ping(state *st, uint32_t size, long count, int validate) {
    char *start = (char *)calloc(1, size), *got = (char *)calloc(1, size);
    sfv_mr *smr, *gmr;
    sfv_scatter_element in = sfv_mr_scatter_element(st->ctl, st->ctlbuf, INFO);
    sfv_gather_element info = sfv_mr_gather_element(st->ctl, st->ctlbuf + INFO, INFO);
    int letter = 'A';
    long n;
    if (!start || !got) return 1;
    TRY(sfv_reg_mr_access(st->pd, start, size, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ, &smr));
    TRY(sfv_reg_mr_access(st->pd, got, size, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE, &gmr));
    for (n = 0; count == 0 || n < count; n++) {
        sfv_pending rx;
        int i = snprintf(start, size, "rdma-ping-%ld: ", n), c = letter;
        for (; i < (int)size; i++) {
            start[i] = (char)c;
            if (++c > 'z') c = 'A';
        }
        if (++letter > 'z') letter = 'A';
        start[size - 1] = 0;
        memset(got, 0, size);
        put_info(st->ctlbuf + INFO, start, sfv_mr_rkey(smr), size);
        TRY(sfv_channel_post_receive(st->ch, &in, 1, &rx));
        TRY(sfv_channel_send(st->ch, &info, 1, NULL));
        TRY(wait_recv(&rx));               /* the server read it */
        put_info(st->ctlbuf + INFO, got, sfv_mr_rkey(gmr), size);
        TRY(sfv_channel_post_receive(st->ch, &in, 1, &rx));
        TRY(sfv_channel_send(st->ch, &info, 1, NULL));
        TRY(wait_recv(&rx));               /* the server wrote it back */
        if (validate && memcmp(start, got, size) != 0) {
            fprintf(stderr, "rping: data mismatch at ping %ld\n", n);
            return 1;
        }
        if (st->verbose) printf("ping data: %s\n", got);
    }
    TRY(sfv_dereg_mr(smr));
    TRY(sfv_dereg_mr(gmr));
    free(start);
    free(got);
    return 0;
}

int main(int argc, char **argv) {
    const char *addr = NULL, *src = NULL;
    int server = -1, validate = 0, persistent = 0, opt, rc = 0;
    char srcbuf[INET6_ADDRSTRLEN];
    long port = 7174, size = 64, count = 0;
    sfv_context *ctx;
    sfv_channel_desc desc;
    state st;
    memset(&st, 0, sizeof st);
    setvbuf(stdout, NULL, _IOLBF, 0); /* (a persistent server ends killed: what it printed is out by then) */
    while ((opt = getopt(argc, argv, "scdvVPqa:I:p:S:C:")) != -1) {
        switch (opt) {
        case 's': server = 1; break;
        case 'c': server = 0; break;
        case 'a': addr = optarg; break;
        case 'I': src = optarg; break;
        case 'p': port = strtol(optarg, NULL, 0); break;
        case 'S': size = strtol(optarg, NULL, 0); break;
        case 'C': count = strtol(optarg, NULL, 0); break;
        case 'v': st.verbose = 1; break;
        case 'V': validate = 1; break;
        case 'P': persistent = 1; break;
        case 'd': case 'q': break;
        default: goto usage;
        }
    }
    if (server < 0 || (!server && !addr) || port <= 0 || port > 65535 || size < MIN_SIZE || size > MAX_SIZE || count < 0) goto usage;
    memset(&desc, 0, sizeof desc);
    desc.timeout_ms = 30000;
    if (server) {
        sfv_cm_listener *l;
        if (!addr) addr = "0.0.0.0"; /* rping's server: every IPv4 address (a client needs -a) */
        TRY(sfv_cm_listen(addr, (uint16_t)port, persistent ? 16 : 1, &l));
        do {
            sfv_cm_request *req;
            sfv_result r = sfv_cm_get_request(l, persistent ? INT_MAX : 60000, &req);
            if (r == SFV_ERR_TIMEOUT && persistent) continue;
            TRY(r);
            rc |= serve_request(req, &desc, (uint32_t)size, st.verbose);
        } while (persistent);
        TRY(sfv_cm_destroy_listener(l));
        return rc;
    }
    if (!src && !(src = route_source(addr, (uint16_t)port, srcbuf, sizeof srcbuf))) {
        fprintf(stderr, "rping: no route to %s\n", addr);
        return 1;
    }
    TRY(sfv_cm_open_device(src, &ctx));
    TRY(sfv_alloc_pd(ctx, &st.pd));
    TRY(sfv_reg_mr_local(st.pd, st.ctlbuf, sizeof st.ctlbuf, &st.ctl));
    TRY(sfv_cm_connect(st.pd, src, addr, (uint16_t)port, &desc, NULL, 0, 30000, &st.conn));
    st.ch = sfv_cm_channel(st.conn);
    rc = ping(&st, (uint32_t)size, count, validate);
    TRY(sfv_cm_close(st.conn, 2000));
    TRY(sfv_dereg_mr(st.ctl));
    TRY(sfv_dealloc_pd(st.pd));
    TRY(sfv_close_device(ctx));
    return rc;
usage:
    fprintf(stderr, "usage: rping -s [-a address] | -c -a address [-I source] [-p port] [-S size %d..%d] [-C count] [-v] [-V] [-P]\n", MIN_SIZE, MAX_SIZE);
    return 2;
}
