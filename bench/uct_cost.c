/* uct_cost.c - UCX's uct am_short, counted the way bench/sfv_bench.c's cost test counts
   safeverbs: one process, an rc_verbs interface on one device with two endpoints connected to
   each other, 64-byte active messages (an 8-byte header and 56 bytes of payload, inline, as
   uct_ep_am_short sends them). Per iteration: cost_uct_post_send (uct_ep_am_short, progressing and
   retrying while the send queue has no room, as a user must), a sleep outside the counted code so
   the message has arrived, then cost_uct_poll_recv (uct_worker_progress until the handler has run:
   UCX polls the receive CQ, runs the handler, reposts its receive buffers and reaps its send
   completions, which it asks for only now and then). Each step is a function cost_uct_*, for
   valgrind --tool=callgrind --toggle-collect='cost_*'. The async context is UCS_ASYNC_MODE_POLL:
   no thread of UCX's runs beside the counted code.

   build/uct_cost -d rxe0 [-n N] [--warmup W] [--settle-us U]      (GID index: UCX_IB_GID_INDEX)
   prints result,cost,send,batch1,64,uct,ops,N. The handler checks each message's length; the
   warm-up (default 256) fills UCX's buffer pools, and under callgrind the counters are zeroed
   after it (CALLGRIND_ZERO_STATS): a run's count is its N iterations'. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uct/api/uct.h>
#include <valgrind/callgrind.h>
#include <ucs/async/async_fwd.h>

#define NOINLINE __attribute__((noinline, used))
#define AM_ID 7

static void die(const char *what, ucs_status_t st) {
    fprintf(stderr, "uct_cost: %s: %s\n", what, ucs_status_string(st));
    exit(1);
}
static void need(ucs_status_t st, const char *what) {
    if (st != UCS_OK) die(what, st);
}

typedef struct loop {
    uct_worker_h worker;
    uct_ep_h tx, rx;
    uint64_t got, sent;
    unsigned char payload[56];
} loop;

static ucs_status_t on_message(void *arg, void *data, size_t length, unsigned flags) {
    loop *l = (loop *)arg;
    (void)flags;
    (void)data; /* its length only: the safeverbs loop beside it reads no bytes either */
    if (__builtin_expect(length != 64, 0)) {
        fprintf(stderr, "uct_cost: message %llu arrived with %zu bytes, not 64\n", (unsigned long long)l->got, length);
        exit(1);
    }
    l->got++;
    return UCS_OK;
}

NOINLINE void cost_uct_post_send(loop *l);
NOINLINE void cost_uct_poll_recv(loop *l);

NOINLINE void cost_uct_post_send(loop *l) {
    ucs_status_t st;
    while ((st = uct_ep_am_short(l->tx, AM_ID, l->sent, l->payload, sizeof l->payload)) == UCS_ERR_NO_RESOURCE)
        uct_worker_progress(l->worker);
    if (__builtin_expect(st != UCS_OK, 0)) die("uct_ep_am_short", st);
    l->sent++;
}
NOINLINE void cost_uct_poll_recv(loop *l) {
    while (l->got != l->sent) uct_worker_progress(l->worker);
}

/* The md and the rc_verbs resource of device `dev` ("rxe0"): opened into *md, its resource name
   ("rxe0:1") into tl_dev. */
static void open_md(const char *dev, uct_md_h *md, char *tl_dev, size_t tl_dev_len) {
    uct_component_h *comps;
    unsigned ncomps, c, m, r;
    need(uct_query_components(&comps, &ncomps), "uct_query_components");
    for (c = 0; c < ncomps; c++) {
        uct_component_attr_t ca;
        uct_md_resource_desc_t *mds;
        memset(&ca, 0, sizeof ca);
        ca.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        need(uct_component_query(comps[c], &ca), "uct_component_query");
        if (!ca.md_resource_count) continue;
        mds = calloc(ca.md_resource_count, sizeof *mds);
        if (!mds) die("calloc", UCS_ERR_NO_MEMORY);
        ca.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        ca.md_resources = mds;
        need(uct_component_query(comps[c], &ca), "uct_component_query");
        for (m = 0; m < ca.md_resource_count; m++) {
            uct_md_config_t *cfg;
            uct_tl_resource_desc_t *tls;
            unsigned ntls;
            if (strcmp(mds[m].md_name, dev) != 0) continue;
            need(uct_md_config_read(comps[c], NULL, NULL, &cfg), "uct_md_config_read");
            need(uct_md_open(comps[c], mds[m].md_name, cfg, md), "uct_md_open");
            uct_config_release(cfg);
            need(uct_md_query_tl_resources(*md, &tls, &ntls), "uct_md_query_tl_resources");
            for (r = 0; r < ntls; r++)
                if (!strcmp(tls[r].tl_name, "rc_verbs")) {
                    snprintf(tl_dev, tl_dev_len, "%s", tls[r].dev_name);
                    uct_release_tl_resource_list(tls);
                    free(mds);
                    uct_release_component_list(comps);
                    return;
                }
            uct_release_tl_resource_list(tls);
            uct_md_close(*md);
        }
        free(mds);
    }
    uct_release_component_list(comps);
    fprintf(stderr, "uct_cost: no rc_verbs resource on %s\n", dev);
    exit(1);
}

