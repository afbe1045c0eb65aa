/* rc_pingpong.c - a safeverbs channel talking to rdma-core's own ibv_rc_pingpong.

   It speaks ibv_rc_pingpong's protocol, so either side can be the real tool (ibverbs-utils):
   - TCP (default port 18515): the client sends its address as the text
     "LLLL:QQQQQQ:PPPPPP:GGGG...G" (LID, QP number, PSN in hex, then the GID as 32 hex digits,
     NUL-terminated: 52 bytes), the server connects its queue pair and answers with its own, and
     the client closes with "done" (5 bytes, NUL included).
   - Both sides post -r receives of -s bytes before that. The client sends first; each side sends
     again only once its last send completed and the peer's next message arrived, so the server
     echoes. Each side sends and receives -n messages.
   The channel gets what ibv_rc_pingpong uses: port -i, GID index -g, path MTU -m (1024), and a
   random 24-bit first PSN, which it advertises; the peer makes it its receive PSN.

       ibv_rc_pingpong -d rxe0 -g 1 &       build/rc_pingpong -d rxe1 -g 1 127.0.0.1
       build/rc_pingpong -d rxe0 -g 1 &     ibv_rc_pingpong -d rxe1 -g 1 127.0.0.1

   Options, short and long as ibv_rc_pingpong's, numbers read as its strtol(..., 0) reads them
   (decimal, hex with 0x, octal with a leading 0: -s 010 is 8), checked whole (a number with
   anything after it, or out of range, is a usage error, exit 2):
   -d/--ib-dev device (first), -i/--ib-port port (1), -g/--gid-idx GID index (-1, the default:
   the channel's choice; ibv_rc_pingpong takes -1 too, its own default), -s/--size size (4096),
   -m/--mtu MTU (1024), -r/--rx-depth receives posted (500), -n/--iters iterations (1000),
   -p/--port TCP port (18515), -l/--sl service level (0), -e/--events sleep on completion
   events, -c/--chk check each message received: the first byte
   of each page is 0, as ibv_rc_pingpong -c checks (its sender writes those bytes so, and so does
   this one, whose buffer starts zeroed), -o/--odp the buffer registered for on-demand paging
   (SFV_ACCESS_ON_DEMAND: a device without it refuses the registration, exit 1), -N/--new_send
   taken and changes nothing (the work requests on the wire are the same). ibv_rc_pingpong's
   -O/--iodp (an implicit ODP region of the whole address space), -P/--prefetch (ibv_advise_mr),
   -t/--ts (completion timestamps) and -j/--dm (device memory) are verbs safeverbs does not offer:
   each is refused with the reason, exit 1, before anything is opened. Exits 0 only if all -n
   messages went both ways (and, with -c, every page checked). */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WIRE_SIZE 52 /* sizeof "LLLL:QQQQQQ:PPPPPP:" + 32 GID digits, NUL included */

static bool ok(sfv_result r, const char *what, const sfv_work_completion *wc) {
    if (r == SFV_OK) return true;
    if (r == SFV_ERR_WORK && wc)
        fprintf(stderr, "rc_pingpong: %s: %s (%s)\n", what, sfv_wc_status_str(wc->status), sfv_wc_status_hint(wc->status));
    else
        fprintf(stderr, "rc_pingpong: %s: %s\n", what, sfv_last_error()->message);
    return false;
}

/* ---- the address text ----------------------------------------------------------------------- */
/* ibv_rc_pingpong prints the GID as four 32-bit words, each converted to big-endian before
   "%08x" (and back after sscanf): on any host, the 32 digits are the GID's 16 bytes in order. */
static void endpoint_to_wire(const sfv_endpoint *ep, char wire[WIRE_SIZE]) {
    int n = snprintf(wire, WIRE_SIZE, "%04x:%06x:%06x:", (unsigned)ep->lid, (unsigned)ep->qpn, (unsigned)ep->psn);
    for (int i = 0; i < 16; i++) n += snprintf(wire + n, (size_t)(WIRE_SIZE - n), "%02x", ep->has_gid ? ep->gid.raw[i] : 0);
}

/* The peer as the channel needs it. ibv_rc_pingpong does not send its MTU: both use -m. A zero
   GID means the peer has none (ibv_rc_pingpong without -g). */
