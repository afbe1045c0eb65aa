/* test_rev38f.c - hostile review 38f on the fake NIC: every public function under hostile
   arguments (NULL pointers, sizes 0, 1, SIZE_MAX, SIZE_MAX / 2 + 1, INT_MAX, INT_MIN, negative
   timeouts, counts one over each documented maximum, enum values out of range, descs with every
   field at its extreme, nonsense strings) must return its documented result with a matching last
   error that names what it refused, crash nothing and leave nothing behind; and an output that
   aliases an input, where the types allow it, keeps the documented result. */
#include "fake_env.h"

#include <limits.h>
#include <sys/wait.h>

/* ---- the sweep: one row per call, its result, and a word its last error must say ---- */
/* A refused call returns `want`, and its last error has that result, a verb (the function or its
   check) and a message holding `says`; a call that succeeds leaves the last error as it was. */
static int ts_bad;
static void ts_expect(int line, const char *call, sfv_result r, sfv_result want, const char *says, const sfv_error *before) {
    const sfv_error *e = sfv_last_error();
    if (r != want) {
        fprintf(stderr, "    line %d: %s returned %s, want %s (last error: %s)\n", line, call, sfv_result_str(r), sfv_result_str(want), e->message);
        ts_bad++;
    } else if (r != SFV_OK && (e->result != r || !e->verb || !*e->verb || !strstr(e->message, says))) {
        fprintf(stderr, "    line %d: %s returned %s, but the last error is %s \"%s\" (verb %s), not one saying \"%s\"\n", line, call,
                sfv_result_str(r), sfv_result_str(e->result), e->message, e->verb ? e->verb : "(null)", says);
        ts_bad++;
    } else if (r == SFV_OK && strcmp(before->message, e->message) != 0) {
        fprintf(stderr, "    line %d: %s returned SFV_OK but left a new last error: %s\n", line, call, e->message);
        ts_bad++;
    }
}
#define TS(call, want, says)                                                              \
    do {                                                                                  \
        const sfv_error before_ = *sfv_last_error();                                     \
        ts_expect(__LINE__, #call, (call), (want), (says), &before_);                    \
    } while (0)
#define TS_DONE() do { if (ts_bad) FAIL("%d calls broke their promise (above)", ts_bad); } while (0)

/* Devices, ports, GIDs, CQs, MRs, elements and remote regions: each refusal is the documented
   result, its last error naming what it refused; the out-of-range enums and NULLs of the string
   and getter functions give their documented values. */
static void t_sweep_devices_and_memory(void) {
    tf_env e;
    sfv_context *ctx;
    sfv_device_list *list;
    sfv_cq *cq;
    sfv_mr *mr;
    sfv_pd *pd;
    uint64_t guid;
    sfv_port_attr pa;
    sfv_device_attr da;
    sfv_gid_entry ge;
    uint32_t gi;
    size_t n;
    sfv_work_completion wcs[2];
    sfv_gather_element g;
    sfv_scatter_element s;
    sfv_remote_mr rm;
    uint8_t blob[SFV_ENDPOINT_ENCODED_SIZE];
    sfv_endpoint ep;
    static char longname[4097];
    memset(longname, 'x', sizeof longname - 1);
    tf_open(&e, 8192);
    TS(sfv_get_device_list(NULL), SFV_ERR_INVALID, "out");
    TS(sfv_get_device_list(&list), SFV_OK, "");
    CHECK(sfv_device_list_name(list, SIZE_MAX) == NULL && sfv_device_list_name(NULL, 0) == NULL && sfv_device_list_len(NULL) == 0);
    TS(sfv_device_list_guid(list, SIZE_MAX, &guid), SFV_ERR_NOT_FOUND, "out of range");
    TS(sfv_device_list_guid(NULL, 0, &guid), SFV_ERR_INVALID, "list");
    TS(sfv_device_list_guid(list, 0, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_open_device_at(list, SIZE_MAX, &ctx), SFV_ERR_NOT_FOUND, "out of range");
    TS(sfv_open_device_at(NULL, 0, &ctx), SFV_ERR_INVALID, "list");
    TS(sfv_open_device_at(list, 0, NULL), SFV_ERR_INVALID, "out");
    sfv_free_device_list(list);
    sfv_free_device_list(NULL);
    TS(sfv_open_device(longname, &ctx), SFV_ERR_NOT_FOUND, "no RDMA device named xxx");
    TS(sfv_open_device("::1%999", &ctx), SFV_ERR_NOT_FOUND, "::1%999");
    TS(sfv_open_device("", NULL), SFV_ERR_INVALID, "out");
    TS(sfv_bind_thread_to_numa_node(INT_MIN), SFV_ERR_INVALID, "NUMA node");
    TS(sfv_bind_thread_to_numa_node(-1), SFV_ERR_INVALID, "NUMA node -1");
    TS(sfv_bind_thread_to_numa_node(INT_MAX), SFV_ERR_NOT_FOUND, "no NUMA node");
    TS(sfv_context_bind_thread_to_numa(NULL, true), SFV_ERR_INVALID, "context");
    TS(sfv_query_port(e.ctx, 0, &pa), SFV_ERR_INVALID, "port");
    TS(sfv_query_port(e.ctx, 255, &pa), SFV_ERR_INVALID, "port");
    TS(sfv_query_port(NULL, 1, &pa), SFV_ERR_INVALID, "context");
    TS(sfv_query_port(e.ctx, 1, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_query_device(NULL, &da), SFV_ERR_INVALID, "context");
    TS(sfv_query_device(e.ctx, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_query_gid(e.ctx, 1, UINT32_MAX, &ge), SFV_ERR_NOT_FOUND, "GID");
    TS(sfv_query_gid(e.ctx, 0, 0, &ge), SFV_ERR_INVALID, "port");
    TS(sfv_query_gid(e.ctx, 1, 0, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_choose_gid(e.ctx, 255, &gi), SFV_ERR_INVALID, "port");
    TS(sfv_choose_gid(NULL, 1, &gi), SFV_ERR_INVALID, "context");
    TS(sfv_choose_gid(e.ctx, 1, NULL), SFV_ERR_INVALID, "index_out");
    CHECK(strcmp(sfv_port_state_str((sfv_port_state)255), "UNKNOWN") == 0);
    CHECK(strcmp(sfv_wc_status_str((sfv_wc_status)-1), "UNKNOWN_STATUS") == 0);
    CHECK(sfv_wc_status_hint((sfv_wc_status)255) != NULL && sfv_work_error_class_str((sfv_work_error_class)-1) != NULL);
    CHECK(sfv_wc_status_class((sfv_wc_status)-1) == SFV_WORK_ERROR_UNKNOWN);
    CHECK(sfv_event_type_str((sfv_event_type)-1) != NULL && sfv_result_str((sfv_result)INT_MIN) != NULL);
    CHECK(sfv_gid_preference(NULL) == 0 && !sfv_gid_is_ipv4(NULL));
    sfv_set_log(NULL, NULL, (sfv_log_level)-1); /* (off) */
    sfv_set_log(NULL, NULL, SFV_LOG_OFF);
    TS(sfv_alloc_pd(NULL, &pd), SFV_ERR_INVALID, "context");
    TS(sfv_alloc_pd(e.ctx, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_pd_wrap(e.ctx, NULL, true, &pd), SFV_ERR_INVALID, "raw PD");
    TS(sfv_context_wrap(NULL, true, &ctx), SFV_ERR_INVALID, "raw context");
    TS(sfv_create_cq(e.ctx, 0, &cq), SFV_ERR_INVALID, "min_entries 0");
    TS(sfv_create_cq(e.ctx, UINT32_MAX, &cq), SFV_ERR_INVALID, "min_entries 4294967295");
    TS(sfv_create_cq(NULL, 1, &cq), SFV_ERR_INVALID, "context");
    TS(sfv_create_cq(e.ctx, 1, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_create_cq(e.ctx, 1, &cq), SFV_OK, "");
    TS(sfv_poll_cq(cq, NULL, 5, &n), SFV_ERR_INVALID, "out");
    TS(sfv_poll_cq(cq, wcs, SIZE_MAX, &n), SFV_OK, "");
    TS(sfv_poll_cq(NULL, wcs, 1, &n), SFV_ERR_INVALID, "cq");
    TS(sfv_poll_cq(cq, wcs, 1, NULL), SFV_ERR_INVALID, "count");
    TS(sfv_destroy_cq(cq), SFV_OK, "");
    TS(sfv_reg_mr_access(e.pd, e.buf, 0, 1, &mr), SFV_ERR_INVALID, "length (0)");
    TS(sfv_reg_mr_access(e.pd, e.buf, SIZE_MAX, 1, &mr), SFV_ERR_INVALID, "wraps");
    TS(sfv_reg_mr_access(e.pd, NULL, 1, 1, &mr), SFV_ERR_INVALID, "addr");
    TS(sfv_reg_mr_access(e.pd, e.buf, 1, UINT_MAX, &mr), SFV_ERR_INVALID, "access flags");
    TS(sfv_reg_mr_access(e.pd, e.buf, 1, SFV_ACCESS_REMOTE_WRITE, &mr), SFV_ERR_INVALID, "need LOCAL_WRITE");
    TS(sfv_reg_mr_access(e.pd, e.buf, 1, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_ZERO_BASED, &mr), SFV_ERR_INVALID, "ZERO_BASED");
    TS(sfv_reg_mr_access(NULL, e.buf, 1, 1, &mr), SFV_ERR_INVALID, "pd");
    TS(sfv_reg_mr_access(e.pd, e.buf, 1, 1, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_reg_dmabuf_mr_access(e.pd, -1, 0, 1, 0, 1, &mr), SFV_ERR_INVALID, "fd");
    TS(sfv_reg_dmabuf_mr_access(e.pd, INT_MAX, UINT64_MAX, 2, 0, 1, &mr), SFV_ERR_INVALID, "wraps");
    TS(sfv_reg_dmabuf_mr_access(e.pd, 3, 0, SIZE_MAX, 1, 1, &mr), SFV_ERR_INVALID, "");
    TS(sfv_reg_dmabuf_mr_access(e.pd, 3, 0, 0, 0, 1, &mr), SFV_ERR_INVALID, "length (0)");
    TS(sfv_reg_dmabuf_mr_access(e.pd, 3, 0, 1, 0, UINT_MAX, &mr), SFV_ERR_INVALID, "access flags");
    TS(sfv_mr_gather_element_checked(e.mr, e.buf, SIZE_MAX, &g), SFV_ERR_SLICE_TOO_BIG, "over UINT32_MAX");
    TS(sfv_mr_gather_element_checked(e.mr, e.buf, (size_t)UINT32_MAX + 1, &g), SFV_ERR_SLICE_TOO_BIG, "over UINT32_MAX");
    TS(sfv_mr_gather_element_checked(e.mr, e.buf + 8192, 0, &g), SFV_OK, "");
    TS(sfv_mr_gather_element_checked(e.mr, e.buf + 8192, 1, &g), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "not within");
    TS(sfv_mr_gather_element_checked(e.mr, (const void *)UINTPTR_MAX, 1, &g), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "not within");
    TS(sfv_mr_gather_element_checked(NULL, e.buf, 1, &g), SFV_ERR_INVALID, "NULL memory region");
    TS(sfv_mr_gather_element_checked(e.mr, e.buf, 1, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_mr_scatter_element_checked(e.mr, NULL, 0, &s), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "not within");
    CHECK(!sfv_mr_encloses(e.mr, e.buf, SIZE_MAX) && sfv_mr_encloses(e.mr, e.buf + 8192, 0) && !sfv_mr_encloses(NULL, e.buf, 0));
    TS(sfv_remote_mr_sub(sfv_remote_mr_make(UINT64_MAX, UINT64_MAX, 1), 0, &rm), SFV_ERR_INVALID, "wraps");
    TS(sfv_remote_mr_sub(sfv_remote_mr_make(UINT64_MAX, 1, 1), 1, &rm), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "not within");
    TS(sfv_remote_mr_slice(sfv_remote_mr_make(0, 1, 1), 0, 0, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_remote_mr_slice(sfv_remote_mr_make(0, 1, 1), UINT64_MAX, UINT64_MAX, &rm), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "not within");
    TS(sfv_remote_mr_array_field(sfv_remote_mr_make(0, 64, 1), 0, 0, 0, 0, &rm), SFV_ERR_INVALID, "field");
    TS(sfv_remote_mr_array_field(sfv_remote_mr_make(0, 64, 1), 8, UINT64_MAX, 0, 8, &rm), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "past 2^64");
    TS(sfv_remote_mr_array_field(sfv_remote_mr_make(0, 64, 1), UINT64_MAX, 1, UINT64_MAX, 0, &rm), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "past 2^64");
    rm = sfv_remote_mr_array_field_unchecked(sfv_remote_mr_make(UINT64_MAX - 3, 2, 1), UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX);
    CHECK(rm.addr == UINT64_MAX && rm.length == 1);
    rm = sfv_remote_mr_sub_unchecked(sfv_remote_mr_make(UINT64_MAX, UINT64_MAX, 1), UINT64_MAX);
    CHECK(rm.addr == UINT64_MAX && rm.length == 0);
    sfv_remote_mr_encode(rm, NULL);
    TS(sfv_remote_mr_decode(NULL, 24, &rm), SFV_ERR_INVALID, "NULL");
    TS(sfv_remote_mr_decode(blob, 0, &rm), SFV_ERR_INVALID, "too short");
    TS(sfv_remote_mr_decode(blob, 24, NULL), SFV_ERR_INVALID, "out");
    sfv_remote_mr_encode(sfv_remote_mr_make(UINT64_MAX, 2, 1), blob);
    TS(sfv_remote_mr_decode(blob, SIZE_MAX, &rm), SFV_ERR_INVALID, "wraps");
    sfv_endpoint_encode(NULL, blob);
    sfv_endpoint_encode(&ep, NULL);
    TS(sfv_endpoint_decode(blob, SIZE_MAX, &ep), SFV_ERR_INVALID, "bad magic");
    TS(sfv_endpoint_decode(blob, 31, &ep), SFV_ERR_INVALID, "too short");
    TS(sfv_endpoint_decode(blob, 32, NULL), SFV_ERR_INVALID, "out");
    tf_close(&e);
    TS_DONE();
}

/* Every field of sfv_channel_desc at its extremes: refused with SFV_ERR_INVALID naming the field
   (by sfv_create_channel and sfv_channel_desc_resolve alike, and by a multi-channel's and a
   node's create), or taken; out-of-range enums included. */
static void t_sweep_channel_desc(void) {
    static const struct { const char *field; size_t off, size; uint32_t value; sfv_result want; } rows[] = {
#define TD(f, v, w) {#f, offsetof(sfv_channel_desc, f), sizeof(((sfv_channel_desc *)0)->f), (uint32_t)(v), w}
        TD(max_send_wr, UINT32_MAX, SFV_ERR_INVALID), TD(max_recv_wr, UINT32_MAX, SFV_ERR_INVALID), TD(max_send_wr, 1, SFV_OK),
        TD(max_send_sge, UINT32_MAX, SFV_ERR_INVALID), TD(max_recv_sge, UINT32_MAX, SFV_ERR_INVALID),
        TD(cq_entries, UINT32_MAX, SFV_ERR_INVALID), TD(cq_entries, 1, SFV_ERR_INVALID),
        TD(max_inline_data, UINT32_MAX, SFV_OK), TD(max_inline_data, UINT32_MAX - 1, SFV_ERR_INVALID),
        TD(max_inline_data, 65536, SFV_OK), TD(max_inline_data, 65537, SFV_ERR_INVALID),
        TD(access, UINT32_MAX, SFV_ERR_INVALID), TD(access, SFV_ACCESS_MW_BIND, SFV_ERR_INVALID),
        TD(port, 255, SFV_ERR_INVALID), TD(port, 2, SFV_ERR_INVALID),
        TD(path_mtu, 100, SFV_ERR_INVALID), TD(path_mtu, 8192, SFV_ERR_INVALID), TD(path_mtu, UINT32_MAX, SFV_ERR_INVALID),
        TD(send_psn, UINT32_MAX, SFV_ERR_INVALID), TD(send_psn, 0xFFFFFF, SFV_OK),
        TD(min_rnr_timer, 255, SFV_ERR_INVALID), TD(ack_timeout, 255, SFV_ERR_INVALID), TD(ack_timeout, 32, SFV_ERR_INVALID),
        TD(ack_retries, 255, SFV_OK), /* (not set: the default) */
        TD(service_level, 16, SFV_ERR_INVALID), TD(traffic_class, 255, SFV_OK),
        TD(max_rd_atomic, UINT32_MAX, SFV_ERR_INVALID), TD(max_rd_atomic, 17, SFV_ERR_INVALID),
        TD(timeout_ms, INT_MAX, SFV_ERR_INVALID), TD(timeout_ms, UINT32_MAX, SFV_ERR_INVALID), TD(timeout_ms, 86400000, SFV_OK),
        TD(wait_mode, 255, SFV_ERR_INVALID), TD(wait_mode, UINT32_MAX, SFV_ERR_INVALID), TD(wait_mode, SFV_WAIT_EVENT, SFV_OK),
#undef TD
    };
    tf_env e;
    sfv_channel_desc d, out;
    sfv_channel *ch;
    sfv_multi_channel *mc;
    size_t i;
    tf_open(&e, 4096);
    for (i = 0; i < COUNT_OF(rows); i++) {
        const uint8_t v8 = (uint8_t)rows[i].value;
        sfv_channel_desc asked;
        memset(&asked, 0, sizeof asked);
        if (rows[i].size == 1) memcpy((char *)&asked + rows[i].off, &v8, 1); else memcpy((char *)&asked + rows[i].off, &rows[i].value, 4);
        d = asked;
        TS(sfv_create_channel(e.pd, &d, &ch), rows[i].want, rows[i].field);
        if (ch) CHECK_OK(sfv_destroy_channel(ch));
        TS(sfv_channel_desc_resolve(e.pd, &d, &out), rows[i].want, rows[i].field);
        TS(sfv_channel_desc_resolve(e.pd, &d, &d), rows[i].want, rows[i].field); /* out aliasing desc */
        d = asked;
        TS(sfv_create_multi_channel(e.pd, 2, &d, &mc), rows[i].want, rows[i].field);
        if (mc) CHECK_OK(sfv_destroy_multi_channel(mc));
    }
    memset(&d, 0, sizeof d);
    d.ack_retries_set = true; d.ack_retries = 8;
    TS(sfv_create_channel(e.pd, &d, &ch), SFV_ERR_INVALID, "ack_retries");
    memset(&d, 0, sizeof d);
    d.rnr_retries_set = true; d.rnr_retries = 255;
    TS(sfv_create_channel(e.pd, &d, &ch), SFV_ERR_INVALID, "rnr_retries");
    memset(&d, 0, sizeof d);
    d.gid_index_set = true; d.gid_index = 255;
    TS(sfv_create_channel(e.pd, &d, &ch), SFV_ERR_INVALID, "gid_index");
    TS(sfv_create_channel(NULL, NULL, &ch), SFV_ERR_INVALID, "pd");
    TS(sfv_create_channel(e.pd, NULL, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_channel_desc_resolve(NULL, NULL, &out), SFV_ERR_INVALID, "pd");
    TS(sfv_channel_desc_resolve(e.pd, NULL, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_create_multi_channel(e.pd, 0, NULL, &mc), SFV_ERR_INVALID, "0 channels");
    TS(sfv_create_multi_channel(e.pd, 4097, NULL, &mc), SFV_ERR_INVALID, "4097 channels");
    TS(sfv_create_multi_channel(e.pd, SIZE_MAX, NULL, &mc), SFV_ERR_INVALID, "channels");
    TS(sfv_create_multi_channel(NULL, 1, NULL, &mc), SFV_ERR_INVALID, "pd");
    TS(sfv_create_multi_channel(e.pd, 1, NULL, NULL), SFV_ERR_INVALID, "out");
    tf_close(&e);
    TS_DONE();
}

/* Posts, waits, scopes, injects, atomics, events and leases of a connected pair, each pointer
   NULL, each count 0 or past its maximum, regions that wrap: the documented refusal, nothing
   posted, the channel usable after. */
static sfv_result ts_scope_ok(sfv_channel *ch, void *user) { (void)ch; (void)user; return SFV_OK; }
static sfv_result ts_mscope_ok(sfv_multi_channel *mc, void *user) { (void)mc; (void)user; return SFV_OK; }
static void t_sweep_channel_calls(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_endpoint ep;
    sfv_gather_element g;
    sfv_scatter_element s, s2[2], old;
    sfv_pending p, ps[2];
    sfv_work_completion wcs[3];
    sfv_scope_report rep;
    sfv_lease *lease;
    sfv_event evs[2];
    size_t n;
    int fd;
    const sfv_remote_mr wraps = sfv_remote_mr_make(UINT64_MAX, 2, 1);
    fk_set_mw(true); /* (read when the device opens) */
    tf_open(&e, 8192);
    memset(&d, 0, sizeof d);
    d.timeout_ms = 200;
    tf_pair(&e, &d, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 64);
    s = sfv_mr_scatter_element(e.mr, e.buf + 4096, 64);
    s2[0] = s;
    s2[1] = sfv_mr_scatter_element(e.mr, e.buf + 6144, 64);
    old = sfv_mr_scatter_element(e.mr, e.buf + 5120, 8);
    memset(&p, 0, sizeof p);
    TS(sfv_channel_endpoint(NULL, &ep), SFV_ERR_INVALID, "channel");
    TS(sfv_channel_endpoint(a, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_channel_handshake(NULL, &ep), SFV_ERR_INVALID, "channel");
    TS(sfv_channel_handshake(a, NULL), SFV_ERR_INVALID, "peer");
    TS(sfv_channel_post_send(a, &g, SIZE_MAX, &p), SFV_ERR_INVALID, "elements");
    TS(sfv_channel_post_send(a, &g, SIZE_MAX / 2 + 1, &p), SFV_ERR_INVALID, "elements");
    TS(sfv_channel_post_send(a, &g, 5, &p), SFV_ERR_INVALID, "5 elements");
    TS(sfv_channel_post_send(a, NULL, 1, &p), SFV_ERR_INVALID, "elements");
    TS(sfv_channel_post_send(NULL, &g, 1, &p), SFV_ERR_INVALID, "channel");
    TS(sfv_channel_post_send(a, &g, 1, NULL), SFV_ERR_INVALID, "pending handle");
    TS(sfv_channel_post_receive(b, &s, SIZE_MAX, &p), SFV_ERR_INVALID, "elements");
    TS(sfv_channel_post_write(a, &g, 1, wraps, &p), SFV_ERR_INVALID, "wraps");
    TS(sfv_channel_post_write(a, &g, 1, sfv_remote_mr_make(0, 1, 1), &p), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "do not fit");
    TS(sfv_channel_post_read(a, &s, 1, wraps, &p), SFV_ERR_INVALID, "wraps");
    TS(sfv_channel_post_send_batch(a, &g, 1, 0, &p), SFV_ERR_INVALID, "batch of 0");
    TS(sfv_channel_post_send_batch(a, &g, 1, SFV_BATCH_MAX + 1, &p), SFV_ERR_INVALID, "batch of 65");
    TS(sfv_channel_post_send_batch(a, &g, SIZE_MAX, 2, &p), SFV_ERR_INVALID, "elements");
    TS(sfv_channel_post_send_batch(a, &g, SIZE_MAX / 2 + 1, 2, &p), SFV_ERR_INVALID, "elements");
    TS(sfv_channel_post_send_batch(a, NULL, 1, 1, &p), SFV_ERR_INVALID, "elements");
    TS(sfv_channel_post_write_batch(a, &g, 1, 1, NULL, &p), SFV_ERR_INVALID, "remote regions");
    TS(sfv_channel_post_read_batch(a, &s, 1, 1, NULL, &p), SFV_ERR_INVALID, "remote regions");
    TS(sfv_channel_post_receive_batch(b, s2, 1, SIZE_MAX, ps), SFV_ERR_INVALID, "batch of");
    TS(sfv_channel_post_receive_batch(b, s2, SIZE_MAX, 2, ps), SFV_ERR_INVALID, "elements");
    TS(sfv_channel_post_receive_batch(b, s2, 1, 2, NULL), SFV_ERR_INVALID, "pending handle");
    TS(sfv_channel_post_sends(a, NULL, 1, &p), SFV_ERR_INVALID, "requests");
    {
        const sfv_send_request sr[2] = {{&g, SIZE_MAX, false, 0}, {NULL, 1, false, 0}};
        const sfv_write_request wr = {&g, 1, {UINT64_MAX, 2, 1}, false, 0};
        const sfv_read_request rr = {&s, SIZE_MAX / 2 + 1, {0, 64, 1}};
        TS(sfv_channel_post_sends(a, &sr[0], 1, &p), SFV_ERR_INVALID, "elements");
        TS(sfv_channel_post_sends(a, &sr[1], 1, &p), SFV_ERR_INVALID, "NULL");
        TS(sfv_channel_post_sends(a, sr, SIZE_MAX, &p), SFV_ERR_INVALID, "batch of");
        TS(sfv_channel_post_writes(a, &wr, 1, &p), SFV_ERR_INVALID, "wraps");
        TS(sfv_channel_post_reads(a, &rr, 1, &p), SFV_ERR_INVALID, "elements");
    }
    TS(sfv_channel_inject(a, NULL, 1), SFV_ERR_INVALID, "NULL");
    TS(sfv_channel_inject(a, e.buf, SIZE_MAX), SFV_ERR_INVALID, "inline limit");
    TS(sfv_channel_inject(a, e.buf, (size_t)UINT32_MAX + 1), SFV_ERR_INVALID, "inline limit");
    TS(sfv_channel_inject_write(a, e.buf, 8, wraps), SFV_ERR_INVALID, "wraps");
    TS(sfv_channel_inject_write(a, e.buf, 8, sfv_remote_mr_make(0, 4, 1)), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "do not fit");
    TS(sfv_channel_inject(NULL, e.buf, 1), SFV_ERR_INVALID, "channel");
    TS(sfv_channel_compare_swap(a, NULL, tf_at(&e, 0), 0, 0, wcs), SFV_ERR_INVALID, "NULL");
    TS(sfv_channel_compare_swap(a, &s, tf_at(&e, 0), 0, 0, wcs), SFV_ERR_INVALID, "8");
    TS(sfv_channel_compare_swap(a, &old, tf_at(&e, 1), 0, 0, wcs), SFV_ERR_INVALID, "aligned");
    TS(sfv_channel_compare_swap(a, &old, sfv_remote_mr_make(0, 7, 1), 0, 0, wcs), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "7 bytes");
    TS(sfv_channel_fetch_add(a, &old, sfv_remote_mr_make(UINT64_MAX - 7, 9, 1), 0, wcs), SFV_ERR_INVALID, "wraps");
    TS(sfv_pending_poll(NULL, wcs), SFV_ERR_INVALID, "NULL");
    TS(sfv_pending_wait(NULL, 0, wcs), SFV_ERR_INVALID, "NULL");
    memset(&p, 0, sizeof p);
    TS(sfv_pending_wait(&p, INT_MIN, wcs), SFV_ERR_INVALID, "not posted");
    TS(sfv_pending_wait_all(NULL, 3, 0, wcs), SFV_ERR_INVALID, "NULL");
    TS(sfv_pending_wait_all(NULL, SIZE_MAX, 0, wcs), SFV_ERR_INVALID, "NULL");
    TS(sfv_pending_wait_all(NULL, 0, INT_MIN, NULL), SFV_OK, "");
    CHECK(!sfv_pending_done(NULL));
    /* the channels still work, and INT_MIN and INT_MAX wait as documented */
    TS(sfv_channel_post_receive_batch(b, s2, 1, 2, ps), SFV_OK, "");
    TS(sfv_channel_post_send(a, &g, 1, &p), SFV_OK, "");
    TS(sfv_pending_wait(&p, INT_MIN, wcs), SFV_OK, "");
    TS(sfv_channel_post_send(a, &g, 1, &p), SFV_OK, "");
    TS(sfv_pending_wait(&p, INT_MAX, wcs), SFV_OK, "");
    TS(sfv_pending_wait_all(ps, 2, INT_MIN, wcs), SFV_OK, "");
    TS(sfv_channel_scope(NULL, ts_scope_ok, NULL, &rep), SFV_ERR_INVALID, "channel");
    TS(sfv_channel_scope(a, NULL, NULL, &rep), SFV_ERR_INVALID, "fn");
    TS(sfv_channel_scope_wc(a, NULL, NULL, NULL, NULL, &rep), SFV_ERR_INVALID, "fn");
    TS(sfv_channel_manual_scope(a, NULL, NULL), SFV_ERR_INVALID, "fn");
    TS(sfv_channel_manual_scope(NULL, ts_scope_ok, NULL), SFV_ERR_INVALID, "channel");
    TS(sfv_channel_scope(a, ts_scope_ok, NULL, NULL), SFV_OK, "");
    TS(sfv_channel_post_send_unsignaled(a, &g, 1), SFV_ERR_INVALID, "inside a scope");
    TS(sfv_channel_post_send_unsignaled(NULL, &g, 1), SFV_ERR_INVALID, "channel");
    TS(sfv_channel_arm(NULL), SFV_ERR_INVALID, "channel");
    TS(sfv_channel_ack_events(NULL), SFV_ERR_INVALID, "channel");
    TS(sfv_channel_arm(a), SFV_ERR_INVALID, "SFV_WAIT_EVENT");
    TS(sfv_channel_reset(NULL), SFV_ERR_INVALID, "channel");
    TS(sfv_context_event_fd(NULL, &fd), SFV_ERR_INVALID, "context");
    TS(sfv_context_event_fd(e.ctx, NULL), SFV_ERR_INVALID, "fd_out");
    TS(sfv_context_events(e.ctx, NULL, 1, &n), SFV_ERR_INVALID, "out");
    TS(sfv_context_events(e.ctx, NULL, 0, &n), SFV_OK, "");
    TS(sfv_context_events(e.ctx, evs, SIZE_MAX, &n), SFV_OK, "");
    TS(sfv_context_events(e.ctx, evs, 1, NULL), SFV_ERR_INVALID, "count");
    TS(sfv_context_events(NULL, evs, 1, &n), SFV_ERR_INVALID, "context");
    CHECK(sfv_channel_broken(NULL, NULL) && !sfv_channel_broken(a, NULL));
    TS(sfv_lease_grant(NULL, e.mr, 0, 8, SFV_ACCESS_REMOTE_READ, &lease), SFV_ERR_INVALID, "channel");
    TS(sfv_lease_grant(a, NULL, 0, 8, SFV_ACCESS_REMOTE_READ, &lease), SFV_ERR_INVALID, "mr");
    TS(sfv_lease_grant(a, e.mr, 0, 8, SFV_ACCESS_REMOTE_READ, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_lease_grant(a, e.mr, 0, 8, SFV_ACCESS_REMOTE_READ, &lease), SFV_ERR_INVALID, "MW_BIND");
    {
        sfv_mr *mw;
        CHECK_OK(sfv_reg_mr_access(e.pd, e.buf, 4096, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_MW_BIND, &mw));
        TS(sfv_lease_grant(a, mw, SIZE_MAX, 2, SFV_ACCESS_REMOTE_READ, &lease), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "not inside");
        TS(sfv_lease_grant(a, mw, 1, SIZE_MAX, SFV_ACCESS_REMOTE_READ, &lease), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS, "not inside");
        TS(sfv_lease_grant(a, mw, 0, 0, SFV_ACCESS_REMOTE_READ, &lease), SFV_ERR_INVALID, "0 bytes");
        TS(sfv_lease_grant(a, mw, 0, 8, UINT_MAX, &lease), SFV_ERR_INVALID, "access");
        TS(sfv_lease_grant(a, mw, 0, 8, 0, &lease), SFV_ERR_INVALID, "access");
        TS(sfv_lease_grant(a, mw, 0, 8, SFV_ACCESS_REMOTE_ATOMIC, &lease), SFV_ERR_INVALID, "desc.access");
        TS(sfv_lease_grant(a, mw, 0, 4096, SFV_ACCESS_REMOTE_READ, &lease), SFV_OK, "");
        TS(sfv_lease_revoke(lease), SFV_OK, "");
        CHECK_OK(sfv_dereg_mr(mw));
    }
    TS(sfv_lease_revoke(NULL), SFV_OK, "");
    CHECK(sfv_lease_remote(NULL).addr == 0 && sfv_lease_remote(NULL).rkey == 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
    TS_DONE();
}

/* SRQs, multi-channels, the exchange's and the node's calls at their limits. */
static void t_sweep_srq_multi_node(void) {
    static const struct { const char *field; size_t off; uint32_t value; } srq_rows[] = {
        {"max_wr", offsetof(sfv_srq_desc, max_wr), UINT32_MAX}, {"max_wr", offsetof(sfv_srq_desc, max_wr), 4097},
        {"max_sge", offsetof(sfv_srq_desc, max_sge), UINT32_MAX}, {"limit", offsetof(sfv_srq_desc, limit), UINT32_MAX},
        {"limit", offsetof(sfv_srq_desc, limit), 256}, {"timeout_ms", offsetof(sfv_srq_desc, timeout_ms), UINT32_MAX},
        {"timeout_ms", offsetof(sfv_srq_desc, timeout_ms), INT_MAX},
    };
    tf_env e;
    sfv_srq *srq;
    sfv_srq_desc sd;
    sfv_scatter_element s;
    sfv_pending p, ps[2];
    sfv_multi_channel *m1, *m2;
    sfv_endpoint eps[2];
    sfv_work_completion wcs[2];
    sfv_scope_report rep;
    sfv_gather_element g;
    sfv_node *node;
    sfv_node_desc nd;
    uint8_t blob[64];
    size_t i, rank, ws;
    tf_open(&e, 8192);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    s = sfv_mr_scatter_element(e.mr, e.buf + 4096, 64);
    for (i = 0; i < COUNT_OF(srq_rows); i++) {
        memset(&sd, 0, sizeof sd);
        memcpy((char *)&sd + srq_rows[i].off, &srq_rows[i].value, 4);
        TS(sfv_create_srq(e.pd, &sd, &srq), SFV_ERR_INVALID, srq_rows[i].field);
        CHECK(srq == NULL);
    }
    TS(sfv_create_srq(NULL, NULL, &srq), SFV_ERR_INVALID, "pd");
    TS(sfv_create_srq(e.pd, NULL, NULL), SFV_ERR_INVALID, "out");
    TS(sfv_create_srq(e.pd, NULL, &srq), SFV_OK, "");
    TS(sfv_srq_set_limit(srq, UINT32_MAX), SFV_ERR_INVALID, "limit");
    TS(sfv_srq_set_limit(srq, 256), SFV_ERR_INVALID, "limit");
    TS(sfv_srq_set_limit(NULL, 1), SFV_ERR_INVALID, "srq");
    TS(sfv_srq_post_receive(srq, &s, SIZE_MAX, &p), SFV_ERR_INVALID, "elements");
    TS(sfv_srq_post_receive(srq, &s, 1, NULL), SFV_ERR_INVALID, "pending handle");
    TS(sfv_srq_post_receive(NULL, &s, 1, &p), SFV_ERR_INVALID, "SRQ");
    TS(sfv_srq_post_receive_batch(srq, &s, 1, SIZE_MAX, ps), SFV_ERR_INVALID, "batch of");
    TS(sfv_srq_post_receive_batch(srq, &s, SIZE_MAX, 2, ps), SFV_ERR_INVALID, "elements");
    CHECK(sfv_srq_outstanding(srq) == 0 && sfv_srq_outstanding(NULL) == 0);
    CHECK_OK(sfv_destroy_srq(srq));
    tf_mc_pair(&e, 200, &m1, &m2);
    CHECK(sfv_multi_channel_peer(m1, SIZE_MAX) == NULL && sfv_multi_channel_len(NULL) == 0);
    TS(sfv_multi_channel_endpoints(m1, eps, 1), SFV_ERR_INVALID, "1 endpoints");
    TS(sfv_multi_channel_endpoints(m1, eps, SIZE_MAX), SFV_ERR_INVALID, "endpoints");
    TS(sfv_multi_channel_endpoints(m1, NULL, 2), SFV_ERR_INVALID, "out");
    TS(sfv_multi_channel_endpoints(NULL, eps, 2), SFV_ERR_INVALID, "multi-channel");
    TS(sfv_multi_channel_handshake(m1, eps, SIZE_MAX), SFV_ERR_INVALID, "endpoints");
    TS(sfv_multi_channel_handshake(m1, NULL, 2), SFV_ERR_INVALID, "endpoints");
    TS(sfv_multi_channel_handshake(NULL, eps, 2), SFV_ERR_INVALID, "multi-channel");
    {
        sfv_peer_send ps1 = {SIZE_MAX, &g, 1, false, 0};
        const size_t peers[2] = {0, SIZE_MAX};
        TS(sfv_multi_channel_scatter_send(m1, &ps1, 1, wcs), SFV_ERR_INVALID, "peer");
        TS(sfv_multi_channel_scatter_send(m1, NULL, 1, wcs), SFV_ERR_INVALID, "requests");
        TS(sfv_multi_channel_scatter_send(m1, &ps1, SIZE_MAX, wcs), SFV_ERR_INVALID, "requests");
        TS(sfv_multi_channel_scatter_send(NULL, &ps1, 1, wcs), SFV_ERR_INVALID, "multi-channel");
        ps1.peer = 0;
        ps1.n = SIZE_MAX;
        TS(sfv_multi_channel_scatter_send(m1, &ps1, 1, wcs), SFV_ERR_INVALID, "elements");
        TS(sfv_multi_channel_multicast_send(m1, peers, 2, &g, 1, wcs), SFV_ERR_INVALID, "peer");
        TS(sfv_multi_channel_multicast_send(m1, NULL, 2, &g, 1, wcs), SFV_ERR_INVALID, "NULL");
        TS(sfv_multi_channel_multicast_send(m1, peers, SIZE_MAX, &g, 1, wcs), SFV_ERR_INVALID, "requests");
        TS(sfv_multi_channel_multicast_send(m1, peers, 1, &g, SIZE_MAX, wcs), SFV_ERR_INVALID, "elements");
    }
    TS(sfv_multi_channel_scope(m1, NULL, NULL, &rep), SFV_ERR_INVALID, "fn");
    TS(sfv_multi_channel_scope(NULL, ts_mscope_ok, NULL, &rep), SFV_ERR_INVALID, "multi-channel");
    TS(sfv_multi_channel_manual_scope(m1, NULL, NULL), SFV_ERR_INVALID, "fn");
    TS(sfv_multi_channel_scope(m1, ts_mscope_ok, NULL, NULL), SFV_OK, "");
    CHECK_OK(sfv_destroy_multi_channel(m1));
    CHECK_OK(sfv_destroy_multi_channel(m2));
    {
        sfv_net_node nn[2] = {{"127.0.0.1", 1, 0, NULL}, {"", 1, 1, NULL}};
        const sfv_exchange_desc xd = {NULL, SIZE_MAX, 0, false};
        TS(sfv_net_config_check(nn, 2), SFV_ERR_INVALID, "rank 1");
        TS(sfv_net_config_check(NULL, 2), SFV_ERR_INVALID, "nodes");
        TS(sfv_net_config_check(nn, 0), SFV_ERR_INVALID, "empty");
        TS(sfv_net_config_check(nn, SIZE_MAX), SFV_ERR_INVALID, "ranks");
        nn[1].host = NULL;
        TS(sfv_net_config_check(nn, 2), SFV_ERR_INVALID, "rank 1");
        nn[1].host = "x";
        nn[1].port = 0;
        TS(sfv_net_config_check(nn, 2), SFV_ERR_INVALID, "rank 1");
        nn[1].port = 1;
        nn[1].rank = UINT32_MAX;
        TS(sfv_net_config_check(nn, 2), SFV_ERR_INVALID, "rank 4294967295");
        nn[1].rank = 1;
        TS(sfv_exchange_all(nn, 2, 2, blob, 1, blob, 100), SFV_ERR_INVALID, "rank 2 of 2");
        TS(sfv_exchange_all(nn, 2, SIZE_MAX, blob, 1, blob, 100), SFV_ERR_INVALID, "of 2");
        TS(sfv_exchange_all(nn, 2, 0, NULL, 1, blob, 100), SFV_ERR_INVALID, "mine");
        TS(sfv_exchange_all(nn, 2, 0, blob, 1, NULL, 100), SFV_ERR_INVALID, "all");
        TS(sfv_exchange_all(nn, 2, 0, blob, SIZE_MAX, blob, 100), SFV_ERR_INVALID, "64 MiB");
        TS(sfv_exchange_all(nn, 2, 0, blob, (64u << 20) + 1, blob, 100), SFV_ERR_INVALID, "64 MiB");
        TS(sfv_exchange_all(nn, SIZE_MAX, 0, blob, 1, blob, 100), SFV_ERR_INVALID, "ranks");
        TS(sfv_exchange_all(NULL, 2, 0, blob, 1, blob, 100), SFV_ERR_INVALID, "nodes");
        TS(sfv_exchange_all_keyed(nn, 2, 0, blob, 1, blob, &xd, 100), SFV_ERR_INVALID, "key");
        TS(sfv_exchange_allgather(NULL, blob, blob, 1), SFV_ERR_INVALID, "user");
        TS(sfv_launcher_rank(NULL, &ws), SFV_ERR_INVALID, "rank");
        TS(sfv_launcher_rank(&rank, NULL), SFV_ERR_INVALID, "world_size");
    }
    memset(&nd, 0, sizeof nd);
    nd.world_size = 4097;
    TS(sfv_create_node(e.pd, &nd, &node), SFV_ERR_INVALID, "world_size");
    nd.world_size = SIZE_MAX;
    TS(sfv_create_node(e.pd, &nd, &node), SFV_ERR_INVALID, "world_size");
    nd.world_size = 2;
    nd.rank = SIZE_MAX;
    TS(sfv_create_node(e.pd, &nd, &node), SFV_ERR_INVALID, "rank");
    nd.rank = 0;
    nd.barrier = (sfv_barrier_kind)255;
    TS(sfv_create_node(e.pd, &nd, &node), SFV_ERR_INVALID, "barrier");
    nd.barrier = (sfv_barrier_kind)-1;
    TS(sfv_create_node(e.pd, &nd, &node), SFV_ERR_INVALID, "barrier");
    nd.barrier = SFV_BARRIER_DEFAULT;
    nd.channel.wait_mode = (sfv_wait_mode)-1;
    TS(sfv_create_node(e.pd, &nd, &node), SFV_ERR_INVALID, "wait_mode");
    nd.channel.wait_mode = SFV_WAIT_DEFAULT;
    TS(sfv_create_node(NULL, &nd, &node), SFV_ERR_INVALID, "pd");
    TS(sfv_create_node(e.pd, NULL, &node), SFV_ERR_INVALID, "desc");
    TS(sfv_create_node(e.pd, &nd, NULL), SFV_ERR_INVALID, "out");
    nd.world_size = 1;
    TS(sfv_create_node(e.pd, &nd, &node), SFV_OK, "");
    {
        uint8_t nb[SFV_NODE_ENDPOINT_SIZE(1)];
        size_t peers[2] = {0, 5};
        TS(sfv_node_endpoint(node, nb, sizeof nb - 1), SFV_ERR_INVALID, "71 bytes");
        TS(sfv_node_endpoint(node, nb, SIZE_MAX), SFV_ERR_INVALID, "bytes");
        TS(sfv_node_endpoint(node, NULL, sizeof nb), SFV_ERR_INVALID, "out");
        TS(sfv_node_endpoint(NULL, nb, sizeof nb), SFV_ERR_INVALID, "node");
        TS(sfv_node_handshake(node, nb, SIZE_MAX), SFV_ERR_INVALID, "bytes");
        TS(sfv_node_handshake(node, NULL, sizeof nb), SFV_ERR_INVALID, "NULL");
        TS(sfv_node_endpoint(node, nb, sizeof nb), SFV_OK, "");
        TS(sfv_node_handshake(node, nb, sizeof nb), SFV_OK, "");
        TS(sfv_node_barrier(node, peers + 1, 1, 100), SFV_ERR_INVALID, "rank 5");
        TS(sfv_node_barrier(node, peers, 0, 100), SFV_ERR_INVALID, "empty");
        TS(sfv_node_barrier(node, NULL, SIZE_MAX, 100), SFV_OK, "");
        TS(sfv_node_barrier(node, peers, 1, INT_MIN), SFV_OK, "");
        TS(sfv_node_barrier(node, peers, 1, INT_MAX), SFV_OK, "");
        TS(sfv_node_barrier_unchecked(node, peers + 1, 1, 100), SFV_ERR_INVALID, "rank 5");
        TS(sfv_node_barrier(NULL, peers, 1, 100), SFV_ERR_INVALID, "node");
        TS(sfv_node_connect(node, NULL, 100), SFV_ERR_INVALID, "nodes");
        TS(sfv_node_connect_with(node, NULL, NULL), SFV_ERR_INVALID, "allgather");
        TS(sfv_node_connect_keyed(NULL, NULL, NULL, 100), SFV_ERR_INVALID, "node");
    }
    CHECK_OK(sfv_destroy_node(node));
    tf_close(&e);
    TS_DONE();
}

/* ---- bug: the exchange sent its `mine` again after its own `all` had overwritten it ---- */
/* sfv_exchange_all: "all[r * size ..] holds rank r's, its own included", for every `mine` and
   `all` the types allow, one aliasing the other included (mine in place, at its own block of all,
   works: the exchange copies it there first). A rank whose `mine` lies in the block of a lower
   rank (all itself, say, at rank 1) took that rank's bytes into it, then sent them to every higher
   rank as its own, under a valid tag: the higher ranks held rank 0's bytes in rank 1's place. */
static int te_rank(sfv_net_node *nodes, size_t rank, bool alias) {
    char buf[3 * 16], mine[16], *m = mine;
    sfv_result r;
    memset(buf, 0, sizeof buf);
    snprintf(mine, sizeof mine, "rank %zu", rank);
    if (alias) { /* its bytes at the start of all: rank 0's block */
        memcpy(buf, mine, sizeof mine);
        m = buf;
    }
    r = sfv_exchange_all(nodes, 3, rank, m, 16, buf, 5000);
    if (r) {
        fprintf(stderr, "    rank %zu: %s: %s\n", rank, sfv_result_str(r), sfv_last_error()->message);
        return 2;
    }
    if (strcmp(buf, "rank 0") || strcmp(buf + 16, "rank 1") || strcmp(buf + 32, "rank 2")) {
        fprintf(stderr, "    rank %zu holds \"%s\", \"%s\", \"%s\"\n", rank, buf, buf + 16, buf + 32);
        return 1;
    }
    return 0;
}
static void t_exchange_mine_aliasing_all(void) {
    sfv_net_node nodes[3] = {{"127.0.0.1", 0, 0, NULL}, {"127.0.0.1", 0, 1, NULL}, {"127.0.0.1", 0, 2, NULL}};
    pid_t pid[2];
    int st[2], mine_rc;
    size_t i;
    unsetenv("SAFEVERBS_JOB_KEY"); /* (loopback: no key needed) */
    for (i = 0; i < 3; i++) nodes[i].port = tf_free_port();
    for (i = 0; i < 2; i++) {
        pid[i] = fork();
        CHECK(pid[i] >= 0);
        if (pid[i] == 0) _exit(te_rank(nodes, i, i == 1));
    }
    mine_rc = te_rank(nodes, 2, false);
    for (i = 0; i < 2; i++) CHECK(waitpid(pid[i], &st[i], 0) == pid[i]);
    CHECK(WIFEXITED(st[0]) && WEXITSTATUS(st[0]) == 0);
    CHECK(WIFEXITED(st[1]) && WEXITSTATUS(st[1]) == 0);
    CHECK_EQ(mine_rc, 0);
}

static const harness_test TESTS[] = {
    TEST(t_sweep_devices_and_memory, 30),
    TEST(t_sweep_channel_desc, 30),
    TEST(t_sweep_channel_calls, 30),
    TEST(t_sweep_srq_multi_node, 30),
    TEST(t_exchange_mine_aliasing_all, 30),
};
int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
