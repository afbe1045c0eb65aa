/* fi_cost.c - instructions per message through libfabric's verbs provider, for comparison with
   safeverbs' `sfv_bench --test cost --impl inject` (bench/sfv_bench.c, run_cost).

   One process, one device: a FI_EP_MSG connection to itself over the verbs provider. A passive
   endpoint listens on the address given with -a (the IPv4 address of the device's netdev); an
   active endpoint (the client) connects to it; the connection request is accepted on a third
   endpoint (the server). One domain holds both endpoints, each with its own completion queue
   and event queue; one thread drives everything (connection set-up included: the event queues
   are read without blocking, in turn).

   Per iteration, 64-byte messages, each step a function cost_<loop>_<step> (the steps of
   sfv_bench's cost test, which bench_report reads by these names) kept out of line so that
   callgrind counts only inside them (--collect-atstart=no --toggle-collect='cost_*'; the
   library, provider and libc code they call is counted with them):
     cost_fi_post_recv       fi_recv of 64 bytes on the server, into registered memory
     --mode inject (default):
       cost_fi_post_send     fi_inject of 64 bytes from plain memory on the client (no completion;
                             on -FI_EAGAIN it reads the client's CQ and tries again, as a user must)
     --mode send:
       cost_fisend_post_send fi_send of 64 bytes from registered memory, with a completion
     usleep(--settle-us), not counted: the completions arrive meanwhile
     --mode send:
       cost_fi_poll_send     fi_cq_read on the client's CQ until the send's completion
     cost_fi_poll_recv       fi_cq_read on the server's CQ until the receive's completion (its
                             context, FI_RECV and length 64 are checked)
   Under callgrind the counters are zeroed after the --warmup iterations (CALLGRIND_ZERO_STATS),
   so a run's count is its N iterations': divided by N, one iteration's instructions.
   With --mode inject the user reads no send completion: the verbs provider (1.17) takes its send
   queue's places back only when they run out (after tx size injects, 384 by default; -v prints
   it), and then one fi_inject reads every completion waiting (all of them: --settle-us lets them
   arrive), about 39,000 instructions on rxe, so no fi_inject answers -FI_EAGAIN. A count over N
   iterations holds the drains that fall in them: N a multiple of the tx size gives the long-run
   mean (863.2 per message; 859.1 with one drain in 400).

       build/fi_cost -a 192.0.2.1 [-p PORT] [-n N] [--settle-us U] [--warmup W]
                     [--mode inject|send] [--threading domain|safe] [-v]

   Defaults: port 18650, N 1000, settle 1000 us, warmup 16, mode inject, threading domain.
   --threading: the domain's threading model asked for (default domain: one thread uses the
   domain, so the provider may leave out its locks; safe: FI_THREAD_SAFE). -v prints what the
   provider gave (fabric, domain, sizes, modes) on stderr.
   Prints one line on stdout, result,cost,send,batch1,64,fi_<mode>,ops,<N>, and exits 0; on a
   failure, a message on stderr and exit status 1. */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <arpa/inet.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#if defined(__GNUC__) && !defined(__clang__)
#define NOINLINE __attribute__((noinline, noclone))
#else
#define NOINLINE __attribute__((noinline))
#endif
#define COLD __attribute__((cold, noinline))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#define MSG_SIZE 64
#define BUF_SIZE 8192       /* registered: the send half, then the receive half */
#define RX_OFFSET 4096
#define SETUP_TIMEOUT_S 120 /* connection set-up and teardown (under valgrind the guest is slow) */
#define POLL_TIMEOUT_S 60   /* a completion that does not come */
#define SPINS_PER_CHECK (1u << 16)

enum mode { MODE_INJECT, MODE_SEND };

/* Everything opened, so that a failure anywhere can close what exists. */
static struct {
    struct fi_info *hints, *cli_info, *srv_info, *conn_info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_eq *cli_eq, *srv_eq;
    struct fid_pep *pep;
    struct fid_ep *cli, *srv;
    struct fid_cq *cli_cq, *srv_cq;
    struct fid_mr *mr;
    void *buf;
    void *plain; /* fi_inject's source: plain memory */
} g;

/* The state of the loop, as the cost functions see it. */
typedef struct cost_fi {
    struct fid_ep *cli, *srv;
    struct fid_cq *cli_cq, *srv_cq;
    const void *tx;   /* plain memory (inject) or the registered send half (send) */
    void *tx_desc;    /* fi_mr_desc when the provider wants local registration, else NULL */
    void *rx;
    void *rx_desc;
    struct fi_context tx_ctx, rx_ctx;
    unsigned long eagain; /* -FI_EAGAIN answers to a post */
} cost_fi;

