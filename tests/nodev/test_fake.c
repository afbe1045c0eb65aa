/* test_fake.c - the device-free tier: what needs no NIC (codecs, remote-region arithmetic,
   result strings, desc validation) and the channel itself on the fake NIC of fake_verbs.c, on
   the host, in a fraction of a second. Built without libibverbs (make check-nodev). */
#include "fake_env.h"

#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>

/* ---- no device ----------------------------------------------------------------------------- */
static void t_result_strings(void) {
    int s;
    CHECK(strcmp(sfv_result_str(SFV_OK), "SFV_OK: success") == 0);
    CHECK(strncmp(sfv_result_str(SFV_ERR_TIMEOUT), "SFV_ERR_TIMEOUT: ", 17) == 0);
    CHECK(strncmp(sfv_result_str(SFV_ERR_SCOPE_AUTOPOLL), "SFV_ERR_SCOPE_AUTOPOLL: ", 24) == 0);
    CHECK(strncmp(sfv_result_str((sfv_result)-99), "SFV_?", 5) == 0);
    for (s = SFV_ERR_SCOPE_AUTOPOLL; s <= SFV_NOT_DONE; s++) CHECK(strncmp(sfv_result_str((sfv_result)s), "SFV_", 4) == 0);
    for (s = SFV_WC_SUCCESS; s <= SFV_WC_TM_RNDV_INCOMPLETE; s++) {
        CHECK(strcmp(sfv_wc_status_str((sfv_wc_status)s), "UNKNOWN_STATUS") != 0);
        CHECK(sfv_wc_status_hint((sfv_wc_status)s)[0]);
        CHECK(strcmp(sfv_work_error_class_str(sfv_wc_status_class((sfv_wc_status)s)), "") != 0);
    }
    CHECK(strcmp(sfv_wc_status_str(SFV_WC_LOC_LEN_ERR), "LOC_LEN_ERR") == 0);
    CHECK(strcmp(sfv_wc_status_str((sfv_wc_status)999), "UNKNOWN_STATUS") == 0);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_SUCCESS), SFV_WORK_ERROR_NONE);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_WR_FLUSH_ERR), SFV_WORK_ERROR_LOCAL_RESOURCE);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_REM_ACCESS_ERR), SFV_WORK_ERROR_REMOTE);
    CHECK_EQ(sfv_wc_status_class(SFV_WC_RETRY_EXC_ERR), SFV_WORK_ERROR_TRANSPORT);
    CHECK_EQ(sfv_wc_status_class((sfv_wc_status)999), SFV_WORK_ERROR_UNKNOWN);
    CHECK(strcmp(sfv_port_state_str(SFV_PORT_ACTIVE), "ACTIVE") == 0);
    CHECK(strcmp(sfv_port_state_str((sfv_port_state)77), "UNKNOWN") == 0);
    CHECK_EQ(sfv_result_from_errno(0), SFV_OK);
    CHECK_EQ(sfv_result_from_errno(EINVAL), SFV_ERR_INVALID);
    CHECK_EQ(sfv_result_from_errno(EAGAIN), SFV_ERR_RESOURCE);
    CHECK_EQ(sfv_result_from_errno(EACCES), SFV_ERR_PERMISSION);
    CHECK_EQ(sfv_result_from_errno(ENODEV), SFV_ERR_NOT_FOUND);
    CHECK_EQ(sfv_result_from_errno(EOPNOTSUPP), SFV_ERR_UNSUPPORTED);
    CHECK_EQ(sfv_result_from_errno(EIO), SFV_ERR_DRIVER);
    CHECK(sfv_last_error() != NULL && sfv_last_error()->verb != NULL);
}

static void t_endpoint_codec(void) {
    sfv_endpoint e, d;
    uint8_t b[SFV_ENDPOINT_ENCODED_SIZE], c[SFV_ENDPOINT_ENCODED_SIZE];
    memset(&e, 0, sizeof e);
    e.qpn = 0xABCDEF;
    e.lid = 0x1234;
    e.psn = 0x654321;
    e.mtu = 2048;
    e.rd_atomic = 16;
    e.has_gid = true;
    e.gid.raw[0] = 0xfe;
    e.gid.raw[15] = 7;
    sfv_endpoint_encode(&e, b);
    CHECK(b[0] == 'S' && b[1] == 'E' && b[2] == 2 && b[3] == 1);
    CHECK_OK(sfv_endpoint_decode(b, sizeof b, &d));
    CHECK(memcmp(&d.gid, &e.gid, sizeof d.gid) == 0);
    CHECK(d.qpn == e.qpn && d.lid == e.lid && d.psn == e.psn && d.mtu == e.mtu && d.rd_atomic == 16 && d.has_gid);
    /* version 1: no read depth */
    e.rd_atomic = 0;
    e.has_gid = false;
    memset(&e.gid, 0, sizeof e.gid);
    sfv_endpoint_encode(&e, b);
    CHECK_EQ(b[2], 1);
    CHECK_OK(sfv_endpoint_decode(b, sizeof b, &d));
    CHECK(d.rd_atomic == 0 && !d.has_gid);
    /* refusals, each with *out zeroed */
    CHECK_RESULT(sfv_endpoint_decode(b, sizeof b - 1, &d), SFV_ERR_INVALID);
    CHECK_EQ(d.qpn, 0);
    CHECK_RESULT(sfv_endpoint_decode(NULL, sizeof b, &d), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_endpoint_decode(b, sizeof b, NULL), SFV_ERR_INVALID);
#define TF_BAD(i, v)                                                      \
    do {                                                                  \
        memcpy(c, b, sizeof c);                                           \
        c[i] = (uint8_t)(v);                                              \
        CHECK_RESULT(sfv_endpoint_decode(c, sizeof c, &d), SFV_ERR_INVALID); \
        CHECK(strcmp(sfv_last_error()->verb, "sfv_endpoint_decode") == 0); \
    } while (0)
    TF_BAD(0, 'X');             /* magic */
    TF_BAD(2, 3);               /* version */
    TF_BAD(3, 2);               /* flags */
    TF_BAD(12, 1);              /* v1 with a read depth byte */
    TF_BAD(20, 1);              /* GID bytes without the flag */
    TF_BAD(10, 0);              /* MTU 2048 -> 0: not an MTU */
    memcpy(c, b, sizeof c);
    c[4] = c[5] = c[6] = c[7] = 0; /* QPN 0 */
    CHECK_RESULT(sfv_endpoint_decode(c, sizeof c, &d), SFV_ERR_INVALID);
    c[4] = 1;                      /* QPN over 24 bits */
    CHECK_RESULT(sfv_endpoint_decode(c, sizeof c, &d), SFV_ERR_INVALID);
    memcpy(c, b, sizeof c);
    c[2] = 2; /* version 2 with read depth 0 */
    CHECK_RESULT(sfv_endpoint_decode(c, sizeof c, &d), SFV_ERR_INVALID);
#undef TF_BAD
}

static void t_remote_mr_codec(void) {
    uint8_t b[SFV_REMOTE_MR_ENCODED_SIZE], c[SFV_REMOTE_MR_ENCODED_SIZE];
    sfv_remote_mr r = sfv_remote_mr_make(0x1122334455667788ull, 4096, 0xCAFEBABE), d;
    sfv_remote_mr_encode(r, b);
    CHECK(b[0] == 'S' && b[1] == 'R' && b[2] == 1 && b[3] == 0 && b[4] == 0x11 && b[23] == 0xBE);
    CHECK_OK(sfv_remote_mr_decode(b, sizeof b, &d));
    CHECK(d.addr == r.addr && d.length == r.length && d.rkey == r.rkey);
    CHECK_RESULT(sfv_remote_mr_decode(b, sizeof b - 1, &d), SFV_ERR_INVALID);
    CHECK_EQ(d.rkey, 0);
    CHECK_RESULT(sfv_remote_mr_decode(NULL, 24, &d), SFV_ERR_INVALID);
    memcpy(c, b, sizeof c); c[1] = 'X';
    CHECK_RESULT(sfv_remote_mr_decode(c, sizeof c, &d), SFV_ERR_INVALID);
    memcpy(c, b, sizeof c); c[2] = 2;
    CHECK_RESULT(sfv_remote_mr_decode(c, sizeof c, &d), SFV_ERR_INVALID);
    memcpy(c, b, sizeof c); c[3] = 1;
    CHECK_RESULT(sfv_remote_mr_decode(c, sizeof c, &d), SFV_ERR_INVALID);
    sfv_remote_mr_encode(sfv_remote_mr_make(UINT64_MAX - 10, 12, 1), c); /* addr + length wraps */
    CHECK_RESULT(sfv_remote_mr_decode(c, sizeof c, &d), SFV_ERR_INVALID);
    sfv_remote_mr_encode(sfv_remote_mr_make(UINT64_MAX - 10, 11, 1), c); /* ends exactly at the top */
    CHECK_OK(sfv_remote_mr_decode(c, sizeof c, &d));
    sfv_remote_mr_encode(sfv_remote_mr_make(5, 0, 1), c);
    CHECK_OK(sfv_remote_mr_decode(c, sizeof c, &d));
    CHECK_EQ(d.length, 0);
}

struct tf_msg { uint32_t a; uint64_t seq; char text[20]; };

