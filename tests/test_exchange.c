/* test_exchange.c - the TCP exchange of bytes by rank against strangers, without an RDMA device
   (it runs on the host as well as in the test guest): SHA-256 and HMAC-SHA256 against their
   published vectors, the frame decoder on every byte, ranks that share a job key (passed or from
   SAFEVERBS_JOB_KEY), ranks with different keys, no key off loopback, and a stranger at a rank's
   door while the real ranks exchange: nonsense, a forged rank with a wrong key, a well-formed
   frame without the key, silence, a flood over the cap, a half-open connection. Each time the
   real ranks must finish, in time, with each other's bytes. And a relay that changes a bit of
   the bytes after the proofs: refused.

       make build/test_exchange && build/test_exchange [name]

   Name lookups of NAME.slow.test and NAME.gone.test are this file's own (a slow resolver, no
   such name). Ports 25100 .. 25299 on 127.0.0.1 (test_multi uses 24100 .. 24499). */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "../safeverbs.h"
#include "harness.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>

#define LOCALHOST "127.0.0.1"
#define MSG 32

/* ---- SHA-256 and HMAC-SHA256 ------------------------------------------------------------------ */
static void hex(const uint8_t *b, size_t n, char *out) {
    size_t i;
    for (i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static void check_sha(const void *data, size_t len, const char *want) {
    sfv__sha256 s;
    uint8_t d[32];
    char got[65];
    size_t i;
    sfv__sha256_init(&s);
    sfv__sha256_update(&s, data, len);
    sfv__sha256_final(&s, d);
    hex(d, 32, got);
    if (strcmp(got, want)) FAIL("sha256 of %zu bytes: %s, want %s", len, got, want);
    /* the same a byte at a time */
    sfv__sha256_init(&s);
    for (i = 0; i < len; i++) sfv__sha256_update(&s, (const uint8_t *)data + i, 1);
    sfv__sha256_final(&s, d);
    hex(d, 32, got);
    if (strcmp(got, want)) FAIL("sha256 of %zu bytes, byte by byte: %s, want %s", len, got, want);
}

/* FIPS 180-2 appendix B and the empty string. */
static void t_sha256_vectors(void) {
    static char million[1000000];
    memset(million, 'a', sizeof million);
    check_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    check_sha(million, sizeof million, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void check_hmac(const void *key, size_t key_len, const void *data, size_t len, const char *want) {
    sfv__hmac m;
    uint8_t d[32];
    char got[65];
    sfv__hmac_init(&m, key, key_len);
    sfv__hmac_update(&m, data, len);
    sfv__hmac_final(&m, d);
    hex(d, 32, got);
    if (strcmp(got, want)) FAIL("hmac-sha256 (key %zu bytes, data %zu): %s, want %s", key_len, len, got, want);
}

/* RFC 4231 test cases 1, 2, 3, 4, 6 and 7 (5 is a truncated MAC). */
static void t_hmac_rfc4231(void) {
    uint8_t k[131], d[50];
    size_t i;
    memset(k, 0x0b, 20);
    check_hmac(k, 20, "Hi There", 8, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    check_hmac("Jefe", 4, "what do ya want for nothing?", 28, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    memset(k, 0xaa, 20);
    memset(d, 0xdd, 50);
    check_hmac(k, 20, d, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    for (i = 0; i < 25; i++) k[i] = (uint8_t)(i + 1);
    memset(d, 0xcd, 50);
    check_hmac(k, 25, d, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
    memset(k, 0xaa, 131);
    check_hmac(k, 131, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
               "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    check_hmac(k, 131,
               "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed "
               "before being used by the HMAC algorithm.",
               152, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
    CHECK(sfv__same_bytes(k, k + 1, 20));
    k[7] = 1;
    CHECK(!sfv__same_bytes(k, k + 1, 20));
}

/* ---- frames ------------------------------------------------------------------------------------ */
static void t_frame_decode(void) {
    sfv__ex_frame f, g;
    uint8_t b[48], c[48];
    int i, bit;
    memset(&f, 0, sizeof f);
    f.type = SFV__EX_HELLO;
    f.rank = 2;
    f.world = 3;
    f.size = 64u << 20;
    for (i = 0; i < 32; i++) f.body[i] = (uint8_t)(i * 7);
    sfv__ex_encode(&f, b);
    CHECK(sfv__ex_decode(b, 48, &g) == NULL);
    CHECK(g.type == SFV__EX_HELLO && g.rank == 2 && g.world == 3 && g.size == 64u << 20 && memcmp(g.body, f.body, 32) == 0);
    CHECK(sfv__ex_decode(b, 47, &g) != NULL);
    CHECK(sfv__ex_decode(b, 49, &g) != NULL);
    CHECK(sfv__ex_decode(NULL, 48, &g) != NULL);
    CHECK(g.type == 0); /* zeroed when refused */
    /* the magic, the version and the type: any other value is refused */
    for (i = 0; i < 4; i++)
        for (bit = 0; bit < 8; bit++) {
            memcpy(c, b, 48);
            c[i] ^= (uint8_t)(1u << bit);
            if (i == 3 && (c[3] == SFV__EX_PROOF || c[3] == SFV__EX_TAG)) continue; /* other types, checked below */
            if (sfv__ex_decode(c, 48, &g) == NULL) FAIL("byte %d bit %d flipped: accepted", i, bit);
        }
    memcpy(c, b, 48);
    sfv__put_be(c + 8, 0, 4); /* world 0 */
    CHECK(sfv__ex_decode(c, 48, &g) != NULL);
    sfv__put_be(c + 8, 4097, 4);
    CHECK(sfv__ex_decode(c, 48, &g) != NULL);
    sfv__put_be(c + 8, 3, 4);
    sfv__put_be(c + 4, 3, 4); /* rank == world */
    CHECK(sfv__ex_decode(c, 48, &g) != NULL);
    sfv__put_be(c + 4, 0, 4);
    sfv__put_be(c + 12, (64u << 20) + 1, 4);
    CHECK(sfv__ex_decode(c, 48, &g) != NULL);
    sfv__put_be(c + 12, SFV__EX_KEEPS | ((64u << 20) + 1), 4); /* the flag beside a size too large */
    CHECK(sfv__ex_decode(c, 48, &g) != NULL);
    sfv__put_be(c + 12, SFV__EX_KEEPS | 32, 4); /* a hello that keeps its connection for a sync */
    CHECK(sfv__ex_decode(c, 48, &g) == NULL && g.keeps && g.size == 32);
    f = g;
    sfv__ex_encode(&f, b);
    CHECK(memcmp(b, c, 48) == 0);
    /* a proof and a tag: every reserved byte must be 0 */
    for (bit = SFV__EX_PROOF; bit <= SFV__EX_TAG; bit++) {
        memset(&f, 0, sizeof f);
        f.type = (uint8_t)bit;
        memset(f.body, 0xee, 32);
        sfv__ex_encode(&f, b);
        CHECK(sfv__ex_decode(b, 48, &g) == NULL && g.type == bit);
        for (i = 4; i < 16; i++) {
            memcpy(c, b, 48);
            c[i] = 0x80;
            if (sfv__ex_decode(c, 48, &g) == NULL) FAIL("type %d: reserved byte %d not 0: accepted", bit, i);
        }
    }
}

/* ---- ranks ------------------------------------------------------------------------------------- */
typedef struct job {
    size_t n;
    uint16_t port0;
    const char *key;          /* NULL: none passed */
    uint32_t proof_ms;
    int rounds;
    int timeout_ms;
} job;

static void job_net(const job *j, sfv_net_node *nodes) {
    size_t i;
    for (i = 0; i < j->n; i++) {
        nodes[i].host = LOCALHOST;
        nodes[i].port = (uint16_t)(j->port0 + i);
        nodes[i].rank = (uint32_t)i;
        nodes[i].device = NULL;
    }
}

static void job_desc(const job *j, sfv_exchange_desc *d) {
    memset(d, 0, sizeof *d);
    d->key = j->key;
    d->key_len = j->key ? strlen(j->key) : 0;
    d->proof_timeout_ms = j->proof_ms;
}

/* One real rank: `rounds` exchanges of MSG bytes, each checked. */
static void rank_main(const job *j, size_t rank) {
    sfv_net_node nodes[8];
    sfv_exchange_desc d;
    char mine[MSG], all[8 * MSG];
    size_t r;
    int round;
    job_net(j, nodes);
    job_desc(j, &d);
    for (round = 0; round < j->rounds; round++) {
        snprintf(mine, sizeof mine, "rank %u, round %d", (unsigned)rank, round);
        memset(all, 0, sizeof all);
        CHECK_OK(sfv_exchange_all_keyed(nodes, j->n, rank, mine, MSG, all, &d, j->timeout_ms));
        for (r = 0; r < j->n; r++) {
            char want[MSG];
            snprintf(want, sizeof want, "rank %u, round %d", (unsigned)r, round);
            if (strcmp(all + r * MSG, want)) FAIL("rank %zu, round %d: rank %zu's place holds \"%.32s\"", rank, round, r, all + r * MSG);
        }
    }
}

static pid_t spawn_rank(const job *j, size_t rank) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        rank_main(j, rank);
        exit(0);
    }
    return pid;
}

static void wait_ok(pid_t pid, const char *who) {
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) FAIL("%s failed (status 0x%x)", who, st);
}

/* Every rank of j in its own process (rank 0 here); all must finish. */
static void run_job(const job *j) {
    pid_t pids[8];
    size_t r;
    for (r = 1; r < j->n; r++) pids[r] = spawn_rank(j, r);
    rank_main(j, 0);
    for (r = 1; r < j->n; r++) wait_ok(pids[r], "a rank");
}

static void t_keyed_ranks(void) {
    job j = {4, 25100, "the job key of t_keyed_ranks", 0, 10, 20000};
    unsetenv("SAFEVERBS_JOB_KEY");
    run_job(&j);
    /* a long key (hashed first), and the key from the environment */
    j.key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    j.rounds = 3;
    run_job(&j);
    setenv("SAFEVERBS_JOB_KEY", "from the launcher", 1);
    j.key = NULL;
    run_job(&j);
    unsetenv("SAFEVERBS_JOB_KEY");
    j.rounds = 2; /* no key, on loopback: runs */
    run_job(&j);
}

/* Two real ranks with different keys: the connecting side is refused at once
   (SFV_ERR_PERMISSION); the listening side sees a stranger and times out naming rank 0. */
static void t_wrong_key(void) {
    sfv_net_node nodes[2];
    sfv_exchange_desc d;
    job j = {2, 25110, "key one", 0, 1, 1500};
    char mine[MSG] = "x", all[2 * MSG];
    double t0;
    pid_t pid;
    unsetenv("SAFEVERBS_JOB_KEY");
    job_net(&j, nodes);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("SAFEVERBS_JOB_KEY", "key two", 1); /* this one from the environment */
        t0 = test_seconds();
        CHECK_RESULT(sfv_exchange_all(nodes, 2, 1, mine, MSG, all, 1500), SFV_ERR_TIMEOUT);
        if (!strstr(sfv_last_error()->message, "rank 0 did not come in time") ||
            !strstr(sfv_last_error()->message, "did not prove the job key: it "))
            FAIL("message: %s", sfv_last_error()->message);
        CHECK(test_seconds() - t0 < 3.0);
        exit(0);
    }
    job_desc(&j, &d);
    t0 = test_seconds();
    CHECK_RESULT(sfv_exchange_all_keyed(nodes, 2, 0, mine, MSG, all, &d, 1500), SFV_ERR_PERMISSION);
    if (!strstr(sfv_last_error()->message, "rank 1's address, did not prove the job key: it sent a wrong proof"))
        FAIL("message: %s", sfv_last_error()->message);
    CHECK(test_seconds() - t0 < 1.0);
    wait_ok(pid, "rank 1");
    /* a key pointer that is NULL with a length */
    d.key = NULL;
    d.key_len = 4;
    CHECK_RESULT(sfv_exchange_all_keyed(nodes, 2, 0, mine, MSG, all, &d, 100), SFV_ERR_INVALID);
}

/* On failure `all` is zeroed (n * size bytes); a refused shape (n > 4096, size > 64 MiB, n * size
   past SIZE_MAX) leaves it untouched, as the header says. No TCP is reached in any case here. */
static void t_failure_zeroes_all(void) {
    enum { N = 4097 };
    static sfv_net_node nodes[N];
    static char host[] = LOCALHOST;
    char mine[MSG] = "mine", all[2 * MSG], want[2 * MSG];
    size_t i;
    for (i = 0; i < N; i++) {
        nodes[i].host = host;
        nodes[i].port = (uint16_t)(25200 + i % 50);
        nodes[i].rank = (uint32_t)i;
    }
    unsetenv("SAFEVERBS_JOB_KEY");
    /* plausible shapes that fail: zeroed */
    memset(all, 0xAA, sizeof all);
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 2, mine, MSG, all, 100), SFV_ERR_INVALID); /* rank >= n */
    memset(want, 0, sizeof want);
    CHECK(memcmp(all, want, sizeof all) == 0);
    memset(all, 0xAA, sizeof all);
    nodes[1].rank = 5; /* a net config with a gap */
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 0, mine, MSG, all, 100), SFV_ERR_INVALID);
    CHECK(memcmp(all, want, sizeof all) == 0);
    nodes[1].rank = 1;
    memset(all, 0xAA, sizeof all);
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 0, NULL, MSG, all, 100), SFV_ERR_INVALID); /* mine NULL */
    CHECK(memcmp(all, want, sizeof all) == 0);
    /* refused shapes: untouched (a buffer of 2 * MSG bytes: a memset of n * size would overflow it,
       which ASan reports in the sanitizer build) */
    memset(all, 0xAA, sizeof all);
    memset(want, 0xAA, sizeof want);
    CHECK_RESULT(sfv_exchange_all(nodes, N, 0, mine, 1, all, 100), SFV_ERR_INVALID); /* n > 4096 */
    CHECK(memcmp(all, want, sizeof all) == 0);
    CHECK_RESULT(sfv_exchange_all(nodes, 1, 0, mine, ((size_t)64 << 20) + 1, all, 100), SFV_ERR_INVALID); /* size > 64 MiB */
    CHECK(memcmp(all, want, sizeof all) == 0);
    CHECK_RESULT(sfv_exchange_all(nodes, 4096, 0, mine, SIZE_MAX / 2, all, 100), SFV_ERR_INVALID); /* n * size past SIZE_MAX */
    CHECK(memcmp(all, want, sizeof all) == 0);
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 0, mine, MSG, NULL, 100), SFV_ERR_INVALID); /* all NULL */
}

