/* test_rev28e.c - hostile review 28e: the bootstrap exchange, nodes and multi-channels against
   hostile or late peers, on the fake NIC and real loopback TCP. Each test failed on the header
   before its fix. */
#include "fake_env.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


/* ---- a connection to a port no one listens on, made to itself ---- */
/* connect(2), interposed: while r_self_left > 0, a connection to 127.0.0.1:r_self_port is made
   from that very address and port, as the kernel itself does now and then: to a port in the
   ephemeral range (32768 .. 60999) that no one listens on, it picks the local port by itself,
   and TCP's simultaneous open connects the socket to itself (on this machine's kernel: after
   6633 refused tries to an even port). Other connections go to the real connect. */
static uint16_t r_self_port;
static int r_self_left;
int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len) { /* (glibc's type: a union of pointers under _GNU_SOURCE) */
    typedef int (*connect_fn)(int, __CONST_SOCKADDR_ARG, socklen_t);
    static connect_fn real;
    const struct sockaddr *sa;
    memcpy(&sa, &addr, sizeof sa);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "connect");
    if (r_self_left > 0 && sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in in;
        memcpy(&in, sa, sizeof in);
        if (ntohs(in.sin_port) == r_self_port && ntohl(in.sin_addr.s_addr) == INADDR_LOOPBACK) {
            r_self_left--;
            (void)bind(fd, sa, len); /* the local port the kernel would have picked */
        }
    }
    return real(fd, addr, len);
}

/* "connects to every higher rank (retrying while it does not listen yet)". Rank 0 connects to
   rank 1 before rank 1 listens, and the kernel connects that socket to itself: rank 0 read its
   own hello back and refused "the listener" at once (SFV_ERR_PERMISSION, "our own hello back (an
   echo)") instead of trying again; and its close left the socket in TIME_WAIT on rank 1's port
   for a minute, so rank 1, coming 0.3 s late, could not listen there (bind: EADDRINUSE). A
   connection to itself is no rank's: it is retried, and reset, not closed in order. */
static void t_exchange_self_connect_retried(void) {
    sfv_net_node nodes[2] = {{"127.0.0.1", 1, 0, NULL}, {"127.0.0.1", 0, 1, NULL}};
    char mine[16] = "rank 0", all[32];
    pid_t pid;
    int st;
    unsetenv("SAFEVERBS_JOB_KEY");
    nodes[1].port = tf_free_port();
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* rank 1, late */
        char m1[16] = "rank 1", a1[32];
        sfv_result r;
        usleep(300000);
        r = sfv_exchange_all(nodes, 2, 1, m1, sizeof m1, a1, 5000);
        if (r) fprintf(stderr, "rank 1: %s: %s\n", sfv_result_str(r), sfv_last_error()->message);
        _exit(r == SFV_OK && strcmp(a1, "rank 0") == 0 ? 0 : 1);
    }
    r_self_port = nodes[1].port;
    r_self_left = 1;
    st = (int)sfv_exchange_all(nodes, 2, 0, mine, sizeof mine, all, 5000);
    r_self_left = 0;
    if (st != SFV_OK) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        FAIL("rank 0: %s: %s", sfv_result_str((sfv_result)st), sfv_last_error()->message);
    }
    CHECK(strcmp(all + 16, "rank 1") == 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static const harness_test TESTS[] = {
    TEST(t_exchange_self_connect_retried, 20),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
