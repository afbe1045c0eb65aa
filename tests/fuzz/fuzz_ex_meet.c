/* fuzz_ex_meet.c: the connecting side of the exchange (sfv__ex_meet, rank 0 meeting rank 1), its
   listener played over a real loopback socket by a thread that sends the fuzzed stream: the
   listener's hello read a byte at a time, its proof, its message and the message's tag, split,
   cut short or followed by more. So every byte a listener can send reaches the parsing that
   fuzz_exchange_frame's decoder and fuzz_ex_conn_step (the listening side) do not.
   Input: byte0 flags (bit0: the proof after the stream's first 48 bytes is replaced by the right
   one over both hellos; bit1: the message's tag too, over the stream's next 8 bytes; bit2: the
   listener reads what comes until the other side closes (its message, or nothing while it
   waits for its deadline) before it closes; clear: it hangs up right after its stream),
   then the stream. Properties: a failure says itself in sfv_last_error; a success has the right
   proof and tag and the 8 bytes sent; nothing outlives the deadline (100 ms) by much. */
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "fz.h"
#include <pthread.h>
#include <sys/socket.h>

#define MSG 8

typedef struct fz_meet {
    int lfd;                 /* the listening socket */
    const uint8_t *stream;
    size_t len;
    int flags;
    const sfv__ex_key *key;
    uint8_t sent_msg[MSG];   /* the message the listener sent (flag bit1) */
    bool msg_sent;
} fz_meet;

/* Sends all of p, as far as the peer takes it (it may hang up: then stops). */
static bool fz_send(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return false;
        p += k, n -= (size_t)k;
    }
    return true;
}

static void *fz_listener(void *arg) {
    fz_meet *m = (fz_meet *)arg;
    uint8_t hello_c[SFV__EX_FRAME], buf[4096];
    size_t got = 0, at = 0;
    struct timeval tv = {0, 300000};
    int fd = accept(m->lfd, NULL, NULL);
    if (fd < 0) return NULL;
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (got < sizeof hello_c) { /* the connecting side's hello comes first */
        ssize_t k = recv(fd, hello_c + got, sizeof hello_c - got, 0);
        if (k <= 0) break;
        got += (size_t)k;
    }
    if (got == sizeof hello_c && m->len >= SFV__EX_FRAME) {
        size_t n = m->len < sizeof buf ? m->len : sizeof buf;
        memcpy(buf, m->stream, n);
        if ((m->flags & 1) && n >= 2 * SFV__EX_FRAME) { /* the right proof over both hellos */
            sfv__ex_frame p;
            memset(&p, 0, sizeof p);
            p.type = SFV__EX_PROOF;
            sfv__ex_mac(m->key, 'L', hello_c, buf, NULL, 0, p.body);
            sfv__ex_encode(&p, buf + SFV__EX_FRAME);
            if ((m->flags & 2) && n >= 3 * SFV__EX_FRAME + MSG) { /* and the message's right tag */
                sfv__ex_frame t;
                memset(&t, 0, sizeof t);
                t.type = SFV__EX_TAG;
                sfv__ex_mac(m->key, 'l', hello_c, buf, buf + 2 * SFV__EX_FRAME, MSG, t.body);
                sfv__ex_encode(&t, buf + 2 * SFV__EX_FRAME + MSG);
                memcpy(m->sent_msg, buf + 2 * SFV__EX_FRAME, MSG);
                m->msg_sent = true;
            }
        }
        /* in pieces, as the stream's own bytes say, so the reads split anywhere */
        while (at < n) {
            size_t piece = 1 + buf[at] % 61u;
            if (piece > n - at) piece = n - at;
            if (!fz_send(fd, buf + at, piece)) break;
            at += piece;
        }
    } else if (got == sizeof hello_c) {
        (void)fz_send(fd, m->stream, m->len); /* less than a frame */
    }
    if (m->flags & 4) { /* hold it open, reading: the other side sends its message, or waits to its deadline */
        uint8_t sink[256];
        while (recv(fd, sink, sizeof sink, 0) > 0) {}
    }
    close(fd);
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint8_t keybytes[] = "fuzz-key";
    struct sockaddr_in at;
    socklen_t alen = sizeof at;
    sfv_net_node nodes[2];
    sfv__ex x;
    sfv__ex_key key;
    fz_meet m;
    bool seen[2] = {true, false};
    uint8_t all[2 * MSG], mine[MSG];
    pthread_t t;
    sfv_result r;
    uint64_t t0;
    if (size < 1) return 0;
    memset(&m, 0, sizeof m);
    m.flags = data[0];
    m.stream = data + 1;
    m.len = size - 1;
    memset(&key, 0, sizeof key);
    key.bytes = keybytes;
    key.len = sizeof keybytes - 1;
    key.proof_ms = 1000;
    m.key = &key;
    m.lfd = socket(AF_INET, SOCK_STREAM, 0);
    FZ_CHECK(m.lfd >= 0);
    memset(&at, 0, sizeof at);
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    FZ_CHECK(bind(m.lfd, (struct sockaddr *)&at, sizeof at) == 0 && listen(m.lfd, 4) == 0);
    FZ_CHECK(getsockname(m.lfd, (struct sockaddr *)&at, &alen) == 0);
    memset(nodes, 0, sizeof nodes);
    nodes[0].host = "127.0.0.1";
    nodes[0].port = 1; /* (never used: rank 0 only connects here) */
    nodes[1].host = "127.0.0.1";
    nodes[1].port = ntohs(at.sin_port);
    nodes[1].rank = 1;
    memset(mine, 0x5a, sizeof mine);
    memset(all, 0, sizeof all);
    memset(&x, 0, sizeof x);
    x.nodes = nodes;
    x.n = 2;
    x.rank = 0;
    x.size = MSG;
    x.mine = mine;
    x.all = all;
    x.key = key;
    x.seen = seen;
    t0 = sfv__now_ns();
    x.deadline = t0 + 100000000ull;
    FZ_CHECK(pthread_create(&t, NULL, fz_listener, &m) == 0);
    r = sfv__ex_meet(&x, 1);
    shutdown(m.lfd, SHUT_RDWR);
    close(m.lfd);
    FZ_CHECK(pthread_join(t, NULL) == 0);
    FZ_CHECK(sfv__now_ns() - t0 < 2000000000ull); /* the deadline and a drain, not more */
    if (r != SFV_OK) {
        FZ_CHECK(sfv_last_error()->result == r && sfv_last_error()->message[0] != '\0');
    } else {
        FZ_CHECK(m.msg_sent && memcmp(all + MSG, m.sent_msg, MSG) == 0 && seen[1]);
    }
    if (getenv("FZ_VERBOSE")) fprintf(stderr, "r=%s: %s\n", sfv_result_str(r), r ? sfv_last_error()->message : "");
    return 0;
}