/* Without a key, only loopback addresses; with a key, or insecure_without_key, any. */
static void t_no_key_off_loopback(void) {
    sfv_net_node nodes[2];
    sfv_exchange_desc d;
    job j = {2, 25120, NULL, 0, 1, 3000};
    char mine[MSG] = "m", all[2 * MSG];
    pid_t pid;
    unsetenv("SAFEVERBS_JOB_KEY");
    job_net(&j, nodes);
    nodes[1].host = "198.51.100.1"; /* TEST-NET-2: never this machine's (the test guest has 192.0.2.1-2) */
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 0, mine, MSG, all, 1000), SFV_ERR_PERMISSION);
    CHECK(strstr(sfv_last_error()->message, "not a loopback address") != NULL);
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 1, mine, MSG, all, 1000), SFV_ERR_PERMISSION);
    setenv("SAFEVERBS_JOB_KEY", "k", 1); /* with a key it tries: that address cannot be bound here */
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 1, mine, MSG, all, 1000), SFV_ERR_DRIVER);
    CHECK_EQ(sfv_last_error()->errnum, EADDRNOTAVAIL);
    unsetenv("SAFEVERBS_JOB_KEY");
    /* 0.0.0.0 listens on every address: refused without a key, fine with the explicit flag */
    nodes[1].host = "0.0.0.0";
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 1, mine, MSG, all, 1000), SFV_ERR_PERMISSION);
    memset(&d, 0, sizeof d);
    d.insecure_without_key = true;
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char m1[MSG] = "one", a1[2 * MSG];
        CHECK_OK(sfv_exchange_all_keyed(nodes, 2, 1, m1, MSG, a1, &d, 5000));
        CHECK(strcmp(a1, "m") == 0 && strcmp(a1 + MSG, "one") == 0);
        exit(0);
    }
    CHECK_OK(sfv_exchange_all_keyed(nodes, 2, 0, mine, MSG, all, &d, 5000));
    CHECK(strcmp(all, "m") == 0 && strcmp(all + MSG, "one") == 0);
    wait_ok(pid, "rank 1");
}

