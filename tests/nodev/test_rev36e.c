/* test_rev36e.c - hostile review 36e: the TCP exchange and sfv_node_connect against a hostile or
   broken peer on the TCP side (plain sockets in a test thread; the node parts on the fake NIC).
   Ports 29000 and up on 127.0.0.1. Every call must end by its deadline with a result that names
   the peer where it is known, leave no descriptor open (/proc/self/fd counted before and after),
   and no rank may take another's (or a stranger's) bytes as genuine. Every test here passed on
   the header at tag base: the review found no code bug in this area, one false doc sentence
   (t_listener_that_hangs_up_is_tried_again pins the behaviour the corrected sentence states). */
#include "fake_env.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char r6_key[] = "the job key of test_rev36e";

static double r6_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Descriptors this process holds. */
static int r6_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    CHECK(d);
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* (the directory's own) */
}

static void r6_desc(sfv_exchange_desc *d) {
    memset(d, 0, sizeof *d);
    d->key = r6_key;
    d->key_len = sizeof r6_key - 1;
}
static void r6_key_of(sfv__ex_key *k) {
    sfv_exchange_desc d;
    r6_desc(&d);
    CHECK_OK(sfv__ex_key_pick(&d, k));
}

/* A connection to 127.0.0.1:port, tried for up to for_s seconds; -1 if none. */
static int r6_connect(uint16_t port, double for_s) {
    const double end = r6_now() + for_s;
    for (;;) {
        struct sockaddr_in a;
        int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0);
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
        close(fd);
        if (r6_now() > end) return -1;
        usleep(2000);
    }
}

static int r6_listen(uint16_t port) {
    struct sockaddr_in a;
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(fd, 16) == 0);
    return fd;
}

static bool r6_read(int fd, void *buf, size_t len, int ms) {
    uint8_t *p = (uint8_t *)buf;
    while (len) {
        struct pollfd q = {fd, POLLIN, 0};
        ssize_t k;
        if (poll(&q, 1, ms) <= 0) return false;
        if ((k = recv(fd, p, len, 0)) <= 0) return false;
        p += k;
        len -= (size_t)k;
    }
    return true;
}

static void r6_hello(uint32_t rank, uint32_t world, uint32_t size, uint8_t nonce, uint8_t out[SFV__EX_FRAME]) {
    sfv__ex_frame f;
    memset(&f, 0, sizeof f);
    f.type = SFV__EX_HELLO;
    f.rank = rank;
    f.world = world;
    f.size = size;
    memset(f.body, nonce, sizeof f.body);
    sfv__ex_encode(&f, out);
}

/* ---- a stranger at a listening rank ------------------------------------------------------------ */
/* One real rank run on a thread: sfv_exchange_all_keyed of 8 bytes, after delay_ms. */
typedef struct r6_rank {
    const sfv_net_node *nodes;
    size_t n, rank;
    int delay_ms, timeout_ms;
    sfv_result r;
    double took;
    uint8_t mine[8], all[8 * 4];
} r6_rank;
static void *r6_rank_main(void *arg) {
    r6_rank *p = (r6_rank *)arg;
    sfv_exchange_desc d;
    double t0;
    r6_desc(&d);
    if (p->delay_ms) usleep((useconds_t)p->delay_ms * 1000);
    memset(p->mine, (int)p->rank + 1, sizeof p->mine);
    t0 = r6_now();
    p->r = sfv_exchange_all_keyed(p->nodes, p->n, p->rank, p->mine, sizeof p->mine, p->all, &d, p->timeout_ms);
    p->took = r6_now() - t0;
    return NULL;
}