static bool endpoint_from_wire(const char wire[WIRE_SIZE], uint32_t mtu, sfv_endpoint *ep) {
    unsigned lid, qpn, psn;
    char gid[33];
    int used = 0;
    memset(ep, 0, sizeof *ep);
    if (wire[WIRE_SIZE - 1] != '\0' || sscanf(wire, "%x:%x:%x:%32[0-9a-fA-F]%n", &lid, &qpn, &psn, gid, &used) != 4 ||
        used != WIRE_SIZE - 1 || strlen(gid) != 32 || lid > 0xffff) {
        fprintf(stderr, "rc_pingpong: the peer's address \"%.*s\" is malformed\n", WIRE_SIZE - 1, wire);
        return false;
    }
    for (int i = 0; i < 16; i++) {
        sscanf(gid + 2 * i, "%2hhx", &ep->gid.raw[i]);
        ep->has_gid |= ep->gid.raw[i] != 0;
    }
    ep->lid = (uint16_t)lid;
    ep->qpn = qpn;
    ep->psn = psn;
    ep->mtu = mtu;
    return true;
}

static void print_address(const char *who, const sfv_endpoint *ep) {
    char text[INET6_ADDRSTRLEN] = "::";
    if (ep->has_gid) inet_ntop(AF_INET6, ep->gid.raw, text, sizeof text);
    printf("  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", who, (unsigned)ep->lid, (unsigned)ep->qpn,
           (unsigned)ep->psn, text);
}

/* Swaps addresses as ibv_rc_pingpong does. The server connects before it answers, so the
   client's first message finds a queue pair ready to receive. */
static bool exchange(sfv_channel *ch, const char *servername, int port, uint32_t mtu) {
    char mine[WIRE_SIZE], theirs[WIRE_SIZE], done[5];
    sfv_endpoint me, peer;
    bool good;
    int fd;
    if (!ok(sfv_channel_endpoint(ch, &me), "sfv_channel_endpoint", NULL)) return false;
    endpoint_to_wire(&me, mine);
    print_address("local address: ", &me);
    fd = servername ? tcp_connect(servername, port) : tcp_accept(port);
    if (fd < 0) {
        fprintf(stderr, "rc_pingpong: could not %s port %d\n", servername ? "connect to" : "accept on", port);
        return false;
    }
    if (servername) {
        good = write_all(fd, mine, sizeof mine) && read_all(fd, theirs, sizeof theirs) &&
               write_all(fd, "done", sizeof "done") && endpoint_from_wire(theirs, mtu, &peer) &&
               ok(sfv_channel_handshake(ch, &peer), "sfv_channel_handshake", NULL);
    } else {
        good = read_all(fd, theirs, sizeof theirs) && endpoint_from_wire(theirs, mtu, &peer) &&
               ok(sfv_channel_handshake(ch, &peer), "sfv_channel_handshake", NULL) &&
               write_all(fd, mine, sizeof mine) && read_all(fd, done, sizeof done) && memcmp(done, "done", 5) == 0;
    }
    close(fd);
    if (!good) {
        fprintf(stderr, "rc_pingpong: address exchange with the peer failed\n");
        return false;
    }
    print_address("remote address:", &peer);
    return true;
}

/* ---- the ping-pong -------------------------------------------------------------------------- */
struct run {
    sfv_channel *ch;
    sfv_mr *mr;
    uint8_t *buf;          /* depth receive slots of size bytes, then the send buffer */
    sfv_pending *rx;       /* one per receive slot */
    size_t size;
    unsigned depth, received;
    bool check;            /* -c */
};

/* -c: the first byte of every page of a message is 0 (ibv_rc_pingpong -c's pattern). */
static bool message_valid(const uint8_t *msg, size_t size) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t at = 0; at < size; at += page)
        if (msg[at] != 0) {
            fprintf(stderr, "rc_pingpong: invalid data in page %zu of the message received\n", at / page);
            return false;
        }
    return true;
}

static bool post_slot(struct run *r, unsigned k) {
    sfv_scatter_element in = sfv_mr_scatter_element(r->mr, r->buf + (size_t)k * r->size, r->size);
    return ok(sfv_channel_post_receive(r->ch, &in, 1, &r->rx[k]), "post receive", NULL);
}