/* ---- strangers --------------------------------------------------------------------------------- */
/* A connection to 127.0.0.1:port, tried for up to 4 s. */
static int dial(uint16_t port) {
    struct sockaddr_in sa;
    int tries;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (tries = 0; tries < 400; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return -1;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
        close(fd);
        usleep(10000);
    }
    return -1;
}

/* Reads until the other side closes; true if it did within ms (it looks at least once). */
static bool closed_within(int fd, int ms) {
    const double end = test_seconds() + ms / 1000.0;
    char sink[256];
    for (;;) {
        struct pollfd p;
        const int left = (int)((end - test_seconds()) * 1000);
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, left > 0 ? left : 0) > 0) {
            ssize_t k = read(fd, sink, sizeof sink);
            if (k == 0 || (k < 0 && errno != EINTR)) return true;
        }
        if (left <= 0) return false;
    }
}

static void ready(int signal_fd) {
    if (write(signal_fd, "!", 1) != 1) _exit(3);
}

/* Each stranger gets the port of the rank it bothers and a pipe to say it is in place; it
   exits 0 when it saw what it should. */
static void stranger_nonsense(uint16_t port, int sig) {
    int fd = dial(port);
    if (fd < 0) _exit(2);
    if (write(fd, "GET / HTTP/1.0\r\n\r\nand then a good deal more of nonsense", 54) != 54) _exit(2);
    ready(sig);
    _exit(closed_within(fd, 5000) ? 0 : 1);
}

