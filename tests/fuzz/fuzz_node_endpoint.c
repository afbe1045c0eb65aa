/* fuzz_node_endpoint.c - the node endpoint blob ("SN", sfv_node_endpoint's output), as
   sfv_node_handshake reads one rank's blob: the check of its header and the decoding of the
   entry meant for this rank.
   No device: sfv_node_handshake itself needs a node whose channels exist, so this target calls
   the internal sfv__node_entry (the implementation is in this file), which reads nothing of the
   node but its rank and world size. It follows that function: if it is renamed or split, this
   file follows.
   Input: byte 0 picks the world size (1 .. 16, or 4096 = the most ranks a node takes), byte 1
   this node's rank, byte 2 the place r the blob came from; the rest is the blob, cut or padded
   with zeros to SFV_NODE_ENDPOINT_SIZE(world), in a buffer of exactly that size.
   Properties: the blob is taken exactly when its header is "SN", version 1, 0, rank r, this
   world size, 3 zero bytes and this node's barrier kind (BINARY_TREE here, the default's: a
   node's is never DEFAULT, which sfv_create_node makes BINARY_TREE), and the entry for this rank holds a valid endpoint and a remote
   region that does not wrap and has room for the barrier (8 bytes a rank); then the decoded
   endpoint and region are in range and re-encode to the entry's bytes. A refusal is
   SFV_ERR_INVALID and is recorded in sfv_last_error().
   Build and run: make fuzz (or make check-fuzz). */
#define SAFEVERBS_IMPLEMENTATION
#include "safeverbs.h"
#include "fz.h"

#define FZ_ENTRY (SFV_ENDPOINT_ENCODED_SIZE + SFV_REMOTE_MR_ENCODED_SIZE)

static int fz_blob_valid(const uint8_t *b, size_t r, size_t rank, size_t world, sfv_barrier_kind kind) {
    const uint8_t *e = b + 16 + rank * FZ_ENTRY;
    if (b[0] != 'S' || b[1] != 'N' || b[2] != 1 || b[3] != 0) return 0;
    if (fz_be(b + 4, 4) != r || fz_be(b + 8, 4) != world || !fz_zero(b + 12, 3) || b[15] != kind) return 0;
    if (!fz_endpoint_valid(e, SFV_ENDPOINT_ENCODED_SIZE)) return 0;
    if (!fz_remote_mr_valid(e + SFV_ENDPOINT_ENCODED_SIZE, SFV_REMOTE_MR_ENCODED_SIZE)) return 0;
    return fz_be(e + SFV_ENDPOINT_ENCODED_SIZE + 12, 8) >= world * sizeof(uint64_t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t world, rank, r, each, n;
    uint8_t *blob;
    uint8_t bytes[FZ_ENTRY];
    const uint8_t *e;
    sfv_node nd;
    sfv_endpoint ep;
    sfv_remote_mr barrier;
    fz_error before;
    sfv_result res;

    if (size < 3) return 0;
    world = data[0] == 255 ? 4096 : 1 + data[0] % 16u;
    rank = data[1] % world;
    r = data[2] % world;
    data += 3, size -= 3;
    each = SFV_NODE_ENDPOINT_SIZE(world);
    blob = (uint8_t *)calloc(1, each);
    FZ_CHECK(blob != NULL);
    n = size < each ? size : each;
    if (n) memcpy(blob, data, n);

    memset(&nd, 0, sizeof nd);
    nd.rank = rank;
    nd.world = world;
    nd.kind = SFV_BARRIER_BINARY_TREE;
    fz_prime_error();
    before = fz_error_now();
    memset(&ep, 0xA5, sizeof ep);
    memset(&barrier, 0xA5, sizeof barrier);
    res = sfv__node_entry(&nd, blob, r, &ep, &barrier);
    FZ_CHECK(res == SFV_OK || res == SFV_ERR_INVALID);
    FZ_CHECK((res == SFV_OK) == fz_blob_valid(blob, r, rank, world, nd.kind));
    if (res != SFV_OK) {
        fz_check_failure(res);
    } else {
        fz_check_error_kept(&before);
        fz_check_endpoint_fields(&ep);
        FZ_CHECK(fz_no_wrap(barrier.addr, barrier.length) && barrier.length >= world * sizeof(uint64_t));
        e = blob + 16 + rank * FZ_ENTRY;
        sfv_endpoint_encode(&ep, bytes);
        sfv_remote_mr_encode(barrier, bytes + SFV_ENDPOINT_ENCODED_SIZE);
        FZ_CHECK(memcmp(bytes, e, FZ_ENTRY) == 0);
    }
    free(blob);
    return 0;
}
