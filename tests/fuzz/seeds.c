/* seeds.c - writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<name>/: a few
   valid encodings (made by the library's own encoders) and one of each way to be invalid.
   `make fuzz-seeds` builds and runs it; the files it writes are in git, so it only needs to run
   again when a format changes. Run from the repository's root. */
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int fz_failed;

static void fz_write(const char *dir, const char *name, const uint8_t *p, size_t n) {
    char path[256];
    FILE *f;
    snprintf(path, sizeof path, "tests/fuzz/corpus/%s", dir);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) { perror(path); fz_failed = 1; return; }
    snprintf(path, sizeof path, "tests/fuzz/corpus/%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) { perror(path); fz_failed = 1; }
}

/* An endpoint as a channel gives it: version 2 with a GID, or version 1 without one. */
static sfv_endpoint fz_endpoint(int v2, int gid) {
    sfv_endpoint ep;
    int i;
    memset(&ep, 0, sizeof ep);
    ep.qpn = 0x000123;
    ep.lid = 7;
    ep.psn = 0xABCDEF;
    ep.mtu = 1024;
    ep.rd_atomic = v2 ? 16 : 0;
    ep.has_gid = gid != 0;
    if (gid) {
        ep.gid.raw[10] = 0xFF, ep.gid.raw[11] = 0xFF;
        for (i = 12; i < 16; i++) ep.gid.raw[i] = (uint8_t)(10 + i);
    }
    return ep;
}

static void fz_endpoint_seeds(void) {
    const char *d = "endpoint_decode";
    uint8_t b[SFV_ENDPOINT_ENCODED_SIZE + 8];
    sfv_endpoint ep = fz_endpoint(1, 1);

    sfv_endpoint_encode(&ep, b);
    fz_write(d, "valid_v2_gid", b, SFV_ENDPOINT_ENCODED_SIZE);
    memset(b + SFV_ENDPOINT_ENCODED_SIZE, 0x5A, 8);
    fz_write(d, "valid_v2_gid_trailing", b, sizeof b);
    fz_write(d, "short", b, SFV_ENDPOINT_ENCODED_SIZE - 1);
    b[3] = 3;
    fz_write(d, "bad_flags", b, SFV_ENDPOINT_ENCODED_SIZE);
    sfv_endpoint_encode(&ep, b);
    b[12] = 0;
    fz_write(d, "bad_v2_read_depth_0", b, SFV_ENDPOINT_ENCODED_SIZE);
    sfv_endpoint_encode(&ep, b);
    b[2] = 3;
    fz_write(d, "bad_version", b, SFV_ENDPOINT_ENCODED_SIZE);
    sfv_endpoint_encode(&ep, b);
    b[1] = 'R';
    fz_write(d, "bad_magic", b, SFV_ENDPOINT_ENCODED_SIZE);
    sfv_endpoint_encode(&ep, b);
    b[4] = 1;
    fz_write(d, "bad_qpn_25_bits", b, SFV_ENDPOINT_ENCODED_SIZE);
    sfv_endpoint_encode(&ep, b);
    memset(b + 4, 0, 4);
    fz_write(d, "bad_qpn_0", b, SFV_ENDPOINT_ENCODED_SIZE);
    sfv_endpoint_encode(&ep, b);
    b[10] = 0x04, b[11] = 0x01; /* 1025 */
    fz_write(d, "bad_mtu", b, SFV_ENDPOINT_ENCODED_SIZE);

    ep = fz_endpoint(0, 0);
    sfv_endpoint_encode(&ep, b);
    fz_write(d, "valid_v1", b, SFV_ENDPOINT_ENCODED_SIZE);
    b[12] = 1;
    fz_write(d, "bad_v1_read_depth", b, SFV_ENDPOINT_ENCODED_SIZE);
    sfv_endpoint_encode(&ep, b);
    b[31] = 1;
    fz_write(d, "bad_gid_without_flag", b, SFV_ENDPOINT_ENCODED_SIZE);
}

static void fz_remote_mr_seeds(void) {
    const char *d = "remote_mr_decode";
    uint8_t b[SFV_REMOTE_MR_ENCODED_SIZE + 40];
    size_t i;

    /* The bytes after the 24 are offsets and lengths for the region arithmetic. */
    for (i = SFV_REMOTE_MR_ENCODED_SIZE; i < sizeof b; i++) b[i] = (uint8_t)(i * 7);
    sfv_remote_mr_encode(sfv_remote_mr_make(0x7f0000001000ull, 4096, 0x1234), b);
    fz_write(d, "valid", b, SFV_REMOTE_MR_ENCODED_SIZE);
    fz_write(d, "valid_offsets", b, sizeof b);
    fz_write(d, "short", b, SFV_REMOTE_MR_ENCODED_SIZE - 1);
    b[3] = 1;
    fz_write(d, "bad_reserved", b, SFV_REMOTE_MR_ENCODED_SIZE);
    b[3] = 0, b[2] = 2;
    fz_write(d, "bad_version", b, SFV_REMOTE_MR_ENCODED_SIZE);
    b[2] = 1, b[0] = 's';
    fz_write(d, "bad_magic", b, SFV_REMOTE_MR_ENCODED_SIZE);
    sfv_remote_mr_encode(sfv_remote_mr_make(0x1000, 0, 0), b);
    fz_write(d, "valid_empty", b, sizeof b);
    sfv_remote_mr_encode(sfv_remote_mr_make(UINT64_MAX - 4095, 4096, 1), b); /* ends at 2^64 */
    fz_write(d, "valid_top", b, sizeof b);
    sfv_remote_mr_encode(sfv_remote_mr_make(UINT64_MAX - 4095, 4097, 1), b);
    fz_write(d, "bad_wraps", b, SFV_REMOTE_MR_ENCODED_SIZE);
}

