/* devices.c - what the RDMA devices on this machine look like to safeverbs.

   Lists every device: its GUID, its firmware and the limits a program sizes its queues by
   (sfv_query_device), then port 1's state, active MTU, link layer and LID, then each
   valid GID with its type (IB, RoCE v1, RoCE v2) and whether it holds an IPv4 address. Then it
   registers a buffer on the first device for remote access and prints the keys and the 24-byte
   remote descriptor a peer would receive (sfv_remote_mr_encode).

       make all && build/devices          (where the devices are: tools/on-rxe.sh build/devices)

   Exits 1 with the library's message if anything fails. Port 1 only: sfv_open_device checks it. */
#define _POSIX_C_SOURCE 200809L
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"

#include <arpa/inet.h>
#include <stdio.h>

static const char *gid_type_str(sfv_gid_type t) {
    switch (t) {
    case SFV_GID_TYPE_IB: return "IB";
    case SFV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case SFV_GID_TYPE_ROCE_V2: return "RoCE v2";
    default: return "unknown";
    }
}

static const char *link_layer_str(sfv_link_layer l) {
    return l == SFV_LINK_LAYER_ETHERNET ? "Ethernet" : l == SFV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "unspecified";
}

static int fail(const char *what) {
    fprintf(stderr, "devices: %s: %s\n", what, sfv_last_error()->message);
    return 1;
}

static const char *atomic_cap_str(sfv_atomic_cap c) {
    return c == SFV_ATOMIC_GLOBAL ? "global" : c == SFV_ATOMIC_HCA ? "HCA" : "none";
}

/* The device's limits. */
static int show_limits(sfv_context *ctx) {
    sfv_device_attr a;
    if (sfv_query_device(ctx, &a) != SFV_OK) return fail("sfv_query_device");
    printf("  firmware %s, vendor 0x%06x part %u, %u port(s)\n", a.fw_ver[0] ? a.fw_ver : "(none)",
           (unsigned)a.vendor_id, (unsigned)a.vendor_part_id, (unsigned)a.phys_port_cnt);
    printf("  limits: max_qp_wr %u, max_sge %u (reads %u), max_cqe %u, max_mr_size %llu, "
           "reads in flight per QP %u out / %u in, atomics %s\n",
           (unsigned)a.max_qp_wr, (unsigned)a.max_sge, (unsigned)a.max_sge_rd, (unsigned)a.max_cqe,
           (unsigned long long)a.max_mr_size, (unsigned)a.max_qp_init_rd_atom, (unsigned)a.max_qp_rd_atom,
           atomic_cap_str(a.atomic_cap));
    return 0;
}

/* Port 1 and its GID table. */
static int show_port(sfv_context *ctx) {
    sfv_port_attr pa;
    uint32_t i;
    if (sfv_query_port(ctx, 1, &pa) != SFV_OK) return fail("sfv_query_port");
    printf("  port 1: %s, active MTU %u (max %u), link layer %s, LID 0x%04x\n", sfv_port_state_str(pa.state),
           (unsigned)pa.active_mtu, (unsigned)pa.max_mtu, link_layer_str(pa.link_layer), (unsigned)pa.lid);
    for (i = 0; i < pa.gid_tbl_len; i++) {
        sfv_gid_entry e;
        char text[INET6_ADDRSTRLEN];
        sfv_result r = sfv_query_gid(ctx, 1, i, &e);
        if (r == SFV_ERR_NOT_FOUND) continue; /* an empty slot */
        if (r != SFV_OK) return fail("sfv_query_gid");
        inet_ntop(AF_INET6, e.gid.raw, text, sizeof text);
        printf("    GID %-3u %-40s %s", (unsigned)i, text, gid_type_str(e.type));
        if (sfv_gid_is_ipv4(&e.gid))
            printf(", IPv4 %u.%u.%u.%u", e.gid.raw[12], e.gid.raw[13], e.gid.raw[14], e.gid.raw[15]);
        printf("\n");
    }
    return 0;
}

/* What a peer would get to write into or read from this buffer. */
static int show_region(sfv_context *ctx) {
    static char buf[4096];
    uint8_t wire[SFV_REMOTE_MR_ENCODED_SIZE];
    sfv_pd *pd;
    sfv_mr *mr;
    size_t i;
    if (sfv_alloc_pd(ctx, &pd) != SFV_OK) return fail("sfv_alloc_pd");
    if (sfv_reg_mr_shared(pd, buf, sizeof buf, &mr) != SFV_OK) {
        sfv_dealloc_pd(pd);
        return fail("sfv_reg_mr_shared");
    }
    sfv_remote_mr_encode(sfv_mr_remote(mr), wire);
    printf("registered %zu bytes on %s: lkey 0x%08x rkey 0x%08x\n  remote descriptor ", sizeof buf,
           sfv_context_name(ctx), (unsigned)sfv_mr_lkey(mr), (unsigned)sfv_mr_rkey(mr));
    for (i = 0; i < sizeof wire; i++) printf("%02x", wire[i]);
    printf("\n");
    sfv_dereg_mr(mr);
    sfv_dealloc_pd(pd);
    return 0;
}

int main(void) {
    sfv_device_list *list;
    sfv_context *first = NULL;
    size_t i, n;
    int rc = 0;
    if (sfv_get_device_list(&list) != SFV_OK) return fail("sfv_get_device_list");
    n = sfv_device_list_len(list);
    printf("%zu RDMA device(s)\n", n);
    for (i = 0; i < n && rc == 0; i++) {
        sfv_context *ctx;
        uint64_t guid;
        if (sfv_device_list_guid(list, i, &guid) != SFV_OK) {
            rc = fail("sfv_device_list_guid");
            break;
        }
        printf("%s: GUID %04x:%04x:%04x:%04x\n", sfv_device_list_name(list, i), (unsigned)(guid >> 48),
               (unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff, (unsigned)guid & 0xffff);
        if (sfv_open_device_at(list, i, &ctx) != SFV_OK) {
            rc = fail(sfv_device_list_name(list, i));
            break;
        }
        rc = show_limits(ctx);
        if (rc == 0) rc = show_port(ctx);
        if (!first) first = ctx; /* kept open for the registration below */
        else sfv_close_device(ctx);
    }
    sfv_free_device_list(list);
    if (n == 0) {
        fprintf(stderr, "devices: no RDMA device found\n");
        rc = 1;
    }
    if (rc == 0 && first) rc = show_region(first);
    sfv_close_device(first);
    return rc;
}