static void teardown(void);

COLD static void die(const char *fmt, ...) {
    va_list ap;
    fputs("fi_cost: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    teardown();
    exit(1);
}

COLD static void die_fi(const char *what, long rc) {
    die("%s: %s (%ld)", what, fi_strerror((int)-rc), rc);
}

#define CHECK(call)                                  \
    do {                                             \
        long rc_ = (long)(call);                     \
        if (UNLIKELY(rc_ != 0)) die_fi(#call, rc_); \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- completions ----------------------------------------------------------------------------- */
/* A CQ read that failed: the error entry, said in words. */
COLD static void cq_failed(struct fid_cq *cq, const char *what, long rc) {
    if (rc == -FI_EAVAIL) {
        struct fi_cq_err_entry err;
        char buf[256];
        long r;
        memset(&err, 0, sizeof err);
        r = (long)fi_cq_readerr(cq, &err, 0);
        if (r < 0) die_fi("fi_cq_readerr", r);
        die("%s: completion with error: %s (err %d, provider error %d: %s)", what, fi_strerror(err.err), err.err,
            err.prov_errno, fi_cq_strerror(cq, err.prov_errno, err.err_data, buf, sizeof buf));
    }
    die_fi(what, rc);
}

/* A completion that is not the one awaited. */
COLD static void cq_unexpected(const char *what, const struct fi_cq_msg_entry *e, const void *ctx, uint64_t flag) {
    die("%s: unexpected completion: context %p (expected %p), flags 0x%llx (expected 0x%llx set), length %zu (expected %d)",
        what, e->op_context, ctx, (unsigned long long)e->flags, (unsigned long long)flag, e->len, MSG_SIZE);
}

/* After SPINS_PER_CHECK empty reads in a row: gives up once POLL_TIMEOUT_S have passed since the
   first check. Only a poll that spins comes here (with --settle-us, a completion is there at the
   first read). */
COLD static void spin_check(double *t0, const char *what) {
    double t = now_s();
    if (*t0 == 0) *t0 = t;
    else if (t - *t0 > POLL_TIMEOUT_S) die("%s: no completion after %d s", what, POLL_TIMEOUT_S);
}

/* Reads one completion from cq: the operation with context ctx and flag set. */
static inline void read_one(struct fid_cq *cq, const void *ctx, uint64_t flag, const char *what) {
    struct fi_cq_msg_entry e;
    unsigned spins = 0;
    double t0 = 0;
    for (;;) {
        ssize_t n = fi_cq_read(cq, &e, 1);
        if (n == 1) break;
        if (UNLIKELY(n != -FI_EAGAIN)) cq_failed(cq, what, (long)n);
        if (UNLIKELY(++spins == SPINS_PER_CHECK)) {
            spins = 0;
            spin_check(&t0, what);
        }
    }
    if (UNLIKELY(e.op_context != ctx || !(e.flags & flag) || ((flag & FI_RECV) && e.len != MSG_SIZE)))
        cq_unexpected(what, &e, ctx, flag);
}

/* A post refused with -FI_EAGAIN: the client's CQ is read, which lets the provider take back the
   send queue's slots of completed operations; any completion the user sees here is unexpected
   (the loop reads every one it asked for). */
static void client_progress(cost_fi *c, const char *what) {
    struct fi_cq_msg_entry e;
    ssize_t n = fi_cq_read(c->cli_cq, &e, 1);
    if (n == 1) cq_unexpected(what, &e, NULL, 0);
    if (n != -FI_EAGAIN) cq_failed(c->cli_cq, what, (long)n);
}

/* ---- the counted steps ----------------------------------------------------------------------- */
NOINLINE void cost_fi_post_recv(cost_fi *c);
NOINLINE void cost_fi_post_send(cost_fi *c);
NOINLINE void cost_fisend_post_send(cost_fi *c);
NOINLINE void cost_fi_poll_send(cost_fi *c);
NOINLINE void cost_fi_poll_recv(cost_fi *c);

NOINLINE void cost_fi_post_recv(cost_fi *c) {
    ssize_t r = fi_recv(c->srv, c->rx, MSG_SIZE, c->rx_desc, 0, &c->rx_ctx);
    if (UNLIKELY(r != 0)) die_fi("fi_recv", (long)r);
}
NOINLINE void cost_fi_post_send(cost_fi *c) {
    for (;;) {
        ssize_t r = fi_inject(c->cli, c->tx, MSG_SIZE, 0);
        if (r == 0) return;
        if (UNLIKELY(r != -FI_EAGAIN)) die_fi("fi_inject", (long)r);
        c->eagain++;
        client_progress(c, "fi_inject (-FI_EAGAIN): fi_cq_read on the client's CQ");
    }
}
NOINLINE void cost_fisend_post_send(cost_fi *c) {
    for (;;) {
        ssize_t r = fi_send(c->cli, c->tx, MSG_SIZE, c->tx_desc, 0, &c->tx_ctx);
        if (r == 0) return;
        if (UNLIKELY(r != -FI_EAGAIN)) die_fi("fi_send", (long)r);
        c->eagain++;
        client_progress(c, "fi_send (-FI_EAGAIN): fi_cq_read on the client's CQ");
    }
}
NOINLINE void cost_fi_poll_send(cost_fi *c) { read_one(c->cli_cq, &c->tx_ctx, FI_SEND, "send completion"); }
NOINLINE void cost_fi_poll_recv(cost_fi *c) { read_one(c->srv_cq, &c->rx_ctx, FI_RECV, "receive completion"); }

/* ---- connection events ----------------------------------------------------------------------- */
/* One event from eq if there is one: 1 (event and entry filled), 0 (none yet). */
static int eq_poll(struct fid_eq *eq, const char *side, uint32_t *event, struct fi_eq_cm_entry *entry) {
    ssize_t n = fi_eq_read(eq, event, entry, sizeof *entry, 0);
    if (n == -FI_EAGAIN) return 0;
    if (n == -FI_EAVAIL) {
        struct fi_eq_err_entry err;
        char buf[256];
        memset(&err, 0, sizeof err);
        n = fi_eq_readerr(eq, &err, 0);
        if (n < 0) die_fi("fi_eq_readerr", (long)n);
        die("%s's event queue: error event: %s (err %d, provider error %d: %s)", side, fi_strerror(err.err), err.err,
            err.prov_errno, fi_eq_strerror(eq, err.prov_errno, err.err_data, buf, sizeof buf));
    }
    if (n < 0) die_fi("fi_eq_read", (long)n);
    if ((size_t)n < sizeof(uint32_t)) die("%s's event queue: short event (%zd bytes)", side, n);
    return 1;
}

static const char *event_name(uint32_t ev) {
    switch (ev) {
    case FI_CONNREQ: return "FI_CONNREQ";
    case FI_CONNECTED: return "FI_CONNECTED";
    case FI_SHUTDOWN: return "FI_SHUTDOWN";
    case FI_NOTIFY: return "FI_NOTIFY";
    case FI_MR_COMPLETE: return "FI_MR_COMPLETE";
    case FI_AV_COMPLETE: return "FI_AV_COMPLETE";
    case FI_JOIN_COMPLETE: return "FI_JOIN_COMPLETE";
    default: return "unknown event";
    }
}

/* ---- set-up ---------------------------------------------------------------------------------- */
static void bind_ep(struct fid_ep *ep, struct fid_eq *eq, struct fid_cq *cq) {
    CHECK(fi_ep_bind(ep, &eq->fid, 0));
    CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    CHECK(fi_enable(ep));
}

static void open_cq(struct fid_cq **cq) {
    struct fi_cq_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.format = FI_CQ_FORMAT_MSG; /* context, flags and length */
    attr.wait_obj = FI_WAIT_NONE;   /* read by polling */
    CHECK(fi_cq_open(g.domain, &attr, cq, NULL));
}

static void open_eq(struct fid_eq **eq) {
    struct fi_eq_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = 16;
    attr.wait_obj = FI_WAIT_NONE; /* read by polling */
    CHECK(fi_eq_open(g.fabric, &attr, eq, NULL));
}

static void same_domain(const struct fi_info *info, const char *what) {
    const char *want = g.cli_info->domain_attr->name, *have = info->domain_attr->name;
    if (!want || !have || strcmp(want, have) != 0)
        die("%s is on domain %s, the client's on %s: -a must be the address of one device's netdev", what,
            have ? have : "(none)", want ? want : "(none)");
}

/* Listen, connect, accept, and wait until both sides are connected: all in this thread. */
static void connect_self(const char *addr, const char *port) {
    uint32_t ev;
    struct fi_eq_cm_entry entry;
    int cli_up = 0, srv_up = 0;
    double t0;

    CHECK(fi_passive_ep(g.fabric, g.srv_info, &g.pep, NULL));
    CHECK(fi_pep_bind(g.pep, &g.srv_eq->fid, 0));
    CHECK(fi_listen(g.pep));

    CHECK(fi_endpoint(g.domain, g.cli_info, &g.cli, NULL));
    bind_ep(g.cli, g.cli_eq, g.cli_cq);
    CHECK(fi_connect(g.cli, g.cli_info->dest_addr, NULL, 0));

    /* the connection request, on the passive endpoint's EQ */
    t0 = now_s();
    for (;;) {
        if (eq_poll(g.srv_eq, "listener", &ev, &entry)) {
            if (ev != FI_CONNREQ) die("listener's event queue: %s (%u), expected FI_CONNREQ", event_name(ev), ev);
            break;
        }
        if (eq_poll(g.cli_eq, "client", &ev, &entry))
            die("client's event queue: %s (%u) before the server saw the connection request", event_name(ev), ev);
        if (now_s() - t0 > SETUP_TIMEOUT_S) die("no connection request on %s:%s after %d s", addr, port, SETUP_TIMEOUT_S);
        usleep(1000);
    }
    g.conn_info = entry.info;
    if (!g.conn_info) die("FI_CONNREQ without its fi_info");
    same_domain(g.conn_info, "the connection request");
    CHECK(fi_endpoint(g.domain, g.conn_info, &g.srv, NULL));
    bind_ep(g.srv, g.srv_eq, g.srv_cq);
    CHECK(fi_accept(g.srv, NULL, 0));

    /* FI_CONNECTED on both sides, in whichever order */
    t0 = now_s();
    while (!cli_up || !srv_up) {
        int got = 0;
        if (eq_poll(g.srv_eq, "server", &ev, &entry)) {
            got = 1;
            if (ev != FI_CONNECTED || entry.fid != &g.srv->fid)
                die("server's event queue: %s (%u), expected FI_CONNECTED", event_name(ev), ev);
            srv_up = 1;
        }
        if (eq_poll(g.cli_eq, "client", &ev, &entry)) {
            got = 1;
            if (ev != FI_CONNECTED || entry.fid != &g.cli->fid)
                die("client's event queue: %s (%u), expected FI_CONNECTED", event_name(ev), ev);
            cli_up = 1;
        }
        if (got) continue;
        if (now_s() - t0 > SETUP_TIMEOUT_S)
            die("not connected after %d s (client %s, server %s)", SETUP_TIMEOUT_S, cli_up ? "connected" : "waiting",
                srv_up ? "connected" : "waiting");
        usleep(1000);
    }
}

/* fi_shutdown on the client; the server's FI_SHUTDOWN is awaited (not for long: a teardown that
   does not see it is said on stderr, and the endpoints are closed anyway). */
static void disconnect(void) {
    uint32_t ev;
    struct fi_eq_cm_entry entry;
    double t0 = now_s();
    CHECK(fi_shutdown(g.cli, 0));
    for (;;) {
        if (eq_poll(g.srv_eq, "server", &ev, &entry)) {
            if (ev == FI_SHUTDOWN) break;
            die("server's event queue: %s (%u), expected FI_SHUTDOWN", event_name(ev), ev);
        }
        if (now_s() - t0 > 10) {
            fprintf(stderr, "fi_cost: warning: the server saw no FI_SHUTDOWN within 10 s of fi_shutdown\n");
            break;
        }
        usleep(1000);
    }
}

static void close_fid(void *fidp, const char *what) {
    struct fid **f = fidp;
    if (*f) {
        int rc = fi_close(*f);
        *f = NULL;
        if (rc) fprintf(stderr, "fi_cost: fi_close(%s): %s (%d)\n", what, fi_strerror(-rc), rc);
    }
}

/* Endpoints first, then what they were bound to, the MR, the domain, the fabric. */
static void teardown(void) {
    close_fid(&g.cli, "client endpoint");
    close_fid(&g.srv, "server endpoint");
    close_fid(&g.pep, "passive endpoint");
    close_fid(&g.cli_cq, "client CQ");
    close_fid(&g.srv_cq, "server CQ");
    close_fid(&g.cli_eq, "client EQ");
    close_fid(&g.srv_eq, "listener/server EQ");
    close_fid(&g.mr, "MR");
    close_fid(&g.domain, "domain");
    close_fid(&g.fabric, "fabric");
    if (g.conn_info) fi_freeinfo(g.conn_info);
    if (g.srv_info) fi_freeinfo(g.srv_info);
    if (g.cli_info) fi_freeinfo(g.cli_info);
    if (g.hints) fi_freeinfo(g.hints);
    g.conn_info = g.srv_info = g.cli_info = g.hints = NULL;
    free(g.buf);
    free(g.plain);
    g.buf = g.plain = NULL;
}

static void describe(const struct fi_info *i) {
    char threading[64], progress[64]; /* fi_tostr answers in one static buffer */
    snprintf(threading, sizeof threading, "%s", fi_tostr(&i->domain_attr->threading, FI_TYPE_THREADING));
    snprintf(progress, sizeof progress, "%s", fi_tostr(&i->domain_attr->data_progress, FI_TYPE_PROGRESS));
    fprintf(stderr,
            "fi_cost: provider %s %u.%u, fabric %s, domain %s, threading %s, mr_mode 0x%x%s, mode 0x%llx,\n"
            "fi_cost: tx size %zu, rx size %zu, inject size %zu, max msg %zu, data progress %s\n",
            i->fabric_attr->prov_name, FI_MAJOR(i->fabric_attr->prov_version), FI_MINOR(i->fabric_attr->prov_version),
            i->fabric_attr->name, i->domain_attr->name, threading, (unsigned)i->domain_attr->mr_mode,
            (i->domain_attr->mr_mode & FI_MR_LOCAL) ? " (FI_MR_LOCAL)" : "", (unsigned long long)i->mode,
            i->tx_attr->size, i->rx_attr->size, i->tx_attr->inject_size, i->ep_attr->max_msg_size, progress);
}

/* ---- main ------------------------------------------------------------------------------------ */
static void usage(void) {
    fprintf(stderr, "usage: fi_cost -a IPV4 [-p PORT] [-n N] [--settle-us U] [--warmup W] [--mode inject|send]\n"
                    "               [--threading domain|safe] [-v]\n"
                    "  IPV4: the address of the RDMA device's netdev (the verbs provider connects through the RDMA-CM)\n");
    exit(2);
}

static long num_arg(const char *s, const char *name, long min) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < min) {
        fprintf(stderr, "fi_cost: %s: not a number >= %ld: %s\n", name, min, s);
        usage();
    }
    return v;
}

static void settle(long us) {
    if (us > 0) usleep((useconds_t)us);
}

int main(int argc, char **argv) {
    static const struct option longs[] = {
        {"settle-us", 1, 0, 'S'}, {"warmup", 1, 0, 'w'}, {"mode", 1, 0, 'm'}, {"threading", 1, 0, 't'},
        {"iters", 1, 0, 'n'}, {"addr", 1, 0, 'a'}, {"port", 1, 0, 'p'}, {0, 0, 0, 0}};
    const char *addr = NULL, *port = "18650";
    long iters = 1000, warmup = 16, settle_us = 1000;
    enum mode mode = MODE_INJECT;
    enum fi_threading threading = FI_THREAD_DOMAIN;
    int verbose = 0, c, mr_local, rc;
    struct in_addr in;
    static cost_fi cf;
    long i;

    while ((c = getopt_long(argc, argv, "a:p:n:vh", longs, NULL)) != -1) {
        switch (c) {
        case 'a': addr = optarg; break;
        case 'p': port = optarg; num_arg(optarg, "-p", 1); break;
        case 'n': iters = num_arg(optarg, "-n", 1); break;
        case 'S': settle_us = num_arg(optarg, "--settle-us", 0); break;
        case 'w': warmup = num_arg(optarg, "--warmup", 0); break;
        case 'm':
            if (strcmp(optarg, "inject") == 0) mode = MODE_INJECT;
            else if (strcmp(optarg, "send") == 0) mode = MODE_SEND;
            else usage();
            break;
        case 't':
            if (strcmp(optarg, "domain") == 0) threading = FI_THREAD_DOMAIN;
            else if (strcmp(optarg, "safe") == 0) threading = FI_THREAD_SAFE;
            else usage();
            break;
        case 'v': verbose = 1; break;
        default: usage();
        }
    }
    if (!addr || optind != argc) usage();
    if (inet_pton(AF_INET, addr, &in) != 1) {
        fprintf(stderr, "fi_cost: -a %s: not an IPv4 address\n", addr);
        usage();
    }

    /* What this program needs and what it accepts: messages on a connected endpoint of the verbs
       provider; the memory registration modes it honours (local registration with descriptors,
       virtual addresses, allocated memory, provider keys); contexts that are struct fi_context. */
    g.hints = fi_allocinfo();
    if (!g.hints) die("fi_allocinfo: out of memory");
    g.hints->caps = FI_MSG;
    g.hints->mode = FI_CONTEXT;
    g.hints->addr_format = FI_SOCKADDR_IN;
    g.hints->ep_attr->type = FI_EP_MSG;
    g.hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    g.hints->domain_attr->threading = threading;
    g.hints->tx_attr->inject_size = MSG_SIZE;
    g.hints->fabric_attr->prov_name = strdup("verbs");
    if (!g.hints->fabric_attr->prov_name) die("strdup: out of memory");

    /* the listener's address (FI_SOURCE) and the client's destination: the same */
    rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), addr, port, FI_SOURCE, g.hints, &g.srv_info);
    if (rc) die("fi_getinfo (verbs provider, FI_EP_MSG, listening on %s:%s): %s (%d)", addr, port, fi_strerror(-rc), rc);
    rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), addr, port, 0, g.hints, &g.cli_info);
    if (rc) die("fi_getinfo (verbs provider, FI_EP_MSG, connecting to %s:%s): %s (%d)", addr, port, fi_strerror(-rc), rc);
    if (verbose) describe(g.cli_info);
    same_domain(g.srv_info, "the listener");
    if (g.cli_info->tx_attr->inject_size < MSG_SIZE)
        die("the provider's inject size is %zu bytes, below %d", g.cli_info->tx_attr->inject_size, MSG_SIZE);
    mr_local = (g.cli_info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;

    CHECK(fi_fabric(g.cli_info->fabric_attr, &g.fabric, NULL));
    CHECK(fi_domain(g.fabric, g.cli_info, &g.domain, NULL));
    open_eq(&g.cli_eq);
    open_eq(&g.srv_eq);
    open_cq(&g.cli_cq);
    open_cq(&g.srv_cq);

    /* one registration: the send half (fi_send) and the receive half; fi_inject's source is
       plain memory, never registered */
    if (posix_memalign(&g.buf, 4096, BUF_SIZE)) die("posix_memalign: out of memory");
    memset(g.buf, 0, BUF_SIZE);
    g.plain = malloc(MSG_SIZE);
    if (!g.plain) die("malloc: out of memory");
    memset(g.plain, 'i', MSG_SIZE);
    memset(g.buf, 's', MSG_SIZE);
    CHECK(fi_mr_reg(g.domain, g.buf, BUF_SIZE, FI_SEND | FI_RECV, 0, 0, 0, &g.mr, NULL));

    connect_self(addr, port);

    cf.cli = g.cli;
    cf.srv = g.srv;
    cf.cli_cq = g.cli_cq;
    cf.srv_cq = g.srv_cq;
    cf.rx = (char *)g.buf + RX_OFFSET;
    cf.rx_desc = mr_local ? fi_mr_desc(g.mr) : NULL;
    if (mode == MODE_INJECT) {
        cf.tx = g.plain;
        cf.tx_desc = NULL;
    } else {
        cf.tx = g.buf;
        cf.tx_desc = mr_local ? fi_mr_desc(g.mr) : NULL;
    }

    for (i = 0; i < warmup + iters; i++) {
        if (i == warmup) CALLGRIND_ZERO_STATS; /* under callgrind: only the N iterations count */
        cost_fi_post_recv(&cf);
        if (mode == MODE_INJECT) {
            cost_fi_post_send(&cf);
            settle(settle_us);
        } else {
            cost_fisend_post_send(&cf);
            settle(settle_us);
            cost_fi_poll_send(&cf);
        }
        cost_fi_poll_recv(&cf);
    }
    /* the last message arrived whole */
    if (memcmp(cf.rx, cf.tx, MSG_SIZE) != 0) die("the last message received differs from the one sent");
    if (verbose) fprintf(stderr, "fi_cost: %lu posts answered -FI_EAGAIN\n", cf.eagain);

    disconnect();
    teardown();
    printf("result,cost,send,batch1,%d,fi_%s,ops,%ld\n", MSG_SIZE, mode == MODE_INJECT ? "inject" : "send", iters);
    return 0;
}