static void t_remote_arith(void) {
    sfv_remote_mr r = sfv_remote_mr_make(1000, 100, 9), o;
    CHECK_OK(sfv_remote_mr_slice(r, 10, 90, &o));
    CHECK(o.addr == 1010 && o.length == 90 && o.rkey == 9);
    CHECK_RESULT(sfv_remote_mr_slice(r, 10, 91, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK(o.addr == 0 && o.length == 0 && o.rkey == 0);
    CHECK_RESULT(sfv_remote_mr_slice(r, 101, 0, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_remote_mr_slice(r, UINT64_MAX, 2, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_OK(sfv_remote_mr_slice(r, 100, 0, &o));
    CHECK_OK(sfv_remote_mr_sub(r, 40, &o));
    CHECK(o.addr == 1040 && o.length == 60);
    CHECK_RESULT(sfv_remote_mr_sub(r, 101, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_remote_mr_slice(r, 0, 1, NULL), SFV_ERR_INVALID);
    o = sfv_remote_mr_sub_unchecked(r, 150);
    CHECK(o.addr == 1150 && o.length == 0);
    o = sfv_remote_mr_sub_unchecked(sfv_remote_mr_make(UINT64_MAX - 1, 5, 1), 10);
    CHECK(o.addr == UINT64_MAX && o.length == 0);
    o = sfv_remote_mr_slice_unchecked(r, 500, 7);
    CHECK(o.addr == 1500 && o.length == 7);
    /* arrays of 16-byte items: item 3's bytes 4..8 */
    CHECK_OK(sfv_remote_mr_array_field(r, 16, 3, 4, 4, &o));
    CHECK(o.addr == 1052 && o.length == 4);
    CHECK_RESULT(sfv_remote_mr_array_field(r, 16, 6, 4, 4, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS); /* 100..104 */
    CHECK_OK(sfv_remote_mr_array_field(r, 16, 5, 12, 4, &o));  /* 92..96 */
    CHECK_RESULT(sfv_remote_mr_array_field(r, 16, UINT64_MAX / 8, 0, 4, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_remote_mr_array_field(r, 16, 0, 10, 8, &o), SFV_ERR_INVALID); /* field outside its item */
    CHECK_RESULT(sfv_remote_mr_array_field(r, 0, 0, 0, 0, &o), SFV_ERR_INVALID);
    o = sfv_remote_mr_array_field_unchecked(r, 16, UINT64_MAX, 0, 4);
    CHECK(o.addr == UINT64_MAX && o.length == 1); /* cut to what fits below 2^64 */
    {   /* the top of the address space: the last byte's offset is a field's like any other; an
           empty region at 2^64 has no address; a product or sum past 2^64 is past any region */
        const sfv_remote_mr all = sfv_remote_mr_make(0, UINT64_MAX, 1), top = sfv_remote_mr_make(UINT64_MAX - 5, 6, 7);
        CHECK_OK(sfv_remote_mr_array_field(all, 1, UINT64_MAX, 0, 0, &o));
        CHECK(o.addr == UINT64_MAX && o.length == 0);
        CHECK_OK(sfv_remote_mr_array_field(all, 1, UINT64_MAX - 1, 0, 1, &o));
        CHECK(o.addr == UINT64_MAX - 1 && o.length == 1);
        CHECK_RESULT(sfv_remote_mr_array_field(all, 2, UINT64_MAX / 2 + 1, 0, 0, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
        CHECK_RESULT(sfv_remote_mr_array_field(all, 2, UINT64_MAX / 2, 2, 0, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
        CHECK_OK(sfv_remote_mr_slice(all, UINT64_MAX, 0, &o));
        CHECK_OK(sfv_remote_mr_sub(top, 5, &o));
        CHECK(o.addr == UINT64_MAX && o.length == 1);
        CHECK_RESULT(sfv_remote_mr_sub(top, 6, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS); /* empty, at 2^64 */
        CHECK_RESULT(sfv_remote_mr_slice(top, 6, 0, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
        CHECK(o.addr == 0 && o.length == 0 && o.rkey == 0);
    }
    /* the struct macros */
    r = sfv_remote_mr_make(4096, sizeof(struct tf_msg) * 4, 3);
    CHECK_OK(SFV_REMOTE_STRUCT_FIELD(r, struct tf_msg, seq, &o));
    CHECK(o.addr == 4096 + offsetof(struct tf_msg, seq) && o.length == 8);
    CHECK_OK(SFV_REMOTE_ARRAY_FIELD(r, struct tf_msg, 3, &o));
    CHECK(o.addr == 4096 + 3 * sizeof(struct tf_msg) && o.length == sizeof(struct tf_msg));
    CHECK_RESULT(SFV_REMOTE_ARRAY_FIELD(r, struct tf_msg, 4, &o), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_OK(SFV_REMOTE_STRUCT_ARRAY_FIELD(r, struct tf_msg, 2, text, &o));
    CHECK(o.addr == 4096 + 2 * sizeof(struct tf_msg) + offsetof(struct tf_msg, text) && o.length == 20);
    o = SFV_REMOTE_STRUCT_ARRAY_FIELD_UNCHECKED(r, struct tf_msg, 9, seq);
    CHECK(o.addr == 4096 + 9 * sizeof(struct tf_msg) + 8);
    o = SFV_REMOTE_STRUCT_FIELD_UNCHECKED(r, struct tf_msg, a);
    CHECK(o.addr == 4096 && o.length == 4);
    o = SFV_REMOTE_ARRAY_FIELD_UNCHECKED(r, struct tf_msg, 1);
    CHECK(o.addr == 4096 + sizeof(struct tf_msg));
}

/* ---- the fake device ----------------------------------------------------------------------- */
static void t_devices(void) {
    sfv_device_list *l;
    sfv_context *c;
    sfv_port_attr pa;
    sfv_gid_entry g;
    uint64_t guid;
    uint32_t gi;
    CHECK_OK(sfv_get_device_list(&l));
    CHECK_EQ(sfv_device_list_len(l), 2);
    CHECK(strcmp(sfv_device_list_name(l, 1), "fake1") == 0);
    CHECK(sfv_device_list_name(l, 2) == NULL);
    CHECK_OK(sfv_device_list_guid(l, 1, &guid));
    CHECK(guid == 0x0002c90300a0b001ull && sfv_guid_oui(guid) == 0x0002c9 && !sfv_guid_is_reserved(guid));
    CHECK_RESULT(sfv_device_list_guid(l, 2, &guid), SFV_ERR_NOT_FOUND);
    CHECK_RESULT(sfv_open_device_at(l, 2, &c), SFV_ERR_NOT_FOUND);
    CHECK_OK(sfv_open_device_at(l, 1, &c));
    sfv_free_device_list(l);
    CHECK(strcmp(sfv_context_name(c), "fake1") == 0);
    CHECK_EQ(sfv_context_numa_node(c), -1);
    CHECK_OK(sfv_context_bind_thread_to_numa(c, false));
    CHECK_RESULT(sfv_context_bind_thread_to_numa(c, true), SFV_ERR_NOT_FOUND);
    CHECK_OK(sfv_query_port(c, 1, &pa));
    CHECK(pa.state == SFV_PORT_ACTIVE && pa.active_mtu == 1024 && pa.max_mtu == 4096 &&
          pa.link_layer == SFV_LINK_LAYER_ETHERNET && pa.gid_tbl_len == 4);
    CHECK_RESULT(sfv_query_port(c, 2, &pa), SFV_ERR_INVALID);
    CHECK_OK(sfv_query_gid(c, 1, 1, &g));
    CHECK(g.type == SFV_GID_TYPE_ROCE_V2 && sfv_gid_is_ipv4(&g.gid) && sfv_gid_preference(&g) == 4 && g.ifindex == 3);
    CHECK_OK(sfv_query_gid(c, 1, 0, &g));
    CHECK_EQ(sfv_gid_preference(&g), 2);
    CHECK_RESULT(sfv_query_gid(c, 1, 2, &g), SFV_ERR_NOT_FOUND); /* empty */
    CHECK_RESULT(sfv_query_gid(c, 1, 9, &g), SFV_ERR_NOT_FOUND); /* beyond the table */
    CHECK_OK(sfv_choose_gid(c, 1, &gi));
    CHECK_EQ(gi, 1);
    sfv_close_device(c);
    CHECK_RESULT(sfv_open_device("nosuch", &c), SFV_ERR_NOT_FOUND);
    CHECK(c == NULL);
    CHECK_OK(sfv_open_device("fake0", &c));
    sfv_close_device(c);
    /* InfiniBand: LIDs and one IB GID */
    fk_set_link_layer(1);
    CHECK_OK(sfv_open_device(NULL, &c));
    CHECK_OK(sfv_query_port(c, 1, &pa));
    CHECK(pa.link_layer == SFV_LINK_LAYER_INFINIBAND && pa.lid == 1);
    CHECK_OK(sfv_choose_gid(c, 1, &gi));
    CHECK_EQ(gi, 0);
    sfv_close_device(c);
    /* a port that is down */
    fk_set_port_state(1);
    CHECK_RESULT(sfv_open_device(NULL, &c), SFV_ERR_RESOURCE);
    fk_reset();
    CHECK_EQ(fk_live_total(), 0);
}

static void t_elements(void) {
    tf_env e;
    sfv_gather_element g;
    sfv_scatter_element s;
    sfv_mr *other;
    tf_open(&e, 256);
    CHECK(sfv_mr_encloses(e.mr, e.buf, 256) && sfv_mr_encloses(e.mr, e.buf + 256, 0) && !sfv_mr_encloses(e.mr, e.buf + 1, 256));
    CHECK_OK(sfv_mr_gather_element_checked(e.mr, e.buf + 10, 20, &g));
    CHECK(g.addr == (uint64_t)(uintptr_t)(e.buf + 10) && g.length == 20 && g.lkey == sfv_mr_lkey(e.mr));
    CHECK_RESULT(sfv_mr_scatter_element_checked(e.mr, e.buf + 250, 7, &s), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK(s.addr == 0 && s.length == 0);
    CHECK_RESULT(sfv_mr_scatter_element_checked(e.mr, e.buf, (size_t)UINT32_MAX + 1, &s), SFV_ERR_SLICE_TOO_BIG);
    CHECK_RESULT(sfv_mr_gather_element_checked(NULL, e.buf, 1, &g), SFV_ERR_INVALID);
    g = sfv_mr_gather_element_unchecked(e.mr, e.buf + 300, 5);
    CHECK(g.length == 5);
#if SFV_DEBUG
    CHECK_ABORTS(sfv_mr_gather_element(e.mr, e.buf + 200, 100));
#endif
    CHECK(sfv_mr_lkey(e.mr) != sfv_mr_rkey(e.mr));
    CHECK(sfv_mr_length(e.mr) == 256 && sfv_mr_addr(e.mr) == (uint64_t)(uintptr_t)e.buf && sfv_mr_pd(e.mr) == e.pd);
    CHECK_RESULT(sfv_reg_mr_access(e.pd, e.buf, 16, SFV_ACCESS_REMOTE_WRITE, &other), SFV_ERR_INVALID);
    CHECK(other == NULL);
    CHECK_RESULT(sfv_reg_mr_local(e.pd, NULL, 16, &other), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_reg_mr_local(e.pd, e.buf, 0, &other), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_reg_dmabuf_mr_local(e.pd, 3, 5, 16, 6, &other), SFV_ERR_INVALID); /* page offsets differ */
    CHECK_RESULT(sfv_reg_dmabuf_mr_local(e.pd, 3, 0, 16, 0, &other), SFV_ERR_UNSUPPORTED); /* the fake has no DMA-BUF */
    CHECK(strcmp(sfv_last_error()->verb, "ibv_reg_dmabuf_mr") == 0);
    tf_close(&e);
}

static void t_desc_validation(void) {
    tf_env e;
    sfv_channel_desc d, o;
    sfv_channel *ch;
    tf_open(&e, 64);
    CHECK_OK(sfv_channel_desc_resolve(e.pd, NULL, &o));
    CHECK(o.port == 1 && o.max_send_wr == 128 && o.max_recv_wr == 128 && o.cq_entries == 256 && o.max_send_sge == 4 &&
          o.max_recv_sge == 4 && o.gid_index_set && o.gid_index == 1 && o.path_mtu == 1024 && o.min_rnr_timer == 12 &&
          o.ack_timeout == 14 && o.ack_retries == 6 && o.rnr_retries == 7 && o.max_rd_atomic == 16 &&
          o.timeout_ms == 10000 && o.wait_mode == SFV_WAIT_BUSY &&
          o.access == (SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ));
#define TF_REFUSED(field, value, want)                                                  \
    do {                                                                                \
        memset(&d, 0, sizeof d);                                                        \
        d.field = value;                                                                \
        CHECK_RESULT(sfv_channel_desc_resolve(e.pd, &d, &o), want);                     \
        CHECK_RESULT(sfv_create_channel(e.pd, &d, &ch), want);                          \
        CHECK(ch == NULL);                                                              \
        if (want == SFV_ERR_INVALID) CHECK(strstr(sfv_last_error()->message, #field)); \
    } while (0)
    TF_REFUSED(port, 2, SFV_ERR_INVALID);
    TF_REFUSED(max_send_wr, 5000, SFV_ERR_INVALID);
    TF_REFUSED(max_recv_wr, 5000, SFV_ERR_INVALID);
    TF_REFUSED(max_send_sge, 17, SFV_ERR_INVALID);
    TF_REFUSED(max_recv_sge, 17, SFV_ERR_INVALID);
    TF_REFUSED(cq_entries, 10, SFV_ERR_INVALID);
    TF_REFUSED(max_inline_data, 65537, SFV_ERR_INVALID);
    TF_REFUSED(access, SFV_ACCESS_MW_BIND, SFV_ERR_INVALID);
    TF_REFUSED(path_mtu, 4096, SFV_ERR_INVALID); /* above the active MTU */
    TF_REFUSED(path_mtu, 1000, SFV_ERR_INVALID);
    TF_REFUSED(send_psn, 1u << 24, SFV_ERR_INVALID);
    TF_REFUSED(min_rnr_timer, 32, SFV_ERR_INVALID);
    TF_REFUSED(ack_timeout, 32, SFV_ERR_INVALID);
    TF_REFUSED(service_level, 16, SFV_ERR_INVALID);
    TF_REFUSED(wait_mode, (sfv_wait_mode)7, SFV_ERR_INVALID);
    TF_REFUSED(max_rd_atomic, 17, SFV_ERR_INVALID);
#undef TF_REFUSED
    memset(&d, 0, sizeof d);
    d.ack_retries_set = true;
    d.ack_retries = 8;
    CHECK_RESULT(sfv_create_channel(e.pd, &d, &ch), SFV_ERR_INVALID);
    memset(&d, 0, sizeof d);
    d.gid_index_set = true;
    d.gid_index = 9;
    CHECK_RESULT(sfv_create_channel(e.pd, &d, &ch), SFV_ERR_INVALID);
    d.gid_index = 2; /* empty entry */
    CHECK_RESULT(sfv_create_channel(e.pd, &d, &ch), SFV_ERR_NOT_FOUND);
    d.gid_index = 0; /* a valid index that is 0 */
    CHECK_OK(sfv_channel_desc_resolve(e.pd, &d, &o));
    CHECK(o.gid_index_set && o.gid_index == 0);
    /* the port must be ACTIVE for a channel */
    fk_set_port_state(3); /* ARMED */
    CHECK_RESULT(sfv_create_channel(e.pd, NULL, &ch), SFV_ERR_RESOURCE);
    fk_reset();
    /* set values come back as they were */
    memset(&d, 0, sizeof d);
    d.max_send_wr = 8;
    d.max_recv_wr = 4;
    d.send_psn = 77;
    d.path_mtu = 512;
    d.rnr_retries_set = true;
    d.rnr_retries = 0;
    d.timeout_ms = 5;
    CHECK_OK(sfv_create_channel(e.pd, &d, &ch));
    CHECK(sfv_channel_get_desc(ch)->cq_entries == 12 && sfv_channel_get_desc(ch)->send_psn == 77 &&
          sfv_channel_get_desc(ch)->path_mtu == 512 && sfv_channel_get_desc(ch)->rnr_retries == 0);
    CHECK(sfv_channel_pd(ch) == e.pd && sfv_channel_fd(ch) == -1);
    CHECK_RESULT(sfv_channel_arm(ch), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_channel(ch));
    CHECK_OK(sfv_destroy_channel(NULL));
    tf_close(&e);
}

/* The sweep's first finding, pinned: on InfiniBand, a failed ibv_query_port inside sfv_choose_gid
   made sfv_create_channel return SFV_OK and leave that failure as the last error; a failed GID
   query made sfv_choose_gid pick a worse GID quietly, and an empty entry passed on the way left
   its error behind. */
static void t_choose_gid_failures(void) {
    tf_env e;
    sfv_channel *ch;
    uint32_t gi;
    tf_open(&e, 64);
    fk_set_link_layer(1);
    fk_fail_nth(2); /* ibv_query_port (the desc), ibv_query_port (sfv_choose_gid) */
    CHECK_RESULT(sfv_create_channel(e.pd, NULL, &ch), SFV_ERR_DRIVER);
    CHECK(ch == NULL && strcmp(fk_failed(), "ibv_query_port") == 0);
    CHECK(strcmp(sfv_last_error()->verb, "ibv_query_port") == 0);
    fk_fail_nth(0);
    CHECK_RESULT(sfv_remote_mr_decode(NULL, 0, NULL), SFV_ERR_INVALID); /* a known last error */
    CHECK_OK(sfv_choose_gid(e.ctx, 1, &gi)); /* index 0, then three empty entries */
    CHECK(gi == 0 && strcmp(sfv_last_error()->verb, "sfv_remote_mr_decode") == 0);
    fk_set_link_layer(2);
    fk_fail_nth(3); /* ibv_query_port, the GID at 0, the GID at 1 (the IPv4 one) */
    CHECK_RESULT(sfv_choose_gid(e.ctx, 1, &gi), SFV_ERR_DRIVER);
    CHECK(strcmp(sfv_last_error()->verb, "ibv_query_gid_ex") == 0);
    fk_fail_nth(0);
    tf_close(&e);
}

/* The fake's own rules, through the verbs themselves: what the library relies on it to refuse. */
static void t_fake_rules(void) {
    struct ibv_device **devs = ibv_get_device_list(NULL);
    struct ibv_context *c;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_qp_init_attr qi;
    struct ibv_qp_attr qa;
    struct ibv_send_wr sw, *bad_s;
    struct ibv_recv_wr rw, *bad_r;
    struct ibv_wc wc[4];
    CHECK(devs && (c = ibv_open_device(devs[0])) != NULL);
    ibv_free_device_list(devs);
    CHECK((pd = ibv_alloc_pd(c)) != NULL);
    CHECK((cq = ibv_create_cq(c, 4, NULL, NULL, 0)) != NULL);
    memset(&qi, 0, sizeof qi);
    qi.send_cq = qi.recv_cq = cq;
    qi.qp_type = IBV_QPT_RC;
    qi.cap.max_send_wr = qi.cap.max_recv_wr = 2;
    qi.cap.max_send_sge = qi.cap.max_recv_sge = 1;
    CHECK((qp = ibv_create_qp(pd, &qi)) != NULL);
    CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);  /* a QP holds it */
    CHECK_EQ(ibv_destroy_cq(cq), EBUSY);  /* a QP uses it */
    memset(&sw, 0, sizeof sw);
    memset(&rw, 0, sizeof rw);
    sw.opcode = IBV_WR_SEND;
    CHECK_EQ(ibv_post_recv(qp, &rw, &bad_r), EINVAL); /* RESET takes no receive */
    CHECK(bad_r == &rw);
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTR;
    CHECK_EQ(ibv_modify_qp(qp, &qa, IBV_QP_STATE), EINVAL); /* RESET -> RTR */
    qa.qp_state = IBV_QPS_INIT;
    CHECK_EQ(ibv_modify_qp(qp, &qa, IBV_QP_STATE), EINVAL); /* INIT without its attributes */
    qa.port_num = 1;
    CHECK_EQ(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
    CHECK_EQ(ibv_post_send(qp, &sw, &bad_s), EINVAL); /* INIT sends nothing */
    CHECK_EQ(ibv_post_recv(qp, &rw, &bad_r), 0);
    CHECK_EQ(ibv_post_recv(qp, &rw, &bad_r), 0);
    CHECK_EQ(ibv_post_recv(qp, &rw, &bad_r), ENOMEM); /* max_recv_wr 2 */
    qa.qp_state = IBV_QPS_RTR;
    qa.path_mtu = IBV_MTU_1024;
    qa.dest_qp_num = qp->qp_num;
    qa.ah_attr.port_num = 1;
    CHECK_EQ(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), EINVAL); /* RoCE: no GRH */
    qa.ah_attr.is_global = 1;
    qa.ah_attr.grh.sgid_index = 1;
    qa.path_mtu = IBV_MTU_2048; /* above the active MTU */
    CHECK_EQ(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), EINVAL);
    /* ERR from INIT: both receives flushed, in order */
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_ERR;
    CHECK_EQ(ibv_modify_qp(qp, &qa, IBV_QP_STATE), 0);
    CHECK_EQ(ibv_poll_cq(cq, 4, wc), 2);
    CHECK(wc[0].status == IBV_WC_WR_FLUSH_ERR && wc[1].status == IBV_WC_WR_FLUSH_ERR && wc[0].opcode == IBV_WC_RECV);
    CHECK_EQ(ibv_post_send(qp, &sw, &bad_s), 0); /* ERR flushes at once */
    CHECK_EQ(ibv_poll_cq(cq, 4, wc), 1);
    CHECK_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
    CHECK_EQ(ibv_req_notify_cq(cq, 0), EINVAL); /* no completion channel */
    CHECK_EQ(fk_live(FK_QP), 1);
    CHECK_EQ(ibv_destroy_qp(qp), 0);
    CHECK_EQ(ibv_destroy_cq(cq), 0);
    CHECK_EQ(ibv_dealloc_pd(pd), 0);
    CHECK_EQ(ibv_close_device(c), 0);
    CHECK_EQ(fk_live_total(), 0);
}

/* ---- the channel on the fake --------------------------------------------------------------- */
static void t_loopback(void) {
    tf_env e;
    sfv_channel *ch;
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_scatter_element in;
    sfv_gather_element out;
    tf_open(&e, 64);
    memcpy(e.buf, "hello", 6);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &ch));
    tf_connect(ch, ch);
    CHECK_RESULT(sfv_channel_handshake(ch, &(sfv_endpoint){1, 0, 1, 1024, 1, false, {{0}}}), SFV_ERR_INVALID); /* again */
    in = sfv_mr_scatter_element(e.mr, e.buf + 32, 32);
    out = sfv_mr_gather_element(e.mr, e.buf, 6);
    CHECK_OK(sfv_channel_post_receive(ch, &in, 1, &rx));
    CHECK_EQ(sfv_channel_outstanding(ch), 1);
    CHECK_OK(sfv_channel_send(ch, &out, 1, &wc));
    CHECK(wc.result == SFV_OK && wc.opcode == SFV_WC_OP_SEND && wc.byte_len == 0);
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK(wc.opcode == SFV_WC_OP_RECV && wc.byte_len == 6 && !wc.has_imm && (wc.wr_id & 1));
    CHECK(strcmp((char *)e.buf + 32, "hello") == 0);
    CHECK_EQ(sfv_channel_outstanding(ch), 0);
    CHECK_OK(sfv_destroy_channel(ch));
    tf_close(&e);
}

/* A device deleted while open where the kernel sends no event (rxe, siw): its uverbs node leaving
   sysfs (dev_path) is taken as DEVICE_FATAL, once (>>events). A busy wait with nothing coming ends
   well before its deadline with the flush, class FATAL, "deleted" in the hint; the channel says
   DEVICE_FATAL broke it; one event is queued. A device whose node was never there (a container
   without sysfs, say) is never taken for deleted. */
static void t_device_deleted(void) {
    char path[] = "/tmp/sfv_fake_uverbsXXXXXX";
    const int fd = mkstemp(path);
    tf_env e;
    sfv_channel *ch;
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_scatter_element in;
    sfv_event ev[4];
    sfv_event_type by = SFV_EVENT_OTHER;
    size_t n = 9;
    double t0;
    CHECK(fd >= 0);
    close(fd);
    fk_set_dev_path(path);
    tf_open(&e, 64);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &ch));
    tf_connect(ch, ch);
    CHECK_OK(sfv_context_events(e.ctx, ev, 4, &n));
    CHECK_EQ(n, 0); /* there: nothing */
    in = sfv_mr_scatter_element(e.mr, e.buf, 32);
    CHECK_OK(sfv_channel_post_receive(ch, &in, 1, &rx));
    CHECK(unlink(path) == 0);
    t0 = test_seconds();
    CHECK_RESULT(sfv_pending_wait(&rx, 5000, &wc), SFV_ERR_WORK);
    CHECK(test_seconds() - t0 < 2.5);
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
    if (!strstr(sfv_last_error()->message, "deleted")) FAIL("last error: %s", sfv_last_error()->message);
    CHECK(sfv_channel_broken(ch, &by));
    CHECK_EQ(by, SFV_EVENT_DEVICE_FATAL);
    CHECK_OK(sfv_context_events(e.ctx, ev, 4, &n));
    CHECK_EQ(n, 1);
    CHECK_EQ(ev[0].type, SFV_EVENT_DEVICE_FATAL);
    CHECK_EQ(ev[0].channels_broken, 1);
    CHECK_OK(sfv_context_events(e.ctx, ev, 4, &n));
    CHECK_EQ(n, 0); /* once */
    CHECK_OK(sfv_destroy_channel(ch));
    tf_close(&e);
    /* never there: never deleted */
    fk_set_dev_path("/nonexistent/uverbs-never-there");
    tf_open(&e, 64);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &ch));
    tf_connect(ch, ch);
    CHECK_OK(sfv_channel_post_receive(ch, &in, 1, &rx));
    CHECK_RESULT(sfv_pending_wait(&rx, 30, &wc), SFV_ERR_TIMEOUT); /* (its events read once at the deadline) */
    CHECK_OK(sfv_context_events(e.ctx, ev, 4, &n));
    CHECK_EQ(n, 0);
    CHECK_OK(sfv_destroy_channel(ch));
    tf_close(&e);
    fk_set_dev_path(NULL);
}

static void t_two_channels(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_gather_element g[2];
    sfv_scatter_element s[2];
    sfv_remote_mr rb;
    int i;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    for (i = 0; i < 1024; i++) e.buf[i] = (unsigned char)i;
    /* send of two elements into a receive of two */
    g[0] = sfv_mr_gather_element(e.mr, e.buf, 100);
    g[1] = sfv_mr_gather_element(e.mr, e.buf + 100, 50);
    s[0] = sfv_mr_scatter_element(e.mr, e.buf + 2048, 120);
    s[1] = sfv_mr_scatter_element(e.mr, e.buf + 3000, 100);
    CHECK_OK(sfv_channel_post_receive(b, s, 2, &rx));
    CHECK_OK(sfv_channel_send(a, g, 2, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK_EQ(wc.byte_len, 150);
    CHECK(memcmp(e.buf + 2048, e.buf, 120) == 0 && memcmp(e.buf + 3000, e.buf + 120, 30) == 0);
    /* with immediate */
    CHECK_OK(sfv_channel_post_receive(a, s, 1, &rx));
    CHECK_OK(sfv_channel_send_imm(b, g, 1, 0xDEADBEEF, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK(wc.has_imm && wc.imm_data == 0xDEADBEEF && wc.opcode == SFV_WC_OP_RECV && wc.byte_len == 100);
    /* write, then read back */
    memset(e.buf + 2048, 0, 2048);
    rb = sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 2048), 1024, sfv_mr_rkey(e.mr));
    CHECK_OK(sfv_channel_write(a, g, 1, rb, &wc));
    CHECK(wc.opcode == SFV_WC_OP_WRITE);
    CHECK(memcmp(e.buf + 2048, e.buf, 100) == 0);
    s[0] = sfv_mr_scatter_element(e.mr, e.buf + 3072, 64);
    CHECK_OK(sfv_channel_read(b, s, 1, sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 10), 64, sfv_mr_rkey(e.mr)), &wc));
    CHECK(wc.opcode == SFV_WC_OP_READ && wc.byte_len == 64);
    CHECK(memcmp(e.buf + 3072, e.buf + 10, 64) == 0);
    /* write with immediate: the receive gets the immediate and the length, no bytes */
    CHECK_OK(sfv_channel_post_receive(b, NULL, 0, &rx));
    CHECK_OK(sfv_channel_write_imm(a, g + 1, 1, sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 3500), 50, sfv_mr_rkey(e.mr)), 7, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, &wc));
    CHECK(wc.opcode == SFV_WC_OP_RECV_IMM && wc.has_imm && wc.imm_data == 7 && wc.byte_len == 50);
    CHECK(memcmp(e.buf + 3500, e.buf + 100, 50) == 0);
    /* the remote region is checked before the post */
    CHECK_RESULT(sfv_channel_write(a, g, 1, sfv_remote_mr_make(rb.addr, 99, rb.rkey), NULL), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static void t_inline(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_pending rx;
    sfv_gather_element g;
    sfv_scatter_element s;
    memset(&d, 0, sizeof d);
    d.max_inline_data = 64;
    tf_open(&e, 256);
    tf_pair(&e, &d, &a, &b);
    memcpy(e.buf, "inline!", 8);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    s = sfv_mr_scatter_element(e.mr, e.buf + 128, 64);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_OK(sfv_channel_send(a, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    CHECK(strcmp((char *)e.buf + 128, "inline!") == 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* Elements the library cannot vouch for: one of no MR (lkey 0) never goes inline, so the NIC
   refuses it as the header says; an unchecked receive at an address outside the program's
   memory is the NIC's to refuse, and debug builds under ASan leave such bytes alone. */
static void t_unchecked_elements(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_gather_element g;
    sfv_scatter_element s;
    memset(&d, 0, sizeof d);
    d.max_inline_data = 64;
    d.timeout_ms = 200;
    tf_open(&e, 256);
    tf_pair(&e, &d, &a, &b);
    memcpy(e.buf + 192, "no MR!", 7);
    g = sfv_mr_gather_element(NULL, e.buf + 192, 7);
    CHECK_EQ(g.lkey, 0);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_RESULT(sfv_channel_send(a, &g, 1, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_LOC_PROT_ERR);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK(memcmp(e.buf, "no MR!", 7) != 0); /* nothing delivered (read once the receive is over) */
    tf_pair(&e, &d, &a, &b);
    s = sfv_mr_scatter_element_unchecked(e.mr, (void *)(uintptr_t)0x100000000ull, 64);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    g = sfv_mr_gather_element(e.mr, e.buf + 192, 7);
    CHECK_RESULT(sfv_channel_send(a, &g, 1, &wc), SFV_ERR_WORK); /* the receiver could not take it */
    CHECK_RESULT(sfv_pending_wait(&rx, -1, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_LOC_PROT_ERR);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static void t_batches(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_pending rx[4], p;
    sfv_work_completion wc;
    sfv_gather_element g[4];
    sfv_scatter_element s[4];
    sfv_remote_mr rm[4];
    int i;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    for (i = 0; i < 4; i++) {
        memset(e.buf + 64 * i, 'a' + i, 64);
        g[i] = sfv_mr_gather_element(e.mr, e.buf + 64 * i, 64);
        s[i] = sfv_mr_scatter_element(e.mr, e.buf + 1024 + 64 * i, 64);
        rm[i] = sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 2048 + 64 * i), 64, sfv_mr_rkey(e.mr));
    }
    CHECK_OK(sfv_channel_post_receive_batch(b, s, 1, 4, rx));
    CHECK_OK(sfv_channel_post_send_batch(a, g, 1, 4, &p));
    CHECK_OK(sfv_pending_wait(&p, -1, NULL));
    for (i = 3; i >= 0; i--) { /* out of order */
        CHECK_OK(sfv_pending_wait(&rx[i], -1, &wc));
        CHECK_EQ(wc.byte_len, 64);
        CHECK_EQ(e.buf[1024 + 64 * i], 'a' + i);
    }
    CHECK_OK(sfv_channel_post_write_batch(a, g, 1, 4, rm, &p));
    CHECK_OK(sfv_pending_wait(&p, -1, NULL));
    CHECK(memcmp(e.buf + 2048, e.buf, 256) == 0);
    memset(e.buf + 1024, 0, 256);
    CHECK_OK(sfv_channel_post_read_batch(b, s, 1, 4, rm, &p));
    CHECK_OK(sfv_pending_wait(&p, -1, &wc));
    CHECK(memcmp(e.buf + 1024, e.buf, 256) == 0);
    /* two elements per work request */
    CHECK_OK(sfv_channel_post_send_batch(a, g, 2, 2, &p));
    CHECK_OK(sfv_channel_post_receive_batch(b, s, 2, 2, rx));
    CHECK_OK(sfv_pending_wait(&rx[0], -1, &wc));
    CHECK_EQ(wc.byte_len, 128);
    CHECK_OK(sfv_pending_wait(&rx[1], -1, NULL));
    CHECK_OK(sfv_pending_wait(&p, -1, NULL));
    /* a batch over its limits */
    CHECK_RESULT(sfv_channel_post_send_batch(a, g, 1, 0, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_send_batch(a, g, 1, SFV_BATCH_MAX + 1, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_write_batch(a, g, 1, 2, NULL, &p), SFV_ERR_INVALID);
    CHECK_EQ(sfv_channel_outstanding(a) + sfv_channel_outstanding(b), 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* A list the NIC took only part of: what was posted is tracked (its buffers stay the NIC's until
   it completes), the rest is refused, and unsignaled work can then only end by a flush. */
static void t_partial_post(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_pending p, rx[3];
    sfv_work_completion wc;
    sfv_gather_element g[3];
    sfv_scatter_element s[3];
    int i;
    tf_open(&e, 1024);
    tf_pair(&e, NULL, &a, &b);
    for (i = 0; i < 3; i++) {
        g[i] = sfv_mr_gather_element(e.mr, e.buf + 8 * i, 8);
        s[i] = sfv_mr_scatter_element(e.mr, e.buf + 512 + 8 * i, 8);
    }
    fk_set_partial_post(1);
    fk_fail_nth(1);
    memset(rx, 0, sizeof rx);
    CHECK_RESULT(sfv_channel_post_receive_batch(b, s, 1, 3, rx), SFV_ERR_RESOURCE);
    CHECK(strcmp(sfv_last_error()->verb, "ibv_post_recv") == 0);
    CHECK_EQ(sfv_channel_outstanding(b), 1); /* the one posted */
    CHECK_OK(sfv_channel_send(a, g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx[0], -1, &wc));
    CHECK_EQ(sfv_channel_outstanding(b), 0);
    fk_fail_nth(1);
    CHECK_RESULT(sfv_channel_post_send_batch(a, g, 1, 3, &p), SFV_ERR_BROKEN); /* taken part-way */
    CHECK(strcmp(sfv_last_error()->verb, "ibv_post_send") == 0);
    CHECK_EQ(sfv_last_error()->errnum, ENOMEM);
    CHECK_RESULT(sfv_channel_post_send(a, g, 1, &p), SFV_ERR_BROKEN); /* unsignaled work in flight */
    CHECK_OK(sfv_destroy_channel(a)); /* flushes it */
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* A send batch the verb takes only part of, inside a scope (no handle): its unsignaled part ends
   only by a flush, which comes at once (the QP to the error state), so the scope returns with the
   failure, not at its deadline (60 s here). */
static sfv_result tf_partial_batch_fn(sfv_channel *ch, void *user) {
    const sfv_gather_element *g = (const sfv_gather_element *)user;
    fk_set_partial_post(1);
    fk_fail_nth(1);
    return sfv_channel_post_send_batch(ch, g, 1, 3, NULL);
}
static void t_partial_batch_in_scope(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_gather_element g[3];
    sfv_scope_report rep;
    double t0;
    int i;
    tf_open(&e, 1024);
    memset(&d, 0, sizeof d);
    d.timeout_ms = 60000;
    tf_pair(&e, &d, &a, &b);
    for (i = 0; i < 3; i++) g[i] = sfv_mr_gather_element(e.mr, e.buf + 8 * i, 8);
    t0 = test_seconds();
    CHECK_RESULT(sfv_channel_scope(a, tf_partial_batch_fn, g, &rep), SFV_ERR_SCOPE_FN);
    CHECK(test_seconds() - t0 < 5.0);
    CHECK_EQ(rep.fn_result, SFV_ERR_BROKEN);
    CHECK(sfv_channel_broken(a, NULL));
    CHECK_EQ(sfv_channel_outstanding(a), 0); /* the part posted: flushed and consumed */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

typedef struct tf_scope_arg {
    tf_env *e;
    sfv_channel *peer;
    sfv_remote_mr remote;
    bool fail;
    sfv_pending held;
} tf_scope_arg;

static sfv_result tf_scope_fn(sfv_channel *ch, void *user) {
    tf_scope_arg *u = (tf_scope_arg *)user;
    sfv_gather_element g = sfv_mr_gather_element(u->e->mr, u->e->buf, 32);
    sfv_scatter_element s = sfv_mr_scatter_element(u->e->mr, u->e->buf + 512, 32);
    sfv_result r = sfv_channel_post_write(ch, &g, 1, u->remote, NULL);
    if (r) return r;
    r = sfv_channel_post_read(ch, &s, 1, u->remote, NULL);
    if (r) return r;
    if (u->fail) {
        sfv_remote_mr none;
        return sfv_remote_mr_decode(NULL, 0, &none); /* any failing call, for its error detail */
    }
    return SFV_OK;
}

static sfv_result tf_manual_fn(sfv_channel *ch, void *user) {
    tf_scope_arg *u = (tf_scope_arg *)user;
    sfv_gather_element g = sfv_mr_gather_element(u->e->mr, u->e->buf, 32);
    sfv_result r = sfv_channel_post_write(ch, &g, 1, u->remote, &u->held);
    if (r) return r;
    return sfv_pending_wait(&u->held, -1, NULL);
}

static void t_scopes(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_scope_report rep;
    tf_scope_arg u;
    sfv_gather_element g;
    tf_open(&e, 1024);
    tf_pair(&e, NULL, &a, &b);
    memset(&u, 0, sizeof u);
    u.e = &e;
    u.remote = sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 256), 32, sfv_mr_rkey(e.mr));
    memset(e.buf, 'x', 32);
    CHECK_OK(sfv_channel_scope(a, tf_scope_fn, &u, &rep));
    CHECK(rep.fn_result == SFV_OK && rep.auto_polled == 2 && rep.failed == 0);
    CHECK(memcmp(e.buf + 512, e.buf, 32) == 0);
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    /* fn fails: its error, its detail, and the work still done */
    u.fail = true;
    CHECK_RESULT(sfv_channel_scope(a, tf_scope_fn, &u, &rep), SFV_ERR_SCOPE_FN);
    CHECK(rep.fn_result == SFV_ERR_INVALID && rep.auto_polled == 2 && strcmp(sfv_last_error()->verb, "sfv_remote_mr_decode") == 0);
    CHECK_RESULT(sfv_channel_manual_scope(a, tf_scope_fn, &u), SFV_ERR_INVALID);
    u.fail = false;
    /* a manual scope with its own handles */
    CHECK_OK(sfv_channel_manual_scope(a, tf_manual_fn, &u));
    CHECK(sfv_pending_done(&u.held));
    CHECK_OK(sfv_pending_poll(&u.held, NULL)); /* a consumed handle gives its result again */
    /* a manual scope that leaves work unpolled breaks the contract */
    CHECK_ABORTS((void)!sfv_channel_manual_scope(a, tf_scope_fn, &u));
    /* NULL pending outside a scope */
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    CHECK_RESULT(sfv_channel_post_send(a, &g, 1, NULL), SFV_ERR_INVALID);
    /* auto-polled work that fails: the first error in the report */
    u.remote.rkey ^= 0x55;
    CHECK_RESULT(sfv_channel_scope(a, tf_scope_fn, &u, &rep), SFV_ERR_SCOPE_AUTOPOLL);
    CHECK(rep.failed >= 1 && rep.first_error.status == SFV_WC_REM_ACCESS_ERR && rep.first_error.error_class == SFV_WORK_ERROR_REMOTE);
    CHECK_RESULT(sfv_channel_post_send(a, &g, 1, &u.held), SFV_ERR_BROKEN);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* Unsignaled reads inside a scope (the API allows them nowhere else): the scope's fence after the
   last completes them, and when the scope returns the bytes are there. */
static sfv_result tf_unsignaled_reads(sfv_channel *ch, void *user) {
    tf_scope_arg *u = (tf_scope_arg *)user;
    sfv_remote_mr src;
    sfv_result r;
    int i;
    for (i = 0; i < 3; i++) {
        sfv_scatter_element s = sfv_mr_scatter_element(u->e->mr, u->e->buf + 512 + i * 16, 16);
        r = sfv_remote_mr_slice(u->remote, (uint64_t)i * 16, 16, &src);
        if (!r) r = sfv_channel_post_read_unsignaled(ch, &s, 1, src);
        if (r) return r;
    }
    return SFV_OK;
}

static void t_unsignaled_reads(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_scope_report rep;
    sfv_scatter_element s;
    tf_scope_arg u;
    int i;
    tf_open(&e, 1024);
    tf_pair(&e, NULL, &a, &b);
    memset(&u, 0, sizeof u);
    u.e = &e;
    u.remote = sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 256), 48, sfv_mr_rkey(e.mr));
    for (i = 0; i < 48; i++) e.buf[256 + i] = (unsigned char)(i * 5 + 3);
    CHECK_OK(sfv_channel_scope(a, tf_unsignaled_reads, &u, &rep));
    CHECK(rep.fn_result == SFV_OK && rep.auto_polled == 3 && rep.failed == 0);
    CHECK(memcmp(e.buf + 512, e.buf + 256, 48) == 0);
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    s = sfv_mr_scatter_element(e.mr, e.buf + 512, 16);
    CHECK_RESULT(sfv_channel_post_read_unsignaled(a, &s, 1, u.remote), SFV_ERR_INVALID); /* outside a scope */
    CHECK_RESULT(sfv_channel_post_read_unsignaled(NULL, &s, 1, u.remote), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* The send ring's places under batches (only a batch's last work request is signaled: a
   completion completes the ones before it) consumed in every order, around the ring many times:
   the places taken stay exact (from the oldest unconsumed work to the newest), a queue consumed
   out of order fills to its capacity again, and every byte arrives. */
static void t_ring_places(void) {
    static const int order[4][3] = {{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}};
    static const size_t left[4][3] = {{5, 4, 0}, {8, 8, 0}, {8, 8, 0}, {5, 5, 0}};
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_pending p[4], rx[8];
    sfv_gather_element g[4];
    sfv_scatter_element s[8];
    sfv_work_completion wc;
    int round, i;
    memset(&d, 0, sizeof d);
    d.max_send_wr = 8;
    d.max_recv_wr = 8;
    tf_open(&e, 1024);
    tf_pair(&e, &d, &a, &b);
    for (i = 0; i < 4; i++) g[i] = sfv_mr_gather_element(e.mr, e.buf + 16 * i, 16);
    for (i = 0; i < 8; i++) s[i] = sfv_mr_scatter_element(e.mr, e.buf + 512 + 16 * i, 16);
    for (round = 0; round < 40; round++) {
        const int k = round % 4;
        for (i = 0; i < 4; i++) memset(e.buf + 16 * i, 'A' + (round * 4 + i) % 26, 16);
        CHECK_OK(sfv_channel_post_receive_batch(b, s, 1, 8, rx));
        CHECK_OK(sfv_channel_post_send_batch(a, g, 1, 3, &p[0])); /* places 0 .. 2 */
        CHECK_OK(sfv_channel_post_send(a, &g[3], 1, &p[1]));       /* 3 */
        CHECK_OK(sfv_channel_post_send_batch(a, g, 1, 4, &p[2])); /* 4 .. 7 */
        CHECK_EQ(sfv_channel_outstanding(a), 8);
        CHECK_RESULT(sfv_channel_post_send(a, g, 1, &p[3]), SFV_ERR_RESOURCE); /* full */
        for (i = 0; i < 3; i++) {
            CHECK_OK(sfv_pending_wait(&p[order[k][i]], -1, &wc));
            CHECK_EQ(wc.result, SFV_OK);
            CHECK_EQ(sfv_channel_outstanding(a), left[k][i]);
        }
        for (i = 0; i < 8; i++) { /* receives: forward on even rounds, backward on odd ones */
            const int r = round % 2 ? 7 - i : i;
            const int from = r < 3 ? r : r == 3 ? 3 : r - 4; /* the element the send at place r gathered */
            CHECK_OK(sfv_pending_wait(&rx[r], -1, &wc));
            CHECK_EQ(wc.byte_len, 16);
            CHECK_EQ(e.buf[512 + 16 * r], 'A' + (round * 4 + from) % 26);
            CHECK_EQ(e.buf[512 + 16 * r + 15], 'A' + (round * 4 + from) % 26);
        }
        CHECK_EQ(sfv_channel_outstanding(b), 0);
    }
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* A scope's batch without a handle and unsignaled sends: the scope waits for each of them, the
   ones a later completion completed as well as the last. */
static sfv_result tf_scope_batch(sfv_channel *ch, void *user) {
    tf_scope_arg *u = (tf_scope_arg *)user;
    sfv_gather_element g[3];
    sfv_result r;
    int i;
    for (i = 0; i < 3; i++) g[i] = sfv_mr_gather_element(u->e->mr, u->e->buf + 16 * i, 16);
    r = sfv_channel_post_send_batch(ch, g, 1, 3, NULL);
    if (!r) r = sfv_channel_post_send_unsignaled(ch, g, 1);
    if (!r) r = sfv_channel_post_send_batch(ch, g, 1, 2, NULL);
    return r;
}
static void t_scope_batches(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_scope_report rep;
    tf_scope_arg u;
    sfv_pending rx[6];
    sfv_scatter_element s[6];
    int i, round;
    tf_open(&e, 1024);
    tf_pair(&e, NULL, &a, &b);
    memset(&u, 0, sizeof u);
    u.e = &e;
    for (i = 0; i < 6; i++) s[i] = sfv_mr_scatter_element(e.mr, e.buf + 512 + 16 * i, 16);
    for (round = 0; round < 3; round++) {
        memset(e.buf, 'a' + round, 48);
        CHECK_OK(sfv_channel_post_receive_batch(b, s, 1, 6, rx));
        CHECK_OK(sfv_channel_scope(a, tf_scope_batch, &u, &rep));
        CHECK(rep.fn_result == SFV_OK && rep.auto_polled == 6 && rep.failed == 0);
        CHECK_EQ(sfv_channel_outstanding(a), 0);
        CHECK_OK(sfv_pending_wait_all(rx, 6, -1, NULL));
        for (i = 0; i < 6; i++) CHECK_EQ(e.buf[512 + 16 * i], 'a' + round);
    }
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static void t_pending(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_pending r1, r2, sp, sp2;
    sfv_work_completion wc;
    sfv_gather_element g;
    sfv_scatter_element s1, s2;
    tf_open(&e, 256);
    tf_pair(&e, NULL, &a, &b);
    s1 = sfv_mr_scatter_element(e.mr, e.buf + 100, 16);
    s2 = sfv_mr_scatter_element(e.mr, e.buf + 200, 16);
    g = sfv_mr_gather_element(e.mr, e.buf, 4);
    CHECK_OK(sfv_channel_post_receive(b, &s1, 1, &r1));
    CHECK_OK(sfv_channel_post_receive(b, &s2, 1, &r2));
    CHECK_RESULT(sfv_pending_poll(&r1, NULL), SFV_NOT_DONE);
    CHECK(!sfv_pending_done(&r1));
    CHECK_RESULT(sfv_pending_wait(&r2, 0, NULL), SFV_ERR_TIMEOUT); /* still tracked */
    memcpy(e.buf, "one", 4);
    CHECK_OK(sfv_channel_post_send(a, &g, 1, &sp));
    memcpy(e.buf, "two", 4); /* the fake sends at once: no harm here */
    CHECK_OK(sfv_channel_post_send(a, &g, 1, &sp2));
    CHECK_OK(sfv_pending_wait(&r2, -1, &wc)); /* second first */
    CHECK(strcmp((char *)e.buf + 200, "two") == 0);
    CHECK_EQ(sfv_channel_outstanding(b), 2); /* r1 unconsumed holds r2's place too */
    CHECK_OK(sfv_pending_poll(&r1, &wc));
    CHECK(strcmp((char *)e.buf + 100, "one") == 0);
    CHECK_EQ(sfv_channel_outstanding(b), 0);
    CHECK(sfv_pending_done(&r1));
    CHECK_OK(sfv_pending_wait(&sp, -1, NULL));
    CHECK_OK(sfv_pending_wait(&sp2, -1, NULL));
    CHECK_OK(sfv_pending_wait(&r1, -1, &wc)); /* again: the same result */
    CHECK_EQ(wc.byte_len, 4);
    /* no handle */
    CHECK_RESULT(sfv_pending_wait(NULL, -1, NULL), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* sfv_pending_wait_all on the fake: handles of two channels in one call; a success leaves the
   last error alone; a failure, then a handle that times out: the stop is the result and the last
   error; what it says of each handle. */
static void t_wait_all(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b, *c, *f;
    sfv_pending r[4], tx[3];
    sfv_work_completion wcs[4];
    sfv_gather_element g;
    double t0;
    int i;
    memset(&d, 0, sizeof d);
    d.timeout_ms = 50;
    tf_open(&e, 512);
    tf_pair(&e, &d, &a, &b);
    tf_pair(&e, &d, &c, &f);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    memcpy(e.buf, "message", 8);
    /* two on b, one on f: one call */
    for (i = 0; i < 3; i++) {
        sfv_scatter_element s = sfv_mr_scatter_element(e.mr, e.buf + 64 + 16 * i, 16);
        CHECK_OK(sfv_channel_post_receive(i < 2 ? b : f, &s, 1, &r[i]));
    }
    CHECK_OK(sfv_channel_post_send(a, &g, 1, &tx[0]));
    CHECK_OK(sfv_channel_post_send(a, &g, 1, &tx[1]));
    CHECK_OK(sfv_channel_post_send(c, &g, 1, &tx[2]));
    CHECK_RESULT(sfv_pending_wait(NULL, 0, NULL), SFV_ERR_INVALID); /* a last error to keep */
    CHECK_OK(sfv_pending_wait_all(r, 3, -1, wcs));
    CHECK(strstr(sfv_last_error()->message, "NULL") != NULL); /* a success leaves it */
    for (i = 0; i < 3; i++) {
        CHECK_EQ(wcs[i].byte_len, 8);
        CHECK(memcmp(e.buf + 64 + 16 * i, "message", 8) == 0);
    }
    CHECK_OK(sfv_pending_wait_all(tx, 3, -1, NULL));
    /* b's receive too small fails (the rest of b flushed), then f's has nothing coming: the call
       stops at f's with SFV_ERR_TIMEOUT, which is its result and its last error */
    {
        sfv_scatter_element small = sfv_mr_scatter_element(e.mr, e.buf + 128, 4), ok = sfv_mr_scatter_element(e.mr, e.buf + 160, 16),
                            ok2 = sfv_mr_scatter_element(e.mr, e.buf + 176, 16);
        sfv_result sent;
        CHECK_OK(sfv_channel_post_receive(b, &small, 1, &r[0]));
        CHECK_OK(sfv_channel_post_receive(b, &ok, 1, &r[1]));
        CHECK_OK(sfv_channel_post_receive(f, &ok2, 1, &r[2]));
        sent = sfv_channel_send(a, &g, 1, NULL);
        CHECK(sent == SFV_ERR_WORK); /* the peer refused it */
        t0 = test_seconds();
        CHECK_RESULT(sfv_pending_wait_all(r, 3, -1, wcs), SFV_ERR_TIMEOUT);
        CHECK(test_seconds() - t0 >= 0.045); /* f's channel's 50 ms */
        CHECK_EQ(wcs[0].result, SFV_ERR_WORK);
        CHECK_EQ(wcs[0].status, SFV_WC_LOC_LEN_ERR);
        CHECK_EQ(wcs[1].status, SFV_WC_WR_FLUSH_ERR);
        CHECK_EQ(wcs[2].result, SFV_ERR_TIMEOUT);
        CHECK(sfv_pending_done(&r[0]) && sfv_pending_done(&r[1]) && !sfv_pending_done(&r[2]));
        CHECK(strcmp(sfv_last_error()->verb, "wait") == 0);
        /* the same three again: the first two give their results again, the third arrives */
        CHECK_OK(sfv_channel_send(c, &g, 1, NULL));
        CHECK_RESULT(sfv_pending_wait_all(r, 3, -1, wcs), SFV_ERR_WORK);
        CHECK(strstr(sfv_last_error()->message, sfv_wc_status_str(SFV_WC_LOC_LEN_ERR)) != NULL); /* the first failure */
        CHECK_EQ(wcs[2].result, SFV_OK);
        CHECK_EQ(wcs[2].byte_len, 8);
    }
    /* a zeroed handle stops it: the handles before it consumed, those after it untouched */
    {
        sfv_scatter_element s1 = sfv_mr_scatter_element(e.mr, e.buf + 192, 16), s2 = sfv_mr_scatter_element(e.mr, e.buf + 224, 16);
        CHECK_OK(sfv_channel_post_receive(f, &s1, 1, &r[0]));
        CHECK_OK(sfv_channel_post_receive(f, &s2, 1, &r[2]));
        memset(&r[1], 0, sizeof r[1]);
        CHECK_OK(sfv_channel_send(c, &g, 1, NULL));
        CHECK_OK(sfv_channel_send(c, &g, 1, NULL));
        CHECK_RESULT(sfv_pending_wait_all(r, 3, -1, wcs), SFV_ERR_INVALID);
        CHECK(sfv_pending_done(&r[0]) && !sfv_pending_done(&r[2]));
        CHECK_EQ(wcs[0].result, SFV_OK);
        CHECK_EQ(wcs[1].result, SFV_ERR_INVALID);
        CHECK_EQ(wcs[2].result, SFV_NOT_DONE);
        CHECK_OK(sfv_pending_wait(&r[2], -1, NULL));
    }
    CHECK_OK(sfv_pending_wait_all(NULL, 0, 0, NULL));
    CHECK_RESULT(sfv_pending_wait_all(NULL, 1, 0, wcs), SFV_ERR_INVALID);
    CHECK_EQ(wcs[0].result, SFV_NOT_DONE);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_destroy_channel(c));
    CHECK_OK(sfv_destroy_channel(f));
    tf_close(&e);
}

static void t_queue_full(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_pending p[3];
    sfv_scatter_element s;
    memset(&d, 0, sizeof d);
    d.max_recv_wr = 2;
    tf_open(&e, 64);
    tf_pair(&e, &d, &a, &b);
    s = sfv_mr_scatter_element(e.mr, e.buf, 8);
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &p[0]));
    s = sfv_mr_scatter_element(e.mr, e.buf + 8, 8); /* two receives never share memory (SFV_TRACK_INFLIGHT) */
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &p[1]));
    CHECK_RESULT(sfv_channel_post_receive(a, &s, 1, &p[2]), SFV_ERR_RESOURCE);
    CHECK_RESULT(sfv_channel_post_receive(a, &s, 5, &p[2]), SFV_ERR_INVALID); /* over max_recv_sge */
    CHECK_OK(sfv_destroy_channel(a)); /* two receives in flight: flushed */
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static void t_timeout(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_work_completion wc;
    sfv_gather_element g;
    sfv_scatter_element s;
    sfv_pending rx, tx;
    double t0;
    memset(&d, 0, sizeof d);
    d.timeout_ms = 50;
    tf_open(&e, 64);
    tf_pair(&e, &d, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    s = sfv_mr_scatter_element(e.mr, e.buf + 32, 8);
    /* a wait that expires leaves the work tracked; it completes once the peer receives */
    CHECK_OK(sfv_channel_post_send(a, &g, 1, &tx));
    CHECK_RESULT(sfv_pending_wait(&tx, 20, NULL), SFV_ERR_TIMEOUT);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    CHECK_OK(sfv_pending_wait(&rx, -1, NULL));
    /* nobody receives: the blocking send times out and flushes */
    t0 = test_seconds();
    CHECK_RESULT(sfv_channel_send(a, &g, 1, &wc), SFV_ERR_TIMEOUT);
    CHECK(test_seconds() - t0 >= 0.045);
    CHECK(wc.result == SFV_ERR_TIMEOUT && wc.status == SFV_WC_WR_FLUSH_ERR);
    CHECK(strcmp(sfv_last_error()->verb, "wait") == 0);
    CHECK_RESULT(sfv_channel_send(a, &g, 1, &wc), SFV_ERR_BROKEN);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static void t_work_errors(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_work_completion wc;
    sfv_gather_element g;
    sfv_scatter_element s;
    sfv_pending rx;
    sfv_channel_desc none;
    memset(&none, 0, sizeof none);
    none.max_inline_data = SFV_INLINE_NONE; /* inline bytes are copied at the post: no MR is checked */
    tf_open(&e, 256);
    /* an element outside its MR: local protection error */
    tf_pair(&e, &none, &a, &b);
    g = sfv_mr_gather_element_unchecked(e.mr, e.buf + 250, 16);
    CHECK_RESULT(sfv_channel_write(a, &g, 1, sfv_mr_remote(e.mr), &wc), SFV_ERR_WORK);
    CHECK(wc.status == SFV_WC_LOC_PROT_ERR && wc.error_class == SFV_WORK_ERROR_LOCAL_PROGRAMMING && wc.vendor_err != 0);
    CHECK_RESULT(sfv_channel_write(a, &g, 1, sfv_mr_remote(e.mr), &wc), SFV_ERR_BROKEN);
    CHECK(strstr(sfv_last_error()->message, "RDMA write, LOC_PROT_ERR") != NULL); /* the refusal names the first failure */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* a wrong rkey: remote access error */
    tf_pair(&e, NULL, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 16);
    CHECK_RESULT(sfv_channel_write(a, &g, 1, sfv_remote_mr_make(sfv_mr_addr(e.mr), 16, sfv_mr_lkey(e.mr)), &wc), SFV_ERR_WORK);
    CHECK(wc.status == SFV_WC_REM_ACCESS_ERR && wc.error_class == SFV_WORK_ERROR_REMOTE);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* a receive too small: LOC_LEN_ERR at the receiver, the sender told by the peer */
    tf_pair(&e, NULL, &a, &b);
    s = sfv_mr_scatter_element(e.mr, e.buf + 128, 8);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_RESULT(sfv_channel_send(a, &g, 1, &wc), SFV_ERR_WORK);
    CHECK(wc.status == SFV_WC_REM_INV_REQ_ERR);
    CHECK_RESULT(sfv_pending_wait(&rx, -1, &wc), SFV_ERR_WORK);
    CHECK(wc.status == SFV_WC_LOC_LEN_ERR && wc.error_class == SFV_WORK_ERROR_LOCAL_PROGRAMMING && wc.opcode == SFV_WC_OP_UNKNOWN);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* a read into memory registered without local write */
    {
        sfv_mr *ro;
        tf_pair(&e, NULL, &a, &b);
        CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 128, 64, 0, &ro));
        s = sfv_mr_scatter_element(ro, e.buf + 128, 8);
        CHECK_RESULT(sfv_channel_read(a, &s, 1, sfv_mr_remote(e.mr), &wc), SFV_ERR_WORK);
        CHECK_EQ(wc.status, SFV_WC_LOC_PROT_ERR);
        sfv_dereg_mr(ro);
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
    }
    /* the peer QP is gone: retries exhausted */
    tf_pair(&e, NULL, &a, &b);
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_RESULT(sfv_channel_write(a, &g, 1, sfv_mr_remote(e.mr), &wc), SFV_ERR_WORK);
    CHECK(wc.status == SFV_WC_RETRY_EXC_ERR && wc.error_class == SFV_WORK_ERROR_TRANSPORT);
    CHECK_OK(sfv_destroy_channel(a));
    tf_close(&e);
}

/* Atomics on the fake: the word in host byte order, the old value returned, every refusal
   before posting, a peer without REMOTE_ATOMIC, a device without atomics. */
static void t_atomics(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_mr *amr;
    sfv_work_completion wc;
    sfv_scatter_element old;
    sfv_pending p;
    sfv_remote_mr word, r;
    uint64_t v, got;
    tf_open(&e, 256);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 128, 64, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_ATOMIC, &amr));
    memset(&d, 0, sizeof d);
    d.access = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_ATOMIC;
    tf_pair(&e, &d, &a, &b);
    CHECK_OK(sfv_remote_mr_slice(sfv_mr_remote(amr), 0, 8, &word));
    old = sfv_mr_scatter_element(e.mr, e.buf, 8);
    v = 41;
    memcpy(e.buf + 128, &v, 8);
    CHECK_OK(sfv_channel_fetch_add(a, &old, word, 1, &wc));
    CHECK(wc.opcode == SFV_WC_OP_FETCH_ADD && wc.byte_len == 8);
    memcpy(&got, e.buf, 8);
    CHECK_EQ(got, 41);
    memcpy(&v, e.buf + 128, 8);
    CHECK_EQ(v, 42);
    CHECK_OK(sfv_channel_compare_swap(a, &old, word, 41, 7, &wc)); /* no match: unchanged */
    CHECK(wc.opcode == SFV_WC_OP_COMP_SWAP && wc.byte_len == 8);
    memcpy(&v, e.buf + 128, 8);
    CHECK_EQ(v, 42);
    CHECK_OK(sfv_channel_post_compare_swap(a, &old, word, 42, 7, &p));
    CHECK_OK(sfv_pending_wait(&p, -1, NULL));
    memcpy(&v, e.buf + 128, 8);
    memcpy(&got, e.buf, 8);
    CHECK(v == 7 && got == 42);
    /* refused before posting; the channel stays usable */
    CHECK_OK(sfv_remote_mr_sub(word, 4, &r));
    CHECK_RESULT(sfv_channel_fetch_add(a, &old, r, 1, &wc), SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_EQ(wc.result, SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_channel_fetch_add(a, &old, sfv_remote_mr_make(word.addr + 4, 8, word.rkey), 1, &wc), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "aligned") != NULL);
    CHECK_RESULT(sfv_channel_fetch_add(a, &old, sfv_remote_mr_make(UINT64_MAX - 7, 16, word.rkey), 1, &wc), SFV_ERR_INVALID);
    old.length = 4;
    CHECK_RESULT(sfv_channel_post_fetch_add(a, &old, word, 1, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_pending_poll(&p, NULL), SFV_ERR_INVALID); /* zeroed by the refusal */
    CHECK_RESULT(sfv_channel_fetch_add(a, NULL, word, 1, &wc), SFV_ERR_INVALID);
    old.length = 8;
    CHECK_RESULT(sfv_channel_post_fetch_add(a, &old, word, 1, NULL), SFV_ERR_INVALID); /* outside a scope */
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK_OK(sfv_channel_fetch_add(a, &old, word, 1, &wc));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* the peer's MR without REMOTE_ATOMIC: a remote access error whose hint says so */
    tf_pair(&e, &d, &a, &b);
    CHECK_RESULT(sfv_channel_fetch_add(a, &old, sfv_mr_remote(e.mr), 1, &wc), SFV_ERR_WORK);
    CHECK(wc.status == SFV_WC_REM_ACCESS_ERR && wc.error_class == SFV_WORK_ERROR_REMOTE);
    CHECK(strstr(sfv_last_error()->message, "REMOTE_ATOMIC") != NULL);
    CHECK(strstr(sfv_last_error()->message, "atomic fetch-and-add") != NULL);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* the peer's QP without REMOTE_ATOMIC (the default access) */
    tf_pair(&e, NULL, &a, &b);
    CHECK_RESULT(sfv_channel_compare_swap(a, &old, word, 0, 1, &wc), SFV_ERR_WORK);
    CHECK(wc.error_class == SFV_WORK_ERROR_REMOTE);
    CHECK(strstr(sfv_last_error()->message, "REMOTE_ATOMIC") != NULL);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    sfv_dereg_mr(amr);
    tf_close(&e);
    /* a device without atomics */
    fk_set_atomic_cap(IBV_ATOMIC_NONE);
    tf_open(&e, 256);
    tf_pair(&e, &d, &a, &b);
    old = sfv_mr_scatter_element(e.mr, e.buf, 8);
    CHECK_RESULT(sfv_channel_fetch_add(a, &old, sfv_mr_remote(e.mr), 1, &wc), SFV_ERR_UNSUPPORTED);
    CHECK_EQ(sfv_last_error()->result, SFV_ERR_UNSUPPORTED);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
    fk_reset();
}

static void t_not_connected(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_endpoint ep;
    sfv_gather_element g;
    sfv_pending p;
    tf_open(&e, 64);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    CHECK_RESULT(sfv_channel_post_send(a, &g, 1, &p), SFV_ERR_INVALID);
    CHECK_OK(sfv_channel_endpoint(b, &ep));
    ep.has_gid = false; /* RoCE needs the GID */
    CHECK_RESULT(sfv_channel_handshake(a, &ep), SFV_ERR_INVALID);
    ep.has_gid = true;
    ep.mtu = 300;
    CHECK_RESULT(sfv_channel_handshake(a, &ep), SFV_ERR_INVALID);
    CHECK_OK(sfv_channel_endpoint(b, &ep));
    ep.psn ^= 1; /* a PSN the peer does not send: the fake drops it, retries run out */
    CHECK_OK(sfv_channel_handshake(a, &ep));
    CHECK_OK(sfv_channel_endpoint(a, &ep));
    CHECK_OK(sfv_channel_handshake(b, &ep));
    CHECK_RESULT(sfv_channel_write(b, &g, 1, sfv_mr_remote(e.mr), NULL), SFV_ERR_WORK);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static void t_destroy_in_flight(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_pending rx[3], tx;
    sfv_gather_element g;
    sfv_scatter_element s;
    tf_open(&e, 64);
    tf_pair(&e, NULL, &a, &b);
    s = sfv_mr_scatter_element(e.mr, e.buf, 8);
    g = sfv_mr_gather_element(e.mr, e.buf + 8, 8);
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx[0]));
    s = sfv_mr_scatter_element(e.mr, e.buf + 16, 8); /* two receives never share memory (SFV_TRACK_INFLIGHT) */
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx[1]));
    s = sfv_mr_scatter_element(e.mr, e.buf + 24, 8);
    CHECK_OK(sfv_channel_post_send(b, &g, 1, &tx));
    CHECK_OK(sfv_channel_post_send(b, &g, 1, &tx));
    CHECK_OK(sfv_channel_post_send(b, &g, 1, &tx)); /* waits for a receive (RNR) */
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx[2]));
    CHECK(sfv_channel_outstanding(b) == 4);
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_EQ(fk_live(FK_QP) + fk_live(FK_CQ), 0);
    tf_close(&e);
}

static void t_event_mode(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_pending rx;
    sfv_work_completion wc;
    sfv_gather_element g;
    sfv_scatter_element s;
    struct pollfd pfd;
    memset(&d, 0, sizeof d);
    d.wait_mode = SFV_WAIT_EVENT;
    d.timeout_ms = 100;
    tf_open(&e, 64);
    tf_pair(&e, &d, &a, &b);
    CHECK(sfv_channel_fd(a) >= 0 && sfv_channel_fd(b) >= 0);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    s = sfv_mr_scatter_element(e.mr, e.buf + 32, 8);
    memcpy(e.buf, "event", 6);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_OK(sfv_channel_arm(b));
    pfd.fd = sfv_channel_fd(b);
    pfd.events = POLLIN;
    CHECK_EQ(poll(&pfd, 1, 0), 0);
    CHECK_OK(sfv_channel_send(a, &g, 1, NULL));
    CHECK_EQ(poll(&pfd, 1, 0), 1);
    CHECK_OK(sfv_channel_ack_events(b));
    CHECK_OK(sfv_pending_poll(&rx, &wc));
    CHECK(strcmp((char *)e.buf + 32, "event") == 0);
    /* a blocking wait that sleeps and expires */
    CHECK_RESULT(sfv_channel_receive(b, &s, 1, &wc), SFV_ERR_TIMEOUT);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_EQ(fk_live(FK_COMP_CHANNEL), 0);
    tf_close(&e);
}

static void t_multi_channel(void) {
    tf_env e;
    sfv_multi_channel *m1, *m2;
    sfv_endpoint ep1[3], ep2[3];
    sfv_pending rx[3];
    sfv_work_completion wcs[3];
    sfv_gather_element g;
    sfv_scatter_element s[3];
    sfv_peer_send ps[3];
    sfv_peer_write pw[3];
    sfv_peer_read pr[3];
    size_t peers[2] = {0, 2}, i;
    tf_open(&e, 4096);
    CHECK_OK(sfv_create_multi_channel(e.pd, 3, NULL, &m1));
    CHECK_OK(sfv_create_multi_channel(e.pd, 3, NULL, &m2));
    CHECK_EQ(sfv_multi_channel_len(m1), 3);
    CHECK(sfv_multi_channel_peer(m1, 3) == NULL);
    CHECK_OK(sfv_multi_channel_endpoints(m1, ep1, 3));
    CHECK_OK(sfv_multi_channel_endpoints(m2, ep2, 3));
    CHECK_RESULT(sfv_multi_channel_handshake(m1, ep2, 2), SFV_ERR_INVALID);
    CHECK_OK(sfv_multi_channel_handshake(m1, ep2, 3));
    CHECK_OK(sfv_multi_channel_handshake(m2, ep1, 3));
    memcpy(e.buf, "multi", 6);
    g = sfv_mr_gather_element(e.mr, e.buf, 6);
    for (i = 0; i < 3; i++) {
        s[i] = sfv_mr_scatter_element(e.mr, e.buf + 1024 + 64 * i, 64);
        CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(m2, i), &s[i], 1, &rx[i]));
        ps[i].peer = i;
        ps[i].sges = &g;
        ps[i].n = 1;
        ps[i].has_imm = i == 1;
        ps[i].imm = 42;
    }
    CHECK_OK(sfv_multi_channel_scatter_send(m1, ps, 3, wcs));
    for (i = 0; i < 3; i++) {
        CHECK_OK(sfv_pending_wait(&rx[i], -1, &wcs[i]));
        CHECK(strcmp((char *)e.buf + 1024 + 64 * i, "multi") == 0 && wcs[i].has_imm == (i == 1));
    }
    for (i = 0; i < 2; i++) CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(m2, peers[i]), &s[i], 1, &rx[i]));
    CHECK_OK(sfv_multi_channel_multicast_send(m1, peers, 2, &g, 1, wcs));
    for (i = 0; i < 2; i++) CHECK_OK(sfv_pending_wait(&rx[i], -1, NULL));
    for (i = 0; i < 3; i++) {
        pw[i].peer = i;
        pw[i].sges = &g;
        pw[i].n = 1;
        pw[i].remote = sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 2048 + 64 * i), 64, sfv_mr_rkey(e.mr));
        pw[i].has_imm = false;
        pr[i].peer = 2 - i;
        pr[i].sges = &s[i];
        pr[i].n = 1;
        pr[i].remote = sfv_remote_mr_make((uint64_t)(uintptr_t)e.buf, 64, sfv_mr_rkey(e.mr));
    }
    CHECK_OK(sfv_multi_channel_scatter_write(m1, pw, 3, NULL));
    CHECK(strcmp((char *)e.buf + 2048 + 128, "multi") == 0);
    memset(e.buf + 1024, 0, 256);
    CHECK_OK(sfv_multi_channel_gather_read(m2, pr, 3, wcs));
    CHECK(strcmp((char *)e.buf + 1024 + 64, "multi") == 0 && wcs[2].byte_len == 64);
    pw[1].peer = 5;
    CHECK_RESULT(sfv_multi_channel_scatter_write(m1, pw, 3, NULL), SFV_ERR_INVALID);
    pw[1].peer = 1;
    pw[1].remote.rkey ^= 1;
    CHECK_RESULT(sfv_multi_channel_scatter_write(m1, pw, 3, wcs), SFV_ERR_WORK);
    CHECK(wcs[0].result == SFV_OK && wcs[1].status == SFV_WC_REM_ACCESS_ERR && wcs[2].result == SFV_OK);
    CHECK_OK(sfv_destroy_multi_channel(m1));
    CHECK_OK(sfv_destroy_multi_channel(m2));
    CHECK_OK(sfv_destroy_multi_channel(NULL));
    tf_close(&e);
}

/* Every batch, request-list and many-peer call with a NULL array: count 0 is OK or a clean
   refusal (never pointer arithmetic on NULL: the ASan build runs with UBSan, no recovery), and a
   count above 0 is SFV_ERR_INVALID. Work that a count-0 call accepted is waited for. */
#define TF_OK_OR_INVALID(call)                                                              \
    do {                                                                                    \
        sfv_result r_ = (call);                                                             \
        if (r_ != SFV_OK && r_ != SFV_ERR_INVALID) FAIL("%s returned %s", #call, sfv_result_str(r_)); \
    } while (0)
static void t_null_arrays(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_multi_channel *m1, *m2;
    sfv_endpoint ep[2];
    sfv_srq *srq;
    sfv_srq_desc sd;
    sfv_cq *cq;
    sfv_node *node;
    sfv_node_desc nd;
    sfv_pending p, rp, ps[2];
    sfv_work_completion wcs[2];
    sfv_gather_element g;
    sfv_scatter_element sc;
    sfv_remote_mr remote, remotes[2];
    sfv_result r;
    size_t n = 0, peers[2] = {0, 1};
    uint8_t blob[SFV_NODE_ENDPOINT_SIZE(1)];
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    sc = sfv_mr_scatter_element(e.mr, e.buf + 1024, 8);
    remote = sfv_remote_mr_make((uint64_t)(uintptr_t)(e.buf + 2048), 64, sfv_mr_rkey(e.mr));
    remotes[0] = remotes[1] = remote;
    /* element lists: NULL with 0 elements is zero-length work, which verbs allow */
    CHECK_OK(sfv_channel_post_receive(b, NULL, 0, &rp));
    CHECK_OK(sfv_channel_post_send(a, NULL, 0, &p));
    CHECK_OK(sfv_pending_wait(&p, -1, NULL));
    CHECK_OK(sfv_pending_wait(&rp, -1, NULL));
    if (sfv_channel_post_write(a, NULL, 0, remote, &p) == SFV_OK) CHECK_OK(sfv_pending_wait(&p, -1, NULL));
    if (sfv_channel_post_read(a, NULL, 0, remote, &p) == SFV_OK) CHECK_OK(sfv_pending_wait(&p, -1, NULL));
    CHECK_RESULT(sfv_channel_post_send(a, NULL, 1, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_send_imm(a, NULL, 1, 7, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_receive(b, NULL, 1, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_write(a, NULL, 1, remote, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_write_imm(a, NULL, 1, remote, 7, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_read(a, NULL, 1, remote, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_send(a, NULL, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_receive(b, NULL, 1, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_write(a, NULL, 1, remote, NULL), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_read(a, NULL, 1, remote, NULL), SFV_ERR_INVALID);
    /* batches */
    TF_OK_OR_INVALID(sfv_channel_post_send_batch(a, NULL, 1, 0, &p));
    TF_OK_OR_INVALID(sfv_channel_post_write_batch(a, NULL, 1, 0, NULL, &p));
    TF_OK_OR_INVALID(sfv_channel_post_read_batch(a, NULL, 1, 0, NULL, &p));
    TF_OK_OR_INVALID(sfv_channel_post_receive_batch(b, NULL, 1, 0, NULL));
    CHECK_RESULT(sfv_channel_post_send_batch(a, NULL, 1, 2, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_write_batch(a, NULL, 1, 2, remotes, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_write_batch(a, &g, 1, 1, NULL, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_read_batch(a, NULL, 1, 2, remotes, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_read_batch(a, &sc, 1, 1, NULL, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_receive_batch(b, NULL, 1, 2, ps), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_receive_batch(b, &sc, 1, 1, NULL), SFV_ERR_INVALID);
    /* request lists */
    TF_OK_OR_INVALID(sfv_channel_post_sends(a, NULL, 0, &p));
    TF_OK_OR_INVALID(sfv_channel_post_writes(a, NULL, 0, &p));
    TF_OK_OR_INVALID(sfv_channel_post_reads(a, NULL, 0, &p));
    CHECK_RESULT(sfv_channel_post_sends(a, NULL, 2, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_writes(a, NULL, 2, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_post_reads(a, NULL, 2, &p), SFV_ERR_INVALID);
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* an SRQ */
    memset(&sd, 0, sizeof sd);
    CHECK_OK(sfv_create_srq(e.pd, &sd, &srq));
    TF_OK_OR_INVALID(sfv_srq_post_receive_batch(srq, NULL, 1, 0, NULL));
    CHECK_RESULT(sfv_srq_post_receive(srq, NULL, 1, &p), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_srq_post_receive_batch(srq, NULL, 1, 2, ps), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_srq_post_receive_batch(srq, &sc, 1, 1, NULL), SFV_ERR_INVALID);
    r = sfv_srq_post_receive(srq, NULL, 0, &p); /* a zero-length receive: flushed at destroy */
    CHECK(r == SFV_OK || r == SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_srq(srq));
    /* a CQ and the device's events */
    CHECK_OK(sfv_create_cq(e.ctx, 4, &cq));
    TF_OK_OR_INVALID(sfv_poll_cq(cq, NULL, 0, &n));
    CHECK_RESULT(sfv_poll_cq(cq, NULL, 2, &n), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_cq(cq));
    TF_OK_OR_INVALID(sfv_context_events(e.ctx, NULL, 0, &n));
    CHECK_RESULT(sfv_context_events(e.ctx, NULL, 2, &n), SFV_ERR_INVALID);
    /* many peers */
    CHECK_RESULT(sfv_create_multi_channel(e.pd, 0, NULL, &m1), SFV_ERR_INVALID);
    CHECK_OK(sfv_create_multi_channel(e.pd, 2, NULL, &m1));
    CHECK_OK(sfv_create_multi_channel(e.pd, 2, NULL, &m2));
    TF_OK_OR_INVALID(sfv_multi_channel_endpoints(m1, NULL, 0));
    CHECK_RESULT(sfv_multi_channel_endpoints(m1, NULL, 2), SFV_ERR_INVALID);
    TF_OK_OR_INVALID(sfv_multi_channel_handshake(m1, NULL, 0));
    CHECK_RESULT(sfv_multi_channel_handshake(m1, NULL, 2), SFV_ERR_INVALID);
    CHECK_OK(sfv_multi_channel_endpoints(m2, ep, 2));
    CHECK_OK(sfv_multi_channel_handshake(m1, ep, 2));
    CHECK_OK(sfv_multi_channel_endpoints(m1, ep, 2));
    CHECK_OK(sfv_multi_channel_handshake(m2, ep, 2));
    TF_OK_OR_INVALID(sfv_multi_channel_scatter_send(m1, NULL, 0, NULL));
    TF_OK_OR_INVALID(sfv_multi_channel_scatter_write(m1, NULL, 0, NULL));
    TF_OK_OR_INVALID(sfv_multi_channel_gather_receive(m1, NULL, 0, NULL));
    TF_OK_OR_INVALID(sfv_multi_channel_gather_read(m1, NULL, 0, NULL));
    TF_OK_OR_INVALID(sfv_multi_channel_multicast_send(m1, NULL, 0, &g, 1, NULL));
    CHECK_RESULT(sfv_multi_channel_scatter_send(m1, NULL, 2, wcs), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_scatter_write(m1, NULL, 2, wcs), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_gather_receive(m1, NULL, 2, wcs), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_gather_read(m1, NULL, 2, wcs), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_multicast_send(m1, NULL, 2, &g, 1, wcs), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_multi_channel_multicast_send(m1, peers, 2, NULL, 1, wcs), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_multi_channel(m1));
    CHECK_OK(sfv_destroy_multi_channel(m2));
    /* a node (a world of one) and the exchange's config */
    memset(&nd, 0, sizeof nd);
    nd.world_size = 1;
    CHECK_OK(sfv_create_node(e.pd, &nd, &node));
    CHECK_RESULT(sfv_node_endpoint(node, NULL, 0), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_endpoint(node, NULL, sizeof blob), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_handshake(node, NULL, 0), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_handshake(node, NULL, sizeof blob), SFV_ERR_INVALID);
    CHECK_OK(sfv_node_endpoint(node, blob, sizeof blob));
    CHECK_OK(sfv_node_handshake(node, blob, sizeof blob));
    TF_OK_OR_INVALID(sfv_node_barrier(node, NULL, 0, 100));
    TF_OK_OR_INVALID(sfv_node_barrier_unchecked(node, NULL, 0, 100));
    CHECK_OK(sfv_node_barrier(node, NULL, 5, 100)); /* peers NULL means every rank, whatever n (documented) */
    CHECK_OK(sfv_node_barrier_unchecked(node, NULL, 5, 100));
    CHECK_OK(sfv_destroy_node(node));
    CHECK_RESULT(sfv_net_config_check(NULL, 0), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_net_config_check(NULL, 2), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_exchange_all(NULL, 0, 0, NULL, 0, NULL, 10), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_exchange_all(NULL, 2, 0, NULL, 0, NULL, 10), SFV_ERR_INVALID);
    tf_close(&e);
}

/* A peer GID the path cannot use, refused by the verb at RTR with EINVAL (the fake refuses an IPv4
   GID of another /24, as some drivers do; rxe says ETIMEDOUT, t_gid_other_subnet in
   test_channel.c): the error names the verb and hints at the GIDs' type and subnet. */
/* A channel or SRQ whose destroy failed half-way (its QP or SRQ gone, its CQ not) refuses work
   rather than handing the verbs a NULL queue, and the destroy can be repeated. */
static void t_half_destroyed_refuses(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_srq *srq;
    sfv_pending p;
    sfv_gather_element g;
    sfv_scatter_element s;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    s = sfv_mr_scatter_element(e.mr, e.buf + 64, 8);
    fk_fail_nth(2); /* sfv_destroy_channel: ibv_destroy_qp, then ibv_destroy_cq fails */
    CHECK_RESULT(sfv_destroy_channel(a), SFV_ERR_DRIVER);
    CHECK(fk_failed() && strcmp(fk_failed(), "ibv_destroy_cq") == 0);
    fk_fail_nth(0);
    CHECK_RESULT(sfv_channel_post_send(a, &g, 1, &p), SFV_ERR_BROKEN);
    CHECK_RESULT(sfv_channel_post_receive(a, &s, 1, &p), SFV_ERR_BROKEN);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_create_srq(e.pd, NULL, &srq));
    fk_fail_nth(2); /* sfv_destroy_srq: ibv_destroy_srq, then ibv_destroy_cq fails */
    CHECK_RESULT(sfv_destroy_srq(srq), SFV_ERR_DRIVER);
    fk_fail_nth(0);
    CHECK_RESULT(sfv_srq_post_receive(srq, &s, 1, &p), SFV_ERR_BROKEN);
    CHECK_OK(sfv_destroy_srq(srq));
    tf_close(&e);
}

/* An SRQ's receive flushed by an SRQ_ERR event names no channel, even where its place's last
   message had the length of a channel's QP number (a failed SRQ receive keeps the QP number it
   came in on where a success keeps its length). The fake NIC has no SRQ QPs: the first receive's
   completion is handed to the SRQ's completion path, and channel x is attached to the SRQ as a
   channel created on it would be. */
static void t_srq_flush_names_no_channel(void) {
    tf_env e;
    sfv_channel *x, *y;
    sfv_srq *srq;
    sfv_srq_desc sd;
    sfv_channel_desc d;
    sfv_pending r1, r2;
    sfv_work_completion wc;
    sfv_scatter_element s;
    sfv_gather_element g;
    tf_open(&e, 4096);
    memset(&sd, 0, sizeof sd);
    sd.max_wr = 1; /* one place: the second receive takes the first's */
    CHECK_OK(sfv_create_srq(e.pd, &sd, &srq));
    memset(&d, 0, sizeof d);
    d.srq = srq;
    CHECK_OK(sfv_create_channel(e.pd, &d, &x));
    CHECK_OK(sfv_create_channel(e.pd, NULL, &y));
    tf_connect(x, y);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    g = sfv_mr_gather_element(e.mr, e.buf + 1024, 16);
    CHECK_OK(sfv_srq_post_receive(srq, &s, 1, &r1));
    CHECK_OK(sfv_channel_send(y, &g, 1, NULL)); /* x takes it from the SRQ */
    CHECK_OK(sfv_pending_wait(&r1, 1000, &wc));
    CHECK(wc.channel == x && wc.byte_len == 16);
    CHECK_OK(sfv_srq_post_receive(srq, &s, 1, &r2));
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_SRQ_ERR, sfv_srq_raw(srq), 0);
    CHECK_RESULT(sfv_pending_wait(&r2, 5000, &wc), SFV_ERR_WORK);
    CHECK(wc.status == SFV_WC_WR_FLUSH_ERR && wc.channel == NULL); /* (its place held x's QP number before) */
    CHECK(sfv_channel_broken(x, NULL)); /* no QP takes a receive of a failed SRQ */
    CHECK_OK(sfv_destroy_channel(x));
    CHECK_OK(sfv_destroy_channel(y));
    CHECK_OK(sfv_destroy_srq(srq));
    tf_close(&e);
}

/* A CQ error on an SRQ's CQ: its receives are flushed (their buffers the program's again), so
   every channel on it stops first: a peer's next message lands in no buffer given back, and a
   fatal device error breaks the SRQ's waits at once too. */
/* An SRQ, channel a on it and b (not on it) connected to a, both with a 500 ms deadline. */
static void tf_srq_pair(tf_env *e, sfv_srq **srq, sfv_channel **a, sfv_channel **b) {
    sfv_channel_desc d;
    CHECK_OK(sfv_create_srq(e->pd, NULL, srq));
    memset(&d, 0, sizeof d);
    d.srq = *srq;
    d.timeout_ms = 500;
    CHECK_OK(sfv_create_channel(e->pd, &d, a));
    d.srq = NULL;
    CHECK_OK(sfv_create_channel(e->pd, &d, b));
    tf_connect(*a, *b);
}

static void t_srq_cq_err_stops_channels(void) {
    tf_env e;
    sfv_srq *srq;
    sfv_channel *a, *b;
    sfv_scatter_element s;
    sfv_gather_element g;
    sfv_pending rx, tx;
    sfv_work_completion wc;
    sfv_event ev[8];
    size_t n = 0, i, broken = 0;
    double t0;
    tf_open(&e, 4096);
    tf_srq_pair(&e, &srq, &a, &b);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    g = sfv_mr_gather_element(e.mr, e.buf + 1024, 16);
    CHECK_OK(sfv_srq_post_receive(srq, &s, 1, &rx));
    CHECK_OK(sfv_channel_post_send(a, &g, 1, &tx)); /* b has no receive: in flight (RNR) */
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_CQ_ERR, sfv_channel_raw_qp(a)->recv_cq, 0);
    CHECK_RESULT(sfv_pending_wait(&rx, -1, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK(sfv_channel_broken(a, NULL));
    /* a's own work, flushed by the SRQ's wait, says why as a's own wait would have */
    CHECK_RESULT(sfv_pending_wait(&tx, 1000, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
    CHECK(strstr(sfv_last_error()->message, "CQ") != NULL);
    CHECK_OK(sfv_context_events(e.ctx, ev, 8, &n));
    for (i = 0; i < n; i++) broken += ev[i].channels_broken;
    CHECK_EQ(broken, 1); /* a, not the SRQ's own inner channel */
    memcpy(e.buf, "program's own data", 19);
    memcpy(e.buf + 1024, "PEER OVERWRITES", 16);
    CHECK(sfv_channel_send(b, &g, 1, &wc) != SFV_OK); /* a takes nothing any more: b's send fails */
    CHECK(memcmp(e.buf, "program's own data", 19) == 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_destroy_srq(srq));
    /* a fatal device error ends an SRQ's wait at once, not at its deadline */
    CHECK_OK(sfv_create_srq(e.pd, NULL, &srq));
    CHECK_OK(sfv_srq_post_receive(srq, &s, 1, &rx));
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_DEVICE_FATAL, NULL, 0);
    t0 = test_seconds();
    CHECK_RESULT(sfv_pending_wait(&rx, 3000, &wc), SFV_ERR_WORK);
    CHECK(test_seconds() - t0 < 1.0);
    CHECK_OK(sfv_destroy_srq(srq));
    tf_close(&e);
}

/* Debug builds: a handle whose channel was destroyed aborts, also where a new channel took the
   dead one's address and its ring is elsewhere (the handle's place is checked against its ring). */
static void t_dead_channel_handle(void) {
#if SFV_DEBUG
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_pending p;
    sfv_scatter_element s;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.max_recv_wr = 64;
    CHECK_OK(sfv_create_channel(e.pd, &d, &a));
    s = sfv_mr_scatter_element(e.mr, e.buf, 8);
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &p));
    CHECK_OK(sfv_destroy_channel(a));
    d.max_recv_wr = 1024; /* a ring of another size: elsewhere */
    CHECK_OK(sfv_create_channel(e.pd, &d, &b));
    CHECK_ABORTS((void)!sfv_pending_wait(&p, 0, NULL));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
#endif
}

static void t_gid_subnet_hint(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_endpoint eb;
    tf_open(&e, 64);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK(sfv_gid_is_ipv4(&eb.gid));
    eb.gid.raw[12] = 198; eb.gid.raw[13] = 51; eb.gid.raw[14] = 100; /* TEST-NET-2 */
    CHECK_RESULT(sfv_channel_handshake(a, &eb), SFV_ERR_INVALID);
    CHECK(strcmp(sfv_last_error()->verb, "ibv_modify_qp") == 0 && sfv_last_error()->errnum == EINVAL);
    CHECK(strstr(sfv_last_error()->message, "same type and subnet") != NULL);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* The node's barrier needs every rank running at once: one thread per rank, and the fake runs
   them one at a time (a lock around every call into safeverbs, released while a rank spins). */
typedef struct tf_rank {
    sfv_node *node;
    sfv_result r;
    int rounds;
} tf_rank;

static void *tf_rank_main(void *arg) {
    tf_rank *k = (tf_rank *)arg;
    int i;
    for (i = 0; i < k->rounds && k->r == SFV_OK; i++) k->r = sfv_node_barrier(k->node, NULL, 0, 2000);
    return NULL;
}

static void t_node(void) {
    tf_env e;
    sfv_node_desc d;
    sfv_node *nodes[2];
    size_t each = SFV_NODE_ENDPOINT_SIZE(2), r;
    uint8_t all[2 * SFV_NODE_ENDPOINT_SIZE(2)];
    tf_rank ranks[2];
    pthread_t th;
    tf_open(&e, 64);
    memset(&d, 0, sizeof d);
    d.world_size = 2;
    d.barrier = SFV_BARRIER_DISSEMINATION;
    for (r = 0; r < 2; r++) {
        d.rank = r;
        CHECK_OK(sfv_create_node(e.pd, &d, &nodes[r]));
        CHECK_OK(sfv_node_endpoint(nodes[r], all + r * each, each));
    }
    CHECK_RESULT(sfv_node_endpoint(nodes[0], all, each - 1), SFV_ERR_INVALID);
    CHECK(all[0] == 0 && all[each - 2] == 0); /* a refused call leaves its output zeroed */
    CHECK_OK(sfv_node_endpoint(nodes[0], all, each));
    CHECK_RESULT(sfv_node_handshake(nodes[0], all, sizeof all - 1), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_node_barrier(nodes[0], NULL, 0, 10), SFV_ERR_INVALID); /* not connected */
    for (r = 0; r < 2; r++) CHECK_OK(sfv_node_handshake(nodes[r], all, sizeof all));
    CHECK(sfv_node_rank(nodes[1]) == 1 && sfv_node_world_size(nodes[1]) == 2 && sfv_node_multi_channel(nodes[1]));
    {
        size_t me[1] = {0};
        CHECK_OK(sfv_node_barrier(nodes[0], me, 1, 10)); /* a group of one */
    }
    for (r = 0; r < 2; r++) {
        ranks[r].node = nodes[r];
        ranks[r].r = SFV_OK;
        ranks[r].rounds = 20;
    }
    CHECK(pthread_create(&th, NULL, tf_rank_main, &ranks[1]) == 0);
    tf_rank_main(&ranks[0]);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK_OK(ranks[0].r);
    CHECK_OK(ranks[1].r);
    /* rank 0 alone: the barrier times out, and that poisons it */
    CHECK_RESULT(sfv_node_barrier(nodes[0], NULL, 0, 20), SFV_ERR_TIMEOUT);
    CHECK_RESULT(sfv_node_barrier(nodes[0], NULL, 0, 20), SFV_ERR_BROKEN);
    for (r = 0; r < 2; r++) CHECK_OK(sfv_destroy_node(nodes[r]));
    tf_close(&e);
}

/* Device limits, the raw accessors and the wrappers on the fake: what was wrapped without
   ownership is left to the user, with ownership it is freed; a refused wrap takes nothing. */
static void t_raw_and_wrap(void) {
    struct ibv_device **devs;
    struct ibv_context *raw;
    struct ibv_pd *raw_pd;
    sfv_context *c = (sfv_context *)1;
    sfv_pd *pd = (sfv_pd *)1;
    sfv_device_attr a;
    int n = 0;
    long k;
    CHECK(sfv_context_raw(NULL) == NULL && sfv_pd_raw(NULL) == NULL && sfv_mr_raw(NULL) == NULL &&
          sfv_cq_raw(NULL) == NULL && sfv_channel_raw_qp(NULL) == NULL && sfv_channel_raw_cq(NULL) == NULL);
    CHECK_RESULT(sfv_query_device(NULL, &a), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_context_wrap(NULL, true, &c), SFV_ERR_INVALID);
    CHECK(c == NULL);
    CHECK_RESULT(sfv_pd_wrap(NULL, NULL, true, &pd), SFV_ERR_INVALID);
    CHECK(pd == NULL);
    devs = ibv_get_device_list(&n);
    CHECK(devs && n == 2);
    raw = ibv_open_device(devs[1]);
    ibv_free_device_list(devs);
    CHECK(raw != NULL);
    raw_pd = ibv_alloc_pd(raw);
    CHECK(raw_pd != NULL);
    /* A port that is down: refused as sfv_open_device refuses it; the context stays the user's. */
    fk_set_port_state(1);
    CHECK_RESULT(sfv_context_wrap(raw, true, &c), SFV_ERR_RESOURCE);
    CHECK(c == NULL && strstr(sfv_last_error()->message, "DOWN") != NULL);
    CHECK_EQ(fk_live(FK_CONTEXT), 1);
    fk_set_port_state(4);
    /* Without ownership. */
    CHECK_OK(sfv_context_wrap(raw, false, &c));
    CHECK(sfv_context_raw(c) == raw && strcmp(sfv_context_name(c), "fake1") == 0);
    { /* a raw context without its device (the wrap takes it): no NUMA node, nothing read */
        struct ibv_device *dev = raw->device;
        raw->device = NULL;
        CHECK_EQ(sfv_context_numa_node(c), -1);
        CHECK_RESULT(sfv_context_bind_thread_to_numa(c, true), SFV_ERR_NOT_FOUND);
        raw->device = dev;
    }
    CHECK_OK(sfv_query_device(c, &a));
    CHECK(strcmp(a.fw_ver, "fake") == 0 && a.node_guid == 0x0002c90300a0b001ull && a.atomic_cap == SFV_ATOMIC_HCA);
    CHECK(a.max_qp_wr == 4096 && a.max_sge == 16 && a.max_res_rd_atom == (1u << 20) && a.phys_port_cnt == 1);
    CHECK(a.vendor_id == 0x02c9 && a.vendor_part_id == 4119 && a.max_mr_size == UINT64_MAX);
    CHECK_RESULT(sfv_pd_wrap(c, NULL, false, &pd), SFV_ERR_INVALID);
    CHECK_OK(sfv_pd_wrap(c, raw_pd, false, &pd));
    CHECK(sfv_pd_raw(pd) == raw_pd);
    sfv_dealloc_pd(pd);
    sfv_close_device(c);
    CHECK_EQ(fk_live(FK_CONTEXT), 1);
    CHECK_EQ(fk_live(FK_PD), 1);
    /* Each call the wrappers make, failing in turn: an error naming it, and the raw objects
       still the user's (even with take_ownership). */
    for (k = 1;; k++) {
        sfv_result r;
        fk_fail_nth(k);
        r = sfv_context_wrap(raw, true, &c);
        if (r == SFV_OK) {
            CHECK(fk_failed() == NULL);
            break;
        }
        CHECK(c == NULL && fk_failed() != NULL && strcmp(sfv_last_error()->verb, fk_failed()) == 0);
        CHECK_EQ(fk_live(FK_CONTEXT), 1);
    }
    CHECK(k == 5); /* calloc, the calloc of the set of live handles (none live: it is made anew), ibv_query_device, ibv_query_port */
    fk_fail_nth(1);
    CHECK_RESULT(sfv_pd_wrap(c, raw_pd, true, &pd), SFV_ERR_RESOURCE);
    CHECK(pd == NULL && strcmp(fk_failed(), "calloc") == 0);
    fk_reset();
    /* With ownership: safeverbs frees both. */
    CHECK_OK(sfv_pd_wrap(c, raw_pd, true, &pd));
    sfv_close_device(c);
    CHECK_EQ(fk_live(FK_CONTEXT), 1); /* the PD holds it */
    sfv_dealloc_pd(pd);
    CHECK_EQ(fk_live_total(), 0);
}

/* A device without memory windows (the fake has none: max_mw 0): leases say UNSUPPORTED and
   what to do instead, before any verb. */
static void t_lease_unsupported(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_mr *mw_mr;
    sfv_lease *l = (sfv_lease *)1;
    tf_open(&e, 256);
    tf_pair(&e, NULL, &a, &b);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf, 256, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_MW_BIND, &mw_mr));
    CHECK_RESULT(sfv_lease_grant(a, mw_mr, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_UNSUPPORTED);
    CHECK(l == NULL);
    CHECK(strstr(sfv_last_error()->message, "separate MR") != NULL);
    CHECK_OK(sfv_lease_revoke(NULL));
    CHECK_EQ(sfv_lease_remote(NULL).rkey, 0);
    CHECK_OK(sfv_dereg_mr(mw_mr));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* The device's asynchronous events (>>events), injected into the fake: QP_FATAL breaks its
   channel and a wait flushes it with class FATAL (rxe never reports QP_FATAL, so only here);
   CQ_ERR on an event-mode channel wakes its sleep; PORT_ERR breaks every channel of the port;
   the queue keeps the last 64 and counts what it dropped; every event is acked. */
static void t_async_events(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b, *c, *c2;
    sfv_work_completion wc;
    sfv_scatter_element s;
    sfv_gather_element g;
    sfv_pending rx;
    sfv_event ev[64];
    sfv_event_type by;
    size_t n = 0, i;
    double t0;
    int fd = -1;
    memset(&d, 0, sizeof d);
    tf_open(&e, 256);
    tf_pair(&e, &d, &a, &b);
    CHECK_OK(sfv_context_event_fd(e.ctx, &fd));
    s = sfv_mr_scatter_element(e.mr, e.buf, 8);
    g = sfv_mr_gather_element(e.mr, e.buf + 64, 8);
    /* QP_FATAL on a's QP while a receive waits on it (busy wait): flushed, class FATAL, soon */
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx));
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_QP_FATAL, sfv_channel_raw_qp(a), 0);
    t0 = test_seconds();
    CHECK_RESULT(sfv_pending_wait(&rx, 5000, &wc), SFV_ERR_WORK);
    CHECK(test_seconds() - t0 < 1.0);
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
    CHECK(strstr(sfv_last_error()->message, "QP_FATAL") != NULL);
    CHECK(sfv_channel_broken(a, &by));
    CHECK_EQ(by, SFV_EVENT_QP_FATAL);
    CHECK(!sfv_channel_broken(b, &by));
    CHECK_EQ(by, SFV_EVENT_OTHER);
    CHECK_RESULT(sfv_channel_send(a, &g, 1, &wc), SFV_ERR_BROKEN);
    CHECK(strstr(sfv_last_error()->message, "QP_FATAL") != NULL);
    CHECK_EQ(fk_async_unacked(), 0);
    {
        struct pollfd p = {fd, POLLIN, 0};
        CHECK(poll(&p, 1, 0) == 1);
    }
    CHECK_OK(sfv_context_events(e.ctx, ev, 64, &n));
    CHECK_EQ(n, 1);
    CHECK_EQ(ev[0].type, SFV_EVENT_QP_FATAL);
    CHECK(ev[0].channel == a);
    CHECK_EQ(ev[0].qp_num, sfv_channel_raw_qp(a)->qp_num);
    CHECK_EQ(ev[0].channels_broken, 1);
    {
        struct pollfd p = {fd, POLLIN, 0};
        CHECK(poll(&p, 1, 0) == 0);
    }
    /* CQ_ERR wakes an event-mode sleep */
    d.wait_mode = SFV_WAIT_EVENT;
    CHECK_OK(sfv_create_channel(e.pd, &d, &c));
    CHECK_OK(sfv_channel_post_receive(c, &s, 1, &rx));
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_CQ_ERR, sfv_channel_raw_cq(c), 0);
    t0 = test_seconds();
    CHECK_RESULT(sfv_pending_wait(&rx, 5000, &wc), SFV_ERR_WORK);
    CHECK(test_seconds() - t0 < 1.0);
    CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
    CHECK(strstr(sfv_last_error()->message, "CQ") != NULL);
    CHECK_OK(sfv_destroy_channel(c));
    /* PORT_ERR breaks every channel of the port (b, and two new ones; a is broken already) */
    CHECK_OK(sfv_create_channel(e.pd, NULL, &c));
    CHECK_OK(sfv_create_channel(e.pd, NULL, &c2));
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_PORT_ERR, NULL, 1);
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_PORT_ACTIVE, NULL, 1);
    CHECK_OK(sfv_context_events(e.ctx, ev, 64, &n));
    CHECK_EQ(n, 3);
    CHECK_EQ(ev[0].type, SFV_EVENT_CQ_ERR);
    CHECK_EQ(ev[1].type, SFV_EVENT_PORT_ERR);
    CHECK_EQ(ev[1].port, 1);
    CHECK_EQ(ev[1].channels_broken, 3);
    CHECK_EQ(ev[2].type, SFV_EVENT_PORT_ACTIVE);
    CHECK(sfv_channel_broken(c, &by) && by == SFV_EVENT_PORT_ERR);
    CHECK_RESULT(sfv_channel_post_receive(c2, &s, 1, &rx), SFV_ERR_BROKEN);
    CHECK(strstr(sfv_last_error()->message, "port went down") != NULL);
    /* 80 events into a queue of 64: the oldest 16 go, and the oldest left says so */
    for (i = 0; i < 5; i++) {
        size_t k;
        for (k = 0; k < 16; k++) fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_LID_CHANGE, NULL, 1);
        CHECK_OK(sfv_context_events(e.ctx, NULL, 0, &n));
        CHECK_EQ(n, 0);
    }
    CHECK_OK(sfv_context_events(e.ctx, ev, 64, &n));
    CHECK_EQ(n, 64);
    CHECK_EQ(ev[0].lost_before, 16);
    CHECK_EQ(ev[1].lost_before, 0);
    CHECK_EQ(fk_async_unacked(), 0);
    CHECK_OK(sfv_destroy_channel(c));
    CHECK_OK(sfv_destroy_channel(c2));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* SRQ events, injected: SRQ_LIMIT_REACHED names the SRQ and breaks nothing; SRQ_ERR fails every
   receive it holds at once (class FATAL), instead of leaving its waits to their deadline. */
static void t_srq_events(void) {
    tf_env e;
    sfv_srq *srq;
    sfv_scatter_element s;
    sfv_pending rx[2];
    sfv_work_completion wc;
    sfv_event ev[4];
    size_t n = 0;
    double t0;
    tf_open(&e, 256);
    CHECK_OK(sfv_create_srq(e.pd, NULL, &srq));
    CHECK(sfv_srq_raw(srq) != NULL);
    CHECK(sfv_srq_raw(NULL) == NULL);
    s = sfv_mr_scatter_element(e.mr, e.buf, 8);
    CHECK_OK(sfv_srq_post_receive(srq, &s, 1, &rx[0]));
    s = sfv_mr_scatter_element(e.mr, e.buf + 8, 8); /* memory of its own: two receives into one buffer race */
    CHECK_OK(sfv_srq_post_receive(srq, &s, 1, &rx[1]));
    CHECK_EQ(sfv_srq_outstanding(srq), 2);
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_SRQ_LIMIT_REACHED, sfv_srq_raw(srq), 0);
    CHECK_OK(sfv_context_events(e.ctx, ev, 4, &n));
    CHECK_EQ(n, 1);
    CHECK(ev[0].type == SFV_EVENT_SRQ_LIMIT_REACHED && ev[0].srq == srq && ev[0].channels_broken == 0);
    CHECK_RESULT(sfv_pending_wait(&rx[0], 0, NULL), SFV_ERR_TIMEOUT);
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_SRQ_ERR, sfv_srq_raw(srq), 0);
    t0 = test_seconds();
    CHECK_RESULT(sfv_pending_wait(&rx[0], 5000, &wc), SFV_ERR_WORK);
    CHECK(test_seconds() - t0 < 1.0);
    CHECK(wc.status == SFV_WC_WR_FLUSH_ERR && wc.error_class == SFV_WORK_ERROR_FATAL);
    CHECK_RESULT(sfv_pending_wait(&rx[1], 0, &wc), SFV_ERR_WORK);
    CHECK_RESULT(sfv_srq_post_receive(srq, &s, 1, &rx[0]), SFV_ERR_BROKEN);
    CHECK_OK(sfv_context_events(e.ctx, ev, 4, &n));
    CHECK(n == 1 && ev[0].type == SFV_EVENT_SRQ_ERR && ev[0].srq == srq);
    CHECK_OK(sfv_destroy_srq(srq));
    tf_close(&e);
}

/* ---- inject (>>inject) ---------------------------------------------------------------------- */


/* The default inline limit, SFV_INLINE_NONE, and what an inject refuses before posting. */
/* A multi-channel read whose peer's queue is full still checks its elements before it reads
   them: NULL with a count, and a count past the element limit, are SFV_ERR_INVALID (they were
   summed first: a NULL read, or one past the array). */
static void t_mc_full_elements(void) {
    tf_env e;
    sfv_multi_channel *mc;
    sfv_endpoint ep[1];
    sfv_channel_desc d;
    sfv_gather_element g;
    sfv_pending p;
    sfv_peer_read rq;
    sfv_work_completion wc;
    sfv_scatter_element one;
    memset(&d, 0, sizeof d);
    d.max_send_wr = 1;
    tf_open(&e, 4096);
    CHECK_OK(sfv_create_multi_channel(e.pd, 1, &d, &mc));
    CHECK_OK(sfv_multi_channel_endpoints(mc, ep, 1));
    CHECK_OK(sfv_multi_channel_handshake(mc, ep, 1)); /* peer 0 is itself */
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    CHECK_OK(sfv_channel_post_write(sfv_multi_channel_peer(mc, 0), &g, 1,
                                    sfv_remote_mr_make((uint64_t)(uintptr_t)e.buf + 64, 8, sfv_mr_rkey(e.mr)), &p));
    memset(&rq, 0, sizeof rq); /* the write's place is taken until it is consumed: the queue is full */
    rq.remote = sfv_remote_mr_make((uint64_t)(uintptr_t)e.buf, 64, sfv_mr_rkey(e.mr));
    rq.n = 1;
    CHECK_RESULT(sfv_multi_channel_gather_read(mc, &rq, 1, &wc), SFV_ERR_INVALID);
    one = sfv_mr_scatter_element(e.mr, e.buf + 128, 8);
    rq.sges = &one;
    rq.n = 100000000;
    CHECK_RESULT(sfv_multi_channel_gather_read(mc, &rq, 1, &wc), SFV_ERR_INVALID);
    rq.n = 1; /* a good one: the full queue */
    CHECK_RESULT(sfv_multi_channel_gather_read(mc, &rq, 1, &wc), SFV_ERR_RESOURCE);
    CHECK_OK(sfv_pending_wait(&p, 1000, NULL));
    CHECK_OK(sfv_multi_channel_gather_read(mc, &rq, 1, &wc));
    CHECK_OK(sfv_destroy_multi_channel(mc));
    tf_close(&e);
}

/* A multi-channel destroyed from inside a scope of one of its channels: refused before any
   channel goes (it destroyed the other peers' channels first, then refused). */
static sfv_multi_channel *tf_scoped_mc;
static sfv_result tf_destroy_mc_in_scope(sfv_channel *ch, void *user) {
    (void)ch, (void)user;
    CHECK_RESULT(sfv_destroy_multi_channel(tf_scoped_mc), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "peer 0") != NULL);
    CHECK_EQ(sfv_multi_channel_len(tf_scoped_mc), 3);
    return SFV_OK;
}
static void t_mc_destroy_in_scope(void) {
    tf_env e;
    sfv_endpoint ep[3];
    tf_open(&e, 256);
    CHECK_OK(sfv_create_multi_channel(e.pd, 3, NULL, &tf_scoped_mc));
    CHECK_OK(sfv_multi_channel_endpoints(tf_scoped_mc, ep, 3));
    CHECK_OK(sfv_multi_channel_handshake(tf_scoped_mc, ep, 3));
    CHECK_OK(sfv_channel_scope(sfv_multi_channel_peer(tf_scoped_mc, 0), tf_destroy_mc_in_scope, NULL, NULL));
    CHECK_EQ(sfv_multi_channel_len(tf_scoped_mc), 3);
    CHECK(sfv_multi_channel_peer(tf_scoped_mc, 2) != NULL);
    CHECK_OK(sfv_destroy_multi_channel(tf_scoped_mc));
    tf_close(&e);
}

/* sfv_node_connect_with's allgather may return anything: what is no sfv_result failure is
   SFV_ERR_DRIVER (as is a result other than the error it recorded), and a failed sync after the
   handshake breaks the node (the ranks are not synced): a retry and a barrier say so. */
static int tf_ag_mode;
static sfv_result tf_allgather(void *user, const void *mine, void *all, size_t size) {
    (void)user;
    if (tf_ag_mode == 0) return (sfv_result)-9999;
    if (tf_ag_mode == 1) {
        sfv__ignore(sfv_exchange_all(NULL, 0, 0, NULL, 0, NULL, 0)); /* records SFV_ERR_INVALID */
        return (sfv_result)5;
    }
    if (size) memcpy(all, mine, size); /* a world of one */
    return size ? SFV_OK : tf_ag_mode == 2 ? (sfv_result)-9999 : SFV_ERR_TIMEOUT;
}
static void t_node_connect_with_results(void) {
    tf_env e;
    sfv_node_desc nd;
    sfv_node *node;
    tf_open(&e, 256);
    memset(&nd, 0, sizeof nd);
    nd.world_size = 1;
    for (tf_ag_mode = 0; tf_ag_mode < 4; tf_ag_mode++) {
        sfv_result r;
        CHECK_OK(sfv_create_node(e.pd, &nd, &node));
        r = sfv_node_connect_with(node, tf_allgather, NULL);
        CHECK_EQ(r, tf_ag_mode == 3 ? SFV_ERR_TIMEOUT : SFV_ERR_DRIVER);
        CHECK_EQ(sfv_last_error()->result, r);
        if (tf_ag_mode >= 2) { /* the sync failed after the handshake */
            CHECK(strstr(sfv_last_error()->message, "destroy it") != NULL);
            CHECK_RESULT(sfv_node_connect_with(node, tf_allgather, NULL), SFV_ERR_BROKEN);
            CHECK_RESULT(sfv_node_barrier(node, NULL, 0, 100), SFV_ERR_BROKEN);
        }
        CHECK_OK(sfv_destroy_node(node));
    }
    tf_close(&e);
}

/* An SRQ's failure stops every channel on it before its receives are said done; on a NIC that
   never flushes, each stopped QP's work is waited for until one deadline shared by all of them
   (SFV__ABORT_DRAIN_NS, 0.3 s in this file), then the QP is destroyed: 3 channels take about
   0.3 s, not 0.9 s. Every channel's work then says flushed, class FATAL. */
static void t_srq_channels_share_abort_deadline(void) {
    enum { K = 3 };
    tf_env e;
    sfv_srq *srq;
    sfv_channel *a[K], *b[K];
    sfv_channel_desc d;
    sfv_scatter_element s;
    sfv_gather_element g;
    sfv_pending rx, tx[K];
    sfv_work_completion wc;
    double t0, took;
    int k;
    tf_open(&e, 4096);
    CHECK_OK(sfv_create_srq(e.pd, NULL, &srq));
    memset(&d, 0, sizeof d);
    d.timeout_ms = 2000;
    for (k = 0; k < K; k++) {
        d.srq = srq;
        CHECK_OK(sfv_create_channel(e.pd, &d, &a[k]));
        d.srq = NULL;
        CHECK_OK(sfv_create_channel(e.pd, &d, &b[k]));
        tf_connect(a[k], b[k]);
    }
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    g = sfv_mr_gather_element(e.mr, e.buf + 1024, 16);
    CHECK_OK(sfv_srq_post_receive(srq, &s, 1, &rx));
    for (k = 0; k < K; k++) CHECK_OK(sfv_channel_post_send(a[k], &g, 1, &tx[k])); /* no receive at b: in flight */
    fk_set_no_flush(true);
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_CQ_ERR, sfv_channel_raw_qp(a[0])->recv_cq, 0);
    t0 = test_seconds();
    CHECK_RESULT(sfv_pending_wait(&rx, -1, &wc), SFV_ERR_WORK);
    took = test_seconds() - t0;
    if (took < 0.25 || took > 0.75) FAIL("stopping %d channels on a NIC that never flushes took %.2f s (one shared 0.3 s deadline)", K, took);
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    for (k = 0; k < K; k++) {
        CHECK(sfv_channel_broken(a[k], NULL));
        CHECK_RESULT(sfv_pending_wait(&tx[k], 100, &wc), SFV_ERR_WORK); /* its QP is gone: flushed */
        CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
        CHECK_EQ(wc.error_class, SFV_WORK_ERROR_FATAL);
    }
    fk_set_no_flush(false);
    for (k = 0; k < K; k++) {
        CHECK_OK(sfv_destroy_channel(a[k]));
        CHECK_OK(sfv_destroy_channel(b[k]));
    }
    CHECK_OK(sfv_destroy_srq(srq));
    tf_close(&e);
}

/* Leases on a fake with type 2 memory windows (fk_set_mw): a grant works and its revoke ends the
   peer's access; an MR with no remote access of its own is reached only through its lease (a
   write lease needs LOCAL_WRITE on it: SFV_ERR_INVALID before any verb); a window whose dealloc
   fails at the channel's destroy or reset is kept, and sfv_lease_revoke frees it; a bind whose
   wait fails (a failed poll) is not left in flight. */
static void t_lease_windows(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_mr *m, *ro;
    sfv_lease *l = NULL;
    sfv_gather_element g;
    sfv_work_completion wc;
    sfv_remote_mr rm;
    const unsigned rw = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_MW_BIND;
    int k;
    fk_set_mw(true);
    tf_open(&e, 8192);
    tf_pair(&e, NULL, &a, &b);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf, 4096, rw, &m));
    CHECK_OK(sfv_lease_grant(a, m, 100, 64, SFV_ACCESS_REMOTE_WRITE, &l));
    memcpy(e.buf + 5000, "leased", 6);
    g = sfv_mr_gather_element(e.mr, e.buf + 5000, 6);
    CHECK_OK(sfv_channel_write(b, &g, 1, sfv_lease_remote(l), NULL));
    CHECK(memcmp(e.buf + 100, "leased", 6) == 0);
    rm = sfv_lease_remote(l);
    CHECK_OK(sfv_lease_revoke(l));
    CHECK_EQ(fk_mw_count(), 0);
    CHECK_RESULT(sfv_channel_write(b, &g, 1, rm, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_REM_ACCESS_ERR);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* an MR without remote access: only its lease reaches it; without LOCAL_WRITE, no write lease */
    tf_pair(&e, NULL, &a, &b);
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 4096, 1024, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_MW_BIND, &ro));
    CHECK_OK(sfv_lease_grant(a, ro, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l));
    CHECK_OK(sfv_channel_write(b, &g, 1, sfv_lease_remote(l), NULL));
    CHECK(memcmp(e.buf + 4096, "leased", 6) == 0);
    CHECK_OK(sfv_lease_revoke(l));
    CHECK_OK(sfv_dereg_mr(ro));
    CHECK_OK(sfv_reg_mr_access(e.pd, e.buf + 4096, 1024, SFV_ACCESS_REMOTE_READ | SFV_ACCESS_MW_BIND, &ro));
    CHECK_RESULT(sfv_lease_grant(a, ro, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_INVALID);
    CHECK(l == NULL && strstr(sfv_last_error()->message, "LOCAL_WRITE") != NULL);
    CHECK_EQ(fk_mw_count(), 0);
    CHECK_OK(sfv_dereg_mr(ro));
    /* the window's dealloc refused at the destroy (k 0) or the reset (k 1): kept, freed by the revoke */
    for (k = 0; k < 2; k++) {
        CHECK_OK(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l));
        fk_set_mw_dealloc_fail(1);
        if (k == 0) {
            CHECK_OK(sfv_destroy_channel(a));
            CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
            CHECK_OK(sfv_destroy_channel(b));
            CHECK_OK(sfv_create_channel(e.pd, NULL, &b));
        } else {
            CHECK_OK(sfv_channel_reset(a));
            CHECK_OK(sfv_channel_reset(b));
        }
        tf_connect(a, b);
        CHECK_EQ(fk_mw_count(), 1);
        fk_set_mw_dealloc_fail(1);
        CHECK_RESULT(sfv_lease_revoke(l), SFV_ERR_DRIVER); /* refused again: still live, retryable */
        CHECK_EQ(fk_mw_count(), 1);
        CHECK_OK(sfv_lease_revoke(l));
        CHECK_EQ(fk_mw_count(), 0);
    }
    /* the bind's wait fails (its poll): the channel flushes the bind, nothing stays in flight */
    fk_fail_name("ibv_poll_cq", 1);
    CHECK(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l) != SFV_OK);
    CHECK(l == NULL);
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK(sfv_channel_broken(a, NULL));
    CHECK_EQ(fk_mw_count(), 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_dereg_mr(m));
    tf_close(&e);
}

/* After an SRQ failed (its CQ's CQ_ERR), its receives are said flushed, but the device may still
   hold them: no queue pair may take from it again. A reset of a channel on it, and a new channel
   on it, are refused (SFV_ERR_BROKEN); the buffer handed back stays the program's. */
static void t_srq_failed_takes_no_qp(void) {
    tf_env e;
    sfv_srq *srq;
    sfv_channel *a, *b, *c = (sfv_channel *)1;
    sfv_channel_desc d;
    sfv_scatter_element s;
    sfv_pending rx;
    sfv_work_completion wc;
    tf_open(&e, 4096);
    tf_srq_pair(&e, &srq, &a, &b);
    memset(&d, 0, sizeof d);
    d.srq = srq;
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_srq_post_receive(srq, &s, 1, &rx));
    CHECK_RESULT(sfv_srq_post_receive(srq, &s, 1, NULL), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "no scope covers an SRQ") != NULL);
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_CQ_ERR, sfv_channel_raw_qp(a)->recv_cq, 0);
    CHECK_RESULT(sfv_pending_wait(&rx, -1, &wc), SFV_ERR_WORK);
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    memcpy(e.buf, "program's own data", 19);
    CHECK_RESULT(sfv_channel_reset(a), SFV_ERR_BROKEN);
    CHECK(strstr(sfv_last_error()->message, "the SRQ failed") != NULL);
    CHECK_RESULT(sfv_create_channel(e.pd, &d, &c), SFV_ERR_BROKEN);
    CHECK(c == NULL);
    CHECK(memcmp(e.buf, "program's own data", 19) == 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    CHECK_OK(sfv_destroy_srq(srq));
    tf_close(&e);
}

/* A manual scope takes only work its handles consume: an unsignaled post has none, so it is
   refused there (SFV_ERR_INVALID), not taken and then reported as a broken contract. */
static sfv_result tf_unsignaled_in_scope(sfv_channel *ch, void *user) {
    const sfv_gather_element *g = (const sfv_gather_element *)user;
    return sfv_channel_post_send_unsignaled(ch, g, 1);
}
static void t_manual_scope_unsignaled(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_gather_element g;
    sfv_scatter_element s;
    sfv_pending rx;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    CHECK_RESULT(sfv_channel_manual_scope(a, tf_unsignaled_in_scope, &g), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "manual scope") != NULL);
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    s = sfv_mr_scatter_element(e.mr, e.buf + 64, 8);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_OK(sfv_channel_scope(a, tf_unsignaled_in_scope, &g, NULL)); /* a scope takes it */
    CHECK_OK(sfv_pending_wait(&rx, 1000, NULL));
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* A receive of an SRQ done and not consumed when its channel's queue pair goes (a reset) names no
   channel: not whichever queue pair takes the old number next. */
static void t_srq_receive_of_gone_qp(void) {
    tf_env e;
    sfv_srq *srq;
    sfv_channel *x, *y;
    sfv_channel_desc d;
    sfv_scatter_element s[2];
    sfv_gather_element g;
    sfv_pending rx[2];
    sfv_work_completion wc;
    const sfv__slot *slot;
    tf_open(&e, 4096);
    CHECK_OK(sfv_create_srq(e.pd, NULL, &srq));
    memset(&d, 0, sizeof d);
    d.srq = srq;
    CHECK_OK(sfv_create_channel(e.pd, &d, &x));
    CHECK_OK(sfv_create_channel(e.pd, NULL, &y));
    tf_connect(x, y);
    s[0] = sfv_mr_scatter_element(e.mr, e.buf, 64);
    s[1] = sfv_mr_scatter_element(e.mr, e.buf + 64, 64);
    CHECK_OK(sfv_srq_post_receive(srq, &s[0], 1, &rx[0]));
    CHECK_OK(sfv_srq_post_receive(srq, &s[1], 1, &rx[1]));
    g = sfv_mr_gather_element(e.mr, e.buf + 1024, 8);
    CHECK_OK(sfv_channel_send(y, &g, 1, NULL));
    CHECK_OK(sfv_channel_send(y, &g, 1, NULL));
    CHECK_OK(sfv_pending_wait(&rx[1], 1000, &wc)); /* polls both; rx[0] done, not consumed */
    CHECK(wc.channel == x);
    slot = (const sfv__slot *)rx[0].s_;
    CHECK(slot->state == SFV__SLOT_DONE && slot->vendor_err == sfv_channel_raw_qp(x)->qp_num);
    CHECK_OK(sfv_channel_reset(x));
    CHECK_EQ(slot->vendor_err, 0); /* its old number no longer names it */
    CHECK_OK(sfv_pending_wait(&rx[0], 1000, &wc));
    CHECK(wc.channel == NULL);
    /* the same with the completion still in the SRQ's CQ when the queue pair goes */
    CHECK_OK(sfv_channel_reset(y));
    tf_connect(x, y);
    CHECK_OK(sfv_srq_post_receive(srq, &s[0], 1, &rx[0]));
    CHECK_OK(sfv_channel_send(y, &g, 1, NULL)); /* done on the NIC, not polled */
    slot = (const sfv__slot *)rx[0].s_;
    CHECK(slot->state == SFV__SLOT_INFLIGHT);
    CHECK_OK(sfv_channel_reset(x));
    CHECK(slot->state == SFV__SLOT_DONE && slot->vendor_err == 0);
    CHECK_OK(sfv_pending_wait(&rx[0], 1000, &wc));
    CHECK(wc.channel == NULL);
    CHECK_OK(sfv_destroy_channel(x));
    CHECK_OK(sfv_destroy_channel(y));
    CHECK_OK(sfv_destroy_srq(srq));
    tf_close(&e);
}

/* A blocking call whose deadline passes and whose channel cannot stop the work (moving the queue
   pair to ERR and destroying it both refused) says so (SFV_ERR_DRIVER: the buffers are still the
   NIC's), after one deadline, not two, and never "timed out, buffers free". */
static void t_blocking_cannot_stop(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scatter_element s;
    sfv_work_completion wc;
    double t0;
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.timeout_ms = 200;
    tf_pair(&e, &d, &a, &b);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    fk_fail_name("ibv_modify_qp", 1);
    fk_fail_name("ibv_destroy_qp", 1);
    t0 = test_seconds();
    CHECK_RESULT(sfv_channel_receive(a, &s, 1, &wc), SFV_ERR_DRIVER); /* nobody sends */
    CHECK(test_seconds() - t0 < 0.35);
    CHECK_EQ(wc.result, SFV_ERR_DRIVER);
    CHECK(strstr(sfv_last_error()->message, "still the NIC's") != NULL);
    CHECK_EQ(sfv_channel_outstanding(a), 1); /* still posted */
    CHECK_OK(sfv_destroy_channel(a)); /* the verbs work again: the destroy stops it */
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* A scope's on_wc must not destroy or reset its channel, nor the multi-channel that owns it: each
   is refused (SFV_ERR_INVALID) while the scope consumes what fn left, and the scope goes on. */
static sfv_multi_channel *tf_onwc_mc;
static int tf_onwc_calls;
static sfv_result tf_onwc_fn(sfv_channel *ch, void *user) {
    const sfv_gather_element *g = (const sfv_gather_element *)user;
    sfv_result r = sfv_channel_post_send(ch, g, 1, NULL);
    return r ? r : sfv_channel_post_send(ch, g, 1, NULL);
}
static void tf_onwc_destroy(const sfv_work_completion *wc, void *user) {
    sfv_channel *ch = (sfv_channel *)user;
    (void)wc;
    tf_onwc_calls++;
    CHECK_RESULT(sfv_destroy_channel(ch), SFV_ERR_INVALID);
    CHECK(strstr(sfv_last_error()->message, "on_wc") != NULL);
    CHECK_RESULT(sfv_channel_reset(ch), SFV_ERR_INVALID);
    if (tf_onwc_mc) CHECK_RESULT(sfv_destroy_multi_channel(tf_onwc_mc), SFV_ERR_INVALID);
}
static void t_on_wc_cannot_destroy(void) {
    tf_env e;
    sfv_multi_channel *m1, *m2;
    sfv_scatter_element s[4];
    sfv_gather_element g;
    sfv_pending rx[4];
    sfv_channel *a;
    int k;
    tf_open(&e, 4096);
    tf_mc_pair(&e, 0, &m1, &m2);
    a = sfv_multi_channel_peer(m1, 1);
    for (k = 0; k < 4; k++) {
        s[k] = sfv_mr_scatter_element(e.mr, e.buf + 64 * k, 8);
        CHECK_OK(sfv_channel_post_receive(sfv_multi_channel_peer(m2, 1), &s[k], 1, &rx[k]));
    }
    g = sfv_mr_gather_element(e.mr, e.buf + 1024, 8);
    tf_onwc_calls = 0;
    tf_onwc_mc = NULL;
    CHECK_OK(sfv_channel_scope_wc(a, tf_onwc_fn, &g, tf_onwc_destroy, a, NULL));
    tf_onwc_mc = m1;
    CHECK_OK(sfv_channel_scope_wc(a, tf_onwc_fn, &g, tf_onwc_destroy, a, NULL));
    CHECK_EQ(tf_onwc_calls, 4);
    CHECK_OK(sfv_pending_wait_all(rx, 4, 1000, NULL));
    CHECK_OK(sfv_channel_reset(a)); /* after the scope: fine */
    CHECK_OK(sfv_destroy_multi_channel(m1));
    CHECK_OK(sfv_destroy_multi_channel(m2));
    tf_close(&e);
}

/* A multi-channel scope whose fence cannot be posted on one channel and can on the next says why
   the first was flushed (the later fence does not clear it); an unsignaled post in a plain scope
   inside a manual one is taken (the innermost scope decides), and refused again after it. */
static sfv_result tf_fence_fn(sfv_multi_channel *mc, void *user) {
    tf_env *e = (tf_env *)user;
    sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 8);
    size_t i;
    for (i = 0; i < 2; i++) CHECK_OK(sfv_channel_post_write_unsignaled(sfv_multi_channel_peer(mc, i), &g, 1, sfv_mr_remote(e->mr)));
    fk_fail_name("ibv_post_send", 1); /* the scope's first fence: channel 0's */
    return SFV_OK;
}
static sfv_result tf_inner_fn(sfv_channel *ch, void *user) { return tf_unsignaled_in_scope(ch, user); }
static sfv_result tf_outer_manual_fn(sfv_channel *ch, void *user) {
    CHECK_RESULT(tf_unsignaled_in_scope(ch, user), SFV_ERR_INVALID); /* the manual scope's own */
    CHECK_OK(sfv_channel_scope(ch, tf_inner_fn, user, NULL));
    CHECK_RESULT(tf_unsignaled_in_scope(ch, user), SFV_ERR_INVALID); /* the manual scope's again */
    return SFV_OK;
}
static void t_scope_kinds_and_fences(void) {
    tf_env e;
    sfv_multi_channel *m1, *m2;
    sfv_channel *a, *b;
    sfv_gather_element g;
    sfv_scope_report rep;
    tf_open(&e, 4096);
    tf_mc_pair(&e, 0, &m1, &m2);
    CHECK_RESULT(sfv_multi_channel_scope(m1, tf_fence_fn, &e, &rep), SFV_ERR_SCOPE_AUTOPOLL);
    CHECK(strstr(sfv_last_error()->message, "could not post its fence") != NULL);
    CHECK_OK(sfv_destroy_multi_channel(m1));
    CHECK_OK(sfv_destroy_multi_channel(m2));
    tf_pair(&e, NULL, &a, &b);
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    {
        sfv_scatter_element s = sfv_mr_scatter_element(e.mr, e.buf + 512, 8);
        sfv_pending rx;
        CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx)); /* for the inner scope's send */
        CHECK_OK(sfv_channel_manual_scope(a, tf_outer_manual_fn, &g));
        CHECK_OK(sfv_pending_wait(&rx, 1000, NULL));
    }
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* An inject only flushed after another work request failed is not the failure the channel's
   refusals name: they name the one that failed. */
static void t_inject_flushed_not_blamed(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_remote_mr bad;
    sfv_pending p;
    sfv_gather_element g;
    memset(&d, 0, sizeof d);
    d.timeout_ms = 300;
    d.max_send_wr = 8;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    bad = sfv_mr_remote(e.mr);
    bad.rkey ^= 0x5a5a;
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    CHECK_OK(sfv_channel_post_write(a, &g, 1, bad, &p));            /* fails: REM_ACCESS_ERR */
    CHECK_OK(sfv_channel_inject_write(a, "abcd", 4, sfv_mr_remote(e.mr))); /* good, only flushed */
    CHECK_RESULT(sfv_pending_wait(&p, 1000, NULL), SFV_ERR_WORK);
    CHECK_RESULT(sfv_channel_inject_write(a, "abcd", 4, sfv_mr_remote(e.mr)), SFV_ERR_BROKEN);
    CHECK(strstr(sfv_last_error()->message, "REM_ACCESS_ERR") != NULL);
    CHECK(strstr(sfv_last_error()->message, "inject #") == NULL);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* A log fn may call safeverbs ("from any thread that uses safeverbs"): one that reads the
   context's events when an event broke a channel gets them (it spun for ever on the event lock,
   which the break's log line was written under). */
static sfv_context *tf_log_ctx;
static int tf_log_reads;
static void tf_log_reading_events(void *user, sfv_log_level level, const char *msg) {
    (void)user, (void)level;
    if (strstr(msg, "broke")) {
        sfv_event ev[4];
        size_t n = 0;
        CHECK_OK(sfv_context_events(tf_log_ctx, ev, 4, &n));
        tf_log_reads += (int)n;
    }
}
static void t_log_calls_back(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_event ev[4];
    size_t n = 0;
    tf_open(&e, 256);
    tf_pair(&e, NULL, &a, &b);
    tf_log_ctx = e.ctx;
    tf_log_reads = 0;
    sfv_set_log(tf_log_reading_events, NULL, SFV_LOG_INFO);
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_QP_FATAL, sfv_channel_raw_qp(a), 0);
    CHECK_OK(sfv_context_events(e.ctx, ev, 4, &n));
    sfv_set_log(NULL, NULL, SFV_LOG_OFF);
    CHECK_EQ(tf_log_reads, 1); /* the event was queued before its line was logged: the callback took it */
    CHECK_EQ(n + 0, 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

static void t_inject_refusals(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    char big[SFV_INLINE_DEFAULT + 1];
    memset(big, 'x', sizeof big);
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    CHECK_EQ(sfv_channel_get_desc(a)->max_inline_data, SFV_INLINE_DEFAULT); /* the fake grants what is asked */
    CHECK_RESULT(sfv_channel_inject(a, big, sizeof big), SFV_ERR_INVALID);
    CHECK_MSG("257 bytes over the channel's inline limit of 256 bytes");
    CHECK_RESULT(sfv_channel_inject(a, NULL, 8), SFV_ERR_INVALID);
    CHECK_MSG("buf NULL with 8 bytes");
    CHECK_RESULT(sfv_channel_inject(NULL, big, 8), SFV_ERR_INVALID);
    CHECK_RESULT(sfv_channel_inject_write(a, big, 64, sfv_remote_mr_make(sfv_mr_addr(e.mr), 63, sfv_mr_rkey(e.mr))),
                 SFV_ERR_SLICE_NOT_WITHIN_BOUNDS);
    CHECK_RESULT(sfv_channel_inject_write_imm(a, big, 8, sfv_remote_mr_make(UINT64_MAX - 4, 64, sfv_mr_rkey(e.mr)), 1), SFV_ERR_INVALID);
    CHECK_EQ(sfv_channel_outstanding(a), 0); /* nothing was posted */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* no inline data: every inject is refused, naming both numbers */
    memset(&d, 0, sizeof d);
    d.max_inline_data = SFV_INLINE_NONE;
    tf_pair(&e, &d, &a, &b);
    CHECK_EQ(sfv_channel_get_desc(a)->max_inline_data, SFV_INLINE_NONE);
    CHECK_RESULT(sfv_channel_inject(a, big, 8), SFV_ERR_INVALID);
    CHECK_MSG("8 bytes over the channel's inline limit of 0 bytes");
    CHECK_RESULT(sfv_channel_inject(a, NULL, 0), SFV_ERR_INVALID);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* a device that refuses the default ask (EINVAL over its limit): it is halved until taken */
    fk_set_max_inline(100);
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    CHECK_EQ(sfv_channel_get_desc(a)->max_inline_data, 64); /* 256, 128 refused */
    CHECK_OK(sfv_destroy_channel(a));
    fk_set_max_inline(0); /* none at all */
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    CHECK_EQ(sfv_channel_get_desc(a)->max_inline_data, SFV_INLINE_NONE);
    CHECK_OK(sfv_destroy_channel(a));
    fk_set_max_inline(65536);
    /* a send queue of 1: no room for an inject and the place it keeps free */
    memset(&d, 0, sizeof d);
    d.max_send_wr = 1;
    tf_pair(&e, &d, &a, &b);
    CHECK_RESULT(sfv_channel_inject(a, big, 8), SFV_ERR_RESOURCE);
    CHECK_MSG("an inject needs max_send_wr >= 2");
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    /* an explicit limit is used as granted; not connected: refused as any post */
    d.max_inline_data = 32;
    CHECK_OK(sfv_create_channel(e.pd, &d, &a));
    CHECK_EQ(sfv_channel_get_desc(a)->max_inline_data, 32);
    CHECK_RESULT(sfv_channel_inject(a, big, 8), SFV_ERR_INVALID);
    CHECK_MSG("not connected");
    CHECK_OK(sfv_destroy_channel(a));
    tf_close(&e);
}

/* A stream of injects many times longer than the send queue, of varying sizes, each received and
   checked byte by byte; the buffer is reused at once; places come back (outstanding stays low). */
static void t_inject_stream(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_pending rx[4];
    sfv_work_completion wc;
    unsigned char msg[256];
    size_t k, i, j, max_out = 0;
    memset(&d, 0, sizeof d);
    d.max_send_wr = 8;
    tf_open(&e, 4 * 256);
    tf_pair(&e, &d, &a, &b);
    for (k = 0; k < 2000; k += 4) {
        for (i = 0; i < 4; i++) {
            sfv_scatter_element s = sfv_mr_scatter_element(e.mr, e.buf + 256 * i, 256);
            CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx[i]));
        }
        for (i = 0; i < 4; i++) {
            const size_t len = (k + i) % 257;
            for (j = 0; j < len; j++) msg[j] = (unsigned char)(k + i + j);
            CHECK_OK(sfv_channel_inject(a, len ? msg : NULL, len));
            memset(msg, 0xEE, sizeof msg); /* the caller's again: already copied */
            if (sfv_channel_outstanding(a) > max_out) max_out = sfv_channel_outstanding(a);
        }
        for (i = 0; i < 4; i++) {
            const size_t len = (k + i) % 257;
            CHECK_OK(sfv_pending_wait(&rx[i], -1, &wc));
            CHECK_EQ(wc.byte_len, len);
            for (j = 0; j < len; j++)
                if (e.buf[256 * i + j] != (unsigned char)(k + i + j)) FAIL("inject %zu byte %zu", k + i, j);
        }
    }
    CHECK(max_out <= 7); /* one place always free */
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* Injects beside signaled work with pending handles, writes with and without an immediate, and
   inside a scope (fenced: its places come back by the time the scope returns). */
static sfv_result tf_inject_in_scope(sfv_channel *ch, void *user) {
    (void)user;
    return sfv_channel_inject(ch, "scoped", 7);
}
static void t_inject_mixed(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_pending rx[3], tx, wx;
    sfv_work_completion wc;
    sfv_gather_element g;
    sfv_scatter_element s;
    sfv_scope_report rep;
    double t0;
    int i;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    for (i = 0; i < 3; i++) {
        s = sfv_mr_scatter_element(e.mr, e.buf + 64 * i, 64);
        CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx[i]));
    }
    memcpy(e.buf + 1024, "signaled", 9);
    g = sfv_mr_gather_element(e.mr, e.buf + 1024, 9);
    CHECK_OK(sfv_channel_inject(a, "first", 6));
    CHECK_OK(sfv_channel_post_send(a, &g, 1, &tx));
    CHECK_OK(sfv_channel_inject_write(a, "written", 8, tf_at(&e, 2048)));
    CHECK_OK(sfv_channel_post_write(a, &g, 1, tf_at(&e, 2100), &wx));
    CHECK_OK(sfv_channel_inject_write_imm(a, "imm!", 5, tf_at(&e, 2200), 0xC0FFEE));
    CHECK_OK(sfv_pending_wait(&wx, -1, NULL)); /* out of order: the send's handle is still unconsumed */
    CHECK_OK(sfv_pending_wait(&tx, -1, NULL));
    CHECK_OK(sfv_pending_wait(&rx[0], -1, &wc));
    CHECK(wc.byte_len == 6 && strcmp((char *)e.buf, "first") == 0);
    CHECK_OK(sfv_pending_wait(&rx[1], -1, &wc));
    CHECK(wc.byte_len == 9 && strcmp((char *)e.buf + 64, "signaled") == 0);
    CHECK_OK(sfv_pending_wait(&rx[2], -1, &wc));
    CHECK(wc.opcode == SFV_WC_OP_RECV_IMM && wc.has_imm && wc.imm_data == 0xC0FFEE && wc.byte_len == 5);
    CHECK(strcmp((char *)e.buf + 2048, "written") == 0 && strcmp((char *)e.buf + 2200, "imm!") == 0);
    CHECK(strcmp((char *)e.buf + 2100, "signaled") == 0);
    /* a scope whose last work is an unsignaled inject fences it */
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx[0]));
    CHECK_OK(sfv_channel_scope(a, tf_inject_in_scope, NULL, &rep));
    CHECK_EQ(rep.auto_polled, 0);
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK_OK(sfv_pending_wait(&rx[0], -1, &wc));
    CHECK(strcmp((char *)e.buf, "scoped") == 0);
    /* a zero-length inject: a message of no bytes */
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx[0]));
    CHECK_OK(sfv_channel_inject(a, NULL, 0));
    CHECK_OK(sfv_pending_wait(&rx[0], -1, &wc));
    CHECK_EQ(wc.byte_len, 0);
    /* a delivered inject left last, unsignaled (no completion will say so): a reset does not wait for it */
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx[0]));
    CHECK_OK(sfv_channel_inject(a, "tail", 5));
    CHECK_OK(sfv_pending_wait(&rx[0], -1, &wc));
    CHECK(sfv_channel_outstanding(a) >= 1);
    t0 = test_seconds();
    CHECK_OK(sfv_channel_reset(a));
    CHECK(test_seconds() - t0 < 1.0);
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* The send queue full of work waiting for its handles: SFV_ERR_RESOURCE at once; full of injects
   no completion gives back (the peer posts no receive): SFV_ERR_TIMEOUT after desc.timeout_ms;
   and a destroy with injects in flight does not hang. */