/* RC completes receives in the order they were posted: the next message is in the oldest slot.
   The slot is posted again at once, so `depth` receives stay ready. */
static bool receive_one(struct run *r) {
    unsigned k = r->received++ % r->depth;
    sfv_work_completion wc;
    if (!ok(sfv_pending_wait(&r->rx[k], -1, &wc), "receive", &wc)) return false;
    if (wc.byte_len != r->size) {
        fprintf(stderr, "rc_pingpong: got %u bytes, expected %zu (is -s the same on both sides?)\n", (unsigned)wc.byte_len, r->size);
        return false;
    }
    if (r->check && !message_valid(r->buf + (size_t)k * r->size, r->size)) return false;
    return post_slot(r, k);
}

static bool send_one(struct run *r) {
    sfv_gather_element out = sfv_mr_gather_element(r->mr, r->buf + (size_t)r->depth * r->size, r->size);
    sfv_work_completion wc;
    return ok(sfv_channel_send(r->ch, &out, 1, &wc), "send", &wc);
}

/* -m: what ibv_rc_pingpong takes (its pp_mtu_to_enum). */
static bool mtu_valid(uint32_t mtu) { return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096; }

static void usage(void) {
    fprintf(stderr, "usage: rc_pingpong [-d dev] [-i port] [-g gid index] [-s size] [-m mtu] [-r rx depth] [-n iters]\n"
                    "                   [-p tcp port] [-l sl] [-e] [-c] [-o] [-N] [server-host]\n"
                    "       (long options as ibv_rc_pingpong's: --ib-dev, --ib-port, --gid-idx, --size, --mtu,\n"
                    "        --rx-depth, --iters, --port, --sl, --events, --chk, --odp, --new_send)\n");
    exit(2);
}

/* An option's number: the whole text, decimal, 0x hex or 0 octal (as ibv_rc_pingpong's strtol with
   base 0), within [min, max]; else a usage error. */
static long long number(const char *text, long long min, long long max, int opt) {
    char *end = NULL;
    long long v;
    errno = 0;
    v = strtoll(text, &end, 0);
    if (errno || end == text || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "rc_pingpong: -%c \"%s\": want a number from %lld to %lld\n", opt, text, min, max);
        usage();
    }
    return v;
}

/* ibv_rc_pingpong's options for verbs safeverbs does not offer: refused, with the reason. */
static void not_offered(int opt) {
    const char *why = opt == 'O' ? "implicit on-demand paging (a memory region of the whole address space)"
                    : opt == 'P' ? "prefetching an on-demand region (ibv_advise_mr)"
                    : opt == 't' ? "completion timestamps (extended CQs)"
                                 : "device memory (ibv_alloc_dm)";
    fprintf(stderr, "rc_pingpong: -%c: %s is not offered by safeverbs\n", opt, why);
    exit(1);
}