enum { R6_SILENT, R6_PARTIAL, R6_CONNECT_CLOSE, R6_HELD_FLOOD, R6_SLOWLORIS, R6_TWO_SAME_RANK, R6_OVERSIZED, R6_FORGED, R6_STRANGERS };
typedef struct r6_stranger {
    uint16_t port;
    int mode;
    volatile int stop;
} r6_stranger;
static void r6_hold(r6_stranger *s) {
    while (!s->stop) usleep(5000);
}
static void *r6_stranger_main(void *arg) {
    r6_stranger *s = (r6_stranger *)arg;
    uint8_t hello[SFV__EX_FRAME];
    int fd, i;
    r6_hello(0, 2, 8, 0x5a, hello); /* claims rank 0, the rank due */
    switch (s->mode) {
    case R6_SILENT:
        fd = r6_connect(s->port, 3);
        r6_hold(s);
        close(fd);
        break;
    case R6_PARTIAL: /* a part of a frame, then a stall */
        fd = r6_connect(s->port, 3);
        (void)send(fd, hello, 20, MSG_NOSIGNAL);
        r6_hold(s);
        close(fd);
        break;
    case R6_CONNECT_CLOSE: /* reconnects as fast as it can */
        while (!s->stop)
            if ((fd = r6_connect(s->port, 0.01)) >= 0) close(fd);
        break;
    case R6_HELD_FLOOD: { /* 200 connections held open: past the cap of 16 */
        int fds[200], k = 0;
        while (!s->stop && k < 200)
            if ((fd = r6_connect(s->port, 0.01)) >= 0) fds[k++] = fd;
        r6_hold(s);
        for (i = 0; i < k; i++) close(fds[i]);
        break;
    }
    case R6_SLOWLORIS: /* a hello, one byte each 50 ms, again and again */
        while (!s->stop) {
            if ((fd = r6_connect(s->port, 0.5)) < 0) continue;
            for (i = 0; i < SFV__EX_FRAME && !s->stop; i++) {
                if (send(fd, hello + i, 1, MSG_NOSIGNAL) != 1) break;
                usleep(50000);
            }
            close(fd);
        }
        break;
    case R6_TWO_SAME_RANK: { /* two connections, both rank 0's hello */
        const int a = r6_connect(s->port, 3), b = r6_connect(s->port, 3);
        (void)send(a, hello, sizeof hello, MSG_NOSIGNAL);
        (void)send(b, hello, sizeof hello, MSG_NOSIGNAL);
        r6_hold(s);
        close(a);
        close(b);
        break;
    }
    case R6_OVERSIZED: { /* a hello followed by 4 KiB more */
        uint8_t big[4096];
        memset(big, 'S', sizeof big);
        memcpy(big, hello, sizeof hello);
        fd = r6_connect(s->port, 3);
        (void)send(fd, big, sizeof big, MSG_NOSIGNAL);
        r6_hold(s);
        close(fd);
        break;
    }
    case R6_FORGED: { /* a hello, then a made-up proof and made-up bytes with a made-up tag */
        uint8_t in[2 * SFV__EX_FRAME], junk[8 + 2 * SFV__EX_FRAME];
        sfv__ex_frame f;
        fd = r6_connect(s->port, 3);
        (void)send(fd, hello, sizeof hello, MSG_NOSIGNAL);
        (void)r6_read(fd, in, sizeof in, 2000);
        memset(&f, 0, sizeof f);
        f.type = SFV__EX_PROOF;
        memset(f.body, 0x11, sizeof f.body);
        sfv__ex_encode(&f, junk);
        memset(junk + SFV__EX_FRAME, 0x77, 8);
        f.type = SFV__EX_TAG;
        sfv__ex_encode(&f, junk + SFV__EX_FRAME + 8);
        (void)send(fd, junk, sizeof junk, MSG_NOSIGNAL);
        r6_hold(s);
        close(fd);
        break;
    }
    }
    return NULL;
}

/* Promise (>>exchange, WHO MAY TAKE PART): "A connection that does not prove the key (nonsense,
   a wrong proof, a rank not due or already heard, silence) uses no rank's place and fails
   nothing", "at most 16 unproven connections are kept", and no descriptor survives the call.
   Rank 1 listens; a stranger (silent, a part of a frame, a connect/close flood, 200 held
   connections, a slowloris, two connections claiming rank 0, more bytes than a frame, forged
   frames) comes first; rank 0 comes 0.3 s later. Both must succeed within the proof time, with
   rank 0's bytes (not the stranger's), and the listener's descriptors must all be closed. */