static void t_inject_full(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_pending tx[3];
    sfv_gather_element g;
    double t0;
    int i;
    sfv_result r = SFV_OK;
    memset(&d, 0, sizeof d);
    d.max_send_wr = 4;
    d.timeout_ms = 100;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    for (i = 0; i < 3; i++) { /* no receive on b: the sends wait (RNR, retried) */
        g = sfv_mr_gather_element(e.mr, e.buf + 16 * i, 16);
        CHECK_OK(sfv_channel_post_send(a, &g, 1, &tx[i]));
    }
    CHECK_RESULT(sfv_channel_inject(a, "x", 1), SFV_ERR_RESOURCE);
    CHECK_MSG("send queue full: 3 of 4 places");
    CHECK_OK(sfv_destroy_channel(a)); /* flushes the sends */
    CHECK_OK(sfv_destroy_channel(b));
    tf_pair(&e, &d, &a, &b);
    t0 = test_seconds();
    for (i = 0; i < 10 && r == SFV_OK; i++) r = sfv_channel_inject(a, "y", 1);
    CHECK_RESULT(r, SFV_ERR_TIMEOUT);
    CHECK(i == 4); /* three places taken, one kept free */
    CHECK(test_seconds() - t0 >= 0.09);
    CHECK_MSG("send queue full for desc.timeout_ms");
    t0 = test_seconds();
    CHECK_OK(sfv_destroy_channel(a)); /* three injects in flight: flushed, no hang */
    CHECK(test_seconds() - t0 < 1.0);
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* The peer gone before an inject completes: the failure comes back from a call that polls, names
   the inject, breaks the channel (every post after it refused with the same message, a flushed
   handle names it too); a reset makes it work again. */
static void t_inject_peer_gone(void) {
    tf_env e;
    sfv_channel_desc d;
    sfv_channel *a, *b;
    sfv_pending rx, brx;
    sfv_scatter_element s;
    sfv_gather_element g;
    sfv_work_completion wc;
    sfv_endpoint ea, eb;
    sfv_result r = SFV_OK;
    int i;
    memset(&d, 0, sizeof d);
    d.max_send_wr = 8; /* a signaled inject every 4 */
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &brx));
    CHECK_OK(sfv_channel_inject(a, "one", 4)); /* inject #1, delivered */
    CHECK_OK(sfv_pending_wait(&brx, -1, NULL));
    s = sfv_mr_scatter_element(e.mr, e.buf + 64, 64);
    CHECK_OK(sfv_channel_post_receive(a, &s, 1, &rx));
    CHECK_OK(sfv_destroy_channel(b)); /* the peer is gone */
    CHECK_OK(sfv_channel_inject(a, "two", 4)); /* inject #2: posted, fails on the wire */
    for (i = 0; i < 8 && r == SFV_OK; i++) r = sfv_channel_inject(a, "more", 5);
    CHECK_RESULT(r, SFV_ERR_BROKEN); /* by the next inject that polls */
    CHECK(i <= 4);
    CHECK_MSG("inject #2 (send, 4 B) failed: RETRY_EXC_ERR");
    g = sfv_mr_gather_element(e.mr, e.buf, 8);
    CHECK_RESULT(sfv_channel_send(a, &g, 1, NULL), SFV_ERR_BROKEN);
    CHECK_MSG("inject #2 (send, 4 B) failed");
    CHECK_RESULT(sfv_pending_wait(&rx, -1, &wc), SFV_ERR_WORK); /* flushed */
    CHECK_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
    CHECK_MSG("flushed after inject #2 (send, 4 B) failed: RETRY_EXC_ERR");
    /* reset, and a new peer: it works again, and the count goes on */
    CHECK_OK(sfv_channel_reset(a));
    CHECK_OK(sfv_create_channel(e.pd, &d, &b));
    CHECK_OK(sfv_channel_endpoint(a, &ea));
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    CHECK_OK(sfv_channel_handshake(a, &eb));
    CHECK_OK(sfv_channel_handshake(b, &ea));
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &brx));
    CHECK_OK(sfv_channel_inject(a, "again", 6));
    CHECK_OK(sfv_pending_wait(&brx, -1, &wc));
    CHECK(strcmp((char *)e.buf, "again") == 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* An inject into a send queue whose room is held by injects ahead of the open scope's unsignaled
   work: no completion will come to free it before the scope's fence, so SFV_ERR_RESOURCE at once
   (it waited for the deadline, then said SFV_ERR_TIMEOUT). */
static sfv_result tf_inject_behind_fn(sfv_channel *ch, void *user) {
    tf_env *e = (tf_env *)user;
    const sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 8);
    const sfv_remote_mr rm = sfv_remote_mr_make(sfv_mr_addr(e->mr) + 1024, 64, sfv_mr_rkey(e->mr));
    double t0;
    CHECK_OK(sfv_channel_inject_write(ch, "abcdefgh", 8, rm));
    CHECK_OK(sfv_channel_post_write_unsignaled(ch, &g, 1, rm));
    CHECK_OK(sfv_channel_post_write_unsignaled(ch, &g, 1, rm));
    t0 = test_seconds();
    CHECK_RESULT(sfv_channel_inject_write(ch, "ijklmnop", 8, rm), SFV_ERR_RESOURCE);
    CHECK(test_seconds() - t0 < 1.0); /* not the 5 s deadline */
    if (!strstr(sfv_last_error()->message, "unsignaled")) FAIL("refused with: %s", sfv_last_error()->message);
    return SFV_OK;
}
static void t_inject_behind_unsignaled(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    d.max_send_wr = 4;
    d.timeout_ms = 5000;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    CHECK_OK(sfv_channel_scope(a, tf_inject_behind_fn, &e, NULL));
    CHECK_EQ(sfv_channel_outstanding(a), 0);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* A manual scope whose fn injects last: no fence (it has no handle to consume it by), so a peer
   that refuses the fence's write, or is gone, cannot make fn's success a broken contract (it was
   an SFV_ASSERT, in release builds too); the scope returns fn's result. */
static sfv_result tf_manual_inject_fn(sfv_channel *ch, void *user) {
    (void)user;
    return sfv_channel_inject(ch, "ping", 4);
}
static sfv_result tf_mc_manual_inject_fn(sfv_multi_channel *mc, void *user) {
    (void)user;
    return sfv_channel_inject(sfv_multi_channel_peer(mc, 0), "ping", 4);
}
static void t_manual_scope_injects(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc db;
    sfv_pending rx;
    sfv_scatter_element s;
    sfv_multi_channel *m1, *m2;
    tf_open(&e, 4096);
    memset(&db, 0, sizeof db);
    db.access = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ; /* the peer lets nobody write its memory */
    CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
    CHECK_OK(sfv_create_channel(e.pd, &db, &b));
    tf_connect(a, b);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    CHECK_OK(sfv_channel_manual_scope(a, tf_manual_inject_fn, NULL));
    CHECK_OK(sfv_pending_wait(&rx, 1000, NULL)); /* the message arrived */
    CHECK(memcmp(e.buf, "ping", 4) == 0);
    CHECK_OK(sfv_destroy_channel(b)); /* the peer goes */
    CHECK_OK(sfv_channel_manual_scope(a, tf_manual_inject_fn, NULL)); /* posted: the failure shows later */
    CHECK_OK(sfv_destroy_channel(a));
    tf_mc_pair(&e, 0, &m1, &m2);
    CHECK_OK(sfv_destroy_multi_channel(m2));
    CHECK_OK(sfv_multi_channel_manual_scope(m1, tf_mc_manual_inject_fn, NULL));
    CHECK_OK(sfv_destroy_multi_channel(m1));
    tf_close(&e);
}

/* A lease refused before its bind is posted (the send queue full), with other work in flight:
   its memory window is freed at once (it was kept, and with it the PD and the device). When
   ibv_dealloc_mw refuses that (a review, session 21), the window was dropped on the floor: no
   lease, no channel and no PD held it, so the PD (ibv_dealloc_pd: EBUSY) and the device stayed
   open for good; the channel keeps it now, and its destroy (round 1) or reset (round 2) frees it. */
static void t_lease_refused_frees_window(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_mr *m;
    sfv_lease *l;
    sfv_pending p;
    sfv_gather_element g;
    int k;
    unsigned char *mem = (unsigned char *)calloc(1, 4096);
    CHECK(mem);
    fk_set_mw(true);
    tf_open(&e, 4096);
    memset(&d, 0, sizeof d);
    d.max_send_wr = 1;
    for (k = 0; k < 3; k++) {
        tf_pair(&e, &d, &a, &b);
        CHECK_OK(sfv_reg_mr_access(e.pd, mem, 4096, SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_MW_BIND, &m));
        g = sfv_mr_gather_element(e.mr, e.buf, 8);
        CHECK_OK(sfv_channel_post_write(a, &g, 1, sfv_remote_mr_make(sfv_mr_addr(e.mr) + 64, 8, sfv_mr_rkey(e.mr)), &p));
        if (k > 0) fk_set_mw_dealloc_fail(1);
        l = (sfv_lease *)1;
        CHECK_RESULT(sfv_lease_grant(a, m, 0, 64, SFV_ACCESS_REMOTE_WRITE, &l), SFV_ERR_RESOURCE); /* queue full */
        CHECK(l == NULL && strcmp(sfv_last_error()->verb, "post") == 0);
        CHECK_EQ(fk_mw_count(), k > 0 ? 1 : 0);
        CHECK_OK(sfv_pending_wait(&p, 1000, NULL));
        CHECK_OK(sfv_dereg_mr(m)); /* the MR has no lease */
        if (k == 2) {
            CHECK_OK(sfv_channel_reset(a));
            CHECK_EQ(fk_mw_count(), 0);
        }
        CHECK_OK(sfv_destroy_channel(a));
        CHECK_OK(sfv_destroy_channel(b));
        CHECK_EQ(fk_mw_count(), 0);
    }
    free(mem);
    tf_close(&e);
    fk_set_mw(false);
}

/* A manual scope nested in a scope, whose fn only injects, after the outer scope's
   unsignaled write: the outer scope must still fence its unsignaled work (the injects come last,
   unsignaled too). The header: "if the last work the scope leaves on the send queue is
   unsignaled, the scope posts a signaled zero-length RDMA write ... and waits for it". */
static sfv_result tf_inner_inject(sfv_channel *ch, void *user) {
    (void)user;
    return sfv_channel_inject(ch, "ping", 4);
}
static sfv_result tf_outer(sfv_channel *ch, void *user) {
    tf_env *e = (tf_env *)user;
    const sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 8);
    const sfv_remote_mr rm = sfv_remote_mr_make(sfv_mr_addr(e->mr) + 1024, 64, sfv_mr_rkey(e->mr));
    CHECK_OK(sfv_channel_post_write_unsignaled(ch, &g, 1, rm));
    return sfv_channel_manual_scope(ch, tf_inner_inject, NULL);
}
static void t_nested_manual_inject(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scope_report rep;
    double t0;
    sfv_result r;
    memset(&d, 0, sizeof d);
    d.timeout_ms = 1000;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    {
        sfv_scatter_element s = sfv_mr_scatter_element(e.mr, e.buf + 2048, 64);
        sfv_pending rx;
        CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
        t0 = test_seconds();
        r = sfv_channel_scope(a, tf_outer, &e, &rep);
        if (r != SFV_OK)
            FAIL("outer scope: %s after %.2f s (failed %zu, first %s): %s", sfv_result_str(r), test_seconds() - t0, rep.failed,
                 sfv_result_str(rep.first_error.result), sfv_last_error()->message);
        CHECK(test_seconds() - t0 < 0.5);
        CHECK_OK(sfv_pending_wait(&rx, 1000, NULL));
    }
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* the same nesting with the outer scope's unsignaled send last and an inner manual scope
   that posts nothing: the inner manual scope posts the OUTER scope's fence; the peer refuses the
   fence's write, and fn's success becomes an SFV_ASSERT (abort) -- the failure mode the commit
   removed for injects, still there one level up. Run in a child: the parent sees how it ended. */
static sfv_result tf_inner_nothing(sfv_channel *ch, void *user) {
    (void)ch;
    (void)user;
    return SFV_OK;
}
static sfv_result tf_outer_send(sfv_channel *ch, void *user) {
    tf_env *e = (tf_env *)user;
    const sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 8);
    CHECK_OK(sfv_channel_post_send_unsignaled(ch, &g, 1));
    return sfv_channel_manual_scope(ch, tf_inner_nothing, NULL);
}
static void t_nested_manual_fence_assert(void) {
    pid_t pid;
    int st = 0;
    fflush(NULL);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        tf_env e;
        sfv_channel *a, *b;
        sfv_channel_desc db;
        sfv_scatter_element s;
        sfv_pending rx;
        sfv_result r;
        tf_open(&e, 4096);
        memset(&db, 0, sizeof db);
        db.access = SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_READ; /* the peer lets nobody write: the fence is refused */
        CHECK_OK(sfv_create_channel(e.pd, NULL, &a));
        CHECK_OK(sfv_create_channel(e.pd, &db, &b));
        tf_connect(a, b);
        s = sfv_mr_scatter_element(e.mr, e.buf + 2048, 64);
        CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
        r = sfv_channel_scope(a, tf_outer_send, &e, NULL);
        fprintf(stderr, "    outer scope returned %s\n", sfv_result_str(r));
        _exit(0);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    if (WIFSIGNALED(st))
        FAIL("a manual scope nested in a scope, fn posting nothing and returning SFV_OK, died of signal %d (SFV_ASSERT: it posted "
             "the outer scope's fence, which the peer refused)", WTERMSIG(st));
}