/* A forged rank 0 that runs the exchange itself, with the wrong key: the listener's proof fails
   for it, and it is dropped there. */
static void stranger_wrong_key(uint16_t port, int sig) {
    sfv_net_node nodes[3];
    sfv_exchange_desc d;
    char mine[MSG] = "forged", all[3 * MSG];
    size_t i;
    for (i = 0; i < 3; i++) {
        nodes[i].host = LOCALHOST;
        nodes[i].rank = (uint32_t)i;
        nodes[i].device = NULL;
    }
    nodes[0].port = (uint16_t)(port + 7);
    nodes[1].port = port; /* its first stop: the real rank that listens at `port` */
    nodes[2].port = (uint16_t)(port + 8);
    memset(&d, 0, sizeof d);
    d.key = "not the job key";
    d.key_len = 15;
    ready(sig);
    CHECK_RESULT(sfv_exchange_all_keyed(nodes, 3, 0, mine, MSG, all, &d, 5000), SFV_ERR_PERMISSION);
    _exit(strstr(sfv_last_error()->message, "did not prove the job key") ? 0 : 1);
}

/* Well-formed frames without the key: a hello that claims a due rank, and a made-up proof. */
static void forged_frames(uint16_t port, uint32_t claim) {
    sfv__ex_frame f;
    uint8_t out[48], in[96];
    size_t got = 0;
    int fd = dial(port);
    if (fd < 0) _exit(2);
    memset(&f, 0, sizeof f);
    f.type = SFV__EX_HELLO;
    f.rank = claim;
    f.world = 3;
    f.size = MSG;
    memset(f.body, 0x42, 32);
    sfv__ex_encode(&f, out);
    if (write(fd, out, 48) != 48) _exit(2);
    while (got < 96) { /* the listener's hello and proof */
        ssize_t k = read(fd, in + got, 96 - got);
        if (k <= 0) _exit(4);
        got += (size_t)k;
    }
    memset(&f, 0, sizeof f);
    f.type = SFV__EX_PROOF;
    memcpy(f.body, in + 48 + 16, 32); /* its own proof back: the direction differs, so it fails */
    sfv__ex_encode(&f, out);
    if (write(fd, out, 48) != 48) _exit(2);
    if (!closed_within(fd, 5000)) _exit(1);
    close(fd);
}
static void stranger_forged(uint16_t port, int sig) {
    forged_frames(port, 0);
    ready(sig);
    forged_frames(port, 1);
    _exit(0);
}

