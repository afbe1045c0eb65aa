/* test_core.c - devices, ports, GIDs, PDs, CQs, memory regions, elements and remote regions,
   on a real RDMA device (rxe0 by default; SAFEVERBS_TEST_DEVICE picks another). */
#define _GNU_SOURCE
#define SAFEVERBS_IMPLEMENTATION
#include "../safeverbs.h"
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/capability.h>

/* The MR covers the middle page of g_mem, so pointers just outside it are still valid memory. */
static char g_mem[3 * 4096] __attribute__((aligned(4096)));
#define g_buf (g_mem + 4096)
#define BUF_LEN 4096

typedef struct fixture {
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
} fixture;

static fixture setup(void) {
    fixture f;
    CHECK_OK(sfv_open_device(test_device(0), &f.ctx));
    CHECK_OK(sfv_alloc_pd(f.ctx, &f.pd));
    CHECK_OK(sfv_reg_mr_local(f.pd, g_buf, BUF_LEN, &f.mr));
    return f;
}
static void teardown(fixture *f) {
    sfv_dereg_mr(f->mr);
    sfv_dealloc_pd(f->pd);
    sfv_close_device(f->ctx);
}

/* --- results ------------------------------------------------------------------------------ */
static void t_result_strings(void) {
    CHECK(strstr(sfv_result_str(SFV_OK), "SFV_OK") != NULL);
    CHECK(strstr(sfv_result_str(SFV_ERR_SLICE_TOO_BIG), "UINT32_MAX") != NULL);
    CHECK(strstr(sfv_result_str(SFV_ERR_SLICE_NOT_WITHIN_BOUNDS), "not within bounds") != NULL);
    CHECK(strstr(sfv_result_str((sfv_result)-999), "unknown") != NULL);
    CHECK_EQ(sfv_result_from_errno(EINVAL), SFV_ERR_INVALID);
    CHECK_EQ(sfv_result_from_errno(ENOMEM), SFV_ERR_RESOURCE);
    CHECK_EQ(sfv_result_from_errno(EAGAIN), SFV_ERR_RESOURCE);
    CHECK_EQ(sfv_result_from_errno(EMFILE), SFV_ERR_RESOURCE);
    CHECK_EQ(sfv_result_from_errno(EPERM), SFV_ERR_PERMISSION);
    CHECK_EQ(sfv_result_from_errno(EACCES), SFV_ERR_PERMISSION);
    CHECK_EQ(sfv_result_from_errno(ENOENT), SFV_ERR_NOT_FOUND);
    CHECK_EQ(sfv_result_from_errno(ENODEV), SFV_ERR_NOT_FOUND);
    CHECK_EQ(sfv_result_from_errno(EOPNOTSUPP), SFV_ERR_UNSUPPORTED);
    CHECK_EQ(sfv_result_from_errno(EIO), SFV_ERR_DRIVER);
    CHECK_EQ(sfv_result_from_errno(EFAULT), SFV_ERR_DRIVER);
    CHECK(strcmp(sfv_wc_status_str(SFV_WC_REM_ACCESS_ERR), "REM_ACCESS_ERR") == 0);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_LOC_PROT_ERR), SFV_WORK_ERROR_LOCAL_PROGRAMMING);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_WR_FLUSH_ERR), SFV_WORK_ERROR_LOCAL_RESOURCE);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_REM_ACCESS_ERR), SFV_WORK_ERROR_REMOTE);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_RETRY_EXC_ERR), SFV_WORK_ERROR_TRANSPORT);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_RNR_RETRY_EXC_ERR), SFV_WORK_ERROR_TRANSPORT);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_RESP_TIMEOUT_ERR), SFV_WORK_ERROR_TIMEOUT);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_FATAL_ERR), SFV_WORK_ERROR_FATAL);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_GENERAL_ERR), SFV_WORK_ERROR_UNKNOWN);
    CHECK(strstr(sfv_wc_status_hint(SFV_WC_WR_FLUSH_ERR), "flushed") != NULL);
    CHECK(strcmp(sfv_work_error_class_str(SFV_WORK_ERROR_REMOTE), "remote error") == 0);
}

static void *thread_fail(void *arg) {
    (void)arg;
    CHECK_RESULT(sfv_open_device("no-such-device-in-thread", (sfv_context **)arg), SFV_ERR_NOT_FOUND);
    return (void *)(intptr_t)sfv_last_error()->errnum;
}
/* The detail of a failure is per thread: another thread's failure does not overwrite it. */
static void t_last_error_is_per_thread(void) {
    sfv_context *c, *c2;
    pthread_t th;
    void *ret;
    CHECK_RESULT(sfv_reg_mr_local(NULL, g_buf, 1, NULL), SFV_ERR_INVALID);
    CHECK_EQ(sfv_last_error()->errnum, EINVAL);
    CHECK(pthread_create(&th, NULL, thread_fail, &c2) == 0);
    CHECK(pthread_join(th, &ret) == 0);
    CHECK_EQ((intptr_t)ret, ENODEV);
    CHECK_EQ(sfv_last_error()->errnum, EINVAL);                         /* still ours */
    CHECK(strstr(sfv_last_error()->message, "out") != NULL);
    CHECK_OK(sfv_open_device(test_device(0), &c));
    sfv_close_device(c);
}

/* --- devices ------------------------------------------------------------------------------ */
static void t_device_list(void) {
    sfv_device_list *l;
    size_t i, n;
    int found0 = 0, found1 = 0;
    uint64_t guid;
    CHECK_RESULT(sfv_get_device_list(NULL), SFV_ERR_INVALID);
    CHECK_OK(sfv_get_device_list(&l));
    n = sfv_device_list_len(l);
    CHECK(n >= 1);
    for (i = 0; i < n; i++) {
        const char *name = sfv_device_list_name(l, i);
        CHECK(name != NULL && *name);
        CHECK_OK(sfv_device_list_guid(l, i, &guid));
        CHECK(guid != 0);
        if (strcmp(name, test_device(0)) == 0) found0 = 1;
        if (strcmp(name, test_device(1)) == 0) found1 = 1;
    }
    CHECK(found0);
    if (getenv("SAFEVERBS_IN_VM")) CHECK(found1 && n >= 2);
    CHECK(sfv_device_list_name(l, n) == NULL);
    CHECK_RESULT(sfv_device_list_guid(l, n, &guid), SFV_ERR_NOT_FOUND);
    CHECK_EQ(guid, 0);
    CHECK_RESULT(sfv_device_list_guid(l, 0, NULL), SFV_ERR_INVALID);
    CHECK_EQ(sfv_device_list_len(NULL), 0);
    CHECK(sfv_device_list_name(NULL, 0) == NULL);
    sfv_free_device_list(l);
    sfv_free_device_list(NULL);
}

/* The Guid helpers on rxe's GUID, and NUMA: the device's node (rxe, a virtual device, may have
   none), binding to a node, and the refusals. */
static void t_guid_and_numa(void) {
    sfv_device_list *l;
    sfv_context *ctx;
    uint64_t guid = 0;
    size_t i;
    int node;
    cpu_set_t set;
    CHECK_EQ(sfv_guid_oui(0x0002c90300a0b0c0ull), 0x0002c9);
    CHECK(sfv_guid_is_reserved(0));
    CHECK(!sfv_guid_is_reserved(1));
    CHECK_OK(sfv_get_device_list(&l));
    for (i = 0; i < sfv_device_list_len(l); i++)
        if (strcmp(sfv_device_list_name(l, i), test_device(0)) == 0) CHECK_OK(sfv_device_list_guid(l, i, &guid));
    sfv_free_device_list(l);
    CHECK(!sfv_guid_is_reserved(guid)); /* rxe makes its GUID from the netdev's MAC */
    CHECK_OK(sfv_open_device(test_device(0), &ctx));
    node = sfv_context_numa_node(ctx);
    CHECK(node >= -1);
    CHECK_EQ(sfv_context_numa_node(NULL), -1);
    CHECK_OK(sfv_context_bind_thread_to_numa(ctx, false));
    if (node < 0) CHECK_RESULT(sfv_context_bind_thread_to_numa(ctx, true), SFV_ERR_NOT_FOUND);
    else CHECK_OK(sfv_context_bind_thread_to_numa(ctx, true));
    CHECK_RESULT(sfv_context_bind_thread_to_numa(NULL, false), SFV_ERR_INVALID);
    /* pinned to CPU 0, then bound to node 0: on a one-node machine, every online CPU again */
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
    CHECK_OK(sfv_bind_thread_to_numa_node(0));
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
    if (access("/sys/devices/system/node/node1", F_OK) != 0) CHECK_EQ(CPU_COUNT(&set), sysconf(_SC_NPROCESSORS_ONLN));
    CHECK_RESULT(sfv_bind_thread_to_numa_node(4095), SFV_ERR_NOT_FOUND);
    CHECK_RESULT(sfv_bind_thread_to_numa_node(-1), SFV_ERR_INVALID);
    sfv_close_device(ctx);
}