static void t_strangers_take_no_rank_place(void) {
    int mode;
    fk_set_threaded(true);
    for (mode = 0; mode < R6_STRANGERS; mode++) {
        const uint16_t base = (uint16_t)(29000 + 2 * mode);
        sfv_net_node nodes[2] = {{"127.0.0.1", base, 0, NULL}, {"127.0.0.1", (uint16_t)(base + 1), 1, NULL}};
        r6_rank a, b;
        r6_stranger s;
        pthread_t ta, tb, ts;
        uint8_t want[8];
        const int fds0 = r6_fds();
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        memset(&s, 0, sizeof s);
        a.nodes = b.nodes = nodes;
        a.n = b.n = 2;
        b.rank = 1;
        a.delay_ms = 300;
        a.timeout_ms = b.timeout_ms = 4000;
        s.port = nodes[1].port;
        s.mode = mode;
        CHECK(pthread_create(&tb, NULL, r6_rank_main, &b) == 0);
        usleep(50000);
        CHECK(pthread_create(&ts, NULL, r6_stranger_main, &s) == 0);
        CHECK(pthread_create(&ta, NULL, r6_rank_main, &a) == 0);
        CHECK(pthread_join(ta, NULL) == 0);
        CHECK(pthread_join(tb, NULL) == 0);
        s.stop = 1;
        CHECK(pthread_join(ts, NULL) == 0);
        if (a.r != SFV_OK || b.r != SFV_OK) FAIL("stranger mode %d: rank 0 %s, rank 1 %s", mode, sfv_result_str(a.r), sfv_result_str(b.r));
        if (b.took > 0.3 + 1.0 + 0.8) FAIL("stranger mode %d: rank 1 took %.2f s (proof time 1 s)", mode, b.took);
        memset(want, 1, sizeof want);
        CHECK(memcmp(b.all, want, sizeof want) == 0); /* rank 0's, not the stranger's */
        if (r6_fds() != fds0) FAIL("stranger mode %d: %d descriptors before, %d after", mode, fds0, r6_fds());
    }
    CHECK_EQ(fk_live_total(), 0);
}

/* Promise (ERRORS): "The whole exchange ends within timeout_ms ...: SFV_ERR_TIMEOUT naming the
   rank that did not come (and the last stranger dropped while waiting for it ...)". A stranger
   that connects and says nothing, with rank 0 never coming: rank 1 must give up at its deadline,
   not later, say so, and close everything. */
static void t_silent_stranger_alone_times_out(void) {
    sfv_net_node nodes[2] = {{"127.0.0.1", 29030, 0, NULL}, {"127.0.0.1", 29031, 1, NULL}};
    r6_rank b;
    r6_stranger s;
    pthread_t tb, ts;
    const int fds0 = r6_fds();
    memset(&b, 0, sizeof b);
    memset(&s, 0, sizeof s);
    b.nodes = nodes;
    b.n = 2;
    b.rank = 1;
    b.timeout_ms = 1500;
    s.port = 29031;
    s.mode = R6_SILENT;
    CHECK(pthread_create(&tb, NULL, r6_rank_main, &b) == 0);
    usleep(50000);
    CHECK(pthread_create(&ts, NULL, r6_stranger_main, &s) == 0);
    CHECK(pthread_join(tb, NULL) == 0);
    CHECK_RESULT(b.r, SFV_ERR_TIMEOUT);
    CHECK(b.took >= 1.45 && b.took < 1.5 + 0.6);
    s.stop = 1;
    CHECK(pthread_join(ts, NULL) == 0);
    CHECK_EQ(r6_fds(), fds0);
}

/* ---- a fake listener at a higher rank's port: this rank connects ------------------------------ */
enum { R6L_HELLO_HANGUP, R6L_PART_HANGUP, R6L_ACCEPT_CLOSE, R6L_HALF_DATA, R6L_PROVEN_STALL, R6L_SIZE_PLUS_ONE, R6L_OTHER_RANK,
       R6L_BAD_TAG, R6L_EXTRA_BYTES };