/* Connects and says nothing; the listener must close it by the proof deadline at the latest. */
static void stranger_silent(uint16_t port, int sig) {
    int fd = dial(port);
    if (fd < 0) _exit(2);
    ready(sig);
    _exit(closed_within(fd, 8000) ? 0 : 1);
}

/* Half a hello, then its side of the connection closed (shutdown), still reading. */
static void stranger_half_open(uint16_t port, int sig) {
    sfv__ex_frame f;
    uint8_t out[48];
    int fd = dial(port);
    if (fd < 0) _exit(2);
    memset(&f, 0, sizeof f);
    f.type = SFV__EX_HELLO;
    f.world = 3;
    f.size = MSG;
    sfv__ex_encode(&f, out);
    if (write(fd, out, 20) != 20) _exit(2);
    shutdown(fd, SHUT_WR);
    ready(sig);
    _exit(closed_within(fd, 5000) ? 0 : 1);
}

/* 48 connections that say nothing: past the cap (16), the extra are closed at once. */
static void stranger_flood(uint16_t port, int sig) {
    int fds[48], i, closed = 0;
    for (i = 0; i < 48; i++)
        if ((fds[i] = dial(port)) < 0) _exit(2);
    usleep(200000);
    for (i = 0; i < 48; i++) closed += closed_within(fds[i], 1);
    if (closed < 48 - 16) _exit(5);
    ready(sig);
    for (i = 0; i < 48; i++) closed_within(fds[i], 5000);
    _exit(0);
}

/* Rank 2 of 3 listens; the stranger comes first; then ranks 0 and 1. All three must finish with
   the right bytes within max_s of the real ranks' start, and the stranger must exit 0. */
static void with_stranger(void (*stranger)(uint16_t port, int sig), uint16_t port0, uint32_t proof_ms, double max_s) {
    job j = {3, port0, "the job key of the strangers' tests", proof_ms, 2, 20000};
    int sig[2];
    struct pollfd p;
    char c;
    pid_t top, s, one;
    double t0;
    unsetenv("SAFEVERBS_JOB_KEY");
    CHECK(pipe(sig) == 0);
    top = spawn_rank(&j, 2);
    s = fork();
    CHECK(s >= 0);
    if (s == 0) {
        close(sig[0]);
        stranger((uint16_t)(port0 + 2), sig[1]);
        _exit(0);
    }
    close(sig[1]);
    p.fd = sig[0];
    p.events = POLLIN;
    p.revents = 0;
    CHECK(poll(&p, 1, 8000) == 1 && read(sig[0], &c, 1) == 1);
    usleep(50000); /* the stranger's bytes are in */
    t0 = test_seconds();
    one = spawn_rank(&j, 1);
    rank_main(&j, 0);
    wait_ok(one, "rank 1");
    wait_ok(top, "rank 2");
    if (test_seconds() - t0 > max_s) FAIL("the real ranks took %.2f s (at most %.2f)", test_seconds() - t0, max_s);
    wait_ok(s, "the stranger");
    close(sig[0]);
}

