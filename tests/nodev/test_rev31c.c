/* test_rev31c.c - hostile review 31c: the decoders of bytes from peers and the exchange's wire
   (frames, ranks, addresses), on real loopback TCP. Each test failed on the header before its
   fix. Host names under .test are this file's own (its getaddrinfo below). */
#include "fake_env.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


/* The resolver, interposed for names under .test: "v6first.test" is ::1 then 127.0.0.1, as
   "localhost" is on most systems; numeric lookups (AI_NUMERICHOST) of it fail as the real
   resolver's would. Other names go to the real one. */
int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    static gai_fn real;
    struct addrinfo *six = NULL, *four = NULL, *t;
    int rc;
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
    if (!node || strcmp(node, "v6first.test") != 0) return real(node, service, hints, res);
    if (hints && (hints->ai_flags & AI_NUMERICHOST)) return EAI_NONAME;
    if ((rc = real("::1", service, hints, &six)) != 0) return rc;
    if ((rc = real("127.0.0.1", service, hints, &four)) != 0) {
        freeaddrinfo(six);
        return rc;
    }
    for (t = six; t->ai_next; t = t->ai_next) {}
    t->ai_next = four; /* (glibc's freeaddrinfo frees entry by entry: one list of both) */
    *res = six;
    return 0;
}

/* socket(2), interposed: while q_no_inet6, a kernel without IPv6 (EAFNOSUPPORT for AF_INET6);
   while q_v6_silent, an IPv6 address that never answers (filtered): its socket is one end of a
   full socketpair, never writable, whose connect (below) is forever in progress. */
static int q_no_inet6, q_v6_silent, q_silent_fd = -1, q_silent_peer = -1;
int socket(int domain, int type, int protocol) {
    typedef int (*socket_fn)(int, int, int);
    static socket_fn real;
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "socket");
    if (q_no_inet6 && domain == AF_INET6) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    if (q_v6_silent && domain == AF_INET6) {
        int sv[2], small = 4096;
        char fill[4096];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return -1;
        (void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        memset(fill, 0, sizeof fill);
        while (send(sv[0], fill, sizeof fill, MSG_NOSIGNAL) > 0) {}
        if (q_silent_peer >= 0) close(q_silent_peer);
        q_silent_fd = sv[0];
        q_silent_peer = sv[1];
        return sv[0];
    }
    return real(domain, type, protocol);
}
int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len) { /* (glibc's own declaration's type) */
    typedef int (*connect_fn)(int, __CONST_SOCKADDR_ARG, socklen_t);
    static connect_fn real;
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "connect");
    if (fd == q_silent_fd) {
        q_silent_fd = -1; /* (once: its number is the next socket's once it is closed) */
        errno = EINPROGRESS;
        return -1;
    }
    return real(fd, addr, len);
}