typedef struct r6_listener {
    int lfd, mode;
    volatile int stop;
    int tries;
} r6_listener;
static void *r6_listener_main(void *arg) {
    r6_listener *f = (r6_listener *)arg;
    sfv__ex_key k;
    r6_key_of(&k);
    while (!f->stop) {
        struct pollfd q = {f->lfd, POLLIN, 0};
        uint8_t hello_l[SFV__EX_FRAME], hello_c[SFV__EX_FRAME], out[2 * SFV__EX_FRAME], in[SFV__EX_FRAME];
        sfv__ex_frame fr;
        int fd, i;
        if (poll(&q, 1, 20) <= 0) continue;
        if ((fd = accept(f->lfd, NULL, NULL)) < 0) continue;
        f->tries++;
        r6_hello(f->mode == R6L_OTHER_RANK ? 0 : 1, 2, f->mode == R6L_SIZE_PLUS_ONE ? 9 : 8, (uint8_t)f->tries, hello_l);
        if (f->mode == R6L_HELLO_HANGUP || f->mode == R6L_PART_HANGUP || f->mode == R6L_ACCEPT_CLOSE) {
            if (f->mode != R6L_ACCEPT_CLOSE) (void)send(fd, hello_l, f->mode == R6L_HELLO_HANGUP ? SFV__EX_FRAME : 20, MSG_NOSIGNAL);
            close(fd);
            continue;
        }
        /* with the key: the hello and a good proof */
        if (!r6_read(fd, hello_c, sizeof hello_c, 2000)) {
            close(fd);
            continue;
        }
        memcpy(out, hello_l, SFV__EX_FRAME);
        memset(&fr, 0, sizeof fr);
        fr.type = SFV__EX_PROOF;
        sfv__ex_mac(&k, 'L', hello_c, hello_l, NULL, 0, fr.body);
        sfv__ex_encode(&fr, out + SFV__EX_FRAME);
        (void)send(fd, out, sizeof out, MSG_NOSIGNAL);
        if (!r6_read(fd, in, sizeof in, 2000)) {
            close(fd);
            continue;
        }
        if (f->mode == R6L_HALF_DATA) {
            uint8_t d[4] = {9, 9, 9, 9};
            (void)send(fd, d, sizeof d, MSG_NOSIGNAL);
        } else if (f->mode == R6L_PROVEN_STALL) {
            for (i = 0; i < 300 && !f->stop; i++) usleep(10000);
        } else if (f->mode == R6L_BAD_TAG || f->mode == R6L_EXTRA_BYTES) {
            uint8_t d[8 + SFV__EX_FRAME + 100], sink[8 + SFV__EX_FRAME];
            memset(d, 0x42, sizeof d);
            memset(&fr, 0, sizeof fr);
            fr.type = SFV__EX_TAG;
            sfv__ex_mac(&k, 'l', hello_c, hello_l, d, 8, fr.body);
            if (f->mode == R6L_BAD_TAG) fr.body[0] ^= 1;
            sfv__ex_encode(&fr, d + 8);
            (void)send(fd, d, f->mode == R6L_EXTRA_BYTES ? sizeof d : 8 + SFV__EX_FRAME, MSG_NOSIGNAL);
            (void)r6_read(fd, sink, sizeof sink, 2000);
        }
        close(fd);
    }
    return NULL;
}
static sfv_result r6_meet(int mode, int timeout_ms, double *took, int *tries, uint8_t all[16]) {
    sfv_net_node nodes[2] = {{"127.0.0.1", 29040, 0, NULL}, {"127.0.0.1", 29041, 1, NULL}};
    sfv_exchange_desc d;
    uint8_t mine[8];
    r6_listener f;
    pthread_t t;
    sfv_result r;
    double t0;
    int fds0;
    r6_desc(&d);
    memset(mine, 1, sizeof mine);
    memset(&f, 0, sizeof f);
    f.mode = mode;
    f.lfd = r6_listen(29041);
    fds0 = r6_fds();
    CHECK(pthread_create(&t, NULL, r6_listener_main, &f) == 0);
    t0 = r6_now();
    r = sfv_exchange_all_keyed(nodes, 2, 0, mine, sizeof mine, all, &d, timeout_ms);
    *took = r6_now() - t0;
    f.stop = 1;
    CHECK(pthread_join(t, NULL) == 0);
    if (r6_fds() != fds0) FAIL("listener mode %d: %d descriptors before, %d after", mode, fds0, r6_fds());
    close(f.lfd);
    *tries = f.tries;
    return r;
}

/* Promise (>>exchange ERRORS): a listener that takes the connection and hangs up before its
   proof is what a real rank does with a connection it does not expect yet (its table of
   unproven connections full, a rank it heard already, its proof clock run out), so the
   connecting rank tries again, to its deadline, and then says SFV_ERR_TIMEOUT naming the
   address that hung up. The doc said such a listener ("something else on that port") is refused
   with SFV_ERR_PERMISSION at once, and only one that "says nothing" times out: false for one that
   sends its hello (or a part of one) and hangs up, which is tried again as it must be. The
   behaviour is right; the sentence now says it. */