static void t_open_by_name_and_index(void) {
    sfv_device_list *l;
    sfv_context *c = NULL;
    size_t i;
    CHECK_OK(sfv_open_device(test_device(0), &c));
    CHECK(strcmp(sfv_context_name(c), test_device(0)) == 0);
    sfv_close_device(c);
    CHECK_OK(sfv_open_device(NULL, &c)); /* the first device */
    sfv_close_device(c);
    CHECK_OK(sfv_open_device("", &c));
    sfv_close_device(c);
    CHECK_OK(sfv_get_device_list(&l));
    for (i = 0; i < sfv_device_list_len(l); i++) {
        CHECK_OK(sfv_open_device_at(l, i, &c));
        CHECK(strcmp(sfv_context_name(c), sfv_device_list_name(l, i)) == 0);
        sfv_close_device(c);
    }
    c = (sfv_context *)1;
    CHECK_RESULT(sfv_open_device_at(l, sfv_device_list_len(l), &c), SFV_ERR_NOT_FOUND);
    CHECK(c == NULL);
    CHECK_RESULT(sfv_open_device_at(NULL, 0, &c), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_open_device_at(l, 0, NULL), SFV_ERR_INVALID);
    sfv_free_device_list(l);
    sfv_close_device(NULL);
}

static void t_open_unknown_name(void) {
    sfv_context *c = (sfv_context *)1;
    CHECK_RESULT(sfv_open_device("mlx5_nonexistent", &c), SFV_ERR_NOT_FOUND);
    CHECK(c == NULL);
    CHECK_EQ(sfv_last_error()->errnum, ENODEV);
    CHECK(strstr(sfv_last_error()->message, "mlx5_nonexistent") != NULL);
    CHECK_RESULT(sfv_open_device("rxe0", NULL), SFV_ERR_INVALID);
}

/* The netdev under the test device: SAFEVERBS_TEST_NETDEV, or sva in the test guest. */
static const char *test_netdev(void) {
    const char *e = getenv("SAFEVERBS_TEST_NETDEV");
    if (e && *e) return e;
    return getenv("SAFEVERBS_IN_VM") ? "sva" : NULL;
}

static int wait_port(sfv_context *c, sfv_port_state want, double seconds) {
    double end = test_seconds() + seconds;
    sfv_port_attr pa;
    while (test_seconds() < end) {
        if (sfv_query_port(c, 1, &pa) == SFV_OK && pa.state == want) return 1;
        usleep(20000);
    }
    return 0;
}

/* Waits until every GID the port had before a link flap (index 0 and, in the guest, 1) is back. */
static int wait_gids(sfv_context *c, double seconds) {
    double end = test_seconds() + seconds;
    sfv_gid_entry e;
    while (test_seconds() < end) {
        if (sfv_query_gid(c, 1, 0, &e) == SFV_OK && (!getenv("SAFEVERBS_IN_VM") || sfv_query_gid(c, 1, 1, &e) == SFV_OK))
            return 1;
        usleep(20000);
    }
    return 0;
}

static void t_open_port_down(void) {
    const char *nd = test_netdev();
    char cmd[128];
    sfv_context *c, *probe;
    sfv_pd *pd;
    sfv_channel *ch = (sfv_channel *)1;
    sfv_result r, rch;
    char chmsg[256];
    if (!nd) SKIP("takes %s's link down: set SAFEVERBS_TEST_NETDEV to its netdev to allow it", test_device(0));
    CHECK_OK(sfv_open_device(test_device(0), &probe));
    CHECK_OK(sfv_alloc_pd(probe, &pd));
    snprintf(cmd, sizeof cmd, "ip link set %s down", nd);
    CHECK(system(cmd) == 0);
    CHECK(wait_port(probe, SFV_PORT_DOWN, 10));
    rch = sfv_create_channel(pd, NULL, &ch); /* an open device: a channel still needs the port ACTIVE */
    snprintf(chmsg, sizeof chmsg, "%s", sfv_last_error()->message);
    r = sfv_open_device(test_device(0), &c);
    snprintf(cmd, sizeof cmd, "ip link set %s up", nd);
    CHECK(system(cmd) == 0);
    CHECK(wait_port(probe, SFV_PORT_ACTIVE, 20));
    CHECK(wait_gids(probe, 20)); /* the GID table is refilled after the link comes back */
    CHECK_EQ(rch, SFV_ERR_RESOURCE);
    CHECK(ch == NULL);
    if (!strstr(chmsg, "ACTIVE")) FAIL("channel on a port that is down: %s", chmsg);
    sfv_dealloc_pd(pd);
    sfv_close_device(probe);
    if (getenv("SAFEVERBS_IN_VM")) { /* the veth peer (rxe1) lost its carrier too: wait for it */
        double end = test_seconds() + 20;
        while (sfv_open_device(test_device(1), &probe) != SFV_OK && test_seconds() < end) usleep(20000);
        CHECK(probe != NULL);
        CHECK(wait_gids(probe, 20));
        sfv_close_device(probe);
    }
    CHECK_EQ(r, SFV_ERR_RESOURCE);
    CHECK(c == NULL);
    CHECK(strstr(sfv_last_error()->message, "DOWN") != NULL);
    CHECK(strstr(sfv_last_error()->message, "ACTIVE or ARMED") != NULL);
    CHECK_OK(sfv_open_device(test_device(0), &c)); /* up again: opens */
    sfv_close_device(c);
}