int main(int argc, char **argv) {
    const char *dev = "rxe0";
    unsigned long n = 1000, warmup = 256, settle_us = 0, i;
    ucs_async_context_t *async;
    uct_md_h md;
    uct_iface_config_t *icfg;
    uct_iface_params_t ip;
    uct_iface_h iface;
    uct_iface_attr_t attr;
    uct_ep_params_t ep;
    uct_device_addr_t *dev_addr;
    uct_ep_addr_t *tx_addr, *rx_addr;
    char tl_dev[UCT_DEVICE_NAME_MAX];
    static loop l;
    for (i = 1; i < (unsigned long)argc; i++) {
        const char *a = argv[i], *v = i + 1 < (unsigned long)argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "usage: uct_cost -d DEV [-n N] [--warmup W] [--settle-us U]\n"); return 2; }
        if (!strcmp(a, "-d")) dev = v;
        else if (!strcmp(a, "-n")) n = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--warmup")) warmup = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--settle-us")) settle_us = strtoul(v, NULL, 10);
        else { fprintf(stderr, "uct_cost: unknown option %s\n", a); return 2; }
        i++;
    }
    need(ucs_async_context_create(UCS_ASYNC_MODE_POLL, &async), "ucs_async_context_create");
    need(uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &l.worker), "uct_worker_create");
    open_md(dev, &md, tl_dev, sizeof tl_dev);
    need(uct_md_iface_config_read(md, "rc_verbs", NULL, NULL, &icfg), "uct_md_iface_config_read");
    memset(&ip, 0, sizeof ip);
    ip.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE | UCT_IFACE_PARAM_FIELD_STATS_ROOT |
                    UCT_IFACE_PARAM_FIELD_RX_HEADROOM | UCT_IFACE_PARAM_FIELD_CPU_MASK;
    ip.open_mode = UCT_IFACE_OPEN_MODE_DEVICE;
    ip.mode.device.tl_name = "rc_verbs";
    ip.mode.device.dev_name = tl_dev;
    need(uct_iface_open(md, l.worker, &ip, icfg, &iface), "uct_iface_open");
    uct_config_release(icfg);
    need(uct_iface_query(iface, &attr), "uct_iface_query");
    if (!(attr.cap.flags & UCT_IFACE_FLAG_AM_SHORT) || attr.cap.am.max_short < 64 || !(attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_EP)) {
        fprintf(stderr, "uct_cost: rc_verbs on %s cannot send a 64-byte am_short (max_short %zu)\n", tl_dev, attr.cap.am.max_short);
        return 1;
    }
    need(uct_iface_set_am_handler(iface, AM_ID, on_message, &l, 0), "uct_iface_set_am_handler");
    memset(&ep, 0, sizeof ep);
    ep.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    ep.iface = iface;
    need(uct_ep_create(&ep, &l.tx), "uct_ep_create");
    need(uct_ep_create(&ep, &l.rx), "uct_ep_create");
    dev_addr = calloc(1, attr.device_addr_len ? attr.device_addr_len : 1);
    tx_addr = calloc(1, attr.ep_addr_len);
    rx_addr = calloc(1, attr.ep_addr_len);
    if (!dev_addr || !tx_addr || !rx_addr) die("calloc", UCS_ERR_NO_MEMORY);
    need(uct_iface_get_device_address(iface, dev_addr), "uct_iface_get_device_address");
    need(uct_ep_get_address(l.tx, tx_addr), "uct_ep_get_address");
    need(uct_ep_get_address(l.rx, rx_addr), "uct_ep_get_address");
    need(uct_ep_connect_to_ep(l.tx, dev_addr, rx_addr), "uct_ep_connect_to_ep");
    need(uct_ep_connect_to_ep(l.rx, dev_addr, tx_addr), "uct_ep_connect_to_ep");
    uct_iface_progress_enable(iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    for (i = 0; i < sizeof l.payload; i++) l.payload[i] = (unsigned char)(i * 7 + 1);
    for (i = 0; i < warmup + n; i++) {
        if (i == warmup) CALLGRIND_ZERO_STATS; /* under callgrind: only the N iterations count */
        cost_uct_post_send(&l);
        if (settle_us) usleep((useconds_t)settle_us);
        cost_uct_poll_recv(&l);
    }
    /* nothing left in flight before the endpoints go */
    while (uct_ep_flush(l.tx, 0, NULL) == UCS_INPROGRESS) uct_worker_progress(l.worker);
    printf("result,cost,send,batch1,64,uct,ops,%lu\n", n);
    uct_ep_destroy(l.tx);
    uct_ep_destroy(l.rx);
    free(dev_addr);
    free(tx_addr);
    free(rx_addr);
    uct_iface_close(iface);
    uct_md_close(md);
    uct_worker_destroy(l.worker);
    ucs_async_context_destroy(async);
    return 0;
}