static void t_listener_that_hangs_up_is_tried_again(void) {
    static const int modes[3] = {R6L_HELLO_HANGUP, R6L_PART_HANGUP, R6L_ACCEPT_CLOSE};
    uint8_t all[16];
    double took;
    int tries, i;
    for (i = 0; i < 3; i++) {
        CHECK_RESULT(r6_meet(modes[i], 800, &took, &tries, all), SFV_ERR_TIMEOUT);
        CHECK(took >= 0.75 && took < 0.8 + 0.6);
        CHECK(tries > 2); /* tried again */
        CHECK_MSG("127.0.0.1:29041 took the connection and hung up before proving the job key");
    }
}

/* Promise (ERRORS): a proven listener that breaks the rules is named: one that hangs up mid-data
   (the class of its errno, naming the rank), one that stalls (SFV_ERR_TIMEOUT by the deadline),
   another message size or another rank (SFV_ERR_INVALID), bytes that fail their tag
   (SFV_ERR_PERMISSION), and `all` zeroed on each failure; more bytes than the message after its
   tag are not taken (the exchange ends with the right bytes). */
static void t_proven_listener_breaks_rules(void) {
    uint8_t all[16], zero[16], want[8];
    double took;
    int tries;
    memset(zero, 0, sizeof zero);
    CHECK_RESULT(r6_meet(R6L_HALF_DATA, 2000, &took, &tries, all), SFV_ERR_DRIVER);
    CHECK_MSG("rank 1 closed the connection mid-exchange");
    CHECK(took < 1.0 && memcmp(all, zero, sizeof all) == 0);
    CHECK_RESULT(r6_meet(R6L_PROVEN_STALL, 700, &took, &tries, all), SFV_ERR_TIMEOUT);
    CHECK_MSG("rank 1 did not complete the exchange in time");
    CHECK(took >= 0.65 && took < 0.7 + 0.6);
    CHECK_RESULT(r6_meet(R6L_SIZE_PLUS_ONE, 2000, &took, &tries, all), SFV_ERR_INVALID);
    CHECK_MSG("rank 1 has another world size or message size (2, 9; ours 2, 8)");
    CHECK_RESULT(r6_meet(R6L_OTHER_RANK, 2000, &took, &tries, all), SFV_ERR_INVALID);
    CHECK_MSG("says it is rank 0");
    CHECK_RESULT(r6_meet(R6L_BAD_TAG, 2000, &took, &tries, all), SFV_ERR_PERMISSION);
    CHECK_MSG("rank 1 sent bytes that do not match their tag");
    CHECK(memcmp(all, zero, sizeof all) == 0);
    CHECK_OK(r6_meet(R6L_EXTRA_BYTES, 2000, &took, &tries, all));
    memset(want, 0x42, sizeof want);
    CHECK(memcmp(all + 8, want, sizeof want) == 0 && all[0] == 1);
    CHECK_EQ(fk_live_total(), 0);
}

/* ---- sfv_node_connect: rank 1 of 3 breaks after the exchange ---------------------------------- */
typedef struct r6_node_rank {
    sfv_node *node;
    const sfv_net_node *nodes;
    sfv_result r;
    double took;
} r6_node_rank;
static void *r6_node_main(void *arg) {
    r6_node_rank *p = (r6_node_rank *)arg;
    sfv_exchange_desc d;
    double t0 = r6_now();
    r6_desc(&d);
    p->r = sfv_node_connect_keyed(p->node, p->nodes, &d, 2000);
    p->took = r6_now() - t0;
    return NULL;
}
/* Rank 1 by hand: the exchange with its connections kept, then mode 0 syncs, 1 hangs up on every
   link without its sync, 2 holds them silent past the others' deadline. */