/* a signaled inject the verb refused leaves sq.sig_top naming a place that was taken back
   (sfv__inject_unpost restores head, not sig_top). An unsignaled inject then takes that place,
   and a later inject whose room is held by injects ahead of the scope's unsignaled work waits for
   a completion that will never come (desc.timeout_ms, SFV_ERR_TIMEOUT) instead of
   SFV_ERR_RESOURCE at once, as without the refused one (t_inject_behind_unsignaled). */
static sfv_result tf_unpost_fn(sfv_channel *ch, void *user) {
    tf_env *e = (tf_env *)user;
    const sfv_gather_element g = sfv_mr_gather_element(e->mr, e->buf, 8);
    const sfv_remote_mr rm = sfv_remote_mr_make(sfv_mr_addr(e->mr) + 1024, 64, sfv_mr_rkey(e->mr));
    double t0;
    sfv_result r;
    CHECK_OK(sfv_channel_inject_write(ch, "aaaaaaaa", 8, rm));  /* unsignaled, place 0 */
    fk_fail_name("ibv_post_send", 1);
    CHECK(sfv_channel_inject_write(ch, "bbbbbbbb", 8, rm) != SFV_OK); /* signaled (every 2nd), refused: sig_top stays 2 */
    fk_fail_name("ibv_post_send", 0);
    CHECK_OK(sfv_channel_inject_write(ch, "cccccccc", 8, rm));  /* unsignaled, place 1 */
    CHECK_OK(sfv_channel_post_write_unsignaled(ch, &g, 1, rm)); /* place 2 */
    t0 = test_seconds();
    r = sfv_channel_inject_write(ch, "dddddddd", 8, rm);
    if (r != SFV_ERR_RESOURCE || test_seconds() - t0 > 1.0)
        FAIL("inject behind the scope's unsignaled work, after a refused signaled inject: %s after %.2f s (want SFV_ERR_RESOURCE "
             "at once): %s", sfv_result_str(r), test_seconds() - t0, sfv_last_error()->message);
    return SFV_OK;
}
static void t_inject_unpost_sig_top(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    memset(&d, 0, sizeof d);
    d.max_send_wr = 4;
    d.timeout_ms = 3000;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    { const sfv_result sr = sfv_channel_scope(a, tf_unpost_fn, &e, NULL); (void)sr; }
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* the handshake's new doc: "a channel broken before it connected (an event, a reset that
   could not make its QP): SFV_ERR_BROKEN, saying why". A connected channel whose reset could not
   make its QP keeps connected = true (cleared only after sfv__qp_make succeeds), so the handshake
   says SFV_ERR_INVALID "already connected". */
