/* test_rev34b.c - hostile review 34b: the examples as programs, run here on the fake NIC (and the
   fake librdmacm, compiled into this file: the Makefile links this test with fake_verbs.c only).
   examples/rc_pingpong.c and examples/rping.c are included whole, each main renamed, and run in
   a child with the arguments a user (or a test against rdma-core's tools) would give; every run
   has a time limit, so an example that waits for good fails its test. Each test failed on the
   examples before their fix. */
#define SAFEVERBS_RDMACM
#include "fake_env.h"
#include "fake_rdmacm.h"
#include "fake_rdmacm.c"

#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>

#define main rc_pingpong_main
#include "../../examples/rc_pingpong.c"
#undef main
#define main rping_main
#include "../../examples/rping.c"
#undef main

#include "run_example.h"

/* ibv_rc_pingpong's -p takes 1 .. 65535 (over: usage, exit 1). rc_pingpong's server took
   65536 (and 0, -1) as it was, cast to 16 bits: it listened on a port the kernel picked (or on
   65535) and waited in accept for good, where no client could reach it. Now: refused at once,
   non-zero. (The client's connect to port 0 failed already.) */
static void t_rc_pingpong_port_out_of_range(void) {
    static const char *const ports[] = {"65536", "0", "-1", "70000"};
    size_t i;
    for (i = 0; i < COUNT_OF(ports); i++) {
        const char *args[] = {"rc_pingpong", "-n", "1", "-p", ports[i], NULL};
        const int rc = run_example(rc_pingpong_main, args, 3);
        if (rc <= 0) FAIL("rc_pingpong -p %s: exit %d (-1: still waiting after 3 s)", ports[i], rc);
    }
}

/* ibv_rc_pingpong -m takes 256, 512, 1024, 2048 or 4096 (else usage). rc_pingpong took -m 0:
   its channel got the port's MTU, and the server waited for a client (for good, as
   ibv_rc_pingpong -m 0 refused to start), then refused the peer's address as "peer MTU 0".
   Now every -m that is no MTU is refused at once. */
static void t_rc_pingpong_mtu_refused(void) {
    static const char *const mtus[] = {"0", "300", "-1", "8192"};
    char port[16];
    size_t i;
    snprintf(port, sizeof port, "%u", (unsigned)tf_free_port());
    for (i = 0; i < COUNT_OF(mtus); i++) {
        const char *args[] = {"rc_pingpong", "-n", "1", "-p", port, "-m", mtus[i], NULL};
        const int rc = run_example(rc_pingpong_main, args, 3);
        if (rc != 2) FAIL("rc_pingpong -m %s: exit %d, not the usage's 2 (-1: still waiting after 3 s)", mtus[i], rc);
    }
}

/* tcp.h, which every TCP example uses: a port outside 1 .. 65535 is -1 (EINVAL) at once. The
   accept bound 65536 as 0 (a port the kernel picks) and waited for good. */
static void t_tcp_port_out_of_range(void) {
    static const int ports[] = {65536, 0, -1, 65536 + 18515};
    size_t i;
    alarm(5); /* (a child of the harness: an accept that waits fails the test) */
    for (i = 0; i < COUNT_OF(ports); i++) {
        errno = 0;
        CHECK_EQ(tcp_accept(ports[i]), -1);
        CHECK_EQ(errno, EINVAL);
        errno = 0;
        CHECK_EQ(tcp_connect("127.0.0.1", ports[i]), -1);
        CHECK_EQ(errno, EINVAL);
    }
    alarm(0);
}

/* rping's server listens on every IPv4 address without -a (rping -s); rping.c's said usage
   (exit 2). Here a client's request comes, is served (it disconnects before its first ping),
   and the server exits 0. */
static void t_rping_server_without_address(void) {
    const fkcm_event request = {.type = RDMA_CM_EVENT_CONNECT_REQUEST, .qpn = 0x99, .initiator_depth = 1, .responder_resources = 1};
    const fkcm_event answer[] = {{.type = RDMA_CM_EVENT_ESTABLISHED}, {.type = RDMA_CM_EVENT_DISCONNECTED, .delay_ms = 200}};
    const char *args[] = {"rping", "-s", "-p", "7476", "-C", "1", NULL};
    int rc;
    fk_reset();
    fkcm_reset();
    fkcm_on(FKCM_LISTEN, &request, 1);
    fkcm_on(FKCM_ACCEPT, answer, 2);
    rc = run_example(rping_main, args, 20);
    if (rc != 0) FAIL("rping -s without -a: exit %d (2: usage; -1: still waiting after 20 s)", rc);
}

/* Every wait has a deadline: rping's waits for the peer's next message polled for ever while
   the connection stayed up. A client that connects and never sends kept the server (and a
   server that stops answering, the client) waiting for good; now the channel's deadline
   (30 s) ends it, with a non-zero exit. */
static void t_rping_silent_client_deadline(void) {
    const fkcm_event request = {.type = RDMA_CM_EVENT_CONNECT_REQUEST, .qpn = 0x99, .initiator_depth = 1, .responder_resources = 1};
    const fkcm_event established = {.type = RDMA_CM_EVENT_ESTABLISHED};
    const char *args[] = {"rping", "-s", "-a", FKCM_ADDR0, "-p", "7477", "-C", "1", NULL};
    int rc;
    fk_reset();
    fkcm_reset();
    fkcm_on(FKCM_LISTEN, &request, 1);
    fkcm_on(FKCM_ACCEPT, &established, 1);
    rc = run_example(rping_main, args, 45);
    if (rc <= 0) FAIL("rping server with a silent client: exit %d (-1: still waiting after 45 s)", rc);
}

static const harness_test TESTS[] = {
    TEST(t_rc_pingpong_port_out_of_range, 30),
    TEST(t_rc_pingpong_mtu_refused, 30),
    TEST(t_tcp_port_out_of_range, 10),
    TEST(t_rping_server_without_address, 30),
    TEST(t_rping_silent_client_deadline, 60),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