typedef struct r6_fake_node {
    sfv_node *node;
    const sfv_net_node *nodes;
    int mode;
    sfv_result r;
} r6_fake_node;
static void *r6_fake_node_main(void *arg) {
    r6_fake_node *f = (r6_fake_node *)arg;
    const size_t each = SFV_NODE_ENDPOINT_SIZE(3);
    uint8_t *mine = (uint8_t *)malloc(each), *all = (uint8_t *)malloc(3 * each);
    sfv_exchange_desc d;
    sfv__ex_link links[3];
    sfv__ex_key key;
    int i;
    CHECK(mine && all);
    r6_desc(&d);
    for (i = 0; i < 3; i++) links[i].fd = -1;
    CHECK_OK(sfv__ex_key_pick(&d, &key));
    CHECK_OK(sfv_node_endpoint(f->node, mine, each));
    f->r = sfv__exchange_all(f->nodes, 3, 1, mine, each, all, &d, 3000, links, &key);
    if (f->r == SFV_OK) f->r = sfv_node_handshake(f->node, all, 3 * each);
    if (f->r == SFV_OK && f->mode == 0) f->r = sfv__ex_sync(links, 3, 1, &key, sfv__deadline(3000));
    if (f->mode == 2) usleep(2500000);
    if (f->mode != 0) sfv__ex_links_close(links, 3);
    free(mine);
    free(all);
    return NULL;
}

/* Promise (sfv_node_connect): "a failed sync after the handshake (a rank gone, ...) leaves the
   ranks unsynced, so it also breaks the node (every later connect ...: SFV_ERR_BROKEN)", one
   deadline for all of it, and the kept connections (world_size - 1 a rank) closed whatever
   happens. Rank 1 hangs up or goes silent after the exchange: ranks 0 and 2 must fail naming
   rank 1, by their deadline, broken, with every descriptor closed. */
static void t_node_connect_peer_gone_after_exchange(void) {
    int mode;
    fk_set_threaded(true);
    for (mode = 0; mode < 3; mode++) {
        const uint16_t base = (uint16_t)(29050 + 3 * mode);
        sfv_net_node nodes[3] = {{"127.0.0.1", base, 0, NULL}, {"127.0.0.1", (uint16_t)(base + 1), 1, NULL}, {"127.0.0.1", (uint16_t)(base + 2), 2, NULL}};
        tf_env e;
        sfv_node *n[3];
        sfv_node_desc nd;
        r6_node_rank a, c;
        r6_fake_node b;
        pthread_t ta, tb, tc;
        int i, fds0;
        tf_open(&e, 4096);
        for (i = 0; i < 3; i++) {
            memset(&nd, 0, sizeof nd);
            nd.rank = (size_t)i;
            nd.world_size = 3;
            CHECK_OK(sfv_create_node(e.pd, &nd, &n[i]));
        }
        fds0 = r6_fds();
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        memset(&c, 0, sizeof c);
        a.node = n[0];
        b.node = n[1];
        c.node = n[2];
        a.nodes = b.nodes = c.nodes = nodes;
        b.mode = mode;
        CHECK(pthread_create(&tc, NULL, r6_node_main, &c) == 0);
        CHECK(pthread_create(&tb, NULL, r6_fake_node_main, &b) == 0);
        CHECK(pthread_create(&ta, NULL, r6_node_main, &a) == 0);
        CHECK(pthread_join(ta, NULL) == 0);
        CHECK(pthread_join(tc, NULL) == 0);
        CHECK(pthread_join(tb, NULL) == 0);
        CHECK_OK(b.r);
        if (mode == 0) {
            CHECK_OK(a.r);
            CHECK_OK(c.r);
        } else {
            const sfv_result want = mode == 1 ? SFV_ERR_DRIVER : SFV_ERR_TIMEOUT;
            if (a.r != want || c.r != want) FAIL("mode %d: rank 0 %s, rank 2 %s", mode, sfv_result_str(a.r), sfv_result_str(c.r));
            CHECK(a.took < 2.0 + 0.6 && c.took < 2.0 + 0.6);
            CHECK_RESULT(sfv_node_connect(n[0], nodes, 100), SFV_ERR_BROKEN);
            CHECK_RESULT(sfv_node_connect(n[2], nodes, 100), SFV_ERR_BROKEN);
        }
        if (r6_fds() != fds0) FAIL("mode %d: %d descriptors before, %d after", mode, fds0, r6_fds());
        for (i = 0; i < 3; i++) CHECK_OK(sfv_destroy_node(n[i]));
        tf_close(&e);
    }
}

static const harness_test TESTS[] = {
    TEST(t_strangers_take_no_rank_place, 60),
    TEST(t_silent_stranger_alone_times_out, 20),
    TEST(t_listener_that_hangs_up_is_tried_again, 30),
    TEST(t_proven_listener_breaks_rules, 30),
    TEST(t_node_connect_peer_gone_after_exchange, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