static void t_stranger_nonsense(void) { with_stranger(stranger_nonsense, 25130, 0, 3.0); }
static void t_stranger_wrong_key(void) { with_stranger(stranger_wrong_key, 25140, 0, 3.0); }
static void t_stranger_forged_frame(void) { with_stranger(stranger_forged, 25150, 0, 3.0); }
/* The proof deadline at 5 s: the real ranks must not wait for the silent stranger. */
static void t_stranger_silent(void) { with_stranger(stranger_silent, 25160, 5000, 2.5); }
static void t_stranger_half_open(void) { with_stranger(stranger_half_open, 25170, 5000, 2.5); }
/* The 16 kept are held to the proof deadline (1 s); the real ranks try again meanwhile. */
static void t_stranger_flood(void) { with_stranger(stranger_flood, 25180, 0, 5.0); }

/* A stranger alone: the listener drops it at the proof deadline and, when rank 0 never comes,
   its timeout names rank 0 and the stranger. */
static void t_stranger_alone(void) {
    sfv_net_node nodes[2];
    sfv_exchange_desc d;
    job j = {2, 25190, "k", 300, 1, 1500};
    char mine[MSG] = "x", all[2 * MSG];
    pid_t pid;
    double t0;
    unsetenv("SAFEVERBS_JOB_KEY");
    job_net(&j, nodes);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int fd = dial(25191);
        if (fd < 0) _exit(2);
        t0 = test_seconds();
        if (!closed_within(fd, 1200)) _exit(1); /* closed at about 300 ms */
        _exit(test_seconds() - t0 < 1.0 ? 0 : 1);
    }
    job_desc(&j, &d);
    t0 = test_seconds();
    CHECK_RESULT(sfv_exchange_all_keyed(nodes, 2, 1, mine, MSG, all, &d, 1500), SFV_ERR_TIMEOUT);
    if (!strstr(sfv_last_error()->message, "rank 0 did not come in time; dropped a connection from 127.0.0.1:") ||
        !strstr(sfv_last_error()->message, "that did not prove the job key: it did not prove it within 300 ms"))
        FAIL("message: %s", sfv_last_error()->message);
    CHECK(test_seconds() - t0 < 2.5);
    wait_ok(pid, "the stranger");
}

/* A relay between rank 0 and rank 1 that flips one bit of rank 1's bytes after the proofs: the
   proofs hold, the tag does not, and rank 0 refuses the bytes (SFV_ERR_PERMISSION). */
static void relay_flipping(uint16_t listen_port, uint16_t to_port, size_t flip_at) {
    struct sockaddr_in sa;
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1, a, b;
    size_t from_b = 0;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(listen_port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) || bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 1)) _exit(2);
    if ((a = accept(lfd, NULL, NULL)) < 0 || (b = dial(to_port)) < 0) _exit(2);
    for (;;) {
        struct pollfd p[2];
        char buf[512];
        ssize_t k;
        int i;
        p[0].fd = a;
        p[1].fd = b;
        p[0].events = p[1].events = POLLIN;
        p[0].revents = p[1].revents = 0;
        if (poll(p, 2, 5000) <= 0) _exit(3);
        for (i = 0; i < 2; i++) {
            if (!p[i].revents) continue;
            k = read(p[i].fd, buf, sizeof buf);
            if (k <= 0) _exit(0);
            if (i == 1 && flip_at >= from_b && flip_at < from_b + (size_t)k) buf[flip_at - from_b] ^= 1;
            if (i == 1) from_b += (size_t)k;
            if (write(p[1 - i].fd, buf, (size_t)k) != k) _exit(0);
        }
    }
}

static void t_bytes_changed_on_the_way(void) {
    sfv_net_node nodes[2];
    sfv_exchange_desc d;
    job j = {2, 25200, "k", 0, 1, 3000};
    char mine[MSG] = "rank 0", all[2 * MSG];
    pid_t relay, other;
    unsetenv("SAFEVERBS_JOB_KEY");
    job_net(&j, nodes);
    job_desc(&j, &d);
    other = fork();
    CHECK(other >= 0);
    if (other == 0) {
        char m1[MSG] = "rank 1", a1[2 * MSG];
        CHECK_RESULT(sfv_exchange_all_keyed(nodes, 2, 1, m1, MSG, a1, &d, 3000), SFV_ERR_DRIVER);
        CHECK(strstr(sfv_last_error()->message, "rank 0 closed the connection") != NULL);
        exit(0);
    }
    relay = fork();
    CHECK(relay >= 0);
    if (relay == 0) relay_flipping(25209, 25201, 96 + 5); /* after rank 1's hello and proof */
    nodes[1].port = 25209; /* rank 0 reaches rank 1 through the relay */
    CHECK_RESULT(sfv_exchange_all_keyed(nodes, 2, 0, mine, MSG, all, &d, 3000), SFV_ERR_PERMISSION);
    if (!strstr(sfv_last_error()->message, "rank 1 sent bytes that do not match their tag")) FAIL("message: %s", sfv_last_error()->message);
    wait_ok(other, "rank 1");
    wait_ok(relay, "the relay");
}