/* Values for fuzz_roundtrip, in the order its fz_take calls read them. */
static size_t fz_put(uint8_t *b, size_t n, uint64_t v, int bytes) {
    sfv__put_be(b + n, v, bytes);
    return n + (size_t)bytes;
}
static void fz_roundtrip_seed(const char *name, unsigned sel, uint32_t qpn, uint32_t psn, uint32_t mtu, int gid, uint64_t addr, uint64_t length) {
    uint8_t b[128];
    size_t n = 0;
    int i;
    n = fz_put(b, n, qpn - 1, 4), n = fz_put(b, n, sel, 1), n = fz_put(b, n, qpn, 4);     /* qpn */
    n = fz_put(b, n, 7, 2);                                                                 /* lid */
    n = fz_put(b, n, psn, 4), n = fz_put(b, n, sel, 1), n = fz_put(b, n, psn, 4);          /* psn */
    n = fz_put(b, n, mtu == 256 ? 0 : mtu == 512 ? 1 : mtu == 1024 ? 2 : mtu == 2048 ? 3 : 4, 1);
    n = fz_put(b, n, sel, 1), n = fz_put(b, n, mtu, 4);                                    /* mtu */
    n = fz_put(b, n, 16, 1);                                                                /* read depth */
    n = fz_put(b, n, gid ? 1 : 0, 1);                                                       /* has_gid */
    for (i = 0; gid && i < 16; i++) n = fz_put(b, n, (uint64_t)(i == 10 || i == 11 ? 0xFF : i), 1);
    n = fz_put(b, n, addr, 8), n = fz_put(b, n, length, 8), n = fz_put(b, n, 0x1234, 4);    /* region */
    fz_write("roundtrip", name, b, n);
}
static void fz_roundtrip_seeds(void) {
    fz_roundtrip_seed("in_range", 0, 0x123, 0xABCDEF, 1024, 1, 0x7f0000001000ull, 4096);
    fz_roundtrip_seed("in_range_no_gid", 0, 0xFFFFFF, 0, 4096, 0, UINT64_MAX - 4095, 4096);
    fz_roundtrip_seed("raw_out_of_range", 255, 0x1000000, 0xFF000001, 65536 + 512, 0, UINT64_MAX, 2);
}

/* fuzz_node_endpoint's input: world size, rank, the blob's place, then the blob. */
static void fz_node_seed(const char *name, size_t world, size_t rank, size_t from, int flaw) {
    static uint8_t b[3 + 16 + 4 * (SFV_ENDPOINT_ENCODED_SIZE + SFV_REMOTE_MR_ENCODED_SIZE)];
    const size_t each = SFV_NODE_ENDPOINT_SIZE(world);
    uint8_t *blob = b + 3;
    sfv_endpoint ep = fz_endpoint(1, 1);
    size_t d;
    b[0] = (uint8_t)(world - 1), b[1] = (uint8_t)rank, b[2] = (uint8_t)from;
    memset(blob, 0, 16);
    blob[0] = 'S', blob[1] = 'N', blob[2] = 1;
    sfv__put_be(blob + 4, from, 4);
    sfv__put_be(blob + 8, world, 4);
    blob[15] = SFV_BARRIER_BINARY_TREE; /* the barrier kind: fuzz_node_endpoint's node's */
    for (d = 0; d < world; d++) {
        uint8_t *e = blob + 16 + d * (SFV_ENDPOINT_ENCODED_SIZE + SFV_REMOTE_MR_ENCODED_SIZE);
        ep.qpn = (uint32_t)(0x100 + d);
        sfv_endpoint_encode(&ep, e);
        sfv_remote_mr_encode(sfv_remote_mr_make(0x7f0000002000ull, flaw == 4 ? world * 8 - 1 : world * 8, 0x55), e + SFV_ENDPOINT_ENCODED_SIZE);
    }
    if (flaw == 1) blob[1] = 'X';
    if (flaw == 2) blob[7] ^= 1;     /* another rank */
    if (flaw == 3) blob[11] ^= 2;    /* another world size */
    if (flaw == 5) blob[12] = 1;     /* a reserved byte */
    if (flaw == 7) blob[15] = SFV_BARRIER_DISSEMINATION; /* another barrier kind */
    if (flaw == 6) blob[16 + rank * (SFV_ENDPOINT_ENCODED_SIZE + SFV_REMOTE_MR_ENCODED_SIZE) + SFV_ENDPOINT_ENCODED_SIZE] = 'X';
    fz_write("node_endpoint", name, b, 3 + each);
}

int main(void) {
    if (mkdir("tests/fuzz/corpus", 0755) != 0 && errno != EEXIST) { perror("tests/fuzz/corpus"); return 1; }
    fz_endpoint_seeds();
    fz_remote_mr_seeds();
    fz_roundtrip_seeds();
    fz_node_seed("valid_world1", 1, 0, 0, 0);
    fz_node_seed("valid_world3_rank2_from1", 3, 2, 1, 0);
    fz_node_seed("bad_magic", 2, 0, 1, 1);
    fz_node_seed("bad_rank", 2, 1, 0, 2);
    fz_node_seed("bad_world", 2, 0, 0, 3);
    fz_node_seed("bad_barrier_small", 2, 1, 1, 4);
    fz_node_seed("bad_reserved", 2, 0, 1, 5);
    fz_node_seed("bad_entry_region", 2, 1, 0, 6);
    fz_node_seed("bad_barrier_kind", 2, 1, 0, 7);
    return fz_failed;
}