static void t_handshake_after_failed_reset(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_endpoint eb;
    sfv_result r;
    tf_open(&e, 4096);
    tf_pair(&e, NULL, &a, &b);
    CHECK_OK(sfv_channel_endpoint(b, &eb));
    fk_fail_name("ibv_create_qp", 1);
    CHECK(sfv_channel_reset(a) != SFV_OK);
    fk_fail_name("ibv_create_qp", 0);
    CHECK(sfv_channel_broken(a, NULL));
    r = sfv_channel_handshake(a, &eb);
    if (r != SFV_ERR_BROKEN)
        FAIL("handshake of a channel whose reset could not make its QP: %s (%s), the header says SFV_ERR_BROKEN", sfv_result_str(r),
             sfv_last_error()->message);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* A busy wait shorter than the 10 ms between its reads of the device's events reads them once
   when its deadline passes: a program that waits in short slices (a receive with a 1 ms deadline,
   in a loop) learns that the port went down at the first, not never. */
static void t_short_busy_waits_read_events(void) {
    tf_env e;
    sfv_channel *a, *b;
    sfv_channel_desc d;
    sfv_scatter_element s;
    sfv_pending rx;
    sfv_result r = SFV_OK;
    int i;
    memset(&d, 0, sizeof d);
    d.wait_mode = SFV_WAIT_BUSY;
    tf_open(&e, 4096);
    tf_pair(&e, &d, &a, &b);
    s = sfv_mr_scatter_element(e.mr, e.buf, 64);
    CHECK_OK(sfv_channel_post_receive(b, &s, 1, &rx));
    fk_inject_async_event(sfv_context_raw(e.ctx), IBV_EVENT_PORT_ERR, NULL, 1);
    for (i = 0; i < 5; i++) { /* 5 waits of 1 ms; the header before read the event in the first */
        r = sfv_pending_wait(&rx, 1, NULL);
        if (r != SFV_ERR_TIMEOUT) break;
    }
    printf("    after %d waits: %s: %s (mode %d)\n", i, sfv_result_str(r), sfv_last_error()->message, (int)d.wait_mode);
    if (r == SFV_ERR_TIMEOUT)
        FAIL("5 busy waits of 1 ms (each spins up to 1 ms + the coarse clock's tick) never read the PORT_ERR the device had: every one timed out, the channel "
             "is %sbroken", sfv_channel_broken(b, NULL) ? "" : "not ");
    if (r == SFV_ERR_TIMEOUT) CHECK_RESULT(sfv_pending_wait(&rx, 50, NULL), SFV_ERR_WORK);
    CHECK_OK(sfv_destroy_channel(a));
    CHECK_OK(sfv_destroy_channel(b));
    tf_close(&e);
}

/* sfv_node_connect_with over the library's own allgather whose context says another world or
   rank than the node's: refused (SFV_ERR_INVALID) before anything runs (the exchange wrote its n
   blobs into the node's buffer of world blobs: a heap overflow). */
static void tf_connect_with_world(size_t ctx_n, size_t ctx_rank) {
    tf_env e;
    sfv_node *node;
    sfv_node_desc nd;
    sfv_net_node nodes[3] = {{"127.0.0.1", 26101, 0, NULL}, {"127.0.0.1", 26102, 1, NULL}, {"127.0.0.1", 26103, 2, NULL}};
    sfv_exchange_allgather_ctx x;
    tf_open(&e, 64);
    memset(&nd, 0, sizeof nd);
    nd.rank = 0;
    nd.world_size = 2;
    CHECK_OK(sfv_create_node(e.pd, &nd, &node));
    memset(&x, 0, sizeof x);
    x.nodes = nodes;
    x.n = ctx_n;
    x.rank = ctx_rank;
    x.timeout_ms = 200;
    CHECK_RESULT(sfv_node_connect_with(node, sfv_exchange_allgather, &x), SFV_ERR_INVALID);
    if (!strstr(sfv_last_error()->message, "rank")) FAIL("refused with: %s", sfv_last_error()->message);
    CHECK_OK(sfv_destroy_node(node));
    tf_close(&e);
}
static void t_node_connect_with_wrong_world(void) {
    tf_connect_with_world(3, 0); /* a bigger world */
    tf_connect_with_world(3, 2); /* a rank past the node's world */
    tf_connect_with_world(2, 1); /* another rank */
}

static const harness_test TESTS[] = {
    TEST(t_node_connect_with_wrong_world, 10),
    TEST(t_short_busy_waits_read_events, 10),
    TEST(t_handshake_after_failed_reset, 10),
    TEST(t_inject_unpost_sig_top, 10),
    TEST(t_nested_manual_fence_assert, 10),
    TEST(t_nested_manual_inject, 10),
    TEST(t_inject_behind_unsignaled, 10),
    TEST(t_manual_scope_injects, 10),
    TEST(t_lease_refused_frees_window, 10),
    TEST(t_lease_unsupported, 10),
    TEST(t_result_strings, 10),
    TEST(t_raw_and_wrap, 10),
    TEST(t_endpoint_codec, 10),
    TEST(t_remote_mr_codec, 10),
    TEST(t_remote_arith, 10),
    TEST(t_fake_rules, 10),
    TEST(t_devices, 10),
    TEST(t_elements, 10),
    TEST(t_desc_validation, 10),
    TEST(t_choose_gid_failures, 10),
    TEST(t_loopback, 10),
    TEST(t_partial_batch_in_scope, 90),
    TEST(t_device_deleted, 20),
    TEST(t_two_channels, 10),
    TEST(t_unchecked_elements, 10),
    TEST(t_inline, 10),
    TEST(t_inject_refusals, 10),
    TEST(t_inject_stream, 20),
    TEST(t_inject_mixed, 10),
    TEST(t_inject_full, 10),
    TEST(t_inject_peer_gone, 10),
    TEST(t_batches, 10),
    TEST(t_ring_places, 10),
    TEST(t_scope_batches, 10),
    TEST(t_partial_post, 10),
    TEST(t_scopes, 10),
    TEST(t_unsignaled_reads, 10),
    TEST(t_pending, 10),
    TEST(t_wait_all, 30),
    TEST(t_queue_full, 10),
    TEST(t_timeout, 10),
    TEST(t_async_events, 10),
    TEST(t_srq_events, 10),
    TEST(t_mc_full_elements, 10),
    TEST(t_inject_flushed_not_blamed, 10),
    TEST(t_node_connect_with_results, 10),
    TEST(t_mc_destroy_in_scope, 10),
    TEST(t_srq_cq_err_stops_channels, 10),
    TEST(t_srq_channels_share_abort_deadline, 10),
    TEST(t_lease_windows, 10),
    TEST(t_srq_failed_takes_no_qp, 10),
    TEST(t_manual_scope_unsignaled, 10),
    TEST(t_srq_receive_of_gone_qp, 10),
    TEST(t_blocking_cannot_stop, 10),
    TEST(t_on_wc_cannot_destroy, 10),
    TEST(t_scope_kinds_and_fences, 10),
    TEST(t_log_calls_back, 10),
    TEST(t_work_errors, 10),
    TEST(t_atomics, 10),
    TEST(t_not_connected, 10),
    TEST(t_destroy_in_flight, 10),
    TEST(t_event_mode, 10),
    TEST(t_multi_channel, 10),
    TEST(t_null_arrays, 10),
    TEST(t_gid_subnet_hint, 10),
    TEST(t_half_destroyed_refuses, 10),
    TEST(t_srq_flush_names_no_channel, 10),
    TEST(t_dead_channel_handle, 10),
    TEST(t_node, 20),
};

int main(int argc, char **argv) { return harness_main(argc, argv, TESTS, COUNT_OF(TESTS)); }