/* ---- sfv_node_connect's sync over the exchange's kept connections ------------------------------ */
/* Rank 1 (a child) exchanges with links kept, then does `mode` with them: 0 syncs; 1 closes
   them; 2 sends its sync frame with a bit changed; 3 sends the frame of the other direction (what
   rank 0 itself sends: a reflection); 4 sends nothing and holds them open. Rank 0 syncs and must
   get OK, SFV_ERR_DRIVER (closed), SFV_ERR_PERMISSION twice, SFV_ERR_TIMEOUT by its deadline.
   Mode 5: rank 1 runs a plain exchange (a node connected by hand), which both sides refuse. */
static void sync_rank1(const sfv_net_node *nodes, const sfv_exchange_desc *d, int mode) {
    char m1[MSG] = "rank 1", a1[3 * MSG];
    sfv__ex_link links[3];
    sfv__ex_key key;
    size_t i;
    for (i = 0; i < 3; i++) links[i].fd = -1;
    CHECK_OK(sfv__ex_key_pick(d, &key));
    if (mode == 5) {
        CHECK_RESULT(sfv_exchange_all_keyed(nodes, 2, 1, m1, MSG, a1, d, 5000), SFV_ERR_INVALID);
        CHECK(strstr(sfv_last_error()->message, "rank 0 connects its node with sfv_node_connect") != NULL);
        exit(0);
    }
    CHECK_OK(sfv__exchange_all(nodes, 2, 1, m1, MSG, a1, d, 5000, links, &key));
    CHECK(links[0].fd >= 0 && links[1].fd < 0 && links[0].listening); /* rank 0 came to us */
    CHECK(strcmp(a1, "rank 0") == 0);
    if (mode == 0) {
        CHECK_OK(sfv__ex_sync(links, 2, 1, &key, sfv__deadline(5000)));
        CHECK(fcntl(links[0].fd, F_GETFD) < 0); /* closed */
        exit(0);
    }
    if (mode == 1) {
        sfv__ex_links_close(links, 2);
        exit(0);
    }
    if (mode == 2 || mode == 3) {
        uint8_t out[SFV__EX_FRAME];
        sfv__ex_frame f;
        memset(&f, 0, sizeof f);
        f.type = SFV__EX_TAG;
        sfv__ex_mac(&key, mode == 2 ? 's' : 'S', links[0].hello_c, links[0].hello_l, NULL, 0, f.body);
        if (mode == 2) f.body[7] ^= 0x10;
        sfv__ex_encode(&f, out);
        CHECK(write(links[0].fd, out, sizeof out) == (ssize_t)sizeof out);
    }
    sleep(3); /* (mode 4: silent past rank 0's deadline) */
    sfv__ex_links_close(links, 2);
    exit(0);
}
static void t_node_sync_links(void) {
    static const sfv_result want[5] = {SFV_OK, SFV_ERR_DRIVER, SFV_ERR_PERMISSION, SFV_ERR_PERMISSION, SFV_ERR_TIMEOUT};
    static const char *const says[5] = {"", "the sync: rank 1 closed the connection", "the sync: rank 1 sent a sync that does not match",
                                        "the sync: rank 1 sent a sync that does not match", "the sync: rank 1 did not complete the exchange in time"};
    sfv_net_node nodes[2];
    sfv_exchange_desc d;
    int mode;
    unsetenv("SAFEVERBS_JOB_KEY");
    for (mode = 0; mode < 6; mode++) {
        job j = {2, (uint16_t)(25230 + 2 * mode), "the job key of t_node_sync_links", 0, 1, 5000};
        char mine[MSG] = "rank 0", all[2 * MSG];
        sfv__ex_link links[2];
        sfv__ex_key key;
        double t0;
        pid_t other;
        job_net(&j, nodes);
        job_desc(&j, &d);
        CHECK_OK(sfv__ex_key_pick(&d, &key));
        other = fork();
        CHECK(other >= 0);
        if (other == 0) sync_rank1(nodes, &d, mode);
        links[0].fd = links[1].fd = -1;
        if (mode == 5) { /* rank 1 connects by hand: refused here too, at once */
            CHECK_RESULT(sfv__exchange_all(nodes, 2, 0, mine, MSG, all, &d, 5000, links, &key), SFV_ERR_INVALID);
            CHECK(strstr(sfv_last_error()->message, "rank 1 runs a plain exchange") != NULL);
            CHECK(links[1].fd < 0); /* nothing kept of a refused swap */
            wait_ok(other, "rank 1");
            continue;
        }
        CHECK_OK(sfv__exchange_all(nodes, 2, 0, mine, MSG, all, &d, 5000, links, &key));
        CHECK(links[0].fd < 0 && links[1].fd >= 0 && !links[1].listening);
        CHECK(strcmp(all + MSG, "rank 1") == 0);
        t0 = test_seconds();
        CHECK_RESULT(sfv__ex_sync(links, 2, 0, &key, sfv__deadline(1000)), want[mode]);
        if (test_seconds() - t0 > 2.5) FAIL("mode %d: the sync returned after %.2f s, its deadline was 1 s", mode, test_seconds() - t0);
        if (mode && !strstr(sfv_last_error()->message, says[mode])) FAIL("mode %d: message: %s", mode, sfv_last_error()->message);
        CHECK(fcntl(links[1].fd, F_GETFD) < 0); /* closed, whatever the result */
        wait_ok(other, "rank 1");
    }
}