static void t_query_port_and_gids(void) {
    fixture f = setup();
    sfv_port_attr pa;
    sfv_gid_entry e;
    uint32_t idx, i, usable = 0;
    CHECK_OK(sfv_query_port(f.ctx, 1, &pa));
    CHECK_EQ(pa.state, SFV_PORT_ACTIVE);
    CHECK(strcmp(sfv_port_state_str(pa.state), "ACTIVE") == 0);
    CHECK(pa.active_mtu >= 256 && pa.active_mtu <= 4096 && (pa.active_mtu & (pa.active_mtu - 1)) == 0);
    CHECK(pa.max_mtu >= pa.active_mtu);
    CHECK(pa.gid_tbl_len >= 1);
    CHECK_RESULT(sfv_query_port(f.ctx, 0, &pa), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_query_port(f.ctx, 9, &pa), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_query_port(NULL, 1, &pa), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_query_port(f.ctx, 1, NULL), SFV_ERR_INVALID);
    CHECK_EQ(pa.gid_tbl_len, 0); /* a failed query zeroes its output */
    CHECK_OK(sfv_query_port(f.ctx, 1, &pa));
    for (i = 0; i < pa.gid_tbl_len; i++)
        if (sfv_query_gid(f.ctx, 1, i, &e) == SFV_OK) usable++;
    CHECK(usable >= 1);
    CHECK_OK(sfv_choose_gid(f.ctx, 1, &idx));
    CHECK_OK(sfv_query_gid(f.ctx, 1, idx, &e));
    if (getenv("SAFEVERBS_IN_VM")) {
        static const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
        CHECK_EQ(pa.link_layer, SFV_LINK_LAYER_ETHERNET);
        CHECK_OK(sfv_query_gid(f.ctx, 1, 0, &e)); /* fe80:: link-local, RoCE v2 */
        CHECK(e.gid.raw[0] == 0xfe && e.gid.raw[1] == 0x80);
        CHECK_EQ(e.type, SFV_GID_TYPE_ROCE_V2);
        CHECK(!sfv_gid_is_ipv4(&e.gid));
        CHECK(e.ifindex != 0);
        CHECK_EQ(idx, 1); /* the IPv4 GID is preferred */
        CHECK_OK(sfv_query_gid(f.ctx, 1, 1, &e));
        CHECK(memcmp(e.gid.raw, v4, 16) == 0);
        CHECK(sfv_gid_is_ipv4(&e.gid));
    }
    CHECK_RESULT(sfv_query_gid(f.ctx, 1, pa.gid_tbl_len + 5, &e), SFV_ERR_NOT_FOUND);
    CHECK_RESULT(sfv_query_gid(f.ctx, 1, 0, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_choose_gid(f.ctx, 1, NULL), SFV_ERR_INVALID);
    { /* the order sfv_choose_gid picks in, on entries of every kind */
        static const uint8_t ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        static const uint8_t ll_top[16] = {0xfe, 0xbf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        static const uint8_t site[16] = {0xfe, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        static const uint8_t global[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        static const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
        sfv_gid_entry x;
        memset(&x, 0, sizeof x);
        CHECK_EQ(sfv_gid_preference(NULL), 0);
        memcpy(x.gid.raw, v4, 16);
        x.type = SFV_GID_TYPE_UNKNOWN;
        CHECK_EQ(sfv_gid_preference(&x), 1);
        x.type = SFV_GID_TYPE_ROCE_V1; /* even with an IPv4 address: not routable */
        CHECK_EQ(sfv_gid_preference(&x), 1);
        x.type = SFV_GID_TYPE_ROCE_V2;
        CHECK_EQ(sfv_gid_preference(&x), 4);
        memcpy(x.gid.raw, global, 16);
        CHECK_EQ(sfv_gid_preference(&x), 3);
        memcpy(x.gid.raw, site, 16);
        CHECK_EQ(sfv_gid_preference(&x), 3);
        memcpy(x.gid.raw, ll, 16);
        CHECK_EQ(sfv_gid_preference(&x), 2);
        memcpy(x.gid.raw, ll_top, 16);
        CHECK_EQ(sfv_gid_preference(&x), 2);
        x.type = SFV_GID_TYPE_IB;
        CHECK_EQ(sfv_gid_preference(&x), 2);
    }
    teardown(&f);
}

/* --- lifetime ----------------------------------------------------------------------------- */
static void t_refcount_close_device_first(void) {
    fixture f = setup();
    sfv_mr *mr2;
    sfv_cq *cq;
    sfv_gather_element g;
    size_t n;
    sfv_work_completion wc[4];
    CHECK_OK(sfv_create_cq(f.ctx, 8, &cq));
    CHECK(sfv_pd_context(f.pd) == f.ctx);
    sfv_close_device(f.ctx); /* the PD, CQ and MR keep it open */
    CHECK_OK(sfv_mr_gather_element_checked(f.mr, g_buf + 10, 20, &g));
    CHECK_EQ(g.lkey, sfv_mr_lkey(f.mr));
    CHECK_OK(sfv_reg_mr_local(f.pd, g_buf, 100, &mr2)); /* the PD still works */
    CHECK(sfv_mr_pd(mr2) == f.pd);
    CHECK_OK(sfv_poll_cq(cq, wc, 4, &n));
    CHECK_EQ(n, 0);
    sfv_dealloc_pd(f.pd); /* the MRs keep the PD */
    CHECK_OK(sfv_mr_scatter_element_checked(mr2, g_buf, 100, (sfv_scatter_element *)&g));
    sfv_dereg_mr(f.mr);
    sfv_destroy_cq(cq);
    sfv_dereg_mr(mr2); /* the last reference: the device closes here */
    sfv_dereg_mr(NULL);
    sfv_dealloc_pd(NULL);
    sfv_destroy_cq(NULL);
}

static void t_pd_and_cq(void) {
    fixture f = setup();
    sfv_pd *pd = (sfv_pd *)1;
    sfv_cq *cq = (sfv_cq *)1;
    sfv_work_completion wc[2];
    size_t n = 99;
    CHECK_RESULT(sfv_alloc_pd(NULL, &pd), SFV_ERR_INVALID);
    CHECK(pd == NULL);
    CHECK_RESULT(sfv_alloc_pd(f.ctx, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_create_cq(f.ctx, 0, &cq), SFV_ERR_INVALID);
    CHECK(cq == NULL);
    CHECK_RESULT(sfv_create_cq(f.ctx, 0x7fffffff, &cq), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "max_cqe") != NULL);
    CHECK_RESULT(sfv_create_cq(NULL, 4, &cq), SFV_ERR_INVALID);
    CHECK_OK(sfv_create_cq(f.ctx, 16, &cq));
    CHECK(sfv_cq_capacity(cq) >= 16);
    CHECK_OK(sfv_poll_cq(cq, wc, 2, &n));
    CHECK_EQ(n, 0);
    CHECK_OK(sfv_poll_cq(cq, NULL, 0, &n));
    CHECK_RESULT(sfv_poll_cq(cq, NULL, 2, &n), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_poll_cq(NULL, wc, 2, &n), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_poll_cq(cq, wc, 2, NULL), SFV_ERR_INVALID);
    sfv_destroy_cq(cq);
    teardown(&f);
}

/* --- registration ------------------------------------------------------------------------- */
static void t_reg_mr_variants(void) {
    fixture f = setup();
    static char buf[8192];
    sfv_mr *m = (sfv_mr *)1;
    sfv_remote_mr rm;
    CHECK_EQ(sfv_mr_addr(f.mr), (uintptr_t)g_buf);
    CHECK_EQ(sfv_mr_length(f.mr), BUF_LEN);
    CHECK_EQ(sfv_mr_access(f.mr), SFV_ACCESS_LOCAL_WRITE);
    CHECK_OK(sfv_reg_mr_shared(f.pd, buf, sizeof buf, &m));
    CHECK_EQ(sfv_mr_access(m), SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ | SFV_ACCESS_REMOTE_WRITE);
    rm = sfv_mr_remote(m);
    CHECK_EQ(rm.addr, (uintptr_t)buf);
    CHECK_EQ(rm.length, sizeof buf);
    CHECK_EQ(rm.rkey, sfv_mr_rkey(m));
    CHECK_EQ(sfv_remote_mr_rkey(rm), sfv_mr_rkey(m));
    CHECK_EQ(sfv_remote_mr_addr(rm), (uintptr_t)buf);
    CHECK_EQ(sfv_remote_mr_length(rm), sizeof buf);
    CHECK(sfv_mr_lkey(m) != sfv_mr_lkey(f.mr));
    sfv_dereg_mr(m);
    CHECK_OK(sfv_reg_mr_access(f.pd, buf + 100, 1000, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ, &m));
    CHECK_EQ(sfv_mr_addr(m), (uintptr_t)(buf + 100));
    CHECK_EQ(sfv_mr_length(m), 1000);
    sfv_dereg_mr(m);
    CHECK_OK(sfv_reg_mr_access(f.pd, buf, 64, 0, &m)); /* read-only for the NIC: allowed */
    sfv_dereg_mr(m);
    /* zero sfv_mr accessors on NULL */
    CHECK_EQ(sfv_mr_lkey(NULL), 0);
    CHECK_EQ(sfv_mr_length(NULL), 0);
    CHECK_EQ(sfv_mr_remote(NULL).rkey, 0);
    teardown(&f);
}

static void t_reg_mr_bad_arguments(void) {
    fixture f = setup();
    sfv_mr *m = (sfv_mr *)1;
    void *page;
    long ps = sysconf(_SC_PAGESIZE);
    sfv_result (*const regs[3])(sfv_pd *, void *, size_t, sfv_mr **) = {sfv_reg_mr_local, sfv_reg_mr_shared, NULL};
    int i;
    for (i = 0; regs[i]; i++) {
        m = (sfv_mr *)1;
        CHECK_RESULT(regs[i](f.pd, NULL, 64, &m), SFV_ERR_INVALID);
        CHECK(m == NULL);
        CHECK_RESULT(regs[i](f.pd, g_buf, 0, &m), SFV_ERR_INVALID);
        CHECK(strstr(sfv_last_error()->message, "length") != NULL);
        CHECK_RESULT(regs[i](NULL, g_buf, 64, &m), SFV_ERR_INVALID);
        CHECK_RESULT(regs[i](f.pd, g_buf, 64, NULL), SFV_ERR_INVALID);
        CHECK_RESULT(regs[i](f.pd, (void *)(uintptr_t)(UINTPTR_MAX - 10), 64, &m), SFV_ERR_INVALID);
    }
    CHECK_RESULT(sfv_reg_mr_access(f.pd, NULL, 64, SFV_ACCESS_LOCAL_WRITE, &m), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_reg_mr_access(f.pd, g_buf, 0, SFV_ACCESS_LOCAL_WRITE, &m), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_reg_mr_access(f.pd, g_buf, 64, SFV_ACCESS_REMOTE_WRITE, &m), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "LOCAL_WRITE") != NULL);
    CHECK_RESULT(sfv_reg_mr_access(f.pd, g_buf, 64, 1u << 30, &m), SFV_ERR_INVALID);
    /* an unmapped address: the verb fails, with its errno and name kept */
    page = mmap(NULL, (size_t)ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    CHECK(munmap(page, (size_t)ps) == 0);
    m = (sfv_mr *)1;
    CHECK(sfv_reg_mr_local(f.pd, page, (size_t)ps, &m) != SFV_OK);
    CHECK(m == NULL);
    CHECK(strcmp(sfv_last_error()->verb, "ibv_reg_mr") == 0);
    CHECK(sfv_last_error()->errnum != 0);
    CHECK_EQ(sfv_last_error()->result, sfv_result_from_errno(sfv_last_error()->errnum));
    teardown(&f);
}

static void t_reg_dmabuf(void) {
    fixture f = setup();
    sfv_mr *m = (sfv_mr *)1;
    long ps = sysconf(_SC_PAGESIZE);
    int fd = open("/dev/null", O_RDONLY);
    sfv_result r;
    CHECK(fd >= 0);
    /* bad fd: refused before the verb */
    CHECK_RESULT(sfv_reg_dmabuf_mr_local(f.pd, -1, 0, 4096, 0, &m), SFV_ERR_INVALID);
    CHECK(m == NULL);
    CHECK_RESULT(sfv_reg_dmabuf_mr_shared(f.pd, -5, 0, 4096, 0, &m), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_reg_dmabuf_mr_access(f.pd, -1, 0, 4096, 0, SFV_ACCESS_LOCAL_WRITE, &m), SFV_ERR_INVALID);
    /* iova whose page offset differs from offset's: refused before the verb */
    CHECK_RESULT(sfv_reg_dmabuf_mr_local(f.pd, fd, 0, 4096, 8, &m), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "page") != NULL);
    CHECK(strcmp(sfv_last_error()->verb, "sfv_reg_dmabuf_mr_access") == 0);
    CHECK_RESULT(sfv_reg_dmabuf_mr_shared(f.pd, fd, 100, 4096, (uint64_t)ps + 101, &m), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_reg_dmabuf_mr_access(f.pd, fd, 1, 4096, 2, SFV_ACCESS_LOCAL_WRITE, &m), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_reg_dmabuf_mr_local(f.pd, fd, 0, 0, 0, &m), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_reg_dmabuf_mr_local(f.pd, fd, UINT64_MAX - 10, 4096, UINT64_MAX - 10, &m), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_reg_dmabuf_mr_local(NULL, fd, 0, 4096, 0, &m), SFV_ERR_INVALID);
    /* matching page offsets reach the verb; /dev/null is no DMA-BUF (and rxe has no DMA-BUF
       support): the verb's failure comes back with its errno and name */
    r = sfv_reg_dmabuf_mr_local(f.pd, fd, 0, 4096, (uint64_t)ps * 3, &m);
    CHECK(r != SFV_OK);
    CHECK(m == NULL);
    CHECK(strcmp(sfv_last_error()->verb, "ibv_reg_dmabuf_mr") == 0);
    CHECK(sfv_last_error()->errnum != 0);
    CHECK_EQ(r, sfv_result_from_errno(sfv_last_error()->errnum));
    r = sfv_reg_dmabuf_mr_shared(f.pd, fd, 16, 4096, 16, &m);
    CHECK(r != SFV_OK && strcmp(sfv_last_error()->verb, "ibv_reg_dmabuf_mr") == 0);
    r = sfv_reg_dmabuf_mr_access(f.pd, fd, 0, 4096, 0, SFV_ACCESS_LOCAL_WRITE, &m);
    CHECK(r != SFV_OK && strcmp(sfv_last_error()->verb, "ibv_reg_dmabuf_mr") == 0);
    close(fd);
    teardown(&f);
}

static void t_mr_encloses_boundaries(void) {
    fixture f = setup();
    const char *b = g_buf;
    size_t n = BUF_LEN;
    CHECK(sfv_mr_encloses(f.mr, b, n));
    CHECK(sfv_mr_encloses(f.mr, b, 0));
    CHECK(sfv_mr_encloses(f.mr, b + n, 0));
    CHECK(sfv_mr_encloses(f.mr, b + n - 1, 1));
    CHECK(!sfv_mr_encloses(f.mr, b + n - 1, 2));
    CHECK(!sfv_mr_encloses(f.mr, b + n, 1));
    CHECK(!sfv_mr_encloses(f.mr, b - 1, 1));
    CHECK(!sfv_mr_encloses(f.mr, b - 1, 0));
    CHECK(!sfv_mr_encloses(f.mr, b, n + 1));
    CHECK(!sfv_mr_encloses(f.mr, b + 1, n));
    CHECK(!sfv_mr_encloses(f.mr, b + 1, SIZE_MAX));   /* would wrap */
    CHECK(!sfv_mr_encloses(f.mr, (void *)(uintptr_t)UINTPTR_MAX, 2));
    CHECK(!sfv_mr_encloses(NULL, b, 1));
    teardown(&f);
}

/* --- elements ----------------------------------------------------------------------------- */
static void t_elements_checked(void) {
    fixture f = setup();
    sfv_gather_element g;
    sfv_scatter_element s;
    CHECK_OK(sfv_mr_gather_element_checked(f.mr, g_buf, BUF_LEN, &g));
    CHECK_EQ(g.addr, (uintptr_t)g_buf);
    CHECK_EQ(g.length, BUF_LEN);
    CHECK_EQ(g.lkey, sfv_mr_lkey(f.mr));
    CHECK_OK(sfv_mr_scatter_element_checked(f.mr, g_buf + 4095, 1, &s));
    CHECK_EQ(s.length, 1);
    CHECK_OK(sfv_mr_scatter_element_checked(f.mr, g_buf + 4096, 0, &s));
    CHECK_RESULT(sfv_mr_gather_element_checked(f.mr, g_buf + 4095, 2, &g), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_EQ(g.length, 0);
    CHECK_EQ(g.addr, 0);
    CHECK_RESULT(sfv_mr_scatter_element_checked(f.mr, g_buf - 1, 1, &s), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_mr_gather_element_checked(f.mr, g_buf, (size_t)UINT32_MAX + 1, &g), SFV_ERR_SLICE_TOO_BIG);
    CHECK_RESULT(sfv_mr_scatter_element_checked(f.mr, g_buf, (size_t)UINT32_MAX + 1, &s), SFV_ERR_SLICE_TOO_BIG);
    CHECK_RESULT(sfv_mr_gather_element_checked(NULL, g_buf, 1, &g), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_mr_gather_element_checked(f.mr, g_buf, 1, NULL), SFV_ERR_INVALID);
    teardown(&f);
}

static void t_elements_plain_and_unchecked(void) {
    fixture f = setup();
    sfv_gather_element g = sfv_mr_gather_element(f.mr, g_buf + 1, 4095);
    sfv_scatter_element s = sfv_mr_scatter_element(f.mr, g_buf, 4096);
    CHECK_EQ(g.addr, (uintptr_t)(g_buf + 1));
    CHECK_EQ(g.length, 4095);
    CHECK_EQ(s.lkey, sfv_mr_lkey(f.mr));
    /* unchecked builds anything; a length over 32 bits is truncated */
    g = sfv_mr_gather_element_unchecked(f.mr, g_buf + 4096, 10);
    CHECK_EQ(g.addr, (uintptr_t)(g_buf + 4096));
    CHECK_EQ(g.length, 10);
    s = sfv_mr_scatter_element_unchecked(f.mr, g_buf, (size_t)UINT32_MAX + 5);
    CHECK_EQ(s.length, 4);
    CHECK_EQ(s.lkey, sfv_mr_lkey(f.mr));
    teardown(&f);
}

/* The plain constructors assert in debug builds (SFV_DEBUG defaults to 1 here). */
static void t_elements_debug_assert_death(void) {
    fixture f = setup();
#if SFV_DEBUG
    CHECK_ABORTS((void)sfv_mr_gather_element(f.mr, g_buf + 4096, 1));
    CHECK_ABORTS((void)sfv_mr_scatter_element(f.mr, g_buf - 1, 2));
    CHECK_ABORTS((void)sfv_mr_gather_element(f.mr, g_buf, (size_t)UINT32_MAX + 1));
    CHECK_ABORTS((void)sfv_mr_scatter_element(f.mr, g_buf, (size_t)UINT32_MAX + 1));
    CHECK(sfv_mr_gather_element(NULL, g_buf, 1).lkey == 0); /* NULL never crashes: lkey 0, refused by the NIC */
#else
    FAIL("built with SFV_DEBUG=0: the debug asserts are off");
#endif
    teardown(&f);
}

/* --- remote regions ----------------------------------------------------------------------- */
struct msg {
    uint64_t seq;
    uint32_t flags;
    char body[20];
};

static void t_remote_region_arithmetic(void) {
    sfv_remote_mr r = sfv_remote_mr_make(0x1000, 100, 7), o;
    CHECK_OK(sfv_remote_mr_sub(r, 0, &o));
    CHECK(o.addr == 0x1000 && o.length == 100 && o.rkey == 7);
    CHECK_OK(sfv_remote_mr_sub(r, 100, &o));
    CHECK(o.addr == 0x1000 + 100 && o.length == 0);
    CHECK_RESULT(sfv_remote_mr_sub(r, 101, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK(o.addr == 0 && o.length == 0);
    CHECK_RESULT(sfv_remote_mr_sub(r, UINT64_MAX, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_OK(sfv_remote_mr_slice(r, 10, 90, &o));
    CHECK(o.addr == 0x100a && o.length == 90);
    CHECK_RESULT(sfv_remote_mr_slice(r, 10, 91, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_remote_mr_slice(r, 1, UINT64_MAX, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS); /* 1 + MAX wraps */
    CHECK_RESULT(sfv_remote_mr_slice(r, UINT64_MAX, 2, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_remote_mr_sub(r, 0, NULL), SFV_ERR_INVALID);
    /* a region at the top of the address space */
    r = sfv_remote_mr_make(UINT64_MAX - 9, 10, 1);
    CHECK_OK(sfv_remote_mr_sub(r, 9, &o));
    CHECK(o.addr == UINT64_MAX && o.length == 1);
    CHECK_RESULT(sfv_remote_mr_sub(r, 10, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS); /* would start at 2^64 */
    /* a malformed region whose end wraps: refused by everything that narrows it */
    r = sfv_remote_mr_make(UINT64_MAX - 1, 100, 1);
    o = sfv_remote_mr_make(1, 2, 3);
    CHECK_RESULT(sfv_remote_mr_slice(r, 50, 10, &o), SFV_ERR_INVALID);
    CHECK(o.addr == 0 && o.length == 0 && o.rkey == 0);
    CHECK(strstr(sfv_last_error()->message, "wraps past 2^64") != NULL);
    o = sfv_remote_mr_make(1, 2, 3);
    CHECK_RESULT(sfv_remote_mr_slice(r, 0, 1, &o), SFV_ERR_INVALID); /* even a slice that would fit */
    CHECK(o.addr == 0 && o.length == 0 && o.rkey == 0);
    CHECK_RESULT(sfv_remote_mr_sub(r, 0, &o), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_remote_mr_array_field(r, 8, 0, 0, 8, &o), SFV_ERR_INVALID);
    CHECK_RESULT(SFV_REMOTE_STRUCT_FIELD(r, sfv_remote_mr, rkey, &o), SFV_ERR_INVALID);
    o = sfv_remote_mr_make(1, 2, 3); /* a refused field leaves *out zeroed too */
    CHECK_RESULT(sfv_remote_mr_array_field(sfv_remote_mr_make(0, 64, 1), 8, 0, 4, 8, &o), SFV_ERR_INVALID);
    CHECK(o.addr == 0 && o.length == 0 && o.rkey == 0);
    /* the unchecked forms cut the length to what fits below 2^64 */
    o = sfv_remote_mr_slice_unchecked(r, 0, 100);
    CHECK(o.addr == UINT64_MAX - 1 && o.length == 2);
    o = sfv_remote_mr_slice_unchecked(r, UINT64_MAX, 100);
    CHECK(o.addr == UINT64_MAX && o.length == 1);
    o = sfv_remote_mr_sub_unchecked(r, 1);
    CHECK(o.addr == UINT64_MAX && o.length == 1);
    /* unchecked: saturates, never wraps */
    r = sfv_remote_mr_make(0x1000, 100, 7);
    o = sfv_remote_mr_sub_unchecked(r, 150);
    CHECK(o.addr == 0x1000 + 150 && o.length == 0);
    o = sfv_remote_mr_sub_unchecked(r, UINT64_MAX);
    CHECK(o.addr == UINT64_MAX && o.length == 0);
    o = sfv_remote_mr_slice_unchecked(r, 5, 1000);
    CHECK(o.addr == 0x1005 && o.length == 1000);
}

static void t_remote_region_fields(void) {
    struct msg arr[4];
    sfv_remote_mr r = sfv_remote_mr_make(0x10000, sizeof arr, 9), o;
    CHECK_OK(SFV_REMOTE_STRUCT_FIELD(r, struct msg, flags, &o));
    CHECK(o.addr == 0x10000 + offsetof(struct msg, flags) && o.length == sizeof(uint32_t) && o.rkey == 9);
    CHECK_OK(SFV_REMOTE_ARRAY_FIELD(r, struct msg, 3, &o));
    CHECK(o.addr == 0x10000 + 3 * sizeof(struct msg) && o.length == sizeof(struct msg));
    CHECK_RESULT(SFV_REMOTE_ARRAY_FIELD(r, struct msg, 4, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(SFV_REMOTE_ARRAY_FIELD(r, struct msg, UINT64_MAX, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(SFV_REMOTE_ARRAY_FIELD(r, struct msg, UINT64_MAX / sizeof(struct msg) + 1, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_OK(SFV_REMOTE_STRUCT_ARRAY_FIELD(r, struct msg, 2, body, &o));
    CHECK(o.addr == 0x10000 + 2 * sizeof(struct msg) + offsetof(struct msg, body) && o.length == 20);
    CHECK_RESULT(SFV_REMOTE_STRUCT_ARRAY_FIELD(r, struct msg, 4, seq, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    r.length = offsetof(struct msg, body) + 19; /* one byte short of the field */
    CHECK_RESULT(SFV_REMOTE_STRUCT_FIELD(r, struct msg, body, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    o = SFV_REMOTE_STRUCT_FIELD_UNCHECKED(r, struct msg, body);
    CHECK(o.addr == 0x10000 + offsetof(struct msg, body) && o.length == 20);
    o = SFV_REMOTE_ARRAY_FIELD_UNCHECKED(r, struct msg, 7);
    CHECK(o.addr == 0x10000 + 7 * sizeof(struct msg));
    o = SFV_REMOTE_ARRAY_FIELD_UNCHECKED(r, struct msg, UINT64_MAX);
    CHECK(o.addr == UINT64_MAX);
    o = SFV_REMOTE_STRUCT_ARRAY_FIELD_UNCHECKED(r, struct msg, 1, flags);
    CHECK(o.addr == 0x10000 + sizeof(struct msg) + offsetof(struct msg, flags) && o.length == 4);
    CHECK_RESULT(sfv_remote_mr_array_field(r, 0, 0, 0, 0, &o), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_remote_mr_array_field(r, 8, 0, 4, 8, &o), SFV_ERR_INVALID);
}

static void t_remote_region_codec(void) {
    uint8_t buf[SFV_REMOTE_MR_ENCODED_SIZE + 4], bad[SFV_REMOTE_MR_ENCODED_SIZE];
    sfv_remote_mr r = sfv_remote_mr_make(0x0102030405060708ull, 0x1112131415161718ull, 0xa1b2c3d4), o;
    sfv_remote_mr_encode(r, buf);
    CHECK(buf[0] == 'S' && buf[1] == 'R' && buf[2] == 1 && buf[3] == 0);
    CHECK(buf[4] == 0x01 && buf[11] == 0x08 && buf[12] == 0x11 && buf[20] == 0xa1 && buf[23] == 0xd4); /* big-endian */
    CHECK_OK(sfv_remote_mr_decode(buf, SFV_REMOTE_MR_ENCODED_SIZE, &o));
    CHECK(o.addr == r.addr && o.length == r.length && o.rkey == r.rkey);
    CHECK_OK(sfv_remote_mr_decode(buf, sizeof buf, &o)); /* longer input: the prefix is read */
    CHECK_RESULT(sfv_remote_mr_decode(buf, SFV_REMOTE_MR_ENCODED_SIZE - 1, &o), SFV_ERR_INVALID);
    CHECK(o.addr == 0 && o.rkey == 0);
    CHECK_RESULT(sfv_remote_mr_decode(NULL, 24, &o), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_remote_mr_decode(buf, 24, NULL), SFV_ERR_INVALID);
    memcpy(bad, buf, sizeof bad); bad[0] = 'X';
    CHECK_RESULT(sfv_remote_mr_decode(bad, sizeof bad, &o), SFV_ERR_INVALID);
    memcpy(bad, buf, sizeof bad); bad[2] = 2;
    CHECK_RESULT(sfv_remote_mr_decode(bad, sizeof bad, &o), SFV_ERR_INVALID);
    memcpy(bad, buf, sizeof bad); bad[3] = 1;
    CHECK_RESULT(sfv_remote_mr_decode(bad, sizeof bad, &o), SFV_ERR_INVALID);
    sfv_remote_mr_encode(sfv_remote_mr_make(UINT64_MAX - 5, 10, 1), bad); /* end wraps */
    CHECK_RESULT(sfv_remote_mr_decode(bad, sizeof bad, &o), SFV_ERR_INVALID);
    sfv_remote_mr_encode(sfv_remote_mr_make(UINT64_MAX - 9, 10, 1), bad); /* ends exactly at the top */
    CHECK_OK(sfv_remote_mr_decode(bad, sizeof bad, &o));
    memset(bad, 0, sizeof bad);
    CHECK_RESULT(sfv_remote_mr_decode(bad, sizeof bad, &o), SFV_ERR_INVALID);
}

/* Every public call given NULL for each handle, pointer or output it takes: a clear result (or
   the documented neutral value), never a crash; a failing call's outputs are zeroed. */
static void t_null_everywhere(void) {
    uint8_t enc[64];
    sfv_endpoint ep;
    sfv_remote_mr rm;
    sfv_work_completion wc;
    sfv_pending p;
    sfv_channel_desc desc;
    sfv_scope_report rep;
    size_t count = 7;
    uint32_t idx = 7;
    uint64_t guid = 7;
    sfv_remote_mr_encode(sfv_remote_mr_make(1, 2, 3), NULL); /* encoders: NULL output does nothing */
    sfv_endpoint_encode(NULL, NULL);
    memset(enc, 0xab, sizeof enc);
    sfv_endpoint_encode(NULL, enc); /* a NULL endpoint encodes zeroes, which decode refuses */
    CHECK(enc[0] == 0 && enc[31] == 0 && enc[32] == 0xab);
    CHECK_RESULT(sfv_endpoint_decode(enc, SFV_ENDPOINT_ENCODED_SIZE, &ep), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_endpoint_decode(NULL, 0, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_remote_mr_decode(NULL, 0, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_get_device_list(NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_device_list_guid(NULL, 0, &guid), SFV_ERR_INVALID);
    CHECK_EQ(guid, 0);
    CHECK(sfv_device_list_len(NULL) == 0 && sfv_device_list_name(NULL, 0) == NULL);
    sfv_free_device_list(NULL);
    CHECK_RESULT(sfv_open_device(NULL, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_open_device_at(NULL, 0, NULL), SFV_ERR_INVALID);
    sfv_close_device(NULL);
    CHECK(sfv_context_name(NULL) == NULL && sfv_context_numa_node(NULL) == -1);
    CHECK_RESULT(sfv_context_bind_thread_to_numa(NULL, false), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_query_port(NULL, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_query_gid(NULL, 1, 0, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_choose_gid(NULL, 1, &idx), SFV_ERR_INVALID);
    CHECK_EQ(idx, 0);
    CHECK(!sfv_gid_is_ipv4(NULL) && sfv_gid_preference(NULL) == 0);
    CHECK_RESULT(sfv_alloc_pd(NULL, NULL), SFV_ERR_INVALID);
    sfv_dealloc_pd(NULL);
    CHECK(sfv_pd_context(NULL) == NULL);
    CHECK_RESULT(sfv_create_cq(NULL, 1, NULL), SFV_ERR_INVALID);
    sfv_destroy_cq(NULL);
    CHECK(sfv_cq_capacity(NULL) == 0);
    CHECK_RESULT(sfv_poll_cq(NULL, &wc, 1, &count), SFV_ERR_INVALID);
    CHECK_EQ(count, 0);
    CHECK_RESULT(sfv_reg_mr_local(NULL, enc, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_reg_dmabuf_mr_local(NULL, 0, 0, 1, 0, NULL), SFV_ERR_INVALID);
    sfv_dereg_mr(NULL);
    CHECK(sfv_mr_lkey(NULL) == 0 && sfv_mr_rkey(NULL) == 0 && sfv_mr_addr(NULL) == 0 && sfv_mr_length(NULL) == 0);
    CHECK(sfv_mr_access(NULL) == 0 && sfv_mr_pd(NULL) == NULL && !sfv_mr_encloses(NULL, enc, 1));
    rm = sfv_mr_remote(NULL);
    CHECK(rm.addr == 0 && rm.length == 0 && rm.rkey == 0);
    memset(&desc, 0xab, sizeof desc);
    CHECK_RESULT(sfv_channel_desc_resolve(NULL, NULL, &desc), SFV_ERR_INVALID);
    CHECK(desc.max_send_wr == 0 && desc.timeout_ms == 0);
    CHECK_RESULT(sfv_create_channel(NULL, NULL, NULL), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_channel(NULL));
    memset(&ep, 0xab, sizeof ep);
    CHECK_RESULT(sfv_channel_endpoint(NULL, &ep), SFV_ERR_INVALID);
    CHECK(ep.qpn == 0 && ep.psn == 0 && !ep.has_gid);
    CHECK_RESULT(sfv_channel_handshake(NULL, NULL), SFV_ERR_INVALID);
    CHECK(sfv_channel_pd(NULL) == NULL && sfv_channel_get_desc(NULL) == NULL && sfv_channel_fd(NULL) == -1);
    CHECK(sfv_channel_outstanding(NULL) == 0);
    CHECK_RESULT(sfv_channel_arm(NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_ack_events(NULL), SFV_ERR_INVALID);
    memset(&wc, 0xab, sizeof wc);
    CHECK_RESULT(sfv_channel_send(NULL, NULL, 0, &wc), SFV_ERR_INVALID);
    CHECK_EQ(wc.result, SFV_ERR_INVALID); /* a refused call's completion says so: never a zero (OK) one */
    CHECK(wc.status == 0 && wc.byte_len == 0 && !wc.has_imm);
    CHECK_RESULT(sfv_channel_receive(NULL, NULL, 0, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_read(NULL, NULL, 0, rm, NULL), SFV_ERR_INVALID);
    memset(&p, 0xab, sizeof p);
    CHECK_RESULT(sfv_channel_post_send(NULL, NULL, 0, &p), SFV_ERR_INVALID);
    CHECK(!sfv_pending_done(&p));
    CHECK_RESULT(sfv_pending_wait(&p, 0, &wc), SFV_ERR_INVALID); /* a refused post's handle is zeroed */
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_write_batch(NULL, NULL, 0, 1, NULL, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_receive_batch(NULL, NULL, 0, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_pending_poll(NULL, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_pending_wait(NULL, 0, &wc), SFV_ERR_INVALID);
    CHECK_EQ(wc.result, SFV_ERR_INVALID);
    CHECK(!sfv_pending_done(NULL));
    memset(&rep, 0xab, sizeof rep);
    CHECK_RESULT(sfv_channel_scope(NULL, NULL, NULL, &rep), SFV_ERR_INVALID);
    CHECK(rep.fn_result == SFV_OK && rep.auto_polled == 0 && rep.failed == 0);
    CHECK_RESULT(sfv_channel_manual_scope(NULL, NULL, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_create_multi_channel(NULL, 1, NULL, NULL), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_multi_channel(NULL));
    CHECK(sfv_multi_channel_len(NULL) == 0 && sfv_multi_channel_peer(NULL, 0) == NULL);
    memset(&ep, 0xab, sizeof ep);
    CHECK_RESULT(sfv_multi_channel_endpoints(NULL, &ep, 1), SFV_ERR_INVALID);
    CHECK(ep.qpn == 0);
    CHECK_RESULT(sfv_multi_channel_handshake(NULL, NULL, 0), SFV_ERR_INVALID);
    memset(&wc, 0xab, sizeof wc);
    CHECK_RESULT(sfv_multi_channel_scatter_send(NULL, NULL, 1, &wc), SFV_ERR_INVALID);
    CHECK_EQ(wc.result, SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_multicast_send(NULL, NULL, 0, NULL, 0, NULL), SFV_ERR_INVALID);
    memset(&rep, 0xab, sizeof rep);
    CHECK_RESULT(sfv_multi_channel_scope(NULL, NULL, NULL, &rep), SFV_ERR_INVALID);
    CHECK(rep.fn_result == SFV_OK && rep.auto_polled == 0 && rep.failed == 0);
    CHECK_RESULT(sfv_net_config_check(NULL, 1), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_exchange_all(NULL, 0, 0, NULL, 0, NULL, 10), SFV_ERR_INVALID);
    memset(enc, 0xab, sizeof enc);
    CHECK_RESULT(sfv_exchange_all(NULL, 2, 0, enc + 40, 8, enc, 10), SFV_ERR_INVALID); /* all is zeroed */
    CHECK(enc[0] == 0 && enc[15] == 0 && enc[16] == 0xab);
    {
        sfv_gather_element ge = sfv_mr_gather_element(NULL, enc, 4); /* no MR: lkey 0, no assert */
        sfv_scatter_element se = sfv_mr_scatter_element(NULL, enc, 4);
        CHECK(ge.lkey == 0 && se.lkey == 0);
    }
    CHECK_RESULT(sfv_create_node(NULL, NULL, NULL), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_node(NULL));
    CHECK(sfv_node_rank(NULL) == 0 && sfv_node_world_size(NULL) == 0 && sfv_node_multi_channel(NULL) == NULL);
    memset(enc, 0xab, sizeof enc);
    CHECK_RESULT(sfv_node_endpoint(NULL, enc, sizeof enc), SFV_ERR_INVALID);
    CHECK(enc[0] == 0 && enc[sizeof enc - 1] == 0);
    CHECK_RESULT(sfv_node_handshake(NULL, NULL, 0), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_connect(NULL, NULL, 10), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_barrier(NULL, NULL, 0, 10), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_barrier_unchecked(NULL, NULL, 0, 10), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_query_device(NULL, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_context_wrap(NULL, true, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_pd_wrap(NULL, NULL, true, NULL), SFV_ERR_INVALID);
    CHECK(sfv_context_raw(NULL) == NULL && sfv_pd_raw(NULL) == NULL && sfv_mr_raw(NULL) == NULL &&
          sfv_cq_raw(NULL) == NULL && sfv_channel_raw_qp(NULL) == NULL && sfv_channel_raw_cq(NULL) == NULL);
    CHECK(sfv_result_str((sfv_result)12345) != NULL && sfv_port_state_str((sfv_port_state)99) != NULL);
    CHECK(sfv_wc_status_str((sfv_wc_status)999) != NULL && sfv_wc_status_hint((sfv_wc_status)999) != NULL);
    CHECK(sfv_work_error_class_str((sfv_work_error_class)99) != NULL);
}

/* Registration under a low locked-memory limit fails with ENOMEM: the message says ulimit -l and
   the size asked. Root pins past any limit (CAP_IPC_LOCK), so the test drops that capability
   (this test runs in a child of its own). */
static void t_reg_mr_memlock_hint(void) {
    struct rlimit rl = {64 * 1024, 64 * 1024};
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct caps[2];
    sfv_context *c;
    sfv_pd *pd;
    sfv_mr *mr = (sfv_mr *)1;
    const size_t len = 8u << 20;
    char *buf = (char *)aligned_alloc(4096, len);
    CHECK(buf != NULL);
    memset(buf, 1, len);
    CHECK_OK(sfv_open_device(test_device(0), &c));
    CHECK_OK(sfv_alloc_pd(c, &pd));
    CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0);
    CHECK(syscall(SYS_capget, &hdr, caps) == 0);
    caps[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
    CHECK(syscall(SYS_capset, &hdr, caps) == 0);
    CHECK_RESULT(sfv_reg_mr_local(pd, buf, len, &mr), SFV_ERR_RESOURCE);
    CHECK(mr == NULL);
    CHECK_EQ(sfv_last_error()->errnum, ENOMEM);
    if (!strstr(sfv_last_error()->message, "ulimit -l") || !strstr(sfv_last_error()->message, "8388608 bytes") ||
        !strstr(sfv_last_error()->message, "64 KiB"))
        FAIL("message: %s", sfv_last_error()->message);
    sfv_dealloc_pd(pd);
    sfv_close_device(c);
    free(buf);
}

/* --- device limits and raw verbs ---------------------------------------------------------- */
/* sfv_query_device gives what ibv_query_device says, field by field, and sane values. */
static void t_query_device(void) {
    fixture f = setup();
    sfv_device_attr a;
    struct ibv_device_attr raw;
    uint64_t guid = 0;
    sfv_device_list *l;
    size_t i;
    memset(&a, 0xab, sizeof a);
    CHECK_RESULT(sfv_query_device(NULL, &a), SFV_ERR_INVALID);
    CHECK(a.max_qp == 0 && a.fw_ver[0] == 0 && a.node_guid == 0 && a.atomic_cap == SFV_ATOMIC_NONE);
    CHECK(strstr(sfv_last_error()->message, "context") != NULL);
    CHECK_RESULT(sfv_query_device(f.ctx, NULL), SFV_ERR_INVALID);
    CHECK_OK(sfv_query_device(f.ctx, &a));
    CHECK(ibv_query_device(sfv_context_raw(f.ctx), &raw) == 0);
    CHECK_EQ(a.max_qp_wr, raw.max_qp_wr);
    CHECK_EQ(a.max_sge, raw.max_sge);
    CHECK_EQ(a.max_sge_rd, raw.max_sge_rd);
    CHECK_EQ(a.max_cqe, raw.max_cqe);
    CHECK_EQ(a.max_mr_size, raw.max_mr_size);
    CHECK_EQ(a.page_size_cap, raw.page_size_cap);
    CHECK_EQ(a.max_qp_rd_atom, raw.max_qp_rd_atom);
    CHECK_EQ(a.max_qp_init_rd_atom, raw.max_qp_init_rd_atom);
    CHECK_EQ(a.max_res_rd_atom, raw.max_res_rd_atom);
    CHECK_EQ(a.atomic_cap, raw.atomic_cap);
    CHECK_EQ(a.max_srq, raw.max_srq);
    CHECK_EQ(a.max_srq_wr, raw.max_srq_wr);
    CHECK_EQ(a.max_srq_sge, raw.max_srq_sge);
    CHECK_EQ(a.max_qp, raw.max_qp);
    CHECK_EQ(a.max_cq, raw.max_cq);
    CHECK_EQ(a.max_mr, raw.max_mr);
    CHECK_EQ(a.max_pd, raw.max_pd);
    CHECK_EQ(a.max_mw, raw.max_mw);
    CHECK_EQ(a.max_ah, raw.max_ah);
    CHECK_EQ(a.max_pkeys, raw.max_pkeys);
    CHECK_EQ(a.phys_port_cnt, raw.phys_port_cnt);
    CHECK_EQ(a.vendor_id, raw.vendor_id);
    CHECK_EQ(a.vendor_part_id, raw.vendor_part_id);
    CHECK_EQ(a.hw_ver, raw.hw_ver);
    CHECK_EQ(a.local_ca_ack_delay, raw.local_ca_ack_delay);
    CHECK(strncmp(a.fw_ver, raw.fw_ver, sizeof a.fw_ver) == 0);
    CHECK(memchr(a.fw_ver, 0, sizeof a.fw_ver) != NULL);
    /* The node GUID in host order is the device list's. */
    CHECK_OK(sfv_get_device_list(&l));
    for (i = 0; i < sfv_device_list_len(l); i++)
        if (strcmp(sfv_device_list_name(l, i), test_device(0)) == 0) CHECK_OK(sfv_device_list_guid(l, i, &guid));
    sfv_free_device_list(l);
    CHECK(guid != 0);
    CHECK_EQ(a.node_guid, guid);
    /* Sane: what a channel needs is there (rxe: RC, atomics, reads of several elements). */
    CHECK(a.max_qp_wr >= 64 && a.max_sge >= 1 && a.max_sge_rd >= 1 && a.max_cqe >= 64);
    CHECK(a.max_qp >= 1 && a.max_cq >= 1 && a.max_mr >= 1 && a.max_pd >= 1);
    CHECK(a.max_mr_size >= BUF_LEN && a.phys_port_cnt >= 1);
    CHECK(a.max_qp_rd_atom >= 1 && a.max_qp_init_rd_atom >= 1);
    CHECK(a.atomic_cap == SFV_ATOMIC_NONE || a.atomic_cap == SFV_ATOMIC_HCA || a.atomic_cap == SFV_ATOMIC_GLOBAL);
    CHECK(a.page_size_cap & 4096);
    /* sfv_create_cq's limit is this max_cqe. */
    {
        sfv_cq *cq;
        CHECK_RESULT(sfv_create_cq(f.ctx, a.max_cqe + 1, &cq), SFV_ERR_INVALID);
        CHECK_OK(sfv_create_cq(f.ctx, a.max_cqe < 4096 ? a.max_cqe : 4096, &cq));
        sfv_destroy_cq(cq);
    }
    teardown(&f);
}

/* Connects ch to itself and moves "hello" through it: send, receive. */
static void loopback_hello(sfv_channel *ch, sfv_mr *mr, char *buf) {
    sfv_endpoint me;
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_scatter_element in;
    sfv_gather_element out;
    CHECK_OK(sfv_channel_endpoint(ch, &me));
    CHECK_OK(sfv_channel_handshake(ch, &me));
    memset(buf, 0, 64);
    memcpy(buf, "hello", 6);
    in = sfv_mr_scatter_element(mr, buf + 32, 32);
    out = sfv_mr_gather_element(mr, buf, 6);
    CHECK_OK(sfv_channel_post_receive(ch, &in, 1, &rx));
    CHECK_OK(sfv_channel_send(ch, &out, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, 5000, &wc));
    CHECK_EQ(wc.byte_len, 6);
    CHECK(strcmp(buf + 32, "hello") == 0);
}

/* Every accessor: NULL for NULL, the real object otherwise, usable with ibv_query_*. */
static void t_raw_accessors(void) {
    fixture f = setup();
    sfv_cq *cq;
    sfv_channel *ch;
    struct ibv_port_attr pa;
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qi;
    sfv_endpoint me;
    CHECK(sfv_context_raw(NULL) == NULL && sfv_pd_raw(NULL) == NULL && sfv_mr_raw(NULL) == NULL);
    CHECK(sfv_cq_raw(NULL) == NULL && sfv_channel_raw_qp(NULL) == NULL && sfv_channel_raw_cq(NULL) == NULL);
    CHECK_OK(sfv_create_cq(f.ctx, 16, &cq));
    CHECK_OK(sfv_create_channel(f.pd, NULL, &ch));
    CHECK(sfv_context_raw(f.ctx) != NULL && sfv_pd_raw(f.pd) != NULL && sfv_mr_raw(f.mr) != NULL);
    CHECK(sfv_cq_raw(cq) != NULL && sfv_channel_raw_qp(ch) != NULL && sfv_channel_raw_cq(ch) != NULL);
    /* The objects hang together as libibverbs says. */
    CHECK(sfv_pd_raw(f.pd)->context == sfv_context_raw(f.ctx));
    CHECK(sfv_mr_raw(f.mr)->pd == sfv_pd_raw(f.pd) && sfv_mr_raw(f.mr)->context == sfv_context_raw(f.ctx));
    CHECK_EQ(sfv_mr_raw(f.mr)->lkey, sfv_mr_lkey(f.mr));
    CHECK_EQ(sfv_mr_raw(f.mr)->rkey, sfv_mr_rkey(f.mr));
    CHECK(sfv_mr_raw(f.mr)->addr == (void *)g_buf && sfv_mr_raw(f.mr)->length == BUF_LEN);
    CHECK(sfv_cq_raw(cq)->context == sfv_context_raw(f.ctx));
    CHECK_EQ(sfv_cq_raw(cq)->cqe, sfv_cq_capacity(cq));
    CHECK(sfv_channel_raw_cq(ch) != sfv_cq_raw(cq)); /* a channel has a CQ of its own */
    CHECK(sfv_channel_raw_qp(ch)->pd == sfv_pd_raw(f.pd));
    CHECK(sfv_channel_raw_qp(ch)->send_cq == sfv_channel_raw_cq(ch) && sfv_channel_raw_qp(ch)->recv_cq == sfv_channel_raw_cq(ch));
    CHECK_OK(sfv_channel_endpoint(ch, &me));
    CHECK_EQ(sfv_channel_raw_qp(ch)->qp_num, me.qpn);
    /* ibv_query_port on the raw context: port 1 as sfv_query_port sees it. */
    memset(&pa, 0, sizeof pa);
    CHECK(ibv_query_port(sfv_context_raw(f.ctx), 1, &pa) == 0);
    CHECK(pa.state == IBV_PORT_ACTIVE);
    /* ibv_query_qp: INIT before the handshake, RTS after it. */
    memset(&qa, 0, sizeof qa);
    CHECK(ibv_query_qp(sfv_channel_raw_qp(ch), &qa, IBV_QP_STATE, &qi) == 0);
    CHECK_EQ(qa.qp_state, IBV_QPS_INIT);
    loopback_hello(ch, f.mr, g_buf);
    memset(&qa, 0, sizeof qa);
    CHECK(ibv_query_qp(sfv_channel_raw_qp(ch), &qa, IBV_QP_STATE | IBV_QP_DEST_QPN, &qi) == 0);
    CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
    CHECK_EQ(qa.dest_qp_num, me.qpn); /* loopback: connected to itself */
    CHECK_OK(sfv_destroy_channel(ch));
    sfv_destroy_cq(cq);
    teardown(&f);
}

/* The public CQ for a QP of the user's own: a raw RC QP on sfv_pd_raw with sfv_cq_raw as both
   CQs, connected to itself by raw verbs; a raw send and receive complete on the sfv_cq, and
   sfv_poll_cq returns them with the user's wr_ids. */
static void t_sfv_cq_serves_raw_qp(void) {
    fixture f = setup();
    sfv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_qp_init_attr qi;
    struct ibv_qp_attr qa;
    struct ibv_sge ss, rs;
    struct ibv_send_wr swr, *bad_s = NULL;
    struct ibv_recv_wr rwr, *bad_r = NULL;
    sfv_work_completion wc[4];
    sfv_gid_entry ge;
    uint32_t gid_index;
    size_t n, got = 0, k;
    bool saw_send = false, saw_recv = false;
    double end;
    CHECK_OK(sfv_create_cq(f.ctx, 8, &cq));
    memset(&qi, 0, sizeof qi);
    qi.send_cq = qi.recv_cq = sfv_cq_raw(cq);
    qi.qp_type = IBV_QPT_RC;
    qi.cap.max_send_wr = qi.cap.max_recv_wr = 2;
    qi.cap.max_send_sge = qi.cap.max_recv_sge = 1;
    qi.sq_sig_all = 1;
    qp = ibv_create_qp(sfv_pd_raw(f.pd), &qi);
    CHECK(qp != NULL);
    CHECK_OK(sfv_choose_gid(f.ctx, 1, &gid_index));
    CHECK_OK(sfv_query_gid(f.ctx, 1, gid_index, &ge));
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_INIT;
    qa.port_num = 1;
    qa.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
    CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTR;
    qa.path_mtu = IBV_MTU_1024;
    qa.dest_qp_num = qp->qp_num;
    qa.rq_psn = 1;
    qa.max_dest_rd_atomic = 1;
    qa.min_rnr_timer = 12;
    qa.ah_attr.is_global = 1;
    memcpy(qa.ah_attr.grh.dgid.raw, ge.gid.raw, 16);
    qa.ah_attr.grh.sgid_index = (uint8_t)gid_index;
    qa.ah_attr.grh.hop_limit = 1;
    qa.ah_attr.port_num = 1;
    CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTS;
    qa.timeout = 14;
    qa.retry_cnt = 7;
    qa.rnr_retry = 7;
    qa.sq_psn = 1;
    qa.max_rd_atomic = 1;
    CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                     IBV_QP_MAX_QP_RD_ATOMIC) == 0);
    memset(g_buf, 0, 64);
    memcpy(g_buf, "island", 7);
    rs.addr = (uintptr_t)(g_buf + 32);
    rs.length = 32;
    rs.lkey = sfv_mr_lkey(f.mr);
    memset(&rwr, 0, sizeof rwr);
    rwr.wr_id = 0x1234;
    rwr.sg_list = &rs;
    rwr.num_sge = 1;
    CHECK(ibv_post_recv(qp, &rwr, &bad_r) == 0);
    ss.addr = (uintptr_t)g_buf;
    ss.length = 7;
    ss.lkey = sfv_mr_lkey(f.mr);
    memset(&swr, 0, sizeof swr);
    swr.wr_id = 0xabcd;
    swr.sg_list = &ss;
    swr.num_sge = 1;
    swr.opcode = IBV_WR_SEND;
    CHECK(ibv_post_send(qp, &swr, &bad_s) == 0);
    end = test_seconds() + 5;
    while (got < 2 && test_seconds() < end) {
        CHECK_OK(sfv_poll_cq(cq, wc + got, 4 - got, &n));
        got += n;
    }
    CHECK_EQ(got, 2);
    for (k = 0; k < got; k++) {
        if (wc[k].result != SFV_OK) FAIL("completion %zu: %s", k, sfv_wc_status_str(wc[k].status));
        if (wc[k].wr_id == 0xabcd) {
            CHECK_EQ(wc[k].opcode, SFV_WC_OP_SEND);
            saw_send = true;
        } else {
            CHECK_EQ(wc[k].wr_id, 0x1234);
            CHECK_EQ(wc[k].opcode, SFV_WC_OP_RECV);
            CHECK_EQ(wc[k].byte_len, 7);
            saw_recv = true;
        }
    }
    CHECK(saw_send && saw_recv);
    CHECK(strcmp(g_buf + 32, "island") == 0);
    CHECK_OK(sfv_poll_cq(cq, wc, 4, &n));
    CHECK_EQ(n, 0);
    CHECK(ibv_destroy_qp(qp) == 0); /* the user's QP goes before the CQ and PD it was made on */
    sfv_destroy_cq(cq);
    teardown(&f);
}

static struct ibv_context *open_raw(const char *name) {
    int n = 0, i;
    struct ibv_device **devs = ibv_get_device_list(&n);
    struct ibv_context *raw = NULL;
    CHECK(devs != NULL);
    for (i = 0; i < n; i++)
        if (strcmp(ibv_get_device_name(devs[i]), name) == 0) raw = ibv_open_device(devs[i]);
    ibv_free_device_list(devs);
    CHECK(raw != NULL);
    return raw;
}
static bool fd_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

/* A context and PD the user opened, wrapped without ownership: safeverbs runs a channel on
   them, then frees only its own objects; the user closes the raw ones after. With ownership:
   safeverbs closes them (the context's command fd goes). */
static void t_wrap_context_and_pd(void) {
    struct ibv_context *raw = open_raw(test_device(0));
    struct ibv_pd *raw_pd = ibv_alloc_pd(raw);
    sfv_context *ctx;
    sfv_pd *pd;
    sfv_mr *mr;
    sfv_channel *ch;
    sfv_device_attr a;
    sfv_port_attr pa;
    const int fd = raw->cmd_fd;
    CHECK(raw_pd != NULL);
    CHECK_OK(sfv_context_wrap(raw, false, &ctx));
    CHECK(sfv_context_raw(ctx) == raw);
    CHECK(strcmp(sfv_context_name(ctx), test_device(0)) == 0);
    CHECK_OK(sfv_query_device(ctx, &a)); /* queried like an opened one */
    CHECK(a.max_qp_wr > 0 && a.phys_port_cnt >= 1);
    CHECK_OK(sfv_query_port(ctx, 1, &pa));
    CHECK_EQ(pa.state, SFV_PORT_ACTIVE);
    CHECK_OK(sfv_pd_wrap(ctx, raw_pd, false, &pd));
    CHECK(sfv_pd_raw(pd) == raw_pd && sfv_pd_context(pd) == ctx);
    CHECK_OK(sfv_reg_mr_local(pd, g_buf, BUF_LEN, &mr));
    CHECK(sfv_mr_raw(mr)->pd == raw_pd);
    CHECK_OK(sfv_create_channel(pd, NULL, &ch));
    sfv_close_device(ctx); /* the children keep it */
    sfv_dealloc_pd(pd);
    loopback_hello(ch, mr, g_buf);
    CHECK_OK(sfv_destroy_channel(ch));
    sfv_dereg_mr(mr); /* the last reference: nothing of the user's is freed */
    CHECK(fd_open(fd));
    CHECK(ibv_dealloc_pd(raw_pd) == 0);
    CHECK(ibv_close_device(raw) == 0);
    CHECK(!fd_open(fd));

    /* With ownership: safeverbs deallocs and closes. */
    raw = open_raw(test_device(0));
    raw_pd = ibv_alloc_pd(raw);
    CHECK(raw_pd != NULL);
    {
        const int fd2 = raw->cmd_fd;
        CHECK_OK(sfv_context_wrap(raw, true, &ctx));
        CHECK_OK(sfv_pd_wrap(ctx, raw_pd, true, &pd));
        CHECK_OK(sfv_reg_mr_local(pd, g_buf, BUF_LEN, &mr));
        CHECK_OK(sfv_create_channel(pd, NULL, &ch));
        loopback_hello(ch, mr, g_buf);
        CHECK_OK(sfv_destroy_channel(ch));
        sfv_dereg_mr(mr);
        sfv_dealloc_pd(pd);
        CHECK(fd_open(fd2));
        sfv_close_device(ctx);
        CHECK(!fd_open(fd2)); /* closed by safeverbs */
    }
}

/* NULL and bad arguments of the wrappers: nothing taken, nothing freed. */
static void t_wrap_bad_arguments(void) {
    struct ibv_context *raw = open_raw(test_device(0)), *other = open_raw(test_device(0));
    struct ibv_pd *raw_pd = ibv_alloc_pd(raw), *other_pd = ibv_alloc_pd(other);
    sfv_context *ctx = (sfv_context *)1;
    sfv_pd *pd = (sfv_pd *)1;
    CHECK(raw_pd != NULL && other_pd != NULL);
    CHECK_RESULT(sfv_context_wrap(NULL, false, &ctx), SFV_ERR_INVALID);
    CHECK(ctx == NULL);
    CHECK(strstr(sfv_last_error()->message, "raw context") != NULL);
    CHECK_RESULT(sfv_context_wrap(raw, true, NULL), SFV_ERR_INVALID);
    CHECK_OK(sfv_context_wrap(raw, false, &ctx));
    CHECK_RESULT(sfv_pd_wrap(NULL, raw_pd, false, &pd), SFV_ERR_INVALID);
    CHECK(pd == NULL);
    CHECK_RESULT(sfv_pd_wrap(ctx, NULL, false, &pd), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_pd_wrap(ctx, raw_pd, false, NULL), SFV_ERR_INVALID);
    pd = (sfv_pd *)1;
    CHECK_RESULT(sfv_pd_wrap(ctx, other_pd, true, &pd), SFV_ERR_INVALID); /* same device, another context */
    CHECK(pd == NULL);
    CHECK(strstr(sfv_last_error()->message, "another device context") != NULL);
    sfv_close_device(ctx);
    CHECK(ibv_dealloc_pd(other_pd) == 0); /* still the user's: the refusal took nothing */
    CHECK(ibv_dealloc_pd(raw_pd) == 0);
    CHECK(ibv_close_device(other) == 0);
    CHECK(ibv_close_device(raw) == 0);
}

static const harness_test TESTS[] = {
    TEST(t_reg_mr_memlock_hint, 30),
    TEST(t_null_everywhere, 10),
    TEST(t_result_strings, 10),
    TEST(t_last_error_is_per_thread, 30),
    TEST(t_device_list, 30),
    TEST(t_guid_and_numa, 30),
    TEST(t_open_by_name_and_index, 30),
    TEST(t_open_unknown_name, 30),
    TEST(t_open_port_down, 60),
    TEST(t_query_port_and_gids, 30),
    TEST(t_refcount_close_device_first, 30),
    TEST(t_pd_and_cq, 30),
    TEST(t_reg_mr_variants, 30),
    TEST(t_reg_mr_bad_arguments, 30),
    TEST(t_reg_dmabuf, 30),
    TEST(t_mr_encloses_boundaries, 30),
    TEST(t_elements_checked, 30),
    TEST(t_elements_plain_and_unchecked, 30),
    TEST(t_elements_debug_assert_death, 30),
    TEST(t_remote_region_arithmetic, 10),
    TEST(t_remote_region_fields, 10),
    TEST(t_remote_region_codec, 10),
    TEST(t_query_device, 30),
    TEST(t_raw_accessors, 30),
    TEST(t_sfv_cq_serves_raw_qp, 30),
    TEST(t_wrap_context_and_pd, 30),
    TEST(t_wrap_bad_arguments, 30),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