int main(int argc, char **argv) {
    const char *device = NULL, *servername = NULL;
    int port = 18515, iters = 1000, gid_index = -1, sl = 0, c;
    unsigned ib_port = 1;
    sfv_context *ctx = NULL;
    sfv_pd *pd = NULL;
    sfv_channel_desc desc = {0};
    struct run r = {NULL, NULL, NULL, NULL, 4096, 500, 0, false};
    struct timespec t0, t1;
    uint32_t psn;
    bool good = false, odp = false;
    desc.path_mtu = 1024;
    static const struct option longs[] = {
        {"port", required_argument, NULL, 'p'},   {"ib-dev", required_argument, NULL, 'd'},
        {"ib-port", required_argument, NULL, 'i'}, {"size", required_argument, NULL, 's'},
        {"mtu", required_argument, NULL, 'm'},    {"rx-depth", required_argument, NULL, 'r'},
        {"iters", required_argument, NULL, 'n'},  {"sl", required_argument, NULL, 'l'},
        {"events", no_argument, NULL, 'e'},       {"gid-idx", required_argument, NULL, 'g'},
        {"odp", no_argument, NULL, 'o'},          {"iodp", no_argument, NULL, 'O'},
        {"prefetch", no_argument, NULL, 'P'},     {"ts", no_argument, NULL, 't'},
        {"chk", no_argument, NULL, 'c'},          {"dm", no_argument, NULL, 'j'},
        {"new_send", no_argument, NULL, 'N'},     {NULL, 0, NULL, 0}};
    /* As ibv_rc_pingpong, a TCP port over 65535 and an MTU that is none are refused here: the
       port cast to 16 bits named another (65536: one the kernel picks, whose accept waited for
       good), and -m 0 made a channel with the port's MTU that then refused the peer's address,
       sent with -m's 0. */
    while ((c = getopt_long(argc, argv, "p:d:i:s:m:r:n:l:eg:oOPtcjN", longs, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'i': ib_port = (unsigned)number(optarg, 1, 255, c); break;
        case 'g': gid_index = (int)number(optarg, -1, 255, c); break; /* -1: ibv_rc_pingpong's default, taken as ours */
        case 's': r.size = (size_t)number(optarg, 1, 1 << 30, c); break;
        case 'm':
            desc.path_mtu = (uint32_t)number(optarg, 256, 4096, c);
            if (!mtu_valid(desc.path_mtu)) {
                fprintf(stderr, "rc_pingpong: -m %s: an MTU is 256, 512, 1024, 2048 or 4096\n", optarg);
                usage();
            }
            break;
        case 'r': r.depth = (unsigned)number(optarg, 1, 65536, c); break;
        case 'n': iters = (int)number(optarg, 1, INT_MAX, c); break;
        case 'p': port = (int)number(optarg, 1, 65535, c); break;
        case 'l': sl = (int)number(optarg, 0, 15, c); break;
        case 'e': desc.wait_mode = SFV_WAIT_EVENT; break;
        case 'c': r.check = true; break;
        case 'o': odp = true; break;
        case 'N': break; /* ibv_wr_* instead of ibv_post_send: the same work requests on the wire */
        case 'O': case 'P': case 't': case 'j': not_offered(c); break;
        default: usage();
        }
    }
    if (optind < argc) servername = argv[optind++];
    if (optind < argc) usage();
    if (getrandom(&psn, sizeof psn, 0) != sizeof psn) psn = (uint32_t)time(NULL) ^ (uint32_t)getpid() * 2654435761u;

    desc.port = (uint8_t)ib_port;
    desc.service_level = (uint8_t)sl;
    desc.gid_index_set = gid_index >= 0;
    desc.gid_index = (uint8_t)(gid_index >= 0 ? gid_index : 0);
    desc.send_psn = psn & 0xffffff;
    desc.max_recv_wr = r.depth;
    r.buf = calloc((size_t)r.depth + 1, r.size);
    r.rx = calloc(r.depth, sizeof *r.rx);
    if (!r.buf || !r.rx) {
        perror("rc_pingpong: calloc");
        goto out;
    }
    if (!ok(sfv_open_device(device, &ctx), "sfv_open_device", NULL) || !ok(sfv_alloc_pd(ctx, &pd), "sfv_alloc_pd", NULL) ||
        !ok(sfv_reg_mr_access(pd, r.buf, ((size_t)r.depth + 1) * r.size, SFV_ACCESS_LOCAL_WRITE | (odp ? SFV_ACCESS_ON_DEMAND : 0u), &r.mr),
            odp ? "sfv_reg_mr_access (on-demand paging, -o)" : "sfv_reg_mr_access", NULL) ||
        !ok(sfv_create_channel(pd, &desc, &r.ch), "sfv_create_channel", NULL))
        goto out;
    for (unsigned k = 0; k < r.depth; k++)
        if (!post_slot(&r, k)) goto out;
    if (!exchange(r.ch, servername, port, desc.path_mtu)) goto out;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    good = true;
    for (int i = 0; good && i < iters; i++) /* the client speaks first, the servername answers */
        good = servername ? send_one(&r) && receive_one(&r) : receive_one(&r) && send_one(&r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (good) {
        double usec = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
        long long bytes = (long long)r.size * iters * 2;
        printf("%lld bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec / 1e6, bytes * 8. / usec);
        printf("%d iters in %.2f seconds = %.2f usec/iter\n", iters, usec / 1e6, usec / iters);
    }
out:
    /* The receives still posted are flushed by sfv_destroy_channel before their buffer goes. */
    sfv_destroy_channel(r.ch);
    sfv_dereg_mr(r.mr);
    sfv_dealloc_pd(pd);
    sfv_close_device(ctx);
    free(r.rx);
    free(r.buf);
    return good ? 0 : 1;
}