/* ---- name lookups ------------------------------------------------------------------------------ */
/* The resolver, interposed for names under .test: NAME.slow.test answers 127.0.0.1 after 3 s (a
   resolver that does not answer in time), NAME.gone.test does not exist; other names go to the
   real one. Numeric lookups (AI_NUMERICHOST) of these names fail as the real resolver's would. */
int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    static gai_fn real;
    const size_t n = node ? strlen(node) : 0;
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
    if (n > 5 && !strcmp(node + n - 5, ".test")) {
        if ((hints && (hints->ai_flags & AI_NUMERICHOST)) || strstr(node, ".gone.test")) return EAI_NONAME;
        if (strstr(node, ".slow.test")) sleep(3);
        node = LOCALHOST;
    }
    return real(node, service, hints, res);
}

/* A name is looked up by the exchange's deadline: "localhost" (a name, not a number) works; a
   resolver that answers after 3 s gives SFV_ERR_TIMEOUT at a 500 ms deadline, in time; a name
   nobody knows gives SFV_ERR_NOT_FOUND. The abandoned lookup frees what it found once it ends
   (LeakSanitizer, in the sanitizer build, checks at the exit after it). */
static void t_name_lookup_by_deadline(void) {
    sfv_net_node nodes[2];
    char mine[MSG] = "rank 0", all[2 * MSG];
    double t0;
    pid_t other;
    size_t i;
    unsetenv("SAFEVERBS_JOB_KEY");
    for (i = 0; i < 2; i++) {
        nodes[i].host = "localhost";
        nodes[i].port = (uint16_t)(25220 + i);
        nodes[i].rank = (uint32_t)i;
        nodes[i].device = NULL;
    }
    other = fork();
    CHECK(other >= 0);
    if (other == 0) {
        char m1[MSG] = "rank 1", a1[2 * MSG];
        CHECK_OK(sfv_exchange_all(nodes, 2, 1, m1, MSG, a1, 10000));
        CHECK(strcmp(a1, "rank 0") == 0);
        exit(0);
    }
    CHECK_OK(sfv_exchange_all(nodes, 2, 0, mine, MSG, all, 10000));
    CHECK(strcmp(all + MSG, "rank 1") == 0);
    wait_ok(other, "rank 1");

    nodes[1].host = "rank1.slow.test";
    t0 = test_seconds();
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 0, mine, MSG, all, 500), SFV_ERR_TIMEOUT);
    if (test_seconds() - t0 > 2.5) FAIL("the exchange returned after %.2f s, its deadline was 0.5 s", test_seconds() - t0);
    if (!strstr(sfv_last_error()->message, "looking up rank1.slow.test took past the deadline"))
        FAIL("message: %s", sfv_last_error()->message);

    nodes[1].host = "rank1.gone.test";
    CHECK_RESULT(sfv_exchange_all(nodes, 2, 0, mine, MSG, all, 2000), SFV_ERR_NOT_FOUND);
    CHECK(strstr(sfv_last_error()->message, "rank1.gone.test") != NULL);
    sleep(3); /* the slow lookup ends and frees its answer before this process exits */
}

static const harness_test TESTS[] = {
    TEST(t_sha256_vectors, 30),
    TEST(t_hmac_rfc4231, 10),
    TEST(t_frame_decode, 10),
    TEST(t_keyed_ranks, 60),
    TEST(t_wrong_key, 20),
    TEST(t_failure_zeroes_all, 10),
    TEST(t_no_key_off_loopback, 20),
    TEST(t_stranger_nonsense, 30),
    TEST(t_stranger_wrong_key, 30),
    TEST(t_stranger_forged_frame, 30),
    TEST(t_stranger_silent, 30),
    TEST(t_stranger_half_open, 30),
    TEST(t_stranger_flood, 30),
    TEST(t_stranger_alone, 20),
    TEST(t_bytes_changed_on_the_way, 20),
    TEST(t_node_sync_links, 40),
    TEST(t_name_lookup_by_deadline, 30),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