/* Waits for a child rank for up to ms; kills it past that. Its exit status, or -1. */
static int q_wait(pid_t pid, int ms) {
    int st, i;
    for (i = 0; i < ms / 10; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* ---- a host of several addresses ---- */
/* "a rank listens on its own host and port ... and connects to every higher rank". A name with
   two addresses, the first of a family this kernel has not (IPv6 off: socket() says
   EAFNOSUPPORT), as "localhost" is (::1, 127.0.0.1) on a host booted with ipv6.disable=1: the
   listening rank passed over the address it could not use and listened on the next, but the
   connecting rank gave up on the first address (SFV_ERR_DRIVER, "socket") without trying the
   one its peer listened on, so every exchange over that name failed. */
static void t_exchange_connects_past_an_unusable_address(void) {
    sfv_net_node nodes[2] = {{"v6first.test", 0, 0, NULL}, {"v6first.test", 0, 1, NULL}};
    char mine[16] = "rank 0", all[32];
    pid_t pid;
    unsetenv("SAFEVERBS_JOB_KEY");
    nodes[0].port = tf_free_port();
    nodes[1].port = tf_free_port();
    q_no_inet6 = 1;
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* rank 1: listens on the address it can use */
        char m1[16] = "rank 1", a1[32];
        const sfv_result r = sfv_exchange_all(nodes, 2, 1, m1, sizeof m1, a1, 3000);
        if (r) fprintf(stderr, "    rank 1: %s: %s\n", sfv_result_str(r), sfv_last_error()->message);
        _exit(r == SFV_OK && strcmp(a1, "rank 0") == 0 ? 0 : 1);
    }
    {
        const sfv_result r = sfv_exchange_all(nodes, 2, 0, mine, sizeof mine, all, 3000);
        const int st = q_wait(pid, 4000);
        if (r) FAIL("rank 0: %s: %s (verb %s)", sfv_result_str(r), sfv_last_error()->message, sfv_last_error()->verb);
        CHECK(strcmp(all + 16, "rank 1") == 0);
        CHECK_EQ(st, 0);
    }
    /* still: an address that refuses for good, with no other to wait for, fails at once */
    {
        double t0;
        struct timespec ts;
        nodes[1].host = "::1"; /* the only address, of the family this kernel lacks */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t0 = ts.tv_sec + ts.tv_nsec / 1e9;
        CHECK_RESULT(sfv_exchange_all(nodes, 2, 0, mine, sizeof mine, all, 3000), SFV_ERR_DRIVER);
        CHECK_EQ(sfv_last_error()->errnum, EAFNOSUPPORT);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        CHECK(ts.tv_sec + ts.tv_nsec / 1e9 - t0 < 1.0);
    }
    q_no_inet6 = 0;
    CHECK_EQ(fk_live_total(), 0);
}

/* The same promise, the first address one that never answers (a filtered IPv6 address): the
   connecting rank waited on it to its deadline, never trying the address its peer listened on.
   Now a name with other addresses gives each a second, then tries the next. */
static void t_exchange_connects_past_a_silent_address(void) {
    sfv_net_node nodes[2] = {{"v6first.test", 0, 0, NULL}, {"v6first.test", 0, 1, NULL}};
    char mine[16] = "rank 0", all[32];
    struct timespec ts;
    double t0, took;
    pid_t pid;
    unsetenv("SAFEVERBS_JOB_KEY");
    nodes[0].port = tf_free_port();
    nodes[1].port = tf_free_port();
    q_v6_silent = 1;
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* rank 1: its ::1 socket cannot bind (not an inet socket): it listens on the next */
        char m1[16] = "rank 1", a1[32];
        const sfv_result r = sfv_exchange_all(nodes, 2, 1, m1, sizeof m1, a1, 6000);
        if (r) fprintf(stderr, "    rank 1: %s: %s\n", sfv_result_str(r), sfv_last_error()->message);
        _exit(r == SFV_OK && strcmp(a1, "rank 0") == 0 ? 0 : 1);
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t0 = ts.tv_sec + ts.tv_nsec / 1e9;
    {
        const sfv_result r = sfv_exchange_all(nodes, 2, 0, mine, sizeof mine, all, 6000);
        const int st = q_wait(pid, 7000);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        took = ts.tv_sec + ts.tv_nsec / 1e9 - t0;
        if (r) FAIL("rank 0: %s: %s (after %.1f s)", sfv_result_str(r), sfv_last_error()->message, took);
        CHECK(strcmp(all + 16, "rank 1") == 0);
        CHECK_EQ(st, 0);
        CHECK(took < 4.0); /* a second per silent try, not the 6 s deadline */
    }
    q_v6_silent = 0;
    if (q_silent_peer >= 0) close(q_silent_peer);
    q_silent_peer = q_silent_fd = -1;
}

static const harness_test TESTS[] = {
    TEST(t_exchange_connects_past_an_unusable_address, 20),
    TEST(t_exchange_connects_past_a_silent_address, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
